/* Fused, vocabulary-chunked cross-entropy against the full-logits reference: odd vocabulary
 * sizes split into several chunks (one partial), ignored targets, per-row losses and the mean;
 * the reference backward against finite differences. The same with h, w and bias stored in bf16
 * and fp16 (mixed precision: values 16-bit, losses, lse and gradients fp32) against the reference
 * at the rounded inputs, with the fp32 tolerances: the device reads exactly those values and
 * computes in fp32 as in the fp32 case (a product of a 16-bit and an fp32 or 16-bit value rounds
 * at most once in fp32), so only fp32 accumulation differs; a 16-bit value read wrongly would be
 * off by 2^-8 or 2^-11 relative. NaN in one row of h reaches that row's loss and dh only. */
#include "tests/nn/nn_test.h"
#include "cl/ops.h"

#include <stdint.h>

/* A device buffer of n values of type t from host floats (already rounded to t). */
static cl_mem xt_buf(const float *x, size_t n, clp_dtype t)
{
	uint16_t *w;
	cl_mem m = NULL;

	if (t == CLP_F32)
		return tn_buf(x, n);
	w = malloc((n ? n : 1) * 2);
	clp_dtype_pack(t, w, x, n);
	CHECK_OK(clp_cl_buffer(th_ctx(), (n ? n : 1) * 2, "test16", &m));
	if (m && n)
		CHECK_OK(clp_cl_write(th_ctx(), m, 0, n * 2, w));
	free(w);
	return m;
}

static void round_to(float *x, size_t n, clp_dtype t)
{
	for (size_t i = 0; x && i < n; i++)
		x[i] = clp_dtype_round(t, x[i]);
}

struct fd_xent {
	float *h, *w, *bias;
	const int32_t *tg;
	size_t N, C, V;
	float scale;
	double *losses;
};

static double xent_loss(void *ud)
{
	struct fd_xent *f = ud;
	double s = 0;

	clp_ref_xent_forward(f->losses, NULL, f->h, f->w, f->bias, f->tg, f->N, f->C, f->V);
	for (size_t n = 0; n < f->N; n++)
		s += f->losses[n];
	return s * f->scale;
}

