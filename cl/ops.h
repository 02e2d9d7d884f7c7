/* Small device kernels every later part needs: fill, scale, axpy, add, mul, and accurate sums
 * and norms. All enqueue work and return without waiting; results stay on the device. Tensors are
 * (buffer, element offset) pairs (clp_buf); outputs come first, then inputs, then sizes. */
#ifndef CLP_CL_OPS_H
#define CLP_CL_OPS_H

#include "cl/runtime.h"

clp_status clp_cl_fill(clp_cl_ctx *ctx, clp_buf y, float v, size_t n);
clp_status clp_cl_scale(clp_cl_ctx *ctx, clp_buf y, float a, size_t n);          /* y *= a */
clp_status clp_cl_axpy(clp_cl_ctx *ctx, clp_buf y, clp_buf x, float a, size_t n); /* y += a x */
clp_status clp_cl_add(clp_cl_ctx *ctx, clp_buf z, clp_buf x, clp_buf y, size_t n); /* z = x + y */
clp_status clp_cl_copy(clp_cl_ctx *ctx, clp_buf dst, clp_buf src, size_t n); /* dst = src */
clp_status clp_cl_mul(clp_cl_ctx *ctx, clp_buf z, clp_buf x, clp_buf y, size_t n); /* z = x * y */

/* out[0] = sum x, sum x^2, or sqrt(sum x^2); compensated fp32 (relative error ~1e-7 for sums
 * without cancellation, whatever n). */
clp_status clp_cl_sum(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n);
clp_status clp_cl_sumsq(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n);
clp_status clp_cl_nrm2(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n);

/* Geometry the elementwise kernels use on this device: elements per work-item, local size. */
void clp_cl_ew_geometry(const clp_cl_ctx *ctx, size_t *chunk, size_t *local);

#endif
