/* Host side of the GPU-shaped tiled GEMM (gemm_tiled.cl). */
#include "cl/gemm_internal.h"

#include <stdio.h>
#include <string.h>

clp_status clp_gemm_tiled_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			      const struct clp_gemm_call *g)
{
	char defines[1024];
	long tsm = clp_gemm_param_get(t, "TS_M", 64), tsn = clp_gemm_param_get(t, "TS_N", 64);
	long wpm = clp_gemm_param_get(t, "WPT_M", 4), wpn = clp_gemm_param_get(t, "WPT_N", 4);
	size_t local[3], global[3];
	cl_kernel k;
	cl_int ta = g->ta, tb = g->tb;
	cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, kk = (cl_uint)g->k;
	cl_uint lda = (cl_uint)g->lda, ldb = (cl_uint)g->ldb, ldc = (cl_uint)g->ldc;
	cl_ulong ao = g->a.off, bo = g->b.off, co = g->c.off;
	cl_ulong sa = g->sa, sb = g->sb, sc = g->sc;

	if (tsm % wpm || tsn % wpn)
		return clp_error(CLP_ERR_INVALID, "gemm tiled (%s): TS_M/TS_N must be multiples of "
				 "WPT_M/WPT_N", t->source);
	clp_gemm_defines(t, defines, sizeof(defines));
	clp_gemm_type_defines(g, defines, sizeof(defines));
	CLP_TRY(clp_cl_kernel(ctx, "gemm_tiled.cl", defines, "clp_gemm_tiled", &k));
	CLP_TRY(clp_cl_args(ctx, k, 19, CLP_ARG(ta), CLP_ARG(tb), CLP_ARG(m), CLP_ARG(n),
			    CLP_ARG(kk), CLP_ARG(g->alpha), CLP_ARG(g->a.mem), CLP_ARG(ao),
			    CLP_ARG(lda), CLP_ARG(sa), CLP_ARG(g->b.mem), CLP_ARG(bo), CLP_ARG(ldb),
			    CLP_ARG(sb), CLP_ARG(g->beta), CLP_ARG(g->c.mem), CLP_ARG(co),
			    CLP_ARG(ldc), CLP_ARG(sc)));
	local[0] = (size_t)(tsn / wpn);
	local[1] = (size_t)(tsm / wpm);
	local[2] = 1;
	global[0] = (g->n + (size_t)tsn - 1) / (size_t)tsn * local[0];
	global[1] = (g->m + (size_t)tsm - 1) / (size_t)tsm * local[1];
	global[2] = g->batch;
	return clp_cl_run(ctx, k, "gemm_tiled", 3, global, local);
}
