/* Limits before work: before a session allocates anything on its device, the memory its stages
 * will take there (the planner's model of what a stage allocates, engine/model/stage_mem.c, held equal
 * to real stages by tests/plan/test_plan_mem.c), and the optimizer's own buffers (clp_optim_info.
 * own_bytes: Shampoo's statistics and roots, scratch; tests/plan/test_optim_mem.c) and the packed
 * GEMM's kept packs of the weights (clp_model_stage_pack_mem, within their cap; held equal to
 * the bytes the cache allocates by tests/model/test_stage_packs.c) are added up
 * and checked against the device's
 * memory, so a model that cannot fit is refused in milliseconds with the total, the device and
 * the setting to lower, instead of allocating gigabytes and failing inside the OpenCL driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/gemm.h"
#include "engine/model/stage.h"
#include "engine/model/stage_mem.h"
#include "engine/train/session_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define RESERVE 0.1 /* of the device's memory kept free, as the planner's mem_reserve */

/* MemAvailable of /proc/meminfo in bytes (0: unknown). A CPU device's memory is the host's:
 * PoCL reports a share of the installed memory, whatever other processes hold. */
static double host_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	double kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

typedef struct need {
	double param, grad, opt, act, work, kfac;
	double own; /* the optimizer's own buffers (clp_optim_info.own_bytes), in opt too */
	double packs; /* the GEMM's kept packs of the weights (cl/gemm.h), within their cap */
	double kept, transient; /* their sum over the stages, and the largest loss backward's */
	int slots;
} need;

static double total(const need *n)
{
	return n->param + n->grad + n->opt + n->act + n->work + n->kfac + n->packs;
}

/* s->frozen (sess_freeze) by name: the whole model's table gives each tensor's index. */
struct frozen_of {
	const clp_session *s;
	const clp_param_table *full;
};

static int frozen(const void *user, const clp_tensor_desc *d)
{
	const struct frozen_of *f = user;
	int i = clp_param_find(f->full, d->name);

	return i >= 0 && f->s->frozen[i];
}

static clp_status add_stage(clp_session *s, const clp_param_table *full, int first, int last,
			    int slots, int split, need *n)
{
	clp_model_mem pm;
	const clp_optim_info *o = s->optim;
	struct frozen_of f = {s, full};

	CLP_TRY(clp_model_stage_mem_frozen(&s->m, first, last, s->B, s->T, split,
					  s->mode == CLP_SESSION_TRAIN && s->cfg.train.recompute,
					  s->prec, s->frozen ? frozen : NULL, &f, &pm));
	n->param += (double)(pm.param_bytes + pm.copy_bytes);
	n->grad += (double)pm.grad_bytes; /* frozen tensors: none, nor optimizer state */
	n->opt += (double)(pm.grad_bytes / 4 * o->state_bytes); /* 4 bytes a parameter */
	n->act += (double)pm.act_bytes * slots;
	n->work += (double)pm.work_bytes;
	n->kfac += o->curvature && s->mode == CLP_SESSION_TRAIN ? (double)pm.kfac_bytes : 0;
	n->slots += slots;
	if (last == s->m.n_layer + 1) /* the loss's logits kept from its forward (cl/nn_xent.c) */
		n->work += (double)clp_nn_xent_kept_bytes(s->ctx, s->B * s->T, (size_t)s->m.vocab);
	{ /* the packed GEMM's kept packs of this stage's weights (one cache, one cap a device) */
		clp_model_pack_shape ps;
		int64_t kept, tr;

		CLP_TRY(clp_stage_pack_shape(s->ctx, &ps));
		CLP_TRY(clp_model_stage_pack_mem(&s->m, first, last, s->B, s->T,
						 s->mode == CLP_SESSION_TRAIN, &ps, &kept, &tr));
		n->kept += (double)kept;
		n->transient = (double)tr > n->transient ? (double)tr : n->transient;
		n->packs = n->kept + n->transient;
		if (n->packs > (double)clp_cl_gemm_keep_limit(s->ctx))
			n->packs = (double)clp_cl_gemm_keep_limit(s->ctx);
	}
	return CLP_OK;
}

/* The optimizer's own buffers on a rank whose local stages are st[0..k-1] (clp_optim_info.
 * own_bytes, on the tables the stages will build). */
static clp_status add_own(clp_session *s, const clp_sched *sched, const clp_exec_stage_need *st,
			  int k, need *n)
{
	const int L = s->m.n_layer;
	clp_param_table *tab = calloc((size_t)k + 1, sizeof(*tab));
	const clp_param_table **tabs = calloc((size_t)k + 1, sizeof(*tabs));
	clp_status e = tab && tabs ? CLP_OK : clp_error(CLP_ERR_NOMEM, "out of host memory");
	int built = 0;

	for (; e == CLP_OK && built < k; built++) {
		const clp_stage_info *si = &sched->stages[st[built].stage];

		e = clp_param_table_build(&s->m, si->embed ? 0 : si->first_layer + 1,
					  si->head ? L + 1 : si->first_layer + si->nlayers,
					  &tab[built]);
		tabs[built] = &tab[built];
	}
	if (e == CLP_OK)
		n->own = (double)s->optim->own_bytes(tabs, k);
	if (e == CLP_OK && s->optim->kind == CLP_OPTIM_SHAMPOO &&
	    (s->cfg.shampoo.stale || s->cfg.pipeline.pipefisher)) /* the next roots */
		n->own += (double)clp_exec_shampoo_next_bytes(tabs, k);
	if (e == CLP_OK && s->optim->kind == CLP_OPTIM_SOAP &&
	    (s->cfg.soap.stale || s->cfg.pipeline.pipefisher)) /* the next bases and perms */
		n->own += (double)clp_exec_soap_next_bytes(tabs, k);
	if (e == CLP_OK && s->optim->kind == CLP_OPTIM_SHAMPOO && s->cfg.pipeline.pipefisher &&
	    clp_exec_shampoo_sched_phases(sched)) /* the X of roots in phases */
		n->own += (double)clp_exec_shampoo_phase_bytes(tabs, k);
	n->opt += n->own;
	for (int i = 0; tab && i < built; i++)
		clp_param_table_free(&tab[i]);
	free(tab);
	free(tabs);
	return e;
}

