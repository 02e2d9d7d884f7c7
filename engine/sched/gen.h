/* Schedule generators: GPipe, 1F1B, interleaved 1F1B, Chimera (direct concatenation and forward
 * doubling) and zero-bubble ZB-H1, for D pipeline ranks, N micro-batches and R data-parallel
 * replicas (rank = replica * D + position). docs/SCHEDULES.md draws each and states what it
 * guarantees.
 *
 * A generator only decides the order of compute items (F, B, or B/W) on each rank and where each
 * stage lives; clp_sched_lower() then adds the sends, receives, gradient all-reduces and the
 * optimizer step the same way for all of them (and for later passes such as SkipPipe paths). */
#ifndef CLP_SCHED_GEN_H
#define CLP_SCHED_GEN_H

#include "engine/sched/sched.h"

typedef enum clp_sched_kind {
	CLP_SCHED_GPIPE,
	CLP_SCHED_1F1B,
	CLP_SCHED_INTERLEAVED,
	CLP_SCHED_CHIMERA,    /* basic units concatenated directly */
	CLP_SCHED_CHIMERA_FD, /* forward doubling */
	CLP_SCHED_ZBH1,
	CLP_SCHED_KIND_COUNT
} clp_sched_kind;

typedef struct clp_gen_opts {
	int kind;         /* clp_sched_kind */
	int depth;        /* D: pipeline ranks per replica */
	int microbatches; /* N: micro-batches per replica per step */
	int chunks;       /* v: model chunks per rank (interleaved), else 1 */
	int replicas;     /* R: data-parallel replicas */
	int layers;       /* model layers for the stage map; 0: one per stage */
	int prefetch;     /* post each receive this many compute ops before its consumer */
	int opt_step;     /* end with OPT_STEP per stage held */
	int tied_embedding; /* all-reduce the tied embedding between first- and last-stage holders */
	int grad_norm;    /* all-reduce the global gradient norm before the optimizer step */
	int loss_reduce;  /* reduce the loss to rank 0 */
} clp_gen_opts;

void clp_gen_opts_default(clp_gen_opts *o);
const char *clp_sched_kind_name(int kind);
int clp_sched_kind_parse(const char *name); /* -1 if unknown */
/* The names, "gpipe|1f1b|...", for help texts and config choices. */
const char *clp_sched_kind_list(void);

/* Build the schedule (D * R ranks). Errors name the option at fault. */
clp_status clp_sched_generate(clp_sched **out, const clp_gen_opts *o);

/* A compute item of a rank's order. */
typedef struct clp_work {
	uint8_t kind; /* CLP_OP_FWD, BWD, BWD_B or BWD_W */
	uint8_t pipe;
	uint16_t chunk;
	int32_t stage;
	int32_t mb;
} clp_work;

/* Where stages live: rank_of[(replica * npipes + pipe) * nstages + stage] and the chunk index of
 * that stage on its rank, chunk_of[pipe * nstages + stage]. */
typedef struct clp_placement {
	const int *rank_of;
	const int *chunk_of;
} clp_placement;

/* Fill s (created with its ranks, stages, pipes and replicas set) from per-rank compute orders:
 * receives before consumers (o->prefetch compute ops early), sends after producers, then the
 * end-of-step collectives and optimizer steps. orders[r] has lens[r] items. */
clp_status clp_sched_lower(clp_sched *s, clp_work *const *orders, const int *lens,
			   const clp_placement *pl, const clp_gen_opts *o);

#endif
