/* PipeFisher in the training session (pipeline.pipefisher; docs/KFAC.md, "PipeFisher in clpipe
 * train"). At start-up the configured one-step schedule becomes a K-step cycle with the K-FAC
 * work in its bubbles: the cycle kept in the checkpoint being resumed, else a saved cycle
 * (pipeline.pipefisher_schedule), else the pass run on a cost table (pipeline.pipefisher_costs,
 * or times measured on every rank's device for the stages it holds and averaged over the job, so
 * every rank runs the pass on the same numbers and gets the same cycle). kfac.interval becomes
 * the cycle's K; checkpoints carry the cycle ("pipefisher.cycle") and are taken at cycle ends,
 * so timing noise never changes the maths of a resumed run. */
#include "engine/train/session_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/pass/scenario.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "cl/base/clock.h"
#include "cl/ops.h"
#include "engine/optim/stage_time.h"

#define PF_META "pipefisher.cycle"
#define PF_REPS 3 /* timed repetitions (the least counts), after one untimed */

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 33;
}

/* The times of local stage i of a scratch executor (its optimizer made with deferral, so the
 * factor items run from kept copies as in a PipeFisher cycle); the least of PF_REPS after one
 * untimed repetition. */
static clp_status measure_stage(clp_session *s, clp_exec *ex, int i, int split, double *best)
{
	clp_stage *st = clp_exec_stage(ex, i, NULL);
	clp_kfac_opt *k = clp_exec_kfac_opt(ex, i);
	size_t N = s->N;
	int32_t *tok = calloc(N, sizeof(int32_t)), *tg = calloc(N, sizeof(int32_t));
	int32_t *types = calloc(N, sizeof(int32_t));
	clp_stage_mb m = {.seed = 1, .tokens = tok, .types = types, .targets = tg};
	uint64_t x = 12345;
	clp_status r = CLP_OK;

	for (int t = 0; t < CLP_COST_NTIMES; t++)
		best[t] = 1e300;
	if (!tok || !tg || !types) {
		r = clp_error(CLP_ERR_NOMEM, "out of host memory measuring costs");
		goto free_ids;
	}
	for (size_t j = 0; j < N; j++) {
		tok[j] = (int32_t)(lcg(&x) % (uint64_t)s->m.vocab);
		tg[j] = (int32_t)(lcg(&x) % (uint64_t)s->m.vocab);
	}
	for (int rep = 0; rep <= PF_REPS; rep++) {
		clp_stage_times d;
		double t[CLP_COST_NTIMES];

		r = clp_stage_time(st, k, split, &m, (size_t)s->m.d_model, &x, &d);
		if (r != CLP_OK)
			break;
		t[CLP_COST_FWD] = d.fwd;
		t[CLP_COST_BWD] = d.bwd;
		t[CLP_COST_BWD_B] = d.bwd_b;
		t[CLP_COST_BWD_W] = d.bwd_w;
		t[CLP_COST_OPT] = d.opt;
		t[CLP_COST_KFAC_CURV_A] = d.kfac_a;
		t[CLP_COST_KFAC_CURV_B] = d.kfac_b;
		t[CLP_COST_KFAC_INV] = d.kfac_inv;
		t[CLP_COST_KFAC_PRECOND] = d.kfac_pre;
		for (int j = 0; rep > 0 && j < CLP_COST_NTIMES; j++)
			best[j] = t[j] < best[j] ? t[j] : best[j];
	}
free_ids:
	free(tok);
	free(tg);
	free(types);
	return r;
}

/* The delayed Muon's Newton-Schulz of local stage i's Muon matrices, every phase
 * (clp_muon_ns_phase, as its PipeFisher items run them), on random directions of each
 * matrix's shape in scratch buffers of their own: the least of PF_REPS after one untimed
 * repetition, summed over the matrices (the cost table's kfac_inv_s; the pass shares it by
 * the matrices' NS flops). */
