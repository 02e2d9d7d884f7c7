/* The PipeFisher pass's schedules and timelines: lists with K-FAC items inserted at their slots
 * (the template it simulates to find bubbles, and the final cycle), and the idle gaps of each
 * rank's compute stream read from the simulator's per-op times. */
#include <stdlib.h>
#include <string.h>

#include "engine/pass/pipefisher_internal.h"
#include "engine/sim/sim.h"

/* An empty copy of base's shape: stage map, pipelines, replicas, groups (same indices), paths. */
static clp_status empty_like(const clp_sched *b, int nsteps, clp_sched **out)
{
	clp_sched *s;
	int g;

	CLP_TRY(clp_sched_create(&s, b->nranks, b->nstages, b->nmb, b->nlayers));
	memcpy(s->name, b->name, sizeof(s->name));
	memcpy(s->stages, b->stages, (size_t)b->nstages * sizeof(*s->stages));
	s->npipes = b->npipes;
	s->nchunks = b->nchunks;
	s->nreplicas = b->nreplicas;
	s->nsteps = nsteps;
	s->nlayers = b->nlayers;
	for (int r = 0; r < b->nranks; r++) {
		s->ranks[r].replica = b->ranks[r].replica;
		s->ranks[r].mode = b->ranks[r].mode;
		s->ranks[r].mem_cap = b->ranks[r].mem_cap;
	}
	for (int i = 0; i < b->ngroups; i++) {
		clp_status st = clp_sched_group(s, b->groups[i].ranks, b->groups[i].n, &g);

		if (st != CLP_OK || g != i) {
			clp_sched_free(s);
			return st != CLP_OK ? st : clp_error(CLP_ERR_STATE, "pipefisher: group %d "
							     "repeats an earlier one", i);
		}
	}
	if (b->path_start && clp_sched_set_paths(s, b->path_start, b->path_stages) != CLP_OK) {
		clp_sched_free(s);
		return CLP_ERR_NOMEM;
	}
	*out = s;
	return CLP_OK;
}

clp_status pf_repeated(const clp_sched *s, int times, clp_sched **out)
{
	clp_sched *c = NULL;
	clp_status st = empty_like(s, s->nsteps, &c);

	for (int r = 0; st == CLP_OK && r < s->nranks; r++)
		for (int i = 0; st == CLP_OK && i < s->ranks[r].nops; i++)
			st = clp_sched_push(c, r, &s->ranks[r].ops[i]);
	if (st == CLP_OK)
		st = clp_sched_repeat(c, times);
	if (st != CLP_OK) {
		clp_sched_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}

static int slot_cmp(const void *a, const void *b)
{
	const pf_item *x = *(pf_item *const *)a, *y = *(pf_item *const *)b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	if (x->j != y->j)
		return x->j < y->j ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int pf_find_allreduce(const clp_sched *b, int r, int s, int *group)
{
	const clp_rank_prog *p = &b->ranks[r];

	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].kind == CLP_OP_ALLREDUCE && p->ops[i].what == CLP_RED_GRADS &&
		    p->ops[i].stage == s) {
			*group = p->ops[i].group;
			return i;
		}
	return -1;
}

/* Whether stage s's work is split between its holders (P->owner names its layers' owners). */
static int split_stage(const pf *P, int s)
{
	const clp_stage_info *si = &P->base->stages[s];

	return (P->o->split & CLP_PF_SPLIT_PREC) && P->owner && si->nlayers > 0 &&
	       P->owner[si->first_layer] >= 0;
}

/* Whether base op j of rank r is the gradient all-reduce of a split stage. */
static int split_allreduce(const pf *P, int r, int j)
{
	const clp_op *b = &P->base->ranks[r].ops[j];
	int g;

	return b->kind == CLP_OP_ALLREDUCE && b->what == CLP_RED_GRADS && split_stage(P, b->stage) &&
	       pf_find_allreduce(P->base, r, b->stage, &g) == j;
}

/* PRECOND of the stage whose OPT_STEP is base op j of rank r, into s at template step t; for
 * split stages, before the rank's first OPT_STEP of one (after every collective before it: the
 * gradient all-reduces and the norm read the raw gradients): for each split stage in the order
 * of their gradient all-reduces, the layers rank r owns, then the exchanges in the same order
 * (so the holders, which own different numbers of layers of each stage, wait for each other
 * once). */
