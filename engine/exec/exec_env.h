/* The executor's services to an optimizer: everything an optimizer's hooks file (exec_optim.h)
 * may use of the executor besides exec.h, so that no optimizer reads the executor's state
 * (exec_internal.h belongs to the interpreters and the primitives alone). AdamW
 * (exec_adamw.c) and K-FAC (exec_kfac.c) are written on these and nothing else.
 *
 * - the schedule, this rank and the device: clp_exec_sched, clp_exec_rank, clp_exec_ctx;
 * - the local stages: clp_exec_nstages, clp_exec_stage, clp_exec_stage_id (exec.h), and below
 *   clp_exec_find_stage (a stage of an op) and clp_exec_slot (a micro-batch's activations);
 * - the step's counts: clp_exec_step_counts;
 * - sums over a schedule group: clp_exec_group_comm (the communicator of a group, chosen in
 *   one place), clp_exec_group_sum (host values) and clp_exec_sum_bufs (device buffers: device
 *   -> host -> all-reduce -> device, the one copy of that path; the gradient all-reduces of
 *   the interpreters use it too);
 * - waiting: clp_exec_drain. */
#ifndef CLP_EXEC_EXEC_ENV_H
#define CLP_EXEC_EXEC_ENV_H

#include "engine/exec/exec.h"
#include "engine/exec/exec_optim.h"

/* The schedule the executor runs (borrowed), this rank, the device context. */
const clp_sched *clp_exec_sched(const clp_exec *e);
int clp_exec_rank(const clp_exec *e);
clp_cl_ctx *clp_exec_ctx(const clp_exec *e);

/* The local stage running (stage, pipe), or -1; pipe < 0: the first local copy of stage. */
int clp_exec_find_stage(const clp_exec *e, int stage, int pipe);
/* The activation slot of local stage i holding micro-batch mb (-1: none). */
int clp_exec_slot(const clp_exec *e, int i, int mb);

/* The step's counts, fixed for the executor's life except the loss scale. */
typedef struct clp_exec_counts {
	size_t rows;      /* token rows of a micro-batch (B x T) */
	int nmb;          /* micro-batches of a replica in a step (the schedule's M) */
	int nreplicas;    /* data-parallel replicas */
	int nsteps;       /* steps of the schedule's cycle (1, or a PipeFisher cycle's K) */
	int recompute;    /* the backward recomputes a layer's activations */
	float loss_scale; /* the dynamic loss scale of this step (1 without scaling): the
			   * gradients carry it, the update divides it out */
	float max_norm;   /* this step's clipping threshold (clp_exec_step's max_norm; <= 0:
			   * no clipping) */
} clp_exec_counts;
void clp_exec_step_counts(const clp_exec *e, clp_exec_counts *c);

/* Once this step's norm is computed (in stage_step; the step's earlier hooks see the last
 * step's): the clipping factor the stages' statistics hold (clp_stage_stats: 1 when nothing is
 * clipped, 0 when the gradients are not finite) and the non-finite flag, as the device has them.
 * Returns 1 when they are this step's, 0 before its norm. */
int clp_exec_step_clip(const clp_exec *e, float *scale, int *nonfinite);

/* The communicator this rank sums over schedule group g with: the executor's own when the
 * group spans every rank, the one made at creation otherwise; *out = NULL (CLP_OK) when the
 * group has one rank (nothing to sum). CLP_ERR_STATE naming what (a label) when the rank is
 * not in the group, CLP_ERR_INVALID for a group the schedule does not have. */
clp_status clp_exec_group_comm(clp_exec *e, int g, clp_comm **out, const char *what);

/* n values of type t at buf summed over group g (g < 0: every rank), in rank order when the
 * executor is deterministic; nothing to do in a group of one. */
clp_status clp_exec_group_sum(clp_exec *e, int g, clp_comm_type t, void *buf, size_t n,
			      const char *what);

/* nb fp32 device buffers (b[i] of n[i] floats) summed over group g (g < 0: every rank)
 * through one host buffer, in this order (every member must pass the same sizes in the same
 * order); scale != 1 multiplies the sums before they are written back. In a group of one the
 * buffers are only scaled. */
clp_status clp_exec_sum_bufs(clp_exec *e, int g, const clp_buf *b, const size_t *n, int nb,
			     float scale, const char *what);

/* Wait until the device has run everything enqueued, progressing the transport meanwhile. */
clp_status clp_exec_drain(clp_exec *e);

#endif