static clp_status measure_ns(clp_session *s, clp_stage *st, double *ns_s)
{
	const clp_param_table *t = clp_stage_table(st);
	clp_cl_ctx *ctx = clp_stage_ctx(st);
	int steps = (int)s->cfg.muon.ns_steps, nph = clp_muon_phases(steps);
	size_t big = 1, sq = 1;
	cl_mem mem[6] = {0};
	float *h = NULL;
	uint64_t x = 777;
	clp_status r = CLP_OK;

	*ns_s = 0;
	for (int i = 0; i < t->ntensors; i++)
		if (clp_exec_muon_takes(&t->tensors[i])) {
			size_t a = (size_t)t->tensors[i].shape[0], b = (size_t)t->tensors[i].shape[1];
			size_t m = a < b ? a : b;

			big = a * b > big ? a * b : big;
			sq = m * m > sq ? m * m : sq;
		}
	{
		size_t n[6] = {big, big, sq, sq, 1, big};

		for (int i = 0; r == CLP_OK && i < 6; i++)
			r = clp_cl_buffer(ctx, n[i] * sizeof(float), "muon NS cost", &mem[i]);
	}
	if (r == CLP_OK && !(h = malloc(big * sizeof(float))))
		r = clp_error(CLP_ERR_NOMEM, "out of host memory measuring costs");
	for (int i = 0; r == CLP_OK && i < t->ntensors; i++) {
		size_t a, b;
		clp_muon_work w = {clp_buf_at(mem[0], 0), clp_buf_at(mem[1], 0),
				   clp_buf_at(mem[2], 0), clp_buf_at(mem[3], 0),
				   clp_buf_at(mem[4], 0)};
		double best = 1e300;

		if (!clp_exec_muon_takes(&t->tensors[i]))
			continue;
		a = (size_t)t->tensors[i].shape[0], b = (size_t)t->tensors[i].shape[1];
		for (int rep = 0; r == CLP_OK && rep <= PF_REPS; rep++) {
			double t0;

			for (size_t j = 0; j < a * b; j++)
				h[j] = (float)(lcg(&x) % 2001) / 1000.0f - 1.0f;
			r = clp_cl_write(ctx, mem[5], 0, a * b * sizeof(float), h);
			if (r == CLP_OK)
				r = clp_cl_finish(ctx);
			t0 = clp_now();
			for (int p = 0; r == CLP_OK && p < nph; p++)
				r = clp_muon_ns_phase(ctx, clp_buf_at(mem[5], 0), a, b, steps, p, &w);
			if (r == CLP_OK)
				r = clp_cl_finish(ctx);
			if (r == CLP_OK && rep > 0 && clp_now() - t0 < best)
				best = clp_now() - t0;
		}
		if (r == CLP_OK)
			*ns_s += best;
	}
	free(h);
	for (int i = 0; i < 6; i++)
		if (mem[i])
			clReleaseMemObject(mem[i]);
	return r;
}

/* SOAP's (soap) or Shampoo's work of stage st's matrices (clp_exec_muon_takes), as the
 * executor runs it (engine/exec/exec_shampoo.c), on random gradients of each matrix's shape in
 * scratch buffers of their own: *pre the per-step update of the matrices (the statistics and the
 * projections or preconditioning: clp_soap_update or clp_shampoo_update without a refresh), *inv
 * the refresh of both sides (clp_soap_basis_next each, or the inverse 4th root each and its copy
 * into the next set); each the least of PF_REPS after one untimed repetition, summed over the
 * matrices (the cost table's kfac_precond_s and kfac_inv_s; the pass shares kfac_inv_s by the
 * sides' flops). The state starts as the executor's: SOAP's statistics at 0 and a first step
 * (t = 1, soap.init_iters rounds of the refresh from Q = I) untimed; Shampoo's at
 * shampoo.eps I and a first step with its roots, untimed. */
enum { SW_P, SW_M, SW_V, SW_G, SW_L, SW_R, SW_QL, SW_QR, SW_NEXT, SW_PERM, SW_W, SW_N = SW_W + 9 };