static clp_status push_precond(const pf *P, clp_sched *s, int r, int j, int t, pf_origin *org,
			       int64_t *n, int precond)
{
	const clp_op *b = &P->base->ranks[r].ops[j];
	const clp_stage_info *si;
	clp_op op;

	if (!precond || b->kind != CLP_OP_OPT_STEP)
		return CLP_OK;
	if (!split_stage(P, b->stage)) {
		op = clp_op_make(CLP_OP_KFAC_PRECOND, b->stage, b->pipe, b->chunk, -1);
		op.step = (uint16_t)t;
		org[*n] = (pf_origin){t, j, -1};
		(*n)++;
		return clp_sched_push(s, r, &op);
	}
	for (int i = 0; i < j; i++)
		if (P->base->ranks[r].ops[i].kind == CLP_OP_OPT_STEP &&
		    split_stage(P, P->base->ranks[r].ops[i].stage))
			return CLP_OK; /* not the first: done */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < P->base->ranks[r].nops; i++) {
			if (!split_allreduce(P, r, i))
				continue;
			b = &P->base->ranks[r].ops[i];
			si = &P->base->stages[b->stage];
			if (pass) {
				op = clp_op_make(CLP_OP_KFAC_PREC_SYNC, b->stage, 0, 0, -1);
				op.group = b->group;
				op.step = (uint16_t)t;
				org[*n] = (pf_origin){t, j, -1};
				(*n)++;
				CLP_TRY(clp_sched_push(s, r, &op));
				continue;
			}
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
				const clp_op *o = NULL;

				if (P->owner[l] != r)
					continue;
				for (int q = 0; q < P->base->ranks[r].nops && !o; q++)
					if (P->base->ranks[r].ops[q].kind == CLP_OP_OPT_STEP &&
					    P->base->ranks[r].ops[q].stage == b->stage)
						o = &P->base->ranks[r].ops[q];
				op = clp_op_make(CLP_OP_KFAC_PRECOND, b->stage, o ? o->pipe : 0,
						 o ? o->chunk : 0, -1);
				op.layer = l;
				op.step = (uint16_t)t;
				org[*n] = (pf_origin){t, j, -1};
				(*n)++;
				CLP_TRY(clp_sched_push(s, r, &op));
			}
		}
	return CLP_OK;
}

clp_status pf_build(pf *P, int nsteps, int warm, int precond, clp_sched **out,
		    pf_origin **orgp)
{
	const clp_sched *b = P->base;
	pf_item **mine = malloc(((size_t)P->nit + 1) * sizeof(*mine));
	pf_origin *org = NULL;
	clp_sched *s = NULL;
	int64_t total = (int64_t)nsteps * clp_sched_nops(b) + P->nit + 1, n = 0;
	clp_status st;

	*out = NULL;
	*orgp = NULL;
	/* PRECOND items: one per OPT_STEP per step, or per layer and the exchange */
	for (int r = 0; r < b->nranks; r++)
		for (int i = 0; i < b->ranks[r].nops; i++) {
			const clp_op *o = &b->ranks[r].ops[i];

			total += o->kind == CLP_OP_OPT_STEP ? nsteps : 0;
			total += o->kind == CLP_OP_ALLREDUCE && o->stage >= 0 &&
					 o->stage < b->nstages
				 ? (int64_t)nsteps * (b->stages[o->stage].nlayers + 1)
				 : 0;
		}
	org = malloc((size_t)total * sizeof(*org));
	if (!mine || !org) {
		st = clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
		goto fail;
	}
	st = empty_like(b, nsteps, &s);
	if (st != CLP_OK)
		goto fail;
	for (int r = 0; r < b->nranks; r++) {
		int nb = b->ranks[r].nops, m = 0, k = 0;

		for (int i = 0; i < P->nit; i++)
			if (P->it[i].rank == r && P->it[i].in_tmpl)
				mine[m++] = &P->it[i];
		qsort(mine, (size_t)m, sizeof(*mine), slot_cmp);
		for (int t = 0; t < nsteps; t++)
			for (int j = 0; j <= nb; j++) {
				for (; k < m && mine[k]->step + warm == t && mine[k]->j == j; k++) {
					clp_op op = mine[k]->op;

					/* factors record the cycle's first step; others name where they run */
					op.step = (uint16_t)(op.kind == CLP_OP_KFAC_CURV_A ||
									     op.kind == CLP_OP_KFAC_CURV_B
								     ? warm
								     : t);
					org[n++] = (pf_origin){mine[k]->step, j, (int)(mine[k] - P->it)};
					st = clp_sched_push(s, r, &op);
					if (st != CLP_OK)
						goto fail;
				}
				if (j == nb)
					continue;
				st = push_precond(P, s, r, j, t, org, &n, precond);
				if (st == CLP_OK) {
					clp_op op = b->ranks[r].ops[j];

					op.step = (uint16_t)t;
					org[n++] = (pf_origin){t, j, -1};
					st = clp_sched_push(s, r, &op);
				}
				if (st != CLP_OK)
					goto fail;
			}
		if (k < m) {
			st = clp_error(CLP_ERR_STATE, "pipefisher: rank %d: %d items lie beyond step %d",
				       r, m - k, nsteps - warm - 1);
			goto fail;
		}
	}
	free(mine);
	*out = s;
	*orgp = org;
	return CLP_OK;
fail:
	free(mine);
	free(org);
	clp_sched_free(s);
	return st;
}

