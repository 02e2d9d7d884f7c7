/* The schedule IR: per rank, a list of instructions for one training step (or a K-step cycle).
 *
 * Two interpreters run it: the executor (OpenCL + MPI) and the simulator (cost table + links).
 * docs/SCHEDULES.md states the semantics both follow; in short:
 *
 *   compute   FWD, BWD (full), BWD_B (input gradient), BWD_W (weight gradient), OPT_STEP and the
 *             K-FAC items run on the rank's compute stream, one after another.
 *   SEND_*    posts a nonblocking send (MPI_Isend) of the output of the matching compute op that
 *             precedes it; the rank goes on. Outstanding sends are waited at the end of the list,
 *             or right away when the op carries CLP_OPF_WAIT (a blocking send).
 *   RECV_*    posts a nonblocking receive (MPI_Irecv). The compute op that consumes it waits for
 *             its completion; posting early (prefetch) lets the transfer overlap compute.
 *             A run of adjacent SEND/RECV ops is one exchange: all are posted before any wait.
 *   ALLREDUCE / REDUCE / KFAC_SYNC / KFAC_INV_SYNC / KFAC_PREC_SYNC are blocking collectives over sched->groups[op.group]; every
 *             member issues the collectives of a group in the same order.
 *
 * A send matches the receive on its peer with the same (source, destination, tag) in list order
 * (MPI's non-overtaking rule), so tags need only separate messages that may be in flight at the
 * same time between two ranks. A rank in CLP_RANK_DATAFLOW mode posts all its receives at once,
 * runs the first compute op (in list order) whose inputs are ready, within a cap on micro-batches
 * holding activations, and sends each result as soon as it exists; collectives, OPT_STEP,
 * KFAC_INV and KFAC_PRECOND wait for everything before them. */
#ifndef CLP_SCHED_SCHED_H
#define CLP_SCHED_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

typedef enum clp_op_kind {
	CLP_OP_FWD,          /* forward of (stage, pipe, mb) */
	CLP_OP_BWD,          /* full backward: input and weight gradients */
	CLP_OP_BWD_B,        /* backward, input gradient only (zero-bubble B) */
	CLP_OP_BWD_W,        /* backward, weight gradient only (zero-bubble W) */
	CLP_OP_SEND_ACT,     /* output activation of FWD(stage) to peer */
	CLP_OP_RECV_ACT,     /* input activation of FWD(stage) from peer */
	CLP_OP_SEND_GRAD,    /* input gradient of BWD(stage) to peer */
	CLP_OP_RECV_GRAD,    /* output gradient for BWD(stage) from peer */
	CLP_OP_ALLREDUCE,    /* op.what over group; for GRADS the gradients of op.stage */
	CLP_OP_REDUCE,       /* op.what over group to root op.peer (loss and token counts) */
	CLP_OP_OPT_STEP,     /* optimizer step of op.stage */
	CLP_OP_KFAC_CURV_A,  /* Kronecker factor A of op.layer from micro-batch op.mb (after FWD) */
	CLP_OP_KFAC_CURV_B,  /* Kronecker factor B of op.layer from micro-batch op.mb (after BWD) */
	CLP_OP_KFAC_SYNC,    /* all-reduce of op.layer's factors over op.group */
	CLP_OP_KFAC_INV,     /* inverse of op.layer's factors */
	CLP_OP_KFAC_PRECOND, /* precondition op.stage's gradients (op.layer >= 0: that layer's only) */
	CLP_OP_KFAC_INV_SYNC,  /* all-reduce of op.layer's inverses (and damping statistics) over
				* op.group: the layer's owner contributes them, the others zeros */
	CLP_OP_KFAC_PREC_SYNC, /* all-reduce of op.stage's preconditioned gradients over op.group:
				* each holder contributes the layers it owns, zeros elsewhere */
	CLP_OP_OPT_PREP,     /* the part of op.stage's optimizer step that needs only the final
			      * gradients of its layers, not the global norm nor the embedding's
			      * and head's (Muon: momentum and Newton-Schulz of its matrices;
			      * engine/sched/prep.c places it, docs/OPTIMIZERS.md) */
	CLP_OP_KIND_COUNT
} clp_op_kind;

