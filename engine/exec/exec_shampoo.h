/* Shampoo in the executor (optim.name = "shampoo"; docs/OPTIMIZERS.md): the layers' weight
 * matrices (Muon's rule, clp_exec_muon_takes: attention q/k/v and output, MLP in and out) take
 * Shampoo steps (cl/shampoo.h), every other tensor (embeddings, head, norms, biases) AdamW. The
 * momentum buffer of a Shampoo matrix is the stage's AdamW first moment of that tensor (its
 * second moment stays zero without grafting); the statistics L, R and their inverse roots are the optimizer's
 * own state, in checkpoints as shampoo.<tensor>.{L,R,L_inv,R_inv}. The roots are refreshed in
 * the optimizer step of every `interval`-th step. With grafting the graft's second moment is the
 * stage's AdamW second moment of the tensor. */
#ifndef CLP_EXEC_EXEC_SHAMPOO_H
#define CLP_EXEC_EXEC_SHAMPOO_H

#include "cl/nn.h"
#include "cl/shampoo.h"
#include "engine/exec/exec.h"

/* What Shampoo is made with (fixed for the run). */
typedef struct clp_exec_shampoo_opts {
	float momentum;  /* pytorch-optimizer's: lerp(g, the previous update, momentum); 0: none */
	float eps;       /* the statistics start at eps I (matrix_eps, 1e-6) */
	int interval;    /* roots refreshed when the step count is a multiple (1) */
	int iters;       /* coupled Newton iterations per root (25) */
	int graft;       /* scale each update to Adam's norm (clp_shampoo_hp.graft; 0) */
} clp_exec_shampoo_opts;

/* One step's settings (clp_exec_step's `settings`): AdamW's for the other tensors, and the
 * Shampoo matrices' learning rate (the weight decay is adamw.weight_decay for both, the step
 * count adamw.step). */
typedef struct clp_exec_shampoo_step {
	clp_nn_adamw_hp adamw;
	float lr;
} clp_exec_shampoo_step;

/* Shampoo's work per layer of model m per step (the statistics and preconditioning products
 * every step, the roots every interval-th), as a multiple of the layer's matrix products in
 * the forward and backward of one micro-batch of `tokens` tokens (6 flops a weight and
 * token): for the planner's cost of an optimizer step. 0 on failure. */
double clp_exec_shampoo_layer_work(const clp_model_config *m, size_t tokens, int iters,
				   int interval);

/* Shampoo instead of AdamW. Before the first step. */
clp_status clp_exec_shampoo(clp_exec *e, const clp_exec_shampoo_opts *o);

#endif
