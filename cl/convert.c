/* Host side of kernels/convert.cl. */
#include "cl/convert.h"
#include "cl/ops.h"

clp_status clp_cl_convert(clp_cl_ctx *ctx, clp_buf dst, clp_dtype dst_type, clp_buf src,
			  clp_dtype src_type, size_t n)
{
	const char *name = NULL;
	cl_ulong yo = dst.off, xo = src.off, nn = n;
	size_t local = 64, global;
	cl_kernel k;

	if ((unsigned)dst_type >= CLP_DTYPE_COUNT || (unsigned)src_type >= CLP_DTYPE_COUNT)
		return clp_error(CLP_ERR_INVALID, "convert: unknown storage type (%d -> %d)",
				 (int)src_type, (int)dst_type);
	if (src_type == CLP_F32 && dst_type == CLP_F32)
		return clp_cl_copy(ctx, dst, src, n);
	if (src_type == CLP_F32)
		name = dst_type == CLP_BF16 ? "clp_f32_to_bf16" : "clp_f32_to_f16";
	else if (dst_type == CLP_F32)
		name = src_type == CLP_BF16 ? "clp_bf16_to_f32" : "clp_f16_to_f32";
	else
		return clp_error(CLP_ERR_INVALID, "convert: %s -> %s directly is not supported (one "
				 "side must be fp32)", clp_dtype_name(src_type),
				 clp_dtype_name(dst_type));
	if (n == 0)
		return CLP_OK;
	CLP_TRY(clp_cl_kernel(ctx, "convert.cl", "", name, &k));
	CLP_TRY(clp_cl_args(ctx, k, 5, CLP_ARG(dst.mem), CLP_ARG(yo), CLP_ARG(src.mem), CLP_ARG(xo),
			    CLP_ARG(nn)));
	global = (n + local - 1) / local * local;
	return clp_cl_run(ctx, k, name, 1, &global, &local);
}