/* What a collective reduces. */
typedef enum clp_red_what {
	CLP_RED_NONE,
	CLP_RED_GRADS, /* gradients of op.stage over its data-parallel group (and Chimera twins) */
	CLP_RED_TIED,  /* tied embedding gradient between its holders */
	CLP_RED_NORM,  /* global gradient norm and non-finite flag */
	CLP_RED_LOSS,  /* loss and token counts to the logging rank */
	CLP_RED_COUNT
} clp_red_what;

enum {
	CLP_OPF_WAIT = 1, /* SEND: block until the send completes (MPI_Send semantics) */
	CLP_OPF_BUBBLE = 2, /* OPT_PREP: it waits for no other rank's last backward of the step
			     * (clp_sched_place_prep), so it runs in their cool-down bubble */
};

/* One instruction (40 bytes). Fields that do not apply hold -1 (or 0 for chunk/pipe/step).
 * K-FAC items (engine/pass/pipefisher.h): KFAC_CURV_A/B name the step whose FWD/backward they
 * record in `step` (a cycle's first step, 0) and may sit later in the list, in a later step's
 * bubbles; KFAC_INV names one factor of the layer in `factor`, and in `mb` one phase of its
 * inversion (0 the Cholesky factor, 1 its triangular inverse, 2 the product X^T X; -1 all
 * three); KFAC_PRECOND names in `layer` the one layer it preconditions (-1: the stage's). */
typedef struct clp_op {
	uint8_t kind;  /* clp_op_kind */
	uint8_t pipe;  /* pipeline: 0, or Chimera's 0 = down, 1 = up */
	union {
		uint8_t what;   /* collectives: clp_red_what */
		uint8_t factor; /* KFAC_INV: 0 every factor of op.layer, else 1 + the factor's index
				 * (the layer's factors in the optimizer's order, engine/optim/kfac.h) */
	};
	uint8_t flags; /* CLP_OPF_* */
	uint16_t chunk; /* model chunk of op.stage on this rank (interleaved 1F1B) */
	uint16_t step;  /* step within a K-step cycle */
	int32_t stage; /* global stage id */
	int32_t mb;    /* micro-batch */
	int32_t peer;  /* SEND/RECV: the other rank; REDUCE: the root */
	int32_t group; /* collectives: index into sched->groups */
	int32_t layer; /* K-FAC items: model layer */
	int32_t tag;   /* SEND/RECV: MPI tag, < CLP_TAG_LIMIT */
	int64_t bytes; /* payload; 0: taken from the cost table */
} clp_op;

/* Tags: 15 bits, (mb mod 1024) << 5 | (chunk mod 4) << 3 | (pipe mod 2) << 2 | kind, where kind
 * is 0 for activations and 1 for gradients (2 and 3 are free for later kinds) and chunk is the
 * chunk of the receiving stage. Wrapping is safe because matching keeps list order. */
#define CLP_TAG_LIMIT 32768
enum { CLP_TAG_ACT = 0, CLP_TAG_GRAD = 1 };
int clp_sched_tag(int kind, int pipe, int chunk, int mb);

typedef enum clp_rank_mode {
	CLP_RANK_ORDERED,  /* ops run in list order */
	CLP_RANK_DATAFLOW, /* any ready op may run; list order is the priority */
} clp_rank_mode;

typedef struct clp_rank_prog {
	clp_op *ops;
	int nops, cap;
	int replica;  /* data-parallel replica this rank belongs to */
	int mode;     /* clp_rank_mode */
	int mem_cap;  /* DATAFLOW: most micro-batches holding activations at once (0: no cap) */
} clp_rank_prog;

