/* The executor's optimizer interface: the points of a step where an optimizer acts. The
 * interpreters (exec_run.c, exec_dataflow.c) call these hooks and nothing else of an optimizer,
 * so a new optimizer is a new table and its own file, without an edit to an interpreter. A
 * hooks file uses the executor only through exec.h and its services, exec_env.h (never
 * exec_internal.h).
 *
 * Two implementations: AdamW (exec_adamw.c; the default, state in the stages' own blocks) and
 * K-FAC (exec_kfac.c, installed by clp_exec_kfac, exec_kfac.h; with PipeFisher items in the
 * schedule). A hook left NULL does nothing, except `item`, where NULL means the optimizer has
 * no scheduled items and a schedule with them is refused.
 *
 * Settings: what an optimizer is made with (K-FAC's clp_kfac_opts) is its own installer's
 * argument; what changes per step (the learning rate, the step count) comes as `settings`, an
 * object of the type the optimizer defines, given to clp_exec_step and passed through to
 * stage_step untouched. AdamW and K-FAC take a clp_nn_adamw_hp (K-FAC: its base optimizer's,
 * the K-FAC layers' rate scaled by its lr_ratio). */
#ifndef CLP_EXEC_EXEC_OPTIM_H
#define CLP_EXEC_EXEC_OPTIM_H

#include "engine/exec/exec.h"
#include "engine/io/checkpoint.h"

typedef struct clp_exec_optim {
	const char *name; /* for messages: "AdamW", "K-FAC" */
	int dataflow;     /* also runs on dataflow (SkipPipe) ranks */
	/* The start of a step, after the gradients are zeroed. */
	clp_status (*step_begin)(clp_exec *e, void *state, const clp_exec_data *d);
	/* After a backward (BWD or BWD_B) of op has been enqueued. */
	clp_status (*after_bwd)(clp_exec *e, void *state, const clp_op *op);
	/* 1 when the schedule's optimizer item op is not run in this step. */
	int (*skip_item)(void *state, const clp_op *op);
	/* A scheduled optimizer item of the list (KFAC_* ops). */
	clp_status (*item)(clp_exec *e, void *state, const clp_op *op);
	/* The update of every local copy of IR stage `stage`; its gradients are final and each
	 * stage's statistics buffer holds the clipping scale (clp_stage_stats); settings: the
	 * step's, as clp_exec_step got them. */
	clp_status (*stage_step)(clp_exec *e, void *state, int stage, const void *settings);
	/* An OPT_PREP op of IR stage op->stage (clp_sched_place_prep; op->flags has
	 * CLP_OPF_BUBBLE when it runs in other ranks' cool-down): the gradients of the stage's
	 * layers are final (its backwards and reductions enqueued) but the norm, the clipping
	 * factor and the non-finite flag are not known yet; whatever it computes must leave the
	 * step's result the same bits as stage_step alone (NULL: nothing to do early). */
	clp_status (*prep)(clp_exec *e, void *state, const clp_op *op, const void *settings);
	/* The end of a step, after every op ran and the device is idle. */
	clp_status (*step_end)(clp_exec *e, void *state);
	/* The optimizer's own state in a checkpoint, beyond the stages' tensors. */
	clp_status (*save)(clp_exec *e, void *state, clp_ckpt_writer *w);
	clp_status (*load)(clp_exec *e, void *state, clp_ckpt *c);
	void (*free)(clp_exec *e, void *state);
} clp_exec_optim;

/* AdamW: the default of every executor. */
extern const clp_exec_optim clp_exec_adamw;

/* Replace the executor's optimizer (the old one's state is freed); state belongs to the
 * executor from here on, freed by ops->free (also when this call fails). Before the first step. */
clp_status clp_exec_set_optim(clp_exec *e, const clp_exec_optim *ops, void *state);
/* The optimizer running, and its state. */
const clp_exec_optim *clp_exec_optim_ops(const clp_exec *e);
void *clp_exec_optim_state(const clp_exec *e);

/* The optimizer's state into / out of a checkpoint (nothing for AdamW). */
clp_status clp_exec_optim_save(clp_exec *e, clp_ckpt_writer *w);
clp_status clp_exec_optim_load(clp_exec *e, clp_ckpt *c);

#endif
