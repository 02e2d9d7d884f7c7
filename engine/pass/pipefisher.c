/* The PipeFisher pass (pipefisher.h): work items, first-fit placement into the simulated gaps
 * of a K-step cycle, the memory cap, the factor all-reduces, and the report. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pass/pipefisher_internal.h"
#include "engine/pass/validate.h"

#define EPS 1e-12

void clp_pf_opts_default(clp_pf_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->eager_bytes = -1;
	o->mem_cap = -1;
	o->max_steps = 256;
	o->precondition = 1;
}

static clp_status add_item(pf *P, const pf_item *x)
{
	if (P->nit == P->cap) {
		int c = P->cap ? 2 * P->cap : 256;
		pf_item *n = realloc(P->it, (size_t)c * sizeof(*n));

		if (!n)
			return clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
		P->it = n;
		P->cap = c;
	}
	P->it[P->nit++] = *x;
	return CLP_OK;
}

/* A placed collective of stage s's layer l over group g on rank r (the factor all-reduce, the
 * inverse exchange): at base index j of cycle step `step`, ordered by key. */
static clp_status add_sync(pf *P, clp_op_kind kind, int s, int l, int g, int r, int step, int j,
			   int key)
{
	pf_item x = {0};

	x.op = clp_op_make(kind, s, 0, 0, -1);
	x.op.layer = l;
	x.op.group = g;
	x.rank = r;
	x.dep = x.bwd = x.layer_last = x.sync = x.prev = -1;
	x.placed = 1;
	x.step = step;
	x.j = j;
	x.key = key;
	x.seq = P->seq++;
	return add_item(P, &x);
}

/* Base index of the op of `kind` class (FWD, or the input-gradient backward) of (stage, pipe,
 * mb) on rank r; -1. */
static int find_op(const clp_sched *b, int r, int fwd, const clp_op *like)
{
	const clp_rank_prog *p = &b->ranks[r];

	for (int i = 0; i < p->nops; i++) {
		const clp_op *o = &p->ops[i];

		if ((fwd ? o->kind == CLP_OP_FWD : clp_op_is_bwd_input(o->kind)) &&
		    o->stage == like->stage && o->pipe == like->pipe && o->mb == like->mb)
			return i;
	}
	return -1;
}


/* Duration of a K-FAC item on its rank, as the simulator will charge it. */
static double item_time(const pf *P, const clp_op *op, int r)
{
	const clp_costs *c = P->o->costs;
	const clp_stage_cost *sc = &c->stages[op->stage];
	double per_layer = sc->nlayers > 0 ? 1.0 / sc->nlayers : 1.0;
	int t = op->kind == CLP_OP_KFAC_CURV_A   ? CLP_COST_KFAC_CURV_A
		: op->kind == CLP_OP_KFAC_CURV_B ? CLP_COST_KFAC_CURV_B
						 : CLP_COST_KFAC_INV;

	if (op->kind == CLP_OP_KFAC_INV && op->factor && op->factor <= c->kfac_nfactors)
		per_layer *= c->kfac_share[op->factor - 1];
	if (op->kind == CLP_OP_KFAC_INV && op->mb >= 0)
		per_layer /= 3; /* one phase (sim_op_time charges the same) */
	return per_layer * clp_costs_time(c, op->stage, t, P->kind[r], P->speed[r]);
}

/* Preconditioning per step of stage s on rank r: the whole stage (layer -1) or one layer. */
static double precond_time(const pf *P, int s, int layer, int r)
{
	const clp_stage_cost *sc = &P->o->costs->stages[s];
	double part = layer >= 0 && sc->nlayers > 0 ? 1.0 / sc->nlayers : 1.0;

	return part * clp_costs_time(P->o->costs, s, CLP_COST_KFAC_PRECOND, P->kind[r], P->speed[r]);
}

/* Inversion of every factor of one layer of stage s on rank r. */
static double layer_inv_time(const pf *P, int s, int r)
{
	const clp_stage_cost *sc = &P->o->costs->stages[s];

	return clp_costs_time(P->o->costs, s, CLP_COST_KFAC_INV, P->kind[r], P->speed[r]) /
	       (sc->nlayers > 0 ? sc->nlayers : 1);
}

/* Rank r's K-FAC work of one refresh without split stages' inversions (factors of every
 * micro-batch of every stage it holds, all inversions of its other stages) and its
 * preconditioning per step of its other stages. */