/* The setting that most moves the largest part of the total. */
static void what_to_lower(const clp_session *s, const need *n, char *buf, size_t len)
{
	const clp_model_config *m = &s->m;
	double C = m->d_model, F = m->d_ff, V = m->vocab, L = m->n_layer;
	double state = n->param + n->grad + n->opt + n->kfac;

	if (n->own > n->param + n->grad + n->opt - n->own + n->kfac && n->own > n->act + n->work) {
		snprintf(buf, len, "%s's own optimizer state (%.2f GiB, growing with the square of "
			 "each weight matrix's sides) is the largest part: lower %s (%d), split the "
			 "model over more pipeline stages, or use optim.name = \"adamw\"",
			 s->optim->label, n->own / GIB, F > C ? "model.d_ff" : "model.d_model",
			 F > C ? m->d_ff : m->d_model);
		return;
	}
	if (n->act + n->work > state) {
		snprintf(buf, len, "lower train.batch (%zu), train.seq (%zu) or %s (%d)%s, or split "
			 "the model over more pipeline stages", s->B, s->T,
			 F > C ? "model.d_ff" : "model.d_model", F > C ? m->d_ff : m->d_model,
			 s->cfg.train.recompute ? "" : ", or set train.recompute = true");
		return;
	}
	if (V * C > L * (4 * C * C + 2 * C * F))
		snprintf(buf, len, "lower model.vocab (%d) or model.d_model (%d)", m->vocab,
			 m->d_model);
	else if (2 * C * F > 4 * C * C)
		snprintf(buf, len, "lower model.d_ff (%d), model.d_model (%d) or model.n_layer (%d), "
			 "or split the model over more pipeline stages", m->d_ff, m->d_model,
			 m->n_layer);
	else
		snprintf(buf, len, "lower model.d_model (%d) or model.n_layer (%d), or split the "
			 "model over more pipeline stages", m->d_model, m->n_layer);
}

clp_status sess_check_memory(clp_session *s)
{
	return sess_check_memory_at(s, s->sched, sess_rank(s));
}

clp_status sess_check_memory_at(clp_session *s, const clp_sched *sched, int rank)
{
	const clp_cl_devinfo *d = clp_cl_ctx_device(s->ctx);
	int L = s->m.n_layer;
	const char *where = "less the 10% the planner also keeps free";
	double usable;
	need n;
	char hint[320], own[96] = "";
	clp_param_table full = {0};

	memset(&n, 0, sizeof(n));
	if (s->frozen)
		CLP_TRY(clp_param_table_build(&s->m, 0, L + 1, &full));
	if (s->mode == CLP_SESSION_SAMPLE) {
		CLP_TRY(add_stage(s, &full, 0, L + 1, 1, 0, &n));
	} else {
		int cap = sched->ranks[rank].nops + 1, k;
		clp_exec_stage_need *st = calloc((size_t)cap, sizeof(*st));
		clp_status e = CLP_OK;

		if (!st) {
			clp_param_table_free(&full);
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		}
		k = clp_exec_rank_stages(sched, rank, st, cap);
		for (int i = 0; i < k && e == CLP_OK; i++) {
			const clp_stage_info *si = &sched->stages[st[i].stage];

			e = add_stage(s, &full, si->embed ? 0 : si->first_layer + 1,
				      si->head ? L + 1 : si->first_layer + si->nlayers, st[i].slots,
				      st[i].split, &n);
		}
		if (e == CLP_OK && s->mode == CLP_SESSION_TRAIN && s->optim->own_bytes)
			e = add_own(s, sched, st, k, &n);
		free(st);
		clp_param_table_free(&full);
		CLP_TRY(e);
	}
	if (!d || !d->global_mem)
		return CLP_OK;
	usable = (double)d->global_mem * (1 - RESERVE);
	if (d->unified_memory && host_available() > 0 && host_available() < usable) {
		usable = host_available();
		where = "host memory available now";
	}
	if (total(&n) <= usable)
		return CLP_OK;
	what_to_lower(s, &n, hint, sizeof(hint));
	if (n.own > 0)
		snprintf(own, sizeof(own), " (of which %s's own %.2f GiB)", s->optim->label,
			 n.own / GIB);
	return clp_error(CLP_ERR_NOMEM, "the model does not fit: rank %d needs %.2f GiB on its "
			 "device %s, which has %.2f GiB (%.2f GiB usable: %s): parameters %.2f GiB, "
			 "gradients %.2f GiB, "
			 "optimizer state %.2f GiB%s, activations %.2f GiB (%d micro-batch slot(s) of "
			 "%zu x %zu tokens), workspace %.2f GiB, the GEMM's kept weight packs %.2f GiB "
			 "(CLPIPE_GEMM_KEEP_PACKS=0 keeps none); %s",
			 rank, total(&n) / GIB, d->name, (double)d->global_mem / GIB,
			 usable / GIB, where,
			 n.param / GIB, n.grad / GIB, (n.opt + n.kfac) / GIB, own, n.act / GIB, n.slots,
			 s->B, s->T, n.work / GIB, n.packs / GIB, hint);
}