/* A stage is an ordered list of blocks: the embedding (first stage of a path), layers
 * [first_layer, first_layer + nlayers), and final norm + head + loss (last stage). */
typedef struct clp_stage_info {
	int first_layer, nlayers;
	uint8_t embed, head;
} clp_stage_info;

/* The model blocks of a stage of an n_layer model (block 0 the embedding, 1..n_layer the layers,
 * n_layer + 1 the head): first..last. */
static inline void clp_stage_info_blocks(const clp_stage_info *si, int n_layer, int *first,
					 int *last)
{
	*first = si->embed ? 0 : si->first_layer + 1;
	*last = si->head ? n_layer + 1 : si->first_layer + si->nlayers;
}

/* The even split of L layers over D stages, earlier stages taking the remainder: the layer
 * count and the first layer of stage i. */
static inline int clp_even_layers(int L, int D, int i)
{
	return L / D + (i < L % D);
}
static inline int clp_even_first(int L, int D, int i)
{
	return i * (L / D) + (i < L % D ? i : L % D);
}

typedef struct clp_group {
	int n;
	int *ranks;
} clp_group;

typedef struct clp_sched {
	char name[32];   /* the generator ("1f1b", ...) or "custom" */
	char file[256];  /* the file it was read from ("" if made in memory): messages name it */
	int nranks;
	int nstages;     /* global stages (interleaved: depth * chunks) */
	int nmb;         /* micro-batches per replica per step */
	int npipes;      /* 1, or 2 for Chimera */
	int nchunks;     /* chunks per rank and pipeline (interleaved), else 1 */
	int nreplicas;   /* data-parallel replicas */
	int nsteps;      /* steps in the cycle the lists cover (PipeFisher: K) */
	int nlayers;     /* model layers over all stages */
	clp_stage_info *stages; /* [nstages] */
	clp_rank_prog *ranks;   /* [nranks] */
	clp_group *groups;
	int ngroups;
	/* Optional per-micro-batch paths (SkipPipe): path of mb m is
	 * path_stages[path_start[m] .. path_start[m + 1]). NULL: every mb visits 0..nstages-1. */
	int *path_start, *path_stages;
} clp_sched;

/* Empty schedule with nranks empty lists and an even stage map of nlayers (>= nstages) layers. */
clp_status clp_sched_create(clp_sched **out, int nranks, int nstages, int nmb, int nlayers);
void clp_sched_free(clp_sched *s);
/* Split nlayers over the stages as evenly as possible (earlier stages get the remainder). */
clp_status clp_sched_stage_map_even(clp_sched *s, int nlayers);

clp_status clp_sched_push(clp_sched *s, int rank, const clp_op *op);
/* Index of the group with these ranks (order matters: it is the ring order), added if new. */
clp_status clp_sched_group(clp_sched *s, const int *ranks, int n, int *index);
/* Stages of mb's path; returns their number and sets *stages (NULL means 0..nstages-1). */
int clp_sched_path(const clp_sched *s, int mb, const int **stages);
clp_status clp_sched_set_paths(clp_sched *s, const int *start, const int *stages);
/* The stages before and after `stage` on mb's path; -1 at the ends or if it is not on it. */
void clp_sched_neighbours(const clp_sched *s, int mb, int stage, int *prev, int *next);
/* Turn a one-step schedule into a cycle of k steps (each list repeated, op.step set). */
clp_status clp_sched_repeat(clp_sched *s, int k);
int64_t clp_sched_nops(const clp_sched *s);

/* An op with every optional field at its "none" value. */
clp_op clp_op_make(clp_op_kind kind, int stage, int pipe, int chunk, int mb);

const char *clp_op_kind_name(int kind);
int clp_op_kind_parse(const char *name); /* -1 if unknown */
const char *clp_red_what_name(int what);
int clp_red_what_parse(const char *name);

