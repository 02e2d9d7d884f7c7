/* SOAP (Vyas et al. 2024, "SOAP: Improving and Stabilizing Shampoo using Adam") on one 2-D
 * tensor, as pytorch-optimizer's `SOAP` (pytorch_optimizer 4.1.0, optimizer/soap.py; its
 * defaults merge_dims False, precondition_1d False, normalize_gradient False) computes it, in
 * fp32 on the device. For a matrix W (rows x cols) with gradient g (times gscale and, with
 * stats, the clip factor: x), Adam's moments m (rows x cols, original space) and v (rows x cols,
 * the rotated space), statistics L (rows x rows) and R (cols x cols) that start at 0, and
 * eigenbases QL, QR (columns = eigenvectors, estimated eigenvalues descending):
 *
 *   t = 1 (the tensor's first step; the package's `continue`):
 *     L = lerp(L, x x^T, 1 - sb);  R = lerp(R, x^T x, 1 - sb)
 *     QL, QR = the initial eigenbases of L, R   (the package: eigh; here hp->init_iters rounds
 *                                                 of the refresh below from Q = I)
 *     nothing else changes (no update, no weight decay)
 *   t >= 2, s = t - 1:
 *     gp = QL^T x QR
 *     m  = lerp(m, x, 1 - b1);  v = lerp(v, gp^2, 1 - b2)
 *     n  = QL ((QL^T m QR) / (sqrt(v) + eps)) QR^T
 *     W -= lr c n,  c = sqrt(1 - b2^s) / (1 - b1^s) (correct_bias; else 1)
 *     W *= 1 - lr wd
 *     L = lerp(L, x x^T, 1 - sb);  R = lerp(R, x^T x, 1 - sb)
 *     if refresh (the package: s % precondition_frequency == 0), for each side (Q, A) = (QL,
 *     L) then (QR, R), with axis 0 then 1:
 *       e = diag(Q^T A Q);  perm = argsort(e, descending; ties by index)
 *       v = v.index_select(axis, perm);  Q = Householder QR(A Q[:, perm]).Q
 *
 * The update is invariant to the signs of Q's columns (v is squared elementwise and n projects
 * back through the same Q), so a QR whose R has negative diagonal entries computes the same W.
 * A set non-finite flag (stats) skips the update on the device (W, m, v bitwise unchanged); the
 * statistics then see x = 0 (they decay by sb, as Shampoo's moving averages do).
 *
 * For the PipeFisher pass (stale eigenbases, as K-FAC's and Shampoo's stale preconditioners) the
 * refresh is split: clp_soap_basis_next computes the next Q and perm into buffers of their own
 * without touching v or the current Q; when the caller swaps the new Q in, it applies
 * clp_soap_permute to v with the same perm. */
#ifndef CLP_CL_SOAP_H
#define CLP_CL_SOAP_H

#include "cl/runtime.h"

typedef struct clp_soap_hp {
	float lr;           /* this step's learning rate (the package's group['lr']) */
	float beta1, beta2; /* Adam's (0.95, 0.95) */
	float shampoo_beta; /* the statistics' moving average (the package's None: beta2) */
	float eps;          /* 1e-8 */
	float weight_decay; /* decoupled, after the update */
	long t;             /* the tensor's 1-based step; 1 only initialises */
	int correct_bias;   /* 1: the step size's bias correction (the package's default) */
	int refresh;        /* t >= 2: refresh both eigenbases after the update */
	int init_iters;     /* t = 1: rounds of the refresh from Q = I */
} clp_soap_hp;

/* Device scratch for tensors up to rows x cols, d = max(rows, cols): x, a, b of rows x cols
 * floats, r[0..2] of d x d, est of d floats, perm of d cl_uints (as floats' size), and the QR's
 * own scratch qr (clp_soap_qr_floats(d) floats). */
#define CLP_SOAP_NWORK 8
typedef struct clp_soap_work {
	clp_buf x, a, b, r[3], est, perm, qr;
} clp_soap_work;

/* Element counts of each of clp_soap_work's buffers, in its field order (x, a, b, r[0..2],
 * est, perm, qr: 9 values), for tensors up to rows x cols. */
void clp_soap_work_sizes(size_t rows, size_t cols, size_t n[CLP_SOAP_NWORK + 1]);
size_t clp_soap_qr_floats(size_t d);

/* L = lerp(L, x x^T, 1 - sb), R = lerp(R, x^T x, 1 - sb). */
clp_status clp_soap_stats(clp_cl_ctx *ctx, clp_buf x, size_t rows, size_t cols, clp_buf l,
			  clp_buf r, float sb);
/* q (d x d) := the Q factor of a Householder QR of a (d x d); q must not be a. */
clp_status clp_soap_qr(clp_cl_ctx *ctx, clp_buf a, size_t d, clp_buf q, const clp_soap_work *w);
/* One refresh of one side without touching v or q: e = diag(q^T a q), perm = argsort(e)
 * descending (ties by index), q_next = QR(a q[:, perm]).Q; perm (d cl_uints) is kept for
 * clp_soap_permute. q_next and perm must be none of w's buffers. */
clp_status clp_soap_basis_next(clp_cl_ctx *ctx, clp_buf a, clp_buf q, size_t d, clp_buf q_next,
			       clp_buf perm, const clp_soap_work *w);
/* q := the initial eigenbasis of a: Q = I, then `iters` rounds of clp_soap_basis_next. */
clp_status clp_soap_basis_init(clp_cl_ctx *ctx, clp_buf a, size_t d, clp_buf q, int iters,
			       const clp_soap_work *w);
/* v (rows x cols) := v.index_select(axis, perm) (axis 0: rows, 1: cols). */
clp_status clp_soap_permute(clp_cl_ctx *ctx, clp_buf v, size_t rows, size_t cols, int axis,
			    clp_buf perm, const clp_soap_work *w);
/* The t >= 2 update of param, m, v from x (the scaled gradient) and the current bases; no
 * statistics and no refresh. */
clp_status clp_soap_adam(clp_cl_ctx *ctx, clp_buf param, clp_buf m, clp_buf v, clp_buf x,
			 clp_buf ql, clp_buf qr, size_t rows, size_t cols, const clp_soap_hp *hp,
			 clp_buf stats, const clp_soap_work *w);
/* One whole SOAP step as the package takes it (the comment at the top), fresh bases. */
clp_status clp_soap_update(clp_cl_ctx *ctx, clp_buf param, clp_buf m, clp_buf v, clp_buf grad,
			   clp_buf l, clp_buf r, clp_buf ql, clp_buf qr, size_t rows, size_t cols,
			   const clp_soap_hp *hp, clp_buf stats, float gscale,
			   const clp_soap_work *w);

/* Flops: one side's refresh (the product a q and the QR), and a t >= 2 step's projections and
 * statistics (for the planner, the simulator and the PipeFisher pass's cost table). */
double clp_soap_refresh_flops(size_t d);
double clp_soap_step_flops(size_t rows, size_t cols);

#endif
