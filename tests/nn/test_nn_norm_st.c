/* LayerNorm, RMSNorm and bias with 16-bit value tensors (bf16, fp16; issue 18): inp, w, b and
 * out in the storage type, the gradients and mean/rstd in fp32.
 *  - forward out: the rounded double reference at the rounded inputs, within the fp32 kernel's
 *    tolerance plus one unit in the last place of the 16-bit format (ts_check explains why:
 *    the kernel's float result differs from the exact one by its fp32 error, and then both are
 *    rounded to nearest). The bias add is checked bitwise: a + b of two floats is one correctly
 *    rounded float operation on both sides (the double sum of these values is exact), then the
 *    same rounding to 16 bits.
 *  - rstd and the gradients: fp32 results computed from exactly the values the reference reads,
 *    so the fp32 tests' tolerances apply unchanged; the gradients also against central
 *    differences of the fp32 (double) forward at the rounded inputs.
 *  - a NaN in one input row gives NaN where the reference (and the fp32 kernel) does: that row
 *    of out and dinp, and every element of dw and db; nothing else.
 *  - value tensors of mixed types, or a 16-bit gradient or statistic: CLP_ERR_INVALID naming it. */
#include "tests/nn/nn_st.h"

static const size_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {127, 45}, {2, 768}};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

struct fd_ctx {
	float *inp, *w, *b, *g;
	size_t N, C;
	int rms;
	double *out;
};

static double norm_loss(void *ud)
{
	struct fd_ctx *f = ud;

	if (f->rms)
		clp_ref_rmsnorm_forward(f->out, NULL, f->inp, f->w, f->N, f->C, 1e-5f);
	else
		clp_ref_layernorm_forward(f->out, NULL, NULL, f->inp, f->w, f->b, f->N, f->C, 1e-5f);
	return tn_dot(f->g, f->out, f->N * f->C);
}

static void check_norm(clp_dtype dt, size_t N, size_t C, int rms, int nan_row, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t nc = N * C;
	float *inp = tn_rand(r, nc, -2, 3), *w = tn_rand(r, C, 0.5f, 1.5f), *b = tn_rand(r, C, -1, 1);
	float *g = tn_rand(r, nc, -1, 1), *dinp0 = tn_rand(r, nc, -1, 1), *dw0 = tn_rand(r, C, -1, 1);
	float *db0 = tn_rand(r, C, -1, 1), *got = malloc(nc * 4), *got2 = malloc(C * 4);
	double *out = malloc(nc * 8), *mean = malloc(N * 8), *rstd = malloc(N * 8);
	double *dinp = tn_dbl(dinp0, nc), *dw = tn_dbl(dw0, C), *db = tn_dbl(db0, C);
	cl_mem mi, mw, mb, mo, mg = tn_buf(g, nc), mm = tn_buf(NULL, N), mr = tn_buf(NULL, N);
	cl_mem mdi = tn_buf(dinp0, nc), mdw = tn_buf(dw0, C), mdb = tn_buf(db0, C);
	char what[96];

	if (nan_row >= 0)
		inp[(size_t)nan_row * C + C / 2] = NAN;
	clp_ref_load(dt, inp, nc);
	clp_ref_load(dt, w, C);
	clp_ref_load(dt, b, C);
	mi = ts_buf(dt, inp, nc), mw = ts_buf(dt, w, C), mb = ts_buf(dt, b, C);
	th_poison(got, nc);
	mo = ts_buf(dt, got, nc);
	if (rms) {
		clp_ref_rmsnorm_forward_st(dt, out, rstd, inp, w, N, C, 1e-5f);
		clp_ref_rmsnorm_backward(dinp, dw, g, inp, w, N, C, 1e-5f);
		CHECK_OK(clp_nn_rmsnorm_forward(ctx, ts_at(mo, dt), clp_buf_at(mr, 0), ts_at(mi, dt),
						ts_at(mw, dt), N, C, 1e-5f));
		CHECK_OK(clp_nn_rmsnorm_backward(ctx, clp_buf_at(mdi, 0), clp_buf_at(mdw, 0),
						 clp_buf_at(mg, 0), ts_at(mi, dt), ts_at(mw, dt),
						 clp_buf_at(mr, 0), N, C));
	} else {
		clp_ref_layernorm_forward_st(dt, out, mean, rstd, inp, w, b, N, C, 1e-5f);
		clp_ref_layernorm_backward(dinp, dw, db, g, inp, w, N, C, 1e-5f);
		CHECK_OK(clp_nn_layernorm_forward(ctx, ts_at(mo, dt), clp_buf_at(mm, 0),
						  clp_buf_at(mr, 0), ts_at(mi, dt), ts_at(mw, dt),
						  ts_at(mb, dt), N, C, 1e-5f));
		CHECK_OK(clp_nn_layernorm_backward(ctx, clp_buf_at(mdi, 0), clp_buf_at(mdw, 0),
						   clp_buf_at(mdb, 0), clp_buf_at(mg, 0),
						   ts_at(mi, dt), ts_at(mw, dt), clp_buf_at(mm, 0),
						   clp_buf_at(mr, 0), N, C));
	}
	snprintf(what, sizeof(what), "%s N=%zu C=%zu%s", rms ? "rmsnorm" : "layernorm", N, C,
		 nan_row >= 0 ? " with a NaN" : "");
	ts_get(dt, mo, got, nc);
	ts_check(what, dt, got, out, nc, 1e-5, 1e-5, 1);
	tn_get(mr, 0, got, N);
	ts_check(what, CLP_F32, got, rstd, N, 1e-6, 1e-5, 0);
	if (!rms) {
		tn_get(mm, 0, got, N);
		ts_check(what, CLP_F32, got, mean, N, 1e-6, 1e-5, 0);
	}
	tn_get(mdi, 0, got, nc);
	ts_check(what, CLP_F32, got, dinp, nc, 1e-4, 1e-4, 0);
	if (nc <= 800 && nan_row < 0) {
		struct fd_ctx f = {inp, w, b, g, N, C, rms, out};

		if (C > 1)
			ts_fd_check(what, "dinp", dt, inp, nc, got, dinp0, norm_loss, &f);
		tn_get(mdw, 0, got2, C);
		ts_fd_check(what, "dw", dt, w, C, got2, dw0, norm_loss, &f);
		if (!rms) {
			tn_get(mdb, 0, got2, C);
			ts_fd_check(what, "db", dt, b, C, got2, db0, norm_loss, &f);
		}
	}
	tn_get(mdw, 0, got2, C);
	ts_check(what, CLP_F32, got2, dw, C, 1e-4, 1e-4, 0);
	if (!rms) {
		tn_get(mdb, 0, got2, C);
		ts_check(what, CLP_F32, got2, db, C, 1e-4, 1e-4, 0);
	}
	clReleaseMemObject(mi), clReleaseMemObject(mw), clReleaseMemObject(mb);
	clReleaseMemObject(mg), clReleaseMemObject(mo), clReleaseMemObject(mm);
	clReleaseMemObject(mr), clReleaseMemObject(mdi), clReleaseMemObject(mdw);
	clReleaseMemObject(mdb);
	free(inp), free(w), free(b), free(g), free(dinp0), free(dw0), free(db0), free(got);
	free(got2), free(out), free(mean), free(rstd), free(dinp), free(dw), free(db);
}

