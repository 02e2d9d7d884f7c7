/* PipeFisher's placement: one round of first-fit placement of the items into the simulated
 * gaps of the template, the items that fit nowhere, and the cycle length K it gives. */
#include <math.h>

#include "engine/pass/pipefisher_internal.h"

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
int pf_before(const pf_item *a, int step, int j, int key, int seq)
{
	if (a->step != step)
		return a->step < step;
	if (a->j != j)
		return a->j < j;
	if (a->key != key)
		return a->key < key;
	return a->seq < seq;
}

/* May x go into gap g (a gap item, after everything placed so far)? Delayed Muon: in the
 * cycle's (only) step, before x->dep, after its phase before. */
static int ready(const pf *P, const pf_item *x, const pf_gap *g)
{
	if (P->o->work == CLP_PF_WORK_MUON_DELAY)
		return g->step == 0 && g->j <= x->dep &&
		       (x->prev < 0 || (P->it[x->prev].placed &&
					pf_before(&P->it[x->prev], g->step, g->j, PF_GAP, P->seq)));
	if (x->op.kind != CLP_OP_KFAC_INV)
		return g->step > 0 || g->j > x->dep;
	if (x->prev >= 0)
		return P->it[x->prev].placed &&
		       pf_before(&P->it[x->prev], g->step, g->j, PF_GAP, P->seq);
	if (P->o->work != CLP_PF_WORK_KFAC) /* Shampoo: after the snapshot (the OPT_STEP) */
		return g->step > 0 || g->j > x->dep;
	if (x->layer_last < 0 || !P->it[x->layer_last].placed)
		return 0;
	if (!pf_before(&P->it[x->layer_last], g->step, g->j, PF_GAP, P->seq))
		return 0;
	return x->sync < 0 || pf_before(&P->it[x->sync], g->step, g->j, PF_GAP, P->seq);
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
	if (P->serial)
		return;
	for (int gi = 0; gi < P->ngaps; gi++) {
		pf_gap *g = &P->gaps[gi];

		for (int i = 0; i < P->nit; i++) {
			pf_item *x = &P->it[i];
			int kind_ok = kind == CLP_OP_KFAC_INV ? x->op.kind == CLP_OP_KFAC_INV
							      : x->op.kind == CLP_OP_KFAC_CURV_A ||
									x->op.kind == CLP_OP_KFAC_CURV_B;

			if (!kind_ok || x->placed || x->forced || x->rank != g->rank)
				continue;
			if (x->dur <= g->t1 - g->t0 - g->used + PF_EPS && ready(P, x, g))
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
		x->forced = x->dur > most + PF_EPS;
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
			    pf_before(&P->it[x->layer_last], c->step, c->j, c->key, c->seq))
				x->layer_last = k;
		}
	}
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

/* Delayed Muon's NS items that fit no gap before their OPT_STEP (or exchange): before it, in
 * item order (a matrix's phases in order), lengthening the step unless they fill a wait: ahead
 * of the collectives and OPT_STEPs the rank's list has right before it (its gradient
 * all-reduces, the norm's), so they run while the rank would wait for its peers there. K = 1. */
static void force_before_dep(pf *P)
{
	for (int i = 0; i < P->nit; i++) {
		pf_item *x = &P->it[i];
		const clp_op *ops = P->base->ranks[x->rank].ops;
		int j = x->dep;

		if (x->placed || clp_op_is_collective(x->op.kind))
			continue;
		while (j > 0 && (clp_op_is_collective(ops[j - 1].kind) ||
				 ops[j - 1].kind == CLP_OP_OPT_STEP))
			j--;
		x->placed = x->forced = 1;
		x->step = 0;
		x->j = j;
		x->key = PF_GAP;
		x->seq = P->seq++;
	}
}

/* One round at the current kmax and immediate set: the timeline, then curvature, the factor
 * all-reduces, inversions. *K = the cycle length, or 0 when kmax steps were not enough. */
clp_status pf_round(pf *P, int *K)
{
	int last = -1;

	reset_placement(P);
	CLP_TRY(pf_timeline(P));
	for (int i = 0; i < P->nit; i++)
		if (!clp_op_is_collective(P->it[i].op.kind))
			P->it[i].dur = pf_item_time(P, &P->it[i].op, P->it[i].rank);
	CLP_TRY(pf_split_phases(P));
	mark_forced(P);
	fill(P, CLP_OP_KFAC_CURV_A);
	for (int i = 0; i < P->nit; i++)
		if (!P->it[i].placed && !P->it[i].forced && P->it[i].op.kind != CLP_OP_KFAC_INV) {
			*K = 0;
			return CLP_OK;
		}
	place_forced(P, P->kmax, 0); /* curvature that fits nowhere precedes the inversions */
	CLP_TRY(pf_make_syncs(P, &last));
	if (last >= P->kmax) {
		*K = 0;
		return CLP_OK;
	}
	link_layers(P);
	fill(P, CLP_OP_KFAC_INV);
	if (P->o->work == CLP_PF_WORK_MUON_DELAY) {
		force_before_dep(P);
		*K = 1;
		return pf_make_inv_syncs(P, K);
	}
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
	if (*K < P->o->min_steps) /* kmax >= min_steps (place_items) */
		*K = P->o->min_steps;
	place_forced(P, *K, 1);
	for (int i = 0; i < P->nit; i++)
		if (P->it[i].placed && P->it[i].step + 1 > *K)
			*K = P->it[i].step + 1;
	return pf_make_inv_syncs(P, K);
}