static void sim_opts(const pf *P, clp_sim_opts *so)
{
	clp_sim_opts_default(so);
	so->costs = P->o->costs;
	so->cluster = P->o->cluster;
	so->layout = P->o->cluster ? P->o->layout : NULL;
	so->eager_bytes = P->o->eager_bytes;
	so->trace_limit = 0;
}

clp_status pf_base_idle(pf *P)
{
	clp_sim_opts so;
	clp_sim_result r;

	sim_opts(P, &so);
	CLP_TRY(clp_sim_run(P->base, &so, &r));
	for (int i = 0; i < P->base->nranks; i++) {
		P->kind[i] = r.ranks[i].kind;
		P->speed[i] = r.ranks[i].speed;
		P->idle[i] = r.cycle_s - r.ranks[i].compute_s;
	}
	clp_sim_result_free(&r);
	return CLP_OK;
}

clp_status pf_simulate(const pf *P, const clp_sched *s, double *cycle_s, double *util)
{
	clp_sim_opts so;
	clp_sim_result r;

	sim_opts(P, &so);
	CLP_TRY(clp_sim_run(s, &so, &r));
	*cycle_s = r.cycle_s;
	*util = r.util_mean;
	clp_sim_result_free(&r);
	return CLP_OK;
}

static clp_status add_gap(pf *P, int *cap, pf_gap g)
{
	if (P->ngaps == *cap) {
		int c = *cap ? 2 * *cap : 256;
		pf_gap *ng = realloc(P->gaps, (size_t)c * sizeof(*ng));

		if (!ng)
			return clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
		P->gaps = ng;
		*cap = c;
	}
	P->gaps[P->ngaps++] = g;
	return CLP_OK;
}

/* The cycle step of an op of the template (items name theirs, base ops the template's). */
static int cycle_step(const pf_origin *o, int warm)
{
	return o->item >= 0 ? o->step : o->step - warm;
}

/* The gaps of one rank: after each compute op (and the sends and receives it posts next, and
 * any blocking send among them) until the next op that is not a send or receive starts. An item
 * put there goes before that op. Gaps whose next op is an immediate item have no room: the
 * item runs right after its forward / backward. With opts.split, a gap across a step boundary
 * is split where the step ends (step_end, the last op of the step on any rank): the part
 * before is the end of the earlier step (slot: after its last base op), so the cycle's last
 * step can use its drain; the part after is the next step's fill. */
