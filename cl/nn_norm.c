/* Host wrappers of nn_norm.cl: LayerNorm, RMSNorm, bias add and bias gradient. Value tensors
 * (inp, out, w, b, bias) share one storage type, which picks the program build (ST_TYPE);
 * gradients and the saved mean and rstd are fp32 (cl/nn.h "Storage"). */
#include "cl/nn_internal.h"

#define NORM_FILE "nn_norm.cl"
/* Rows a launch of the CPU-shape bias gradient sums (whole blocks of NN_ROWS_PER_BLOCK): a
 * work-item's loops then run at most about 17 iterations a row (a partial strip: 7 float8 and
 * 7 scalar columns) plus about 32 a block, ~37k in all, and llvmpipe ends a work-item's loops
 * after 65535 in all, silently (docs/OPENCL.md), wherever the probe or CLPIPE_SHAPE puts it
 * in the CPU shape. A bound on every device: the kernel must not be right on some only. */
#define BIAS_ROWS_LAUNCH 2048u
_Static_assert(BIAS_ROWS_LAUNCH % NN_ROWS_PER_BLOCK == 0, "launches of whole row blocks");
/* Columns a work-item of the CPU-shape norm backward updates for its block of rows. C up to
 * NORM_BWD_COLS: one strip, each work-item takes its rows' sums itself (C + R (C / 4 + 14)
 * loop iterations, ~37k at most, as BIAS_ROWS_LAUNCH); wider: the row sums first, one
 * work-item a row (C / 8 + 7), then NORM_BWD_COLS + R (NORM_BWD_COLS / 8 + 7), ~21k, whatever
 * C is. Whole rows were about 9 C, past llvmpipe's 65535 from C ~7300 (wrong at C = 8001). A
 * multiple of 8: the same columns take the float8 loop as in one strip of all C, so every
 * element sees the same operations in the same order either way. */
#define NORM_BWD_COLS 4096u
_Static_assert(NORM_BWD_COLS % 8 == 0, "strips of whole float8 steps");

static clp_status norm_kernel(clp_cl_ctx *ctx, clp_dtype dt, const char *name, cl_kernel *k)
{
	return clp_cl_kernel(ctx, NORM_FILE, clp_dtype_st_define(dt), name, k);
}

static clp_status check_rows(const char *what, size_t N, size_t C)
{
	if (N > 0xffffffffu || C == 0 || C > 0xffffffffu || N * C / C != N)
		return clp_error(CLP_ERR_INVALID, "%s: bad shape N=%zu C=%zu", what, N, C);
	return CLP_OK;
}

static clp_status run_rows(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t N, int gpu)
{
	return gpu ? clp_nn_run_rows_gpu(ctx, k, label, N) : clp_nn_run_rows(ctx, k, label, N);
}

/* The GPU shape's parameter-gradient partials of a norm (clp_norm_grad_part) into part, nb
 * blocks of `stride` floats: columns [j0, j0 + ncols) of dout xhat (j < C) and dout (j >= C);
 * mean absent: RMSNorm. The caller adds them up with clp_nn_colsum_acc*. */
static clp_status grad_part(clp_cl_ctx *ctx, clp_dtype dt, cl_mem part, size_t stride,
			    clp_buf dout, clp_buf inp, clp_buf mean, clp_buf rstd, size_t N,
			    size_t C, size_t j0, size_t ncols)
{
	cl_kernel k;
	cl_ulong doo = dout.off, io = inp.off, mo = mean.off, ro = rstd.off;
	cl_uint st = (cl_uint)stride, n = (cl_uint)N, c = (cl_uint)C, r = NN_ROWS_PER_BLOCK;
	cl_uint jj = (cl_uint)j0, nc = (cl_uint)ncols;
	cl_int has_mean = mean.mem != NULL;
	cl_mem mm = mean.mem ? mean.mem : rstd.mem; /* a valid buffer, not read without mean */
	size_t global[2] = {ncols, nn_cdiv(N, NN_ROWS_PER_BLOCK)}, local[2] = {64, 1};

	if (ncols == 0)
		return CLP_OK;
	CLP_TRY(norm_kernel(ctx, dt, "clp_norm_grad_part", &k));
	CLP_TRY(clp_cl_args(ctx, k, 16, CLP_ARG(part), CLP_ARG(st), CLP_ARG(dout.mem),
			    CLP_ARG(doo), CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(mm), CLP_ARG(mo),
			    CLP_ARG(has_mean), CLP_ARG(rstd.mem), CLP_ARG(ro), CLP_ARG(n),
			    CLP_ARG(c), CLP_ARG(r), CLP_ARG(jj), CLP_ARG(nc)));
	return clp_cl_run(ctx, k, "norm_grad_part", 2, global, local);
}

