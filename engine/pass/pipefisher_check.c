/* Whether a saved PipeFisher cycle fits a pipeline (clp_pipefisher_check, pipefisher.h): used
 * when training reuses a cycle instead of running the pass. */
#include <string.h>

#include "engine/pass/pipefisher.h"

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
