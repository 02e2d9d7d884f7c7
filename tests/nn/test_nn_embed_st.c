/* Embeddings and RoPE with 16-bit value tensors (bf16, fp16; issue 18): the tables and the
 * output of the embedding forward, and the x RoPE rotates forward in place (the 16-bit QKV
 * activations), in the storage type; gradients and the RoPE table in fp32.
 *  - embedding forward: a token row alone, or token + position, is bitwise the rounded
 *    reference (a copy, or one correctly rounded float addition whose double result is exact,
 *    then the same rounding to 16 bits). Token + position + type adds twice in float, so the
 *    fp32 tolerance plus one unit in the last place of the 16-bit format (nn_st.h, ts_check).
 *  - RoPE forward: u c - v s in float against the double reference, rounded: the fp32 test's
 *    tolerance plus one unit; the elements of the row it does not rotate keep their bits.
 *  - the backwards read no activations (gradients only, fp32, tested by test_nn_embed); here
 *    they refuse 16-bit gradients.
 *  - a NaN in a table gives NaN in the rows that read it; an id outside its table a NaN row.
 *  - mixed value types: CLP_ERR_INVALID naming the argument. */
#include "tests/nn/nn_st.h"

static void check_embed(clp_dtype dt, size_t B, size_t T, size_t C, size_t V, int pos, int types,
			th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t n = B * T, nc = n * C, NT = 2;
	int32_t *tok = malloc(n * 4), *typ = malloc(n * 4);
	float *wte = tn_rand(r, V * C, -1, 1), *wpe = tn_rand(r, T * C, -1, 1);
	float *wtt = tn_rand(r, NT * C, -1, 1), *got = malloc(nc * 4);
	double *out = malloc(nc * 8);
	cl_mem mtok, mtyp, mte, mpe, mtt, mo;
	clp_buf none = CLP_BUF_NONE;
	char what[96];

	for (size_t i = 0; i < n; i++) {
		tok[i] = (int32_t)(th_next(r) % V);
		typ[i] = (int32_t)(th_next(r) % NT);
	}
	if (V > 2)
		wte[(size_t)tok[n / 2] * C + C / 2] = NAN; /* every row of that token: NaN there */
	clp_ref_load(dt, wte, V * C);
	clp_ref_load(dt, wpe, T * C);
	clp_ref_load(dt, wtt, NT * C);
	mtok = tn_buf(tok, n), mtyp = tn_buf(typ, n), mte = ts_buf(dt, wte, V * C);
	mpe = ts_buf(dt, wpe, T * C), mtt = ts_buf(dt, wtt, NT * C);
	th_poison(got, nc);
	mo = ts_buf(dt, got, nc);
	snprintf(what, sizeof(what), "embed B=%zu T=%zu C=%zu V=%zu pos=%d types=%d", B, T, C, V,
		 pos, types);
	clp_ref_embed_forward_st(dt, out, tok, types ? typ : NULL, wte, pos ? wpe : NULL, wtt, B, T,
				 C);
	CHECK_OK(clp_nn_embed_forward(ctx, ts_at(mo, dt), clp_buf_at(mtok, 0),
				      types ? clp_buf_at(mtyp, 0) : none, ts_at(mte, dt),
				      pos ? ts_at(mpe, dt) : none, ts_at(mtt, dt), B, T, C, V, NT));
	ts_get(dt, mo, got, nc);
	ts_check(what, dt, got, out, nc, types ? 1e-6 : 0, types ? 1e-6 : 0, types ? 1 : 0);
	/* an id outside the table: a row of NaN, the others as before */
	if (n > 1) {
		int32_t keep = tok[1];

		tok[1] = (int32_t)V;
		CHECK_OK(clp_cl_write(ctx, mtok, 4, 4, &tok[1]));
		tok[1] = keep;
		for (size_t c = 0; c < C; c++)
			out[C + c] = NAN;
		CHECK_OK(clp_nn_embed_forward(ctx, ts_at(mo, dt), clp_buf_at(mtok, 0),
					      types ? clp_buf_at(mtyp, 0) : none, ts_at(mte, dt),
					      pos ? ts_at(mpe, dt) : none, ts_at(mtt, dt), B, T, C,
					      V, NT));
		ts_get(dt, mo, got, nc);
		ts_check(what, dt, got, out, nc, types ? 1e-6 : 0, types ? 1e-6 : 0, types ? 1 : 0);
	}
	clReleaseMemObject(mtok), clReleaseMemObject(mtyp), clReleaseMemObject(mte);
	clReleaseMemObject(mpe), clReleaseMemObject(mtt), clReleaseMemObject(mo);
	free(tok), free(typ), free(wte), free(wpe), free(wtt), free(got), free(out);
}

static void test_embed_st(void)
{
	th_rng r = th_rng_seed(121);

	if (!th_ctx())
		return;
	for (int t = 0; t < TS_NTYPES; t++) {
		check_embed(ts_types[t], 1, 1, 1, 2, 1, 0, &r);
		check_embed(ts_types[t], 2, 7, 33, 11, 1, 0, &r);   /* GPT-2: learned positions */
		check_embed(ts_types[t], 3, 5, 70, 9, 0, 0, &r);    /* LLaMA: tokens only */
		check_embed(ts_types[t], 2, 9, 130, 50, 1, 1, &r);  /* BERT: positions and types */
		check_embed(ts_types[t], 1, 127, 45, 300, 1, 0, &r);
	}
}

