/* The summary at the end of `clpipe train`: what the run did (steps, tokens, wall time, mean
 * throughput, the best validation loss and bits per byte) and where its results are (the last
 * checkpoint, the loss curve, the log), with the commands that sample from it or resume it. */
#ifndef CLP_TRAIN_SUMMARY_H
#define CLP_TRAIN_SUMMARY_H

#include <stdio.h>

typedef struct clp_train_summary {
	long first_step;      /* the step the run started at (a resumed run: > 0) */
	long steps;           /* steps done at the end */
	long planned;         /* train.steps */
	double tokens;        /* tokens trained on in this run (padding and masks included) */
	double wall_s;        /* this run's wall time: steps, evaluations and checkpoints */
	long best_step;       /* the evaluation with the lowest validation loss (-1: none) */
	double best_loss;     /* nats per token */
	double best_bpb;      /* bits per byte (NaN: not meaningful, e.g. BERT) */
	double baseline_bpb;  /* unigram baseline (NaN: not a byte-level model) */
	double target_ratio;  /* eval.target_ratio (0: none) */
	int can_sample;       /* a decoder: `clpipe sample` works on its checkpoints */
	char ckpt[1100];      /* the last complete checkpoint ("": none) */
	char ckpt_dir[1024];  /* ckpt.dir */
	char curve[1100];     /* the loss curve ("": none) */
	char log[1024];       /* train.log ("": none) */
	char prompt[1024];    /* sample.prompt, for the sample command */
	char precision[8];    /* train.precision ("": not shown) */
	double loss_scale;    /* fp16: the dynamic loss scale at the end (0: none) */
	long skipped;         /* steps skipped for a non-finite gradient, in this run */
	int ranks;            /* the job's ranks: > 1, the commands that train start with mpirun */
	int stopped;          /* the signal that stopped the run (0: none) */
	double build_s;       /* of wall_s, kernel builds of a cold cache (left out of tokens/s) */
	/* After a lost rank (issue 28): the layout the run went on in, as "--key=value" words that
	 * replace the run's own settings of those keys in the commands ("": none), and why
	 * ("after step 2: 2 stages x 1 replica over 2 ranks"). */
	char relayout[256];
	char relayout_why[200];
} clp_train_summary;

/* Print it. program is how to call clpipe (see clp_train_summary_program); argv (argc entries,
 * without the program and the "train" word) are the arguments of the run, repeated with
 * --resume in the resume command (quoted for a POSIX shell; --resume/--ckpt.resume dropped;
 * --ckpt.dir added when the run's directory was not among them; under "mpirun -np N" when the
 * run had N > 1 ranks; argc < 0: not known, a placeholder stands for them). Timing goes in as
 * given: the output depends only on s. */
void clp_train_summary_print(FILE *out, const clp_train_summary *s, const char *program,
			     int argc, char *const *argv);

/* How the user called clpipe, for commands to copy: the running executable's path relative to
 * the current directory when inside it (e.g. build/tools/clpipe), else absolute; "clpipe" when
 * that cannot be found. */
void clp_train_summary_program(char *out, size_t n);

#endif