static void fixed_work(const pf *P, int r, double *work, double *prec)
{
	const clp_sched *b = P->base;
	const clp_rank_prog *p = &b->ranks[r];

	*work = *prec = 0;
	for (int i = 0; i < p->nops; i++) {
		const clp_op *o = &p->ops[i];
		const clp_stage_info *si = &b->stages[o->stage >= 0 ? o->stage : 0];

		if (o->kind == CLP_OP_FWD)
			*work += clp_costs_time(P->o->costs, o->stage, CLP_COST_KFAC_CURV_A, P->kind[r],
						P->speed[r]) +
				 clp_costs_time(P->o->costs, o->stage, CLP_COST_KFAC_CURV_B, P->kind[r],
						P->speed[r]);
		if (o->kind != CLP_OP_OPT_STEP)
			continue;
		if (!(P->o->split & CLP_PF_SPLIT_PREC) || si->nlayers < 1 ||
		    P->owner[si->first_layer] < 0)
			*prec += precond_time(P, o->stage, -1, r);
		if (si->nlayers < 1 || P->owner[si->first_layer] < 0)
			*work += si->nlayers * layer_inv_time(P, o->stage, r);
	}
}

/* K on rank r from its work and idle time per step (a large value when no idle time is left). */
static double ratio(double work, double idle)
{
	return idle > EPS ? work / idle : 1e30 * (1 + work);
}

/* The holders of stage s (ranks with its OPT_STEP and gradient all-reduce) into hold[]. */
static int holders(const clp_sched *b, int s, int *hold)
{
	int nh = 0, g;

	for (int r = 0; r < b->nranks; r++)
		for (int i = 0; i < b->ranks[r].nops; i++)
			if (b->ranks[r].ops[i].kind == CLP_OP_OPT_STEP && b->ranks[r].ops[i].stage == s &&
			    pf_find_allreduce(b, r, s, &g) >= 0) {
				hold[nh++] = r;
				break;
			}
	return nh;
}

/* Split ownership (opts.split): each layer of a stage with several holders gets one owner.
 * Stage by stage, layer by layer, the owner is the holder whose bound (work / idle time left
 * per step) grows least with it. Without split, or for a stage with one holder, the owner is
 * -1 (every holder does everything). */
static clp_status assign_owners(pf *P)
{
	const clp_sched *b = P->base;
	double *work = calloc((size_t)b->nranks + 1, sizeof(double));
	double *prec = calloc((size_t)b->nranks + 1, sizeof(double));
	int *hold = calloc((size_t)b->nranks + 1, sizeof(int));

	if (!work || !prec || !hold) {
		free(work);
		free(prec);
		free(hold);
		return clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
	}
	for (int l = 0; l < b->nlayers; l++)
		P->owner[l] = -1;
	for (int s = 0; (P->o->split & CLP_PF_SPLIT_INV) && s < b->nstages; s++) {
		const clp_stage_info *si = &b->stages[s];
		int nh = holders(b, s, hold);

		if (nh < 2 || si->nlayers < 1)
			continue;
		for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
			P->owner[l] = hold[0]; /* marks the stage split for fixed_work */
	}
	for (int r = 0; r < b->nranks; r++)
		fixed_work(P, r, &work[r], &prec[r]);
	for (int s = 0; s < b->nstages; s++) {
		const clp_stage_info *si = &b->stages[s];
		int nh, pre = (P->o->split & CLP_PF_SPLIT_PREC) != 0;

		if (si->nlayers < 1 || P->owner[si->first_layer] < 0)
			continue;
		nh = holders(b, s, hold);
		for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
			int best = -1;
			double bv = 0;

			for (int h = 0; h < nh; h++) {
				int r = hold[h];
				double v = ratio(work[r] + layer_inv_time(P, s, r),
						 P->idle[r] - prec[r] - pre * precond_time(P, s, l, r));

				if (best < 0 || v < bv - EPS)
					best = r, bv = v;
			}
			P->owner[l] = best;
			work[best] += layer_inv_time(P, s, best);
			prec[best] += pre * precond_time(P, s, l, best);
		}
	}
	free(work);
	free(prec);
	free(hold);
	return CLP_OK;
}

/* The packing bound (clp_pf_report.bound) from the items made, the ownership and the time the
 * cycle adds to a step (rep->added_s: a longer step leaves every rank more idle time). */
static void packing_bound(const pf *P, clp_pf_report *rep)
{
	const clp_sched *b = P->base;

	rep->bound = 1;
	rep->bound_rank = -1;
	for (int r = 0; r < b->nranks; r++) {
		double work = 0, prec = 0, k, idle;

		for (int i = 0; i < P->nit; i++)
			if (P->it[i].rank == r && !clp_op_is_collective(P->it[i].op.kind))
				work += item_time(P, &P->it[i].op, r);
		for (int i = 0; P->o->precondition && i < b->ranks[r].nops; i++) {
			const clp_op *o = &b->ranks[r].ops[i];
			const clp_stage_info *si = &b->stages[o->stage >= 0 ? o->stage : 0];

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			if (!(P->o->split & CLP_PF_SPLIT_PREC) || si->nlayers < 1 ||
			    P->owner[si->first_layer] < 0) {
				prec += precond_time(P, o->stage, -1, r);
				continue;
			}
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				prec += P->owner[l] == r ? precond_time(P, o->stage, l, r) : 0;
		}
		idle = P->idle[r] + (rep->added_s > 0 ? rep->added_s : 0) - prec;
		if (idle <= EPS && work > 0) {
			rep->bound = 0; /* no idle time left: every item lengthens a step */
			rep->bound_rank = r;
			rep->bound_work_s = work;
			rep->bound_idle_s = idle;
			return;
		}
		k = work > 0 ? ceil(work / idle - 1e-9) : 1;
		if (rep->bound_rank < 0 || k > rep->bound) {
			rep->bound = k > 1 ? (int)k : 1;
			rep->bound_rank = r;
			rep->bound_work_s = work;
			rep->bound_idle_s = idle;
		}
	}
}

