/* The bias in the GEMM's store (clp_cl_gemm_bias, kernels/gemm_packed.cl's epilogue): C =
 * alpha op(A) op(B) + beta C + bias is bitwise the product (clp_cl_gemm) then a separate
 * clp_nn_bias_forward, on every backend (packed and direct add the bias in their store, *fused
 * = 1; the others, and a 16-bit C computed through scratch, leave it to the caller, *fused = 0),
 * for fp32, bf16 and fp16 storage, both transposes, odd sizes (1, 7, 33, 127: not multiples of
 * the register tile), beta 0 over NaN and beta != 0, K in several blocks and chunks (k = 1000:
 * the bias added once, after the last), and a NaN in the bias reaching exactly its column. fp32
 * is also checked against the double reference. The pair itself is tested by test_cl_gemm and
 * test_nn_norm.
 * And with GELU (clp_cl_gemm_bias_gelu, the MLP up projection's store): fc and act bitwise the
 * product then clp_nn_bias_gelu_forward, both kinds, every storage, n a multiple of 8 (in the
 * store where clp_nn_gelu_store_ok) or not (left to the caller), edge tiles (n = 200: not a
 * multiple of the strip), NaN in the bias reaching act's column too. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/gemm.h"
#include "cl/nn.h"
#include "cl/ref/ref.h"
#include "tests/harness.h"

struct shape {
	size_t m, n, k;
};

static void put(clp_cl_ctx *ctx, cl_mem m, clp_dtype t, float *x, size_t n)
{
	uint16_t *w = malloc(n * 2 + 2);

	for (size_t i = 0; i < n; i++) /* what the device holds */
		x[i] = clp_dtype_round(t, x[i]);
	if (t == CLP_F32) {
		CHECK_OK(clp_cl_write(ctx, m, 0, n * 4, x));
	} else {
		clp_dtype_pack(t, w, x, n);
		CHECK_OK(clp_cl_write(ctx, m, 0, n * 2, w));
	}
	free(w);
}

/* C's words (n elements of type t) as bytes: 4 or 2 per element. */
static void get(clp_cl_ctx *ctx, cl_mem m, clp_dtype t, unsigned char *x, size_t n)
{
	CHECK_OK(clp_cl_read(ctx, m, 0, n * clp_dtype_size(t), x));
}

static float elem(const unsigned char *x, clp_dtype t, size_t i)
{
	float f;
	uint16_t w;

	if (t == CLP_F32) {
		memcpy(&f, x + i * 4, 4);
		return f;
	}
	memcpy(&w, x + i * 2, 2);
	clp_dtype_unpack(t, &f, &w, 1);
	return f;
}

