/* GELU (tanh, erf), SwiGLU, residual and dropout with 16-bit activations (bf16, fp16; issue 18):
 * value tensors in the storage type, gradients in fp32.
 *  - GELU and SwiGLU outputs: the rounded double reference at the rounded inputs, within the
 *    fp32 kernel's tolerance plus one unit in the last place of the 16-bit format (nn_st.h,
 *    ts_check: float error first, then both sides round to nearest).
 *  - residual a + b and dropout with p = 1/2 (scale 2): bitwise, one correctly rounded float
 *    operation on both sides (the double result of these operands is exact), then the same
 *    rounding to 16 bits. Dropout with p = 0.1 scales by the float 1/(1-p) on the device and the
 *    double one in the reference: the fp32 tolerance plus one unit.
 *  - gradients (fp32) from the 16-bit saved activations: the fp32 tests' tolerances (the same
 *    float computation from the same values), and against central differences of the fp32
 *    (double) forward at the rounded inputs.
 *  - a NaN input gives NaN in that element's output and gradient, nowhere else.
 *  - mixed value types, a 16-bit gradient or a 16-bit random fill: CLP_ERR_INVALID naming it. */
#include "tests/nn/nn_st.h"

static const size_t sizes[] = {1, 7, 33, 127, 1000, 20000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct fd_act {
	float *x, *up;
	size_t n, ld, F;
	int kind; /* 0, 1: gelu kinds; 2: swiglu */
	const float *g;
	double *out;
};

static double act_loss(void *ud)
{
	struct fd_act *f = ud;

	if (f->kind == 2) {
		clp_ref_swiglu_forward(f->out, f->x, f->up, f->ld, f->n, f->F);
		return tn_dot(f->g, f->out, f->n * f->F);
	}
	clp_ref_gelu_forward(f->out, f->x, f->n, (clp_nn_gelu)f->kind);
	return tn_dot(f->g, f->out, f->n);
}

static void check_gelu(clp_dtype dt, int kind, size_t n, int with_nan, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	float *x = tn_rand(r, n, -6, 6), *g = tn_rand(r, n, -1, 1), *d0 = tn_rand(r, n, -1, 1);
	float *got = malloc(n * 4);
	double *ref = malloc(n * 8), *dref = tn_dbl(d0, n);
	cl_mem mx, mg = tn_buf(g, n), md = tn_buf(d0, n), mo;
	char what[64];

	if (n > 100) { /* the tails, where exp overflows (all representable in fp16) */
		x[0] = -60.0f, x[1] = -25.0f, x[2] = 25.0f, x[3] = 60.0f;
	}
	if (with_nan)
		x[n / 2] = NAN;
	clp_ref_load(dt, x, n);
	mx = ts_buf(dt, x, n);
	th_poison(got, n);
	mo = ts_buf(dt, got, n);
	snprintf(what, sizeof(what), "gelu %s n=%zu%s", kind ? "erf" : "tanh", n,
		 with_nan ? " with a NaN" : "");
	clp_ref_gelu_forward_st(dt, ref, x, n, (clp_nn_gelu)kind);
	clp_ref_gelu_backward(dref, g, x, n, (clp_nn_gelu)kind);
	CHECK_OK(clp_nn_gelu_forward(ctx, ts_at(mo, dt), ts_at(mx, dt), n, (clp_nn_gelu)kind));
	CHECK_OK(clp_nn_gelu_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mg, 0), ts_at(mx, dt), n,
				      (clp_nn_gelu)kind));
	ts_get(dt, mo, got, n);
	ts_check(what, dt, got, ref, n, 1e-6, 1e-5, 1);
	tn_get(md, 0, got, n);
	ts_check(what, CLP_F32, got, dref, n, 1e-6, 1e-5, 0);
	if (n <= 1000 && !with_nan) {
		struct fd_act f = {x, NULL, n, 0, 0, kind, g, ref};

		ts_fd_check(what, "dinp", dt, x, n, got, d0, act_loss, &f);
	}
	/* in place (out = inp), the way a model applies it to its 16-bit activations */
	clp_ref_gelu_forward_st(dt, ref, x, n, (clp_nn_gelu)kind);
	CHECK_OK(clp_nn_gelu_forward(ctx, ts_at(mx, dt), ts_at(mx, dt), n, (clp_nn_gelu)kind));
	ts_get(dt, mx, got, n);
	ts_check(what, dt, got, ref, n, 1e-6, 1e-5, 1);
	clReleaseMemObject(mx), clReleaseMemObject(mg), clReleaseMemObject(md);
	clReleaseMemObject(mo);
	free(x), free(g), free(d0), free(got), free(ref), free(dref);
}