/* Curvature items for every forward of the base, and per layer and factor an inversion. */
static clp_status make_items(pf *P)
{
	const clp_sched *b = P->base;
	int nf = P->o->costs->kfac_nfactors > 0 ? P->o->costs->kfac_nfactors : 1;

	for (int r = 0; r < b->nranks; r++) {
		const clp_rank_prog *p = &b->ranks[r];

		for (int i = 0; i < p->nops; i++) {
			const clp_op *f = &p->ops[i];
			const clp_stage_info *si;
			int bi;

			if (f->kind != CLP_OP_FWD)
				continue;
			si = &b->stages[f->stage];
			bi = find_op(b, r, 0, f);
			if (bi < 0)
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d: no backward of "
						 "stage %d mb %d", r, f->stage, f->mb);
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				for (int k = 0; k < 2; k++) {
					pf_item x = {0};

					x.op = clp_op_make(k ? CLP_OP_KFAC_CURV_B : CLP_OP_KFAC_CURV_A,
							   f->stage, f->pipe, f->chunk, f->mb);
					x.op.layer = l;
					x.rank = r;
					x.dep = k ? bi : i;
					x.bwd = bi;
					x.layer_last = x.sync = x.prev = -1;
					x.keep = k ? P->o->keep_b_bytes : P->o->keep_a_bytes;
					CLP_TRY(add_item(P, &x));
				}
		}
		/* inversions per stage held (each OPT_STEP names one) */
		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];
			const clp_stage_info *si;

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			si = &b->stages[o->stage];
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				for (int f = 0; f < nf && (P->owner[l] < 0 || P->owner[l] == r); f++) {
					pf_item x = {0};

					x.op = clp_op_make(CLP_OP_KFAC_INV, o->stage, o->pipe, o->chunk, -1);
					x.op.layer = l;
					x.op.factor = (uint8_t)(P->o->costs->kfac_nfactors > 0 ? f + 1 : 0);
					x.rank = r;
					x.dep = x.bwd = x.layer_last = x.sync = x.prev = -1;
					CLP_TRY(add_item(P, &x));
				}
		}
	}
	return CLP_OK;
}

static void reset_placement(pf *P)
{
	P->seq = 0;
	for (int i = 0; i < P->nit; i++) {
		pf_item *x = &P->it[i];

		if (x->op.kind == CLP_OP_KFAC_SYNC || x->op.kind == CLP_OP_KFAC_INV_SYNC) {
			/* remade each round */
			*x = P->it[--P->nit];
			i--;
			continue;
		}
		x->placed = x->forced = 0;
		x->step = x->j = -1;
		x->layer_last = x->sync = -1;
		x->t_place = 0;
		if (x->immediate) { /* right after its forward / backward and what it sends */
			const clp_rank_prog *p = &P->base->ranks[x->rank];
			int j = x->dep + 1;

			while (j < p->nops && clp_op_is_p2p(p->ops[j].kind))
				j++;
			x->placed = 1;
			x->step = 0;
			x->j = j;
			x->key = PF_IMMEDIATE;
			x->seq = P->seq++;
		}
	}
}

/* (a_step, a_j, a_key, a_seq) < (b...) */
static int before(const pf_item *a, int step, int j, int key, int seq)
{
	if (a->step != step)
		return a->step < step;
	if (a->j != j)
		return a->j < j;
	if (a->key != key)
		return a->key < key;
	return a->seq < seq;
}

/* May x go into gap g (a gap item, after everything placed so far)? */
static int ready(const pf *P, const pf_item *x, const pf_gap *g)
{
	if (x->op.kind != CLP_OP_KFAC_INV)
		return g->step > 0 || g->j > x->dep;
	if (x->prev >= 0)
		return P->it[x->prev].placed &&
		       before(&P->it[x->prev], g->step, g->j, PF_GAP, P->seq);
	if (x->layer_last < 0 || !P->it[x->layer_last].placed)
		return 0;
	if (!before(&P->it[x->layer_last], g->step, g->j, PF_GAP, P->seq))
		return 0;
	return x->sync < 0 || before(&P->it[x->sync], g->step, g->j, PF_GAP, P->seq);
}

