/* GEMM against the double-precision reference: every backend, all transpose combinations, odd
 * sizes, offsets, padded leading dimensions, alpha/beta, beta = 0 over NaN, strided batches; the
 * same with each of A, B and C stored in fp32 or a 16-bit type (bf16, fp16) independently (the
 * four combinations a mixed-precision training step uses on every shape, the other three on a
 * few), and NaN propagation through every storage.
 *
 * 16-bit A and B keep the fp32 tolerance: the reference multiplies the rounded inputs (what the
 * device reads, cl/base/half.h), and a product of two bf16 (8-bit significands), two fp16
 * (11-bit) or a 16-bit and an fp32 value is exact or rounded once in fp32 like an fp32
 * product, so the device's only error is still fp32 accumulation. A kernel that rounded an input
 * differently from the reference, or read a 16-bit word as the wrong half, would be off by
 * 2^-8 or 2^-11 relative, far outside a few fp32 ulps times sqrt(k). A 16-bit C adds its own
 * rounding, once: the fp32 result (within the fp32 bound tol of the exact one) rounded to
 * nearest is within u (|ref| + tol) + (fp16: half its smallest subnormal) of it, u = 2^-8
 * (bf16) or 2^-11 (fp16). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/gemm.h"
#include "cl/ref/ref.h"
#include "tests/harness.h"

/* storage of A, B and C in check_one */
static clp_dtype at = CLP_F32, bt = CLP_F32, ct = CLP_F32;

struct shape {
	size_t m, n, k;
};

/* The elementwise error bound: a few ulps times sqrt(k) of sum |a||b|, plus |beta c|. */
static void tolerance(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
		      size_t lda, const float *b, size_t ldb, float beta, const float *c0,
		      size_t ldc, double *tol)
{
	const double u = 1.0 / 16777216.0;

	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0;

			for (size_t p = 0; p < k; p++)
				s += fabs(ta ? a[p * lda + i] : a[i * lda + p]) *
				     fabs(tb ? b[j * ldb + p] : b[p * ldb + j]);
			tol[i * n + j] = (4 * sqrt((double)k) + 8) * u *
						 (fabs(alpha) * s + fabs(beta * c0[i * ldc + j])) +
					 1e-30;
		}
}

/* n floats to a device buffer of type t (the 16-bit words when t is not fp32). */
static void upload(clp_cl_ctx *ctx, cl_mem m, clp_dtype t, const float *x, size_t n)
{
	uint16_t *w;

	if (t == CLP_F32) {
		CHECK_OK(clp_cl_write(ctx, m, 0, n * 4, x));
		return;
	}
	w = malloc(n * 2 + 2);
	clp_dtype_pack(t, w, x, n);
	CHECK_OK(clp_cl_write(ctx, m, 0, n * 2, w));
	free(w);
}

static void download(clp_cl_ctx *ctx, cl_mem m, clp_dtype t, float *x, size_t n)
{
	uint16_t *w;

	if (t == CLP_F32) {
		CHECK_OK(clp_cl_read(ctx, m, 0, n * 4, x));
		return;
	}
	w = malloc(n * 2 + 2);
	CHECK_OK(clp_cl_read(ctx, m, 0, n * 2, w));
	clp_dtype_unpack(t, x, w, n);
	free(w);
}

/* The types of a check, as "bf16*fp32->bf16". */
static const char *types_name(void)
{
	static char buf[48];

	snprintf(buf, sizeof(buf), "%s*%s->%s", clp_dtype_name(at), clp_dtype_name(bt),
		 clp_dtype_name(ct));
	return buf;
}

/* One product on the device vs the reference; returns 1 if it matched. A 16-bit C is also
 * checked to be the single rounding of the result wherever the fp32 bound makes that unique. nan: put a NaN in op(A)
 * and one in op(B) and check that exactly their row and column of C are NaN. */