static void test_norm_st(void)
{
	th_rng r = th_rng_seed(101);

	if (!th_ctx())
		return;
	for (int t = 0; t < TS_NTYPES; t++)
		for (int rms = 0; rms < 2; rms++) {
			for (size_t i = 0; i < NSHAPES; i++)
				check_norm(ts_types[t], shapes[i][0], shapes[i][1], rms, -1, &r);
			check_norm(ts_types[t], 7, 33, rms, 3, &r);
		}
}

static void test_bias_st(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(102);

	if (!ctx)
		return;
	for (int t = 0; t < TS_NTYPES; t++)
		for (size_t s = 0; s < NSHAPES; s++) {
			clp_dtype dt = ts_types[t];
			size_t N = shapes[s][0], C = shapes[s][1], nc = N * C;
			float *x = tn_rand(&r, nc, -1, 1), *b = tn_rand(&r, C, -1, 1);
			float *got = malloc(nc * 4);
			double *ref;
			cl_mem mx, mb;
			char what[64];

			if (s == 1)
				x[nc / 2] = NAN;
			clp_ref_load(dt, x, nc);
			clp_ref_load(dt, b, C);
			ref = tn_dbl(x, nc);
			mx = ts_buf(dt, x, nc), mb = ts_buf(dt, b, C);
			clp_ref_bias_forward_st(dt, ref, b, N, C);
			CHECK_OK(clp_nn_bias_forward(ctx, ts_at(mx, dt), ts_at(mb, dt), N, C));
			ts_get(dt, mx, got, nc);
			snprintf(what, sizeof(what), "bias forward N=%zu C=%zu", N, C);
			ts_check(what, dt, got, ref, nc, 0, 0, 0);
			clReleaseMemObject(mx), clReleaseMemObject(mb);
			free(x), free(b), free(got), free(ref);
		}
}

/* Mixed value types and 16-bit gradients or statistics are refused, naming the argument; the
 * arguments are checked before anything runs (the buffers are never touched). */
static void test_storage_errors(void)
{
	clp_cl_ctx *ctx = th_ctx();
	cl_mem m;
	clp_buf f, h, bf;

	if (!ctx)
		return;
	m = tn_buf(NULL, 64);
	f = clp_buf_at(m, 0), h = clp_buf_typed(m, 0, CLP_F16), bf = clp_buf_typed(m, 0, CLP_BF16);
	CHECK_ERR(clp_nn_layernorm_forward(ctx, bf, f, f, h, bf, bf, 2, 4, 1e-5f), CLP_ERR_INVALID,
		  "layernorm_forward", "inp is fp16", "out is bf16");
	CHECK_ERR(clp_nn_layernorm_forward(ctx, bf, f, bf, bf, bf, bf, 2, 4, 1e-5f),
		  CLP_ERR_INVALID, "rstd is bf16");
	CHECK_ERR(clp_nn_layernorm_backward(ctx, bf, f, f, f, bf, bf, f, f, 2, 4), CLP_ERR_INVALID,
		  "layernorm_backward", "dinp is bf16");
	CHECK_ERR(clp_nn_layernorm_backward(ctx, f, f, f, f, bf, h, f, f, 2, 4), CLP_ERR_INVALID,
		  "w is fp16");
	CHECK_ERR(clp_nn_rmsnorm_forward(ctx, h, f, h, bf, 2, 4, 1e-5f), CLP_ERR_INVALID,
		  "rmsnorm_forward", "w is bf16");
	CHECK_ERR(clp_nn_rmsnorm_backward(ctx, f, h, f, h, h, f, 2, 4), CLP_ERR_INVALID,
		  "rmsnorm_backward", "dw is fp16");
	CHECK_ERR(clp_nn_bias_forward(ctx, h, f, 2, 4), CLP_ERR_INVALID, "bias_forward",
		  "bias is fp32");
	CHECK_ERR(clp_nn_bias_backward(ctx, f, bf, 2, 4), CLP_ERR_INVALID, "bias_backward",
		  "dout is bf16");
	clReleaseMemObject(m);
}

TH_MAIN(TH_TEST(test_norm_st), TH_TEST(test_bias_st), TH_TEST(test_storage_errors))
