/* clpipe check cases of the GEMM (cl/gemm.h): each backend (packed, tiled, CLBlast, direct) forced
 * through the tuning, both transposes, element offsets and padded leading dimensions, alpha and
 * beta (beta = 0 over a NaN C), A, B and C each in fp32 or the case's 16-bit type, against
 * clp_ref_gemm with tests/cl/test_gemm.c's elementwise bound; and the bias in the store
 * (clp_cl_gemm_bias; the caller's clp_nn_bias_forward where the backend leaves it), its
 * addition one more rounding of C's storage. */
#include <math.h>
#include <string.h>

#include "cl/check/check_internal.h"
#include "cl/ref/nn_ref.h"
#include "cl/ref/ref.h"

/* d[5] bits: A, B, C in the case's 16-bit type; beta != 0 */
#define GM_A 1u
#define GM_B 2u
#define GM_C 4u
#define GM_BETA 8u
#define GM_BIAS 16u /* + bias (n, C's type) through clp_cl_gemm_bias; C dense (ldc = n) */
#define GM_GELU 32u /* and act = gelu(C) (tanh; erf with beta) through clp_cl_gemm_bias_gelu */

static const clp_gemm_backend backends[] = {CLP_GEMM_PACKED, CLP_GEMM_TILED, CLP_GEMM_CLBLAST,
					    CLP_GEMM_DIRECT};

static clp_status use_backend(ck_env *e, int variant)
{
	const clp_gemm_tuning *cur;
	clp_gemm_tuning t;
	clp_status s;

	if (e->gemm_backend == variant + 1)
		return CLP_OK;
	if (!e->gemm_backend) {
		CLP_TRY(clp_cl_gemm_tuning(e->ctx, &cur));
		e->gemm_saved = *cur;
	}
	s = clp_gemm_tuning_lookup(clp_cl_ctx_device(e->ctx), backends[variant], &t);
	if (s == CLP_ERR_NOT_FOUND) { /* no table entry for this device: the backend's defaults */
		clp_error_clear();
		memset(&t, 0, sizeof(t));
		t.backend = backends[variant];
		snprintf(t.source, sizeof(t.source), "defaults");
	} else if (s != CLP_OK) {
		return s;
	}
	CLP_TRY(clp_cl_gemm_set_tuning(e->ctx, &t));
	e->gemm_backend = variant + 1;
	return CLP_OK;
}

clp_status ck_gemm_restore(ck_env *e)
{
	if (!e->gemm_backend)
		return CLP_OK;
	e->gemm_backend = 0;
	return clp_cl_gemm_set_tuning(e->ctx, &e->gemm_saved);
}

/* The elementwise bound of tests/cl/test_gemm.c: (4 sqrt(k) + 8) fp32 units of
 * |alpha| sum |a||b| + |beta c|, and for a 16-bit C its one rounding on top. */
static void bound(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
		  size_t lda, const float *b, size_t ldb, float beta, const float *c0, size_t ldc,
		  clp_dtype ct, const double *ref, double *tol)
{
	const double u = 1.0 / 16777216.0;
	const double uc = ct == CLP_BF16 ? 1.0 / 256 : ct == CLP_F16 ? 1.0 / 2048 : 0;
	const double tiny = ct == CLP_F16 ? ldexp(1.0, -25) : 0;

	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0, t;

			for (size_t p = 0; p < k; p++)
				s += fabs(ta ? a[p * lda + i] : a[i * lda + p]) *
				     fabs(tb ? b[j * ldb + p] : b[p * ldb + j]);
			t = (4 * sqrt((double)k) + 8) * u *
				    (fabs(alpha) * s + fabs(beta * c0[i * ldc + j])) + 1e-30;
			tol[i * n + j] = t + uc * (fabs(ref[i * n + j]) + t) + tiny;
		}
}

