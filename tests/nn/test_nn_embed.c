/* Embeddings (token, position, type) and RoPE against the references; gradients bitwise
 * reproducible; the RoPE table against the formula; reference backwards against finite
 * differences. */
#include "tests/nn/nn_test.h"

struct fd_emb {
	int32_t *tok, *typ;
	float *wte, *wpe, *wtt, *x, *tab;
	const float *g;
	size_t B, T, C, nh, hd, ld;
	double *out;
};

static double emb_loss(void *ud)
{
	struct fd_emb *f = ud;

	clp_ref_embed_forward(f->out, f->tok, f->typ, f->wte, f->wpe, f->wtt, f->B, f->T, f->C);
	return tn_dot(f->g, f->out, f->B * f->T * f->C);
}

static double rope_loss(void *ud)
{
	struct fd_emb *f = ud;
	size_t n = f->B * f->T * f->ld;

	for (size_t i = 0; i < n; i++)
		f->out[i] = 0;
	clp_ref_rope(f->out, f->x, f->ld, f->tab, f->B, f->T, f->nh, f->hd, 1);
	return tn_dot(f->g, f->out, n);
}

/* the backward's absolute tolerance: sums of ~1000 terms of [-1, 1) in float need more */
static double bwd_atol = 1e-5;

static void check_embed(size_t B, size_t T, size_t C, size_t V, int pos, int types, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t n = B * T, nc = n * C, NT = 2;
	int32_t *tok = malloc(n * 4), *typ = malloc(n * 4);
	float *wte = tn_rand(r, V * C, -1, 1), *wpe = tn_rand(r, T * C, -1, 1);
	float *wtt = tn_rand(r, NT * C, -1, 1), *g = tn_rand(r, nc, -1, 1);
	float *d0 = tn_rand(r, V * C, -1, 1), *p0 = tn_rand(r, T * C, -1, 1);
	float *t0 = tn_rand(r, NT * C, -1, 1), *got = malloc((nc > V * C ? nc : V * C) * 4);
	double *out = malloc(nc * 8), *dte = tn_dbl(d0, V * C), *dpe = tn_dbl(p0, T * C);
	double *dtt = tn_dbl(t0, NT * C);
	clp_nn_index *ti = NULL, *yi = NULL;
	cl_mem mtok, mtyp, mte, mpe, mtt, mg, mdte, mdpe, mdtt, mo;
	clp_buf none = CLP_BUF_NONE;
	char what[96];

	/* few distinct ids, so ids repeat; at least one id unused */
	for (size_t i = 0; i < n; i++) {
		tok[i] = (int32_t)(th_next(r) % (V > 1 ? V - 1 : 1));
		typ[i] = (int32_t)(th_next(r) % NT);
	}
	mtok = tn_buf(tok, n), mtyp = tn_buf(typ, n), mte = tn_buf(wte, V * C);
	mpe = tn_buf(wpe, T * C), mtt = tn_buf(wtt, NT * C), mg = tn_buf(g, nc);
	mdte = tn_buf(d0, V * C), mdpe = tn_buf(p0, T * C), mdtt = tn_buf(t0, NT * C);
	th_poison(got, nc);
	mo = tn_buf(got, nc);
	snprintf(what, sizeof(what), "embed B=%zu T=%zu C=%zu V=%zu pos=%d types=%d", B, T, C, V,
		 pos, types);
	clp_ref_embed_forward(out, tok, types ? typ : NULL, wte, pos ? wpe : NULL, wtt, B, T, C);
	clp_ref_embed_backward(dte, pos ? dpe : NULL, dtt, g, tok, types ? typ : NULL, B, T, C);
	CHECK_OK(clp_nn_index_build(ctx, &ti, tok, n, V, "tokens"));
	CHECK_OK(clp_nn_index_build(ctx, &yi, typ, n, NT, "types"));
	CHECK_OK(clp_nn_embed_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mtok, 0),
				      types ? clp_buf_at(mtyp, 0) : none, clp_buf_at(mte, 0),
				      pos ? clp_buf_at(mpe, 0) : none, clp_buf_at(mtt, 0), B, T, C,
				      V, NT));
	tn_get(mo, 0, got, nc);
	th_close(what, got, out, nc, 1e-6, 1e-6);
	uint32_t *first = malloc(V * C * 4);

	for (int rep = 0; rep < 2; rep++) {
		CHECK_OK(clp_cl_write(ctx, mdte, 0, V * C * 4, d0));
		CHECK_OK(clp_nn_embed_backward(ctx, clp_buf_at(mdte, 0),
					       pos ? clp_buf_at(mdpe, 0) : none,
					       clp_buf_at(mdtt, 0), clp_buf_at(mg, 0), ti,
					       types ? yi : NULL, B, T, C));
		tn_get(mdte, 0, got, V * C);
		if (rep == 0) {
			th_close(what, got, dte, V * C, bwd_atol, 1e-5);
			memcpy(first, got, V * C * 4);
			if (pos) {
				tn_get(mdpe, 0, got, T * C);
				th_close(what, got, dpe, T * C, bwd_atol, 1e-5);
			}
			if (types) {
				tn_get(mdtt, 0, got, NT * C);
				th_close(what, got, dtt, NT * C, bwd_atol, 1e-5);
			}
		} else {
			CHECK(memcmp(first, got, V * C * 4) == 0, "%s: token gradient not bitwise "
			      "reproducible", what);
		}
	}
	free(first);
	if (nc <= 300) {
		struct fd_emb f = {tok, types ? typ : NULL, wte, pos ? wpe : NULL, wtt, NULL, NULL,
				   g, B, T, C, 0, 0, 0, out};
		double *gr = tn_dbl(NULL, V * C), e;

		clp_ref_embed_backward(gr, NULL, gr, g, tok, NULL, B, T, C);
		e = tn_fd(wte, V * C, 1, gr, emb_loss, &f, 1e-3f);
		CHECK(e < TN_FD_TOL, "%s: dwte vs finite differences %g", what, e);
		free(gr);
	}
	clp_nn_index_free(ti);
	clp_nn_index_free(yi);
	clReleaseMemObject(mtok), clReleaseMemObject(mtyp), clReleaseMemObject(mte);
	clReleaseMemObject(mpe), clReleaseMemObject(mtt), clReleaseMemObject(mg);
	clReleaseMemObject(mdte), clReleaseMemObject(mdpe), clReleaseMemObject(mdtt);
	clReleaseMemObject(mo);
	free(tok), free(typ), free(wte), free(wpe), free(wtt), free(g), free(d0), free(p0);
	free(t0), free(got), free(out), free(dte), free(dpe), free(dtt);
}

