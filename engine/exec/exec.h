/* The executor: runs a schedule (engine/sched) for real, on this rank's OpenCL device and the
 * transport (topology/comm/comm.h). It holds the stages the schedule places on this rank,
 * interprets the rank's op list step by step, moves activations and gradients between ranks
 * through host staging buffers with nonblocking sends and receives, and performs the end-of-step
 * reductions (replica and twin gradients, the tied embedding, the global gradient norm, the loss)
 * and the optimizer step (through the optimizer interface, exec_optim.h, and the services it
 * is written on, exec_env.h).
 *
 * Waiting never blocks in clFinish while messages are pending: a wait polls OpenCL event status
 * and the transport's requests together, under the transport's deadline (Open MPI 4.1 makes
 * progress only inside MPI calls). A single device is the one-rank case of the same code, so a
 * pipelined run and the single-device run perform the same arithmetic in the same order where
 * the schedule keeps the order of additions (GPipe, 1F1B, interleaved, ZB-H1 without replicas):
 * losses and parameters are then bitwise equal.
 *
 * The global gradient norm is computed so that it does not depend on the split: a float sum of
 * squares per tensor (compensated, on the device), gathered per tensor of the whole model and
 * added in the model's tensor order in double; each tensor is counted once (its owner: replica
 * 0, pipeline 0, and for the tied embedding the holder of block 0). */
#ifndef CLP_EXEC_EXEC_H
#define CLP_EXEC_EXEC_H

#include <stdint.h>

#include "cl/nn.h"
#include "engine/model/stage.h"
#include "engine/sched/sched.h"
#include "topology/comm/comm.h"

typedef struct clp_exec clp_exec;

typedef struct clp_exec_opts {
	size_t B, T;       /* micro-batch shape */
	int deterministic; /* all-reduces add in rank order: bitwise reproducible */
	int recompute;     /* recompute layer activations in the backward (less memory) */
	clp_dtype precision; /* storage of the stages' values (CLP_F32 when zero; cl/nn.h
			      * "Storage"): activations and gradients between stages travel in it
			      * (half the bytes in bf16 / fp16); all-reduces stay fp32 */
	const unsigned char *frozen; /* clp_stage_opts.frozen for every stage (borrowed: it
				      * outlives the executor); NULL: all trained */
} clp_exec_opts;

/* The schedule must be valid (clp_sched_validate) and have comm's size of ranks. The schedule
 * is borrowed and must outlive the executor. */
clp_status clp_exec_create(clp_exec **out, clp_comm *comm, clp_cl_ctx *ctx, const clp_sched *s,
			   const clp_model_config *m, const clp_exec_opts *o);
void clp_exec_free(clp_exec *e);

/* What clp_exec_create would allocate for rank's list, to check it fits before it does: the
 * stages the rank holds (in order of first appearance), each with the micro-batch slots it keeps
 * at once and whether its backward is split. Fills at most max entries; returns how many. */
typedef struct clp_exec_stage_need {
	int stage, pipe, slots, split;
} clp_exec_stage_need;
int clp_exec_rank_stages(const clp_sched *s, int rank, clp_exec_stage_need *out, int max);

clp_status clp_exec_init_params(clp_exec *e, uint64_t seed);

/* One step's data for this rank's replica: micro-batch m's ids at tokens[m * B * T ...]
 * (types: bert; targets: -1 = no loss). inv_count = 1 / the number of targets of the whole step
 * over all replicas. inv_mb (optional, NULL: inv_count for all): per micro-batch its own loss
 * weight, e.g. SkipPipe's 1 / (targets of m x micro-batches of m's origin). */
typedef struct clp_exec_data {
	const int32_t *tokens, *types, *targets;
	float inv_count;
	uint64_t seed;
	uint32_t step;
	const float *inv_mb;
	uint32_t mb_base; /* the global index of micro-batch 0 (a replica's share: r M); names
			   * the dropout streams only (clp_stage_mb.stream_base) */
} clp_exec_data;