static void check_xent_t(size_t N, size_t C, size_t V, size_t vchunk, int fd, int with_bias,
			 th_rng *r, clp_dtype t)
{
	clp_cl_ctx *ctx = th_ctx();
	int32_t *tg = malloc(N * 4);
	float *h = tn_rand(r, N * C, -1, 1), *w = tn_rand(r, V * C, -1, 1);
	float *bias = with_bias ? tn_rand(r, V, -2, 2) : NULL, *db0 = tn_rand(r, V, -1, 1);
	double *dbias = tn_dbl(db0, V);
	cl_mem mb, mdb = tn_buf(db0, V);
	clp_buf bb, dbb = clp_buf_at(with_bias ? mdb : NULL, 0);
	float *dh0 = tn_rand(r, N * C, -1, 1), *dw0 = tn_rand(r, V * C, -1, 1);
	float *got = malloc((N * C > V * C ? N * C : V * C) * 4), loss;
	double *losses = malloc(N * 8), *lse = malloc(N * 8), *dh = tn_dbl(dh0, N * C);
	double *dw = tn_dbl(dw0, V * C), mean = 0;
	size_t valid = 0;
	cl_mem mh, mw, mt, ml, mz, mdh, mdw, mm;
	char what[96];

	for (size_t n = 0; n < N; n++) {
		tg[n] = n % 3 == 1 ? -1 : (int32_t)(th_next(r) % V);
	}
	if (N > 2)
		tg[2] = (int32_t)V - 1; /* the last column of the last, partial chunk */
	for (size_t n = 0; n < N; n++)
		valid += tg[n] >= 0;
	round_to(h, N * C, t); /* what the device reads */
	round_to(w, V * C, t);
	round_to(bias, V, t);
	mb = with_bias ? xt_buf(bias, V, t) : NULL;
	bb = clp_buf_typed(mb, 0, t);
	mh = xt_buf(h, N * C, t), mw = xt_buf(w, V * C, t), mt = tn_buf(tg, N);
	mdh = tn_buf(dh0, N * C), mdw = tn_buf(dw0, V * C), mz = tn_buf(NULL, N);
	mm = tn_buf(NULL, 1);
	th_poison(got, N);
	ml = tn_buf(got, N);
	snprintf(what, sizeof(what), "xent %s N=%zu C=%zu V=%zu chunk=%zu%s", clp_dtype_name(t), N,
		 C, V, vchunk, with_bias ? " bias" : "");
	clp_ref_xent_forward(losses, lse, h, w, bias, tg, N, C, V);
	clp_ref_xent_backward(dh, dw, with_bias ? dbias : NULL, h, w, bias, tg, 1.0f / (float)valid,
			      N, C, V);
	for (size_t n = 0; n < N; n++)
		mean += losses[n] / (double)valid;
	CHECK_OK(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz, 0),
				     clp_buf_typed(mh, 0, t), clp_buf_typed(mw, 0, t), bb,
				     clp_buf_at(mt, 0), N, C, V, vchunk));
	CHECK_OK(clp_nn_xent_mean(ctx, clp_buf_at(mm, 0), clp_buf_at(ml, 0), N, 1.0f / (float)valid));
	CHECK_OK(clp_nn_xent_backward(ctx, clp_buf_at(mdh, 0), clp_buf_at(mdw, 0), dbb,
				      clp_buf_typed(mh, 0, t), clp_buf_typed(mw, 0, t), bb,
				      clp_buf_at(mt, 0), clp_buf_at(mz, 0), 1.0f / (float)valid, N, C,
				      V, vchunk));
	tn_get(ml, 0, got, N);
	th_close(what, got, losses, N, 1e-5, 1e-5);
	tn_get(mz, 0, got, N);
	for (size_t n = 0; n < N; n++)
		if (tg[n] < 0)
			got[n] = (float)lse[n]; /* lse of ignored rows is unspecified */
	th_close(what, got, lse, N, 1e-5, 1e-5);
	tn_get(mm, 0, &loss, 1);
	th_close(what, &loss, &mean, 1, 1e-5, 1e-5);
	tn_get(mdh, 0, got, N * C);
	th_close(what, got, dh, N * C, 1e-5, 1e-4);
	tn_get(mdw, 0, got, V * C);
	th_close(what, got, dw, V * C, 1e-5, 1e-4);
	tn_get(mdb, 0, got, V);
	if (with_bias)
		th_close(what, got, dbias, V, 1e-5, 1e-4);
	else
		for (size_t j = 0; j < V; j++)
			CHECK(got[j] == db0[j], "%s: dbias written without a bias", what);
	/* a frozen head (dw mem NULL): the same dh and dbias, bit for bit */
	{
		cl_mem mdh2 = tn_buf(dh0, N * C), mdb2 = tn_buf(db0, V);
		size_t most = N * C > V ? N * C : V;
		float *a = malloc(most * 4), *b2 = malloc(most * 4);

		CHECK_OK(clp_nn_xent_backward(ctx, clp_buf_at(mdh2, 0), CLP_BUF_NONE,
					      with_bias ? clp_buf_at(mdb2, 0) : CLP_BUF_NONE,
					      clp_buf_typed(mh, 0, t), clp_buf_typed(mw, 0, t), bb,
					      clp_buf_at(mt, 0), clp_buf_at(mz, 0), 1.0f / (float)valid,
					      N, C, V, vchunk));
		tn_get(mdh, 0, a, N * C);
		tn_get(mdh2, 0, b2, N * C);
		CHECK(!memcmp(a, b2, N * C * 4), "%s: dh differs without dw", what);
		tn_get(mdb, 0, a, V);
		tn_get(mdb2, 0, b2, V);
		CHECK(!with_bias || !memcmp(a, b2, V * 4), "%s: dbias differs without dw", what);
		clReleaseMemObject(mdh2), clReleaseMemObject(mdb2);
		free(a), free(b2);
	}
	if (fd) {
		struct fd_xent f = {h, w, bias, tg, N, C, V, 1.0f / (float)valid, losses};
		double *gh = tn_dbl(NULL, N * C), *gw = tn_dbl(NULL, V * C), e;
		double *gb = tn_dbl(NULL, V);

		clp_ref_xent_backward(gh, gw, gb, h, w, bias, tg, 1.0f / (float)valid, N, C, V);
		if (with_bias) {
			e = tn_fd(bias, V, 1, gb, xent_loss, &f, 1e-3f);
			CHECK(e < TN_FD_TOL, "%s: dbias vs finite differences %g", what, e);
		}
		free(gb);
		e = tn_fd(h, N * C, 1, gh, xent_loss, &f, 1e-3f);
		CHECK(e < TN_FD_TOL, "%s: dh vs finite differences %g", what, e);
		e = tn_fd(w, V * C, 1, gw, xent_loss, &f, 1e-3f);
		CHECK(e < TN_FD_TOL, "%s: dw vs finite differences %g", what, e);
		free(gh), free(gw);
	}
	clReleaseMemObject(mh), clReleaseMemObject(mw), clReleaseMemObject(mt);
	clReleaseMemObject(mdh), clReleaseMemObject(mdw), clReleaseMemObject(mz);
	clReleaseMemObject(mm), clReleaseMemObject(ml), clReleaseMemObject(mdb);
	if (mb)
		clReleaseMemObject(mb);
	free(tg), free(h), free(w), free(dh0), free(dw0), free(got), free(losses), free(lse);
	free(dh), free(dw), free(bias), free(db0), free(dbias);
}

