/* Inverses of the damped K-FAC factors: right-looking blocked Cholesky, blocked lower-triangular
 * inverse (LAPACK's dtrtri order, last block first) and W^-1 = L^-T L^-1. Diagonal blocks go to
 * the unblocked kernels of kfac.cl; panels and trailing updates are GEMMs, the bulk of the work,
 * so the inverses run as fast as the engine's GEMM does. Operands of a GEMM never share memory
 * with its output: panels are staged in the workspace.
 *
 * Workspace (floats): D (nb, nb) the inverse of a diagonal block | P (n, nb) | Q (n, nb). */
#include "cl/kfac_internal.h"

#include "cl/gemm.h"

size_t clp_kfac_workspace(const clp_cl_ctx *ctx, size_t n)
{
	size_t nb = clp_kfac_block(ctx);

	return nb * nb + 2 * (n ? n : 1) * nb;
}

static clp_status potrf_diag(clp_cl_ctx *ctx, clp_buf W, size_t ld, size_t nb, clp_buf info,
			     size_t base)
{
	cl_kernel k;
	cl_ulong wo = W.off, l = ld, b = nb, io = info.off;
	cl_int bs = (cl_int)base;

	CLP_TRY(kfac_kernel(ctx, "kfac_potrf_diag", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(W.mem), CLP_ARG(wo), CLP_ARG(l), CLP_ARG(b),
			    CLP_ARG(info.mem), CLP_ARG(io), CLP_ARG(bs)));
	return kfac_run_group(ctx, k, "kfac_potrf_diag");
}

static clp_status trtri_diag(clp_cl_ctx *ctx, clp_buf D, size_t ldd, clp_buf L, size_t ldl,
			     size_t nb)
{
	cl_kernel k;
	cl_ulong dof = D.off, dl = ldd, lo = L.off, ll = ldl, b = nb;

	CLP_TRY(kfac_kernel(ctx, "kfac_trtri_diag", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(D.mem), CLP_ARG(dof), CLP_ARG(dl), CLP_ARG(L.mem),
			    CLP_ARG(lo), CLP_ARG(ll), CLP_ARG(b)));
	return kfac_run_group(ctx, k, "kfac_trtri_diag");
}

static clp_status tril(clp_cl_ctx *ctx, clp_buf W, size_t n)
{
	cl_kernel k;
	cl_ulong wo = W.off, ld = n, nn = n;

	CLP_TRY(kfac_kernel(ctx, "kfac_tril", &k));
	CLP_TRY(clp_cl_args(ctx, k, 4, CLP_ARG(W.mem), CLP_ARG(wo), CLP_ARG(ld), CLP_ARG(nn)));
	return kfac_run_rows(ctx, k, "kfac_tril", n);
}

clp_status clp_kfac_cholesky(clp_cl_ctx *ctx, clp_buf W, size_t n, clp_buf ws, clp_buf info)
{
	size_t nb = clp_kfac_block(ctx);
	clp_buf D = ws, P = kfac_at(ws, nb * nb), Q = kfac_at(ws, nb * nb + n * nb);

	for (size_t k = 0; k < n; k += nb) {
		size_t kb = n - k < nb ? n - k : nb, m = n - k - kb;
		clp_buf Wkk = kfac_at(W, k * n + k), W21 = kfac_at(W, (k + kb) * n + k);

		CLP_TRY(potrf_diag(ctx, Wkk, n, kb, info, k));
		if (!m)
			break;
		/* L21 = A21 L11^-T, then A22 -= L21 L21^T */
		CLP_TRY(trtri_diag(ctx, D, kb, Wkk, n, kb));
		CLP_TRY(kfac_copy2d(ctx, P, kb, W21, n, m, kb, 1.0f));
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_T, m, kb, kb, 1.0f, P, kb, D, kb, 0.0f, Q, kb));
		CLP_TRY(kfac_copy2d(ctx, W21, n, Q, kb, m, kb, 1.0f));
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_T, m, m, kb, -1.0f, Q, kb, Q, kb, 1.0f,
				    kfac_at(W, (k + kb) * n + k + kb), n));
	}
	return tril(ctx, W, n);
}

clp_status clp_kfac_trtri(clp_cl_ctx *ctx, clp_buf W, size_t n, clp_buf ws)
{
	size_t nb = clp_kfac_block(ctx);
	clp_buf D = ws, S = kfac_at(ws, nb * nb);

	if (!n)
		return CLP_OK;
	for (size_t j = (n - 1) / nb * nb;; j -= nb) {
		size_t jb = n - j < nb ? n - j : nb, m = n - j - jb;
		clp_buf Wjj = kfac_at(W, j * n + j), W21 = kfac_at(W, (j + jb) * n + j);

		CLP_TRY(trtri_diag(ctx, D, jb, Wjj, n, jb));
		if (m) { /* X21 = -X22 L21 L11^-1, X22 already inverted */
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, m, jb, m, 1.0f,
					    kfac_at(W, (j + jb) * n + j + jb), n, W21, n, 0.0f, S,
					    jb));
			CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, m, jb, jb, -1.0f, S, jb, D, jb, 0.0f,
					    W21, n));
		}
		CLP_TRY(kfac_copy2d(ctx, Wjj, n, D, jb, jb, jb, 1.0f));
		if (j == 0)
			break;
	}
	return CLP_OK;
}

clp_status clp_kfac_spd_inverse(clp_cl_ctx *ctx, clp_buf inv, clp_buf W, size_t n, clp_buf ws,
				clp_buf info)
{
	if (!n)
		return CLP_OK;
	CLP_TRY(clp_kfac_cholesky(ctx, W, n, ws, info));
	CLP_TRY(clp_kfac_trtri(ctx, W, n, ws));
	return clp_cl_gemm(ctx, CLP_T, CLP_N, n, n, n, 1.0f, W, n, W, n, 0.0f, inv, n);
}