static void place(pf *P, pf_item *x, pf_gap *g)
{
	x->placed = 1;
	x->step = g->step;
	x->j = g->j;
	x->key = PF_GAP;
	x->seq = P->seq++;
	x->t_place = g->t0 + g->used;
	g->used += x->dur;
}

/* First fit in time order: each gap takes the ready items of its rank (in item order) that fit
 * in what is left of it. Items of kind `kind` only. */
static void fill(pf *P, int kind)
{
	for (int gi = 0; gi < P->ngaps; gi++) {
		pf_gap *g = &P->gaps[gi];

		for (int i = 0; i < P->nit; i++) {
			pf_item *x = &P->it[i];
			int kind_ok = kind == CLP_OP_KFAC_INV ? x->op.kind == CLP_OP_KFAC_INV
							      : x->op.kind == CLP_OP_KFAC_CURV_A ||
									x->op.kind == CLP_OP_KFAC_CURV_B;

			if (!kind_ok || x->placed || x->forced || x->rank != g->rank)
				continue;
			if (x->dur <= g->t1 - g->t0 - g->used + EPS && ready(P, x, g))
				place(P, x, g);
		}
	}
}

/* Items longer than every gap of their rank never fit: mark them forced. */
static void mark_forced(pf *P)
{
	for (int i = 0; i < P->nit; i++) {
		pf_item *x = &P->it[i];
		double most = 0;

		if (x->placed || clp_op_is_collective(x->op.kind))
			continue;
		for (int gi = 0; gi < P->ngaps; gi++)
			if (P->gaps[gi].rank == x->rank && P->gaps[gi].t1 - P->gaps[gi].t0 > most)
				most = P->gaps[gi].t1 - P->gaps[gi].t0;
		x->forced = x->dur > most + EPS;
	}
}

/* The layer's last curvature item on each rank, for the inversions' readiness. */
static void link_layers(pf *P)
{
	for (int i = 0; i < P->nit; i++) {
		pf_item *x = &P->it[i];

		if (x->op.kind != CLP_OP_KFAC_INV)
			continue;
		x->layer_last = -1;
		for (int k = 0; k < P->nit; k++) {
			const pf_item *c = &P->it[k];

			if (c->rank != x->rank || c->op.layer != x->op.layer || c->op.stage != x->op.stage ||
			    (c->op.kind != CLP_OP_KFAC_CURV_A && c->op.kind != CLP_OP_KFAC_CURV_B))
				continue;
			if (!c->placed) {
				x->layer_last = k; /* not ready while any is unplaced */
				break;
			}
			if (x->layer_last < 0 ||
			    before(&P->it[x->layer_last], c->step, c->j, c->key, c->seq))
				x->layer_last = k;
		}
	}
}

/* Inverse exchanges of split stages: one KFAC_INV_SYNC per layer just before the stage's
 * gradient all-reduce, in the first step after the owners' last inversion of the stage (the
 * same position and order on every member, like KFAC_SYNC); or, where that would need one more
 * step, at the end of the step of the last inversion (after every base op; the members reach it
 * at their step's end, in the same order). Raises *K to include it. */
static clp_status make_inv_syncs(pf *P, int *K)
{
	const clp_sched *b = P->base;

	for (int s = 0; s < b->nstages; s++) {
		const clp_stage_info *si = &b->stages[s];
		int k = 0, g = -1, last = 0, at_end;

		if (si->nlayers < 1 || P->owner[si->first_layer] < 0)
			continue;
		for (int r = 0; r < b->nranks; r++) {
			int ar = pf_find_allreduce(b, r, s, &g);

			for (int i = 0; ar >= 0 && i < P->nit; i++) {
				const pf_item *c = &P->it[i];
				int ks;

				if (c->rank != r || c->op.stage != s || !c->placed ||
				    c->op.kind != CLP_OP_KFAC_INV)
					continue;
				ks = c->j < ar ? c->step : c->step + 1;
				k = ks > k ? ks : k;
				last = c->step > last ? c->step : last;
			}
		}
		at_end = last < k;
		k = at_end ? last : k;
		for (int r = 0; r < b->nranks; r++) {
			int ar = pf_find_allreduce(b, r, s, &g);

			for (int l = si->first_layer; ar >= 0 && l < si->first_layer + si->nlayers; l++)
				CLP_TRY(add_sync(P, CLP_OP_KFAC_INV_SYNC, s, l, g, r, k,
						 at_end ? b->ranks[r].nops : ar, PF_SYNC));
		}
		*K = k + 1 > *K ? k + 1 : *K;
	}
	return CLP_OK;
}

/* Mid-step factor all-reduce (opts.split): where every holder of stage s finished its factors
 * in gaps of one step k, all before any collective of its list or all at the step's end (after
 * every base op), the stage's KFAC_SYNC can follow
 * each holder's last factor item in that gap (P->mid_j[r]: its slot) instead of waiting for
 * the gradient all-reduce, so the inversions start in the same step. *k: that step. */
