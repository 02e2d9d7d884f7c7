/* The loss curve of a training run as an SVG picture: training loss per step and validation loss
 * per evaluation against the step (left axis, nats per token), and tokens/s (right axis).
 * `clpipe train` keeps one next to its log (train.log x.jsonl -> x.svg) and rewrites it, through
 * a temporary file and a rename, at every evaluation, so a browser showing it is never torn.
 *
 * Non-finite values (a diverged or skipped step) are left out of the lines and the axis ranges;
 * an empty or one-point series still gives a valid picture. Up to CLP_CURVE_MAX_POINTS steps
 * are drawn one point per step; a longer run is drawn as the means of consecutive groups. The
 * tokens/s line, noisy from step to step, is drawn the same way with at most
 * CLP_CURVE_SPEED_POINTS points. */
#ifndef CLP_TRAIN_CURVE_H
#define CLP_TRAIN_CURVE_H

#include <stddef.h>

#include "cl/base/status.h"

#define CLP_CURVE_MAX_POINTS 4000
#define CLP_CURVE_SPEED_POINTS 200

typedef struct clp_curve clp_curve;

clp_status clp_curve_new(clp_curve **c);
void clp_curve_free(clp_curve *c);

/* A step's training loss and throughput (step: 1-based count of steps done). A step at or
 * before the last one recorded replaces that part of the series (a resumed run's log repeats
 * the steps after its checkpoint). */
clp_status clp_curve_add_step(clp_curve *c, long step, double loss, double tok_s);
/* An evaluation after `step` steps: validation loss (nats per token) and bits per byte (NaN
 * when not meaningful). Same replacement rule. */
clp_status clp_curve_add_eval(clp_curve *c, long step, double val_loss, double bpb);

/* The step and evaluation records of a JSON-lines training log up to step `upto` (a resumed
 * run's earlier steps). A missing log adds nothing; a malformed line is skipped. */
clp_status clp_curve_load_log(clp_curve *c, const char *log, long upto);

/* The picture as a NUL-terminated malloc()ed string (title: one line of text above the plot,
 * escaped here); NULL when out of memory. */
char *clp_curve_svg(const clp_curve *c, const char *title);
/* Write it to path durably (temporary name, fsync, rename). */
clp_status clp_curve_write(const clp_curve *c, const char *path, const char *title);

/* Where the curve of a run logged to `log` goes: the log's name with .jsonl/.json/.log replaced
 * by .svg (or .svg appended). "" when log is "". */
void clp_curve_path(const char *log, char *out, size_t n);

#endif
