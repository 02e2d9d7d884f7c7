/* Whether a saved PipeFisher cycle fits a pipeline (clp_pipefisher_check, pipefisher.h): used
 * when training reuses a cycle instead of running the pass. */
#include <string.h>

#include "engine/pass/pipefisher.h"
#include "engine/sched/sched.h"

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

/* Whether phase `phase` of the refresh (st, l, f) follows op i on the rank. */
static int later_phase(const clp_rank_prog *p, int i, int st, int l, int f, int phase)
{
	for (int j = i + 1; j < p->nops; j++)
		if (p->ops[j].kind == CLP_OP_KFAC_INV && p->ops[j].stage == st &&
		    p->ops[j].layer == l && p->ops[j].factor == f && p->ops[j].mb == phase)
			return 1;
	return 0;
}

/* Rank r's ops of Shampoo's layer l, factor f of stage st (phases in order) after its
 * OPT_STEP of step 0 at index opt: how many whole items (a phased one counts once). */
static int count_refresh(const clp_rank_prog *p, int opt, int st, int l, int f, int *bad)
{
	int n = 0, phase = 0;

	for (int i = 0; i < p->nops; i++) {
		const clp_op *o = &p->ops[i];

		if (o->kind != CLP_OP_KFAC_INV || o->stage != st || o->layer != l || o->factor != f)
			continue;
		if (i < opt || (o->mb >= 0 && o->mb != phase)) {
			*bad = i;
			return -1;
		}
		if (o->mb < 0) {
			n++;
			continue;
		}
		phase++;
		if (!later_phase(p, i, st, l, f, phase)) { /* whole at its last phase */
			n++;
			phase = 0;
		}
	}
	return n;
}

clp_status clp_pipefisher_check_work(const clp_sched *cycle, int work, int nfactors)
{
	const char *who = work == CLP_PF_WORK_SHAMPOO ? "Shampoo" : "Muon";

	if (work != CLP_PF_WORK_SHAMPOO && work != CLP_PF_WORK_MUON)
		return CLP_OK;
	for (int r = 0; r < cycle->nranks; r++) {
		const clp_rank_prog *p = &cycle->ranks[r];

		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];
			const clp_stage_info *si;

			if (clp_op_is_kfac(o->kind) && o->kind != CLP_OP_KFAC_PRECOND &&
			    (work == CLP_PF_WORK_MUON || o->kind != CLP_OP_KFAC_INV))
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d is %s, not an "
						 "item of %s's work", r, i, clp_op_kind_name(o->kind),
						 who);
			if (work != CLP_PF_WORK_SHAMPOO || o->kind != CLP_OP_OPT_STEP || o->step != 0)
				continue;
			si = &cycle->stages[o->stage];
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				for (int f = nfactors > 0 ? 1 : 0; f <= (nfactors > 0 ? nfactors : 0);
				     f++) {
					int bad = -1, n = count_refresh(p, i, o->stage, l, f, &bad);

					if (n == 1)
						continue;
					if (n < 0)
						return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d: "
								 "Shampoo's refresh of stage %d layer %d "
								 "factor %d before the stage's OPT_STEP "
								 "of the cycle's first step (op %d) or "
								 "its phases out of order", r, bad,
								 o->stage, l, f, i);
					return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d has %d "
							 "refreshes of stage %d layer %d factor %d per "
							 "cycle; Shampoo's cycle needs one", r, n,
							 o->stage, l, f);
				}
		}
	}
	return CLP_OK;
}
