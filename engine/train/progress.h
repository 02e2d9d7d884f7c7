/* The step lines of `clpipe train`. In a pipe or a file: one plain line per step, the format
 * scripts and logs read. On a terminal: one status line (bar, step, loss, tokens/s, ETA) that
 * each step rewrites in place, cut to the terminal's width so it never wraps; whatever else is
 * printed (evaluations, checkpoints) first clears it and stays above it. */
#ifndef CLP_TRAIN_PROGRESS_H
#define CLP_TRAIN_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

typedef struct clp_progress {
	long step, steps;   /* steps done (1-based), planned */
	double loss, lr, norm;
	double tok_s, ms;   /* this step's throughput and time */
	double eta_s;       /* time left at the run's mean pace so far */
	int skipped;        /* a non-finite gradient: the update was skipped */
	double scale;       /* fp16: the loss scale, shown when > 0 (the steps where it changed) */
} clp_progress;

/* The line of a step into buf (always NUL-terminated). width 0: the plain line, ending in a
 * newline; width > 0: "\r" then the status line padded with spaces to width - 1 columns, no
 * newline. */
void clp_progress_format(char *buf, size_t n, const clp_progress *p, int width);

/* The width of out when it is a terminal (80 when the terminal does not say), 0 when out is a
 * pipe or a file. */
int clp_progress_width(FILE *out);

/* On a terminal (width > 0): blank the status line and return to its start, so the next output
 * replaces it. Nothing otherwise. */
void clp_progress_clear(FILE *out, int width);

/* "1m05s" or "2h03m" */
void clp_progress_time(double sec, char *buf, size_t n);

#endif
