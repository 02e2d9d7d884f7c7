/* The fused kernels of issue 30 (cl/nn.h): bias + GELU (the MLP up projection's epilogue), the
 * residual add + LayerNorm, GELU's backward that overwrites (no fill), the bias gradient and
 * LayerNorm's two column sums in one launch each. In fp32, bf16 and fp16, on odd shapes (1, 7,
 * 33, 127, a row of 1000, several EW chunks): each is bitwise the launches it replaces (run on
 * the same device from the same inputs), which keeps training bitwise what it was; in fp32 each
 * is also checked against the double references of cl/ref (fused forward) and its backward (the
 * kernels the stage runs for it) against central differences of the double reference forward;
 * the bias gradient against the host's fp32 sums in the documented order, bit for bit. NaN in
 * an input reaches the outputs; a poisoned (NaN) output buffer is overwritten. */
#include "tests/nn/nn_st.h"

#define EPS 1e-5f

static const clp_dtype types[3] = {CLP_F32, CLP_BF16, CLP_F16};

static void same_bits(const char *what, const char *name, clp_dtype dt, cl_mem a, cl_mem b,
		      size_t n)
{
	float *x = malloc((n ? n : 1) * 4), *y = malloc((n ? n : 1) * 4);
	size_t bad = 0, first = 0;

	ts_get(dt, a, x, n);
	ts_get(dt, b, y, n);
	for (size_t i = 0; i < n; i++)
		if (memcmp(&x[i], &y[i], 4) != 0 && !bad++)
			first = i;
	CHECK(bad == 0, "%s (%s): %s: %zu of %zu elements differ from the unfused launches, first "
	      "[%zu] %.9g vs %.9g", what, clp_dtype_name(dt), name, bad, n, first, x[first],
	      y[first]);
	free(x);
	free(y);
}

/* ---- bias + GELU ----------------------------------------------------------------------- */

struct fd_bg {
	float *y, *b, *g, *fc;
	size_t N, F;
	int kind;
	double *act;
};

static double bg_loss(void *ud)
{
	struct fd_bg *f = ud;

	for (size_t i = 0; i < f->N * f->F; i++)
		f->fc[i] = f->y[i] + f->b[i % f->F];
	clp_ref_gelu_forward(f->act, f->fc, f->N * f->F, (clp_nn_gelu)f->kind);
	return tn_dot(f->g, f->act, f->N * f->F);
}

