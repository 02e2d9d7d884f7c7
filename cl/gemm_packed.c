/* Host side of the CPU-shaped packed GEMM (gemm_packed.cl). Placeholder routing to the tiled
 * kernel until the packed kernels land (same results, GPU-shaped speed). */
#include "cl/gemm_internal.h"

clp_status clp_gemm_packed_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			       const struct clp_gemm_call *g)
{
	clp_gemm_tuning tt = {0};

	tt.backend = CLP_GEMM_TILED;
	return clp_gemm_tiled_run(ctx, &tt, g);
}

int clp_gemm_packed_candidates(const clp_cl_devinfo *dev, unsigned seed, clp_gemm_tuning *out,
			       int max)
{
	return 0;
}