static void test_embed(void)
{
	th_rng r = th_rng_seed(21);

	if (!th_ctx())
		return;
	check_embed(1, 1, 1, 2, 1, 0, &r);
	check_embed(2, 7, 33, 11, 1, 0, &r);  /* GPT-2: learned positions */
	check_embed(3, 5, 70, 9, 0, 0, &r);   /* LLaMA: tokens only */
	check_embed(2, 9, 130, 50, 1, 1, &r); /* BERT: positions and token types */
	check_embed(4, 33, 64, 1000, 1, 0, &r);
	/* ids occurring ~1200 times a batch (two tokens, two token types): three launches of 512
	 * occurrences carrying the running sums; C = 127, a full strip and one of 63 columns,
	 * whose 63 x 1201 loop iterations in one launch llvmpipe ends silently at 65535 */
	bwd_atol = 1e-4;
	check_embed(4, 600, 127, 3, 1, 1, &r);
	bwd_atol = 1e-5;
}

static void test_index_errors(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const int32_t bad[3] = {0, 1, 5}, neg[2] = {1, -1};
	clp_nn_index *idx = NULL;
	cl_mem m;

	if (!ctx)
		return;
	CHECK_ERR(clp_nn_index_build(ctx, &idx, bad, 3, 5, "batch tokens"), CLP_ERR_INVALID,
		  "batch tokens[2] = 5", "[0, 5)");
	CHECK_ERR(clp_nn_index_build(ctx, &idx, neg, 2, 5, "types"), CLP_ERR_INVALID, "types[1]");
	CHECK_OK(clp_nn_index_build(ctx, &idx, bad, 2, 5, "tokens"));
	CHECK_ERR(clp_nn_embed_backward(ctx, clp_buf_at(NULL, 0), clp_buf_at(NULL, 0),
					clp_buf_at(NULL, 0), clp_buf_at(NULL, 0), idx, NULL, 1, 3, 4),
		  CLP_ERR_INVALID, "2 positions", "3");
	clp_nn_index_free(idx);
	/* an id the forward cannot look up gives NaN, not a crash */
	{
		float w[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[12];
		cl_mem mt = tn_buf(bad, 3), mw = tn_buf(w, 8);

		m = tn_buf(NULL, 12);
		CHECK_OK(clp_nn_embed_forward(ctx, clp_buf_at(m, 0), clp_buf_at(mt, 0),
					      clp_buf_at(NULL, 0), clp_buf_at(mw, 0),
					      clp_buf_at(NULL, 0), clp_buf_at(NULL, 0), 1, 3, 4, 2, 0));
		tn_get(m, 0, got, 12);
		CHECK(got[0] == 1 && got[4] == 5 && isnan(got[8]), "out-of-range id: got %g %g %g",
		      got[0], got[4], got[8]);
		clReleaseMemObject(mt), clReleaseMemObject(mw), clReleaseMemObject(m);
	}
}

static void test_rope(void)
{
	static const size_t cfg[][4] = {{1, 1, 1, 2}, {2, 7, 3, 8}, {1, 33, 2, 12}, {2, 5, 4, 64}};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(22);

	if (!ctx)
		return;
	{
		/* HF LLaMA: inv_freq = 1 / theta^(2j/d) in fp32, angle = t * inv_freq */
		float tab[4 * 8 * 2];

		clp_nn_rope_table(tab, 4, 16, 10000.0f);
		CHECK(tab[0] == 1.0f && tab[1] == 0.0f, "position 0 must be the identity");
		CHECK(fabs(tab[3 * 16 + 2 * 1] - cos(3.0 / pow(10000.0, 2.0 / 16))) < 1e-6 &&
		      fabs(tab[3 * 16 + 2 * 7 + 1] - sin(3.0 / pow(10000.0, 14.0 / 16))) < 1e-6,
		      "rope table entries");
	}
	for (size_t c = 0; c < 4; c++) {
		size_t B = cfg[c][0], T = cfg[c][1], nh = cfg[c][2], hd = cfg[c][3];
		size_t ld = nh * hd + 3, n = B * T * ld; /* a wider row: the other heads of QKV */
		float *x = tn_rand(&r, n, -2, 2), *tab = malloc(T * hd * 4), *got = malloc(n * 4);
		double *ref = tn_dbl(x, n);
		cl_mem mx = tn_buf(x, n), mt;
		char what[64];

		clp_nn_rope_table(tab, T, hd, 500000.0f);
		mt = tn_buf(tab, T * hd);
		snprintf(what, sizeof(what), "rope B=%zu T=%zu nh=%zu hd=%zu", B, T, nh, hd);
		clp_ref_rope(ref, x, ld, tab, B, T, nh, hd, 1);
		CHECK_OK(clp_nn_rope_forward(ctx, clp_buf_at(mx, 0), ld, clp_buf_at(mt, 0), B, T, nh,
					     hd));
		tn_get(mx, 0, got, n);
		th_close(what, got, ref, n, 1e-6, 1e-6);
		/* backward is the transpose: applied to the output it gives the input back */
		CHECK_OK(clp_nn_rope_backward(ctx, clp_buf_at(mx, 0), ld, clp_buf_at(mt, 0), B, T,
					      nh, hd));
		tn_get(mx, 0, got, n);
		for (size_t i = 0; i < n; i++)
			ref[i] = x[i];
		th_close(what, got, ref, n, 1e-6, 1e-6);
		if (n <= 300) {
			float *g = tn_rand(&r, n, -1, 1);
			double *gr = tn_dbl(NULL, n), e;
			struct fd_emb f = {NULL, NULL, NULL, NULL, NULL, x, tab, g, B, T, 0, nh, hd, ld,
					   ref};

			clp_ref_rope(gr, g, ld, tab, B, T, nh, hd, -1);
			e = tn_fd(x, n, 1, gr, rope_loss, &f, 1e-3f);
			CHECK(e < TN_FD_TOL, "%s: backward vs finite differences %g", what, e);
			free(g), free(gr);
		}
		clReleaseMemObject(mx), clReleaseMemObject(mt);
		free(x), free(tab), free(got), free(ref);
	}
	CHECK_ERR(clp_nn_rope_forward(ctx, clp_buf_at(NULL, 0), 9, clp_buf_at(NULL, 0), 1, 1, 1, 9),
		  CLP_ERR_INVALID, "even");
}

TH_MAIN(TH_TEST(test_embed), TH_TEST(test_index_errors), TH_TEST(test_rope))
