/* Internals of the executor shared by exec.c (setup), exec_run.c (the ordered interpreter) and
 * exec_dataflow.c (the dataflow interpreter). */
#ifndef CLP_EXEC_INTERNAL_H
#define CLP_EXEC_INTERNAL_H

#include "engine/exec/exec.h"
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
	struct lstage *ls;
	int nls;
	struct opstate *os; /* per op of this rank's list */
	int nops;
	int *run_step;      /* per op: the cycle step it runs in (op.step, or for a factor item
			     * the step of the op it precedes) */
	size_t B, T, N, C;
	int det, recompute;
	clp_comm **gcomm;    /* per schedule group: its communicator (NULL: not a member) */
	cl_mem acc;          /* this rank's loss sum */
	double *tsum;        /* per tensor of the whole model: sum of squares, then flags */
	int norm_done;       /* this step's norm is computed */
	int norm_world;      /* the norm's sums go over every rank without a NORM op (dataflow) */
	double norm;
	int nonfinite;
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
	/* K-FAC (exec_kfac.c): per local stage its optimizer and factor group; NULL: AdamW */
	clp_kfac_opt **kfac;
	int *kfac_group;
	float kfac_lr_ratio;
	int kfac_collect, kfac_prepared;
	long kfac_step;
	/* PipeFisher (the schedule has K-FAC items; exec_kfac.c) */
	int kfac_pf;           /* run the schedule's K-FAC items */
	int kfac_cycle0;       /* this step is in the first cycle: items skipped */
	int kfac_refreshed;    /* step 0's serial refresh is done */
	int kfac_inverted;     /* an inversion ran this step (checked at its end) */
	uint8_t *kfac_bwd;     /* [nls * nmb]: the collecting step's backward of mb ran */
	uint8_t *kfac_pre;     /* [nls]: preconditioned this step */
	int *kfac_pend;        /* recomputation: factor A items waiting for their backward,
				* (local stage, stage layer, mb) triples in list order */
	int kfac_npend, kfac_cpend;
};

clp_status exec_trace_grow(clp_exec *e);
clp_status exec_trace_mark(clp_exec *e, cl_event *ev);
clp_status exec_trace_host(clp_exec *e, const clp_op *op, double t0, double t1);

/* exec_kfac.c: the start of a step, the optimizer step of a stage (instead of AdamW), the end
 * of a step (reports a failed inversion); freeing. */
clp_status exec_kfac_step_begin(clp_exec *e, const clp_exec_data *d);
clp_status exec_kfac_opt_step(clp_exec *e, int stage, const clp_nn_adamw_hp *hp);
clp_status exec_kfac_step_end(clp_exec *e);
void exec_kfac_free(clp_exec *e);
/* PipeFisher: a K-FAC item of the list (op i), and the hook after a backward (BWD, BWD_B). */
clp_status exec_kfac_item(clp_exec *e, const clp_op *op);
clp_status exec_kfac_after_bwd(clp_exec *e, const clp_op *op);

/* exec_run.c: wait until the device is idle while polling the transport; the slot holding
 * micro-batch mb of a local stage (-1). */
clp_status exec_drain(clp_exec *e);
/* Yield (then sleep up to 250 us) after `idle` polls that found nothing. */
void exec_back_off(int idle);
int exec_slot(struct lstage *l, int mb);

/* The local stage running op (stage, pipe), or NULL. */
struct lstage *exec_find(clp_exec *e, int stage, int pipe);

/* The loss scale of micro-batch mb. */
static inline float exec_inv(const clp_exec_data *d, int mb)
{
	return d->inv_mb ? d->inv_mb[mb] : d->inv_count;
}

/* exec_run.c, shared with exec_dataflow.c: poll every pending request once; wait for the device
 * without blocking the transport; wait for op i's request; post op i (a send of a finished
 * output, a receive); run forward / backward op i (its input must be there or arriving); the
 * sum over op's group (NULL: over every rank); the per-tensor gradient norm (group_op NULL and
 * e->norm_world: over every rank); wait for every request and the device, free the slots; the
 * loss summed over every rank. */
clp_status exec_progress(clp_exec *e);
clp_status exec_wait_req(clp_exec *e, int i, uint32_t step);
clp_status exec_post_send(clp_exec *e, int i, const clp_op *op, uint32_t step);
clp_status exec_post_recv(clp_exec *e, int i, const clp_op *op, uint32_t step);
clp_status exec_run_fwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d);
clp_status exec_run_bwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d);
clp_status exec_group_sum(clp_exec *e, const clp_op *op, clp_comm_type t, void *buf, size_t n,
			  const char *label);
clp_status exec_grad_norm(clp_exec *e, const clp_op *group_op, float max_norm);
clp_status exec_finish_step(clp_exec *e, uint32_t step);
clp_status exec_loss_total(clp_exec *e, double *loss);

/* exec_dataflow.c: after creation, ownership of tensors (the lowest rank holding a stage saves
 * and counts it) and the stage-0 node count; one step of a dataflow rank. */
clp_status exec_dataflow_setup(clp_exec *e);
clp_status exec_dataflow_step(clp_exec *e, const clp_exec_data *d, const clp_nn_adamw_hp *hp,
			      float max_norm, clp_exec_result *r);

#endif
