/* CLBlast backend: row-major SGEMM and strided-batched SGEMM, with parameter overrides. */
#include "cl/gemm_internal.h"

#include <clblast_c.h>

#include "cl/convert.h"

static clp_status clblast_fail(clp_cl_ctx *ctx, CLBlastStatusCode st, const char *what)
{
	return clp_error(st == CLBlastOpenCLOutOfResources || st == CLBlastOpenCLOutOfHostMemory
				 ? CLP_ERR_NOMEM
			 : st == CLBlastOpenCLBuildProgramFailure ? CLP_ERR_BUILD : CLP_ERR_OPENCL,
			 "CLBlast %s failed with status %d on device '%s'", what, (int)st,
			 clp_cl_ctx_device(ctx)->name);
}

static clp_status override(clp_cl_ctx *ctx, const char *kernel, const clp_gemm_param *p, int n)
{
	const char *names[CLP_GEMM_MAX_PARAMS];
	size_t values[CLP_GEMM_MAX_PARAMS];
	CLBlastStatusCode st;

	if (n == 0)
		return CLP_OK;
	for (int i = 0; i < n; i++) {
		names[i] = p[i].name;
		values[i] = (size_t)p[i].value;
	}
	st = CLBlastOverrideParameters(clp_cl_ctx_device_id(ctx), kernel, CLBlastPrecisionSingle,
				       (size_t)n, names, values);
	if (st != CLBlastSuccess)
		return clp_error(CLP_ERR_INVALID, "CLBlastOverrideParameters(%s) rejected the %d "
				 "parameters (status %d) for device '%s'", kernel, n, (int)st,
				 clp_cl_ctx_device(ctx)->name);
	return CLP_OK;
}

clp_status clp_gemm_clblast_apply(clp_cl_ctx *ctx, const clp_gemm_tuning *t)
{
	CLP_TRY(override(ctx, "Xgemm", t->clblast, t->nclblast));
	return override(ctx, "XgemmDirect", t->clblast_direct, t->nclblast_direct);
}

/* A 16-bit A or B: convert the elements the call reads to fp32 scratch, then sgemm (C is fp32
 * here: cl/gemm.c rounds a 16-bit one). CLBlast's Hgemm would compute in half (cl_khr_fp16,
 * absent on PoCL's CPU device and NVIDIA's OpenCL). */
static clp_status run_16bit(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			    const struct clp_gemm_call *g)
{
	size_t arows = g->ta ? g->k : g->m, acols = g->ta ? g->m : g->k;
	size_t brows = g->tb ? g->n : g->k, bcols = g->tb ? g->k : g->n;
	size_t na = (g->batch - 1) * g->sa + (arows - 1) * g->lda + acols;
	size_t nb = (g->batch - 1) * g->sb + (brows - 1) * g->ldb + bcols;
	struct clp_gemm_call f = *g;
	cl_mem a32, b32;

	if (g->a.dt != CLP_F32) {
		CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_GEMM_A, na * sizeof(float), &a32));
		CLP_TRY(clp_cl_convert(ctx, clp_buf_at(a32, 0), CLP_F32, g->a, g->a.dt, na));
		f.a = clp_buf_at(a32, 0);
	}
	if (g->b.dt != CLP_F32) {
		CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_GEMM_B, nb * sizeof(float), &b32));
		CLP_TRY(clp_cl_convert(ctx, clp_buf_at(b32, 0), CLP_F32, g->b, g->b.dt, nb));
		f.b = clp_buf_at(b32, 0);
	}
	return clp_gemm_clblast_run(ctx, t, &f);
}

clp_status clp_gemm_clblast_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
				const struct clp_gemm_call *g)
{
	cl_command_queue q = clp_cl_ctx_queue(ctx);
	CLBlastTranspose ta = g->ta ? CLBlastTransposeYes : CLBlastTransposeNo;
	CLBlastTranspose tb = g->tb ? CLBlastTransposeYes : CLBlastTransposeNo;
	CLBlastStatusCode st;

	(void)t;
	if (g->c.dt != CLP_F32)
		return clp_error(CLP_ERR_INVALID, "gemm clblast: C must be fp32 here (cl/gemm.c "
				 "rounds a 16-bit C)");
	if (g->a.dt != CLP_F32 || g->b.dt != CLP_F32)
		return run_16bit(ctx, t, g);
	if (g->batch == 1)
		st = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k, g->alpha,
				  g->a.mem, g->a.off, g->lda, g->b.mem, g->b.off, g->ldb, g->beta,
				  g->c.mem, g->c.off, g->ldc, &q, NULL);
	else
		st = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k,
						g->alpha, g->a.mem, g->a.off, g->lda, g->sa,
						g->b.mem, g->b.off, g->ldb, g->sb, g->beta,
						g->c.mem, g->c.off, g->ldc, g->sc, g->batch, &q,
						NULL);
	if (st != CLBlastSuccess)
		return clblast_fail(ctx, st, "sgemm");
	return CLP_OK;
}
