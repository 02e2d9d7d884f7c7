/* A training session on one device: tokenizer, dataset, model stage, optimizer, schedule of the
 * learning rate, evaluation, checkpoints, logging and sampling. `clpipe train`, `eval` and
 * `sample` are thin wrappers around it.
 *
 * Lifecycle: clp_session_open(mode) -> the calls of that mode -> clp_session_close(). A session
 * does what its mode opened it for: TRAIN runs clp_session_train and clp_session_eval, EVAL
 * clp_session_eval, SAMPLE clp_session_sample; any other call returns CLP_ERR_STATE. */
#ifndef CLP_TRAIN_SESSION_H
#define CLP_TRAIN_SESSION_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/train/summary.h"
#include "engine/train/train_config.h"
#include "topology/comm/comm.h"

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

/* Mean validation loss (nats per token) over eval.batches micro-batches (0: every sequence of
 * the split once), and bits per byte (NaN when not meaningful, e.g. BERT's masked loss). With
 * eval.dump set (clpipe eval), the evaluated inputs and targets are written there as JSON. */
clp_status clp_session_eval(clp_session *s, long batches, double *loss, double *bpb);
/* The number of targets (tokens predicted) of the last evaluation. */
uint64_t clp_session_eval_tokens(const clp_session *s);

/* The unigram entropy of the training split in bits per byte (the baseline a model must beat). */
double clp_session_baseline_bpb(const clp_session *s);

/* What this rank holds, in words: "stage 1 (layers 2..3), stage 5 (layers 10..11, head)". */
void clp_session_role(const clp_session *s, char *buf, size_t n);
/* Steps done so far (a resumed run starts at its checkpoint's). */
long clp_session_steps_done(const clp_session *s);

/* One training step as the session logs it. */
typedef struct clp_session_step {
	long step, steps; /* 1-based step number, of cfg.train.steps */
	double loss;      /* the step's mean loss */
	double lr;        /* its learning rate */
	double grad_norm; /* before clipping */
	double tok_s, ms; /* throughput and wall time of the step */
	double eta_s;     /* the rest of the run at the average rate so far */
	int skipped;      /* a non-finite gradient: no parameter changed */
	double loss_scale; /* fp16: the dynamic loss scale the step used (0: not scaling) */
} clp_session_step;

/* Where step records go: fn(ud, rec) on rank 0 after every step instead of the default, which
 * prints a progress line on the session's out and writes a "step" record to train.log. NULL
 * restores the default. */
void clp_session_set_logger(clp_session *s, void (*fn)(void *ud, const clp_session_step *rec),
			    void *ud);

/* Stopping on a signal: the caller's handler stores the signal number in *flag (the session
 * installs no handler). The session reads it after every step; when any rank of the job has it
 * set, every rank ends the run at that same step boundary and, with ckpt.dir set, saves a
 * checkpoint of it (resume continues at the next step); no final evaluation runs. NULL: none. */
void clp_session_set_stop_flag(clp_session *s, volatile sig_atomic_t *flag);
/* After clp_session_train: the signal that stopped the run (0: it ran to its end), the rank that
 * saw it first, and the checkpoint of the step it stopped at ("" when none was saved). */
int clp_session_stopped(const clp_session *s, int *rank);
/* The checkpoint this run saved last ("": none yet), on every rank. */
const char *clp_session_last_ckpt(const clp_session *s);

/* Called after every completed step (1-based count) with ud; for tests of failure handling. */
void clp_session_set_hook(clp_session *s, void (*fn)(void *ud, long step), void *ud);

/* Write cfg.sample.length tokens continuing cfg.sample.prompt to out (as they are drawn). */
clp_status clp_session_sample(clp_session *s, FILE *out);

#endif