static inline int clp_op_is_compute(int k)
{
	return k == CLP_OP_FWD || k == CLP_OP_BWD || k == CLP_OP_BWD_B || k == CLP_OP_BWD_W ||
	       k == CLP_OP_OPT_STEP || k == CLP_OP_KFAC_CURV_A || k == CLP_OP_KFAC_CURV_B ||
	       k == CLP_OP_KFAC_INV || k == CLP_OP_KFAC_PRECOND || k == CLP_OP_OPT_PREP;
}
static inline int clp_op_is_send(int k)
{
	return k == CLP_OP_SEND_ACT || k == CLP_OP_SEND_GRAD;
}
static inline int clp_op_is_recv(int k)
{
	return k == CLP_OP_RECV_ACT || k == CLP_OP_RECV_GRAD;
}
static inline int clp_op_is_p2p(int k)
{
	return clp_op_is_send(k) || clp_op_is_recv(k);
}
static inline int clp_op_is_collective(int k)
{
	return k == CLP_OP_ALLREDUCE || k == CLP_OP_REDUCE || k == CLP_OP_KFAC_SYNC ||
	       k == CLP_OP_KFAC_INV_SYNC || k == CLP_OP_KFAC_PREC_SYNC;
}
/* A K-FAC op (engine/pass/pipefisher.h): items and their collectives. */
static inline int clp_op_is_kfac(int k)
{
	return (k >= CLP_OP_KFAC_CURV_A && k <= CLP_OP_KFAC_PRECOND) || k == CLP_OP_KFAC_INV_SYNC ||
	       k == CLP_OP_KFAC_PREC_SYNC;
}
/* BWD or BWD_B: the op that produces the input gradient. */
static inline int clp_op_is_bwd_input(int k)
{
	return k == CLP_OP_BWD || k == CLP_OP_BWD_B;
}

/* Insert an OPT_PREP of each stage with an OPT_STEP on an ordered rank, in every step of the
 * cycle, at the earliest point of the list where the gradients of the stage's layers are final
 * and the rank has nothing left to send (prep.c): after the stage's last backward (BWD, BWD_B,
 * BWD_W, K-FAC preconditioning) and its gradient all-reduce, and after the rank's last send of
 * the step and the transfers posted right after it (so no peer waits for it); so before the
 * tied embedding's all-reduce, the norm and the OPT_STEP when nothing else holds it there. A
 * schedule that has OPT_PREPs already keeps them (only their marks below are made again).
 * An OPT_PREP that waits (through list order, messages and collectives) for no other rank's
 * last backward of its step gets CLP_OPF_BUBBLE: it runs while that rank still works. Only
 * those are kept (one elsewhere, e.g. on the stage that finishes last or on one device, would
 * only move work from after the norm to before it). *added: how many (may be NULL). */
clp_status clp_sched_place_prep(clp_sched *s, int *added);

/* The one-step-delayed Muon's OPT_PREPs (muon.delay; docs/OPTIMIZERS.md): its work needs
 * nothing of its step, so each stage's OPT_PREP goes before a point where the rank waits for
 * another rank: the k-th OPT_STEP of a step on the rank (list order) gets its OPT_PREP right
 * before the rank's k-th wait of that step (the last one when there are fewer), a wait being a
 * compute op that consumes a receive posted before it (FWD of RECV_ACT, BWD or BWD_B of
 * RECV_GRAD) or a collective (not the loss's REDUCE). On 1F1B every stage's OPT_PREP but
 * stage 0's goes before its first forward (in the warm-up, waiting for the activation) and
 * stage 0's before its first backward. All are marked
 * CLP_OPF_BUBBLE. A rank with no wait (one device) gets none, nor a schedule that has
 * OPT_PREPs already. *added: how many (may be NULL). */
clp_status clp_sched_place_prep_delayed(clp_sched *s, int *added);

/* "FWD stage 2 mb 5", "SEND_ACT stage 0 mb 3 to rank 1 tag 96", ... for messages. */
void clp_op_describe(const clp_op *op, char *buf, size_t n);

#endif