clp_status clp_nn_layernorm_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf mean, clp_buf rstd,
				    clp_buf inp, clp_buf w, clp_buf b, size_t N, size_t C,
				    float eps)
{
	cl_kernel k;
	cl_ulong oo = out.off, mo = mean.off, ro = rstd.off, io = inp.off, wo = w.off, bo = b.off;
	cl_uint n = (cl_uint)N, c = (cl_uint)C;
	const int gpu = clp_nn_gpu_shape(ctx);
	clp_dtype dt;

	CLP_TRY(check_rows("layernorm_forward", N, C));
	CLP_TRY(clp_nn_value_type("layernorm_forward", &dt, 4, "out", out, "inp", inp, "w", w,
				  "b", b));
	CLP_TRY(clp_nn_require_f32("layernorm_forward", 2, "mean", mean, "rstd", rstd));
	CLP_TRY(norm_kernel(ctx, dt, gpu ? "clp_ln_forward_g" : "clp_ln_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 15, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(mean.mem),
			    CLP_ARG(mo), CLP_ARG(rstd.mem), CLP_ARG(ro), CLP_ARG(inp.mem),
			    CLP_ARG(io), CLP_ARG(w.mem), CLP_ARG(wo), CLP_ARG(b.mem), CLP_ARG(bo),
			    CLP_ARG(n), CLP_ARG(c), CLP_ARG(eps)));
	return run_rows(ctx, k, "layernorm_fwd", N, gpu);
}

clp_status clp_nn_residual_layernorm_forward(clp_cl_ctx *ctx, clp_buf xs, clp_buf out,
					     clp_buf mean, clp_buf rstd, clp_buf a, clp_buf b,
					     clp_buf w, clp_buf bias, size_t N, size_t C, float eps)
{
	cl_kernel k;
	cl_ulong oo = out.off, mo = mean.off, ro = rstd.off, xo = xs.off, ao = a.off, bo = b.off;
	cl_ulong wo = w.off, bio = bias.off;
	cl_uint n = (cl_uint)N, c = (cl_uint)C;
	const int gpu = clp_nn_gpu_shape(ctx);
	clp_dtype dt;

	CLP_TRY(check_rows("residual_layernorm_forward", N, C));
	CLP_TRY(clp_nn_value_type("residual_layernorm_forward", &dt, 6, "xs", xs, "out", out, "a",
				  a, "b", b, "w", w, "bias", bias));
	CLP_TRY(clp_nn_require_f32("residual_layernorm_forward", 2, "mean", mean, "rstd", rstd));
	CLP_TRY(norm_kernel(ctx, dt, gpu ? "clp_ln_residual_forward_g" : "clp_ln_residual_forward",
			    &k));
	CLP_TRY(clp_cl_args(ctx, k, 19, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(mean.mem),
			    CLP_ARG(mo), CLP_ARG(rstd.mem), CLP_ARG(ro), CLP_ARG(xs.mem),
			    CLP_ARG(xo), CLP_ARG(a.mem), CLP_ARG(ao), CLP_ARG(b.mem), CLP_ARG(bo),
			    CLP_ARG(w.mem), CLP_ARG(wo), CLP_ARG(bias.mem), CLP_ARG(bio),
			    CLP_ARG(n), CLP_ARG(c), CLP_ARG(eps)));
	return run_rows(ctx, k, "residual_layernorm_fwd", N, gpu);
}

