/* Internals shared by the nn_*.c wrappers: geometry, scratch slots, argument helpers. */
#ifndef CLP_CL_NN_INTERNAL_H
#define CLP_CL_NN_INTERNAL_H

#include "cl/nn.h"

/* Scratch slots of the context these wrappers use (valid within one call). */
enum {
	NN_SCRATCH_ATTN = CLP_SCRATCH_USER0,     /* transposed operands, D, lse */
	NN_SCRATCH_XENT = CLP_SCRATCH_USER0 + 1, /* logits chunk, row state */
	NN_SCRATCH_PART = CLP_SCRATCH_USER0 + 2, /* row-block partial column sums */
	NN_SCRATCH_OPT = CLP_SCRATCH_USER0 + 3,  /* gradient-norm partials */
	NN_SCRATCH_XKEEP = CLP_SCRATCH_USER0 + 4 /* the loss forward's logits, kept (nn_xent.c) */
};

/* Rows per block for parameter-gradient partial sums: fixed (not per device) so that the
 * summation order, and so the bits, depend only on the shape. */
#define NN_ROWS_PER_BLOCK 32

/* 1 when the kernels should take their GPU shape on this context. */
int clp_nn_gpu_shape(const clp_cl_ctx *ctx);

/* Elementwise geometry: elements per work-item and local size. */
void clp_nn_ew_geometry(const clp_cl_ctx *ctx, size_t *chunk, size_t *local);
const char *clp_nn_ew_defines(const clp_cl_ctx *ctx);

/* Mixed precision (cl/nn.h "Storage"): the element-wise defines followed by the storage define
 * of value tensors of type t (clp_dtype_st_define, cl/base/half.h). */
const char *clp_nn_ew_st_defines(const clp_cl_ctx *ctx, clp_dtype t);
/* The storage type shared by a call's value tensors: count pairs (const char *name, clp_buf)
 * follow; absent ones (mem NULL) are skipped; none present gives fp32. CLP_ERR_INVALID names fn
 * and the first tensor whose type differs from the first present one. */
clp_status clp_nn_value_type(const char *fn, clp_dtype *out, int count, ...);
/* CLP_ERR_INVALID naming fn and the tensor unless every present one of the count pairs
 * (const char *name, clp_buf) is fp32 (gradients, statistics). */
clp_status clp_nn_require_f32(const char *fn, int count, ...);

/* Launch an elementwise kernel over n elements (at least one work-item), in the context's
 * elementwise geometry (clp_nn_ew_geometry: elements per work-item, local size). */
clp_status clp_nn_run_ew(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n);
/* Launch a 1-D kernel over n work-items with local size 1 (CPU shape). */
clp_status clp_nn_run_rows(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n);
/* The GPU shape's row kernels (one work-item per row): n work-items in groups of NN_ROWS_WG. */
#define NN_ROWS_WG 64
clp_status clp_nn_run_rows_gpu(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n);

/* dst[c] += sum over nblocks of part[blk * stride + c], c < C, blocks in order. */
clp_status clp_nn_colsum_acc(clp_cl_ctx *ctx, clp_buf dst, cl_mem part, size_t part_off,
			     size_t stride, size_t nblocks, size_t C);
/* Two at once: d1 += the block sums of columns [0, C) of part (2C per block), d2 += those of
 * [C, 2C); the same sums in the same order as two clp_nn_colsum_acc calls, one launch. */
clp_status clp_nn_colsum_acc2(clp_cl_ctx *ctx, clp_buf d1, clp_buf d2, cl_mem part,
			      size_t nblocks, size_t C);

/* The GPU-shaped attention (nn_attn_gpu.c), chosen by clp_nn_attention_*. _ready builds its
 * programs for values stored as dt without running anything (CLP_ERR_BUILD when they do not
 * build here); the others take the values' type from q (checked by the caller).
 * clp_nn_attn_defines: nn_attn.cl's and nn_attn_bwd.cl's defines for values stored as t. */
const char *clp_nn_attn_defines(clp_dtype t);
clp_status clp_nn_attn_gpu_ready(clp_cl_ctx *ctx, const clp_nn_attn *a, clp_dtype dt);
clp_status clp_nn_attn_gpu_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf lse, clp_buf q,
				   clp_buf k, clp_buf v, const clp_nn_attn *a);
clp_status clp_nn_attn_gpu_backward(clp_cl_ctx *ctx, clp_buf dq, clp_buf dk, clp_buf dv,
				    clp_buf dout, clp_buf q, clp_buf k, clp_buf v, clp_buf out,
				    clp_buf lse, const clp_nn_attn *a);

static inline size_t nn_cdiv(size_t a, size_t b)
{
	return (a + b - 1) / b;
}

#endif
