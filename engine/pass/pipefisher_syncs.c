/* PipeFisher's collectives: the factor all-reduces of stages with several holders (at the
 * gradient all-reduce, or mid-step where every holder finished its factors in one gap) and the
 * inverse exchanges of split stages. */
#include "engine/pass/pipefisher_internal.h"

/* Inverse exchanges of split stages: one KFAC_INV_SYNC per layer just before the stage's
 * gradient all-reduce, in the first step after the owners' last inversion of the stage (the
 * same position and order on every member, like KFAC_SYNC); or, where that would need one more
 * step, at the end of the step of the last inversion (after every base op; the members reach it
 * at their step's end, in the same order). Raises *K to include it. Delayed Muon: in its one
 * step, before the gradient all-reduce (its owner's NS items come before, pf_make_items). */
clp_status pf_make_inv_syncs(pf *P, int *K)
{
	const clp_sched *b = P->base;

	for (int s = 0; P->o->work != CLP_PF_WORK_MUON && s < b->nstages; s++) {
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
		if (P->o->work == CLP_PF_WORK_MUON_DELAY)
			k = at_end = 0;
		for (int r = 0; r < b->nranks; r++) {
			int ar = pf_find_allreduce(b, r, s, &g);

			for (int l = si->first_layer; ar >= 0 && l < si->first_layer + si->nlayers;
			     l++) {
				CLP_TRY(pf_add_sync(P, CLP_OP_KFAC_INV_SYNC, s, l, g, r, k,
						 at_end ? b->ranks[r].nops : ar, PF_SYNC));
				if (P->o->work == CLP_PF_WORK_MUON_DELAY) /* the layer's directions */
					P->it[P->nit - 1].op.bytes = P->o->costs->delay_layer_bytes;
			}
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
			if (!last || pf_before(last, c->step, c->j, c->key, c->seq))
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
clp_status pf_make_syncs(pf *P, int *last)
{
	const clp_sched *b = P->base;

	for (int s = 0; P->o->work == CLP_PF_WORK_KFAC && s < b->nstages; s++) {
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
				CLP_TRY(pf_add_sync(P, CLP_OP_KFAC_SYNC, s, l, g, r, k,
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