static int check_one(clp_cl_ctx *ctx, const char *backend, int ta, int tb, struct shape s,
		     float alpha, float beta, size_t batch, th_rng *r, int nan)
{
	size_t pad = 3, aoff = 5, boff = 7, coff = 11;
	size_t arows = ta ? s.k : s.m, acols = ta ? s.m : s.k;
	size_t brows = tb ? s.n : s.k, bcols = tb ? s.k : s.n;
	size_t lda = acols + pad, ldb = bcols + pad, ldc = s.n + pad;
	size_t sa = arows * lda + 13, sb = brows * ldb + 17, sc = s.m * ldc + 19;
	size_t na = aoff + batch * sa, nb = boff + batch * sb, nc = coff + batch * sc;
	size_t ni = s.m / 2, nj = s.n / 3, np = s.k / 2, nq = s.k - 1 - s.k / 3;
	float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *got = malloc(nc * 4);
	float *cref = malloc(s.m * s.n * 4);
	double *ref = malloc(s.m * s.n * 8 + 8), *tol = malloc(s.m * s.n * 8 + 8);
	double u = ct == CLP_BF16 ? 1.0 / 256 : ct == CLP_F16 ? 1.0 / 2048 : 0;
	double tiny = ct == CLP_F16 ? ldexp(1.0, -25) : 0;
	cl_mem da = NULL, db = NULL, dc = NULL;
	char what[200];
	int ok = 1;

	if (!a || !b || !c || !got || !cref || !ref || !tol) {
		CHECK(0, "out of host memory");
		ok = 0;
		goto out;
	}
	th_fill_uniform(r, a, na, -1, 1);
	th_fill_uniform(r, b, nb, -1, 1);
	if (nan) { /* op(A)[ni][np], op(B)[nq][nj] of the first batch entry */
		a[aoff + (ta ? np * lda + ni : ni * lda + np)] = NAN;
		b[boff + (tb ? nj * ldb + nq : nq * ldb + nj)] = NAN;
	}
	for (size_t i = 0; i < na; i++) /* what the device reads */
		a[i] = clp_dtype_round(at, a[i]);
	for (size_t i = 0; i < nb; i++)
		b[i] = clp_dtype_round(bt, b[i]);
	if (beta == 0.0f)
		th_poison(c, nc); /* beta = 0 must not read C */
	else
		th_fill_uniform(r, c, nc, -1, 1);
	for (size_t i = 0; i < nc; i++)
		c[i] = clp_dtype_round(ct, c[i]);
	CHECK_OK(clp_cl_buffer(ctx, na * clp_dtype_size(at), "A", &da));
	CHECK_OK(clp_cl_buffer(ctx, nb * clp_dtype_size(bt), "B", &db));
	CHECK_OK(clp_cl_buffer(ctx, nc * clp_dtype_size(ct), "C", &dc));
	if (!da || !db || !dc) {
		ok = 0;
		goto out;
	}
	upload(ctx, da, at, a, na);
	upload(ctx, db, bt, b, nb);
	upload(ctx, dc, ct, c, nc);
	if (at == bt && ct == CLP_F32 && (s.m + s.n) % 2) /* the first slice's interface too */
		CHECK_OK(clp_cl_gemm_batched_ab(ctx, at, (clp_trans)ta, (clp_trans)tb, s.m, s.n,
						s.k, alpha, clp_buf_at(da, aoff), lda, sa,
						clp_buf_at(db, boff), ldb, sb, beta,
						clp_buf_at(dc, coff), ldc, sc, batch));
	else
		CHECK_OK(clp_cl_gemm_batched(ctx, (clp_trans)ta, (clp_trans)tb, s.m, s.n, s.k,
					     alpha, clp_buf_typed(da, aoff, at), lda, sa,
					     clp_buf_typed(db, boff, bt), ldb, sb, beta,
					     clp_buf_typed(dc, coff, ct), ldc, sc, batch));
	download(ctx, dc, ct, got, nc);
	for (size_t z = 0; z < batch; z++) {
		const float *az = a + aoff + z * sa, *bz = b + boff + z * sb;
		const float *cz = c + coff + z * sc;

		snprintf(what, sizeof(what), "%s %s %c%c m=%zu n=%zu k=%zu alpha=%g beta=%g batch "
			 "%zu/%zu%s", backend, types_name(), ta ? 'T' : 'N', tb ? 'T' : 'N', s.m,
			 s.n, s.k, alpha, beta, z, batch, nan ? " NaN" : "");
		if (nan && z == 0) {
			for (size_t i = 0; i < s.m; i++)
				for (size_t j = 0; j < s.n; j++) {
					float g = got[coff + i * ldc + j];
					int want = i == ni || j == nj;

					if ((isnan(g) != 0) != want) {
						CHECK(0, "%s: C[%zu][%zu] = %g, NaN expected %s", what,
						      i, j, g, want ? "" : "only in row/column "
									   "of the NaN inputs");
						ok = 0;
						i = s.m;
						break;
					}
				}
			continue;
		}
		for (size_t i = 0; i < s.m; i++)
			for (size_t j = 0; j < s.n; j++)
				cref[i * s.n + j] = beta == 0.0f ? 0.0f : cz[i * ldc + j];
		clp_ref_gemm(ta, tb, s.m, s.n, s.k, alpha, az, lda, bz, ldb, beta, cref, s.n);
		tolerance(ta, tb, s.m, s.n, s.k, alpha, az, lda, bz, ldb, beta == 0.0f ? 0 : beta,
			  beta == 0.0f ? cref : cz, beta == 0.0f ? s.n : ldc, tol);
		/* gather the device result of this batch entry */
		for (size_t i = 0; i < s.m * s.n; i++)
			ref[i] = cref[i];
		for (size_t i = 0; i < s.m; i++)
			memcpy(cref + i * s.n, got + coff + z * sc + i * ldc, s.n * 4);
		/* a 16-bit C is the fp32 result rounded once to nearest: where every value within
		 * the fp32 bound of the reference rounds to the same 16-bit value (rounding is
		 * monotonic), the device must have stored exactly that one */
		for (size_t i = 0; ct != CLP_F32 && i < s.m * s.n; i++) {
			float lo = clp_dtype_round(ct, (float)(ref[i] - tol[i]));
			float hi = clp_dtype_round(ct, (float)(ref[i] + tol[i]));

			if (lo == hi && cref[i] != lo) {
				CHECK(0, "%s: C[%zu][%zu] = %.9g, not %.9g (the result rounded once)",
				      what, i / s.n, i % s.n, cref[i], lo);
				ok = 0;
				break;
			}
		}
		for (size_t i = 0; i < s.m * s.n; i++)
			tol[i] += u * (fabs(ref[i]) + tol[i]) + tiny;
		ok &= th_close_tol(what, cref, ref, tol, s.m * s.n);
		/* and the padding */
		for (size_t i = 0; i < s.m; i++)
			for (size_t j = s.n; j < ldc && i * ldc + j < sc; j++) {
				float g = got[coff + z * sc + i * ldc + j];
				float w = c[coff + z * sc + i * ldc + j];

				if (!(g == w || (isnan(g) && isnan(w)))) {
					CHECK(0, "%s: wrote padding C[%zu][%zu]", what, i, j);
					ok = 0;
					i = s.m;
					break;
				}
			}
	}
out:
	if (da)
		clReleaseMemObject(da);
	if (db)
		clReleaseMemObject(db);
	if (dc)
		clReleaseMemObject(dc);
	free(a);
	free(b);
	free(c);
	free(got);
	free(cref);
	free(ref);
	free(tol);
	return ok;
}

