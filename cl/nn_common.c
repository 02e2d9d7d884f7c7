/* Shared pieces of the nn wrappers: kernel shape, geometry, ordered column sums. */
#include "cl/nn_internal.h"

#include <stdarg.h>
#include <string.h>

static clp_nn_shape forced_shape = CLP_NN_SHAPE_AUTO;

void clp_nn_set_shape(clp_nn_shape s)
{
	forced_shape = s;
}

int clp_nn_gpu_shape(const clp_cl_ctx *ctx)
{
	if (forced_shape != CLP_NN_SHAPE_AUTO)
		return forced_shape == CLP_NN_SHAPE_GPU;
	return clp_cl_ctx_gpu_shape(ctx);
}

static int is_cpu(const clp_cl_ctx *ctx)
{
	return !clp_cl_ctx_gpu_shape(ctx);
}

void clp_nn_ew_geometry(const clp_cl_ctx *ctx, size_t *chunk, size_t *local)
{
	*chunk = is_cpu(ctx) ? 8192 : 4;
	*local = is_cpu(ctx) ? 1 : 256;
}

const char *clp_nn_ew_defines(const clp_cl_ctx *ctx)
{
	return is_cpu(ctx) ? "#define NN_EW_CHUNK 8192\n" : "#define NN_EW_CHUNK 4\n";
}

const char *clp_nn_ew_st_defines(const clp_cl_ctx *ctx, clp_dtype t)
{
	static const char *const cpu[CLP_DTYPE_COUNT] = {
		"#define NN_EW_CHUNK 8192\n", "#define NN_EW_CHUNK 8192\n#define ST_TYPE 1\n",
		"#define NN_EW_CHUNK 8192\n#define ST_TYPE 2\n"};
	static const char *const gpu[CLP_DTYPE_COUNT] = {
		"#define NN_EW_CHUNK 4\n", "#define NN_EW_CHUNK 4\n#define ST_TYPE 1\n",
		"#define NN_EW_CHUNK 4\n#define ST_TYPE 2\n"};

	if ((unsigned)t >= CLP_DTYPE_COUNT)
		t = CLP_F32;
	return is_cpu(ctx) ? cpu[t] : gpu[t];
}

clp_status clp_nn_value_type(const char *fn, clp_dtype *out, int count, ...)
{
	va_list ap;
	const char *first = NULL;
	clp_status st = CLP_OK;

	*out = CLP_F32;
	va_start(ap, count);
	for (int i = 0; i < count; i++) {
		const char *name = va_arg(ap, const char *);
		clp_buf b = va_arg(ap, clp_buf);

		if (!b.mem)
			continue;
		if ((unsigned)b.dt >= CLP_DTYPE_COUNT) {
			st = clp_error(CLP_ERR_INVALID, "%s: %s has no storage type (%d)", fn, name,
				       (int)b.dt);
			break;
		}
		if (!first) {
			first = name;
			*out = b.dt;
		} else if (b.dt != *out) {
			st = clp_error(CLP_ERR_INVALID, "%s: %s is %s but %s is %s (a call's values "
				       "share one storage type)", fn, name, clp_dtype_name(b.dt),
				       first, clp_dtype_name(*out));
			break;
		}
	}
	va_end(ap);
	return st;
}

clp_status clp_nn_require_f32(const char *fn, int count, ...)
{
	va_list ap;
	clp_status st = CLP_OK;

	va_start(ap, count);
	for (int i = 0; i < count; i++) {
		const char *name = va_arg(ap, const char *);
		clp_buf b = va_arg(ap, clp_buf);

		if (b.mem && b.dt != CLP_F32) {
			st = clp_error(CLP_ERR_INVALID, "%s: %s is %s; gradients and statistics are "
				       "fp32", fn, name, clp_dtype_name(b.dt));
			break;
		}
	}
	va_end(ap);
	return st;
}

clp_status clp_nn_run_ew(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	size_t chunk, local, global;

	clp_nn_ew_geometry(ctx, &chunk, &local);
	global = nn_cdiv(n ? n : 1, chunk); /* clp_cl_run rounds it up to the local size */
	return clp_cl_run(ctx, k, label, 1, &global, &local);
}

clp_status clp_nn_run_rows(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	size_t one = 1;

	return clp_cl_run(ctx, k, label, 1, &n, &one);
}

clp_status clp_nn_run_rows_gpu(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	size_t local = NN_ROWS_WG;

	return clp_cl_run(ctx, k, label, 1, &n, &local);
}

clp_status clp_nn_colsum_acc(clp_cl_ctx *ctx, clp_buf dst, cl_mem part, size_t part_off,
			     size_t stride, size_t nblocks, size_t C)
{
	cl_kernel k;
	cl_ulong dso = dst.off, po = part_off;
	cl_uint st = (cl_uint)stride, nb = (cl_uint)nblocks, cc = (cl_uint)C;

	CLP_TRY(clp_cl_kernel(ctx, "nn_norm.cl", NULL, "clp_nn_colsum", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(dst.mem), CLP_ARG(dso), CLP_ARG(part), CLP_ARG(po),
			    CLP_ARG(st), CLP_ARG(nb), CLP_ARG(cc)));
	return clp_nn_gpu_shape(ctx) ? clp_nn_run_rows_gpu(ctx, k, "nn_colsum", C)
				     : clp_nn_run_rows(ctx, k, "nn_colsum", C);
}

clp_status clp_nn_colsum_acc2(clp_cl_ctx *ctx, clp_buf d1, clp_buf d2, cl_mem part,
			      size_t nblocks, size_t C)
{
	cl_kernel k;
	cl_ulong o1 = d1.off, o2 = d2.off, po = 0;
	cl_uint nb = (cl_uint)nblocks, cc = (cl_uint)C;

	CLP_TRY(clp_cl_kernel(ctx, "nn_norm.cl", NULL, "clp_nn_colsum2", &k));
	CLP_TRY(clp_cl_args(ctx, k, 8, CLP_ARG(d1.mem), CLP_ARG(o1), CLP_ARG(d2.mem), CLP_ARG(o2),
			    CLP_ARG(part), CLP_ARG(po), CLP_ARG(nb), CLP_ARG(cc)));
	return clp_nn_gpu_shape(ctx) ? clp_nn_run_rows_gpu(ctx, k, "nn_colsum", 2 * C)
				     : clp_nn_run_rows(ctx, k, "nn_colsum", 2 * C);
}
