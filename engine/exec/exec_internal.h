/* Internals of the executor: its state, the primitives (waiting, transfers, a stage's forward
 * and backward, reductions, trace records) written once and used by both interpreters, the
 * ordered one (exec_run.c) and the dataflow one (exec_dataflow.c), and the optimizer hooks. */
#ifndef CLP_EXEC_INTERNAL_H
#define CLP_EXEC_INTERNAL_H

#include "engine/exec/exec.h"
#include "engine/exec/exec_optim.h"
#include "engine/scenario/trace.h"
#include "engine/sched/index.h"

/* A traced op: device markers around a compute op, or host times of a transfer/collective. */
struct exec_tev {
	clp_op op;
	int queue;        /* clp_trace_queue */
	cl_event ev0, ev1; /* compute: markers before and after */
	double t0, t1;    /* host seconds (comm), filled in at the end for compute */
};

struct lstage {
	int stage, pipe;
	clp_stage *st;
	int nslots;
	int *slot_mb;  /* mb occupying each slot, -1 when free */
	int owner;     /* replica 0, pipeline 0: saves and counts its tensors */
	int *gindex;   /* per tensor of the stage: index in the whole model's table */
	int *owns;     /* per tensor: counted in the norm and saved by this rank */
	clp_buf stats; /* 4 floats per tensor, for the per-tensor sums of squares */
	cl_mem stats_mem;
};

struct opstate {
	void *buf;         /* host staging: a receive's target, a producer's copy for a send */
	size_t bytes;
	clp_comm_req *req; /* pending send or receive */
	cl_event ev;       /* the read that fills buf (producers) */
	int needed;        /* a producer whose output a send or another local op consumes */
};

struct clp_exec {
	clp_comm *comm;
	clp_cl_ctx *ctx;
	const clp_sched *s;
	clp_sched_index ix;
	clp_model_config m;
	clp_param_table full; /* the whole model, for tensor order and ownership */
	int rank, replica;
	int save_all; /* clp_exec_save_all: clp_exec_owns says 1 for every tensor */
	struct lstage *ls;
	int nls;
	struct opstate *os; /* per op of this rank's list */
	int nops;
	int *run_step;      /* per op: the cycle step it runs in (op.step, or for a factor item
			     * the step of the op it precedes) */
	size_t B, T, N, C;
	int det, recompute;
	const unsigned char *frozen; /* clp_exec_opts.frozen (borrowed) */
	clp_comm **gcomm;    /* per schedule group: its communicator (NULL: not a member) */
	cl_mem acc;          /* this rank's loss sum */
	double *tsum;        /* per tensor of the whole model: sum of squares, then flags */
	int norm_done;       /* this step's norm is computed */
	int norm_world;      /* the norm's sums go over every rank without a NORM op (dataflow) */
	double norm;
	int nonfinite;
	float clip;          /* the clipping factor of the statistics (CLP_NN_GSTAT_SCALE) */
	float max_norm;      /* this step's clipping threshold */
	/* dataflow ranks (exec_dataflow.c) */
	int df_origins;      /* ranks holding stage 0: the loss sum is divided by it */
	int df_peak;         /* most micro-batches held at once in the last step */
	/* tracing of one step */
	int tracing;
	struct exec_tev *tr;
	int tr_n, tr_cap;
	double tr_qoff, tr_t0;
	double *posted; /* per op: host time a transfer was posted (tracing) */
	cl_event cur_ev0; /* the start marker of the compute op running (tracing) */
	/* storage of values, and dynamic loss scaling (clp_exec_set_loss_scale) */
	clp_dtype prec;
	int scaling;         /* loss scaling on */
	float loss_scale;    /* S: 1 without scaling */
	long scale_window, scale_good;
	/* the optimizer (exec_optim.h): AdamW unless another was installed */
	const clp_exec_optim *opt;
	void *opt_state;
};

/* ---- the primitives, shared by both interpreters ------------------------------------------ */

/* exec_trace.c: a trace record of the next event; a device marker; a host interval of op; the
 * record of a compute op from e->cur_ev0 (its start marker) to now. */
clp_status exec_trace_grow(clp_exec *e);
clp_status exec_trace_mark(clp_exec *e, cl_event *ev);
clp_status exec_trace_host(clp_exec *e, const clp_op *op, double t0, double t1);
clp_status exec_trace_compute(clp_exec *e, const clp_op *op);

/* exec.c: the local stage running (stage, pipe), or NULL; the first local copy of a stage. */
struct lstage *exec_find(clp_exec *e, int stage, int pipe);
struct lstage *exec_find_stage(clp_exec *e, int stage);

