/* The K-FAC kernels against their double references (cl/ref/kfac_ref.h), and the references
 * against LAPACK (OpenBLAS's dpotrf/dtrtri): factors over strided rows, damping and its flags,
 * damped copies, blocked Cholesky, triangular and SPD inverses at sizes that are not multiples
 * of the block (both kernel shapes), a matrix that is not positive definite, preconditioning in
 * both weight layouts, the dot product, KL clipping and the SGD update. Outputs are poisoned. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/kfac.h"
#include "cl/nn.h"
#include "cl/ref/kfac_ref.h"
#include "tests/harness.h"

/* LAPACK (column-major; on a row-major symmetric matrix "U" is our lower factor) */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t len);
void dtrtri_(const char *uplo, const char *diag, const int *n, double *a, const int *lda,
	     int *info, size_t l1, size_t l2);

static const size_t sizes[] = {1, 7, 33, 100, 127};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static cl_mem dbuf(const float *host, size_t n)
{
	cl_mem m = NULL;

	CHECK_OK(clp_cl_buffer(th_ctx(), (n ? n : 1) * 4 + 64, "test", &m));
	if (m && host && n)
		CHECK_OK(clp_cl_write(th_ctx(), m, 0, n * 4, host));
	return m;
}

static void get(cl_mem m, size_t off, float *dst, size_t n)
{
	CHECK_OK(clp_cl_read(th_ctx(), m, off * 4, n * 4, dst));
}

static float *poisoned(size_t n)
{
	float *x = malloc((n ? n : 1) * sizeof(float));

	th_poison(x, n);
	return x;
}

/* A random SPD matrix: X^T X / r + shift I with X (r, n) uniform. */
static void random_spd(th_rng *r, double *W, size_t n, double shift)
{
	size_t rows = n + 5;
	float *x = malloc(rows * n * sizeof(float));

	th_fill_uniform(r, x, rows * n, -1, 1);
	clp_ref_kfac_factor(W, x, n, rows, n, 1.0 / (double)rows, 0.0);
	for (size_t i = 0; i < n; i++)
		W[i * n + i] += shift;
	free(x);
}

static void to_float(float *f, const double *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f[i] = (float)d[i];
}

static void check_norm(const char *what, const float *got, const double *ref, size_t count,
		       double tol)
{
	double e = th_norm_err(got, ref, count);

	CHECK(e <= tol, "%s: normalised error %.3g > %.3g", what, e, tol);
}

static void test_factor(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(61);

	if (!ctx)
		return;
	for (size_t s = 0; s < NSIZES; s++)
		for (int beta = 0; beta < 2; beta++) {
			size_t d = sizes[s], rows = sizes[(s + 2) % NSIZES], ld = d + 3;
			float *x = malloc(rows * ld * 4 + 4), *F0 = malloc(d * d * 4), *got;
			double *ref = malloc(d * d * 8);
			cl_mem mx, mf;

			th_fill_uniform(&r, x, rows * ld, -2, 2);
			th_fill_uniform(&r, F0, d * d, -1, 1);
			for (size_t i = 0; i < d * d; i++)
				ref[i] = F0[i];
			got = beta ? F0 : poisoned(d * d);
			mx = dbuf(x, rows * ld);
			mf = dbuf(got, d * d + 2);
			/* the columns 1 .. d of x, as the QKV input slice of a wider row would be */
			CHECK_OK(clp_kfac_factor(ctx, clp_buf_at(mf, 2), clp_buf_at(mx, 1), ld, rows,
						 d, 0.25f, beta ? 0.5f : 0.0f));
			if (beta)
				CHECK_OK(clp_cl_write(ctx, mf, 8, d * d * 4, F0));
			if (beta)
				CHECK_OK(clp_kfac_factor(ctx, clp_buf_at(mf, 2), clp_buf_at(mx, 1), ld,
							 rows, d, 0.25f, 0.5f));
			clp_ref_kfac_factor(ref, x + 1, ld, rows, d, 0.25, beta ? 0.5 : 0.0);
			get(mf, 2, got, d * d);
			th_close("factor", got, ref, d * d, 1e-5, 1e-5);
			clReleaseMemObject(mx);
			clReleaseMemObject(mf);
			if (!beta)
				free(got);
			free(x);
			free(F0);
			free(ref);
		}
}