static void check_xent(size_t N, size_t C, size_t V, size_t vchunk, int fd, int with_bias,
		       th_rng *r)
{
	check_xent_t(N, C, V, vchunk, fd, with_bias, r, CLP_F32);
}

static void test_xent(void)
{
	th_rng r = th_rng_seed(41);

	if (!th_ctx())
		return;
	check_xent(1, 1, 1, 0, 0, 0, &r);
	check_xent(5, 4, 11, 4, 1, 0, &r);      /* chunks 4 + 4 + 3 */
	check_xent(5, 4, 11, 4, 1, 1, &r);      /* with BERT's decoder bias */
	check_xent(7, 33, 1000, 64, 0, 1, &r);  /* 15 full chunks and one of 40 */
	check_xent(33, 17, 127, 0, 0, 0, &r);   /* automatic chunk */
	check_xent(4, 8, 300, 1000, 0, 1, &r);  /* one chunk wider than V */
}

/* Kept logits (cl/nn_xent.c, CLPIPE_XENT_KEEP_MB): a backward after its forward gives the bits
 * of one that recomputes the logits (keeping off); a backward whose forward was not the last
 * (another h in between) recomputes, so it still matches the reference of its own h. */
static void xent_grads(clp_cl_ctx *ctx, cl_mem mh, cl_mem mh2, cl_mem mw, cl_mem mb, cl_mem mt,
		       size_t N, size_t C, size_t V, float *dh, float *dw)
{
	cl_mem ml = tn_buf(NULL, N), mz = tn_buf(NULL, N), mz2 = tn_buf(NULL, N);
	cl_mem mdh = tn_buf(NULL, N * C), mdw = tn_buf(NULL, V * C);

	CHECK_OK(clp_cl_fill(ctx, clp_buf_at(mdh, 0), 0.0f, N * C));
	CHECK_OK(clp_cl_fill(ctx, clp_buf_at(mdw, 0), 0.0f, V * C));
	CHECK_OK(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz, 0), clp_buf_at(mh, 0),
				     clp_buf_at(mw, 0), clp_buf_at(mb, 0), clp_buf_at(mt, 0), N, C,
				     V, 16));
	if (mh2) /* another forward in between: its logits are the kept ones now */
		CHECK_OK(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz2, 0),
					     clp_buf_at(mh2, 0), clp_buf_at(mw, 0),
					     clp_buf_at(mb, 0), clp_buf_at(mt, 0), N, C, V, 16));
	CHECK_OK(clp_nn_xent_backward(ctx, clp_buf_at(mdh, 0), clp_buf_at(mdw, 0), CLP_BUF_NONE,
				      clp_buf_at(mh, 0), clp_buf_at(mw, 0), clp_buf_at(mb, 0),
				      clp_buf_at(mt, 0), clp_buf_at(mz, 0), 0.25f, N, C, V, 16));
	tn_get(mdh, 0, dh, N * C);
	tn_get(mdw, 0, dw, V * C);
	clReleaseMemObject(ml), clReleaseMemObject(mz), clReleaseMemObject(mz2);
	clReleaseMemObject(mdh), clReleaseMemObject(mdw);
}

