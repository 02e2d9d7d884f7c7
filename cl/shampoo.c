/* Shampoo on one tensor (shampoo.h): the elementwise kernels of kernels/shampoo.cl, the coupled
 * Newton iteration for inverse roots and the step's products on the engine's GEMM. */
#include "cl/shampoo.h"

#include <math.h>

#include "cl/gemm.h"
#include "cl/nn_internal.h"
#include "cl/ops.h"

#define SHAMPOO_FILE "shampoo.cl"

static clp_status kernel(clp_cl_ctx *ctx, const char *name, cl_kernel *k)
{
	return clp_cl_kernel(ctx, SHAMPOO_FILE, clp_nn_ew_defines(ctx), name, k);
}

clp_status clp_shampoo_momentum(clp_cl_ctx *ctx, clp_buf buf, clp_buf g, clp_buf x, size_t n,
				float mu, int first, float gscale, clp_buf stats)
{
	cl_kernel k;
	cl_ulong bo = buf.off, go = g.off, xo = x.off, nn = n, so = stats.off;
	cl_int fi = first != 0, has = stats.mem != NULL;
	cl_mem sm = has ? stats.mem : x.mem;

	if (!(mu >= 0.0f && mu < 1.0f))
		return clp_error(CLP_ERR_INVALID, "shampoo: momentum %g must be in [0, 1)", mu);
	if (!n)
		return CLP_OK;
	CLP_TRY(kernel(ctx, "clp_shampoo_momentum", &k));
	CLP_TRY(clp_cl_args(ctx, k, 13, CLP_ARG(buf.mem), CLP_ARG(bo), CLP_ARG(g.mem), CLP_ARG(go),
			    CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(nn), CLP_ARG(mu), CLP_ARG(fi),
			    CLP_ARG(gscale), CLP_ARG(sm), CLP_ARG(so), CLP_ARG(has)));
	return clp_nn_run_ew(ctx, k, "shampoo_momentum", n);
}

clp_status clp_shampoo_root_init(clp_cl_ctx *ctx, clp_buf a, clp_buf m, clp_buf x, size_t n,
				 clp_buf nrm, int p, float ridge)
{
	cl_kernel k;
	cl_ulong ao = a.off, mo = m.off, xo = x.off, nn = n, no = nrm.off;
	float fp = (float)p;

	if (!n)
		return CLP_OK;
	CLP_TRY(kernel(ctx, "clp_shampoo_root_init", &k));
	CLP_TRY(clp_cl_args(ctx, k, 11, CLP_ARG(a.mem), CLP_ARG(ao), CLP_ARG(m.mem), CLP_ARG(mo),
			    CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(nn), CLP_ARG(nrm.mem), CLP_ARG(no),
			    CLP_ARG(fp), CLP_ARG(ridge)));
	return clp_nn_run_ew(ctx, k, "shampoo_root_init", n * n);
}

clp_status clp_shampoo_affine_eye(clp_cl_ctx *ctx, clp_buf out, clp_buf in, size_t n,
				  float alpha, float beta)
{
	cl_kernel k;
	cl_ulong oo = out.off, io = in.off, nn = n;

	if (!n)
		return CLP_OK;
	CLP_TRY(kernel(ctx, "clp_shampoo_affine_eye", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(in.mem), CLP_ARG(io),
			    CLP_ARG(nn), CLP_ARG(alpha), CLP_ARG(beta)));
	return clp_nn_run_ew(ctx, k, "shampoo_affine_eye", n * n);
}

clp_status clp_shampoo_apply(clp_cl_ctx *ctx, clp_buf p, clp_buf buf, clp_buf u, size_t n,
			     float decay_mul, float lr, clp_buf stats)
{
	cl_kernel k;
	cl_ulong po = p.off, bo = buf.off, uo = u.off, nn = n, so = stats.off;
	cl_int has = stats.mem != NULL;
	cl_mem sm = has ? stats.mem : p.mem;

	if (!n)
		return CLP_OK;
	CLP_TRY(kernel(ctx, "clp_shampoo_apply", &k));
	CLP_TRY(clp_cl_args(ctx, k, 12, CLP_ARG(p.mem), CLP_ARG(po), CLP_ARG(buf.mem), CLP_ARG(bo),
			    CLP_ARG(u.mem), CLP_ARG(uo), CLP_ARG(nn), CLP_ARG(decay_mul),
			    CLP_ARG(lr), CLP_ARG(sm), CLP_ARG(so), CLP_ARG(has)));
	return clp_nn_run_ew(ctx, k, "shampoo_apply", n);
}