static clp_status measure_sides(clp_session *s, clp_stage *st, int soap, double *inv,
				double *pre)
{
	const clp_param_table *t = clp_stage_table(st);
	clp_cl_ctx *ctx = clp_stage_ctx(st);
	const clp_train_config *c = &s->cfg;
	size_t big = 1, dd = 1, dmax = 1, n[SW_N], hn;
	cl_mem mem[SW_N] = {0};
	clp_soap_work sw;
	clp_shampoo_work hw;
	float *h = NULL;
	uint64_t x = 4242;
	clp_status r = CLP_OK;

	*inv = *pre = 0;
	for (int i = 0; i < t->ntensors; i++)
		if (clp_exec_muon_takes(&t->tensors[i])) {
			size_t a = (size_t)t->tensors[i].shape[0], b = (size_t)t->tensors[i].shape[1];
			size_t d = a > b ? a : b;

			big = a * b > big ? a * b : big;
			dmax = d > dmax ? d : dmax;
		}
	dd = dmax * dmax;
	n[SW_P] = n[SW_M] = n[SW_V] = n[SW_G] = big;
	n[SW_L] = n[SW_R] = n[SW_QL] = n[SW_QR] = n[SW_NEXT] = dd;
	n[SW_PERM] = dmax;
	if (soap) { /* clp_soap_work: x, a, b, r[0..2], est, perm, qr */
		clp_soap_work_sizes(dmax, dmax, &n[SW_W]);
		n[SW_W] = n[SW_W + 1] = n[SW_W + 2] = big;
	} else { /* clp_shampoo_work: x, u, r[0..5], nrm */
		n[SW_W] = n[SW_W + 1] = big;
		for (int j = 2; j < 8; j++)
			n[SW_W + j] = dd;
		n[SW_W + 8] = 2;
	}
	for (int j = 0; r == CLP_OK && j < SW_N; j++)
		r = clp_cl_buffer(ctx, n[j] * sizeof(float), soap ? "soap cost" : "shampoo cost",
				  &mem[j]);
	hn = big > dd ? big : dd;
	if (r == CLP_OK && !(h = malloc(hn * sizeof(float))))
		r = clp_error(CLP_ERR_NOMEM, "out of host memory measuring costs");
#define W(j) clp_buf_at(mem[SW_W + (j)], 0)
	sw = (clp_soap_work){W(0), W(1), W(2), {W(3), W(4), W(5)}, W(6), W(7), W(8)};
	hw = (clp_shampoo_work){W(0), W(1), {W(2), W(3), W(4), W(5), W(6), W(7)}, W(8)};
#undef W
	for (int i = 0; r == CLP_OK && i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];
		size_t a, b;
		double bi = 1e300, bp = 1e300;
		clp_buf B[SW_W];
		clp_buf none = {0};

		if (!clp_exec_muon_takes(d))
			continue;
		a = (size_t)d->shape[0], b = (size_t)d->shape[1];
		for (int j = 0; j < SW_W; j++)
			B[j] = clp_buf_at(mem[j], 0);
		/* the state as the executor starts it: zero moments, statistics 0 (SOAP) or eps I */
		memset(h, 0, hn * sizeof(float));
		for (int j = SW_M; r == CLP_OK && j <= SW_V; j++)
			r = clp_cl_write(ctx, mem[j], 0, a * b * sizeof(float), h);
		for (int side = 0; r == CLP_OK && side < 2; side++) {
			size_t e = side ? b : a;

			for (size_t q = 0; !soap && q < e; q++)
				h[q * e + q] = (float)c->shampoo.eps;
			r = clp_cl_write(ctx, mem[SW_L + side], 0, e * e * sizeof(float), h);
			memset(h, 0, e * e * sizeof(float));
		}
		for (size_t j = 0; j < a * b; j++)
			h[j] = (float)(lcg(&x) % 2001) / 1000.0f - 1.0f;
		if (r == CLP_OK)
			r = clp_cl_write(ctx, mem[SW_P], 0, a * b * sizeof(float), h);
		for (int rep = -1; r == CLP_OK && rep <= PF_REPS; rep++) {
			clp_soap_hp sh = {
				.lr = 1e-3f, .beta1 = (float)c->soap.beta1, .beta2 = (float)c->soap.beta2,
				.shampoo_beta = (float)(c->soap.shampoo_beta >= 0 ? c->soap.shampoo_beta
										   : c->soap.beta2),
				.eps = (float)c->soap.eps, .t = rep + 2, .correct_bias =
				c->soap.correct_bias, .init_iters = (int)c->soap.init_iters};
			clp_shampoo_hp hh = {
				.lr = 1e-3f, .momentum = (float)c->shampoo.momentum, .first = rep < 0,
				.refresh = rep < 0, .iters = (int)c->shampoo.iters,
				.graft = c->shampoo.graft, .beta2 = 0.999f, .eps = 1e-8f, .t = rep + 2,
				.stat_beta = (float)c->shampoo.beta2};
			double t0, t1, t2;

			for (size_t j = 0; j < a * b; j++)
				h[j] = (float)(lcg(&x) % 2001) / 1000.0f - 1.0f;
			r = clp_cl_write(ctx, mem[SW_G], 0, a * b * sizeof(float), h);
			if (r == CLP_OK)
				r = clp_cl_finish(ctx);
			t0 = clp_now();
			if (r == CLP_OK && soap)
				r = clp_soap_update(ctx, B[SW_P], B[SW_M], B[SW_V], B[SW_G], B[SW_L],
						    B[SW_R], B[SW_QL], B[SW_QR], a, b, &sh, none, 1.0f,
						    &sw);
			else if (r == CLP_OK)
				r = clp_shampoo_update(ctx, B[SW_P], B[SW_M], B[SW_V], B[SW_G], B[SW_L],
						       B[SW_R], B[SW_QL], B[SW_QR], a, b, &hh, none,
						       1.0f, &hw);
			if (r == CLP_OK)
				r = clp_cl_finish(ctx);
			t1 = clp_now();
			for (int side = 0; r == CLP_OK && rep >= 0 && side < 2; side++) {
				size_t e = side ? b : a;

				if (soap) /* the next basis and perm; the active one stays */
					r = clp_soap_basis_next(ctx, B[SW_L + side], B[SW_QL + side], e,
								B[SW_NEXT], B[SW_PERM], &sw);
				else if ((r = clp_shampoo_inv_root(ctx, B[SW_L + side], e,
								   CLP_SHAMPOO_ROOT, hh.iters, &hw,
								   hw.r[5])) == CLP_OK)
					r = clp_cl_copy(ctx, B[SW_NEXT], hw.r[5], e * e);
			}
			if (r == CLP_OK)
				r = clp_cl_finish(ctx);
			t2 = clp_now();
			if (r == CLP_OK && rep > 0) {
				bp = t1 - t0 < bp ? t1 - t0 : bp;
				bi = t2 - t1 < bi ? t2 - t1 : bi;
			}
		}
		if (r == CLP_OK) {
			*pre += bp;
			*inv += bi;
		}
	}
	free(h);
	for (int j = 0; j < SW_N; j++)
		if (mem[j])
			clReleaseMemObject(mem[j]);
	return r;
}

