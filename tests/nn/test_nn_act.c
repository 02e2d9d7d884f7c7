/* GELU (tanh, erf), SwiGLU, residual and dropout against the double references; reference
 * backwards against finite differences; dropout's mask drawn again identically in backward. */
#include "tests/nn/nn_test.h"

static const size_t sizes[] = {1, 7, 33, 1000, 20000};
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

static void test_gelu(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(11);

	if (!ctx)
		return;
	for (int kind = 0; kind < 2; kind++)
		for (size_t s = 0; s < NSIZES; s++) {
			size_t n = sizes[s];
			float *x = tn_rand(&r, n, -6, 6), *g = tn_rand(&r, n, -1, 1);

			if (n > 100) { /* the tails, where exp overflows */
				x[0] = -60.0f, x[1] = -25.0f, x[2] = 25.0f, x[3] = 60.0f;
			}
			float *d0 = tn_rand(&r, n, -1, 1), *got = malloc(n * 4);
			double *ref = malloc(n * 8), *dref = tn_dbl(d0, n);
			cl_mem mx = tn_buf(x, n), mg = tn_buf(g, n), md = tn_buf(d0, n), mo;
			char what[64];

			th_poison(got, n);
			mo = tn_buf(got, n);
			snprintf(what, sizeof(what), "gelu %s n=%zu", kind ? "erf" : "tanh", n);
			clp_ref_gelu_forward(ref, x, n, (clp_nn_gelu)kind);
			clp_ref_gelu_backward(dref, g, x, n, (clp_nn_gelu)kind);
			CHECK_OK(clp_nn_gelu_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mx, 0), n,
						     (clp_nn_gelu)kind));
			CHECK_OK(clp_nn_gelu_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mg, 0),
						      clp_buf_at(mx, 0), n, (clp_nn_gelu)kind));
			tn_get(mo, 0, got, n);
			th_close(what, got, ref, n, 1e-6, 1e-5);
			tn_get(md, 0, got, n);
			th_close(what, got, dref, n, 1e-6, 1e-5);
			if (n <= 1000) {
				struct fd_act f = {x, NULL, n, 0, 0, kind, g, ref};
				double *gr = tn_dbl(NULL, n), e;

				clp_ref_gelu_backward(gr, g, x, n, (clp_nn_gelu)kind);
				e = tn_fd(x, n, 1, gr, act_loss, &f, 1e-3f);
				CHECK(e < TN_FD_TOL, "%s: vs finite differences %g", what, e);
				free(gr);
			}
			clReleaseMemObject(mx), clReleaseMemObject(mg), clReleaseMemObject(md);
			clReleaseMemObject(mo);
			free(x), free(g), free(d0), free(got), free(ref), free(dref);
		}
}

static void test_swiglu(void)
{
	static const size_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {5, 1000}};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(12);

	if (!ctx)
		return;
	for (size_t s = 0; s < 4; s++) {
		size_t N = shapes[s][0], F = shapes[s][1], ld = 2 * F, nh = N * ld, no = N * F;
		float *h = tn_rand(&r, nh, -4, 4), *g = tn_rand(&r, no, -1, 1);
		float *d0 = tn_rand(&r, nh, -1, 1), *got = malloc(nh * 4);
		double *ref = malloc(no * 8), *dref = tn_dbl(d0, nh);
		cl_mem mh = tn_buf(h, nh), mg = tn_buf(g, no), md = tn_buf(d0, nh), mo;
		char what[64];

		th_poison(got, no);
		mo = tn_buf(got, no);
		snprintf(what, sizeof(what), "swiglu N=%zu F=%zu", N, F);
		/* fused layout: gate = h, up = h + F, stride 2F */
		clp_ref_swiglu_forward(ref, h, h + F, ld, N, F);
		clp_ref_swiglu_backward(dref, dref + F, g, h, h + F, ld, N, F);
		CHECK_OK(clp_nn_swiglu_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mh, 0),
					       clp_buf_at(mh, F), ld, N, F));
		CHECK_OK(clp_nn_swiglu_backward(ctx, clp_buf_at(md, 0), clp_buf_at(md, F),
						clp_buf_at(mg, 0), clp_buf_at(mh, 0),
						clp_buf_at(mh, F), ld, N, F));
		tn_get(mo, 0, got, no);
		th_close(what, got, ref, no, 1e-6, 1e-5);
		tn_get(md, 0, got, nh);
		th_close(what, got, dref, nh, 1e-5, 1e-5);
		if (nh <= 2000) {
			struct fd_act f = {h, h + F, N, ld, F, 2, g, ref};
			double *gr = tn_dbl(NULL, nh), e;

			clp_ref_swiglu_backward(gr, gr + F, g, h, h + F, ld, N, F);
			e = tn_fd(h, nh, 1, gr, act_loss, &f, 1e-3f);
			CHECK(e < TN_FD_TOL, "%s: vs finite differences %g", what, e);
			free(gr);
		}
		CHECK_ERR(clp_nn_swiglu_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mh, 0),
						clp_buf_at(mh, F), F - 1, N, F), CLP_ERR_INVALID,
			  "stride");
		clReleaseMemObject(mh), clReleaseMemObject(mg), clReleaseMemObject(md);
		clReleaseMemObject(mo);
		free(h), free(g), free(d0), free(got), free(ref), free(dref);
	}
}

