/* The K-FAC optimizer of one stage: Kronecker factors of the stage's linear layers, their
 * inverses (double-buffered), preconditioning, and the update (SGD with momentum and KL
 * clipping, or AdamW, on the preconditioned gradients; AdamW on every other parameter).
 *
 * Which layers: the four linears of every transformer layer the stage holds (clp_stage_linear):
 * QKV, attention output, MLP first and second layer. Not embeddings, the head or norms. Outputs
 * that share one input (llama/bert q, k, v; llama gate, up) are separate layers sharing one A:
 * a linear has one factor A and one factor B per output part. Factors of a layer are numbered
 * linear by linear: A, then its B parts (clp_kfac_opt_nfactors per layer; bert: 10).
 *
 * The cycle rule (docs/KFAC.md), deterministic: with refresh interval K, cycle c is steps
 * cK .. cK + K - 1. The factors come from the first step of each cycle (the micro-batches of step
 * cK), optionally as an exponential moving average over cycles. The inverses computed from them
 * during cycle c become active together at the start of cycle c + 1. Step 0 does one serial
 * refresh (clp_kfac_opt_activate) so there is always an inverse. Every step preconditions with
 * the active inverses.
 *
 * Every item is a separate call, so a pipeline executor can run the schedule's K-FAC ops
 * (engine/sched/sched.h) wherever the PipeFisher pass put them:
 *   KFAC_CURV_A/B(layer, mb) the stage's tap during the backward (serially), or with
 *                           clp_kfac_opt_defer on, clp_kfac_opt_curv_a_kept / _b_kept where
 *                           the items sit (or clp_kfac_opt_curv_a from the slot before the
 *                           backward)
 *   KFAC_SYNC(layer)        all-reduce clp_kfac_opt_factor(...) over the group
 *   KFAC_INV(layer, f)      clp_kfac_opt_invert (op.mb >= 0: clp_kfac_opt_invert_phase)
 *   KFAC_INV_SYNC(layer)    all-reduce clp_kfac_opt_inverse(..., 1), zeros from non-owners
 *   KFAC_PRECOND(stage)     clp_kfac_opt_precondition (op.layer >= 0, a split cycle:
 *                           clp_kfac_opt_precondition_mine with the rank's layers)
 *   KFAC_PREC_SYNC(stage)   all-reduce clp_kfac_opt_layer_grads and the KL sum
 *   OPT_STEP(stage)         clp_kfac_opt_update
 * In the first cycle the scheduled CURV/SYNC/INV items are skipped: the serial refresh did
 * that work. The executor (engine/exec/exec_kfac.c) calls them in the serial order of the same
 * rule for schedules without K-FAC items.
 * Everything is enqueued on the stage's context; nothing waits, except where a comment says. */
#ifndef CLP_OPTIM_KFAC_H
#define CLP_OPTIM_KFAC_H

#include "engine/io/checkpoint.h"
#include "engine/model/stage.h"

typedef enum clp_kfac_base { CLP_KFAC_BASE_SGD = 0, CLP_KFAC_BASE_ADAMW } clp_kfac_base;

typedef struct clp_kfac_opts {
	double damping;  /* lambda of the pi damping (> 0) */
	double ema;      /* factor = ema old + (1 - ema) new, from the second cycle; 0: replace */
	int interval;    /* K, the refresh interval (>= 1) */
	clp_kfac_base base;
	double momentum; /* SGD */
	double kl_clip;  /* SGD: KL clipping bound; 0: none */
	int max_kept;    /* micro-batches whose inputs / output gradients may be kept for deferred
			  * factors at once (0: no limit) */
} clp_kfac_opts;

void clp_kfac_opts_default(clp_kfac_opts *o);
const char *clp_kfac_base_name(clp_kfac_base b);

typedef struct clp_kfac_opt clp_kfac_opt;

/* Factors and inverses for the stage's layers (the stage must outlive the optimizer). Installs
 * the stage's output-gradient tap. */
clp_status clp_kfac_opt_create(clp_kfac_opt **out, clp_stage *st, const clp_kfac_opts *o);
void clp_kfac_opt_free(clp_kfac_opt *k);

/* Factors per layer, and the dimension and name ("fc.A", "qkv.B1") of factor f. */
int clp_kfac_opt_nfactors(const clp_kfac_opt *k);
size_t clp_kfac_opt_factor_dim(const clp_kfac_opt *k, int f);
const char *clp_kfac_opt_factor_name(const clp_kfac_opt *k, int f);
/* The factor f of model layer `layer` (for the all-reduce of KFAC_SYNC); mem NULL if the stage
 * does not hold the layer. */
clp_buf clp_kfac_opt_factor(const clp_kfac_opt *k, int layer, int f);

/* The inverse of factor f of model layer `layer` that preconditions now (next = 0), or the
 * one being computed for the next cycle (next = 1); mem NULL if not on this stage. */
clp_buf clp_kfac_opt_inverse(const clp_kfac_opt *k, int layer, int f, int next);

/* Start step `step` (the global step number). At a cycle's first step the inverses computed in
 * the previous cycle become active, and this step's micro-batches are collected: count is the
 * loss's divisor (valid targets of the step over all micro-batches and replicas), rows the token
 * rows the factors average over (N times the micro-batches of all replicas). Returns whether
 * this step collects factors in *collect (may be NULL). */