static clp_status rank_gaps(pf *P, const clp_sched *s, const pf_origin *org, int64_t off, int r,
			    const double *t0, const double *t1, int warm, int *cap,
			    const double *step_end)
{
	const clp_rank_prog *p = &s->ranks[r];

	for (int i = 0; i < p->nops; i++) {
		double start;
		int q = i + 1, si;
		pf_gap g;

		if (!clp_op_is_compute(p->ops[i].kind))
			continue;
		start = t1[off + i];
		for (; q < p->nops && clp_op_is_p2p(p->ops[q].kind); q++)
			if (clp_op_is_send(p->ops[q].kind) && (p->ops[q].flags & CLP_OPF_WAIT) &&
			    t1[off + q] > start)
				start = t1[off + q];
		if (q >= p->nops)
			continue;
		g.rank = r;
		g.t0 = start;
		g.t1 = t0[off + q] > start ? t0[off + q] : start;
		g.used = 0;
		g.step = cycle_step(&org[off + q], warm);
		si = cycle_step(&org[off + i], warm);
		if ((P->o->split & CLP_PF_SPLIT_SYNC) && si >= 0 && si < g.step && si < P->kmax &&
		    step_end[si + warm] > g.t0) {
			pf_gap e = g; /* the end of step si */

			e.t1 = step_end[si + warm] < g.t1 ? step_end[si + warm] : g.t1;
			e.step = si;
			e.j = P->base->ranks[r].nops;
			CLP_TRY(add_gap(P, cap, e));
			g.t0 = e.t1;
		}
		g.j = org[off + q].j;
		if (org[off + q].item >= 0 && P->it[org[off + q].item].key == PF_IMMEDIATE)
			g.t1 = g.t0;
		if (g.step < 0 || g.step >= P->kmax)
			continue;
		CLP_TRY(add_gap(P, cap, g));
	}
	return CLP_OK;
}

clp_status pf_timeline(pf *P)
{
	clp_sched *s = NULL;
	pf_origin *org = NULL;
	double *t0 = NULL, *t1 = NULL, *step_end = NULL;
	int64_t nops, off = 0;
	clp_sim_opts so;
	clp_sim_result res;
	clp_status st;
	int cap = 0;

	double *be = realloc(P->bwd_end, ((size_t)P->nit + 1) * sizeof(double));

	if (!be)
		return clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
	P->bwd_end = be;
	for (int i = 0; i < P->nit; i++) {
		P->it[i].in_tmpl = P->it[i].immediate;
		P->bwd_end[i] = 0;
	}
	st = pf_build(P, P->kmax + 1, 1, pf_per_step(P), &s, &org);
	if (st != CLP_OK)
		return st;
	nops = clp_sched_nops(s);
	t0 = malloc((size_t)nops * sizeof(double) + 1);
	t1 = malloc((size_t)nops * sizeof(double) + 1);
	if (!t0 || !t1) {
		st = clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
		goto out;
	}
	sim_opts(P, &so);
	so.op_t0 = t0;
	so.op_t1 = t1;
	st = clp_sim_run(s, &so, &res);
	if (st != CLP_OK) {
		clp_error_context(st, "pipefisher: simulating the schedule: ");
		goto out;
	}
	for (int r = 0; r < s->nranks; r++) {
		P->kind[r] = res.ranks[r].kind;
		P->speed[r] = res.ranks[r].speed;
	}
	clp_sim_result_free(&res);
	P->ngaps = 0;
	step_end = calloc((size_t)P->kmax + 2, sizeof(double));
	if (!step_end) {
		st = clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
		goto out;
	}
	for (int64_t i = 0; i < nops; i++) { /* org is rank by rank like t1 */
		int ts = cycle_step(&org[i], 1) + 1;

		if (ts >= 0 && ts <= P->kmax && t1[i] > step_end[ts])
			step_end[ts] = t1[i];
	}
	for (int r = 0; r < s->nranks && st == CLP_OK; r++) {
		const clp_rank_prog *p = &s->ranks[r];

		st = rank_gaps(P, s, org, off, r, t0, t1, 1, &cap, step_end);
		/* the end of each curvature item's backward in the cycle's first step */
		for (int i = 0; st == CLP_OK && i < p->nops; i++)
			if (org[off + i].item == -1 && org[off + i].step == 1)
				for (int k = 0; k < P->nit; k++)
					if (P->it[k].rank == r && P->it[k].bwd == org[off + i].j)
						P->bwd_end[k] = t1[off + i];
		off += p->nops;
	}
out:
	free(step_end);
	free(t0);
	free(t1);
	free(org);
	clp_sched_free(s);
	return st;
}
