/* Muon in the executor (optim.name = "muon"; docs/OPTIMIZERS.md): the layers' weight matrices
 * (attention q/k/v and output, MLP in and out) take Muon steps (cl/muon.h), every other tensor
 * (embeddings, head, norms, biases) AdamW. The momentum of a Muon matrix is the stage's AdamW
 * first moment of that tensor (its second moment stays zero), so checkpoints hold it without a
 * state of the optimizer's own. */
#ifndef CLP_EXEC_EXEC_MUON_H
#define CLP_EXEC_EXEC_MUON_H

#include "cl/muon.h"
#include "cl/nn.h"
#include "engine/exec/exec.h"

/* What Muon is made with (fixed for the run). */
typedef struct clp_exec_muon_opts {
	float momentum; /* 0.95 */
	int nesterov;   /* 1 */
	int ns_steps;   /* 5 */
	int delay;      /* muon.delay: the one-step-delayed update (docs/OPTIMIZERS.md) */
} clp_exec_muon_opts;

/* One step's settings (clp_exec_step's `settings`): AdamW's for the other tensors, and the
 * Muon matrices' learning rate (the weight decay is adamw.weight_decay for both). */
typedef struct clp_exec_muon_step {
	clp_nn_adamw_hp adamw;
	float lr;
} clp_exec_muon_step;

/* 1 when tensor t of a stage's table takes Muon steps. */
int clp_exec_muon_takes(const clp_tensor_desc *t);

/* The Newton-Schulz work of one layer of model m per step (ns_steps iterations on each of its
 * Muon matrices: 4 m^2 n + 2 m^3 flops an iteration for m x n, m <= n), as a multiple of the
 * layer's matrix products in the forward and backward of one micro-batch of `tokens` tokens
 * (6 flops a weight and token): for the planner's cost of an optimizer step. 0 on failure. */
double clp_exec_muon_layer_work(const clp_model_config *m, size_t tokens, int ns_steps);

/* Device bytes clp_exec_muon allocates on a rank whose local stages hold the tables
 * tabs[0..n-1], exactly (alignment padding aside): its scratch, 4 (2 x the largest Muon matrix
 * + 2 x the largest min(rows, cols)^2 + 1) bytes (the momentum is the stages' AdamW first
 * moment). The memory model's (clp_optim_info.own_bytes); tests/plan/test_plan_mem.c holds it
 * equal to clp_exec_muon_device_bytes. */
int64_t clp_exec_muon_bytes(const clp_param_table *const *tabs, int n);
/* What the buffers of e's installed Muon hold (CL_MEM_SIZE summed); 0 when e's optimizer is
 * not Muon or a size cannot be read. */
int64_t clp_exec_muon_device_bytes(const clp_exec *e);

/* Muon instead of AdamW. Before the first step. */
clp_status clp_exec_muon(clp_exec *e, const clp_exec_muon_opts *o);

#endif