static void test_xent_keep(void)
{
	const size_t N = 7, C = 33, V = 50; /* chunks of 16: 16 + 16 + 16 + 2 */
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(43);
	int32_t tg[7] = {3, 49, -1, 0, 17, 33, 48};
	float *h = tn_rand(&r, N * C, -1, 1), *h2 = tn_rand(&r, N * C, -1, 1);
	float *w = tn_rand(&r, V * C, -1, 1), *b = tn_rand(&r, V, -1, 1);
	float *dh = malloc(N * C * 4), *dw = malloc(V * C * 4);
	float *dh0 = malloc(N * C * 4), *dw0 = malloc(V * C * 4);
	double *rdh, *rdw;
	cl_mem mh, mh2, mw, mb, mt;

	if (!ctx)
		return;
	mh = tn_buf(h, N * C), mh2 = tn_buf(h2, N * C), mw = tn_buf(w, V * C), mb = tn_buf(b, V);
	mt = tn_buf(tg, N);
	rdh = tn_dbl(NULL, N * C), rdw = tn_dbl(NULL, V * C);
	clp_ref_xent_backward(rdh, rdw, NULL, h, w, b, tg, 0.25f, N, C, V);
	setenv("CLPIPE_XENT_KEEP_MB", "0", 1);
	xent_grads(ctx, mh, NULL, mw, mb, mt, N, C, V, dh0, dw0);
	setenv("CLPIPE_XENT_KEEP_MB", "64", 1);
	xent_grads(ctx, mh, NULL, mw, mb, mt, N, C, V, dh, dw);
	CHECK(!memcmp(dh, dh0, N * C * 4) && !memcmp(dw, dw0, V * C * 4),
	      "xent keep: kept logits give other gradients than recomputed ones");
	th_close("xent keep: dh", dh, rdh, N * C, 1e-5, 1e-4);
	xent_grads(ctx, mh, mh2, mw, mb, mt, N, C, V, dh, dw);
	th_close("xent keep, another forward between: dh", dh, rdh, N * C, 1e-5, 1e-4);
	th_close("xent keep, another forward between: dw", dw, rdw, V * C, 1e-5, 1e-4);
	unsetenv("CLPIPE_XENT_KEEP_MB");
	clReleaseMemObject(mh), clReleaseMemObject(mh2), clReleaseMemObject(mw);
	clReleaseMemObject(mb), clReleaseMemObject(mt);
	free(h), free(h2), free(w), free(b), free(dh), free(dw), free(dh0), free(dw0);
	free(rdh), free(rdw);
}

static void test_bad_target(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const int32_t tg[3] = {0, 7, -1};
	float h[6] = {1, 2, 3, 4, 5, 6}, w[8] = {1, 0, 0, 1, 1, 1, -1, 0}, got[3];
	cl_mem mh, mw, mt, ml, mz;

	if (!ctx)
		return;
	mh = tn_buf(h, 6), mw = tn_buf(w, 8), mt = tn_buf(tg, 3), ml = tn_buf(NULL, 3);
	mz = tn_buf(NULL, 3);
	CHECK_OK(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz, 0), clp_buf_at(mh, 0),
				     clp_buf_at(mw, 0), CLP_BUF_NONE, clp_buf_at(mt, 0), 3, 2, 4,
				     0));
	tn_get(ml, 0, got, 3);
	CHECK(isfinite(got[0]) && isnan(got[1]) && got[2] == 0.0f, "losses %g %g %g: a target "
	      "outside the vocabulary must give NaN, an ignored one 0", got[0], got[1], got[2]);
	clReleaseMemObject(mh), clReleaseMemObject(mw), clReleaseMemObject(mt);
	clReleaseMemObject(ml), clReleaseMemObject(mz);
}

/* h, w and bias in bf16 and fp16: odd shapes, several chunks, ignored targets, the bias. */
static void test_xent_16bit(void)
{
	th_rng r = th_rng_seed(43);

	if (!th_ctx())
		return;
	for (int t = CLP_BF16; t <= CLP_F16; t++) {
		check_xent_t(1, 1, 1, 0, 0, 0, &r, (clp_dtype)t);
		check_xent_t(5, 4, 11, 4, 0, 1, &r, (clp_dtype)t);
		check_xent_t(7, 33, 1000, 64, 0, 1, &r, (clp_dtype)t);
		check_xent_t(33, 17, 127, 0, 0, 0, &r, (clp_dtype)t);
	}
}