static void test_gelu_st(void)
{
	th_rng r = th_rng_seed(111);

	if (!th_ctx())
		return;
	for (int t = 0; t < TS_NTYPES; t++)
		for (int kind = 0; kind < 2; kind++) {
			for (size_t s = 0; s < NSIZES; s++)
				check_gelu(ts_types[t], kind, sizes[s], 0, &r);
			check_gelu(ts_types[t], kind, 33, 1, &r);
		}
}

static void check_swiglu(clp_dtype dt, size_t N, size_t F, int with_nan, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	size_t ld = 2 * F, nh = N * ld, no = N * F;
	float *h = tn_rand(r, nh, -4, 4), *g = tn_rand(r, no, -1, 1);
	float *d0 = tn_rand(r, nh, -1, 1), *got = malloc(nh * 4);
	double *ref = malloc(no * 8), *dref = tn_dbl(d0, nh);
	cl_mem mh, mg = tn_buf(g, no), md = tn_buf(d0, nh), mo;
	char what[64];

	if (with_nan)
		h[ld + F + 1] = NAN; /* up of row 1, column 1 */
	clp_ref_load(dt, h, nh);
	mh = ts_buf(dt, h, nh);
	th_poison(got, no);
	mo = ts_buf(dt, got, no);
	snprintf(what, sizeof(what), "swiglu N=%zu F=%zu%s", N, F, with_nan ? " with a NaN" : "");
	/* fused layout: gate = h, up = h + F, stride 2F */
	clp_ref_swiglu_forward_st(dt, ref, h, h + F, ld, N, F);
	clp_ref_swiglu_backward(dref, dref + F, g, h, h + F, ld, N, F);
	CHECK_OK(clp_nn_swiglu_forward(ctx, ts_at(mo, dt), ts_at(mh, dt),
				       clp_buf_plus(ts_at(mh, dt), F), ld, N, F));
	CHECK_OK(clp_nn_swiglu_backward(ctx, clp_buf_at(md, 0), clp_buf_at(md, F),
					clp_buf_at(mg, 0), ts_at(mh, dt),
					clp_buf_plus(ts_at(mh, dt), F), ld, N, F));
	ts_get(dt, mo, got, no);
	ts_check(what, dt, got, ref, no, 1e-6, 1e-5, 1);
	tn_get(md, 0, got, nh);
	ts_check(what, CLP_F32, got, dref, nh, 1e-5, 1e-5, 0);
	if (nh <= 2000 && !with_nan) {
		struct fd_act f = {h, h + F, N, ld, F, 2, g, ref};

		ts_fd_check(what, "dgate, dup", dt, h, nh, got, d0, act_loss, &f);
	}
	clReleaseMemObject(mh), clReleaseMemObject(mg), clReleaseMemObject(md);
	clReleaseMemObject(mo);
	free(h), free(g), free(d0), free(got), free(ref), free(dref);
}

static void test_swiglu_st(void)
{
	static const size_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {127, 45}, {3, 1000}};
	th_rng r = th_rng_seed(112);

	if (!th_ctx())
		return;
	for (int t = 0; t < TS_NTYPES; t++) {
		for (size_t s = 0; s < 5; s++)
			check_swiglu(ts_types[t], shapes[s][0], shapes[s][1], 0, &r);
		check_swiglu(ts_types[t], 7, 33, 1, &r);
	}
}