clp_status clp_kfac_opt_step_begin(clp_kfac_opt *k, long step, double count, double rows,
				   int *collect);
/* With data parallelism: only one member of a factor's all-reduce group carries the moving
 * average's old value (the others start the cycle from zero), so the sum is right. */
void clp_kfac_opt_set_ema_owner(clp_kfac_opt *k, int owner);

/* The factors come through the stage's output-gradient tap during the backward: A from the
 * layer's input (saved, or recomputed just then) and B from the output gradient, both at once.
 * With deferral on (PipeFisher, from the second cycle), the tap instead keeps a copy of the
 * inputs and output gradients of micro-batch mb, and the items accumulate later:
 * clp_kfac_opt_curv_a_kept / _b_kept (li -1: all layers). A factor A placed between the forward
 * and the backward may come straight from the slot with clp_kfac_opt_curv_a (not when the stage
 * recomputes); the tap then keeps no input for it. A copy is released once A and B of all its
 * layers are done; CLP_ERR_NOMEM past max_kept. Kept data may be used in any later step of the
 * cycle. */
void clp_kfac_opt_defer(clp_kfac_opt *k, int on);
clp_status clp_kfac_opt_curv_a(clp_kfac_opt *k, int li, int slot, int mb);
clp_status clp_kfac_opt_curv_a_kept(clp_kfac_opt *k, int li, int mb);
clp_status clp_kfac_opt_curv_b_kept(clp_kfac_opt *k, int li, int mb);
/* The tap the optimizer installs on its stage (exported so a test can chain its own). */
clp_status clp_kfac_opt_tap(void *k, const clp_stage_mb *mb, int li, clp_stage_linear lin,
			    clp_buf dy);

/* Invert factor f (-1: every factor) of model layer `layer` (-1: every layer of the stage) into
 * the next inverses, with the damping of its linear. */
clp_status clp_kfac_opt_invert(clp_kfac_opt *k, int layer, int f);
/* One phase of that inversion (a split PipeFisher cycle runs them as separate items, in
 * order, each after the one before): 0 damps the factor and leaves its Cholesky factor in the
 * next inverse, 1 inverts that triangle in place, 2 forms X^T X there. The three equal
 * clp_kfac_opt_invert bitwise. layer >= 0. */
clp_status clp_kfac_opt_invert_phase(clp_kfac_opt *k, int layer, int f, int phase);
/* Make the next inverses active now (step 0's serial refresh; copies, next stays valid). */
clp_status clp_kfac_opt_activate(clp_kfac_opt *k);

/* Replace the gradients of the K-FAC layers by B^-1 G A^-1 (biases B^-1 g_b) with the active
 * inverses, and sum p . g for the KL clip into clp_kfac_opt_kl_sum. */
clp_status clp_kfac_opt_precondition(clp_kfac_opt *k);
/* Split preconditioning (a split PipeFisher cycle, docs/KFAC.md): precondition the layers i of
 * the stage with mine[i] set and zero the gradients of its other K-FAC layers, so a sum over the
 * stage's holders (clp_kfac_opt_layer_grads of every layer, and the KL sum) gives each holder
 * every layer's preconditioned gradient and the stage's whole KL sum. */
clp_status clp_kfac_opt_precondition_mine(clp_kfac_opt *k, const uint8_t *mine);
/* The gradient tensors of K-FAC layer `layer` (weights and biases of its linears) into b[] and
 * their lengths into n[]; returns how many (at most max; 0 if the stage does not hold it). */
int clp_kfac_opt_layer_grads(const clp_kfac_opt *k, int layer, clp_buf *b, size_t *n, int max);
/* The stage's p . g sum (one float on the device). With several stages, all-reduce it over
 * every rank before clp_kfac_opt_update, as the gradient norm: KL clipping is global. */
clp_buf clp_kfac_opt_kl_sum(const clp_kfac_opt *k);
/* The optimizer step of every parameter of the stage: the K-FAC layers with the base optimizer
 * at learning rate kfac_lr (SGD: momentum in the stage's ADAM_M state, decoupled weight decay
 * hp->weight_decay on decayed tensors, KL clipping), the others with AdamW (hp). gstats: the
 * stage's gradient statistics of the raw gradients (clip factor and non-finite skip), as
 * clp_stage_adamw. */
clp_status clp_kfac_opt_update(clp_kfac_opt *k, const clp_nn_adamw_hp *hp, float kfac_lr,
			       clp_buf gstats);

/* Synchronises (reads device flags): CLP_ERR_NUMERIC naming the layer and factor when an
 * inversion met a matrix that was not positive definite since the last check. */
clp_status clp_kfac_opt_check(clp_kfac_opt *k);

/* Checkpoints: factors, active and next inverses and whether a factor history exists, into the
 * optimizer part of a checkpoint (host copies kept until the next save or free). */
clp_status clp_kfac_opt_save(clp_kfac_opt *k, clp_ckpt_writer *w);
clp_status clp_kfac_opt_load(clp_kfac_opt *k, clp_ckpt *c);

#endif