/* Factor A from 16-bit inputs (the saved activations of a bf16 / fp16 run): a column slice of
 * wider rows, against the reference at the rounded inputs with the fp32 tolerance (the device
 * reads exactly those values; their products are exact in fp32). A NaN input x[r][c] makes
 * exactly row and column c of F NaN. A 16-bit F is refused. */
static void test_factor_16bit(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(66);

	if (!ctx)
		return;
	for (int t = CLP_BF16; t <= CLP_F16; t++)
		for (size_t s = 0; s < NSIZES; s++)
			for (int nan = 0; nan < 2; nan++) {
				size_t d = sizes[s], rows = sizes[(s + 2) % NSIZES], ld = d + 3;
				size_t nc = d / 2;
				float *x = malloc(rows * ld * 4 + 4), *got = poisoned(d * d);
				uint16_t *w = malloc(rows * ld * 2 + 2);
				double *ref = malloc(d * d * 8);
				cl_mem mx = NULL, mf = dbuf(got, d * d + 2);
				char what[64];

				th_fill_uniform(&r, x, rows * ld, -2, 2);
				if (nan)
					x[(rows - 1) * ld + 1 + nc] = NAN;
				for (size_t i = 0; i < rows * ld; i++)
					x[i] = clp_dtype_round((clp_dtype)t, x[i]);
				clp_dtype_pack((clp_dtype)t, w, x, rows * ld);
				CHECK_OK(clp_cl_buffer(ctx, rows * ld * 2 + 64, "x16", &mx));
				CHECK_OK(clp_cl_write(ctx, mx, 0, rows * ld * 2, w));
				CHECK_OK(clp_kfac_factor(ctx, clp_buf_at(mf, 2),
							 clp_buf_typed(mx, 1, (clp_dtype)t), ld,
							 rows, d, 0.25f, 0.0f));
				get(mf, 2, got, d * d);
				snprintf(what, sizeof(what), "factor %s d=%zu rows=%zu%s",
					 clp_dtype_name((clp_dtype)t), d, rows, nan ? " NaN" : "");
				if (nan) {
					for (size_t i = 0; i < d * d; i++)
						CHECK((isnan(got[i]) != 0) ==
							      (i / d == nc || i % d == nc),
						      "%s: F[%zu][%zu] = %g", what, i / d, i % d,
						      got[i]);
				} else {
					clp_ref_kfac_factor(ref, x + 1, ld, rows, d, 0.25, 0.0);
					th_close(what, got, ref, d * d, 1e-5, 1e-5);
				}
				if (s == 0 && !nan)
					CHECK_ERR(clp_kfac_factor(ctx, clp_buf_typed(mf, 2, (clp_dtype)t),
								  clp_buf_typed(mx, 1, (clp_dtype)t),
								  ld, rows, d, 1.0f, 0.0f),
						  CLP_ERR_INVALID, "F is");
				clReleaseMemObject(mx);
				clReleaseMemObject(mf);
				free(x), free(w), free(got), free(ref);
			}
}