static void test_residual(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(13);
	const size_t n = 1001;
	float *a = tn_rand(&r, n, -1, 1), *b = tn_rand(&r, n, -1, 1), *got = malloc(n * 4);
	double *ref = malloc(n * 8);
	cl_mem ma, mb, mo;

	if (!ctx)
		return;
	ma = tn_buf(a, n), mb = tn_buf(b, n), mo = tn_buf(NULL, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = (double)a[i] + b[i];
	CHECK_OK(clp_nn_residual_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(ma, 0),
					 clp_buf_at(mb, 0), n));
	tn_get(mo, 0, got, n);
	th_close("residual forward", got, ref, n, 1e-6, 1e-6);
	/* da += dout, db += dout; then both into one buffer: += 2 dout */
	CHECK_OK(clp_nn_residual_backward(ctx, clp_buf_at(ma, 0), clp_buf_at(mb, 0),
					  clp_buf_at(mo, 0), n));
	tn_get(ma, 0, got, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = (double)a[i] + ((double)a[i] + b[i]);
	th_close("residual backward da", got, ref, n, 1e-6, 1e-6);
	CHECK_OK(clp_cl_write(ctx, ma, 0, n * 4, a));
	CHECK_OK(clp_cl_write(ctx, mb, 0, n * 4, b));
	CHECK_OK(clp_nn_residual_backward(ctx, clp_buf_at(ma, 0), clp_buf_at(ma, 0),
					  clp_buf_at(mb, 0), n));
	tn_get(ma, 0, got, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = (double)a[i] + 2.0 * b[i];
	th_close("residual backward aliased", got, ref, n, 1e-6, 1e-6);
	clReleaseMemObject(ma), clReleaseMemObject(mb), clReleaseMemObject(mo);
	free(a), free(b), free(got), free(ref);
}

static void test_dropout(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(14);
	clp_rng_stream s;

	if (!ctx)
		return;
	CHECK_OK(clp_rng_stream_init(&s, 7, 3, 1, 4, CLP_RNG_DROPOUT));
	for (size_t t = 0; t < NSIZES; t++) {
		size_t n = sizes[t], zeros = 0;
		float p = t % 2 ? 0.1f : 0.5f;
		float *x = tn_rand(&r, n, 0.5f, 1.5f), *d0 = tn_rand(&r, n, -1, 1), *got = malloc(n * 4);
		double *ref = malloc(n * 8), *dref = malloc(n * 8);
		cl_mem mx = tn_buf(x, n), md = tn_buf(d0, n), mo;
		char what[64];

		th_poison(got, n);
		mo = tn_buf(got, n);
		snprintf(what, sizeof(what), "dropout p=%g n=%zu", p, n);
		clp_ref_dropout(ref, x, n, p, &s);
		CHECK_OK(clp_nn_dropout_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mx, 0), n, p, &s));
		tn_get(mo, 0, got, n);
		th_close(what, got, ref, n, 1e-6, 1e-6);
		for (size_t i = 0; i < n; i++)
			zeros += got[i] == 0.0f;
		if (n >= 1000)
			CHECK(fabs((double)zeros / n - p) < 0.05, "%s: %zu of %zu dropped", what,
			      zeros, n);
		/* backward: the same mask, accumulated; the mask gradient is linear, so the
		 * reference is the forward of dout */
		clp_ref_dropout(dref, x, n, p, &s);
		for (size_t i = 0; i < n; i++)
			dref[i] += d0[i];
		CHECK_OK(clp_nn_dropout_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mx, 0), n, p, &s));
		tn_get(md, 0, got, n);
		th_close(what, got, dref, n, 1e-6, 1e-6);
		/* in place, p = 0: a copy */
		CHECK_OK(clp_nn_dropout_forward(ctx, clp_buf_at(mx, 0), clp_buf_at(mx, 0), n, 0.0f, &s));
		tn_get(mx, 0, got, n);
		CHECK(memcmp(got, x, n * 4) == 0, "%s: p = 0 must copy", what);
		clReleaseMemObject(mx), clReleaseMemObject(md), clReleaseMemObject(mo);
		free(x), free(d0), free(got), free(ref), free(dref);
	}
	CHECK_ERR(clp_nn_dropout_forward(ctx, clp_buf_at(NULL, 0), clp_buf_at(NULL, 0), 1, 1.0f, &s),
		  CLP_ERR_INVALID, "probability");
}

TH_MAIN(TH_TEST(test_gelu), TH_TEST(test_swiglu), TH_TEST(test_residual), TH_TEST(test_dropout))
