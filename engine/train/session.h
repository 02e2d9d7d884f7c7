/* A training session on one device: tokenizer, dataset, model stage, optimizer, schedule of the
 * learning rate, evaluation, checkpoints, logging and sampling. `clpipe train`, `eval` and
 * `sample` are thin wrappers around it.
 *
 * Lifecycle: clp_session_open() -> clp_session_train() / clp_session_eval() /
 * clp_session_sample() -> clp_session_close(). */
#ifndef CLP_TRAIN_SESSION_H
#define CLP_TRAIN_SESSION_H

#include <stdio.h>

#include "engine/train/summary.h"
#include "engine/train/train_config.h"
#include "topology/comm.h"

typedef struct clp_session clp_session;

enum clp_session_mode {
	CLP_SESSION_TRAIN,  /* data, model, optimizer; resume if ckpt.resume */
	CLP_SESSION_EVAL,   /* data and the model of sample.ckpt */
	CLP_SESSION_SAMPLE, /* the model of sample.ckpt, batch 1 */
};

/* cfg is copied. For EVAL and SAMPLE the model fields come from the checkpoint's stored config
 * (the command line's data and sample settings still apply). Progress goes to out (rank 0).
 * comm: the job's ranks (borrowed; NULL: this process alone); training runs the configured
 * pipeline schedule over them, D x R ranks. */
clp_status clp_session_open(clp_session **s, const clp_train_config *cfg,
			    enum clp_session_mode mode, clp_comm *comm, FILE *out);
void clp_session_close(clp_session *s);

/* The effective config (after presets and the checkpoint's settings are applied). */
const clp_train_config *clp_session_config(const clp_session *s);

/* Run the remaining steps of cfg.train.steps, evaluating and checkpointing as configured.
 * *val_loss (may be NULL) gets the last validation loss. */
clp_status clp_session_train(clp_session *s, double *val_loss);

/* After clp_session_train on rank 0: what the run did and where its results are (summary.h);
 * CLP_ERR_STATE on other ranks or before training. */
clp_status clp_session_summary(const clp_session *s, clp_train_summary *out);

/* Mean validation loss (nats per token) over eval.batches micro-batches (0: all of the split),
 * and bits per byte (NaN when not meaningful, e.g. BERT's masked loss). */
clp_status clp_session_eval(clp_session *s, long batches, double *loss, double *bpb);

/* The unigram entropy of the training split in bits per byte (the baseline a model must beat). */
double clp_session_baseline_bpb(const clp_session *s);

/* Called after every completed step (1-based count) with ud; for tests of failure handling. */
void clp_session_set_hook(clp_session *s, void (*fn)(void *ud, long step), void *ud);

/* Write cfg.sample.length tokens continuing cfg.sample.prompt to out (as they are drawn). */
clp_status clp_session_sample(clp_session *s, FILE *out);

#endif