static void test_damping(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(62);
	const size_t dA = 33, dB[3] = {7, 7, 20};
	double *A = malloc(dA * dA * 8), *B[3], want[3];
	float *fA = malloc(dA * dA * 4), *fB[3], st[8], *W = malloc(dA * dA * 4);
	cl_mem mA, mB[3], ms, mw;
	clp_buf bb[3];
	float lambdas[2] = {0.03f, 1e-20f};

	if (!ctx)
		return;
	random_spd(&r, A, dA, 0.0);
	to_float(fA, A, dA * dA);
	for (size_t i = 0; i < dA * dA; i++)
		A[i] = fA[i];
	mA = dbuf(fA, dA * dA);
	for (int i = 0; i < 3; i++) {
		B[i] = malloc(dB[i] * dB[i] * 8);
		fB[i] = malloc(dB[i] * dB[i] * 4);
		random_spd(&r, B[i], dB[i], 0.0);
		for (size_t j = 0; j < dB[i] * dB[i]; j++) {
			fB[i][j] = (float)(B[i][j] * (i + 1) * 10);
			B[i][j] = fB[i][j];
		}
		mB[i] = dbuf(fB[i], dB[i] * dB[i]);
		bb[i] = clp_buf_at(mB[i], 0);
	}
	ms = dbuf(NULL, 16);
	mw = dbuf(NULL, dA * dA);
	for (int li = 0; li < 2; li++) {
		const double *Bc[3] = {B[0], B[1], B[2]};
		double ws[8];

		CHECK(clp_ref_kfac_damping(want, A, dA, Bc, dB, 3, lambdas[li]) == 0, "ref flag");
		CHECK_OK(clp_kfac_damping(ctx, clp_buf_at(ms, 3), clp_buf_at(mA, 0), dA, bb, dB, 3,
					  lambdas[li]));
		get(ms, 3, st, 6);
		ws[0] = want[0], ws[1] = want[1], ws[2] = 0, ws[3] = want[2];
		{
			float g[4] = {st[CLP_KFAC_S_DAMPA], st[CLP_KFAC_S_DAMPB], st[CLP_KFAC_S_FLAG],
				      st[CLP_KFAC_S_PI]};

			th_close("damping (A, B, flag, pi)", g, ws, 4, 1e-12, 1e-5);
		}
		/* the floor of 1e-7 holds for a tiny lambda */
		if (li == 1)
			CHECK(st[CLP_KFAC_S_DAMPA] >= 1e-7f && st[CLP_KFAC_S_DAMPB] >= 1e-7f,
			      "damping floor: %g %g", st[2], st[3]);
		/* damped copy of A */
		{
			double *ref = malloc(dA * dA * 8);

			th_poison(W, dA * dA);
			CHECK_OK(clp_cl_write(ctx, mw, 0, dA * dA * 4, W));
			CHECK_OK(clp_kfac_damped_copy(ctx, clp_buf_at(mw, 0), clp_buf_at(mA, 0), dA,
						      clp_buf_at(ms, 3), 0));
			get(mw, 0, W, dA * dA);
			for (size_t i = 0; i < dA * dA; i++)
				ref[i] = A[i] + (i % (dA + 1) == 0 ? want[0] : 0);
			th_close("damped copy", W, ref, dA * dA, 1e-6, 1e-6);
			free(ref);
		}
	}
	/* an all-zero B block sum (trace 0) flags the layer; its copies are identities */
	{
		float zero[49] = {0}, *Z = calloc(dA * dA, 4);
		cl_mem mz = dbuf(zero, 49);
		clp_buf zb = clp_buf_at(mz, 0);
		double *I = calloc(dA * dA, 8);

		CHECK_OK(clp_kfac_damping(ctx, clp_buf_at(ms, 3), clp_buf_at(mA, 0), dA, &zb, dB, 1,
					  0.1f));
		get(ms, 3, st, 6);
		CHECK(st[CLP_KFAC_S_FLAG] == 1.0f, "zero factor flag %g", st[CLP_KFAC_S_FLAG]);
		CHECK_OK(clp_kfac_damped_copy(ctx, clp_buf_at(mw, 0), clp_buf_at(mA, 0), dA,
					      clp_buf_at(ms, 3), 0));
		get(mw, 0, Z, dA * dA);
		for (size_t i = 0; i < dA; i++)
			I[i * dA + i] = 1;
		th_close("flagged layer: identity", Z, I, dA * dA, 0, 0);
		/* a NaN in A flags 2 */
		zero[0] = NAN;
		CHECK_OK(clp_cl_write(ctx, mA, 0, 4, zero));
		CHECK_OK(clp_kfac_damping(ctx, clp_buf_at(ms, 3), clp_buf_at(mA, 0), dA, bb, dB, 3,
					  0.1f));
		get(ms, 3, st, 6);
		CHECK(st[CLP_KFAC_S_FLAG] == 2.0f, "NaN factor flag %g", st[CLP_KFAC_S_FLAG]);
		clReleaseMemObject(mz);
		free(Z);
		free(I);
	}
	CHECK_ERR(clp_kfac_damping(ctx, clp_buf_at(ms, 0), clp_buf_at(mA, 0), dA, bb, dB, 0, 0.1f),
		  CLP_ERR_INVALID, "B blocks", NULL);
	for (int i = 0; i < 3; i++) {
		clReleaseMemObject(mB[i]);
		free(B[i]);
		free(fB[i]);
	}
	clReleaseMemObject(mA);
	clReleaseMemObject(ms);
	clReleaseMemObject(mw);
	free(A);
	free(fA);
	free(W);
}

