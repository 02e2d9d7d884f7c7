/* Helpers of the training tests: a small deterministic corpus in a temporary directory, a
 * session run to completion, and the per-step losses from its JSON-lines log. */
#ifndef CLP_TEST_TRAIN_UTIL_H
#define CLP_TEST_TRAIN_UTIL_H

#include "engine/train/session.h"

/* Make (once per process) a directory under /tmp and a text corpus in it; both paths are
 * owned by the helper. */
const char *tu_dir(void);
const char *tu_corpus(void);
/* Remove the directory (end of a test program). */
void tu_cleanup(void);

/* The tiny model of the training tests: defaults, then 2 layers of width 32, 4 heads, context
 * 16, 2 micro-batches of 4 sequences, 6 steps (warm-up 2, lr 3e-3), no periodic evaluation
 * (2 batches at the end), on tu_corpus(). */
void tu_tiny_config(clp_train_config *c, const char *preset);

/* Train with c on this process (comm NULL) or a job (comm); returns the number of step losses
 * read back from c->train.log into losses (at most max); *val gets the final validation loss
 * when val is not NULL. Failures are reported through the harness. */
int tu_train(const clp_train_config *c, clp_comm *comm, double *losses, int max, double *val);

/* The step losses of a JSON-lines training log. */
int tu_losses(const char *log, double *out, int max);

#endif
