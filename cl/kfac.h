/* K-FAC on the device: Kronecker factors, pi damping, inverses by blocked Cholesky and triangular
 * inverse (unblocked kernels on the diagonal blocks, the engine's GEMM for everything else; CLBlast
 * has no Cholesky), preconditioning, and the KL-clipped SGD update.
 *
 * The maths (docs/KFAC.md): for a linear layer y = x W^T (+ b) with input rows a and per-token
 * loss gradients g of its output, A = a^T a / n and B = g^T g / n (tokens as examples);
 * pi = sqrt((tr A / dim A) / (tr B / dim B)); the damped factors A + max(sqrt(lambda) pi, 1e-7) I
 * and B + max(sqrt(lambda) / pi, 1e-7) I are inverted; the gradient G (O, I) becomes
 * B^-1 G A^-1 and a bias gradient B^-1 g_b.
 *
 * Conventions as cl/nn.h: clp_buf operands (buffer, element offset), outputs first, matrices
 * row-major and dense unless a leading dimension is taken, everything enqueued and nothing
 * waited for. Functions return CLP_OK or a status with a message (clp_last_error()). */
#ifndef CLP_CL_KFAC_H
#define CLP_CL_KFAC_H

#include <stdio.h>

#include "cl/runtime.h"

/* Per-layer statistics, CLP_KFAC_NSTATS floats written by clp_kfac_damping. */
enum clp_kfac_stat {
	CLP_KFAC_S_TRA = 0,   /* trace of A */
	CLP_KFAC_S_TRB = 1,   /* trace of B (sum over the layer's B blocks) */
	CLP_KFAC_S_DAMPA = 2, /* damping added to A */
	CLP_KFAC_S_DAMPB = 3, /* damping added to B */
	CLP_KFAC_S_FLAG = 4,  /* 0 ok; 1 a factor is all zeros; 2 a factor is not finite. Flagged
			       * layers get identity "inverses" (their gradient is zero or
			       * meaningless anyway) instead of inverting a singular matrix. */
	CLP_KFAC_S_PI = 5,
	CLP_KFAC_NSTATS = 8
};

/* F (d,d) = beta F + alpha x^T x for the rows of x (rows, d), row stride ldx (a column slice of
 * a wider matrix works: x at its first column, ldx the full width). beta = 0 never reads F.
 * x may be stored in fp32, bf16 or fp16 (x.dt: the saved activations of a mixed-precision run;
 * offset and ldx count its elements); the products and sums are fp32 (cl/gemm.h), F is fp32. */
clp_status clp_kfac_factor(clp_cl_ctx *ctx, clp_buf F, clp_buf x, size_t ldx, size_t rows,
			   size_t d, float alpha, float beta);

/* Damping of one layer into stats (CLP_KFAC_NSTATS floats): A (dA,dA) and the nb blocks B[i]
 * (dB[i], dB[i]) of a block-diagonal B (the output parts of a fused layer, e.g. Q, K, V, which
 * share A; nb = 1 for a plain layer). lambda >= 0. */
clp_status clp_kfac_damping(clp_cl_ctx *ctx, clp_buf stats, clp_buf A, size_t dA,
			    const clp_buf *B, const size_t *dB, int nb, float lambda);

/* W (d,d) = F + damping I, the damping of A (which = 0) or B (which = 1) from stats; the
 * identity for a flagged layer. */
clp_status clp_kfac_damped_copy(clp_cl_ctx *ctx, clp_buf W, clp_buf F, size_t d, clp_buf stats,
				int which);

/* Floats of workspace the inverses need for an n x n matrix. */
size_t clp_kfac_workspace(const clp_cl_ctx *ctx, size_t n);

/* Cholesky factor of the symmetric positive definite W (n,n), in place: W = L L^T, L lower,
 * upper triangle zeroed. Reads the lower triangle only. info (one int32) is set to j + 1 for the
 * first pivot j that was not positive (then replaced by 1: the result is finite but wrong); the
 * caller zeroes it and reads it when it synchronises. */
clp_status clp_kfac_cholesky(clp_cl_ctx *ctx, clp_buf W, size_t n, clp_buf ws, clp_buf info);
/* Inverse of the lower-triangular W (n,n) with zeros above the diagonal, in place. */
clp_status clp_kfac_trtri(clp_cl_ctx *ctx, clp_buf W, size_t n, clp_buf ws);
/* inv (n,n) = W^-1 for symmetric positive definite W, through L = chol(W), X = L^-1,
 * W^-1 = X^T X. W is overwritten (with X); inv must not overlap W. */
clp_status clp_kfac_spd_inverse(clp_cl_ctx *ctx, clp_buf inv, clp_buf W, size_t n, clp_buf ws,
				clp_buf info);

/* P = Binv G Ainv for a weight gradient with O outputs and I inputs: G (O,I) with row stride
 * ldg (the Linear layout), or, with in_out, G stored transposed (I,O) with row stride ldg
 * (GPT-2's Conv1D); P in the same layout as G with row stride ldp. tmp holds O*I floats. P must
 * not overlap G or tmp. */
clp_status clp_kfac_precondition(clp_cl_ctx *ctx, clp_buf P, size_t ldp, clp_buf G, size_t ldg,
				 clp_buf Binv, clp_buf Ainv, size_t O, size_t I, int in_out,
				 clp_buf tmp);

/* acc[0] += x . y over n elements (compensated). */
clp_status clp_kfac_dot(clp_cl_ctx *ctx, clp_buf acc, clp_buf x, clp_buf y, size_t n);

/* nu[0] = min(1, sqrt(kl_clip / (lr^2 s^2 |vg[0]|))): the KL-clip factor, s the gradient-clip
 * factor in gstats (clp_nn_grad_stats; mem NULL: 1). 1 when kl_clip <= 0 or vg is 0. */
clp_status clp_kfac_kl_clip(clp_cl_ctx *ctx, clp_buf nu, clp_buf vg, clp_buf gstats, float lr,
			    float kl_clip);

/* SGD with momentum on n elements: g' = g s nu[0] (s: gstats' clip factor), m = momentum m + g',
 * p = p (1 - lr wd) - lr m. Skipped entirely when gstats flags a non-finite gradient, like
 * clp_nn_adamw_update. */
clp_status clp_kfac_sgd(clp_cl_ctx *ctx, clp_buf p, clp_buf m, clp_buf g, size_t n, float lr,
			float momentum, float wd, clp_buf gstats, clp_buf nu);

/* Build and run every K-FAC kernel once on tiny inputs (cl/kfac_warmup.c; `clpipe kernels`). */
clp_status clp_kfac_warmup(clp_cl_ctx *ctx, FILE *log);

/* Kernel geometry, as clp_nn_set_shape: the GPU shape (a work-group per diagonal block) can be
 * forced on a CPU device for tests. Uses the process-wide setting of clp_nn_set_shape. Block
 * size of the blocked factorisations on this context: */
size_t clp_kfac_block(const clp_cl_ctx *ctx);

#endif