/* Cholesky, triangular inverse and SPD inverse of one size against the references, and the
 * references against LAPACK. */
static void check_inverses(size_t n, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	size_t nn = n * n, wsn = clp_kfac_workspace(ctx, n);
	double *W = malloc(nn * 8), *L = malloc(nn * 8), *X = malloc(nn * 8), *inv = malloc(nn * 8);
	double *lap = malloc(nn * 8);
	float *fW = malloc(nn * 4), *got = malloc(nn * 4);
	cl_mem mw, mws, mi, minfo;
	int info = 0, ni = (int)n;
	char what[64];

	random_spd(r, W, n, 0.05);
	to_float(fW, W, nn);
	for (size_t i = 0; i < nn; i++)
		W[i] = fW[i];
	memcpy(L, W, nn * 8);
	CHECK(clp_ref_cholesky(L, n) == 0, "ref cholesky n=%zu", n);
	memcpy(lap, W, nn * 8);
	dpotrf_("U", &ni, lap, &ni, &info, 1);
	CHECK(info == 0, "dpotrf info %d", info);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++)
			CHECK(fabs(lap[i * n + j] - L[i * n + j]) <= 1e-10 * (1 + fabs(L[i * n + j])),
			      "ref cholesky vs dpotrf n=%zu [%zu,%zu]: %g vs %g", n, i, j, L[i * n + j],
			      lap[i * n + j]);
	memcpy(X, L, nn * 8);
	clp_ref_trtri(X, n);
	dtrtri_("U", "N", &ni, lap, &ni, &info, 1, 1);
	CHECK(info == 0, "dtrtri info %d", info);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++)
			CHECK(fabs(lap[i * n + j] - X[i * n + j]) <= 1e-9 * (1 + fabs(X[i * n + j])),
			      "ref trtri vs dtrtri n=%zu [%zu,%zu]", n, i, j);
	CHECK(clp_ref_spd_inverse(inv, W, n) == 0, "ref inverse");

	/* device Cholesky (the upper triangle is poisoned: only the lower one may be read) */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			fW[i * n + j] = NAN;
	mw = dbuf(fW, nn);
	mws = dbuf(NULL, wsn);
	mi = dbuf(NULL, nn);
	minfo = dbuf(NULL, 1);
	CHECK_OK(clp_kfac_cholesky(ctx, clp_buf_at(mw, 0), n, clp_buf_at(mws, 0),
				   clp_buf_at(minfo, 0)));
	get(mw, 0, got, nn);
	snprintf(what, sizeof(what), "cholesky n=%zu", n);
	check_norm(what, got, L, nn, 2e-5);
	CHECK_OK(clp_cl_read(ctx, minfo, 0, 4, &info));
	CHECK(info == 0, "cholesky info %d", info);
	/* device triangular inverse of the reference factor */
	to_float(fW, L, nn);
	CHECK_OK(clp_cl_write(ctx, mw, 0, nn * 4, fW));
	CHECK_OK(clp_kfac_trtri(ctx, clp_buf_at(mw, 0), n, clp_buf_at(mws, 0)));
	get(mw, 0, got, nn);
	snprintf(what, sizeof(what), "trtri n=%zu", n);
	check_norm(what, got, X, nn, 2e-5);
	/* SPD inverse, output poisoned */
	to_float(fW, W, nn);
	CHECK_OK(clp_cl_write(ctx, mw, 0, nn * 4, fW));
	th_poison(got, nn);
	CHECK_OK(clp_cl_write(ctx, mi, 0, nn * 4, got));
	CHECK_OK(clp_kfac_spd_inverse(ctx, clp_buf_at(mi, 0), clp_buf_at(mw, 0), n,
				      clp_buf_at(mws, 0), clp_buf_at(minfo, 0)));
	get(mi, 0, got, nn);
	snprintf(what, sizeof(what), "spd inverse n=%zu", n);
	check_norm(what, got, inv, nn, 1e-4);
	clReleaseMemObject(mw);
	clReleaseMemObject(mws);
	clReleaseMemObject(mi);
	clReleaseMemObject(minfo);
	free(W);
	free(L);
	free(X);
	free(inv);
	free(lap);
	free(fW);
	free(got);
}