clp_status clp_shampoo_graft_dir(clp_cl_ctx *ctx, clp_buf x, clp_buf v, clp_buf a, size_t n,
				 float beta2, float bc2, float eps, clp_buf stats)
{
	cl_kernel k;
	cl_ulong xo = x.off, vo = v.off, ao = a.off, nn = n, so = stats.off;
	cl_int has = stats.mem != NULL;
	cl_mem sm = has ? stats.mem : x.mem;

	if (!(beta2 >= 0.0f && beta2 < 1.0f) || !(bc2 > 0.0f) || !(eps > 0.0f))
		return clp_error(CLP_ERR_INVALID, "shampoo graft: beta2 %g in [0, 1), bias "
				 "correction %g and eps %g > 0", beta2, bc2, eps);
	if (!n)
		return CLP_OK;
	CLP_TRY(kernel(ctx, "clp_shampoo_graft_dir", &k));
	CLP_TRY(clp_cl_args(ctx, k, 13, CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(v.mem), CLP_ARG(vo),
			    CLP_ARG(a.mem), CLP_ARG(ao), CLP_ARG(nn), CLP_ARG(beta2), CLP_ARG(bc2),
			    CLP_ARG(eps), CLP_ARG(sm), CLP_ARG(so), CLP_ARG(has)));
	return clp_nn_run_ew(ctx, k, "shampoo_graft_dir", n);
}

clp_status clp_shampoo_graft_scale(clp_cl_ctx *ctx, clp_buf u, clp_buf a, size_t n,
				   clp_buf nrm)
{
	cl_kernel k;
	cl_ulong uo = u.off, ao = a.off, nn = n, no = nrm.off;

	if (!n)
		return CLP_OK;
	CLP_TRY(kernel(ctx, "clp_shampoo_graft_scale", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(u.mem), CLP_ARG(uo), CLP_ARG(a.mem), CLP_ARG(ao),
			    CLP_ARG(nn), CLP_ARG(nrm.mem), CLP_ARG(no)));
	return clp_nn_run_ew(ctx, k, "shampoo_graft_scale", n);
}

static int same_buf(clp_buf a, clp_buf b)
{
	return a.mem == b.mem && a.off == b.off;
}

/* `iters` coupled Newton iterations on M (*m) and X (*x), n x n, through *m2, *tt, *x2 and
 * w->r[2] (T): the buffers rotate, so on return *m and *x name where M and X are. */
static clp_status iterate(clp_cl_ctx *ctx, size_t n, int p, int iters, const clp_shampoo_work *w,
			  clp_buf *m, clp_buf *m2, clp_buf *tt, clp_buf *x, clp_buf *x2)
{
	const clp_buf t = w->r[2];
	clp_buf s;

	for (int it = 0; it < iters; it++) {
		/* T = (1 + 1/p) I - M / p */
		CLP_TRY(clp_shampoo_affine_eye(ctx, t, *m, n, -1.0f / (float)p,
					       1.0f + 1.0f / (float)p));
		/* X' = X T */
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, n, n, n, 1.0f, *x, n, t, n, 0.0f, *x2, n));
		/* T^p by repeated products into tt (t keeps T); T^4 as (T^2)^2 */
		if (p == 1) {
			CLP_TRY(clp_cl_copy(ctx, *tt, t, n * n));
		} else if (p == 4) {
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, n, n, n, 1.0f, t, n, t, n, 0.0f, *m2,
					    n));
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, n, n, n, 1.0f, *m2, n, *m2, n, 0.0f,
					    *tt, n));
		} else {
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, n, n, n, 1.0f, t, n, t, n, 0.0f, *tt,
					    n));
			for (int q = 2; q < p; q++) {
				/* tt = tt T through m2 */
				CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, n, n, n, 1.0f, *tt, n, t, n,
						    0.0f, *m2, n));
				s = *tt, *tt = *m2, *m2 = s;
			}
		}
		/* M' = T^p M */
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, n, n, n, 1.0f, *tt, n, *m, n, 0.0f, *m2, n));
		s = *m, *m = *m2, *m2 = s;
		s = *x, *x = *x2, *x2 = s;
	}
	return CLP_OK;
}

static clp_status check_root(int p, int iters)
{
	if (p < 1 || p > 8 || iters < 0 || iters > 1000)
		return clp_error(CLP_ERR_INVALID, "shampoo: root %d (1..8) or %d iterations "
				 "(0..1000)", p, iters);
	return CLP_OK;
}

/* r[0] M, r[1] M', r[2] T, r[3] T T (then T^p), r[4] X', out X; the products of M, X and T
 * commute (polynomials in a), so X T and T^p M need no particular side. */
clp_status clp_shampoo_inv_root(clp_cl_ctx *ctx, clp_buf a, size_t n, int p, int iters,
				const clp_shampoo_work *w, clp_buf out)
{
	clp_buf m = w->r[0], m2 = w->r[1], tt = w->r[3], x2 = w->r[4], x = out;

	CLP_TRY(check_root(p, iters));
	if (!n)
		return CLP_OK;
	CLP_TRY(clp_cl_nrm2(ctx, w->nrm, a, n * n));
	CLP_TRY(clp_shampoo_root_init(ctx, a, m, x, n, w->nrm, p, (float)CLP_SHAMPOO_RIDGE));
	CLP_TRY(iterate(ctx, n, p, iters, w, &m, &m2, &tt, &x, &x2));
	if (!same_buf(x, out))
		CLP_TRY(clp_cl_copy(ctx, out, x, n * n));
	return CLP_OK;
}