/* Whether rank r's list splits the backward of (stage, pipe) (zero bubble). */
static int splits(const clp_sched *b, int r, int stage, int pipe)
{
	for (int i = 0; i < b->ranks[r].nops; i++)
		if (b->ranks[r].ops[i].kind == CLP_OP_BWD_B && b->ranks[r].ops[i].stage == stage &&
		    b->ranks[r].ops[i].pipe == pipe)
			return 1;
	return 0;
}

/* Per stage the mean over its holders of what they measured: the same table on every rank. */
static clp_status measure(clp_session *s, const clp_sched *base, clp_costs *c)
{
	clp_exec_opts eo = {
		.B = s->B, .T = s->T, .deterministic = 1, .recompute = s->cfg.train.recompute,
		.precision = s->prec};
	clp_kfac_opts o;
	clp_exec *ex = NULL;
	int ns = base->nstages, me = sess_rank(s), muon = s->optim->kind == CLP_OPTIM_MUON;
	int soap = s->optim->kind == CLP_OPTIM_SOAP, sides = soap ||
							    s->optim->kind == CLP_OPTIM_SHAMPOO;
	double *sum = calloc((size_t)ns * (CLP_COST_NTIMES + 1) + 1, sizeof(double));
	clp_status st;

	if (!sum)
		return clp_error(CLP_ERR_NOMEM, "out of host memory measuring costs");
	sess_kfac_opts(s, &o);
	o.interval = 1;
	st = clp_exec_create(&ex, s->comm, s->ctx, base, &s->m, &eo);
	/* the delayed Muon, Shampoo and SOAP: F, B, AdamW's step, and their own work below */
	if (st == CLP_OK && s->optim->kind == CLP_OPTIM_KFAC)
		st = clp_exec_kfac(ex, &o, 1.0f);
	if (st == CLP_OK)
		st = clp_exec_init_params(ex, (uint64_t)s->cfg.train.seed);
	for (int i = 0; st == CLP_OK && i < clp_exec_nstages(ex); i++) {
		double t[CLP_COST_NTIMES];
		int stage = -1, pipe = 0;

		/* which stage: the first FWD of the list naming local stage i's blocks */
		for (int j = 0, n = 0; j < base->ranks[me].nops && stage < 0; j++) {
			const clp_op *op = &base->ranks[me].ops[j];
			int seen = 0;

			if (op->kind != CLP_OP_FWD)
				continue;
			for (int q = 0; q < j; q++)
				seen |= base->ranks[me].ops[q].kind == CLP_OP_FWD &&
					base->ranks[me].ops[q].stage == op->stage &&
					base->ranks[me].ops[q].pipe == op->pipe;
			if (!seen && n++ == i) {
				stage = op->stage;
				pipe = op->pipe;
			}
		}
		if (stage < 0)
			break;
		st = measure_stage(s, ex, i, splits(base, me, stage, pipe), t);
		if (st == CLP_OK && muon) /* its items: the NS; no factors, no per-step item */
			st = measure_ns(s, clp_exec_stage(ex, i, NULL), &t[CLP_COST_KFAC_INV]);
		if (st == CLP_OK && sides) /* the refreshes a cycle, the update a step; no factors */
			st = measure_sides(s, clp_exec_stage(ex, i, NULL), soap,
					   &t[CLP_COST_KFAC_INV], &t[CLP_COST_KFAC_PRECOND]);
		for (int k = 0; st == CLP_OK && k < CLP_COST_NTIMES; k++)
			sum[(size_t)stage * CLP_COST_NTIMES + (size_t)k] += t[k];
		sum[(size_t)ns * CLP_COST_NTIMES + (size_t)stage] += 1;
	}
	clp_exec_free(ex);
	if (st == CLP_OK && clp_comm_size(s->comm) > 1)
		st = clp_comm_allreduce_sum(s->comm, CLP_COMM_F64, sum,
					    (size_t)ns * (CLP_COST_NTIMES + 1), 1, "PipeFisher costs");
	for (int g = 0; st == CLP_OK && g < ns; g++) {
		double n = sum[(size_t)ns * CLP_COST_NTIMES + (size_t)g];

		if (n < 1) {
			st = clp_error(CLP_ERR_STATE, "pipefisher: no rank measured stage %d", g);
			break;
		}
		for (int k = 0; k < CLP_COST_NTIMES; k++)
			c->stages[g].t[k] = sum[(size_t)g * CLP_COST_NTIMES + (size_t)k] / n;
	}
	free(sum);
	if (st == CLP_OK)
		snprintf(c->source, sizeof(c->source), "measured at start-up (%zu x %zu tokens per "
			 "micro-batch, the least of %d%s)", s->B, s->T, PF_REPS,
			 soap	 ? "; SOAP's refreshes and steps on random gradients"
			 : sides ? "; Shampoo's roots and steps on random gradients"
				 : "");
	return st;
}

