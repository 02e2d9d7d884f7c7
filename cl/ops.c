/* Host wrappers for the small kernels in elementwise.cl and reduce.cl. */
#include "cl/ops.h"

#include <string.h>

static int is_cpu(const clp_cl_ctx *ctx)
{
	return !clp_cl_ctx_gpu_shape(ctx);
}

/* The geometry lives here and reaches the kernels as defines, so the two cannot disagree. */
void clp_cl_ew_geometry(const clp_cl_ctx *ctx, size_t *chunk, size_t *local)
{
	*chunk = is_cpu(ctx) ? 8192 : 1;
	*local = is_cpu(ctx) ? 1 : 256;
}

static const char *ew_defines(const clp_cl_ctx *ctx)
{
	return is_cpu(ctx) ? "#define EW_CHUNK 8192\n" : "#define EW_CHUNK 1\n";
}

static void red_geometry(const clp_cl_ctx *ctx, size_t *chunk, size_t *wg)
{
	*chunk = is_cpu(ctx) ? 65536 : 4096;
	*wg = is_cpu(ctx) ? 1 : 256;
}

static const char *red_defines(const clp_cl_ctx *ctx)
{
	return is_cpu(ctx) ? "#define RED_CHUNK 65536\n#define RED_WG 1\n"
			   : "#define RED_CHUNK 4096\n#define RED_WG 256\n";
}

static clp_status ew_run(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	size_t chunk, local, global;

	clp_cl_ew_geometry(ctx, &chunk, &local);
	global = (n + chunk - 1) / chunk;
	return clp_cl_run(ctx, k, label, 1, &global, &local);
}

clp_status clp_cl_fill(clp_cl_ctx *ctx, clp_buf y, float v, size_t n)
{
	cl_kernel k;
	cl_ulong yo = y.off, nn = n;

	CLP_TRY(clp_cl_kernel(ctx, "elementwise.cl", ew_defines(ctx), "clp_fill", &k));
	CLP_TRY(clp_cl_args(ctx, k, 4, CLP_ARG(y.mem), CLP_ARG(yo), CLP_ARG(v), CLP_ARG(nn)));
	return ew_run(ctx, k, "fill", n);
}

clp_status clp_cl_scale(clp_cl_ctx *ctx, clp_buf y, float a, size_t n)
{
	cl_kernel k;
	cl_ulong yo = y.off, nn = n;

	CLP_TRY(clp_cl_kernel(ctx, "elementwise.cl", ew_defines(ctx), "clp_scale", &k));
	CLP_TRY(clp_cl_args(ctx, k, 4, CLP_ARG(y.mem), CLP_ARG(yo), CLP_ARG(a), CLP_ARG(nn)));
	return ew_run(ctx, k, "scale", n);
}

clp_status clp_cl_axpy(clp_cl_ctx *ctx, clp_buf y, clp_buf x, float a, size_t n)
{
	cl_kernel k;
	cl_ulong yo = y.off, xo = x.off, nn = n;

	CLP_TRY(clp_cl_kernel(ctx, "elementwise.cl", ew_defines(ctx), "clp_axpy", &k));
	CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(y.mem), CLP_ARG(yo), CLP_ARG(x.mem), CLP_ARG(xo),
			    CLP_ARG(a), CLP_ARG(nn)));
	return ew_run(ctx, k, "axpy", n);
}

static clp_status binary(clp_cl_ctx *ctx, const char *name, const char *label, clp_buf z,
			 clp_buf x, clp_buf y, size_t n)
{
	cl_kernel k;
	cl_ulong zo = z.off, xo = x.off, yo = y.off, nn = n;

	CLP_TRY(clp_cl_kernel(ctx, "elementwise.cl", ew_defines(ctx), name, &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(z.mem), CLP_ARG(zo), CLP_ARG(x.mem), CLP_ARG(xo),
			    CLP_ARG(y.mem), CLP_ARG(yo), CLP_ARG(nn)));
	return ew_run(ctx, k, label, n);
}

clp_status clp_cl_add(clp_cl_ctx *ctx, clp_buf z, clp_buf x, clp_buf y, size_t n)
{
	return binary(ctx, "clp_add", "add", z, x, y, n);
}

clp_status clp_cl_mul(clp_cl_ctx *ctx, clp_buf z, clp_buf x, clp_buf y, size_t n)
{
	return binary(ctx, "clp_mul", "mul", z, x, y, n);
}

enum { RED_SUM = 0, RED_SUMSQ = 1, RED_NRM2 = 2 };

static clp_status reduce(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n, int mode)
{
	size_t chunk, wg, groups, global, one = 1;
	cl_kernel k1, k2;
	cl_mem part;
	cl_ulong xo = x.off, nn = n, oo = out.off;
	cl_int square = mode != RED_SUM, m = mode;
	cl_uint ng;

	red_geometry(ctx, &chunk, &wg);
	groups = n ? (n + chunk - 1) / chunk : 1;
	global = groups * wg;
	ng = (cl_uint)groups;
	CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_REDUCE, 2 * groups * sizeof(float), &part));
	CLP_TRY(clp_cl_kernel(ctx, "reduce.cl", red_defines(ctx), "clp_reduce_partial", &k1));
	CLP_TRY(clp_cl_kernel(ctx, "reduce.cl", red_defines(ctx), "clp_reduce_final", &k2));
	CLP_TRY(clp_cl_args(ctx, k1, 5, CLP_ARG(part), CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(nn),
			    CLP_ARG(square)));
	CLP_TRY(clp_cl_run(ctx, k1, "reduce_partial", 1, &global, &wg));
	CLP_TRY(clp_cl_args(ctx, k2, 5, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(part), CLP_ARG(ng),
			    CLP_ARG(m)));
	return clp_cl_run(ctx, k2, "reduce_final", 1, &one, &one);
}

clp_status clp_cl_sum(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n)
{
	return reduce(ctx, out, x, n, RED_SUM);
}

clp_status clp_cl_sumsq(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n)
{
	return reduce(ctx, out, x, n, RED_SUMSQ);
}

clp_status clp_cl_nrm2(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n)
{
	return reduce(ctx, out, x, n, RED_NRM2);
}

clp_status clp_cl_copy(clp_cl_ctx *ctx, clp_buf dst, clp_buf src, size_t n)
{
	cl_int err;

	size_t es = clp_dtype_size(dst.dt);

	if (dst.dt != src.dt) /* a conversion is clp_cl_convert's */
		return clp_error(CLP_ERR_INVALID, "copy: %s into %s", clp_dtype_name(src.dt),
				 clp_dtype_name(dst.dt));
	if (!n)
		return CLP_OK;
	err = clEnqueueCopyBuffer(clp_cl_ctx_queue(ctx), src.mem, dst.mem, src.off * es,
				  dst.off * es, n * es, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "copying %zu floats", n);
	return CLP_OK;
}
