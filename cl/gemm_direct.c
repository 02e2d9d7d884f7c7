/* Host side of the direct GEMM (gemm_direct.cl): for devices whose work-groups run as SIMD
 * lanes (Mesa llvmpipe), no local memory, one K loop per work-item. K is split into chunks of
 * at most KMAX (llvmpipe ends a work-item's loops after 65535 iterations, docs/OPENCL.md), the
 * chunks after the first adding into C (beta 1); a bias (clp_cl_gemm_bias) in the last one's
 * store. */
#include "cl/gemm_internal.h"

#include <stdio.h>
#include <string.h>

#define DIRECT_KMAX 32768L

static long kmax(const clp_gemm_tuning *t)
{
	long k = clp_gemm_param_get(t, "KMAX", DIRECT_KMAX);

	return k > 0 && k <= DIRECT_KMAX ? k : DIRECT_KMAX;
}

int clp_gemm_direct_stores_c(const clp_gemm_tuning *t, const struct clp_gemm_call *g)
{
	return g->c.dt == CLP_F32 || (long)g->k <= kmax(t);
}

clp_status clp_gemm_direct_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			       const struct clp_gemm_call *g)
{
	char defines[1024];
	long wm = clp_gemm_param_get(t, "WM", 8), wn = clp_gemm_param_get(t, "WN", 2);
	long lx = clp_gemm_param_get(t, "LX", 32), kc = kmax(t);
	size_t local[3], global[3];
	cl_kernel k;
	cl_int ta = g->ta, tb = g->tb;
	cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n;
	cl_uint lda = (cl_uint)g->lda, ldb = (cl_uint)g->ldb, ldc = (cl_uint)g->ldc;
	cl_ulong co = g->c.off, sa = g->sa, sb = g->sb, sc = g->sc, bo_bias = g->bias.off;
	cl_mem bias = g->bias.mem ? g->bias.mem : g->c.mem; /* not read without has_bias */

	if ((wm != 1 && wm != 2 && wm != 4 && wm != 8) || (wn != 1 && wn != 2 && wn != 4) ||
	    lx < 1 || lx > 256)
		return clp_error(CLP_ERR_INVALID, "gemm direct (%s): WM must be 1, 2, 4 or 8, WN 1, "
				 "2 or 4 and LX 1..256 (got %ld, %ld, %ld)", t->source, wm, wn, lx);
	if (g->bias.mem && (g->bias.dt != g->c.dt || !clp_gemm_direct_stores_c(t, g)))
		return clp_error(CLP_ERR_INVALID, "gemm direct: a bias in the store needs C's "
				 "storage type and C written here (cl/gemm.c adds the others apart)");
	clp_gemm_defines(t, defines, sizeof(defines));
	clp_gemm_type_defines(g, defines, sizeof(defines));
	CLP_TRY(clp_cl_kernel(ctx, "gemm_direct.cl", defines, "clp_gemm_direct", &k));
	local[0] = (size_t)lx;
	local[1] = local[2] = 1;
	global[0] = (g->n + (size_t)(lx * wn) - 1) / (size_t)(lx * wn) * (size_t)lx;
	global[1] = (g->m + (size_t)wm - 1) / (size_t)wm;
	global[2] = g->batch;
	for (size_t k0 = 0; k0 < g->k; k0 += (size_t)kc) {
		cl_uint kk = (cl_uint)(g->k - k0 < (size_t)kc ? g->k - k0 : (size_t)kc);
		cl_ulong ao = g->a.off + (g->ta ? k0 * g->lda : k0);
		cl_ulong bo = g->b.off + (g->tb ? k0 : k0 * g->ldb);
		float beta = k0 == 0 ? g->beta : 1.0f;
		cl_int has_bias = g->bias.mem && k0 + kk >= g->k; /* the last K chunk */

		CLP_TRY(clp_cl_args(ctx, k, 22, CLP_ARG(ta), CLP_ARG(tb), CLP_ARG(m), CLP_ARG(n),
				    CLP_ARG(kk), CLP_ARG(g->alpha), CLP_ARG(g->a.mem), CLP_ARG(ao),
				    CLP_ARG(lda), CLP_ARG(sa), CLP_ARG(g->b.mem), CLP_ARG(bo),
				    CLP_ARG(ldb), CLP_ARG(sb), CLP_ARG(beta), CLP_ARG(g->c.mem),
				    CLP_ARG(co), CLP_ARG(ldc), CLP_ARG(sc), CLP_ARG(bias),
				    CLP_ARG(bo_bias), CLP_ARG(has_bias)));
		CLP_TRY(clp_cl_run(ctx, k, "gemm_direct", 3, global, local));
	}
	return CLP_OK;
}