static int mid_slots(pf *P, int s, int *k)
{
	const clp_sched *b = P->base;
	int step = -1, g, end = 0, at_end;

	for (int r = 0; r < b->nranks; r++) {
		const pf_item *last = NULL;
		int coll = b->ranks[r].nops;

		if (pf_find_allreduce(b, r, s, &g) < 0)
			continue;
		for (int i = 0; i < b->ranks[r].nops && coll == b->ranks[r].nops; i++)
			if (clp_op_is_collective(b->ranks[r].ops[i].kind))
				coll = i;
		for (int i = 0; i < P->nit; i++) {
			const pf_item *c = &P->it[i];

			if (c->rank != r || c->op.stage != s || !c->placed ||
			    (c->op.kind != CLP_OP_KFAC_CURV_A && c->op.kind != CLP_OP_KFAC_CURV_B))
				continue;
			if (!last || before(last, c->step, c->j, c->key, c->seq))
				last = c;
		}
		at_end = last && last->j == b->ranks[r].nops;
		if (!last || last->key != PF_GAP || last->forced || (last->j >= coll && !at_end) ||
		    (step >= 0 && (last->step != step || at_end != end)))
			return 0;
		step = last->step;
		end = at_end;
		P->mid_j[r] = last->j;
	}
	if (step < 0 || step > *k)
		return 0;
	*k = step;
	return 1;
}

/* Factor all-reduces: for each stage with several holders, one KFAC_SYNC per layer just before
 * the stage's gradient all-reduce, in the first step after every holder's last curvature item
 * of the stage. Returns the latest step used in *last. */
static clp_status make_syncs(pf *P, int *last)
{
	const clp_sched *b = P->base;

	for (int s = 0; s < b->nstages; s++) {
		int k = -1, g = -1, any = 0, mid;

		for (int r = 0; r < b->nranks; r++) {
			int ar = pf_find_allreduce(b, r, s, &g);

			if (ar < 0)
				continue;
			any = 1;
			for (int i = 0; i < P->nit; i++) {
				const pf_item *c = &P->it[i];
				int ks;

				if (c->rank != r || c->op.stage != s || !c->placed ||
				    (c->op.kind != CLP_OP_KFAC_CURV_A && c->op.kind != CLP_OP_KFAC_CURV_B))
					continue;
				ks = c->j < ar ? c->step : c->step + 1;
				k = ks > k ? ks : k;
			}
		}
		if (!any)
			continue;
		k = k < 0 ? 0 : k;
		mid = P->mid_sync && mid_slots(P, s, &k);
		for (int r = 0; r < b->nranks; r++) {
			int ar = pf_find_allreduce(b, r, s, &g);
			const clp_stage_info *si = &b->stages[s];

			if (ar < 0)
				continue;
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				CLP_TRY(add_sync(P, CLP_OP_KFAC_SYNC, s, l, g, r, k,
						 mid ? P->mid_j[r] : ar, mid ? PF_GAP : PF_SYNC));
		}
		*last = k > *last ? k : *last;
	}
	for (int i = 0; i < P->nit; i++) { /* inversions follow their layer's all-reduce */
		pf_item *x = &P->it[i];

		x->sync = -1;
		for (int k = 0; x->op.kind == CLP_OP_KFAC_INV && k < P->nit; k++)
			if (P->it[k].op.kind == CLP_OP_KFAC_SYNC && P->it[k].rank == x->rank &&
			    P->it[k].op.layer == x->op.layer && P->it[k].op.stage == x->op.stage)
				x->sync = k;
	}
	return CLP_OK;
}

/* Kept data over time on each rank: from the backward's end to the deferred factor. Where
 * adding an item's data would push a rank over the cap, that item becomes immediate (computed
 * right after its forward / backward). Returns how many were marked; *peak the most kept. */
static int apply_cap(pf *P, int64_t *peak)
{
	uint8_t *ev = calloc((size_t)P->nit + 1, 1); /* bit 1: added, bit 2: removed */
	int marked = 0;

	*peak = 0;
	if (!ev)
		return 0;
	for (int r = 0; r < P->base->nranks; r++) {
		int64_t now = 0;

		for (;;) { /* the earliest event left; removals first at equal times */
			double best = INFINITY;
			int bi = -1, add = 0;

			for (int i = 0; i < P->nit; i++) {
				const pf_item *x = &P->it[i];

				if (x->rank != r || x->immediate || !x->placed || x->keep <= 0 ||
				    (x->op.kind != CLP_OP_KFAC_CURV_A && x->op.kind != CLP_OP_KFAC_CURV_B) ||
				    (x->step == 0 && x->j <= x->bwd))
					continue; /* not kept: before the backward, activations hold it */
				if (!(ev[i] & 1) && P->bwd_end[i] < best)
					best = P->bwd_end[i], bi = i, add = 1;
				if ((ev[i] & 1) && !(ev[i] & 2) && x->t_place <= best)
					best = x->t_place, bi = i, add = 0;
			}
			if (bi < 0)
				break;
			ev[bi] |= add ? 1 : 2;
			if (!add) {
				now -= P->it[bi].keep;
			} else if (P->o->mem_cap >= 0 && now + P->it[bi].keep > P->o->mem_cap) {
				P->it[bi].immediate = 1;
				ev[bi] |= 2;
				marked++;
			} else {
				now += P->it[bi].keep;
				*peak = now > *peak ? now : *peak;
			}
		}
	}
	free(ev);
	return marked;
}

