/* Internals shared by the K-FAC wrappers (kfac.c, kfac_inv.c): geometry and launches. */
#ifndef CLP_CL_KFAC_INTERNAL_H
#define CLP_CL_KFAC_INTERNAL_H

#include "cl/kfac.h"

/* The kernel of kfac.cl named name, built with this context's geometry defines. */
clp_status kfac_kernel(clp_cl_ctx *ctx, const char *name, cl_kernel *k);
/* One work-item per row over n rows (the row kernels check their bound). */
clp_status kfac_run_rows(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n);
/* One work-group of the diagonal-block size (KFAC_LS work-items). */
clp_status kfac_run_group(clp_cl_ctx *ctx, cl_kernel k, const char *label);
/* dst (rows, cols) = alpha src with leading dimensions. */
clp_status kfac_copy2d(clp_cl_ctx *ctx, clp_buf dst, size_t ldd, clp_buf src, size_t lds,
		       size_t rows, size_t cols, float alpha);

static inline clp_buf kfac_at(clp_buf b, size_t off)
{
	return clp_buf_at(b.mem, b.off + off);
}

#endif
