/* Block cost tables (embedding, one layer, head) and the per-stage cost table a plan runs on:
 * times are the blocks' sums for the stage's blocks on each device kind, memory comes from the
 * model config as the executor allocates it (mem.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pass/pipefisher.h"
#include "engine/plan/plan.h"
#include "engine/sched/gen.h"
#include "engine/train/freeze.h"

struct frozen_rule {
	const clp_model_config *c;
	const char *freeze;
};

static int frozen(const void *user, const clp_tensor_desc *d)
{
	const struct frozen_rule *r = user;

	return clp_train_frozen(r->c, r->freeze, d);
}

clp_status clp_plan_stage_mem(const clp_plan_model *m, const clp_model_config *c, int first,
			      int last, int split, int recompute, clp_model_mem *out)
{
	struct frozen_rule r = {c, m->freeze};
	int any = c->lora_r > 0 || m->freeze[0];
	clp_param_table t;
	const clp_param_table *tp = &t;

	CLP_TRY(clp_model_stage_mem_frozen(c, first, last, m->batch, m->seq, split, recompute,
					   m->precision, any ? frozen : NULL, &r, out));
	if (!m->opt_own_bytes)
		return CLP_OK;
	CLP_TRY(clp_param_table_build(c, first, last, &t));
	out->own_bytes = m->opt_own_bytes(&tp, 1);
	out->opt_bytes += out->own_bytes;
	clp_param_table_free(&t);
	return CLP_OK;
}

static const char *const block_names[CLP_PLAN_NBLOCKS] = {"embedding", "layer", "head"};

const char *clp_plan_block_name(int b)
{
	return b >= 0 && b < CLP_PLAN_NBLOCKS ? block_names[b] : "?";
}

clp_status clp_plan_blocks_check(const clp_costs *c, const char *origin)
{
	if (c->nstages != CLP_PLAN_NBLOCKS)
		return clp_error(CLP_ERR_FORMAT, "%s: a block table has 3 entries (embedding, "
				 "layer, head), this one %d: write one with clpipe bench --model",
				 origin, c->nstages);
	for (int b = 0; b < CLP_PLAN_NBLOCKS; b++)
		if (strcmp(c->stages[b].blocks, block_names[b]))
			return clp_error(CLP_ERR_FORMAT, "%s: stages[%d].blocks: expected \"%s\", "
					 "found \"%s\" (a block table names its entries embedding, "
					 "layer, head)", origin, b, block_names[b], c->stages[b].blocks);
	return CLP_OK;
}

/* Room for nk device kinds, every time NAN (not measured). */
static clp_status add_kinds(clp_costs *c, int nk)
{
	size_t n = (size_t)nk * (size_t)c->nstages * CLP_COST_NTIMES;

	c->nkinds = 0;
	if (nk == 0)
		return CLP_OK;
	c->kinds = calloc((size_t)nk, sizeof(*c->kinds));
	c->kind_t = malloc(n * sizeof(double));
	if (!c->kinds || !c->kind_t)
		return clp_error(CLP_ERR_NOMEM, "cost table: out of host memory");
	for (size_t i = 0; i < n; i++)
		c->kind_t[i] = NAN;
	c->nkinds = nk;
	return CLP_OK;
}

static double *kind_times(const clp_costs *c, int k, int s)
{
	return &c->kind_t[((size_t)k * (size_t)c->nstages + (size_t)s) * CLP_COST_NTIMES];
}

