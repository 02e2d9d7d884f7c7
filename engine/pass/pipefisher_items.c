/* PipeFisher's work items (pipefisher.h): the curvature items of every forward and the
 * inversions of every layer held, the collectives placed with them, an inversion split into its
 * phases, and the time the simulator charges each. */
#include <math.h>
#include <stdlib.h>

#include "engine/pass/pipefisher_internal.h"

clp_status pf_add_item(pf *P, const pf_item *x)
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
clp_status pf_add_sync(pf *P, clp_op_kind kind, int s, int l, int g, int r, int step, int j,
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
	return pf_add_item(P, &x);
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
double pf_item_time(const pf *P, const clp_op *op, int r)
{
	const clp_costs *c = P->o->costs;
	const clp_stage_cost *sc = &c->stages[op->stage];
	double per_layer = sc->nlayers > 0 ? 1.0 / sc->nlayers : 1.0;
	int t = op->kind == CLP_OP_KFAC_CURV_A   ? CLP_COST_KFAC_CURV_A
		: op->kind == CLP_OP_KFAC_CURV_B ? CLP_COST_KFAC_CURV_B
						 : CLP_COST_KFAC_INV;

	if (op->kind == CLP_OP_KFAC_INV && op->factor && op->factor <= c->kfac_nfactors)
		per_layer *= c->kfac_share[op->factor - 1];
	if (op->kind == CLP_OP_KFAC_INV && op->mb >= 0) /* one phase (as sim_op_time charges) */
		per_layer /= c->inv_phases > 0 ? c->inv_phases : 3;
	return per_layer * clp_costs_time(c, op->stage, t, P->kind[r], P->speed[r]);
}

/* Preconditioning per step of stage s on rank r: the whole stage (layer -1) or one layer. */
double pf_precond_time(const pf *P, int s, int layer, int r)
{
	const clp_stage_cost *sc = &P->o->costs->stages[s];
	double part = layer >= 0 && sc->nlayers > 0 ? 1.0 / sc->nlayers : 1.0;

	return part * clp_costs_time(P->o->costs, s, CLP_COST_KFAC_PRECOND, P->kind[r], P->speed[r]);
}

/* Inversion of every factor of one layer of stage s on rank r. */
double pf_layer_inv_time(const pf *P, int s, int r)
{
	const clp_stage_cost *sc = &P->o->costs->stages[s];

	return clp_costs_time(P->o->costs, s, CLP_COST_KFAC_INV, P->kind[r], P->speed[r]) /
	       (sc->nlayers > 0 ? sc->nlayers : 1);
}

/* Curvature items for every forward of the base (K-FAC), and per layer and factor an inversion
 * (K-FAC; Shampoo: after the stage's OPT_STEP, x.dep, in the cycle's first step; delayed Muon:
 * the NS of a matrix, before x.dep: the stage's OPT_STEP, or for a split stage its gradient
 * all-reduce, where the exchange goes). */
clp_status pf_make_items(pf *P)
{
	const clp_sched *b = P->base;
	int nf = P->o->costs->kfac_nfactors > 0 ? P->o->costs->kfac_nfactors : 1;
	int kfac = P->o->work == CLP_PF_WORK_KFAC;

	if (P->o->work == CLP_PF_WORK_MUON)
		return CLP_OK; /* per-step work only (KFAC_PRECOND, pf_build) */
	for (int r = 0; r < b->nranks; r++) {
		const clp_rank_prog *p = &b->ranks[r];

		for (int i = 0; kfac && i < p->nops; i++) {
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
					CLP_TRY(pf_add_item(P, &x));
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
					x.dep = kfac ? -1 : i; /* Shampoo: its statistics' snapshot */
					if (P->o->work == CLP_PF_WORK_MUON_DELAY && P->owner[l] >= 0) {
						int g, ar = pf_find_allreduce(b, r, o->stage, &g);

						x.dep = ar >= 0 ? ar : i;
					}
					CLP_TRY(pf_add_item(P, &x));
				}
		}
	}
	return CLP_OK;
}

/* opts.split: an inversion longer than the shortest bubble (of 1 ms or more) of its rank is
 * split into its phases (KFAC_INV with op.mb 0, 1, 2; the cost table's inv_phases of them
 * where set), each run after the one before.
 * Called before the round's collectives are made (items keep their indices). */
clp_status pf_split_phases(pf *P)
{
	int n = P->nit;
	int nph = P->o->costs->inv_phases > 0 ? P->o->costs->inv_phases : 3;

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
		if (P->it[i].dur <= least + PF_EPS)
			continue;
		P->it[i].op.mb = 0;
		P->it[i].dur = pf_item_time(P, &P->it[i].op, P->it[i].rank);
		for (int ph = 1; ph < nph; ph++) {
			pf_item x = P->it[i];

			x.op.mb = ph;
			x.prev = prev;
			prev = P->nit;
			CLP_TRY(pf_add_item(P, &x));
		}
	}
	return CLP_OK;
}
