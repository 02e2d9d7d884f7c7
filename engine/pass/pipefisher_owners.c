/* PipeFisher's split ownership (opts.split: which holder of a stage inverts and preconditions
 * each of its layers) and the packing bound of the report. */
#include <math.h>
#include <stdlib.h>

#include "engine/pass/pipefisher_internal.h"

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
		if (pf_per_step(P) && (!(P->o->split & CLP_PF_SPLIT_PREC) || si->nlayers < 1 ||
				       P->owner[si->first_layer] < 0))
			*prec += pf_precond_time(P, o->stage, -1, r);
		if (si->nlayers < 1 || P->owner[si->first_layer] < 0)
			*work += si->nlayers * pf_layer_inv_time(P, o->stage, r);
	}
}

/* K on rank r from its work and idle time per step (a large value when no idle time is left). */
static double ratio(double work, double idle)
{
	return idle > PF_EPS ? work / idle : 1e30 * (1 + work);
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
clp_status pf_assign_owners(pf *P)
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
		int nh, pre = (P->o->split & CLP_PF_SPLIT_PREC) && pf_per_step(P);

		if (si->nlayers < 1 || P->owner[si->first_layer] < 0)
			continue;
		nh = holders(b, s, hold);
		for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
			int best = -1;
			double bv = 0;

			for (int h = 0; h < nh; h++) {
				int r = hold[h];
				double v = ratio(work[r] + pf_layer_inv_time(P, s, r),
						 P->idle[r] - prec[r] - pre * pf_precond_time(P, s, l, r));

				/* equal bounds (no inversions: Muon's work is per step) go to the
				 * holder with the least preconditioning so far */
				if (best < 0 || v < bv - PF_EPS ||
				    (v <= bv + PF_EPS && prec[r] < prec[best] - PF_EPS))
					best = r, bv = v;
			}
			P->owner[l] = best;
			work[best] += pf_layer_inv_time(P, s, best);
			prec[best] += pre * pf_precond_time(P, s, l, best);
		}
	}
	free(work);
	free(prec);
	free(hold);
	return CLP_OK;
}

/* The packing bound (clp_pf_report.bound) from the items made, the ownership and the time the
 * cycle adds to a step (rep->added_s: a longer step leaves every rank more idle time). */
void pf_packing_bound(const pf *P, clp_pf_report *rep)
{
	const clp_sched *b = P->base;

	rep->bound = 1;
	rep->bound_rank = -1;
	for (int r = 0; r < b->nranks; r++) {
		double work = 0, prec = 0, k, idle;

		for (int i = 0; i < P->nit; i++)
			if (P->it[i].rank == r && !clp_op_is_collective(P->it[i].op.kind))
				work += pf_item_time(P, &P->it[i].op, r);
		for (int i = 0; pf_per_step(P) && i < b->ranks[r].nops; i++) {
			const clp_op *o = &b->ranks[r].ops[i];
			const clp_stage_info *si = &b->stages[o->stage >= 0 ? o->stage : 0];

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			if (!(P->o->split & CLP_PF_SPLIT_PREC) || si->nlayers < 1 ||
			    P->owner[si->first_layer] < 0) {
				prec += pf_precond_time(P, o->stage, -1, r);
				continue;
			}
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				prec += P->owner[l] == r ? pf_precond_time(P, o->stage, l, r) : 0;
		}
		idle = P->idle[r] + (rep->added_s > 0 ? rep->added_s : 0) - prec;
		if (idle <= PF_EPS && work > 0) {
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