static void check_bias_gelu(clp_dtype dt, int kind, size_t N, size_t F, int nan, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t n = N * F;
	float *y = tn_rand(r, n, -5, 5), *b = tn_rand(r, F, -1, 1), *poison = malloc(n * 4 + 4);
	float *g = tn_rand(r, n, -1, 1), *db0 = tn_rand(r, F, -1, 1), *got = malloc(n * 4 + 4);
	float *fc = malloc(n * 4 + 4);
	cl_mem fcu, fcf, actu, actf, mb, mg, dfu, dff, mdb;
	char what[80];

	snprintf(what, sizeof(what), "bias_gelu %s N=%zu F=%zu%s", kind ? "erf" : "tanh", N, F,
		 nan ? " NaN" : "");
	if (nan)
		y[n / 2] = NAN;
	th_poison(poison, n);
	fcu = ts_buf(dt, y, n), fcf = ts_buf(dt, y, n), mb = ts_buf(dt, b, F);
	actu = ts_buf(dt, poison, n), actf = ts_buf(dt, poison, n);
	mg = ts_buf(CLP_F32, g, n), mdb = ts_buf(CLP_F32, db0, F);
	{ /* the backward's output: zeros (the fill it replaces) and NaN (overwritten) */
		float *z = calloc(n + 1, 4);

		dfu = ts_buf(CLP_F32, z, n);
		dff = ts_buf(CLP_F32, poison, n);
		free(z);
	}
	/* unfused: bias, then GELU; fused: one launch */
	CHECK_OK(clp_nn_bias_forward(ctx, ts_at(fcu, dt), ts_at(mb, dt), N, F));
	CHECK_OK(clp_nn_gelu_forward(ctx, ts_at(actu, dt), ts_at(fcu, dt), n, (clp_nn_gelu)kind));
	CHECK_OK(clp_nn_bias_gelu_forward(ctx, ts_at(actf, dt), ts_at(fcf, dt), ts_at(mb, dt), N,
					  F, (clp_nn_gelu)kind));
	same_bits(what, "fc", dt, fcf, fcu, n);
	same_bits(what, "act", dt, actf, actu, n);
	/* backward: gelu' onto zeros (unfused) and overwriting NaN (set) */
	CHECK_OK(clp_nn_gelu_backward(ctx, ts_at(dfu, CLP_F32), ts_at(mg, CLP_F32), ts_at(fcu, dt),
				      n, (clp_nn_gelu)kind));
	CHECK_OK(clp_nn_gelu_backward_set(ctx, ts_at(dff, CLP_F32), ts_at(mg, CLP_F32),
					  ts_at(fcf, dt), n, (clp_nn_gelu)kind));
	same_bits(what, "dfc", CLP_F32, dff, dfu, n);
	if (dt == CLP_F32 && !nan) { /* the double references, and finite differences */
		double *ref = malloc(n * 8 + 8);
		struct fd_bg f = {y, b, g, fc, N, F, kind, ref};
		float *dfc = malloc(n * 4 + 4), *db = malloc(F * 4 + 4);

		bg_loss(&f);
		ts_get(dt, fcf, got, n);
		CHECK(memcmp(got, fc, n * 4) == 0, "%s: fc is not the fp32 sum y + b", what);
		ts_get(dt, actf, got, n);
		th_close(what, got, ref, n, 1e-6, 1e-5);
		ts_get(CLP_F32, dff, dfc, n);
		CHECK_OK(clp_nn_bias_backward(ctx, ts_at(mdb, CLP_F32), ts_at(dff, CLP_F32), N, F));
		ts_get(CLP_F32, mdb, db, F);
		if (n <= 1100) {
			float *zero = calloc(n + 1, 4);

			ts_fd_check(what, "dfc (d/dy)", dt, y, n, dfc, zero, bg_loss, &f);
			ts_fd_check(what, "dbias", dt, b, F, db, db0, bg_loss, &f);
			free(zero);
		}
		free(ref), free(dfc), free(db);
	}
	if (nan) { /* NaN at y[n/2] reaches fc, act and dfc there */
		ts_get(dt, actf, got, n);
		CHECK(isnan(got[n / 2]), "%s: act[%zu] = %g, NaN expected", what, n / 2, got[n / 2]);
		ts_get(CLP_F32, dff, got, n);
		CHECK(isnan(got[n / 2]), "%s: dfc[%zu] = %g, NaN expected", what, n / 2, got[n / 2]);
	}
	clReleaseMemObject(fcu), clReleaseMemObject(fcf), clReleaseMemObject(mb);
	clReleaseMemObject(actu), clReleaseMemObject(actf), clReleaseMemObject(mg);
	clReleaseMemObject(dfu), clReleaseMemObject(dff), clReleaseMemObject(mdb);
	free(y), free(b), free(poison), free(g), free(db0), free(got), free(fc);
}

static void test_bias_gelu(void)
{
	static const size_t sh[][2] = {{1, 1}, {7, 33}, {33, 7}, {127, 127}, {1, 1000}, {20, 1001}};
	th_rng r = th_rng_seed(30);

	if (!th_ctx())
		return;
	for (int t = 0; t < 3; t++)
		for (int kind = 0; kind < 2; kind++) {
			for (int s = 0; s < 6; s++)
				check_bias_gelu(types[t], kind, sh[s][0], sh[s][1], 0, &r);
			check_bias_gelu(types[t], kind, 7, 33, 1, &r);
		}
}

/* ---- residual + LayerNorm -------------------------------------------------------------- */

struct fd_rl {
	float *a, *b, *w, *bias, *g, *gx, *xs;
	size_t N, C;
	double *out;
};

/* <g, LN(a + b)> + <gx, a + b>: the residual stream is read on (the next layer's input) */
static double rl_loss(void *ud)
{
	struct fd_rl *f = ud;
	double s = 0;

	for (size_t i = 0; i < f->N * f->C; i++) {
		f->xs[i] = f->a[i] + f->b[i];
		s += (double)f->gx[i] * f->xs[i];
	}
	clp_ref_layernorm_forward(f->out, NULL, NULL, f->xs, f->w, f->bias, f->N, f->C, EPS);
	return s + tn_dot(f->g, f->out, f->N * f->C);
}