static void one(clp_cl_ctx *ctx, const char *be, clp_dtype t, int ta, int tb, struct shape s,
		float alpha, float beta, int nan_col, th_rng *r)
{
	size_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n, boff = 3;
	size_t na = s.m * s.k, nb = s.k * s.n, nc = s.m * s.n, es = clp_dtype_size(t);
	float *a = malloc(na * 4 + 4), *b = malloc(nb * 4 + 4), *c = malloc(nc * 4 + 4);
	float *bias = malloc((boff + s.n) * 4 + 4);
	unsigned char *g1 = malloc(nc * 4 + 4), *g2 = malloc(nc * 4 + 4);
	double *ref = malloc(nc * sizeof(double) + 8);
	cl_mem A = NULL, B = NULL, C1 = NULL, C2 = NULL, D = NULL;
	char what[160];
	int fused = -1, packed;

	snprintf(what, sizeof(what), "%s %s %c%c %zux%zux%zu alpha=%g beta=%g%s", be,
		 clp_dtype_name(t), ta ? 'T' : 'N', tb ? 'T' : 'N', s.m, s.n, s.k, alpha, beta,
		 nan_col >= 0 ? " NaN bias" : "");
	th_fill_uniform(r, a, na, -1, 1);
	th_fill_uniform(r, b, nb, -1, 1);
	th_fill_uniform(r, bias, boff + s.n, -1, 1);
	if (nan_col >= 0)
		bias[boff + (size_t)nan_col] = NAN;
	if (beta == 0.0f)
		th_poison(c, nc); /* beta = 0 must not read C */
	else
		th_fill_uniform(r, c, nc, -1, 1);
	CHECK_OK(clp_cl_buffer(ctx, na * es + 4, "A", &A));
	CHECK_OK(clp_cl_buffer(ctx, nb * es + 4, "B", &B));
	CHECK_OK(clp_cl_buffer(ctx, nc * es + 4, "C pair", &C1));
	CHECK_OK(clp_cl_buffer(ctx, nc * es + 4, "C fused", &C2));
	CHECK_OK(clp_cl_buffer(ctx, (boff + s.n) * es + 4, "bias", &D));
	if (!A || !B || !C1 || !C2 || !D)
		goto out;
	put(ctx, A, t, a, na);
	put(ctx, B, t, b, nb);
	put(ctx, C1, t, c, nc);
	put(ctx, C2, t, c, nc);
	put(ctx, D, t, bias, boff + s.n);
	CHECK_OK(clp_cl_gemm(ctx, (clp_trans)ta, (clp_trans)tb, s.m, s.n, s.k, alpha,
			     clp_buf_typed(A, 0, t), lda, clp_buf_typed(B, 0, t), ldb, beta,
			     clp_buf_typed(C1, 0, t), s.n));
	CHECK_OK(clp_nn_bias_forward(ctx, clp_buf_typed(C1, 0, t), clp_buf_typed(D, boff, t), s.m,
				     s.n));
	CHECK_OK(clp_cl_gemm_bias(ctx, (clp_trans)ta, (clp_trans)tb, s.m, s.n, s.k, alpha,
				  clp_buf_typed(A, 0, t), lda, clp_buf_typed(B, 0, t), ldb, beta,
				  clp_buf_typed(C2, 0, t), s.n, clp_buf_typed(D, boff, t), &fused));
	if (fused == 0)
		CHECK_OK(clp_nn_bias_forward(ctx, clp_buf_typed(C2, 0, t), clp_buf_typed(D, boff, t),
					     s.m, s.n));
	/* packed: fp32 always in the store, a 16-bit C when one K block computes it (k small);
	 * direct: always (k within one K chunk here); tiled and CLBlast never */
	packed = strcmp(be, "packed") == 0;
	if (strcmp(be, "direct") == 0)
		CHECK(fused == 1, "%s: fused = %d: the bias was not in the store", what, fused);
	else if (!packed)
		CHECK(fused == 0, "%s: fused = %d on a backend without the epilogue", what, fused);
	else if (t == CLP_F32 || s.k <= 127)
		CHECK(fused == 1, "%s: fused = %d: the bias was not in the store", what, fused);
	get(ctx, C1, t, g1, nc);
	get(ctx, C2, t, g2, nc);
	for (size_t i = 0; i < nc; i++) {
		float x1 = elem(g1, t, i), x2 = elem(g2, t, i);
		int col = (int)(i % s.n);

		if (memcmp(g1 + i * es, g2 + i * es, es) != 0 && !(isnan(x1) && isnan(x2))) {
			CHECK(0, "%s: C[%zu][%zu] = %.9g, the pair gives %.9g (not bitwise)", what,
			      i / s.n, i % s.n, x2, x1);
			break;
		}
		if ((isnan(x2) != 0) != (col == nan_col)) {
			CHECK(0, "%s: C[%zu][%d] = %g: NaN only in the NaN bias's column", what,
			      i / s.n, col, x2);
			break;
		}
	}
	if (t == CLP_F32 && nan_col < 0) {
		float *cref = malloc(nc * 4 + 4), *got = malloc(nc * 4 + 4);

		for (size_t i = 0; i < nc; i++)
			cref[i] = beta == 0.0f ? 0.0f : c[i];
		clp_ref_gemm(ta, tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, cref, s.n);
		for (size_t i = 0; i < nc; i++) {
			ref[i] = (double)cref[i] + bias[boff + i % s.n];
			got[i] = elem(g2, t, i);
		}
		th_close(what, got, ref, nc, 1e-5 * sqrt((double)s.k + 1),
			 1e-5 * sqrt((double)s.k + 1));
		free(cref);
		free(got);
	}
out:
	if (A)
		clReleaseMemObject(A);
	if (B)
		clReleaseMemObject(B);
	if (C1)
		clReleaseMemObject(C1);
	if (C2)
		clReleaseMemObject(C2);
	if (D)
		clReleaseMemObject(D);
	free(a); free(b); free(c); free(bias); free(g1); free(g2); free(ref);
}

