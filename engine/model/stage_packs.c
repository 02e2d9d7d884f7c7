/* The kept GEMM packs' strip shape on a context (engine/model/stage.h), for the memory model of
 * the packs (engine/model/stage_mem.c's clp_model_stage_pack_mem). */
#include <string.h>

#include "cl/gemm.h"
#include "engine/model/stage.h"

clp_status clp_stage_pack_shape(clp_cl_ctx *ctx, clp_model_pack_shape *out)
{
	const clp_gemm_tuning *t;

	memset(out, 0, sizeof(*out));
	if (clp_cl_gemm_keep_limit(ctx) == 0) /* CLPIPE_GEMM_KEEP_PACKS=0: nothing kept */
		return CLP_OK;
	CLP_TRY(clp_cl_gemm_tuning(ctx, &t));
	clp_gemm_pack_shape(t, &out->nr, &out->kch, &out->direct_a);
	return CLP_OK;
}
