/* Muon on one tensor (muon.h): the elementwise kernels of kernels/muon.cl and the
 * Newton-Schulz iteration on the engine's GEMM. */
#include "cl/muon.h"

#include <math.h>

#include "cl/gemm.h"
#include "cl/nn_internal.h"
#include "cl/ops.h"

#define MUON_FILE "muon.cl"

double clp_muon_scaled_lr(double lr, size_t rows, size_t cols)
{
	double r = cols ? (double)rows / (double)cols : 1.0;

	return lr * sqrt(r > 1.0 ? r : 1.0);
}

static clp_status momentum(clp_cl_ctx *ctx, clp_buf buf, clp_buf g, clp_buf u, size_t n,
			   float mu, int nesterov, float gscale, clp_buf stats, int keep_buf)
{
	cl_kernel k;
	cl_ulong bo = buf.off, go = g.off, uo = u.off, nn = n, so = stats.off;
	cl_int nes = nesterov != 0, has = stats.mem != NULL, keep = keep_buf != 0;
	cl_mem sm = has ? stats.mem : buf.mem;

	if (!(mu >= 0.0f && mu < 1.0f))
		return clp_error(CLP_ERR_INVALID, "muon: momentum %g must be in [0, 1)", mu);
	if (!n)
		return CLP_OK;
	CLP_TRY(clp_cl_kernel(ctx, MUON_FILE, clp_nn_ew_defines(ctx), "clp_muon_momentum", &k));
	CLP_TRY(clp_cl_args(ctx, k, 14, CLP_ARG(buf.mem), CLP_ARG(bo), CLP_ARG(g.mem), CLP_ARG(go),
			    CLP_ARG(u.mem), CLP_ARG(uo), CLP_ARG(nn), CLP_ARG(mu), CLP_ARG(nes),
			    CLP_ARG(gscale), CLP_ARG(sm), CLP_ARG(so),
			    CLP_ARG(has), CLP_ARG(keep)));
	return clp_nn_run_ew(ctx, k, "muon_momentum", n);
}

clp_status clp_muon_momentum(clp_cl_ctx *ctx, clp_buf buf, clp_buf g, clp_buf u, size_t n,
			     float mu, int nesterov, float gscale, clp_buf stats)
{
	return momentum(ctx, buf, g, u, n, mu, nesterov, gscale, stats, 0);
}

clp_status clp_muon_normalize(clp_cl_ctx *ctx, clp_buf x, size_t n, clp_buf nrm, float eps)
{
	cl_kernel k;
	cl_ulong xo = x.off, nn = n, no = nrm.off;

	if (!n)
		return CLP_OK;
	CLP_TRY(clp_cl_kernel(ctx, MUON_FILE, clp_nn_ew_defines(ctx), "clp_muon_normalize", &k));
	CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(nn), CLP_ARG(nrm.mem),
			    CLP_ARG(no), CLP_ARG(eps)));
	return clp_nn_run_ew(ctx, k, "muon_normalize", n);
}

clp_status clp_muon_apply(clp_cl_ctx *ctx, clp_buf p, clp_buf u, size_t n, float decay_mul,
			  float lr, clp_buf stats)
{
	cl_kernel k;
	cl_ulong po = p.off, uo = u.off, nn = n, so = stats.off;
	cl_int has = stats.mem != NULL;
	cl_mem sm = has ? stats.mem : p.mem;

	if (!n)
		return CLP_OK;
	CLP_TRY(clp_cl_kernel(ctx, MUON_FILE, clp_nn_ew_defines(ctx), "clp_muon_apply", &k));
	CLP_TRY(clp_cl_args(ctx, k, 10, CLP_ARG(p.mem), CLP_ARG(po), CLP_ARG(u.mem), CLP_ARG(uo),
			    CLP_ARG(nn), CLP_ARG(decay_mul), CLP_ARG(lr),
			    CLP_ARG(sm), CLP_ARG(so), CLP_ARG(has)));
	return clp_nn_run_ew(ctx, k, "muon_apply", n);
}

/* Wide (rows <= cols): A = X X^T, X' = a X + B X. Tall: A = X^T X, X' = a X + X B, which is
 * the wide iteration on X^T transposed back (B is symmetric). */
clp_status clp_muon_newton_schulz(clp_cl_ctx *ctx, clp_buf x, clp_buf x2, clp_buf ga, clp_buf gb,
				  size_t rows, size_t cols, int steps, clp_buf *out)
{
	const int tall = rows > cols;
	const size_t s = tall ? cols : rows, n = rows * cols;
	clp_buf cur = x, nxt = x2, t;

	if (steps < 0 || steps >= 100)
		return clp_error(CLP_ERR_INVALID, "muon: %d Newton-Schulz steps (0..99)", steps);
	for (int it = 0; it < steps && n; it++) {
		if (tall)
			CLP_TRY(clp_cl_gemm(ctx, CLP_T, CLP_N, s, s, rows, 1.0f, cur, cols, cur, cols,
					    0.0f, ga, s));
		else
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_T, s, s, cols, 1.0f, cur, cols, cur, cols,
					    0.0f, ga, s));
		/* B = b A + c A A */
		CLP_TRY(clp_cl_copy(ctx, gb, ga, s * s));
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, s, s, s, (float)CLP_MUON_C, ga, s, ga, s,
				    (float)CLP_MUON_B, gb, s));
		/* X' = a X + B X (tall: a X + X B) */
		CLP_TRY(clp_cl_copy(ctx, nxt, cur, n));
		if (tall)
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, rows, cols, cols, 1.0f, cur, cols, gb,
					    cols, (float)CLP_MUON_A, nxt, cols));
		else
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, rows, cols, rows, 1.0f, gb, rows, cur,
					    cols, (float)CLP_MUON_A, nxt, cols));
		t = cur, cur = nxt, nxt = t;
	}
	*out = cur;
	return CLP_OK;
}