static void one_gelu(clp_cl_ctx *ctx, const char *be, clp_dtype t, int tb, struct shape s,
		     int kind, int nan_col, th_rng *r)
{
	size_t ldb = tb ? s.k : s.n, na = s.m * s.k, nb = s.k * s.n, nc = s.m * s.n;
	size_t es = clp_dtype_size(t);
	float *a = malloc(na * 4 + 4), *b = malloc(nb * 4 + 4), *bias = malloc(s.n * 4 + 4);
	unsigned char *g[4];
	cl_mem A = NULL, B = NULL, D = NULL, M[4] = {NULL, NULL, NULL, NULL};
	char what[160];
	int fused = -1, want;

	snprintf(what, sizeof(what), "%s %s N%c %zux%zux%zu gelu %s%s", be, clp_dtype_name(t),
		 tb ? 'T' : 'N', s.m, s.n, s.k, kind ? "erf" : "tanh",
		 nan_col >= 0 ? " NaN bias" : "");
	for (int i = 0; i < 4; i++)
		g[i] = malloc(nc * 4 + 4);
	th_fill_uniform(r, a, na, -2, 2);
	th_fill_uniform(r, b, nb, -1, 1);
	th_fill_uniform(r, bias, s.n, -3, 3);
	if (nan_col >= 0)
		bias[nan_col] = NAN;
	CHECK_OK(clp_cl_buffer(ctx, na * es + 4, "A", &A));
	CHECK_OK(clp_cl_buffer(ctx, nb * es + 4, "B", &B));
	CHECK_OK(clp_cl_buffer(ctx, s.n * es + 4, "bias", &D));
	for (int i = 0; i < 4; i++)
		CHECK_OK(clp_cl_buffer(ctx, nc * es + 4, "fc/act", &M[i]));
	if (!A || !B || !D || !M[0] || !M[1] || !M[2] || !M[3])
		goto out;
	put(ctx, A, t, a, na);
	put(ctx, B, t, b, nb);
	put(ctx, D, t, bias, s.n);
#define BUF(x) clp_buf_typed((x), 0, t)
	/* the pair: product, then bias + GELU in one elementwise launch */
	CHECK_OK(clp_cl_gemm(ctx, CLP_N, (clp_trans)tb, s.m, s.n, s.k, 1.0f, BUF(A), s.k, BUF(B), ldb,
			     0.0f, BUF(M[0]), s.n));
	CHECK_OK(clp_nn_bias_gelu_forward(ctx, BUF(M[1]), BUF(M[0]), BUF(D), s.m, s.n,
					  (clp_nn_gelu)kind));
	/* in the store where it can be, as engine/model/stage_fwd.c calls it */
	want = strcmp(be, "packed") == 0 && clp_nn_gelu_store_ok(ctx, s.n) &&
	       (t == CLP_F32 || s.k <= 127);
	if (clp_nn_gelu_store_ok(ctx, s.n))
		CHECK_OK(clp_cl_gemm_bias_gelu(ctx, CLP_N, (clp_trans)tb, s.m, s.n, s.k, 1.0f,
					       BUF(A), s.k, BUF(B), ldb, 0.0f, BUF(M[2]), s.n,
					       BUF(D), BUF(M[3]), kind, &fused));
	else /* as engine/model/stage_fwd.c: the product alone */
		CHECK_OK(clp_cl_gemm(ctx, CLP_N, (clp_trans)tb, s.m, s.n, s.k, 1.0f, BUF(A), s.k,
				     BUF(B), ldb, 0.0f, BUF(M[2]), s.n));
	if (!clp_nn_gelu_store_ok(ctx, s.n))
		fused = 0;
	if (!fused)
		CHECK_OK(clp_nn_bias_gelu_forward(ctx, BUF(M[3]), BUF(M[2]), BUF(D), s.m, s.n,
						  (clp_nn_gelu)kind));
#undef BUF
	if (strcmp(be, "packed") != 0 || !clp_nn_gelu_store_ok(ctx, s.n))
		CHECK(fused == 0, "%s: fused = %d where the store cannot", what, fused);
	else if (want) /* a 16-bit C over one K block may go either way (gemm.h) */
		CHECK(fused == 1, "%s: fused = %d: bias and GELU not in the store", what, fused);
	for (int i = 0; i < 4; i++)
		get(ctx, M[i], t, g[i], nc);
	for (int o = 0; o < 2; o++)
		for (size_t i = 0; i < nc; i++) {
			float x1 = elem(g[o], t, i), x2 = elem(g[o + 2], t, i);
			int col = (int)(i % s.n);

			if (memcmp(g[o] + i * es, g[o + 2] + i * es, es) != 0 &&
			    !(isnan(x1) && isnan(x2))) {
				CHECK(0, "%s: %s[%zu][%zu] = %.9g, the pair gives %.9g (not bitwise)",
				      what, o ? "act" : "fc", i / s.n, i % s.n, x2, x1);
				break;
			}
			if ((isnan(x2) != 0) != (col == nan_col)) {
				CHECK(0, "%s: %s[%zu][%d] = %g: NaN only in the NaN bias's column", what,
				      o ? "act" : "fc", i / s.n, col, x2);
				break;
			}
		}
out:
	if (A)
		clReleaseMemObject(A);
	if (B)
		clReleaseMemObject(B);
	if (D)
		clReleaseMemObject(D);
	for (int i = 0; i < 4; i++) {
		if (M[i])
			clReleaseMemObject(M[i]);
		free(g[i]);
	}
	free(a); free(b); free(bias);
}