static void check_res_ln(clp_dtype dt, size_t N, size_t C, int nan, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t nc = N * C;
	float *a = tn_rand(r, nc, -2, 3), *b = tn_rand(r, nc, -1, 1), *w = tn_rand(r, C, 0.5f, 1.5f);
	float *bias = tn_rand(r, C, -1, 1), *g = tn_rand(r, nc, -1, 1), *gx = tn_rand(r, nc, -1, 1);
	float *poison = malloc(nc * 4 + 4), *xs = malloc(nc * 4 + 4), *got = malloc(nc * 4 + 4);
	cl_mem ma, mb, mw, mbi, xsu, xsf, ou, of, mu, mf, ru, rf;
	char what[80];

	snprintf(what, sizeof(what), "residual_layernorm N=%zu C=%zu%s", N, C, nan ? " NaN" : "");
	if (nan)
		b[nc / 2] = NAN;
	th_poison(poison, nc);
	ma = ts_buf(dt, a, nc), mb = ts_buf(dt, b, nc), mw = ts_buf(dt, w, C);
	mbi = ts_buf(dt, bias, C);
	xsu = ts_buf(dt, poison, nc), xsf = ts_buf(dt, poison, nc);
	ou = ts_buf(dt, poison, nc), of = ts_buf(dt, poison, nc);
	mu = ts_buf(CLP_F32, poison, N), mf = ts_buf(CLP_F32, poison, N);
	ru = ts_buf(CLP_F32, poison, N), rf = ts_buf(CLP_F32, poison, N);
	CHECK_OK(clp_nn_residual_forward(ctx, ts_at(xsu, dt), ts_at(ma, dt), ts_at(mb, dt), nc));
	CHECK_OK(clp_nn_layernorm_forward(ctx, ts_at(ou, dt), ts_at(mu, CLP_F32), ts_at(ru, CLP_F32),
					  ts_at(xsu, dt), ts_at(mw, dt), ts_at(mbi, dt), N, C, EPS));
	CHECK_OK(clp_nn_residual_layernorm_forward(ctx, ts_at(xsf, dt), ts_at(of, dt),
						   ts_at(mf, CLP_F32), ts_at(rf, CLP_F32),
						   ts_at(ma, dt), ts_at(mb, dt), ts_at(mw, dt),
						   ts_at(mbi, dt), N, C, EPS));
	same_bits(what, "xs", dt, xsf, xsu, nc);
	same_bits(what, "out", dt, of, ou, nc);
	same_bits(what, "mean", CLP_F32, mf, mu, N);
	same_bits(what, "rstd", CLP_F32, rf, ru, N);
	if (dt == CLP_F32 && !nan) {
		double *ref = malloc(nc * 8 + 8), *mean = malloc(N * 8 + 8), *rstd = malloc(N * 8 + 8);
		struct fd_rl f = {a, b, w, bias, g, gx, xs, N, C, ref};
		cl_mem mg = ts_buf(CLP_F32, g, nc), md = ts_buf(CLP_F32, gx, nc);
		float *dw0 = calloc(C + 1, 4), *da = malloc(nc * 4 + 4);
		cl_mem mdw = ts_buf(CLP_F32, dw0, C), mdb = ts_buf(CLP_F32, dw0, C);

		rl_loss(&f);
		clp_ref_layernorm_forward(ref, mean, rstd, xs, w, bias, N, C, EPS);
		ts_get(dt, xsf, got, nc);
		CHECK(memcmp(got, xs, nc * 4) == 0, "%s: xs is not the fp32 sum a + b", what);
		ts_get(dt, of, got, nc);
		th_close(what, got, ref, nc, 1e-5, 1e-5);
		ts_get(CLP_F32, rf, got, N);
		th_close(what, got, rstd, N, 1e-6, 1e-5);
		/* backward as the stage runs it: the residual gradient gx, onto which LayerNorm's
		 * backward adds its input gradient; d/da of the loss */
		CHECK_OK(clp_nn_layernorm_backward(ctx, ts_at(md, CLP_F32), ts_at(mdw, CLP_F32),
						   ts_at(mdb, CLP_F32), ts_at(mg, CLP_F32),
						   ts_at(xsf, dt), ts_at(mw, dt), ts_at(mf, CLP_F32),
						   ts_at(rf, CLP_F32), N, C));
		ts_get(CLP_F32, md, da, nc);
		if (nc <= 1100 && C > 1) {
			float *zero = calloc(nc + 1, 4);

			ts_fd_check(what, "d/da", dt, a, nc, da, zero, rl_loss, &f);
			ts_fd_check(what, "d/db", dt, b, nc, da, zero, rl_loss, &f);
			free(zero);
		}
		clReleaseMemObject(mg), clReleaseMemObject(md), clReleaseMemObject(mdw);
		clReleaseMemObject(mdb);
		free(ref), free(mean), free(rstd), free(dw0), free(da);
	}
	if (nan) { /* the NaN's row is NaN in xs and out; other rows are finite */
		ts_get(dt, of, got, nc);
		CHECK(isnan(got[nc / 2]), "%s: out[%zu] = %g, NaN expected", what, nc / 2,
		      got[nc / 2]);
		CHECK(N < 2 || nc / 2 / C == 0 || isfinite(got[0]), "%s: row 0 not finite", what);
	}
	clReleaseMemObject(ma), clReleaseMemObject(mb), clReleaseMemObject(mw);
	clReleaseMemObject(mbi), clReleaseMemObject(xsu), clReleaseMemObject(xsf);
	clReleaseMemObject(ou), clReleaseMemObject(of), clReleaseMemObject(mu);
	clReleaseMemObject(mf), clReleaseMemObject(ru), clReleaseMemObject(rf);
	free(a), free(b), free(w), free(bias), free(g), free(gx), free(poison), free(xs), free(got);
}