clp_status clp_nn_layernorm_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dw, clp_buf db,
				     clp_buf dout, clp_buf inp, clp_buf w, clp_buf mean,
				     clp_buf rstd, size_t N, size_t C)
{
	cl_kernel k;
	cl_mem part;
	size_t nb = nn_cdiv(N, NN_ROWS_PER_BLOCK);
	cl_ulong dio = dinp.off, doo = dout.off, io = inp.off, wo = w.off, mo = mean.off,
		 ro = rstd.off;
	cl_uint n = (cl_uint)N, c = (cl_uint)C, r = NN_ROWS_PER_BLOCK;
	clp_dtype dt;

	CLP_TRY(check_rows("layernorm_backward", N, C));
	CLP_TRY(clp_nn_value_type("layernorm_backward", &dt, 2, "inp", inp, "w", w));
	CLP_TRY(clp_nn_require_f32("layernorm_backward", 6, "dinp", dinp, "dw", dw, "db", db,
				   "dout", dout, "mean", mean, "rstd", rstd));
	if (N == 0)
		return CLP_OK;
	if (clp_nn_gpu_shape(ctx)) {
		CLP_TRY(norm_kernel(ctx, dt, "clp_ln_backward_g", &k));
		CLP_TRY(clp_cl_args(ctx, k, 14, CLP_ARG(dinp.mem), CLP_ARG(dio), CLP_ARG(dout.mem),
				    CLP_ARG(doo), CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(w.mem),
				    CLP_ARG(wo), CLP_ARG(mean.mem), CLP_ARG(mo), CLP_ARG(rstd.mem),
				    CLP_ARG(ro), CLP_ARG(n), CLP_ARG(c)));
		CLP_TRY(clp_nn_run_rows_gpu(ctx, k, "layernorm_bwd", N));
		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, nb * 2 * C * sizeof(float), &part));
		CLP_TRY(grad_part(ctx, dt, part, 2 * C, dout, inp, mean, rstd, N, C,
				  dw.mem ? 0 : C, (dw.mem ? C : 0) + (db.mem ? C : 0)));
	} else { /* wide rows: their sums after the block partials (2 N floats), then strips */
		cl_ulong so = nb * 2 * C;
		cl_uint sc = NORM_BWD_COLS;

		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, (so + 2 * N) * sizeof(float), &part));
		if (C > NORM_BWD_COLS) {
			CLP_TRY(norm_kernel(ctx, dt, "clp_ln_backward_rows", &k));
			CLP_TRY(clp_cl_args(ctx, k, 14, CLP_ARG(part), CLP_ARG(so),
					    CLP_ARG(dout.mem), CLP_ARG(doo), CLP_ARG(inp.mem),
					    CLP_ARG(io), CLP_ARG(w.mem), CLP_ARG(wo),
					    CLP_ARG(mean.mem), CLP_ARG(mo), CLP_ARG(rstd.mem),
					    CLP_ARG(ro), CLP_ARG(n), CLP_ARG(c)));
			CLP_TRY(clp_nn_run_rows(ctx, k, "layernorm_bwd_rows", N));
		}
		CLP_TRY(norm_kernel(ctx, dt, "clp_ln_backward", &k));
		CLP_TRY(clp_cl_args(ctx, k, 19, CLP_ARG(dinp.mem), CLP_ARG(dio), CLP_ARG(part),
				    CLP_ARG(part), CLP_ARG(so), CLP_ARG(dout.mem), CLP_ARG(doo),
				    CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(w.mem), CLP_ARG(wo),
				    CLP_ARG(mean.mem), CLP_ARG(mo), CLP_ARG(rstd.mem), CLP_ARG(ro),
				    CLP_ARG(n), CLP_ARG(c), CLP_ARG(r), CLP_ARG(sc)));
		CLP_TRY(clp_nn_run_rows(ctx, k, "layernorm_bwd", nb * nn_cdiv(C, NORM_BWD_COLS)));
	}
	if (dw.mem && db.mem) /* one launch for both (issue 30) */
		return clp_nn_colsum_acc2(ctx, dw, db, part, nb, C);
	if (dw.mem) /* mem NULL: a frozen weight or bias, no column sums */
		CLP_TRY(clp_nn_colsum_acc(ctx, dw, part, 0, 2 * C, nb, C));
	return db.mem ? clp_nn_colsum_acc(ctx, db, part, C, 2 * C, nb, C) : CLP_OK;
}

