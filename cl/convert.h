/* Storage conversions on the device: fp32 -> bf16 / fp16 (round to nearest even) and back.
 * The bits equal cl/base/half.h's (the reference). Enqueues and returns. */
#ifndef CLP_CL_CONVERT_H
#define CLP_CL_CONVERT_H

#include "cl/base/half.h"
#include "cl/runtime.h"

/* dst[0..n) = src[0..n) converted from src_type to dst_type. Offsets (clp_buf.off) count elements
 * of each buffer's own type. One side must be CLP_F32; fp32 -> fp32 is a copy; bf16 <-> fp16
 * directly is refused (go through fp32). */
clp_status clp_cl_convert(clp_cl_ctx *ctx, clp_buf dst, clp_dtype dst_type, clp_buf src,
			  clp_dtype src_type, size_t n);

#endif