clp_status clp_muon_orthogonalize(clp_cl_ctx *ctx, clp_buf buf, clp_buf grad, clp_buf out,
				  size_t rows, size_t cols, const clp_muon_hp *hp, float gscale,
				  const clp_muon_work *w)
{
	const size_t n = rows * cols;
	clp_buf none = {0}, res;

	CLP_TRY(momentum(ctx, buf, grad, w->x, n, hp->momentum, hp->nesterov, gscale, none, 1));
	CLP_TRY(clp_cl_nrm2(ctx, w->nrm, w->x, n));
	CLP_TRY(clp_muon_normalize(ctx, w->x, n, w->nrm, (float)CLP_MUON_EPS));
	CLP_TRY(clp_muon_newton_schulz(ctx, w->x, w->x2, w->ga, w->gb, rows, cols, hp->ns_steps,
				       &res));
	return clp_cl_copy(ctx, out, res, n);
}

clp_status clp_muon_commit(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf grad,
			   clp_buf upd, size_t rows, size_t cols, const clp_muon_hp *hp,
			   clp_buf stats, float gscale, const clp_muon_work *w)
{
	const size_t n = rows * cols;

	CLP_TRY(clp_muon_momentum(ctx, buf, grad, w->x, n, hp->momentum, hp->nesterov, gscale,
				  stats));
	return clp_muon_apply(ctx, param, upd, n, (float)(1.0 - (double)hp->lr * hp->weight_decay),
			      (float)clp_muon_scaled_lr(hp->lr, rows, cols), stats);
}

clp_status clp_muon_update(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf grad,
			   size_t rows, size_t cols, const clp_muon_hp *hp, clp_buf stats,
			   float gscale, const clp_muon_work *w)
{
	const size_t n = rows * cols;
	clp_buf res;

	CLP_TRY(clp_muon_momentum(ctx, buf, grad, w->x, n, hp->momentum, hp->nesterov, gscale,
				  stats));
	CLP_TRY(clp_cl_nrm2(ctx, w->nrm, w->x, n));
	CLP_TRY(clp_muon_normalize(ctx, w->x, n, w->nrm, (float)CLP_MUON_EPS));
	CLP_TRY(clp_muon_newton_schulz(ctx, w->x, w->x2, w->ga, w->gb, rows, cols, hp->ns_steps,
				       &res));
	return clp_muon_apply(ctx, param, res, n, (float)(1.0 - (double)hp->lr * hp->weight_decay),
			      (float)clp_muon_scaled_lr(hp->lr, rows, cols), stats);
}

int clp_muon_phases(int ns_steps)
{
	return ns_steps > 0 ? ns_steps : 1;
}

clp_status clp_muon_ns_phase(clp_cl_ctx *ctx, clp_buf d, size_t rows, size_t cols, int ns_steps,
			     int phase, const clp_muon_work *w)
{
	const size_t n = rows * cols;
	clp_buf res;

	if (ns_steps < 0 || ns_steps >= 100 || phase < 0 || phase >= clp_muon_phases(ns_steps))
		return clp_error(CLP_ERR_INVALID, "muon: phase %d of %d Newton-Schulz steps", phase,
				 ns_steps);
	if (!n)
		return CLP_OK;
	CLP_TRY(clp_cl_copy(ctx, w->x, d, n));
	if (phase == 0) {
		CLP_TRY(clp_cl_nrm2(ctx, w->nrm, w->x, n));
		CLP_TRY(clp_muon_normalize(ctx, w->x, n, w->nrm, (float)CLP_MUON_EPS));
	}
	CLP_TRY(clp_muon_newton_schulz(ctx, w->x, w->x2, w->ga, w->gb, rows, cols,
				       ns_steps > 0 ? 1 : 0, &res));
	return clp_cl_copy(ctx, d, res, n);
}

clp_status clp_muon_delayed_commit(clp_cl_ctx *ctx, clp_buf param, clp_buf buf, clp_buf grad,
				   clp_buf d, size_t rows, size_t cols, const clp_muon_hp *hp,
				   clp_buf stats, float gscale, int nonfinite)
{
	const size_t n = rows * cols;

	CLP_TRY(clp_muon_apply(ctx, param, d, n, (float)(1.0 - (double)hp->lr * hp->weight_decay),
			       (float)clp_muon_scaled_lr(hp->lr, rows, cols), stats));
	/* P into d, which D no longer needs (the kernel leaves buf and d with the flag set) */
	CLP_TRY(clp_muon_momentum(ctx, buf, grad, d, n, hp->momentum, hp->nesterov, gscale, stats));
	return nonfinite ? clp_cl_fill(ctx, d, 0.0f, n) : CLP_OK;
}