/* Items that fit nowhere (of the inversions, inv = 1, or the curvature): into the ready gap with
 * the most room left in the first K steps (or the end of the last step); they lengthen it. */
static void place_forced(pf *P, int K, int inv)
{
	if (inv)
		link_layers(P);
	for (int i = 0; i < P->nit; i++) {
		pf_item *x = &P->it[i];
		pf_gap *best = NULL;

		if (x->placed || clp_op_is_collective(x->op.kind) ||
		    (x->op.kind == CLP_OP_KFAC_INV) != inv)
			continue;
		for (int gi = 0; gi < P->ngaps; gi++) {
			pf_gap *g = &P->gaps[gi];

			if (g->rank == x->rank && g->step < K && ready(P, x, g) &&
			    (!best || g->t1 - g->t0 - g->used > best->t1 - best->t0 - best->used))
				best = g;
		}
		if (best) {
			place(P, x, best);
		} else {
			x->placed = 1;
			x->step = K - 1;
			x->j = P->base->ranks[x->rank].nops;
			x->key = PF_GAP;
			x->seq = P->seq++;
		}
		x->forced = 1;
	}
}

static clp_status check_base(const clp_sched *b, const clp_pf_opts *o)
{
	if (!o->costs)
		return clp_error(CLP_ERR_INVALID, "pipefisher: needs a cost table with K-FAC times");
	if (o->costs->nstages != b->nstages)
		return clp_error(CLP_ERR_INVALID, "pipefisher: the cost table%s%s has %d stages, the "
				 "schedule %d", o->costs->file[0] ? " " : "", o->costs->file,
				 o->costs->nstages, b->nstages);
	for (int s = 0; s < b->nstages; s++)
		if (b->stages[s].nlayers != o->costs->stages[s].nlayers)
			return clp_error(CLP_ERR_INVALID, "pipefisher: stage %d holds %d layers in the "
					 "schedule, %d in the cost table", s, b->stages[s].nlayers,
					 o->costs->stages[s].nlayers);
	if (b->nsteps != 1)
		return clp_error(CLP_ERR_INVALID, "pipefisher: schedule %s covers %d steps; give one "
				 "step (the pass makes the cycle)", b->name, b->nsteps);
	if (o->max_steps < 1 || o->max_steps > 4096)
		return clp_error(CLP_ERR_INVALID, "pipefisher: max_steps %d out of [1, 4096]",
				 o->max_steps);
	for (int r = 0; r < b->nranks; r++) {
		int opt = 0;

		if (b->ranks[r].mode != CLP_RANK_ORDERED)
			return clp_error(CLP_ERR_UNSUPPORTED, "pipefisher: rank %d runs in dataflow "
					 "mode; the pass needs ranks that run their lists in order", r);
		for (int i = 0; i < b->ranks[r].nops; i++) {
			int k = b->ranks[r].ops[i].kind;

			opt += k == CLP_OP_OPT_STEP;
			if (clp_op_is_kfac(k))
				return clp_error(CLP_ERR_INVALID, "pipefisher: schedule %s already has "
						 "K-FAC items (rank %d op %d)", b->name, r, i);
		}
		if (!opt)
			return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d has no OPT_STEP (the "
					 "preconditioning and inversions need the step's end)", r);
	}
	return CLP_OK;
}

/* opts.split: an inversion longer than the shortest bubble (of 1 ms or more) of its rank is
 * split into its three phases (KFAC_INV with op.mb 0, 1, 2), each run after the one before.
 * Called before the round's collectives are made (items keep their indices). */
static clp_status split_phases(pf *P)
{
	int n = P->nit;

	for (int i = 0; (P->o->split & CLP_PF_SPLIT_PHASES) && i < n; i++) {
		double least = INFINITY;
		int prev = i;

		if (P->it[i].op.kind != CLP_OP_KFAC_INV || P->it[i].op.mb >= 0)
			continue;
		for (int g = 0; g < P->ngaps; g++) {
			double len = P->gaps[g].t1 - P->gaps[g].t0;

			if (P->gaps[g].rank == P->it[i].rank && len >= 1e-3 && len < least)
				least = len;
		}
		if (P->it[i].dur <= least + EPS)
			continue;
		P->it[i].op.mb = 0;
		P->it[i].dur = item_time(P, &P->it[i].op, P->it[i].rank);
		for (int ph = 1; ph < 3; ph++) {
			pf_item x = P->it[i];

			x.op.mb = ph;
			x.prev = prev;
			prev = P->nit;
			CLP_TRY(add_item(P, &x));
		}
	}
	return CLP_OK;
}