typedef struct clp_exec_result {
	double loss;      /* mean loss of the step (all ranks); dataflow (SkipPipe) schedules: the
			   * scaled losses' sum over the stage-0 nodes (the mean of their means) */
	double grad_norm; /* global gradient norm before clipping (of the unscaled gradients) */
	int skipped;      /* a non-finite gradient: no parameter changed */
	float loss_scale; /* the loss scale this step's backward used (1 without scaling) */
} clp_exec_result;

/* Dynamic loss scaling (fp16): the backward multiplies the loss gradient by the scale S, the
 * optimizer divides it out (and the norm and clipping see unscaled gradients). After a step
 * whose gradients were not finite (the flag is summed over the ranks of the norm, so every rank
 * decides alike) the step is skipped and S halves (not below 1); after `window` good steps in a
 * row S doubles (up to 2^24). scale <= 0 turns it off (S = 1, the default). */
clp_status clp_exec_set_loss_scale(clp_exec *e, float scale, long window);
/* The scale the next step uses and the good steps counted towards doubling it (checkpoints). */
void clp_exec_loss_scale(const clp_exec *e, float *scale, long *good);
void clp_exec_restore_loss_scale(clp_exec *e, float scale, long good);

/* Run the rank's list for one training step (forward, backward, reductions, the optimizer's
 * update). settings: this step's settings of the optimizer installed (exec_optim.h), of the
 * type its kind defines; the executor only passes them to its stage_step hook (AdamW, the
 * default, and K-FAC read a clp_nn_adamw_hp). Ranks in dataflow mode (SkipPipe path schedules,
 * engine/exec/exec_dataflow.c) run whichever ready forward or backward comes first in list
 * order, within the rank's memory cap, then average each stage's gradients over the stage's
 * nodes (docs/SKIPPIPE.md, "How a node runs it"). */
clp_status clp_exec_step(clp_exec *e, const clp_exec_data *d, const void *settings,
			 float max_norm, clp_exec_result *r);
/* Forward only (the schedule's forwards and their activation transfers); *loss gets the sum of
 * the micro-batches' scaled losses over all ranks. Ordered schedules only. */
clp_status clp_exec_forward(clp_exec *e, const clp_exec_data *d, double *loss);

/* Trace the next step: clp_exec_trace_start() before clp_exec_step(), then every rank calls
 * clp_exec_trace_finish(), which gathers the events of all ranks, aligned to rank 0's clock,
 * into *out on rank 0 (initialised there; free with clp_trace_free). Compute ops are timed on
 * the device (markers), transfers from post to completion, collectives on the host. */
struct clp_trace;
clp_status clp_exec_trace_start(clp_exec *e);
clp_status clp_exec_trace_finish(clp_exec *e, struct clp_trace *out);

/* The stages on this rank, for checkpoints: owner = 1 when this rank saves the stage's tensors
 * (replica 0, pipeline 0; a head stage's copy of the tied embedding is not saved). */
int clp_exec_nstages(const clp_exec *e);
clp_stage *clp_exec_stage(const clp_exec *e, int i, int *owner);
/* 1 when tensor t of local stage i is saved by this rank. */
int clp_exec_owns(const clp_exec *e, int i, int t);
/* on: clp_exec_owns says 1 for every tensor of every local stage (a head's copy of the tied
 * embedding too) until called with 0: an optimizer's save hook then writes all the state this
 * rank holds, for a survivor's take-over in the same process (engine/train/session_ft.h). */
void clp_exec_save_all(clp_exec *e, int on);
/* The IR stage of local stage i (a SkipPipe origin holds stage 0 and the head, stage S). */
int clp_exec_stage_id(const clp_exec *e, int i);

/* Dataflow ranks: the most micro-batches holding activations on this rank at once during the
 * last step (never above the rank's mem_cap when it has one); 0 for ordered ranks. */
int clp_exec_peak_held(const clp_exec *e);

#endif