/* A NaN in row 1 of h (every storage type): that row's loss and dh row are NaN, the others
 * finite. Mixed storage types among h, w, bias and a 16-bit gradient are refused by name. */
static void test_xent_nan_types(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t N = 3, C = 5, V = 7;
	const int32_t tg[3] = {2, 6, 0};
	th_rng r = th_rng_seed(44);

	if (!ctx)
		return;
	for (int t = CLP_F32; t <= CLP_F16; t++) {
		float *h = tn_rand(&r, N * C, -1, 1), *w = tn_rand(&r, V * C, -1, 1);
		float got[3 * 5];
		cl_mem mh, mw, mt = tn_buf(tg, N), ml = tn_buf(NULL, N), mz = tn_buf(NULL, N);
		cl_mem mdh = tn_buf(NULL, N * C), mdw = tn_buf(NULL, V * C);

		h[1 * C + 3] = NAN;
		round_to(h, N * C, (clp_dtype)t);
		round_to(w, V * C, (clp_dtype)t);
		mh = xt_buf(h, N * C, (clp_dtype)t), mw = xt_buf(w, V * C, (clp_dtype)t);
		CHECK_OK(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz, 0),
					     clp_buf_typed(mh, 0, (clp_dtype)t),
					     clp_buf_typed(mw, 0, (clp_dtype)t), CLP_BUF_NONE,
					     clp_buf_at(mt, 0), N, C, V, 0));
		CHECK_OK(clp_nn_xent_backward(ctx, clp_buf_at(mdh, 0), clp_buf_at(mdw, 0),
					      CLP_BUF_NONE, clp_buf_typed(mh, 0, (clp_dtype)t),
					      clp_buf_typed(mw, 0, (clp_dtype)t), CLP_BUF_NONE,
					      clp_buf_at(mt, 0), clp_buf_at(mz, 0), 1.0f / 3, N, C,
					      V, 0));
		tn_get(ml, 0, got, N);
		CHECK(isfinite(got[0]) && isnan(got[1]) && isfinite(got[2]), "%s: losses %g %g %g: "
		      "only row 1 (NaN in h) must be NaN", clp_dtype_name((clp_dtype)t), got[0],
		      got[1], got[2]);
		tn_get(mdh, 0, got, N * C);
		for (size_t i = 0; i < N * C; i++)
			CHECK((isnan(got[i]) != 0) == (i / C == 1), "%s: dh[%zu][%zu] = %g",
			      clp_dtype_name((clp_dtype)t), i / C, i % C, got[i]);
		if (t == CLP_BF16) { /* storage rules */
			CHECK_ERR(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz, 0),
						      clp_buf_typed(mh, 0, CLP_BF16),
						      clp_buf_at(mw, 0), CLP_BUF_NONE,
						      clp_buf_at(mt, 0), N, C, V, 0),
				  CLP_ERR_INVALID, "w is fp32 but h is bf16");
			CHECK_ERR(clp_nn_xent_backward(ctx, clp_buf_typed(mdh, 0, CLP_BF16),
						       clp_buf_at(mdw, 0), CLP_BUF_NONE,
						       clp_buf_typed(mh, 0, CLP_BF16),
						       clp_buf_typed(mw, 0, CLP_BF16), CLP_BUF_NONE,
						       clp_buf_at(mt, 0), clp_buf_at(mz, 0), 1.0f, N,
						       C, V, 0),
				  CLP_ERR_INVALID, "dh is bf16");
		}
		clReleaseMemObject(mh), clReleaseMemObject(mw), clReleaseMemObject(mt);
		clReleaseMemObject(ml), clReleaseMemObject(mz), clReleaseMemObject(mdh);
		clReleaseMemObject(mdw);
		free(h), free(w);
	}
}

TH_MAIN(TH_TEST(test_xent), TH_TEST(test_xent_16bit), TH_TEST(test_xent_nan_types),
	TH_TEST(test_bad_target), TH_TEST(test_xent_keep))