static int use_backend(clp_cl_ctx *ctx, clp_gemm_backend want)
{
	clp_gemm_tuning t;
	clp_status s = clp_gemm_tuning_lookup(clp_cl_ctx_device(ctx), want, &t);

	if (s == CLP_ERR_NOT_FOUND) { /* no table entry for this device: the backend's defaults */
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

static void run_backend(clp_gemm_backend be, const struct shape *shapes, int nshapes)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(42 + be);
	const char *name = clp_gemm_backend_name(be);

	if (!ctx || !use_backend(ctx, be))
		return;
	for (int si = 0; si < nshapes; si++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++) {
				check_one(ctx, name, ta, tb, shapes[si], 1.0f, 0.0f, 1, &r, 0);
				check_one(ctx, name, ta, tb, shapes[si], -1.5f, 0.5f, 1, &r, 0);
			}
	/* strided batches, both beta modes */
	check_one(ctx, name, 0, 1, (struct shape){33, 7, 127}, 0.125f, 0.0f, 3, &r, 0);
	check_one(ctx, name, 1, 0, (struct shape){7, 33, 1}, 1.0f, 1.0f, 4, &r, 0);
	/* k = 0: C = beta C */
	check_one(ctx, name, 0, 0, (struct shape){7, 5, 0}, 1.0f, 0.0f, 1, &r, 0);
	check_one(ctx, name, 0, 0, (struct shape){7, 5, 0}, 1.0f, 1.0f, 1, &r, 0);
	check_one(ctx, name, 0, 0, (struct shape){7, 5, 0}, 1.0f, -0.75f, 2, &r, 0);
	/* NaN in A and B reaches exactly its row and column of C */
	check_one(ctx, name, 0, 1, (struct shape){33, 7, 127}, 1.0f, 0.0f, 1, &r, 1);
	check_one(ctx, name, 1, 0, (struct shape){7, 33, 9}, 1.0f, 0.5f, 2, &r, 1);
}

static const struct shape odd[] = {
	{1, 1, 1}, {7, 33, 127}, {33, 7, 1}, {127, 1, 33}, {1, 127, 7}, {1000, 33, 7}, {7, 1000, 33},
};
#define NODD ((int)(sizeof(odd) / sizeof(odd[0])))

static void test_packed(void)
{
	static const struct shape more[] = {{33, 1000, 127}, {257, 129, 300}, {96, 48, 1000}};

	run_backend(CLP_GEMM_PACKED, odd, NODD);
	if (th_ctx() && !clp_cl_ctx_gpu_shape(th_ctx())) /* where packed is the production GEMM */
		run_backend(CLP_GEMM_PACKED, more, 3);
}

static void test_tiled(void)
{
	run_backend(CLP_GEMM_TILED, odd, NODD);
}

/* The direct kernel (llvmpipe's GEMM) also on K over its 32768-a-launch chunks: three chunks
 * at k = 70000, beyond the 65535 loop iterations after which llvmpipe silently stops a
 * work-item's loop; and a 16-bit C there goes through scratch (one rounding). */
static void test_direct(void)
{
	static const struct shape big_k[] = {{3, 37, 70000}};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(4242);

	run_backend(CLP_GEMM_DIRECT, odd, NODD);
	if (!ctx || !use_backend(ctx, CLP_GEMM_DIRECT))
		return;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			check_one(ctx, "direct", ta, tb, big_k[0], -1.5f, 0.5f, 1, &r, 0);
	ct = CLP_BF16;
	check_one(ctx, "direct", 1, 0, big_k[0], 1.0f, 0.5f, 1, &r, 0);
	ct = CLP_F32;
}

static void test_clblast(void)
{
	static const struct shape few[] = {{1, 1, 1}, {7, 33, 127}, {127, 7, 33}};

	run_backend(CLP_GEMM_CLBLAST, few, 3);
}

/* Each of A, B and C in fp32 or a 16-bit type S (bf16, fp16) on every backend: the combinations
 * a mixed-precision step uses (forward S*S->S, dX fp32*S->fp32, dW S*fp32->fp32, K-FAC factor
 * S*S->fp32) on odd shapes, both transposes, batches and NaN; the other three on two shapes.
 * On a GPU-shaped device (llvmpipe in CI: slow launches, and a k = 1000 product costs 0.3-0.6 s
 * there) smaller products: k = 300, and k = 600 for the packed kernel (still two K chunks). */
static void test_16bit(void)
{
	/* k = 1000: more than one K chunk of the packed backend (KCH 512) */
	static const struct shape full[] = {{1, 1, 1}, {7, 33, 127}, {33, 7, 1}, {127, 1, 33},
					    {1000, 33, 7}, {33, 257, 129}, {33, 48, 1000}};
	static const struct shape few[] = {{7, 33, 127}, {33, 48, 1000}};
	static const struct shape light_full[] = {{1, 1, 1}, {7, 33, 127}, {127, 1, 33},
						  {20, 9, 300}};
	static const struct shape light_packed[] = {{7, 33, 127}, {9, 20, 600}};
	static const clp_gemm_backend be[] = {CLP_GEMM_PACKED, CLP_GEMM_TILED, CLP_GEMM_CLBLAST,
					      CLP_GEMM_DIRECT};
	int light = th_ctx() && clp_cl_ctx_gpu_shape(th_ctx());

	for (int t = CLP_BF16; t <= CLP_F16; t++)
		for (int combo = 1; combo < 8; combo++) {
			/* bit 0: A is 16-bit, bit 1: B, bit 2: C */
			int engine = combo == 7 || combo == 2 || combo == 1 || combo == 3;

			at = combo & 1 ? (clp_dtype)t : CLP_F32;
			bt = combo & 2 ? (clp_dtype)t : CLP_F32;
			ct = combo & 4 ? (clp_dtype)t : CLP_F32;
			for (int i = 0; i < 4; i++)
				if (!light)
					run_backend(be[i], engine ? full : few, engine ? 7 : 2);
				else if (be[i] == CLP_GEMM_PACKED)
					run_backend(be[i], light_packed, engine ? 2 : 1);
				else
					run_backend(be[i], engine ? light_full : light_full + 1,
						    engine ? 4 : 1);
		}
	at = bt = ct = CLP_F32;
}

/* Kept packs (cl/gemm.h): on the packed backend a held B is packed once and its strips reused,
 * bitwise the product of packing every time; after a write they are stale (a product still
 * reads the old strips: this shows they are kept) until clp_cl_gemm_stale, after which the
 * product is that of the new B. Odd sizes, both transposes of A and B, an offset and a padded
 * leading dimension, K in several chunks (k = 1000, A transposed), a bf16 B. */
static void kept_one(clp_cl_ctx *ctx, int ta, int tb, struct shape s, clp_dtype bty, th_rng *r)
{
	size_t lda = (ta ? s.m : s.k) + 1, ldb = (tb ? s.k : s.n) + 2, off = 3;
	size_t na = (ta ? s.k : s.m) * lda, nb = off + (tb ? s.n : s.k) * ldb, nc = s.m * s.n;
	float *a = malloc(na * 4 + 4), *b = malloc(nb * 4 + 4), *b2 = malloc(nb * 4 + 4);
	float *c0 = malloc(nc * 4 + 4), *c = malloc(nc * 4 + 4), *c2 = malloc(nc * 4 + 4);
	double *ref = malloc(nc * sizeof(double) + 8);
	cl_mem A = NULL, B = NULL, Bfree = NULL, C = NULL;
	clp_gemm_cache_stats st0, st;
	char what[96];
	int kept = getenv("CLPIPE_GEMM_KEEP_PACKS") == NULL;

	snprintf(what, sizeof(what), "kept packs %c%c %zux%zux%zu %s", ta ? 'T' : 'N',
		 tb ? 'T' : 'N', s.m, s.n, s.k, clp_dtype_name(bty));
	th_fill_uniform(r, a, na, -1, 1);
	th_fill_uniform(r, b, nb, -1, 1);
	th_fill_uniform(r, b2, nb, -1, 1);
	if (bty != CLP_F32) { /* what the device reads */
		uint16_t *w = malloc(nb * 2 + 2);

		clp_dtype_pack(bty, w, b2, nb);
		clp_dtype_unpack(bty, b2, w, nb);
		free(w);
	}
	CHECK_OK(clp_cl_buffer(ctx, na * 4 + 4, "A", &A));
	CHECK_OK(clp_cl_buffer(ctx, nb * 4 + 4, "B", &B));
	CHECK_OK(clp_cl_buffer(ctx, nb * 4 + 4, "B not held", &Bfree));
	CHECK_OK(clp_cl_buffer(ctx, nc * 4 + 4, "C", &C));
	upload(ctx, A, CLP_F32, a, na);
	upload(ctx, B, bty, b, nb);
	upload(ctx, Bfree, bty, b, nb);
#define KGEMM(bm, out)                                                                             \
	do {                                                                                       \
		CHECK_OK(clp_cl_gemm(ctx, (clp_trans)ta, (clp_trans)tb, s.m, s.n, s.k, 1.0f,       \
				     clp_buf_at(A, 0), lda, clp_buf_typed(bm, off, bty), ldb,      \
				     0.0f, clp_buf_at(C, 0), s.n));                                \
		download(ctx, C, CLP_F32, out, nc);                                                \
	} while (0)
	KGEMM(Bfree, c0); /* packed every time */
	CHECK_OK(clp_cl_gemm_hold(ctx, B));
	clp_cl_gemm_cache_stats(ctx, &st0);
	KGEMM(B, c);
	CHECK(memcmp(c, c0, nc * 4) == 0, "%s: first product not bitwise the unkept one", what);
	KGEMM(B, c);
	CHECK(memcmp(c, c0, nc * 4) == 0, "%s: product from kept strips not bitwise", what);
	clp_cl_gemm_cache_stats(ctx, &st);
	CHECK(!kept || (st.packs > st0.packs && st.hits > st0.hits), "%s: packs %ld -> %ld, hits "
	      "%ld -> %ld: nothing kept", what, st0.packs, st.packs, st0.hits, st.hits);
	upload(ctx, B, bty, b2, nb); /* the weights change; the holder has not said so yet */
	KGEMM(B, c);
	CHECK(!kept || memcmp(c, c0, nc * 4) == 0, "%s: the strips were not kept", what);
	clp_cl_gemm_stale(ctx, B);
	KGEMM(B, c);
	upload(ctx, Bfree, bty, b2, nb);
	KGEMM(Bfree, c2);
	CHECK(memcmp(c, c2, nc * 4) == 0, "%s: after stale: not bitwise the new B's product",
	      what);
	clp_ref_gemm(ta, tb, s.m, s.n, s.k, 1.0f, a, lda, b2 + off, ldb, 0.0f, c0, s.n);
	for (size_t i = 0; i < nc; i++)
		ref[i] = c0[i];
	th_close(what, c, ref, nc, 1e-5 * sqrt((double)s.k + 1), 1e-5 * sqrt((double)s.k + 1));
	clp_cl_gemm_stale(ctx, B); /* stale twice: no harm */
	clp_cl_gemm_release(ctx, B);
	clp_cl_gemm_release(ctx, B); /* released twice: no harm */
	clp_cl_gemm_cache_stats(ctx, &st);
	CHECK(st.entries == 0 && st.bytes == 0, "%s: %d packs left after release", what,
	      st.entries);
#undef KGEMM
	clReleaseMemObject(A);
	clReleaseMemObject(B);
	clReleaseMemObject(Bfree);
	clReleaseMemObject(C);
	free(a); free(b); free(b2); free(c0); free(c); free(c2); free(ref);
}

static void test_kept_packs(void)
{
	static const struct shape sh[] = {{1, 1, 1}, {7, 33, 127}, {33, 7, 1}, {127, 1, 33},
					  {33, 127, 7}, {9, 20, 1000}};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(77);

	if (!ctx || !use_backend(ctx, CLP_GEMM_PACKED))
		return;
	for (int i = 0; i < 6; i++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++)
				kept_one(ctx, ta, tb, sh[i], CLP_F32, &r);
	kept_one(ctx, 0, 1, sh[1], CLP_BF16, &r);
	kept_one(ctx, 1, 0, sh[5], CLP_F16, &r);
}

static void test_errors(void)
{
	clp_cl_ctx *ctx = th_ctx();
	clp_gemm_backend b;
	cl_mem m;

	CHECK_ERR(clp_gemm_check_args(CLP_N, CLP_N, 4, 5, 6, 5, 5, 5), CLP_ERR_INVALID, "lda=5");
	CHECK_ERR(clp_gemm_check_args(CLP_T, CLP_N, 4, 5, 6, 3, 5, 5), CLP_ERR_INVALID, "lda=3");
	CHECK_ERR(clp_gemm_check_args(CLP_N, CLP_T, 4, 5, 6, 6, 5, 5), CLP_ERR_INVALID, "ldb=5");
	CHECK_ERR(clp_gemm_check_args(CLP_N, CLP_N, 4, 5, 6, 6, 5, 4), CLP_ERR_INVALID, "ldc=4");
	CHECK_ERR(clp_gemm_backend_parse("cublas", &b), CLP_ERR_INVALID, "cublas");
	if (!ctx)
		return;
	CHECK_OK(clp_cl_buffer(ctx, 64, "m", &m));
	CHECK_ERR(clp_cl_gemm(ctx, CLP_N, CLP_N, 2, 2, 2, 1, clp_buf_at(m, 0), 1, clp_buf_at(m, 0),
			      2, 0, clp_buf_at(m, 0), 2), CLP_ERR_INVALID, "lda");
	clReleaseMemObject(m);
}

TH_MAIN(TH_TEST(test_packed), TH_TEST(test_tiled), TH_TEST(test_direct),
	TH_TEST(test_clblast), TH_TEST(test_16bit),
	TH_TEST(test_errors), TH_TEST(test_kept_packs))