clp_status clp_nn_rmsnorm_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf rstd, clp_buf inp,
				  clp_buf w, size_t N, size_t C, float eps)
{
	cl_kernel k;
	cl_ulong oo = out.off, ro = rstd.off, io = inp.off, wo = w.off;
	cl_uint n = (cl_uint)N, c = (cl_uint)C;
	clp_dtype dt;

	CLP_TRY(check_rows("rmsnorm_forward", N, C));
	CLP_TRY(clp_nn_value_type("rmsnorm_forward", &dt, 3, "out", out, "inp", inp, "w", w));
	CLP_TRY(clp_nn_require_f32("rmsnorm_forward", 1, "rstd", rstd));
	CLP_TRY(norm_kernel(ctx, dt, "clp_rms_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 11, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(rstd.mem),
			    CLP_ARG(ro), CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(w.mem), CLP_ARG(wo),
			    CLP_ARG(n), CLP_ARG(c), CLP_ARG(eps)));
	return clp_nn_run_rows(ctx, k, "rmsnorm_fwd", N);
}

clp_status clp_nn_rmsnorm_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dw, clp_buf dout,
				   clp_buf inp, clp_buf w, clp_buf rstd, size_t N, size_t C)
{
	cl_kernel k;
	cl_mem part;
	size_t nb = nn_cdiv(N, NN_ROWS_PER_BLOCK);
	cl_ulong dio = dinp.off, doo = dout.off, io = inp.off, wo = w.off, ro = rstd.off, so;
	cl_uint n = (cl_uint)N, c = (cl_uint)C, r = NN_ROWS_PER_BLOCK, sc = NORM_BWD_COLS;
	clp_dtype dt;

	CLP_TRY(check_rows("rmsnorm_backward", N, C));
	CLP_TRY(clp_nn_value_type("rmsnorm_backward", &dt, 2, "inp", inp, "w", w));
	CLP_TRY(clp_nn_require_f32("rmsnorm_backward", 4, "dinp", dinp, "dw", dw, "dout", dout,
				   "rstd", rstd));
	if (N == 0)
		return CLP_OK;
	if (clp_nn_gpu_shape(ctx)) {
		clp_buf none = {0};

		CLP_TRY(norm_kernel(ctx, dt, "clp_rms_backward_g", &k));
		CLP_TRY(clp_cl_args(ctx, k, 12, CLP_ARG(dinp.mem), CLP_ARG(dio), CLP_ARG(dout.mem),
				    CLP_ARG(doo), CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(w.mem),
				    CLP_ARG(wo), CLP_ARG(rstd.mem), CLP_ARG(ro), CLP_ARG(n),
				    CLP_ARG(c)));
		CLP_TRY(clp_nn_run_rows_gpu(ctx, k, "rmsnorm_bwd", N));
		if (!dw.mem)
			return CLP_OK;
		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, nb * C * sizeof(float), &part));
		CLP_TRY(grad_part(ctx, dt, part, C, dout, inp, none, rstd, N, C, 0, C));
		return clp_nn_colsum_acc(ctx, dw, part, 0, C, nb, C);
	}
	so = nb * C; /* wide rows: their sums after the block partials (N floats), then strips */
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, (so + N) * sizeof(float), &part));
	if (C > NORM_BWD_COLS) {
		CLP_TRY(norm_kernel(ctx, dt, "clp_rms_backward_rows", &k));
		CLP_TRY(clp_cl_args(ctx, k, 12, CLP_ARG(part), CLP_ARG(so), CLP_ARG(dout.mem),
				    CLP_ARG(doo), CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(w.mem),
				    CLP_ARG(wo), CLP_ARG(rstd.mem), CLP_ARG(ro), CLP_ARG(n),
				    CLP_ARG(c)));
		CLP_TRY(clp_nn_run_rows(ctx, k, "rmsnorm_bwd_rows", N));
	}
	CLP_TRY(norm_kernel(ctx, dt, "clp_rms_backward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 17, CLP_ARG(dinp.mem), CLP_ARG(dio), CLP_ARG(part),
			    CLP_ARG(part), CLP_ARG(so), CLP_ARG(dout.mem), CLP_ARG(doo),
			    CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(w.mem), CLP_ARG(wo),
			    CLP_ARG(rstd.mem), CLP_ARG(ro), CLP_ARG(n), CLP_ARG(c), CLP_ARG(r),
			    CLP_ARG(sc)));
	CLP_TRY(clp_nn_run_rows(ctx, k, "rmsnorm_bwd", nb * nn_cdiv(C, NORM_BWD_COLS)));
	return dw.mem ? clp_nn_colsum_acc(ctx, dw, part, 0, C, nb, C) : CLP_OK;
}

