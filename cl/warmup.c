/* Build and run every kernel of the OpenCL layer once on tiny inputs, so that later runs find
 * them in the engine's and PoCL's caches (PoCL compiles once per kernel and local size). */
#include "cl/warmup.h"

#include <time.h>

#include "cl/convert.h"
#include "cl/gemm.h"
#include "cl/ops.h"
#include "cl/base/clock.h"

clp_status clp_cl_warmup(clp_cl_ctx *ctx, FILE *log)
{
	cl_mem a = NULL, b = NULL, c = NULL;
	clp_status s;
	double t0 = clp_now(), t1;

	s = clp_cl_buffer(ctx, 64 * 64 * sizeof(float), "warmup A", &a);
	if (s == CLP_OK)
		s = clp_cl_buffer(ctx, 64 * 64 * sizeof(float), "warmup B", &b);
	if (s == CLP_OK)
		s = clp_cl_buffer(ctx, 64 * 64 * sizeof(float), "warmup C", &c);
	if (s != CLP_OK)
		goto out;
	if ((s = clp_cl_fill(ctx, clp_buf_at(a, 0), 1.0f, 4096)) != CLP_OK ||
	    (s = clp_cl_scale(ctx, clp_buf_at(a, 0), 0.5f, 4096)) != CLP_OK ||
	    (s = clp_cl_axpy(ctx, clp_buf_at(b, 0), clp_buf_at(a, 0), 2.0f, 4096)) != CLP_OK ||
	    (s = clp_cl_add(ctx, clp_buf_at(c, 0), clp_buf_at(a, 0), clp_buf_at(b, 0), 4096)) !=
		    CLP_OK ||
	    (s = clp_cl_mul(ctx, clp_buf_at(c, 0), clp_buf_at(a, 0), clp_buf_at(b, 0), 4096)) !=
		    CLP_OK ||
	    (s = clp_cl_sum(ctx, clp_buf_at(c, 0), clp_buf_at(a, 0), 4096)) != CLP_OK ||
	    /* 16-bit storage conversions (cl/convert.h), there and back */
	    (s = clp_cl_convert(ctx, clp_buf_at(b, 0), CLP_BF16, clp_buf_at(a, 0), CLP_F32, 4096)) !=
		    CLP_OK ||
	    (s = clp_cl_convert(ctx, clp_buf_at(c, 0), CLP_F32, clp_buf_at(b, 0), CLP_BF16, 4096)) !=
		    CLP_OK ||
	    (s = clp_cl_convert(ctx, clp_buf_at(b, 0), CLP_F16, clp_buf_at(a, 0), CLP_F32, 4096)) !=
		    CLP_OK ||
	    (s = clp_cl_convert(ctx, clp_buf_at(c, 0), CLP_F32, clp_buf_at(b, 0), CLP_F16, 4096)) !=
		    CLP_OK ||
	    (s = clp_cl_finish(ctx)) != CLP_OK)
		goto out;
	t1 = clp_now();
	if (log)
		fprintf(log, "  elementwise, reduce, convert %6.2f s\n", t1 - t0);
	for (int ta = 0; ta < 2 && s == CLP_OK; ta++)
		for (int tb = 0; tb < 2 && s == CLP_OK; tb++)
			s = clp_cl_gemm(ctx, (clp_trans)ta, (clp_trans)tb, 33, 17, 9, 1.0f,
					clp_buf_at(a, 0), 40, clp_buf_at(b, 0), 40, 0.0f,
					clp_buf_at(c, 0), 40);
	if (s == CLP_OK)
		s = clp_cl_gemm_batched(ctx, CLP_N, CLP_T, 7, 5, 3, 1.0f, clp_buf_at(a, 0), 8, 64,
					clp_buf_at(b, 0), 8, 64, 1.0f, clp_buf_at(c, 0), 8, 64, 2);
	if (s == CLP_OK)
		s = clp_cl_finish(ctx);
	if (s == CLP_OK && log) {
		const clp_gemm_tuning *t;

		clp_cl_gemm_tuning(ctx, &t);
		fprintf(log, "  gemm (%s)                %6.2f s\n", clp_gemm_backend_name(t->backend),
			clp_now() - t1);
	}
out:
	if (c)
		clReleaseMemObject(c);
	if (b)
		clReleaseMemObject(b);
	if (a)
		clReleaseMemObject(a);
	return s;
}