clp_status ck_run_gemm(ck_env *e, const ck_case *c)
{
	const size_t m = c->d[0], n = c->d[1], k = c->d[2];
	const int ta = c->d[3] != 0, tb = c->d[4] != 0;
	const unsigned bits = (unsigned)c->d[5];
	const clp_dtype at = bits & GM_A ? c->dt : CLP_F32, bt = bits & GM_B ? c->dt : CLP_F32;
	const clp_dtype ct = bits & GM_C ? c->dt : CLP_F32;
	const float alpha = bits & GM_BETA ? -1.5f : 1.0f, beta = bits & GM_BETA ? 0.5f : 0.0f;
	const int hb = (bits & GM_BIAS) != 0, hg = hb && (bits & GM_GELU);
	const clp_nn_gelu kind = bits & GM_BETA ? CLP_NN_GELU_ERF : CLP_NN_GELU_TANH;
	const size_t pad = hb ? 0 : 3;
	const size_t arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
	const size_t lda = acols + pad, ldb = bcols + pad, ldc = n + pad;
	const size_t na = arows * lda, nb = brows * ldb, nc = m * ldc;
	float *a = ck_rand(e, na, -1, 1), *b = ck_rand(e, nb, -1, 1), *c0 = ck_rand(e, nc, -1, 1);
	float *got = ck_alloc(e, nc * 4), *cr = ck_alloc(e, m * n * 4), *gc = ck_alloc(e, m * n * 4);
	double *ref = ck_alloc(e, m * n * 8), *tol = ck_alloc(e, m * n * 8);
	float *bias = hb ? ck_rand(e, n, -1, 1) : NULL;
	clp_buf ba, bb, bc, bbias = CLP_BUF_NONE, bact = CLP_BUF_NONE;
	int fused = 0;

	CK_NEED(a && b && c0 && got && cr && gc && ref && tol && (bias || !hb));
	snprintf(e->dtype, sizeof(e->dtype), "%s*%s->%s", clp_dtype_name(at), clp_dtype_name(bt),
		 clp_dtype_name(ct));
	snprintf(e->extra, sizeof(e->extra), "%c%c%s%s", ta ? 'T' : 'N', tb ? 'T' : 'N',
		 beta != 0.0f ? " beta" : "", hg ? " bias gelu" : hb ? " bias" : "");
	ck_round(at, a, na), ck_round(bt, b, nb), ck_round(ct, c0, nc);
	CLP_TRY(use_backend(e, c->variant));
	CLP_TRY(ck_buf(e, a, na, at, &ba));
	CLP_TRY(ck_buf(e, b, nb, bt, &bb));
	CLP_TRY(ck_buf(e, beta != 0.0f ? c0 : NULL, nc, ct, &bc)); /* beta = 0 must not read C */
	if (hb) {
		ck_round(ct, bias, n);
		CLP_TRY(ck_buf(e, bias, n, ct, &bbias));
	}
	if (hg) { /* as engine/model/stage_fwd.c's MLP up projection */
		CLP_TRY(ck_buf(e, NULL, nc, ct, &bact));
		if (clp_nn_gelu_store_ok(e->ctx, n))
			CLP_TRY(clp_cl_gemm_bias_gelu(e->ctx, (clp_trans)ta, (clp_trans)tb, m, n, k,
						      alpha, ba, lda, bb, ldb, beta, bc, ldc, bbias,
						      bact, (int)kind, &fused));
		else
			CLP_TRY(clp_cl_gemm(e->ctx, (clp_trans)ta, (clp_trans)tb, m, n, k, alpha, ba,
					    lda, bb, ldb, beta, bc, ldc));
		if (!fused)
			CLP_TRY(clp_nn_bias_gelu_forward(e->ctx, bact, bc, bbias, m, n, kind));
	} else {
		CLP_TRY(clp_cl_gemm_bias(e->ctx, (clp_trans)ta, (clp_trans)tb, m, n, k, alpha, ba,
					 lda, bb, ldb, beta, bc, ldc, bbias, &fused));
		if (hb && !fused)
			CLP_TRY(clp_nn_bias_forward(e->ctx, bc, bbias, m, n));
	}
	CLP_TRY(ck_get(e, bc, nc, got));
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			cr[i * n + j] = beta == 0.0f ? 0.0f : c0[i * ldc + j];
			gc[i * n + j] = got[i * ldc + j];
		}
	clp_ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cr, n);
	for (size_t i = 0; i < m * n; i++)
		ref[i] = cr[i];
	bound(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, ct, ref, tol);
	for (size_t i = 0; hb && i < m * n; i++) { /* + bias: one more rounding of C's storage */
		const double ub = ct == CLP_BF16 ? 1.0 / 256 : ct == CLP_F16 ? 1.0 / 2048
									: 1.0 / 16777216.0;

		ref[i] += bias[i % n];
		tol[i] += ub * (fabs(ref[i]) + tol[i]) + (ct == CLP_F16 ? ldexp(1.0, -25) : 0);
	}
	ck_compare_tol(e, "C", gc, ref, tol, m * n);
	if (hg) { /* act against gelu of the device's C: 1e-6 + 1e-5 |x| (bias_gelu's), + a
		   * 16-bit rounding */
		float *ga = ck_alloc(e, nc * 4);
		const double ua = ct == CLP_BF16 ? 1.0 / 256 : ct == CLP_F16 ? 1.0 / 2048 : 0;

		CK_NEED(ga);
		CLP_TRY(ck_get(e, bact, nc, ga));
		clp_ref_gelu_forward(ref, gc, m * n, kind);
		for (size_t i = 0; i < m * n; i++)
			tol[i] = 1e-6 + (1e-5 + 2 * ua) * fabs(ref[i]) +
				 (ct == CLP_F16 ? ldexp(1.0, -24) : 0);
		ck_compare_tol(e, "act", ga, ref, tol, m * n);
	}
	return CLP_OK;
}