clp_status clp_nn_bias_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf bias, size_t N, size_t C)
{
	cl_kernel k;
	cl_ulong oo = out.off, bo = bias.off;
	cl_uint n = (cl_uint)N, c = (cl_uint)C;
	clp_dtype dt;

	CLP_TRY(check_rows("bias_forward", N, C));
	CLP_TRY(clp_nn_value_type("bias_forward", &dt, 2, "out", out, "bias", bias));
	CLP_TRY(norm_kernel(ctx, dt, "clp_bias_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(bias.mem),
			    CLP_ARG(bo), CLP_ARG(n), CLP_ARG(c)));
	return clp_nn_run_rows(ctx, k, "bias_fwd", N);
}

clp_status clp_nn_bias_backward(clp_cl_ctx *ctx, clp_buf dbias, clp_buf dout, size_t N, size_t C)
{
	cl_kernel k;
	cl_ulong xo = dout.off, dso = dbias.off;
	cl_uint n = (cl_uint)N, c = (cl_uint)C, r = NN_ROWS_PER_BLOCK;

	CLP_TRY(check_rows("bias_backward", N, C));
	CLP_TRY(clp_nn_require_f32("bias_backward", 2, "dbias", dbias, "dout", dout));
	if (N == 0)
		return CLP_OK;
	/* the order of the row-block partials then clp_nn_colsum it replaces, in launches of at
	 * most BIAS_ROWS_LAUNCH rows carrying the running sums (one launch up to that N) */
	if (!clp_nn_gpu_shape(ctx)) {
		cl_mem carry = NULL;

		CLP_TRY(clp_cl_kernel(ctx, NORM_FILE, NULL, "clp_bias_grad_rows", &k));
		if (N > BIAS_ROWS_LAUNCH)
			CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, C * sizeof(float), &carry));
		else
			carry = dbias.mem; /* not read or written: one launch is first and last */
		for (size_t n0 = 0; n0 < N; n0 += BIAS_ROWS_LAUNCH) {
			const cl_uint a = (cl_uint)n0, b = (cl_uint)(n0 + BIAS_ROWS_LAUNCH);
			const cl_int first = n0 == 0, last = n0 + BIAS_ROWS_LAUNCH >= N;

			CLP_TRY(clp_cl_args(ctx, k, 12, CLP_ARG(dbias.mem), CLP_ARG(dso),
					    CLP_ARG(dout.mem), CLP_ARG(xo), CLP_ARG(n), CLP_ARG(c),
					    CLP_ARG(r), CLP_ARG(carry), CLP_ARG(a), CLP_ARG(b),
					    CLP_ARG(first), CLP_ARG(last)));
			CLP_TRY(clp_nn_run_rows(ctx, k, "bias_bwd", nn_cdiv(C, 64)));
		}
		return CLP_OK;
	}
	{ /* block partials (work-groups of adjacent columns), then their sums in order */
		const size_t nb = nn_cdiv(N, NN_ROWS_PER_BLOCK);
		size_t global[2] = {nn_cdiv(C, 64) * 64, nb}, local[2] = {64, 1};
		cl_mem part;

		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, nb * C * sizeof(float), &part));
		CLP_TRY(clp_cl_kernel(ctx, NORM_FILE, NULL, "clp_bias_grad_part", &k));
		CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(part), CLP_ARG(dout.mem), CLP_ARG(xo),
				    CLP_ARG(n), CLP_ARG(c), CLP_ARG(r)));
		CLP_TRY(clp_cl_run(ctx, k, "bias_grad_part", 2, global, local));
		return clp_nn_colsum_acc(ctx, dbias, part, 0, C, nb, C);
	}
}