static void test_inverses(void)
{
	th_rng r = th_rng_seed(63);

	if (!th_ctx())
		return;
	for (size_t s = 0; s < NSIZES; s++)
		check_inverses(sizes[s], &r);
}

/* The GPU shape (a work-group of 64 per diagonal block, block 64) on this device. */
static void test_inverses_gpu_shape(void)
{
	th_rng r = th_rng_seed(64);
	static const size_t gs[] = {7, 65, 130};

	if (!th_ctx())
		return;
	clp_nn_set_shape(CLP_NN_SHAPE_GPU);
	for (size_t s = 0; s < 3; s++)
		check_inverses(gs[s], &r);
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
}

static void test_not_positive_definite(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t n = 40;
	float *W = calloc(n * n, 4);
	cl_mem mw, mws, mi, minfo;
	int info = 0;

	if (!ctx)
		return;
	for (size_t i = 0; i < n; i++)
		W[i * n + i] = i == 35 ? -1.0f : 2.0f;
	mw = dbuf(W, n * n);
	mws = dbuf(NULL, clp_kfac_workspace(ctx, n));
	mi = dbuf(NULL, n * n);
	minfo = dbuf(NULL, 1);
	CHECK_OK(clp_kfac_spd_inverse(ctx, clp_buf_at(mi, 0), clp_buf_at(mw, 0), n,
				      clp_buf_at(mws, 0), clp_buf_at(minfo, 0)));
	CHECK_OK(clp_cl_read(ctx, minfo, 0, 4, &info));
	CHECK(info == 36, "info %d, want 36 (pivot 35)", info);
	get(mi, 0, W, n * n);
	for (size_t i = 0; i < n * n; i++)
		CHECK(isfinite(W[i]), "non-finite inverse element %zu", i);
	clReleaseMemObject(mw);
	clReleaseMemObject(mws);
	clReleaseMemObject(mi);
	clReleaseMemObject(minfo);
	free(W);
}

static void test_precondition(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(65);
	static const size_t dims[][2] = {{1, 7}, {7, 33}, {33, 7}, {100, 127}};

	if (!ctx)
		return;
	for (int t = 0; t < 4; t++)
		for (int in_out = 0; in_out < 2; in_out++) {
			size_t O = dims[t][0], I = dims[t][1], ldg = (in_out ? O : I) + 2;
			size_t rows = in_out ? I : O, cols = in_out ? O : I;
			double *Ai = malloc(I * I * 8), *Bi = malloc(O * O * 8), *G = malloc(rows * ldg * 8);
			double *ref = malloc(O * I * 8);
			float *fA = malloc(I * I * 4), *fB = malloc(O * O * 4), *fG = malloc(rows * ldg * 4);
			float *got = poisoned(O * I);
			cl_mem ma, mb, mg, mp, mt;

			random_spd(&r, Ai, I, 0.1);
			random_spd(&r, Bi, O, 0.1);
			to_float(fA, Ai, I * I);
			to_float(fB, Bi, O * O);
			th_fill_uniform(&r, fG, rows * ldg, -1, 1);
			for (size_t i = 0; i < I * I; i++)
				Ai[i] = fA[i];
			for (size_t i = 0; i < O * O; i++)
				Bi[i] = fB[i];
			for (size_t i = 0; i < rows * ldg; i++)
				G[i] = fG[i];
			ma = dbuf(fA, I * I);
			mb = dbuf(fB, O * O);
			mg = dbuf(fG, rows * ldg);
			mp = dbuf(got, O * I);
			mt = dbuf(NULL, O * I);
			CHECK_OK(clp_kfac_precondition(ctx, clp_buf_at(mp, 0), cols, clp_buf_at(mg, 1),
						       ldg, clp_buf_at(mb, 0), clp_buf_at(ma, 0), O, I,
						       in_out, clp_buf_at(mt, 0)));
			clp_ref_kfac_precondition(ref, G + 1, ldg, Bi, Ai, O, I, in_out);
			get(mp, 0, got, O * I);
			th_close(in_out ? "precondition (in, out)" : "precondition (out, in)", got,
				 ref, O * I, 1e-4, 1e-4);
			(void)cols;
			clReleaseMemObject(ma);
			clReleaseMemObject(mb);
			clReleaseMemObject(mg);
			clReleaseMemObject(mp);
			clReleaseMemObject(mt);
			free(Ai), free(Bi), free(G), free(ref), free(fA), free(fB), free(fG), free(got);
		}
}

