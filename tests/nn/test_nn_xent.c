/* Fused, vocabulary-chunked cross-entropy against the full-logits reference: odd vocabulary
 * sizes split into several chunks (one partial), ignored targets, per-row losses and the mean;
 * the reference backward against finite differences. */
#include "tests/nn/nn_test.h"

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

static void check_xent(size_t N, size_t C, size_t V, size_t vchunk, int fd, int with_bias,
		       th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	int32_t *tg = malloc(N * 4);
	float *h = tn_rand(r, N * C, -1, 1), *w = tn_rand(r, V * C, -1, 1);
	float *bias = with_bias ? tn_rand(r, V, -2, 2) : NULL, *db0 = tn_rand(r, V, -1, 1);
	double *dbias = tn_dbl(db0, V);
	cl_mem mb = with_bias ? tn_buf(bias, V) : NULL, mdb = tn_buf(db0, V);
	clp_buf bb = clp_buf_at(mb, 0), dbb = clp_buf_at(with_bias ? mdb : NULL, 0);
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
	mh = tn_buf(h, N * C), mw = tn_buf(w, V * C), mt = tn_buf(tg, N);
	mdh = tn_buf(dh0, N * C), mdw = tn_buf(dw0, V * C), mz = tn_buf(NULL, N);
	mm = tn_buf(NULL, 1);
	th_poison(got, N);
	ml = tn_buf(got, N);
	snprintf(what, sizeof(what), "xent N=%zu C=%zu V=%zu chunk=%zu%s", N, C, V, vchunk,
		 with_bias ? " bias" : "");
	clp_ref_xent_forward(losses, lse, h, w, bias, tg, N, C, V);
	clp_ref_xent_backward(dh, dw, with_bias ? dbias : NULL, h, w, bias, tg, 1.0f / (float)valid,
			      N, C, V);
	for (size_t n = 0; n < N; n++)
		mean += losses[n] / (double)valid;
	CHECK_OK(clp_nn_xent_forward(ctx, clp_buf_at(ml, 0), clp_buf_at(mz, 0), clp_buf_at(mh, 0),
				     clp_buf_at(mw, 0), bb, clp_buf_at(mt, 0), N, C, V, vchunk));
	CHECK_OK(clp_nn_xent_mean(ctx, clp_buf_at(mm, 0), clp_buf_at(ml, 0), N, 1.0f / (float)valid));
	CHECK_OK(clp_nn_xent_backward(ctx, clp_buf_at(mdh, 0), clp_buf_at(mdw, 0), dbb,
				      clp_buf_at(mh, 0), clp_buf_at(mw, 0), bb, clp_buf_at(mt, 0),
				      clp_buf_at(mz, 0), 1.0f / (float)valid, N, C, V, vchunk));
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

TH_MAIN(TH_TEST(test_xent), TH_TEST(test_bad_target))