static void test_residual_st(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(113);

	if (!ctx)
		return;
	for (int t = 0; t < TS_NTYPES; t++)
		for (size_t s = 0; s < NSIZES; s++) {
			clp_dtype dt = ts_types[t];
			size_t n = sizes[s];
			float *a = tn_rand(&r, n, -1, 1), *b = tn_rand(&r, n, -1, 1);
			float *got = malloc(n * 4);
			double *ref = malloc(n * 8);
			cl_mem ma, mb, mo;
			char what[64];

			if (n == 33)
				b[5] = NAN;
			clp_ref_load(dt, a, n);
			clp_ref_load(dt, b, n);
			ma = ts_buf(dt, a, n), mb = ts_buf(dt, b, n);
			th_poison(got, n);
			mo = ts_buf(dt, got, n);
			snprintf(what, sizeof(what), "residual forward n=%zu", n);
			clp_ref_residual_forward_st(dt, ref, a, b, n);
			CHECK_OK(clp_nn_residual_forward(ctx, ts_at(mo, dt), ts_at(ma, dt),
							 ts_at(mb, dt), n));
			ts_get(dt, mo, got, n);
			ts_check(what, dt, got, ref, n, 0, 0, 0);
			/* in place into a, as the residual stream is updated */
			CHECK_OK(clp_nn_residual_forward(ctx, ts_at(ma, dt), ts_at(ma, dt),
							 ts_at(mb, dt), n));
			ts_get(dt, ma, got, n);
			ts_check(what, dt, got, ref, n, 0, 0, 0);
			clReleaseMemObject(ma), clReleaseMemObject(mb), clReleaseMemObject(mo);
			free(a), free(b), free(got), free(ref);
		}
}

static void test_dropout_st(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(114);
	clp_rng_stream s;

	if (!ctx)
		return;
	CHECK_OK(clp_rng_stream_init(&s, 7, 3, 1, 4, CLP_RNG_DROPOUT));
	for (int t = 0; t < TS_NTYPES; t++)
		for (size_t k = 0; k < NSIZES; k++) {
			clp_dtype dt = ts_types[t];
			size_t n = sizes[k];
			float p = k % 2 ? 0.1f : 0.5f;
			float *x = tn_rand(&r, n, 0.5f, 1.5f), *d0 = tn_rand(&r, n, -1, 1);
			float *g = tn_rand(&r, n, -1, 1), *got = malloc(n * 4);
			double *ref = malloc(n * 8), *dref = malloc(n * 8);
			double rt = p == 0.5f ? 0 : 1e-6, ulps = p == 0.5f ? 0 : 1;
			uint16_t *bits = malloc(n * 2), *bits2 = malloc(n * 2);
			cl_mem mx, md = tn_buf(d0, n), mg = tn_buf(g, n), mo;
			char what[64];

			if (n == 127)
				x[100] = NAN;
			clp_ref_load(dt, x, n);
			mx = ts_buf(dt, x, n);
			th_poison(got, n);
			mo = ts_buf(dt, got, n);
			snprintf(what, sizeof(what), "dropout p=%g n=%zu", p, n);
			clp_ref_dropout_st(dt, ref, x, n, p, &s);
			CHECK_OK(clp_nn_dropout_forward(ctx, ts_at(mo, dt), ts_at(mx, dt), n, p, &s));
			ts_get(dt, mo, got, n);
			ts_check(what, dt, got, ref, n, 0, rt, ulps);
			/* backward on fp32 gradients: the same mask, accumulated */
			clp_ref_dropout(dref, g, n, p, &s);
			for (size_t i = 0; i < n; i++)
				dref[i] += d0[i];
			CHECK_OK(clp_nn_dropout_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mg, 0), n,
							 p, &s));
			tn_get(md, 0, got, n);
			ts_check(what, CLP_F32, got, dref, n, 1e-6, 1e-6, 0);
			/* in place on the 16-bit tensor: p = 0 keeps the bits, then p as above */
			CHECK_OK(clp_cl_read(ctx, mx, TS_OFF * 2, n * 2, bits));
			CHECK_OK(clp_nn_dropout_forward(ctx, ts_at(mx, dt), ts_at(mx, dt), n, 0.0f, &s));
			CHECK_OK(clp_cl_read(ctx, mx, TS_OFF * 2, n * 2, bits2));
			CHECK(memcmp(bits, bits2, n * 2) == 0, "%s (%s): p = 0 must copy", what,
			      clp_dtype_name(dt));
			CHECK_OK(clp_nn_dropout_forward(ctx, ts_at(mx, dt), ts_at(mx, dt), n, p, &s));
			ts_get(dt, mx, got, n);
			ts_check(what, dt, got, ref, n, 0, rt, ulps);
			clReleaseMemObject(mx), clReleaseMemObject(md), clReleaseMemObject(mg);
			clReleaseMemObject(mo);
			free(x), free(d0), free(g), free(got), free(ref), free(dref), free(bits);
			free(bits2);
		}
}