static void test_dot_kl_sgd(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(66);
	static const size_t ns[] = {1, 7, 8193, 20001};

	if (!ctx)
		return;
	for (int t = 0; t < 4; t++) {
		size_t n = ns[t];
		float *x = malloc(n * 4), *y = malloc(n * 4), *p = malloc(n * 4), *m = malloc(n * 4);
		float acc[2] = {0.5f, 0}, nu, gstats[4] = {1, 0, 1, 0.5f};
		double dot = 0.5, *rp = malloc(n * 8), *rm = malloc(n * 8), want;
		cl_mem mx, my, ma, mp, mm, mg;
		const float lr = 0.1f, mom = 0.9f, wd = 0.01f, kl = 1e-3f;

		th_fill_uniform(&r, x, n, -1, 1);
		th_fill_uniform(&r, y, n, -1, 1);
		th_fill_uniform(&r, p, n, -1, 1);
		th_fill_uniform(&r, m, n, -0.1f, 0.1f);
		for (size_t i = 0; i < n; i++)
			dot += (double)x[i] * y[i];
		mx = dbuf(x, n), my = dbuf(y, n), ma = dbuf(acc, 2), mp = dbuf(p, n), mm = dbuf(m, n);
		mg = dbuf(gstats, 4);
		CHECK_OK(clp_kfac_dot(ctx, clp_buf_at(ma, 0), clp_buf_at(mx, 0), clp_buf_at(my, 0),
				      n));
		get(ma, 0, acc, 1);
		th_close("dot", acc, &dot, 1, 1e-6, 1e-6);
		/* nu from the accumulated dot and the clip factor 0.5 */
		CHECK_OK(clp_kfac_kl_clip(ctx, clp_buf_at(ma, 1), clp_buf_at(ma, 0),
					  clp_buf_at(mg, 0), lr, kl));
		get(ma, 1, &nu, 1);
		want = fmin(1.0, sqrt(kl / (fabs((double)acc[0]) * lr * lr * 0.25)));
		th_close("kl clip", &nu, &want, 1, 1e-7, 1e-6);
		/* the update with grad x */
		for (size_t i = 0; i < n; i++) {
			double g = (double)x[i] * 0.5 * nu;

			rm[i] = mom * (double)m[i] + g;
			rp[i] = (double)p[i] * (1 - (double)lr * wd) - lr * rm[i];
		}
		CHECK_OK(clp_kfac_sgd(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0), clp_buf_at(mx, 0),
				      n, lr, mom, wd, clp_buf_at(mg, 0), clp_buf_at(ma, 1)));
		get(mp, 0, p, n);
		get(mm, 0, m, n);
		th_close("sgd param", p, rp, n, 1e-6, 1e-6);
		th_close("sgd momentum", m, rm, n, 1e-6, 1e-6);
		/* a non-finite flag skips the update */
		gstats[1] = 1;
		CHECK_OK(clp_cl_write(ctx, mg, 0, 16, gstats));
		CHECK_OK(clp_kfac_sgd(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0), clp_buf_at(mx, 0),
				      n, lr, mom, wd, clp_buf_at(mg, 0), clp_buf_at(ma, 1)));
		get(mp, 0, x, n);
		CHECK(!memcmp(x, p, n * 4), "skipped update changed the parameters");
		clReleaseMemObject(mx), clReleaseMemObject(my), clReleaseMemObject(ma);
		clReleaseMemObject(mp), clReleaseMemObject(mm), clReleaseMemObject(mg);
		free(x), free(y), free(p), free(m), free(rp), free(rm);
	}
}

TH_MAIN(TH_TEST(test_factor), TH_TEST(test_factor_16bit), TH_TEST(test_damping), TH_TEST(test_inverses),
	TH_TEST(test_inverses_gpu_shape), TH_TEST(test_not_positive_definite),
	TH_TEST(test_precondition), TH_TEST(test_dot_kl_sgd))