clp_status clp_plan_blocks_from_profiles(const char *const *csv, int n, int batch,
					 clp_costs **out)
{
	clp_costs *c = NULL, *one = NULL;
	clp_profile_opts po = {.nstages = 1, .nlayers = 1, .batch = batch};
	clp_status st;

	*out = NULL;
	if (n < 1)
		return clp_error(CLP_ERR_INVALID, "block table: no profile given");
	CLP_TRY(clp_costs_create(CLP_PLAN_NBLOCKS, &c));
	st = add_kinds(c, n - 1);
	for (int i = 0; st == CLP_OK && i < n; i++) {
		st = clp_costs_from_profile(csv[i], &po, &one);
		if (st != CLP_OK)
			break;
		if (i == 0) {
			c->stages[CLP_PLAN_LAYER] = one->stages[0];
			snprintf(c->device_kind, sizeof(c->device_kind), "%s", one->device_kind);
			c->micro_batch_size = batch;
			c->kfac_nfactors = one->kfac_nfactors;
			memcpy(c->kfac_share, one->kfac_share, sizeof(c->kfac_share));
			snprintf(c->source, sizeof(c->source), "PipeFisher profiles, bs %d: %s%s",
				 batch, one->device_kind, n > 1 ? " (+ other kinds)" : "");
		} else {
			double *t = kind_times(c, i - 1, CLP_PLAN_LAYER);

			snprintf(c->kinds[i - 1], CLP_NAME_MAX, "%s", one->device_kind);
			memcpy(t, one->stages[0].t, sizeof(one->stages[0].t));
			for (int b = 0; b < CLP_PLAN_NBLOCKS; b += 2)
				for (int k = 0; k < CLP_COST_NTIMES; k++)
					kind_times(c, i - 1, b)[k] = 0;
		}
		clp_costs_free(one);
		one = NULL;
	}
	for (int b = 0; st == CLP_OK && b < CLP_PLAN_NBLOCKS; b++)
		snprintf(c->stages[b].blocks, sizeof(c->stages[b].blocks), "%s", block_names[b]);
	if (st != CLP_OK) {
		clp_costs_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}

/* Time t of a stage made of the given blocks on kind k (-1: the table's kind); NAN if a block
 * lacks it on that kind. Recomputation reruns the layers' forward in the backward (B). */
static double stage_time(const clp_costs *b, int k, int t, int embed, int nl, int head,
			 int recompute, const clp_plan_model *m, int nmb, double opt_work)
{
	double v = 0;
	const int which[3] = {embed, nl, head};

#define BT(blk, tt) (k < 0 ? b->stages[blk].t[tt] : kind_times(b, k, blk)[tt])
	for (int blk = 0; blk < CLP_PLAN_NBLOCKS; blk++)
		if (which[blk])
			v += which[blk] * BT(blk, t);
	if (recompute && nl && (t == CLP_COST_BWD || t == CLP_COST_BWD_B))
		v += nl * BT(CLP_PLAN_LAYER, CLP_COST_FWD);
	if (opt_work > 0 && nl && t == CLP_COST_OPT) /* Muon's Newton-Schulz */
		v += nl * opt_work *
		     (BT(CLP_PLAN_LAYER, CLP_COST_FWD) + BT(CLP_PLAN_LAYER, CLP_COST_BWD));
	if (m && nl && t == CLP_COST_OPT) /* K-FAC's serial cycle rule, per step on average */
		v += nl * (BT(CLP_PLAN_LAYER, CLP_COST_KFAC_PRECOND) +
			   (nmb * (BT(CLP_PLAN_LAYER, CLP_COST_KFAC_CURV_A) +
				   BT(CLP_PLAN_LAYER, CLP_COST_KFAC_CURV_B)) +
			    BT(CLP_PLAN_LAYER, CLP_COST_KFAC_INV)) / m->kfac_interval);
#undef BT
	return v;
}

clp_status clp_plan_costs(const clp_costs *blocks, const clp_plan_model *m, const clp_plan *p,
			  const clp_sched *s, clp_costs **out)
{
	clp_plan_model mm = *m;
	/* Shampoo's roots or the delayed Muon's Newton-Schulz as the pass's items, not OPT time */
	int spf = (m->shampoo || m->soap || m->muon_delay) && p->pipefisher > 0;
	clp_status st;

	if (spf)
		mm.opt_layer_work = 0;
	CLP_TRY(clp_plan_stage_costs(blocks, &mm, s, p->kind == CLP_SCHED_ZBH1, p->recompute,
				     m->kfac && !p->pipefisher, out));
	if (!spf)
		return CLP_OK;
	st = clp_pf_work_costs(*out,
			       m->shampoo ? CLP_PF_WORK_SHAMPOO
			       : m->soap  ? CLP_PF_WORK_SOAP
					  : CLP_PF_WORK_MUON_DELAY,
			       m->cfg.d_model, m->cfg.d_ff, (double)(m->batch * m->seq),
			       m->shampoo_iters, m->muon_ns_steps,
			       m->shampoo && p->pf_phases ? m->shampoo_iters : 0);
	if (st != CLP_OK) {
		clp_costs_free(*out);
		*out = NULL;
		return st;
	}
	/* the delayed directions live in the matrices' AdamW second moments (exec_muon.c), which
	 * opt_bytes counts: no memory of their own (kfac_bytes sizes only a split's exchange,
	 * which the plan does not run) */
	for (int i = 0; m->muon_delay && i < (*out)->nstages; i++)
		(*out)->stages[i].kfac_bytes = 0;
	return CLP_OK;
}

clp_status clp_plan_stage_costs(const clp_costs *blocks, const clp_plan_model *m,
				const clp_sched *s, int split, int recompute, int kfac_serial,
				clp_costs **out)
{
	const int L = m->cfg.n_layer;
	clp_costs *c = NULL;
	clp_status st;

	*out = NULL;
	CLP_TRY(clp_plan_blocks_check(blocks, "block table"));
	CLP_TRY(clp_costs_create(s->nstages, &c));
	st = add_kinds(c, blocks->nkinds);
	snprintf(c->device_kind, sizeof(c->device_kind), "%s", blocks->device_kind);
	snprintf(c->source, sizeof(c->source), "plan: %.200s", blocks->source);
	c->micro_batch_size = (int)m->batch;
	c->precision = m->precision;
	c->kfac_nfactors = blocks->kfac_nfactors;
	memcpy(c->kfac_share, blocks->kfac_share, sizeof(c->kfac_share));
	for (int k = 0; st == CLP_OK && k < blocks->nkinds; k++)
		memcpy(c->kinds[k], blocks->kinds[k], CLP_NAME_MAX);
	for (int i = 0; st == CLP_OK && i < s->nstages; i++) {
		const clp_stage_info *si = &s->stages[i];
		clp_stage_cost *sc = &c->stages[i];
		int first, last;
		clp_model_mem mem;

		clp_stage_info_blocks(si, L, &first, &last);
		if (si->nlayers == 0 && !si->embed && !si->head)
			first = last = si->first_layer + 1; /* never generated; keeps blocks valid */
		for (int k = -1; k < blocks->nkinds; k++)
			for (int t = 0; t < CLP_COST_NTIMES; t++) {
				double v = stage_time(blocks, k, t, si->embed, si->nlayers, si->head,
						      recompute, kfac_serial ? m : NULL, s->nmb,
						      m->opt_layer_work);

				if (k < 0)
					sc->t[t] = isnan(v) ? 0 : v;
				else
					kind_times(c, k, i)[t] = v;
			}
		st = clp_plan_stage_mem(m, &m->cfg, first, last, split, recompute, &mem);
		if (st != CLP_OK)
			break;
		sc->param_bytes = mem.param_bytes;
		sc->frozen_bytes = mem.param_bytes - mem.grad_bytes;
		sc->opt_bytes = mem.opt_bytes;
		sc->act_bytes = sc->act_w_bytes = mem.act_bytes; /* a slot lives until its W */
		sc->out_bytes = mem.out_bytes;
		sc->work_bytes = mem.work_bytes + (kfac_serial ? mem.kfac_bytes : 0);
		sc->kfac_bytes = kfac_serial ? 0 : mem.kfac_bytes;
		sc->nlayers = si->nlayers > 0 ? si->nlayers : 1;
		snprintf(sc->blocks, sizeof(sc->blocks), "%slayers %d..%d%s",
			 si->embed ? "embedding, " : "", si->first_layer,
			 si->first_layer + si->nlayers - 1, si->head ? ", head" : "");
	}
	if (st != CLP_OK) {
		clp_costs_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}

clp_status clp_plan_blocks_make(const clp_plan_model *m, const char *const *kinds,
				const double *t, int n, const int *fdim, int nf,
				const char *source, clp_costs **out)
{
	int L = m->cfg.n_layer;
	const int range[CLP_PLAN_NBLOCKS][2] = {{0, 0}, {1, 1}, {L + 1, L + 1}};
	size_t per = (size_t)CLP_PLAN_NBLOCKS * CLP_COST_NTIMES;
	clp_costs *c = NULL;
	clp_status st;

	*out = NULL;
	CLP_TRY(clp_costs_create(CLP_PLAN_NBLOCKS, &c));
	snprintf(c->device_kind, sizeof(c->device_kind), "%s", kinds[0]);
	snprintf(c->source, sizeof(c->source), "%s", source);
	c->micro_batch_size = (int)m->batch;
	c->precision = m->precision;
	st = add_kinds(c, n - 1);
	for (int blk = 0; st == CLP_OK && blk < CLP_PLAN_NBLOCKS; blk++) {
		clp_stage_cost *sc = &c->stages[blk];
		clp_model_mem mem;

		st = clp_plan_stage_mem(m, &m->cfg, range[blk][0], range[blk][1], 0, 0, &mem);
		if (st != CLP_OK)
			break;
		memcpy(sc->t, &t[(size_t)blk * CLP_COST_NTIMES], CLP_COST_NTIMES * sizeof(double));
		for (int k = 1; k < n; k++)
			memcpy(kind_times(c, k - 1, blk),
			       &t[(size_t)k * per + (size_t)blk * CLP_COST_NTIMES],
			       CLP_COST_NTIMES * sizeof(double));
		sc->act_bytes = sc->act_w_bytes = mem.act_bytes;
		sc->out_bytes = mem.out_bytes;
		sc->param_bytes = mem.param_bytes;
		sc->frozen_bytes = mem.param_bytes - mem.grad_bytes;
		sc->opt_bytes = mem.opt_bytes;
		sc->work_bytes = mem.work_bytes;
		sc->kfac_bytes = mem.kfac_bytes;
		snprintf(sc->blocks, sizeof(sc->blocks), "%s", clp_plan_block_name(blk));
	}
	for (int k = 1; st == CLP_OK && k < n; k++)
		snprintf(c->kinds[k - 1], CLP_NAME_MAX, "%s", kinds[k]);
	if (st == CLP_OK && nf > 0)
		st = clp_costs_set_kfac_factors(c, fdim, nf);
	if (st != CLP_OK) {
		clp_costs_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}
