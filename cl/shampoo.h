/* Shampoo (Gupta, Koren and Singer 2018) on one 2-D tensor, as pytorch-optimizer's `Shampoo`
 * (pytorch_optimizer 4.1.0, optimizer/shampoo.py, decoupled weight decay) computes it, in fp32
 * on the device. For a matrix W (rows x cols) with gradient g, statistics L (rows x rows) and
 * R (cols x cols) that start at eps I, and a momentum buffer buf:
 *   x   = g (first step) or lerp(g, buf, mu)     (buf: the previous step's update)
 *   L  += x x^T;  R += x^T x
 *   every `interval`-th step (t % interval == 0):  Li = L^(-1/4), Ri = R^(-1/4)
 *                                                   (before the first: Li = Ri = 0)
 *   u   = Li x Ri;  buf = u
 *   W  *= 1 - lr wd;  W -= lr u
 * The inverse 4th roots come from the coupled Newton iteration (Guo and Higham 2006, the form
 * of Anil et al.'s Scalable Shampoo) on the engine's GEMM, of A + delta I with the ridge
 * delta = CLP_SHAMPOO_RIDGE ||A||_F (Scalable Shampoo's 1e-6 of the largest eigenvalue: in fp32
 * the products leave A's smallest eigenvalues uncertain by about u ||A||, and an eigenvalue
 * rounded below zero makes the iteration diverge): with z = (1 + p) / (2 (||A||_F + delta)),
 * M = z (A + delta I), X = z^(1/p) I, `iters` times: T = (1 + 1/p) I - M / p;  X = X T;
 * M = T^p M. The reference takes an SVD of A instead (tools/check_shampoo.sh compares,
 * docs/OPTIMIZERS.md).
 * The gradient is multiplied by gscale and, with stats (clp_nn_grad_stats), by the clip
 * factor; a set non-finite flag skips the update on the device (the statistics gain 0). */
#ifndef CLP_CL_SHAMPOO_H
#define CLP_CL_SHAMPOO_H

#include "cl/runtime.h"

#define CLP_SHAMPOO_ROOT 4     /* the root of each side's statistics (2 x the order, 2) */
#define CLP_SHAMPOO_RIDGE 1e-6 /* delta / ||A||_F */

typedef struct clp_shampoo_hp {
	float lr;           /* this step's learning rate */
	float weight_decay; /* decoupled: p *= 1 - lr wd */
	float momentum;     /* mu (0: none) */
	int first;          /* 1 on the tensor's first step: x = g */
	int refresh;        /* 1: recompute the inverse roots this step */
	int iters;          /* coupled Newton iterations per root */
	/* Grafting (an extension, not in the package: Scalable Shampoo's layer-wise graft): 1
	 * scales u to the Frobenius norm of Adam's direction of x, a = x / (sqrt(v / (1 -
	 * beta2^t)) + eps) with v = beta2 v + (1 - beta2) x^2 (v: the caller's buffer), and takes
	 * a itself while u = 0 (before the first roots). */
	int graft;
	float beta2, eps;
	long t;             /* the 1-based step, for v's bias correction */
	/* The statistics as moving averages (an extension: Distributed Shampoo's and SOAP's
	 * beta2): with 0 < stat_beta < 1, L = b L + (1 - b) x x^T and R likewise (a skipped step,
	 * x = 0, then decays them by b); otherwise (0, 1) sums, the package's. */
	float stat_beta;
} clp_shampoo_hp;

/* Device scratch for tensors up to rows x cols and roots up to d x d, d = max(rows, cols): x
 * and u of rows x cols floats, r[0..5] of d x d, nrm of 2 floats. */
typedef struct clp_shampoo_work {
	clp_buf x, u, r[6], nrm;
} clp_shampoo_work;

/* The elementwise kernels (cl/kernels/shampoo.cl); n elements, or n x n for the roots. */
clp_status clp_shampoo_momentum(clp_cl_ctx *ctx, clp_buf buf, clp_buf g, clp_buf x, size_t n,
				float mu, int first, float gscale, clp_buf stats);
clp_status clp_shampoo_root_init(clp_cl_ctx *ctx, clp_buf a, clp_buf m, clp_buf x, size_t n,
				 clp_buf nrm, int p, float ridge);
clp_status clp_shampoo_affine_eye(clp_cl_ctx *ctx, clp_buf out, clp_buf in, size_t n,
				  float alpha, float beta);
clp_status clp_shampoo_apply(clp_cl_ctx *ctx, clp_buf p, clp_buf buf, clp_buf u, size_t n,
			     float decay_mul, float lr, clp_buf stats);

/* out = (a + delta I)^(-1/p), delta = CLP_SHAMPOO_RIDGE ||a||_F, for a symmetric positive
 * semidefinite n x n matrix (p = 1..8) by `iters` coupled Newton iterations, with w's r[0..5]
 * (n x n each) and nrm; out must not be one of them. */
clp_status clp_shampoo_inv_root(clp_cl_ctx *ctx, clp_buf a, size_t n, int p, int iters,
				const clp_shampoo_work *w, clp_buf out);

/* The same root in `nphases` phases that other work may come between (PipeFisher's phases,
 * KFAC_INV with op.mb = phase): phase `phase` (0..nphases-1, each after the one before) runs
 * iterations phase iters / nphases .. (phase + 1) iters / nphases - 1 (integer division; phase
 * 0 also the start). am holds a before phase 0, the iteration's M between phases, and the root
 * after the last; xs (n x n) holds X between phases. The kernels and their order are
 * clp_shampoo_inv_root's, interrupted, so after the last phase am holds the bits that
 * clp_shampoo_inv_root(a) writes to out. Between phases only am and xs must be kept (w is free
 * for other work); neither may be one of w's r[0..4]. */
clp_status clp_shampoo_inv_root_phase(clp_cl_ctx *ctx, clp_buf am, clp_buf xs, size_t n, int p,
				      int iters, int phase, int nphases,
				      const clp_shampoo_work *w);

clp_status clp_shampoo_graft_dir(clp_cl_ctx *ctx, clp_buf x, clp_buf v, clp_buf a, size_t n,
				 float beta2, float bc2, float eps, clp_buf stats);
clp_status clp_shampoo_graft_scale(clp_cl_ctx *ctx, clp_buf u, clp_buf a, size_t n,
				   clp_buf nrm);

/* One Shampoo step of param (rows x cols) with momentum buffer buf, the graft's second moment
 * v (only with hp->graft), statistics l, r and their inverse roots li, ri, and gradient grad. */
clp_status clp_shampoo_update(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf v, clp_buf grad,
			      clp_buf l, clp_buf r, clp_buf li, clp_buf ri, size_t rows,
			      size_t cols, const clp_shampoo_hp *hp, clp_buf stats, float gscale,
			      const clp_shampoo_work *w);

/* Coupled Newton iterations of one 4th root as GEMM flops: 4 products of 2 d^3 flops each. */
double clp_shampoo_root_flops(size_t d, int iters);

#endif