/* The cost table for the pass: the configured file or measured; sizes and factor shares. */
static clp_status costs_for(clp_session *s, const clp_sched *base, const int *dims, int nf,
			    clp_costs **out)
{
	const char *file = s->cfg.pipeline.pipefisher_costs;
	clp_costs *c = NULL;
	clp_status st;

	*out = NULL;
	if (file[0]) {
		st = clp_costs_load(file, &c);
		if (st != CLP_OK)
			return clp_error_context(st, "pipeline.pipefisher_costs: ");
		if (c->nstages != base->nstages) {
			st = clp_error(CLP_ERR_INVALID, "pipeline.pipefisher_costs %s: %d stages, the "
				       "pipeline has %d", file, c->nstages, base->nstages);
			clp_costs_free(c);
			return st;
		}
		if (c->kfac_nfactors && c->kfac_nfactors != nf &&
		    s->optim->kind != CLP_OPTIM_SHAMPOO && s->optim->kind != CLP_OPTIM_MUON &&
		    s->optim->kind != CLP_OPTIM_SOAP) {
			st = clp_error(CLP_ERR_INVALID, "pipeline.pipefisher_costs %s: "
				       "kfac_factor_shares has %d factors; a layer of %s has %d", file,
				       c->kfac_nfactors, s->cfg.model.preset, nf);
			clp_costs_free(c);
			return st;
		}
	} else {
		CLP_TRY(clp_costs_create(base->nstages, &c));
		st = measure(s, base, c);
		if (st != CLP_OK) {
			clp_costs_free(c);
			return clp_error_context(st, "pipefisher: measuring costs: ");
		}
	}
	for (int g = 0; g < base->nstages; g++) {
		c->stages[g].nlayers = base->stages[g].nlayers;
		if (!c->stages[g].out_bytes)
			c->stages[g].out_bytes = (int64_t)(s->N * (size_t)s->m.d_model * sizeof(float));
	}
	/* the pass places messages of the run's storage precision (measured and fp32-sized sizes,
	 * or a loaded table's own precision, converted) */
	clp_costs_set_precision(c, s->prec);
	if (!c->kfac_nfactors && (st = clp_costs_set_kfac_factors(c, dims, nf)) != CLP_OK) {
		clp_costs_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}

static void fmt_bytes(int64_t b, char *buf, size_t n)
{
	if (b >= (int64_t)1 << 20)
		snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
	else
		snprintf(buf, n, "%.1f KiB", (double)b / 1024);
}

/* Shampoo's roots of one layer, each Shampoo matrix's rows then cols in table order (the
 * executor's factor numbering), into dims; their number. */
static int shampoo_dims(const clp_model_config *m, int *dims, int max)
{
	clp_param_table t;
	int n = 0;

	if (clp_param_table_build(m, 1, 1, &t) != CLP_OK)
		return 0;
	for (int i = 0; i < t.ntensors && n + 2 <= max; i++)
		if (clp_exec_muon_takes(&t.tensors[i])) {
			dims[n++] = (int)t.tensors[i].shape[0];
			dims[n++] = (int)t.tensors[i].shape[1];
		}
	clp_param_table_free(&t);
	return n;
}

/* SOAP's refreshes of one layer, each SOAP matrix's rows side then cols side in table order
 * (the executor's factor numbering, as Shampoo's roots), each given as the cube root of its
 * clp_soap_refresh_flops (the shares clp_costs_set_kfac_factors makes grow as d^3); their
 * number. */
static int soap_dims(const clp_model_config *m, int *dims, int max)
{
	int n = shampoo_dims(m, dims, max);

	for (int i = 0; i < n; i++)
		dims[i] = (int)(cbrt(clp_soap_refresh_flops((size_t)dims[i])) + 0.5);
	return n;
}

/* The delayed Muon's items of one layer: its Muon matrices in table order (the executor's
 * factor numbering), each given as the cube root of its Newton-Schulz flops (the shares
 * clp_costs_set_kfac_factors makes grow as d^3); their number. */
static int muon_dims(const clp_model_config *m, int ns_steps, int *dims, int max)
{
	clp_param_table t;
	int n = 0;

	if (clp_param_table_build(m, 1, 1, &t) != CLP_OK)
		return 0;
	for (int i = 0; i < t.ntensors && n < max; i++)
		if (clp_exec_muon_takes(&t.tensors[i])) {
			double a = (double)t.tensors[i].shape[0], b = (double)t.tensors[i].shape[1];
			double lo = a < b ? a : b, hi = a < b ? b : a;
			double f = (ns_steps > 0 ? ns_steps : 1) * (4 * lo * lo * hi + 2 * lo * lo * lo);

			dims[n++] = (int)(cbrt(f) + 0.5);
		}
	clp_param_table_free(&t);
	return n;
}

/* The cycle from the pass: a scenario of the session's schedule (borrowed) and the cost table,
 * no cluster; kept data as the stages allocate it (clp_scenario_kfac_keep with the model). */
static clp_status run_pass(clp_session *s, const clp_sched *base, clp_sched **cycle)
{
	clp_scenario sc;
	clp_scenario_pf pf;
	clp_pf_report rep;
	int dims[CLP_COST_MAX_FACTORS], nf = 0;
	int64_t ka, kb;
	char kept[32];
	clp_status st;
	int soap = s->optim->kind == CLP_OPTIM_SOAP;
	/* SOAP's refreshes are Shampoo's items (KFAC_INV per side), whole */
	int shampoo = s->optim->kind == CLP_OPTIM_SHAMPOO || soap;
	int muon = s->optim->kind == CLP_OPTIM_MUON;

	clp_model_kfac_layer(&s->m, s->N, &ka, &kb, dims, &nf, CLP_COST_MAX_FACTORS);
	if (shampoo)
		nf = soap ? soap_dims(&s->m, dims, CLP_COST_MAX_FACTORS)
			  : shampoo_dims(&s->m, dims, CLP_COST_MAX_FACTORS);
	if (muon)
		nf = muon_dims(&s->m, (int)s->cfg.muon.ns_steps, dims, CLP_COST_MAX_FACTORS);
	clp_scenario_init(&sc);
	sc.sched = (clp_sched *)base; /* borrowed: the pass only reads it */
	sc.borrowed = CLP_SCN_SCHED;
	CLP_TRY(costs_for(s, base, dims, nf, &sc.costs));
	clp_scenario_pf_default(&pf);
	pf.model = &s->m;
	pf.tokens = s->N;
	pf.mem_cap = s->cfg.pipeline.pipefisher_mem_cap;
	/* SOAP and Shampoo refresh no more often than configured (soap.frequency, shampoo.interval:
	 * the least K); where the refreshes fit no bubble the pass would otherwise take the least K
	 * that holds them, refreshing more often than a serial run does (measured: K 2 against
	 * soap.frequency 10, the cycle 7.4x the serial run's time; docs/OPTIMIZERS.md) */
	if (shampoo) {
		long f = soap ? s->cfg.soap.frequency : s->cfg.shampoo.interval;

		pf.min_steps = f > 256 ? 256 : (int)f;
	}
	/* Shampoo: a root longer than its rank's shortest bubble in phases, one per coupled
	 * Newton iteration (as clpipe sim --pf-optim shampoo --kfac-split-bits 4; the executor
	 * runs them, exec_shampoo.c); the split between holders stays K-FAC's (refused above) */
	if (soap && s->cfg.pipeline.pipefisher_phases && sess_rank(s) == 0)
		fprintf(s->out, "pipefisher: pipeline.pipefisher_phases ignored for SOAP: a refresh "
			"(one product and a Householder QR) has no phases, the pass places it "
			"whole\n");
	pf.split = soap ? 0
		   : shampoo ? (s->cfg.pipeline.pipefisher_phases ? CLP_PF_SPLIT_PHASES : 0)
		   : s->cfg.pipeline.pipefisher_split ? CLP_PF_SPLIT_RUN : 0;
	pf.work = shampoo ? CLP_PF_WORK_SHAMPOO : muon ? CLP_PF_WORK_MUON_DELAY : CLP_PF_WORK_KFAC;
	if (shampoo && sc.costs->inv_phases <= 0) /* a table from a file has none */
		sc.costs->inv_phases = s->cfg.shampoo.iters > 0 ? (int)s->cfg.shampoo.iters : 1;
	if (muon) /* a phase is one Newton-Schulz iteration, as the executor's */
		sc.costs->inv_phases = (int)(s->cfg.muon.ns_steps > 0 ? s->cfg.muon.ns_steps : 1);
	/* the table's factor shares are K-FAC's: Shampoo's roots or Muon's matrices instead */
	if (shampoo || muon)
		st = clp_costs_set_kfac_factors(sc.costs, dims, nf);
	else
		st = CLP_OK;
	if (st == CLP_OK && (st = clp_scenario_pipefisher(&sc, &pf, &rep)) != CLP_OK &&
	    shampoo && pf.split) { /* the phases need too many steps: whole */
		if (sess_rank(s) == 0)
			fprintf(s->out, "pipefisher: Shampoo's roots in phases do not fit (%s); the "
				"pass places them whole\n", clp_last_error());
		clp_error_clear();
		pf.split = 0;
		st = clp_scenario_pipefisher(&sc, &pf, &rep);
	}
	if (st == CLP_OK && sess_rank(s) == 0) {
		const clp_costs *c = sc.costs;
		const clp_stage_cost *t = &c->stages[0];

		fmt_bytes(rep.peak_kept, kept, sizeof(kept));
		fprintf(s->out, "pipefisher: costs %s; stage 0: F %.2f ms, B %.2f ms, factors A %.2f "
			"ms + B %.2f ms per micro-batch, inversion %.2f ms, preconditioning %.2f ms\n",
			c->source, 1e3 * t->t[CLP_COST_FWD], 1e3 * t->t[CLP_COST_BWD],
			1e3 * t->t[CLP_COST_KFAC_CURV_A], 1e3 * t->t[CLP_COST_KFAC_CURV_B],
			1e3 * t->t[CLP_COST_KFAC_INV], 1e3 * t->t[CLP_COST_KFAC_PRECOND]);
		fprintf(s->out, "pipefisher: K = %d (kfac.interval); %d K-FAC items per cycle, %d "
			"right after their pass (memory cap), %d longer than any bubble; kept data at "
			"most %s per rank; predicted step %.2f -> %.2f ms, utilisation %.1f %% -> "
			"%.1f %%\n", rep.K, rep.items, rep.immediate, rep.forced, kept,
			1e3 * rep.base_step_s, 1e3 * rep.step_s, 100 * rep.base_util, 100 * rep.util);
	}
	if (st == CLP_OK) {
		*cycle = sc.sched; /* the scenario's own after the pass: taken */
		sc.sched = NULL;
	}
	clp_scenario_free(&sc);
	return st;
}

/* The cycle kept in the checkpoint a resumed run starts from (*cycle NULL: none). */
static clp_status from_checkpoint(clp_session *s, clp_sched **cycle)
{
	clp_ckpt *ck = NULL;
	clp_status st;
	const char *text;
	char name[1200];

	*cycle = NULL;
	if (!s->cfg.ckpt.resume || !s->cfg.ckpt.dir[0])
		return CLP_OK;
	st = clp_ckpt_open_latest(&ck, s->cfg.ckpt.dir);
	if (st == CLP_ERR_NOT_FOUND) {
		clp_error_clear();
		return CLP_OK;
	}
	if (st != CLP_OK)
		return st;
	text = clp_ckpt_meta(ck, PF_META);
	snprintf(name, sizeof(name), "%s: %s", clp_ckpt_path(ck), PF_META);
	st = text ? clp_sched_from_json(text, name, cycle) : CLP_OK;
	if (st == CLP_OK && *cycle && clp_pipefisher_check(s->sched, *cycle) != CLP_OK) {
		/* another layout wrote it (a run resumed over fewer replicas, as after a lost
		 * rank): the pass plans this layout's cycle */
		if (sess_rank(s) == 0)
			fprintf(s->out, "pipefisher: the K = %d cycle of %s is not this layout's "
				"(%s); the pass plans a new one\n", (*cycle)->nsteps,
				clp_ckpt_path(ck), clp_last_error());
		clp_error_clear();
		clp_sched_free(*cycle);
		*cycle = NULL;
		text = NULL;
	}
	if (st == CLP_OK && text && sess_rank(s) == 0)
		fprintf(s->out, "pipefisher: the K = %d cycle of %s\n", (*cycle)->nsteps,
			clp_ckpt_path(ck));
	clp_ckpt_close(ck);
	return st;
}

clp_status sess_pf_plan(clp_session *s)
{
	clp_train_config *c = &s->cfg;
	clp_sched *cycle = NULL;
	clp_status st;

	if (!c->pipeline.pipefisher) {
		if (c->pipeline.pipefisher_schedule[0] || c->pipeline.pipefisher_costs[0] ||
		    c->pipeline.pipefisher_split)
			return clp_error(CLP_ERR_INVALID, "pipeline.pipefisher_%s is set but "
					 "pipeline.pipefisher is off",
					 c->pipeline.pipefisher_costs[0] ? "costs"
					 : c->pipeline.pipefisher_split ? "split"
									: "schedule");
		return CLP_OK;
	}
	if (!s->optim->pipefisher)
		return clp_error(CLP_ERR_INVALID, "pipeline.pipefisher puts an optimizer's periodic "
				 "work into the bubbles: it needs optim.name = \"kfac\", \"shampoo\", "
				 "\"soap\" or \"muon\" with muon.delay (not \"%s\")", c->optim.name);
	if (s->optim->kind == CLP_OPTIM_MUON && !c->muon.delay)
		return clp_error(CLP_ERR_INVALID, "pipeline.pipefisher with optim.name = \"muon\" "
				 "needs muon.delay = true: plain Muon's Newton-Schulz needs the step's "
				 "final gradient, so it has nothing for the bubbles (its OPT_PREP, "
				 "pipeline.optim_prep, does what can be done early)");
	if (s->optim->kind == CLP_OPTIM_MUON && c->pipeline.pipefisher_split)
		return clp_error(CLP_ERR_UNSUPPORTED, "pipeline.pipefisher_split shares the delayed "
				 "Muon's Newton-Schulz between a stage's holders, which the executor "
				 "does not run yet (the simulator models it: clpipe sim --pf-optim "
				 "muon-delay --kfac-split): leave it off");
	if (s->optim->kind == CLP_OPTIM_SHAMPOO && c->pipeline.pipefisher_split)
		return clp_error(CLP_ERR_UNSUPPORTED, "pipeline.pipefisher_split shares K-FAC's "
				 "inversions between a stage's holders; with Shampoo every holder "
				 "refreshes its own roots (the simulator models the split: clpipe sim "
				 "--pf-optim shampoo --kfac-split): leave it off");
	if (s->optim->kind == CLP_OPTIM_SOAP && c->pipeline.pipefisher_split)
		return clp_error(CLP_ERR_UNSUPPORTED, "pipeline.pipefisher_split shares K-FAC's "
				 "inversions between a stage's holders; with SOAP every holder "
				 "refreshes its own eigenbases: leave it off");
	if (s->optim->kind == CLP_OPTIM_SHAMPOO && c->shampoo.warmup)
		return clp_error(CLP_ERR_INVALID, "pipeline.pipefisher refreshes Shampoo's roots "
				 "once a cycle (stale roots); shampoo.warmup = %ld would refresh "
				 "serially too: leave it 0", c->shampoo.warmup);
	st = from_checkpoint(s, &cycle);
	if (st == CLP_OK && !cycle && c->pipeline.pipefisher_schedule[0]) {
		st = clp_sched_load(c->pipeline.pipefisher_schedule, &cycle);
		if (st != CLP_OK)
			clp_error_context(st, "pipeline.pipefisher_schedule: ");
		else if (sess_rank(s) == 0)
			fprintf(s->out, "pipefisher: the K = %d cycle of %s\n", cycle->nsteps,
				c->pipeline.pipefisher_schedule);
	}
	if (st == CLP_OK && !cycle)
		st = run_pass(s, s->sched, &cycle);
	if (st == CLP_OK)
		st = clp_pipefisher_check(s->sched, cycle);
	if (st == CLP_OK && (s->optim->kind == CLP_OPTIM_SHAMPOO ||
			     s->optim->kind == CLP_OPTIM_SOAP)) { /* every root / basis once a cycle */
		int dims[CLP_COST_MAX_FACTORS];

		st = clp_pipefisher_check_work(cycle,
					       s->optim->kind == CLP_OPTIM_SOAP ? CLP_PF_WORK_SOAP
										: CLP_PF_WORK_SHAMPOO,
					       shampoo_dims(&s->m, dims, CLP_COST_MAX_FACTORS));
	}
	if (st == CLP_OK && s->optim->kind == CLP_OPTIM_MUON) { /* every matrix's NS a step */
		int dims[CLP_COST_MAX_FACTORS];

		st = clp_pipefisher_check_work(cycle, CLP_PF_WORK_MUON_DELAY,
					       muon_dims(&s->m, (int)c->muon.ns_steps, dims,
							 CLP_COST_MAX_FACTORS));
	}
	if (st == CLP_OK)
		st = clp_sched_validate(cycle, 1);
	if (st != CLP_OK) {
		clp_sched_free(cycle);
		return st;
	}
	clp_sched_free(s->sched);
	s->sched = cycle;
	c->kfac.interval = cycle->nsteps;
	c->shampoo.interval = cycle->nsteps; /* Shampoo's stale roots: one refresh a cycle */
	c->soap.frequency = cycle->nsteps;   /* SOAP's stale bases likewise */
	return CLP_OK;
}

int st_pf_K(const clp_session *s)
{
	return s->cfg.pipeline.pipefisher && s->sched ? s->sched->nsteps : 0;
}

clp_status sess_pf_save(clp_session *s, clp_ckpt_writer *w)
{
	char *text;
	clp_status st;

	if (!st_pf_K(s) || sess_rank(s) != 0)
		return CLP_OK;
	if (!(text = clp_sched_to_json(s->sched)))
		return clp_error(CLP_ERR_NOMEM, "out of host memory saving the PipeFisher cycle");
	st = clp_ckpt_writer_meta(w, PF_META, text);
	free(text);
	return st;
}

clp_status sess_pf_resumed(const clp_session *s)
{
	int K = st_pf_K(s);

	if (K > 1 && s->step % K)
		return clp_error(CLP_ERR_INVALID, "the checkpoint of step %ld lies inside a "
				 "PipeFisher cycle of K = %d steps: the inputs and output gradients "
				 "kept for its deferred factors are not saved; resume from a checkpoint "
				 "at a multiple of %d (PipeFisher runs write them there)", s->step, K, K);
	return CLP_OK;
}