/* A tensor of the head's stage that copies the tied embedding: the embedding's holder saves it
 * and counts it in the norm. */
static inline int exec_tied_copy(const clp_tensor_desc *t)
{
	return t->role == CLP_R_TOK_EMB && t->block != 0;
}

/* The weight of micro-batch mb's loss in the step's mean: 1 / the step's targets (inv_count),
 * or its own inv_mb entry (SkipPipe); not the fp16 loss scale, which exec_bwd_scale adds. */
static inline float exec_inv(const clp_exec_data *d, int mb)
{
	return d->inv_mb ? d->inv_mb[mb] : d->inv_count;
}

/* The scale of micro-batch mb's loss gradient: exec_inv times the dynamic loss scale (1 unless
 * fp16). */
static inline float exec_bwd_scale(const clp_exec *e, const clp_exec_data *d, int mb)
{
	return exec_inv(d, mb) * e->loss_scale;
}

/* exec_wait.c: waiting without blocking the transport. Yield (then sleep up to 250 us) after
 * `idle` polls that found nothing; whether a device event completed; poll every pending request
 * once; wait for an event, for the device to be idle, for op i's request; at the end of a step
 * wait for every request and the device and free the slots. */
void exec_back_off(int idle);
clp_status exec_event_done(clp_exec *e, cl_event ev, int *done);
clp_status exec_progress(clp_exec *e);
clp_status exec_wait_event(clp_exec *e, cl_event ev);
clp_status exec_drain(clp_exec *e);
clp_status exec_wait_req(clp_exec *e, int i, uint32_t step);
clp_status exec_finish_step(clp_exec *e, uint32_t step);

/* exec_ops.c: the slot holding micro-batch mb of a local stage (-1); post op i (a send of a
 * finished output, a receive); run forward / backward / weight-gradient op i (its input must be
 * there or arriving; release: the forward frees its slot, forward-only passes). */
int exec_slot(struct lstage *l, int mb);
clp_status exec_post_send(clp_exec *e, int i, const clp_op *op, uint32_t step);
clp_status exec_post_recv(clp_exec *e, int i, const clp_op *op, uint32_t step);
clp_status exec_run_fwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d,
			int release);
clp_status exec_run_bwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d);
clp_status exec_run_bwd_w(clp_exec *e, const clp_op *op, const clp_exec_data *d);

/* exec_reduce.c (sums over a group: clp_exec_group_sum, clp_exec_sum_bufs in exec_env.h): a
 * set of tensors of a stage summed over op's group (NULL: over every rank) through one host
 * buffer (scale: multiplied after the sum); the per-tensor gradient norm and the clipping scale
 * in every stage's statistics (group_op NULL and e->norm_world: over every rank); the loss
 * summed over every rank. */
clp_status exec_reduce_grads(clp_exec *e, const clp_op *op, clp_stage *const *st, int nst,
			     int skip_tied, float scale, const char *label);
clp_status exec_grad_norm(clp_exec *e, const clp_op *group_op, float max_norm);
clp_status exec_loss_total(clp_exec *e, double *loss);
/* exec.c: at the end of a step, r->loss_scale = the scale used, then the next one decided
 * from e->nonfinite (clp_exec_set_loss_scale). */
void exec_update_loss_scale(clp_exec *e, clp_exec_result *r);

/* exec_optim.c: the optimizer's hooks as the interpreters call them (exec_optim.h); freeing. */
clp_status exec_optim_step_begin(clp_exec *e, const clp_exec_data *d);
clp_status exec_optim_after_bwd(clp_exec *e, const clp_op *op);
int exec_optim_skips(clp_exec *e, const clp_op *op);
clp_status exec_optim_item(clp_exec *e, const clp_op *op);
clp_status exec_optim_stage_step(clp_exec *e, int stage, const void *set);
clp_status exec_optim_prep(clp_exec *e, const clp_op *op, const void *set);
clp_status exec_optim_step_end(clp_exec *e);
void exec_optim_free(clp_exec *e);

/* ---- the interpreters ----------------------------------------------------------------------- */

/* exec_dataflow.c: after creation, ownership of tensors (the lowest rank holding a stage saves
 * and counts it) and the stage-0 node count; one step of a dataflow rank. exec_run.c runs the
 * ordered ranks (clp_exec_step, clp_exec_forward). */
clp_status exec_dataflow_setup(clp_exec *e);
clp_status exec_dataflow_step(clp_exec *e, const clp_exec_data *d, const void *set,
			      float max_norm, clp_exec_result *r);

#endif