/* One round at the current kmax and immediate set: the timeline, then curvature, the factor
 * all-reduces, inversions. *K = the cycle length, or 0 when kmax steps were not enough. */
static clp_status round_at(pf *P, int *K)
{
	int last = -1;

	reset_placement(P);
	CLP_TRY(pf_timeline(P));
	for (int i = 0; i < P->nit; i++)
		if (!clp_op_is_collective(P->it[i].op.kind))
			P->it[i].dur = item_time(P, &P->it[i].op, P->it[i].rank);
	CLP_TRY(split_phases(P));
	mark_forced(P);
	fill(P, CLP_OP_KFAC_CURV_A);
	for (int i = 0; i < P->nit; i++)
		if (!P->it[i].placed && !P->it[i].forced && P->it[i].op.kind != CLP_OP_KFAC_INV) {
			*K = 0;
			return CLP_OK;
		}
	place_forced(P, P->kmax, 0); /* curvature that fits nowhere precedes the inversions */
	CLP_TRY(make_syncs(P, &last));
	if (last >= P->kmax) {
		*K = 0;
		return CLP_OK;
	}
	link_layers(P);
	fill(P, CLP_OP_KFAC_INV);
	*K = last + 1;
	for (int i = 0; i < P->nit; i++) {
		const pf_item *x = &P->it[i];

		if (x->op.kind == CLP_OP_KFAC_INV && !x->placed && !x->forced) {
			*K = 0;
			return CLP_OK;
		}
		if (x->placed && x->step + 1 > *K)
			*K = x->step + 1;
	}
	if (*K < 1)
		*K = 1;
	place_forced(P, *K, 1);
	for (int i = 0; i < P->nit; i++)
		if (P->it[i].placed && P->it[i].step + 1 > *K)
			*K = P->it[i].step + 1;
	return make_inv_syncs(P, K);
}

static void report(const pf *P, int K, int64_t peak, clp_pf_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->K = K;
	for (int g = 0; g < P->ngaps; g++)
		if (P->gaps[g].t1 - P->gaps[g].t0 > rep->max_gap_s)
			rep->max_gap_s = P->gaps[g].t1 - P->gaps[g].t0;
	for (int s = 0; s < P->base->nstages; s++)
		rep->split_stages += P->base->stages[s].nlayers > 0 &&
				     P->owner[P->base->stages[s].first_layer] >= 0;
	rep->peak_kept = peak;
	for (int i = 0; i < P->nit; i++) {
		const pf_item *x = &P->it[i];

		rep->items++;
		rep->immediate += x->immediate;
		rep->forced += x->forced;
		rep->kfac_s += clp_op_is_collective(x->op.kind) ? 0 : x->dur;
		rep->exchanges += x->op.kind == CLP_OP_KFAC_INV_SYNC;
		if (!clp_op_is_collective(x->op.kind) && x->dur > rep->max_item_s)
			rep->max_item_s = x->dur;
	}
}

