/* One timed repetition of a stage's training step on its device: what the planner's block table
 * (`clpipe bench --model`) and PipeFisher's start-up (engine/train/session_pf.c) measure, written
 * once. Each part is enqueued, then the device finished, and the wall time taken (launches
 * included, as a training step pays them). */
#ifndef CLP_OPTIM_STAGE_TIME_H
#define CLP_OPTIM_STAGE_TIME_H

#include <stdint.h>

#include "engine/model/stage.h"
#include "engine/optim/kfac.h"

/* Seconds of each part; 0 for a part not run. */
typedef struct clp_stage_times {
	double fwd;
	double bwd, bwd_b, bwd_w; /* whole backward, or its input (B) and weight (W) halves; with
				   * split, bwd = bwd_b + bwd_w, else bwd_b = bwd_w = bwd / 2 */
	double opt;               /* AdamW with the gradient statistics it reads; with K-FAC its
				   * update */
	double kfac_a, kfac_b;    /* K-FAC: factors A and B of micro-batch m->micro_batch */
	double kfac_inv;          /* K-FAC: inverting every factor */
	double kfac_pre;          /* K-FAC: preconditioning the gradients */
} clp_stage_times;

/* One repetition on st (made with split when split is set) for micro-batch m, loss scale 1 / its
 * rows: the stage's input (a later stage) and output gradient (an earlier one), rows x width,
 * are random from *rng, uploaded untimed; with k, k collects the micro-batch's inputs and output
 * gradients during the backward (deferred) and the K-FAC items run from them. */
clp_status clp_stage_time(clp_stage *st, clp_kfac_opt *k, int split, const clp_stage_mb *m,
			  size_t width, uint64_t *rng, clp_stage_times *t);

#endif