/* Mixed value types and 16-bit gradients are refused before anything runs, naming the
 * argument. */
static void test_storage_errors(void)
{
	clp_cl_ctx *ctx = th_ctx();
	clp_rng_stream s;
	cl_mem m;
	clp_buf f, h, bf;

	if (!ctx)
		return;
	CHECK_OK(clp_rng_stream_init(&s, 7, 3, 1, 4, CLP_RNG_DROPOUT));
	m = tn_buf(NULL, 64);
	f = clp_buf_at(m, 0), h = clp_buf_typed(m, 0, CLP_F16), bf = clp_buf_typed(m, 0, CLP_BF16);
	CHECK_ERR(clp_nn_gelu_forward(ctx, bf, h, 8, CLP_NN_GELU_TANH), CLP_ERR_INVALID,
		  "gelu_forward", "inp is fp16");
	CHECK_ERR(clp_nn_gelu_backward(ctx, bf, f, bf, 8, CLP_NN_GELU_ERF), CLP_ERR_INVALID,
		  "gelu_backward", "dinp is bf16");
	CHECK_ERR(clp_nn_swiglu_forward(ctx, h, h, f, 8, 2, 4), CLP_ERR_INVALID, "swiglu_forward",
		  "up is fp32");
	CHECK_ERR(clp_nn_swiglu_backward(ctx, f, f, h, bf, bf, 8, 2, 4), CLP_ERR_INVALID,
		  "swiglu_backward", "dout is fp16");
	CHECK_ERR(clp_nn_residual_forward(ctx, bf, bf, h, 8), CLP_ERR_INVALID, "residual_forward",
		  "b is fp16");
	CHECK_ERR(clp_nn_residual_forward(ctx, f, bf, bf, 8), CLP_ERR_INVALID, "a is bf16");
	CHECK_ERR(clp_nn_residual_backward(ctx, h, f, f, 8), CLP_ERR_INVALID, "residual_backward",
		  "da is fp16");
	CHECK_ERR(clp_nn_dropout_forward(ctx, bf, f, 8, 0.1f, &s), CLP_ERR_INVALID,
		  "dropout_forward", "inp is fp32");
	CHECK_ERR(clp_nn_dropout_backward(ctx, f, bf, 8, 0.1f, &s), CLP_ERR_INVALID,
		  "dropout_backward", "dout is bf16");
	CHECK_ERR(clp_nn_rng_normal(ctx, bf, 8, &s, 0, 0.0f, 1.0f), CLP_ERR_INVALID, "out is bf16");
	clReleaseMemObject(m);
}

TH_MAIN(TH_TEST(test_gelu_st), TH_TEST(test_swiglu_st), TH_TEST(test_residual_st),
	TH_TEST(test_dropout_st), TH_TEST(test_storage_errors))