/* Phase 0 starts as the whole root does (M in r[0], X in xs); every phase leaves M in am and X
 * in xs; the last puts X into am. */
clp_status clp_shampoo_inv_root_phase(clp_cl_ctx *ctx, clp_buf am, clp_buf xs, size_t n, int p,
				      int iters, int phase, int nphases,
				      const clp_shampoo_work *w)
{
	clp_buf m = am, m2 = w->r[1], tt = w->r[3], x2 = w->r[4], x = xs;
	const int lo = nphases > 0 ? (int)((long)phase * iters / nphases) : 0;
	const int hi = nphases > 0 ? (int)((long)(phase + 1) * iters / nphases) : 0;

	CLP_TRY(check_root(p, iters));
	if (nphases < 1 || phase < 0 || phase >= nphases)
		return clp_error(CLP_ERR_INVALID, "shampoo: phase %d of a root in %d phases", phase,
				 nphases);
	if (!n)
		return CLP_OK;
	if (phase == 0) {
		m = w->r[0];
		CLP_TRY(clp_cl_nrm2(ctx, w->nrm, am, n * n));
		CLP_TRY(clp_shampoo_root_init(ctx, am, m, x, n, w->nrm, p,
					      (float)CLP_SHAMPOO_RIDGE));
	}
	CLP_TRY(iterate(ctx, n, p, hi - lo, w, &m, &m2, &tt, &x, &x2));
	if (phase == nphases - 1)
		return clp_cl_copy(ctx, am, x, n * n);
	if (!same_buf(m, am))
		CLP_TRY(clp_cl_copy(ctx, am, m, n * n));
	if (!same_buf(x, xs))
		CLP_TRY(clp_cl_copy(ctx, xs, x, n * n));
	return CLP_OK;
}

clp_status clp_shampoo_update(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf v, clp_buf grad,
			      clp_buf l, clp_buf r, clp_buf li, clp_buf ri, size_t rows,
			      size_t cols, const clp_shampoo_hp *hp, clp_buf stats, float gscale,
			      const clp_shampoo_work *w)
{
	const size_t n = rows * cols;
	const int ema = hp->stat_beta > 0.0f && hp->stat_beta < 1.0f;
	const float sa = ema ? 1.0f - hp->stat_beta : 1.0f, sb = ema ? hp->stat_beta : 1.0f;

	if (!n)
		return CLP_OK;
	CLP_TRY(clp_shampoo_momentum(ctx, buf, grad, w->x, n, hp->momentum, hp->first, gscale,
				     stats));
	/* L += x x^T; R += x^T x (moving averages: L = b L + (1 - b) x x^T) */
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_T, rows, rows, cols, sa, w->x, cols, w->x, cols, sb,
			    l, rows));
	CLP_TRY(clp_cl_gemm(ctx, CLP_T, CLP_N, cols, cols, rows, sa, w->x, cols, w->x, cols, sb,
			    r, cols));
	if (hp->refresh) {
		CLP_TRY(clp_shampoo_inv_root(ctx, l, rows, CLP_SHAMPOO_ROOT, hp->iters, w, li));
		CLP_TRY(clp_shampoo_inv_root(ctx, r, cols, CLP_SHAMPOO_ROOT, hp->iters, w, ri));
	}
	/* u = Li x Ri (through r[0]) */
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, rows, cols, rows, 1.0f, li, rows, w->x, cols, 0.0f,
			    w->r[0], cols));
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, rows, cols, cols, 1.0f, w->r[0], cols, ri, cols,
			    0.0f, w->u, cols));
	if (hp->graft) { /* a into r[1]; ||u||, ||a|| into nrm[0], nrm[1] */
		const clp_buf a = w->r[1], n1 = clp_buf_at(w->nrm.mem, w->nrm.off + 1);
		const double bc2 = 1.0 - pow((double)hp->beta2, (double)(hp->t > 0 ? hp->t : 1));

		CLP_TRY(clp_shampoo_graft_dir(ctx, w->x, v, a, n, hp->beta2, (float)bc2, hp->eps,
					      stats));
		CLP_TRY(clp_cl_nrm2(ctx, w->nrm, w->u, n));
		CLP_TRY(clp_cl_nrm2(ctx, n1, a, n));
		CLP_TRY(clp_shampoo_graft_scale(ctx, w->u, a, n, w->nrm));
	}
	return clp_shampoo_apply(ctx, param, buf, w->u, n, (float)(1.0 - (double)hp->lr *
						       hp->weight_decay), hp->lr, stats);
}

double clp_shampoo_root_flops(size_t d, int iters)
{
	const double dd = (double)d;

	return (double)iters * 4 * 2.0 * dd * dd * dd; /* X T, T T, (T T)^2, T^4 M */
}