static void check_rope(clp_dtype dt, size_t B, size_t T, size_t nh, size_t hd, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	/* a fused QKV row: Q (nh hd), K (nh hd), V (nh hd) and 3 more; Q and K are rotated */
	size_t C = nh * hd, ld = 3 * C + 3, n = B * T * ld;
	float *x = tn_rand(r, n, -2, 2), *tab = malloc(T * hd * 4), *got = malloc(n * 4);
	double *ref;
	cl_mem mx, mt;
	char what[64];

	if (n > 20)
		x[ld + 1] = NAN; /* row 1, Q head 0: its pair partner turns NaN too */
	clp_ref_load(dt, x, n);
	ref = tn_dbl(x, n);
	clp_nn_rope_table(tab, T, hd, 10000.0f);
	mx = ts_buf(dt, x, n), mt = tn_buf(tab, T * hd);
	snprintf(what, sizeof(what), "rope B=%zu T=%zu nh=%zu hd=%zu", B, T, nh, hd);
	clp_ref_rope_st(dt, ref, x, ld, tab, B, T, nh, hd, 1);
	clp_ref_rope_st(dt, ref + C, x + C, ld, tab, B, T, nh, hd, 1);
	CHECK_OK(clp_nn_rope_forward(ctx, ts_at(mx, dt), ld, clp_buf_at(mt, 0), B, T, nh, hd));
	CHECK_OK(clp_nn_rope_forward(ctx, clp_buf_plus(ts_at(mx, dt), C), ld, clp_buf_at(mt, 0), B,
				     T, nh, hd));
	ts_get(dt, mx, got, n);
	ts_check(what, dt, got, ref, n, 1e-6, 1e-6, 1);
	for (size_t i = 0; i < B * T; i++)
		CHECK(memcmp(got + i * ld + 2 * C, x + i * ld + 2 * C, (C + 3) * 4) == 0,
		      "%s (%s): row %zu beyond Q and K changed", what, clp_dtype_name(dt), i);
	clReleaseMemObject(mx), clReleaseMemObject(mt);
	free(x), free(tab), free(got), free(ref);
}

static void test_rope_st(void)
{
	static const size_t cfg[][4] = {{1, 1, 1, 2}, {2, 7, 3, 8}, {1, 33, 2, 14}, {1, 127, 1, 64}};
	th_rng r = th_rng_seed(122);

	if (!th_ctx())
		return;
	for (int t = 0; t < TS_NTYPES; t++)
		for (size_t c = 0; c < 4; c++)
			check_rope(ts_types[t], cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], &r);
}

/* Mixed value types, 16-bit gradients or a 16-bit RoPE table are refused before anything
 * runs, naming the argument. */
static void test_storage_errors(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const int32_t ids[4] = {0, 1, 1, 0};
	clp_nn_index *idx = NULL;
	cl_mem m, mi;
	clp_buf f, h, bf, none = CLP_BUF_NONE;

	if (!ctx)
		return;
	m = tn_buf(NULL, 256), mi = tn_buf(ids, 4);
	f = clp_buf_at(m, 0), h = clp_buf_typed(m, 0, CLP_F16), bf = clp_buf_typed(m, 0, CLP_BF16);
	CHECK_ERR(clp_nn_embed_forward(ctx, bf, clp_buf_at(mi, 0), none, bf, h, none, 1, 4, 8, 2,
				       0), CLP_ERR_INVALID, "embed_forward", "wpe is fp16");
	CHECK_ERR(clp_nn_embed_forward(ctx, h, clp_buf_at(mi, 0), none, f, none, none, 1, 4, 8, 2,
				       0), CLP_ERR_INVALID, "wte is fp32");
	CHECK_ERR(clp_nn_embed_forward(ctx, h, clp_buf_at(mi, 0), clp_buf_at(mi, 0), h, none, bf, 1,
				       4, 8, 2, 2), CLP_ERR_INVALID, "wtt is bf16");
	CHECK_OK(clp_nn_index_build(ctx, &idx, ids, 4, 2, "tokens"));
	CHECK_ERR(clp_nn_embed_backward(ctx, bf, none, none, f, idx, NULL, 1, 4, 8), CLP_ERR_INVALID,
		  "embed_backward", "dwte is bf16");
	CHECK_ERR(clp_nn_embed_backward(ctx, f, f, none, h, idx, NULL, 1, 4, 8), CLP_ERR_INVALID,
		  "dout is fp16");
	CHECK_ERR(clp_nn_rope_forward(ctx, bf, 8, h, 1, 2, 1, 8), CLP_ERR_INVALID, "rope_forward",
		  "tab is fp16");
	CHECK_ERR(clp_nn_rope_backward(ctx, bf, 8, f, 1, 2, 1, 8), CLP_ERR_INVALID, "rope_backward",
		  "dx is bf16");
	CHECK_OK(clp_cl_finish(ctx));
	clp_nn_index_free(idx);
	clReleaseMemObject(m), clReleaseMemObject(mi);
}

TH_MAIN(TH_TEST(test_embed_st), TH_TEST(test_rope_st), TH_TEST(test_storage_errors))
