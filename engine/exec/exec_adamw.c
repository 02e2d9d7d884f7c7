/* AdamW, the executor's default optimizer (exec_optim.h), on the executor's services
 * (exec_env.h): its state is the stages' own moments; each OPT_STEP updates every local copy of
 * its stage with the step's clp_nn_adamw_hp, dividing the loss scale out of the gradients. */
#include "engine/exec/exec_env.h"

static clp_status adamw_stage_step(clp_exec *e, void *state, int stage, const void *settings)
{
	const clp_nn_adamw_hp *hp = settings;
	clp_exec_counts c;

	(void)state;
	clp_exec_step_counts(e, &c);
	for (int k = 0; k < clp_exec_nstages(e); k++)
		if (clp_exec_stage_id(e, k) == stage) {
			clp_stage *st = clp_exec_stage(e, k, NULL);

			CLP_TRY(clp_stage_adamw_scaled(st, hp, clp_stage_stats(st),
						       1.0f / c.loss_scale));
		}
	return CLP_OK;
}

const clp_exec_optim clp_exec_adamw = {
	.name = "AdamW",
	.dataflow = 1,
	.stage_step = adamw_stage_step,
};
