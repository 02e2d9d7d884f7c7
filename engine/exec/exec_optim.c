/* The optimizer interface (exec_optim.h): installing an optimizer and the hooks as the
 * interpreters call them (AdamW, the default, is exec_adamw.c). */
#include "engine/exec/exec_internal.h"

clp_status clp_exec_set_optim(clp_exec *e, const clp_exec_optim *ops, void *state)
{
	if (!ops || !ops->stage_step) {
		if (ops && ops->free)
			ops->free(e, state);
		return clp_error(CLP_ERR_INVALID, "an executor optimizer needs a stage_step");
	}
	if (e->opt && e->opt->free)
		e->opt->free(e, e->opt_state);
	e->opt = ops;
	e->opt_state = state;
	return CLP_OK;
}

const clp_exec_optim *clp_exec_optim_ops(const clp_exec *e)
{
	return e->opt;
}

void *clp_exec_optim_state(const clp_exec *e)
{
	return e->opt_state;
}

clp_status clp_exec_optim_save(clp_exec *e, clp_ckpt_writer *w)
{
	return e->opt->save ? e->opt->save(e, e->opt_state, w) : CLP_OK;
}

clp_status clp_exec_optim_load(clp_exec *e, clp_ckpt *c)
{
	return e->opt->load ? e->opt->load(e, e->opt_state, c) : CLP_OK;
}

void exec_optim_free(clp_exec *e)
{
	if (e->opt && e->opt->free)
		e->opt->free(e, e->opt_state);
	e->opt = NULL;
	e->opt_state = NULL;
}

clp_status exec_optim_step_begin(clp_exec *e, const clp_exec_data *d)
{
	return e->opt->step_begin ? e->opt->step_begin(e, e->opt_state, d) : CLP_OK;
}

clp_status exec_optim_after_bwd(clp_exec *e, const clp_op *op)
{
	return e->opt->after_bwd ? e->opt->after_bwd(e, e->opt_state, op) : CLP_OK;
}

int exec_optim_skips(clp_exec *e, const clp_op *op)
{
	return e->opt->skip_item && e->opt->skip_item(e->opt_state, op);
}

clp_status exec_optim_item(clp_exec *e, const clp_op *op)
{
	char what[160];

	if (e->opt->item)
		return e->opt->item(e, e->opt_state, op);
	clp_op_describe(op, what, sizeof(what));
	if (!exec_find_stage(e, op->stage))
		return clp_error(CLP_ERR_STATE, "rank %d: %s: the rank does not hold the stage",
				 e->rank, what);
	return clp_error(CLP_ERR_INVALID, "rank %d: %s: the schedule has K-FAC items; train it "
			 "with optim.name = \"kfac\"", e->rank, what);
}

clp_status exec_optim_stage_step(clp_exec *e, int stage, const void *set)
{
	return e->opt->stage_step(e, e->opt_state, stage, set);
}

clp_status exec_optim_prep(clp_exec *e, const clp_op *op, const void *set)
{
	return e->opt->prep ? e->opt->prep(e, e->opt_state, op, set) : CLP_OK;
}

clp_status exec_optim_step_end(clp_exec *e)
{
	return e->opt->step_end ? e->opt->step_end(e, e->opt_state) : CLP_OK;
}
