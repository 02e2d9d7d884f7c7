/* Shampoo in the executor (optim.name = "shampoo"; docs/OPTIMIZERS.md): the layers' weight
 * matrices (Muon's rule, clp_exec_muon_takes: attention q/k/v and output, MLP in and out) take
 * Shampoo steps (cl/shampoo.h), every other tensor (embeddings, head, norms, biases) AdamW. The
 * momentum buffer of a Shampoo matrix is the stage's AdamW first moment of that tensor (its
 * second moment stays zero without grafting); the statistics L, R and their inverse roots are the optimizer's
 * own state, in checkpoints as shampoo.<tensor>.{L,R,L_inv,R_inv}. The roots are refreshed in
 * the optimizer step of every `interval`-th step, or with stale roots (opts.stale, below) by the
 * schedule's PipeFisher items in its bubbles (or serially, one device). With grafting the graft's second moment is the
 * stage's AdamW second moment of the tensor. */
#ifndef CLP_EXEC_EXEC_SHAMPOO_H
#define CLP_EXEC_EXEC_SHAMPOO_H

#include "cl/nn.h"
#include "cl/shampoo.h"
#include "cl/soap.h"
#include "engine/exec/exec.h"

/* What Shampoo is made with (fixed for the run). */
typedef struct clp_exec_shampoo_opts {
	float momentum;  /* pytorch-optimizer's: lerp(g, the previous update, momentum); 0: none */
	float eps;       /* the statistics start at eps I (matrix_eps, 1e-6) */
	int interval;    /* roots refreshed when the step count is a multiple (1) */
	int iters;       /* coupled Newton iterations per root (25) */
	int graft;       /* scale each update to Adam's norm (clp_shampoo_hp.graft; 0) */
	int warmup;      /* also refresh the roots at every step t <= warmup (0: none) */
	float stat_beta; /* statistics as moving averages (clp_shampoo_hp.stat_beta; 0 or 1:
			  * sums, the package's) */
	/* PipeFisher's stale roots (docs/OPTIMIZERS.md, "Shampoo in the bubbles"), the
	 * semantics of a schedule with Shampoo items (KFAC_INV per layer and factor, made by the
	 * pass with CLP_PF_WORK_SHAMPOO; there interval must be the cycle's K): in cycles of
	 * `interval` steps (0-based step s, cycle s / interval), the OPT_STEP of a cycle's first
	 * step copies the updated statistics into L_next, R_next; each root's refresh (the
	 * schedule's item, or without items right there, serially) replaces its copy by its
	 * inverse 4th root; at the start of the next cycle L_inv, R_inv = L_next, R_next. Step 0
	 * also refreshes L_inv, R_inv serially after its statistics. warmup must be 0. The state
	 * holds L_next, R_next too (checkpoint tensors shampoo.<tensor>.{L_next,R_next}). A
	 * schedule's items may hold a root in phases (KFAC_INV with op.mb = 0..nph-1, in order,
	 * all in the cycle): phase p runs its share of the iterations
	 * (clp_shampoo_inv_root_phase), M in place in L_next / R_next, X in a set of its own. */
	int stale;
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

/* Device bytes clp_exec_shampoo allocates on a rank whose local stages hold the tables
 * tabs[0..n-1], exactly (alignment padding aside): per Shampoo matrix (clp_exec_muon_takes,
 * rows x cols) L, R, L_inv and R_inv, 8 (rows^2 + cols^2) bytes, and one scratch set for the
 * rank, 4 (2 x the largest matrix + 6 x the largest max(rows, cols)^2 + 2) bytes. The memory
 * model's (clp_optim_info.own_bytes); tests/plan/test_plan_mem.c holds it equal to
 * clp_exec_shampoo_device_bytes. */
int64_t clp_exec_shampoo_bytes(const clp_param_table *const *tabs, int n);
/* What stale roots (opts.stale) add to clp_exec_shampoo_bytes: L_next and R_next, 4 (rows^2 +
 * cols^2) bytes a Shampoo matrix. */
int64_t clp_exec_shampoo_next_bytes(const clp_param_table *const *tabs, int n);
/* What roots in phases (a schedule whose Shampoo items are in phases, with opts.stale) add
 * further: each matrix's X of its L and R roots between phases, 4 (rows^2 + cols^2) bytes (M
 * stays in L_next, R_next). Not in checkpoints: PipeFisher's are at cycle ends, where no root
 * is half done. */
int64_t clp_exec_shampoo_phase_bytes(const clp_param_table *const *tabs, int n);
/* The phases of a root in schedule s: 1 + the largest op.mb of its KFAC_INV ops (the pass's
 * CLP_PF_SPLIT_PHASES); 0 when none is in phases. */
int clp_exec_shampoo_sched_phases(const clp_sched *s);
/* What the buffers of e's installed Shampoo hold (CL_MEM_SIZE summed); 0 when e's optimizer
 * is not Shampoo or a size cannot be read. */
int64_t clp_exec_shampoo_device_bytes(const clp_exec *e);

/* Shampoo instead of AdamW. Before the first step. */
clp_status clp_exec_shampoo(clp_exec *e, const clp_exec_shampoo_opts *o);

/* SOAP (optim.name = "soap", cl/soap.h): the same matrices and the same hooks as Shampoo (this
 * file's second kind), its state buffer per matrix L, R, QL, QR in Shampoo's layout (L_inv,
 * R_inv's places hold the eigenbases), Adam's m in the stage's AdamW first moment and v (in the
 * rotated space) in its second; checkpoint tensors soap.<tensor>.{L,R,QL,QR}. The eigenbases
 * are refreshed in the optimizer step of every `frequency`-th step (clp_soap_hp.refresh, the
 * package's s % precondition_frequency == 0); or with stale bases (opts.stale) once a cycle. */
typedef struct clp_exec_soap_opts {
	float beta1, beta2;  /* Adam's (0.95, 0.95) */
	float shampoo_beta;  /* the statistics' moving average */
	float eps;           /* 1e-8 */
	int frequency;       /* eigenbases refreshed when s = t - 1 is a multiple (10) */
	int init_iters;      /* refresh rounds from Q = I for the first bases */
	int correct_bias;
	/* PipeFisher's stale eigenbases, as Shampoo's stale roots with K = frequency: no
	 * refresh in the step; the cycle's first OPT_STEP snapshots L, R (L_next, R_next), the
	 * schedule's KFAC_INV items (or, without them, that OPT_STEP) compute each side's next
	 * basis and perm (clp_soap_basis_next) into QL_next, QR_next and a perm per side, and the
	 * next cycle's start copies them in and permutes v (clp_soap_permute, L axis 0 then R
	 * axis 1, table order). */
	int stale;
} clp_exec_soap_opts;

/* One SOAP step's settings: AdamW's for the other tensors (its step count is SOAP's t), the
 * SOAP matrices' rate and decoupled weight decay. */
typedef struct clp_exec_soap_step {
	clp_nn_adamw_hp adamw;
	float lr, weight_decay;
} clp_exec_soap_step;

/* SOAP's work per layer, as clp_exec_shampoo_layer_work's multiple: each matrix's
 * clp_soap_step_flops every step and both sides' clp_soap_refresh_flops every frequency-th. */
double clp_exec_soap_layer_work(const clp_model_config *m, size_t tokens, int frequency);
/* Device bytes clp_exec_soap allocates on a rank whose local stages hold tabs[0..n-1]:
 * 8 (rows^2 + cols^2) a SOAP matrix (L, R, QL, QR) and one clp_soap_work for the largest. */
int64_t clp_exec_soap_bytes(const clp_param_table *const *tabs, int n);
/* What the buffers of e's installed SOAP hold; 0 when e's optimizer is not SOAP. */
int64_t clp_exec_soap_device_bytes(const clp_exec *e);
/* What stale bases (opts.stale) add to clp_exec_soap_bytes: L_next, R_next, QL_next, QR_next
 * and the perms, 4 (2 rows^2 + 2 cols^2 + rows + cols) bytes a matrix. */
int64_t clp_exec_soap_next_bytes(const clp_param_table *const *tabs, int n);
/* SOAP instead of AdamW. Before the first step. */
clp_status clp_exec_soap(clp_exec *e, const clp_exec_soap_opts *o);

#endif