static int use_backend(clp_cl_ctx *ctx, clp_gemm_backend want)
{
	clp_gemm_tuning t;
	clp_status s = clp_gemm_tuning_lookup(clp_cl_ctx_device(ctx), want, &t);

	if (s == CLP_ERR_NOT_FOUND) {
		memset(&t, 0, sizeof(t));
		t.backend = want;
		snprintf(t.source, sizeof(t.source), "defaults");
	} else if (s != CLP_OK) {
		CHECK_OK(s);
		return 0;
	}
	CHECK_OK(clp_cl_gemm_set_tuning(ctx, &t));
	return 1;
}

static void run(clp_gemm_backend be)
{
	/* k = 1000: several K blocks (KC) and, A transposed, two K chunks (KCH 512); on a
	 * GPU-shaped device (llvmpipe: slow) k = 600, still two chunks */
	static const struct shape full[] = {{1, 1, 1}, {7, 33, 127}, {33, 7, 1}, {127, 1, 33},
					    {1, 127, 7}, {33, 48, 1000}};
	static const struct shape light[] = {{1, 1, 1}, {7, 33, 127}, {33, 7, 1}, {127, 1, 33},
					     {1, 127, 7}, {9, 20, 600}};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(91 + be);
	const struct shape *sh;
	const char *name = clp_gemm_backend_name(be);

	if (!ctx || !use_backend(ctx, be))
		return;
	sh = clp_cl_ctx_gpu_shape(ctx) ? light : full;
	for (int t = CLP_F32; t <= CLP_F16; t++)
		for (int i = 0; i < 6; i++)
			for (int ta = 0; ta < 2; ta++)
				for (int tb = 0; tb < 2; tb++) {
					one(ctx, name, (clp_dtype)t, ta, tb, sh[i], 1.0f, 0.0f, -1, &r);
					if (t == CLP_F32 || i == 1)
						one(ctx, name, (clp_dtype)t, ta, tb, sh[i], -1.5f,
						    0.5f, -1, &r);
				}
	one(ctx, name, CLP_F32, 0, 0, (struct shape){7, 33, 127}, 1.0f, 0.0f, 20, &r);
	one(ctx, name, CLP_BF16, 1, 0, (struct shape){33, 7, 9}, 1.0f, 0.5f, 6, &r);
	{
		/* n: one vector, the strip, edge tiles (200 = 4 x 48 + 8), not a multiple of 8 */
		static const struct shape gs[] = {{1, 8, 1}, {7, 48, 127}, {33, 200, 7},
						  {127, 136, 33}, {7, 33, 127}, {33, 96, 1000}};
		int ng = clp_cl_ctx_gpu_shape(ctx) ? 5 : 6;

		for (int t = CLP_F32; t <= CLP_F16; t++)
			for (int i = 0; i < ng; i++)
				for (int kind = 0; kind < 2; kind++)
					one_gelu(ctx, name, (clp_dtype)t, (i + kind) % 2, gs[i],
						 kind, -1, &r);
		one_gelu(ctx, name, CLP_F32, 0, (struct shape){7, 48, 33}, 0, 17, &r);
		one_gelu(ctx, name, CLP_F16, 1, (struct shape){7, 48, 33}, 1, 40, &r);
	}
}

static void test_packed(void)
{
	run(CLP_GEMM_PACKED);
}

static void test_tiled(void)
{
	run(CLP_GEMM_TILED);
}

/* direct also over three K chunks (k = 70000: the bias added once, after the last) */
static void test_direct(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(4243);

	run(CLP_GEMM_DIRECT);
	if (!ctx || !use_backend(ctx, CLP_GEMM_DIRECT))
		return;
	one(ctx, "direct", CLP_F32, 0, 1, (struct shape){3, 37, 70000}, 1.0f, 0.5f, 5, &r);
}

TH_MAIN(TH_TEST(test_packed), TH_TEST(test_tiled), TH_TEST(test_direct))