static void test_residual_layernorm(void)
{
	static const size_t sh[][2] = {{1, 1}, {7, 33}, {33, 7}, {127, 127}, {3, 768}, {1, 1000}};
	th_rng r = th_rng_seed(31);

	if (!th_ctx())
		return;
	for (int t = 0; t < 3; t++) {
		for (int s = 0; s < 6; s++)
			check_res_ln(types[t], sh[s][0], sh[s][1], 0, &r);
		check_res_ln(types[t], 7, 33, 1, &r);
	}
}

/* ---- the bias gradient in one launch: the documented order, bit for bit ------------------- */

static void test_bias_grad_order(void)
{
	static const size_t Ns[] = {1, 7, 31, 32, 33, 127, 1000}, Cs[] = {1, 7, 33, 64, 65, 127};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(32);

	if (!ctx)
		return;
	for (int i = 0; i < 7; i++)
		for (int j = 0; j < 6; j++) {
			size_t N = Ns[i], C = Cs[j];
			float *x = tn_rand(&r, N * C, -1, 1), *d0 = tn_rand(&r, C, -1, 1);
			float *want = malloc(C * 4), *got = malloc(C * 4);
			cl_mem mx = ts_buf(CLP_F32, x, N * C), md = ts_buf(CLP_F32, d0, C);

			for (size_t c = 0; c < C; c++) { /* blocks of 32 rows, then the blocks */
				float acc = 0.0f;

				for (size_t n0 = 0; n0 < N; n0 += 32) {
					float p = 0.0f;

					for (size_t n = n0; n < N && n < n0 + 32; n++)
						p += x[n * C + c];
					acc += p;
				}
				want[c] = d0[c] + acc;
			}
			CHECK_OK(clp_nn_bias_backward(ctx, ts_at(md, CLP_F32), ts_at(mx, CLP_F32), N,
						      C));
			ts_get(CLP_F32, md, got, C);
			{
				size_t c = 0;

				while (c < C && memcmp(&got[c], &want[c], 4) == 0)
					c++;
				CHECK(c == C, "bias gradient N=%zu C=%zu: not the sums in the "
				      "documented order (dbias[%zu] %.9g, want %.9g)", N, C, c,
				      got[c < C ? c : 0], want[c < C ? c : 0]);
			}
			clReleaseMemObject(mx), clReleaseMemObject(md);
			free(x), free(d0), free(want), free(got);
		}
}

TH_MAIN(TH_TEST(test_bias_gelu), TH_TEST(test_residual_layernorm), TH_TEST(test_bias_grad_order))
