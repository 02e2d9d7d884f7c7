/* Muon (MomentUm Orthogonalized by Newton-Schulz) on one 2-D tensor, as torch.optim.Muon
 * (torch 2.9, torch/optim/_muon.py) computes it, in fp32 on the device:
 *   buf = lerp(buf, g, 1 - mu);  u = nesterov ? lerp(g, buf, mu) : buf
 *   X = u (transposed when rows > cols), X /= max(||X||_F, eps)
 *   ns_steps times: A = X X^T;  B = b A + c A A;  X = a X + B X      (a, b, c = 3.4445,
 *                                                                      -4.7750, 2.0315)
 *   p *= 1 - lr wd;  p -= lr sqrt(max(1, rows / cols)) X             (adjust_lr_fn "original",
 *                                                                      torch's default)
 * Differences from torch, on purpose: the iteration runs in fp32 (torch casts to bf16), and a
 * tall matrix is not transposed but iterated as X^T X and X B (the same products, no copy).
 * tools/check_muon.sh compares this with torch itself (docs/OPTIMIZERS.md).
 * The gradient is multiplied by gscale and, with stats (clp_nn_grad_stats), by the clip
 * factor; a set non-finite flag skips the step on the device, as AdamW does. */
#ifndef CLP_CL_MUON_H
#define CLP_CL_MUON_H

#include "cl/runtime.h"

#define CLP_MUON_A 3.4445
#define CLP_MUON_B (-4.7750)
#define CLP_MUON_C 2.0315
#define CLP_MUON_EPS 1e-7

typedef struct clp_muon_hp {
	float lr;           /* this step's learning rate, before the shape's scale */
	float weight_decay; /* decoupled: p *= 1 - lr wd */
	float momentum;     /* mu, 0.95 */
	int nesterov;       /* 1: the Nesterov look-ahead (torch's default) */
	int ns_steps;       /* 5 */
} clp_muon_hp;

/* Device scratch for tensors up to rows x cols (the largest a caller updates): x and x2 of
 * rows x cols floats, ga and gb of min(rows, cols)^2, nrm of 1 float. */
typedef struct clp_muon_work {
	clp_buf x, x2, ga, gb, nrm;
} clp_muon_work;

/* lr x sqrt(max(1, rows / cols)) */
double clp_muon_scaled_lr(double lr, size_t rows, size_t cols);

/* The three elementwise kernels (cl/kernels/muon.cl); n elements. */
clp_status clp_muon_momentum(clp_cl_ctx *ctx, clp_buf buf, clp_buf g, clp_buf u, size_t n,
			     float mu, int nesterov, float gscale, clp_buf stats);
clp_status clp_muon_normalize(clp_cl_ctx *ctx, clp_buf x, size_t n, clp_buf nrm, float eps);
clp_status clp_muon_apply(clp_cl_ctx *ctx, clp_buf p, clp_buf u, size_t n, float decay_mul,
			  float lr, clp_buf stats);

/* Newton-Schulz on x (rows x cols, row-major, normalised already) with work's ga, gb and x2;
 * *out is the buffer holding the result (x or x2). */
clp_status clp_muon_newton_schulz(clp_cl_ctx *ctx, clp_buf x, clp_buf x2, clp_buf ga, clp_buf gb,
				  size_t rows, size_t cols, int steps, clp_buf *out);

/* A Muon step in two parts (the executor's early placement, docs/OPTIMIZERS.md): the first
 * before the clipping factor and the non-finite flag are known, the second once they are.
 * clp_muon_orthogonalize: the update direction (momentum with gradient grad x gscale, Nesterov,
 * normalisation, Newton-Schulz) into out (rows x cols), buf left as it is. clp_muon_commit,
 * with out as upd: the momentum into buf and the update of param with the clipping factor and
 * the flag of stats, as clp_muon_update. The two give clp_muon_update's bits exactly when the
 * clipping factor is 1 (or the flag is set: then nothing changes); with another factor the
 * direction differs and clp_muon_update must run instead. */
clp_status clp_muon_orthogonalize(clp_cl_ctx *ctx, clp_buf buf, clp_buf grad, clp_buf out,
				  size_t rows, size_t cols, const clp_muon_hp *hp, float gscale,
				  const clp_muon_work *w);
clp_status clp_muon_commit(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf grad,
			   clp_buf upd, size_t rows, size_t cols, const clp_muon_hp *hp,
			   clp_buf stats, float gscale, const clp_muon_work *w);

/* The one-step-delayed Muon (muon.delay, docs/OPTIMIZERS.md "One-step-delayed Muon"): the
 * direction applied at step t is the orthogonalisation of step t-1's Nesterov direction P, kept
 * in d (the matrix's AdamW second moment) between steps. clp_muon_phases(ns_steps) phases make
 * D = NS(P) in place on d: phase 0 normalises (P / max(||P||_F, eps)), and every phase runs one
 * Newton-Schulz iteration (ns_steps = 0: one phase, the normalisation alone). Each phase copies
 * d into the scratch, works there and copies back, so the result does not depend on where d
 * lies, nor on whether the phases run together or apart (the same kernels on the same values).
 * clp_muon_delayed_commit, d holding D: param *= 1 - lr wd, param -= lr scale D (with stats'
 * flag set: param unchanged), then buf = lerp(buf, g', 1 - mu) and d = P := nesterov ?
 * lerp(g', buf, mu) : buf (un-normalised), g' = grad x gscale x the clip factor; with the flag
 * set buf is left and d := 0 (nonfinite, the host's copy of that flag, says so). */
int clp_muon_phases(int ns_steps);
clp_status clp_muon_ns_phase(clp_cl_ctx *ctx, clp_buf d, size_t rows, size_t cols, int ns_steps,
			     int phase, const clp_muon_work *w);
clp_status clp_muon_delayed_commit(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf grad,
				   clp_buf d, size_t rows, size_t cols, const clp_muon_hp *hp,
				   clp_buf stats, float gscale, int nonfinite);

/* One Muon step of param (rows x cols) with momentum buffer buf and gradient grad. */
clp_status clp_muon_update(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf grad,
			   size_t rows, size_t cols, const clp_muon_hp *hp, clp_buf stats,
			   float gscale, const clp_muon_work *w);

#endif
