/* Timelines of a training step, written by the executor (measured) and by the simulator
 * (predicted) in one format: intervals per rank and queue, with the op that ran.
 *
 * Utilisation and bubble fraction always come from a trace: clp_trace_stats_add() takes events
 * one at a time (the simulator feeds it as it runs, so it need not keep 10^7 events), and
 * clp_trace_stats_compute() runs the same code over a stored or loaded trace.
 *
 * Files: Chrome trace-event JSON (opens in Perfetto / chrome://tracing; process = rank,
 * thread = queue) and an SVG picture, one row per rank, coloured by what ran. */
#ifndef CLP_IO_TRACE_H
#define CLP_IO_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

typedef enum clp_trace_queue {
	CLP_TQ_COMPUTE, /* kernels: F, B, W, optimizer, K-FAC */
	CLP_TQ_COMM,    /* transfers and collectives */
	CLP_TQ_COUNT
} clp_trace_queue;

typedef struct clp_trace_event {
	double t0, t1;   /* seconds */
	int32_t rank;
	uint8_t queue;   /* clp_trace_queue */
	uint8_t kind;    /* clp_op_kind of the op */
	uint8_t pipe;
	uint8_t what;    /* collectives: clp_red_what; KFAC_INV: op.factor */
	int32_t stage, mb, peer; /* -1 where they do not apply */
	int32_t layer;   /* K-FAC items: the model layer (calibration); -1 or 0 for other ops */
} clp_trace_event;

typedef struct clp_trace {
	int nranks;
	clp_trace_event *ev;
	size_t n, cap;
	size_t limit;     /* 0: keep all; else keep the first `limit` events ... */
	size_t dropped;   /* ... and count the rest here */
	char title[128];
	int steps;        /* training steps the trace spans, from time 0 (0: unknown, e.g. a
			     simulation: the picture then starts at the first event) */
} clp_trace;

void clp_trace_init(clp_trace *t, int nranks, size_t limit);
void clp_trace_free(clp_trace *t);
clp_status clp_trace_push(clp_trace *t, const clp_trace_event *e);

typedef struct clp_trace_rank_stats {
	double compute_s; /* sum of compute-queue intervals */
	double comm_s;    /* union of comm-queue intervals */
	double busy_s;    /* union of both */
	/* streaming state: the open merged intervals */
	double comm_a, comm_b, busy_a, busy_b;
} clp_trace_rank_stats;

typedef struct clp_trace_stats {
	int nranks;
	double t_begin, t_end; /* span: begin given (or the first event), end = last t1 */
	int have_begin;
	clp_trace_rank_stats *rank;
	/* after clp_trace_stats_finish(): */
	double span_s;
	double util_mean;  /* mean over ranks of compute_s / span */
	double busy_mean;  /* mean of busy_s / span */
	double bubble;     /* 1 - util_mean: the compute streams' idle fraction */
} clp_trace_stats;

/* t_begin < 0: the first event's start. */
clp_status clp_trace_stats_init(clp_trace_stats *st, int nranks, double t_begin);
/* Events must come in nondecreasing t0 order per rank (the simulator emits them so). */
void clp_trace_stats_add(clp_trace_stats *st, const clp_trace_event *e);
void clp_trace_stats_finish(clp_trace_stats *st);
void clp_trace_stats_free(clp_trace_stats *st);
/* The stats of a whole trace (sorted copy, then the streaming code above). */
clp_status clp_trace_stats_compute(const clp_trace *t, double t_begin, clp_trace_stats *st);

/* Chrome trace-event JSON; ts and dur in microseconds, args carry kind, stage, mb, pipe, peer
 * (K-FAC items also layer, and KFAC_INV its factor). */
clp_status clp_trace_write_chrome(const clp_trace *t, const char *path);
/* Read a Chrome trace written by clpipe (the executor's or the simulator's). */
clp_status clp_trace_read_chrome(const char *path, clp_trace *t);

/* SVG timeline of one or more traces stacked (e.g. measured above, simulated below): one row per
 * rank and trace, forward/backward/W/optimizer/K-FAC/communication coloured, idle left blank,
 * step time and utilisation in each section's title, a time axis in ms under each section and,
 * where the trace knows its steps, the step boundaries (the end of each step's last optimizer
 * op) and the per-step time as the console prints it. */
clp_status clp_trace_write_svg(const char *path, const clp_trace *const *traces,
			       const char *const *labels, int ntraces);

/* Short name of an event for pictures: "F3", "B3", "W3", "AR", ... */
void clp_trace_event_label(const clp_trace_event *e, char *buf, size_t n);

#endif