static clp_status run_pass(const clp_sched *base, const clp_pf_opts *o, int mid_sync,
			   clp_sched **out, clp_pf_report *rep)
{
	pf P = {0};
	clp_sched *s = NULL, *rb = NULL;
	pf_origin *org = NULL;
	int K = 0;
	int64_t peak = 0;
	clp_status st;

	P.base = base;
	P.o = o;
	P.mid_sync = mid_sync;
	P.mid_j = calloc((size_t)base->nranks + 1, sizeof(int));
	P.kind = calloc((size_t)base->nranks + 1, sizeof(int));
	P.speed = calloc((size_t)base->nranks + 1, sizeof(double));
	P.idle = calloc((size_t)base->nranks + 1, sizeof(double));
	P.owner = calloc((size_t)base->nlayers + 1, sizeof(int));
	st = P.kind && P.speed && P.idle && P.owner && P.mid_j
		     ? pf_base_idle(&P)
		     : clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
	if (st == CLP_OK)
		st = assign_owners(&P);
	if (st == CLP_OK)
		st = make_items(&P);
	P.kmax = o->max_steps < 4 ? o->max_steps : 4;
	/* rounds: more steps while the work does not fit; more immediate factors while the
	 * kept data exceeds the cap (both only grow, so this ends) */
	while (st == CLP_OK) {
		st = round_at(&P, &K);
		if (st != CLP_OK)
			break;
		if (!K) {
			if (P.kmax >= o->max_steps) {
				st = clp_error(CLP_ERR_INVALID, "pipefisher: the K-FAC work does not "
					       "fit in the bubbles of %d steps (max_steps)",
					       o->max_steps);
				break;
			}
			P.kmax = 2 * P.kmax < o->max_steps ? 2 * P.kmax : o->max_steps;
			continue;
		}
		if (!apply_cap(&P, &peak))
			break;
	}
	for (int i = 0; st == CLP_OK && i < P.nit; i++)
		P.it[i].in_tmpl = P.it[i].placed;
	if (st == CLP_OK)
		st = pf_build(&P, K, 0, o->precondition, &s, &org);
	if (st == CLP_OK)
		st = clp_sched_validate(s, 1);
	if (st == CLP_OK) {
		report(&P, K, peak, rep);
		st = pf_simulate(&P, s, &rep->step_s, &rep->util);
		rep->step_s /= K;
	}
	if (st == CLP_OK) { /* the base over the same number of steps */
		for (int i = 0; i < P.nit; i++)
			P.it[i].in_tmpl = 0;
		free(org);
		org = NULL;
		st = pf_build(&P, K, 0, 0, &rb, &org);
		if (st == CLP_OK)
			st = pf_simulate(&P, rb, &rep->base_step_s, &rep->base_util);
		rep->base_step_s /= K;
		rep->added_s = rep->step_s - rep->base_step_s;
		if (st == CLP_OK)
			packing_bound(&P, rep);
	}
	clp_sched_free(rb);
	free(org);
	free(P.it);
	free(P.gaps);
	free(P.kind);
	free(P.speed);
	free(P.bwd_end);
	free(P.idle);
	free(P.owner);
	free(P.mid_j);
	if (st != CLP_OK) {
		clp_sched_free(s);
		return st;
	}
	*out = s;
	return CLP_OK;
}

clp_status clp_pipefisher(const clp_sched *base, const clp_pf_opts *o, clp_sched **out,
			  clp_pf_report *rep)
{
	clp_pf_report dummy;
	clp_status st;

	*out = NULL;
	rep = rep ? rep : &dummy;
	CLP_TRY(check_base(base, o));
	st = run_pass(base, o, (o->split & CLP_PF_SPLIT_SYNC) != 0, out, rep);
	if (st != CLP_OK && (o->split & CLP_PF_SPLIT_SYNC)) /* mid-step all-reduces the validator refused: without */
		st = run_pass(base, o, 0, out, rep);
	return st;
}

clp_status clp_pipefisher_check(const clp_sched *base, const clp_sched *cycle)
{
	if (cycle->nranks != base->nranks || cycle->nstages != base->nstages ||
	    cycle->nmb != base->nmb || cycle->npipes != base->npipes ||
	    cycle->nreplicas != base->nreplicas || cycle->ngroups < base->ngroups ||
	    base->nsteps != 1)
		return clp_error(CLP_ERR_INVALID, "pipefisher: the cycle (%d ranks, %d stages, %d "
				 "micro-batches, %d pipelines, %d replicas) is not made for this "
				 "pipeline (%d, %d, %d, %d, %d)", cycle->nranks, cycle->nstages,
				 cycle->nmb, cycle->npipes, cycle->nreplicas, base->nranks,
				 base->nstages, base->nmb, base->npipes, base->nreplicas);
	for (int i = 0; i < base->nstages; i++)
		if (cycle->stages[i].first_layer != base->stages[i].first_layer ||
		    cycle->stages[i].nlayers != base->stages[i].nlayers ||
		    cycle->stages[i].embed != base->stages[i].embed ||
		    cycle->stages[i].head != base->stages[i].head)
			return clp_error(CLP_ERR_INVALID, "pipefisher: the cycle's stage %d holds layers "
					 "%d..+%d, this pipeline's %d..+%d", i,
					 cycle->stages[i].first_layer, cycle->stages[i].nlayers,
					 base->stages[i].first_layer, base->stages[i].nlayers);
	for (int r = 0; r < base->nranks; r++) {
		const clp_rank_prog *b = &base->ranks[r], *c = &cycle->ranks[r];
		int j = 0, t = 0;

		for (int i = 0; i < c->nops; i++) {
			clp_op want;

			if (clp_op_is_kfac(c->ops[i].kind))
				continue;
			if (j == b->nops) {
				j = 0;
				t++;
			}
			want = b->ops[j++];
			want.step = (uint16_t)t;
			if (memcmp(&want, &c->ops[i], sizeof(want))) {
				char x[160], y[160];

				clp_op_describe(&c->ops[i], x, sizeof(x));
				clp_op_describe(&want, y, sizeof(y));
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d of the cycle is "
						 "%s (step %d); this pipeline's schedule has %s (step %d) "
						 "there", r, i, x, c->ops[i].step, y, t);
			}
		}
		if (t + 1 != cycle->nsteps || j != b->nops)
			return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d: the cycle does not hold "
					 "%d whole steps of this pipeline's schedule", r, cycle->nsteps);
	}
	return CLP_OK;
}
