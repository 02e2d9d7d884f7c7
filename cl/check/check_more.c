/* clpipe check cases of the smaller ops: residual add, dropout, the device random numbers, the
 * storage conversions, the gradient statistics, K-FAC's damping and KL-clipped SGD, and the
 * vector kernels and reductions of cl/ops.h, as tests/nn/test_nn_act*.c, test_nn_rng.c,
 * test_nn_optim.c, tests/cl/test_convert.c, test_ops.c and tests/kfac/test_kfac_kernels.c
 * check them. */
#include <math.h>
#include <string.h>

#include "cl/check/check_internal.h"
#include "cl/convert.h"
#include "cl/kfac.h"
#include "cl/ops.h"
#include "cl/ref/ref.h"
#include "cl/ref/kfac_ref.h"
#include "cl/ref/nn_ref.h"

/* out = a + b; backward da += dout, db += dout (the residual stream) */
clp_status ck_run_residual(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t n = c->d[0];
	float *a = ck_rand(e, n, -1, 1), *b = ck_rand(e, n, -1, 1), *g = ck_rand(e, n, -1, 1);
	float *da0 = ck_rand(e, n, -1, 1), *db0 = ck_rand(e, n, -1, 1), *got = ck_alloc(e, n * 4);
	double *ref = ck_alloc(e, n * 8), *dra = ck_dbl(e, da0, n), *drb = ck_dbl(e, db0, n);
	clp_buf ba, bb, bo, bg, bda, bdb;

	CK_NEED(a && b && g && da0 && db0 && got && ref && dra && drb);
	ck_round(dt, a, n), ck_round(dt, b, n);
	CLP_TRY(ck_buf(e, a, n, dt, &ba));
	CLP_TRY(ck_buf(e, b, n, dt, &bb));
	CLP_TRY(ck_buf(e, NULL, n, dt, &bo));
	CLP_TRY(ck_buf(e, g, n, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, da0, n, CLP_F32, &bda));
	CLP_TRY(ck_buf(e, db0, n, CLP_F32, &bdb));
	clp_ref_residual_forward_st(dt, ref, a, b, n);
	for (size_t i = 0; i < n; i++)
		dra[i] += g[i], drb[i] += g[i];
	CLP_TRY(clp_nn_residual_forward(e->ctx, bo, ba, bb, n));
	CLP_TRY(clp_nn_residual_backward(e->ctx, bda, bdb, bg, n));
	CLP_TRY(ck_get(e, bo, n, got));
	ck_compare(e, "out", dt, got, ref, n, op->out[dt]);
	CLP_TRY(ck_get(e, bda, n, got));
	ck_compare(e, "da", CLP_F32, got, dra, n, op->grad);
	CLP_TRY(ck_get(e, bdb, n, got));
	ck_compare(e, "db", CLP_F32, got, drb, n, op->grad);
	return CLP_OK;
}

/* p = 0.5 (variant 0) scales by exactly 2: bitwise in every type; p = 0.1 (variant 1) by the
 * float 1/(1-p) on the device and the double one in the reference */
clp_status ck_run_dropout(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t n = c->d[0];
	const float p = c->variant ? 0.1f : 0.5f;
	float *x = ck_rand(e, n, 0.5f, 1.5f), *g = ck_rand(e, n, -1, 1), *d0 = ck_rand(e, n, -1, 1);
	float *got = ck_alloc(e, n * 4);
	double *ref = ck_alloc(e, n * 8), *dref = ck_alloc(e, n * 8);
	ck_tol t = op->out[dt];
	clp_rng_stream s;
	clp_buf bx, bo, bg, bd;

	CK_NEED(x && g && d0 && got && ref && dref);
	CLP_TRY(clp_rng_stream_init(&s, 7, 3, 1, 4, CLP_RNG_DROPOUT));
	ck_round(dt, x, n);
	CLP_TRY(ck_buf(e, x, n, dt, &bx));
	CLP_TRY(ck_buf(e, NULL, n, dt, &bo));
	CLP_TRY(ck_buf(e, g, n, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, d0, n, CLP_F32, &bd));
	clp_ref_dropout_st(dt, ref, x, n, p, &s);
	clp_ref_dropout(dref, g, n, p, &s);
	for (size_t i = 0; i < n; i++)
		dref[i] += d0[i];
	CLP_TRY(clp_nn_dropout_forward(e->ctx, bo, bx, n, p, &s));
	CLP_TRY(clp_nn_dropout_backward(e->ctx, bd, bg, n, p, &s));
	CLP_TRY(ck_get(e, bo, n, got));
	if (p == 0.5f)
		t = (ck_tol){0, 0, 0};
	ck_compare(e, "out", dt, got, ref, n, t);
	CLP_TRY(ck_get(e, bd, n, got));
	ck_compare(e, "dinp", CLP_F32, got, dref, n, op->grad);
	return CLP_OK;
}

/* normal, uniform and raw numbers of one stream: the same bits as cl/rng.h on the host (the
 * raw 32-bit numbers compared as their two 16-bit halves, exact in a float) */
clp_status ck_run_rng(ck_env *e, const ck_case *c)
{
	const size_t n = c->d[0];
	const uint64_t first = 12345 * n + 3;
	float *host = ck_alloc(e, 2 * n * 4), *got = ck_alloc(e, 2 * n * 4);
	uint32_t *u = ck_alloc(e, n * 4);
	double *ref = ck_alloc(e, 2 * n * 8);
	clp_rng_stream s;
	clp_buf b;

	CK_NEED(host && got && u && ref);
	CLP_TRY(clp_rng_stream_init(&s, 0x123456789abcdefull, 99, 2, 11, CLP_RNG_INIT));
	CLP_TRY(ck_buf(e, NULL, n, CLP_F32, &b));
	if (c->variant == 0) {
		clp_rng_fill_normal(host, n, &s, first, 0.5f, 0.02f);
		CLP_TRY(clp_nn_rng_normal(e->ctx, b, n, &s, first, 0.5f, 0.02f));
	} else if (c->variant == 1) {
		clp_rng_fill_uniform(host, n, &s, first, -0.1f, 0.3f);
		CLP_TRY(clp_nn_rng_uniform(e->ctx, b, n, &s, first, -0.1f, 0.3f));
	} else {
		CLP_TRY(clp_nn_rng_u32(e->ctx, b, n, &s, first));
	}
	CLP_TRY(ck_get(e, b, n, got));
	if (c->variant == 2) {
		memcpy(u, got, n * 4);
		for (size_t i = n; i-- > 0;) {
			uint32_t h = clp_rng_u32(&s, first + i);

			got[2 * i] = (float)(u[i] >> 16), got[2 * i + 1] = (float)(u[i] & 0xffffu);
			ref[2 * i] = (double)(h >> 16), ref[2 * i + 1] = (double)(h & 0xffffu);
		}
		ck_compare(e, "bits", CLP_F32, got, ref, 2 * n, c->op->out[CLP_F32]);
		return CLP_OK;
	}
	for (size_t i = 0; i < n; i++)
		ref[i] = host[i];
	ck_compare(e, "bits", CLP_F32, got, ref, n, c->op->out[CLP_F32]);
	return CLP_OK;
}

/* fp32 -> the case's 16-bit type -> fp32 on the device, against cl/half.h's rounding: values
 * over the whole exponent range (subnormals, overflow to infinity), NaN, infinities, zeros */
clp_status ck_run_convert(ck_env *e, const ck_case *c)
{
	const clp_dtype dt = c->dt;
	const size_t n = c->d[0];
	float *x = ck_rand(e, n, -1, 1), *got = ck_alloc(e, n * 4);
	double *ref = ck_alloc(e, n * 8);
	static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 65504.0f, 65520.0f,
					5.96e-8f, 2.9e-8f, 3.0e38f};
	clp_buf bx, bh, by;

	CK_NEED(x && got && ref);
	for (size_t i = 0; i < n; i++)
		x[i] = ldexpf(x[i], (int)(ck_next(e) % 80) - 40);
	for (size_t i = 0; i < n && i < sizeof(special) / sizeof(special[0]); i++)
		x[(i * 7) % n] = special[i];
	for (size_t i = 0; i < n; i++)
		ref[i] = clp_dtype_round(dt, x[i]);
	CLP_TRY(ck_buf(e, x, n, CLP_F32, &bx));
	CLP_TRY(ck_buf(e, NULL, n, dt, &bh));
	CLP_TRY(ck_buf(e, NULL, n, CLP_F32, &by));
	CLP_TRY(clp_cl_convert(e->ctx, bh, dt, bx, CLP_F32, n));
	CLP_TRY(clp_cl_convert(e->ctx, by, CLP_F32, bh, dt, n));
	CLP_TRY(ck_get(e, bh, n, got));
	ck_compare(e, "to 16-bit", dt, got, ref, n, c->op->out[dt]);
	CLP_TRY(ck_get(e, by, n, got));
	ck_compare(e, "back", dt, got, ref, n, c->op->out[dt]);
	return CLP_OK;
}

/* the global norm over three tensors (n, 2n + 1, 7 elements) with clipping at 1 (variant 0),
 * without (1), and with a NaN in the second (2): flagged, factor 0 */
clp_status ck_run_grad_stats(ck_env *e, const ck_case *c)
{
	const size_t n = c->d[0];
	const size_t sizes[3] = {n, 2 * n + 1, 7};
	clp_buf bufs[3], bs;
	float st[4];
	double ss = 0, want[4];

	for (int i = 0; i < 3; i++) {
		float *x = ck_rand(e, sizes[i], -1, 1);

		CK_NEED(x);
		if (c->variant == 2 && i == 1)
			x[sizes[i] / 2] = NAN;
		for (size_t j = 0; j < sizes[i]; j++)
			ss += (double)x[j] * x[j];
		CLP_TRY(ck_buf(e, x, sizes[i], CLP_F32, &bufs[i]));
	}
	CLP_TRY(ck_buf(e, NULL, 4, CLP_F32, &bs));
	CLP_TRY(clp_nn_grad_stats(e->ctx, bs, bufs, sizes, 3, c->variant == 1 ? 0.0f : 1.0f));
	CLP_TRY(ck_get(e, bs, 4, st));
	want[0] = ss, want[1] = 0, want[2] = sqrt(ss);
	want[3] = c->variant == 1 ? 1 : fmin(1.0, 1.0 / (sqrt(ss) + 1e-6));
	if (c->variant == 2) { /* the flag and the factor; the sums of a NaN are unspecified */
		double w[2] = {1, 0};
		float g[2] = {st[CLP_NN_GSTAT_NONFINITE], st[CLP_NN_GSTAT_SCALE]};

		ck_compare(e, "flag,scale", CLP_F32, g, w, 2, c->op->out[CLP_F32]);
		return CLP_OK;
	}
	ck_compare(e, "stats", CLP_F32, st, want, 4, c->op->out[CLP_F32]);
	return CLP_OK;
}

/* the damping of a layer with A (dA) and three B blocks, then the damped copy of A */
clp_status ck_run_kfac_damping(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const size_t dA = c->d[0], dB[3] = {c->d[1], c->d[1], c->d[2]};
	const float lambda = c->variant ? 1e-20f : 0.03f;
	float *fA = ck_alloc(e, dA * dA * 4), *W = ck_alloc(e, dA * dA * 4);
	double *A = ck_spd(e, dA, 0.0, fA), *ref = ck_alloc(e, dA * dA * 8), want[3], w4[4];
	const double *Bc[3];
	clp_buf bA, bB[3], bs, bw;
	float st[CLP_KFAC_NSTATS], g[4];

	CK_NEED(fA && W && A && ref);
	CLP_TRY(ck_buf(e, fA, dA * dA, CLP_F32, &bA));
	for (int i = 0; i < 3; i++) {
		float *fB = ck_alloc(e, dB[i] * dB[i] * 4);
		double *B = fB ? ck_spd(e, dB[i], 0.0, fB) : NULL;

		CK_NEED(B);
		for (size_t j = 0; j < dB[i] * dB[i]; j++) { /* blocks of different scales */
			fB[j] = (float)(B[j] * (i + 1) * 10);
			B[j] = fB[j];
		}
		Bc[i] = B;
		CLP_TRY(ck_buf(e, fB, dB[i] * dB[i], CLP_F32, &bB[i]));
	}
	if (clp_ref_kfac_damping(want, A, dA, Bc, dB, 3, lambda))
		return clp_error(CLP_ERR_NUMERIC, "check: the reference flagged a random layer");
	CLP_TRY(ck_buf(e, NULL, CLP_KFAC_NSTATS, CLP_F32, &bs));
	CLP_TRY(ck_buf(e, NULL, dA * dA, CLP_F32, &bw));
	CLP_TRY(clp_kfac_damping(e->ctx, bs, bA, dA, bB, dB, 3, lambda));
	CLP_TRY(clp_kfac_damped_copy(e->ctx, bw, bA, dA, bs, 0));
	CLP_TRY(ck_get(e, bs, CLP_KFAC_NSTATS, st));
	g[0] = st[CLP_KFAC_S_DAMPA], g[1] = st[CLP_KFAC_S_DAMPB], g[2] = st[CLP_KFAC_S_FLAG];
	g[3] = st[CLP_KFAC_S_PI];
	w4[0] = want[0], w4[1] = want[1], w4[2] = 0, w4[3] = want[2];
	ck_compare(e, "dampA,dampB,flag,pi", CLP_F32, g, w4, 4, op->stat);
	CLP_TRY(ck_get(e, bw, dA * dA, W));
	for (size_t i = 0; i < dA * dA; i++)
		ref[i] = A[i] + (i % (dA + 1) == 0 ? want[0] : 0);
	ck_compare(e, "damped A", CLP_F32, W, ref, dA * dA, op->out[CLP_F32]);
	return CLP_OK;
}

/* acc += x.y, the KL-clip factor from it (clip factor 0.5 in the statistics), the SGD update */
clp_status ck_run_kfac_sgd(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const size_t n = c->d[0];
	const float lr = 0.1f, mom = 0.9f, wd = 0.01f, kl = 1e-3f, gstats[4] = {1, 0, 1, 0.5f};
	float *x = ck_rand(e, n, -1, 1), *y = ck_rand(e, n, -1, 1), *p = ck_rand(e, n, -1, 1);
	float *m = ck_rand(e, n, -0.1f, 0.1f), *got = ck_alloc(e, n * 4), acc[2] = {0.5f, 0}, nu;
	double *rp = ck_alloc(e, n * 8), *rm = ck_alloc(e, n * 8), dot = 0.5, want;
	clp_buf bx, by, ba, bp, bm, bg;

	CK_NEED(x && y && p && m && got && rp && rm);
	for (size_t i = 0; i < n; i++)
		dot += (double)x[i] * y[i];
	CLP_TRY(ck_buf(e, x, n, CLP_F32, &bx));
	CLP_TRY(ck_buf(e, y, n, CLP_F32, &by));
	CLP_TRY(ck_buf(e, acc, 2, CLP_F32, &ba));
	CLP_TRY(ck_buf(e, p, n, CLP_F32, &bp));
	CLP_TRY(ck_buf(e, m, n, CLP_F32, &bm));
	CLP_TRY(ck_buf(e, gstats, 4, CLP_F32, &bg));
	CLP_TRY(clp_kfac_dot(e->ctx, ba, bx, by, n));
	CLP_TRY(clp_kfac_kl_clip(e->ctx, clp_buf_plus(ba, 1), ba, bg, lr, kl));
	CLP_TRY(clp_kfac_sgd(e->ctx, bp, bm, bx, n, lr, mom, wd, bg, clp_buf_plus(ba, 1)));
	CLP_TRY(ck_get(e, ba, 2, acc));
	nu = acc[1];
	ck_compare(e, "dot", CLP_F32, acc, &dot, 1, op->out[CLP_F32]);
	want = fmin(1.0, sqrt(kl / (fabs((double)acc[0]) * lr * lr * 0.25)));
	ck_compare(e, "kl clip", CLP_F32, &nu, &want, 1, op->stat);
	for (size_t i = 0; i < n; i++) {
		double g = (double)x[i] * 0.5 * nu;

		rm[i] = mom * (double)m[i] + g;
		rp[i] = (double)p[i] * (1 - (double)lr * wd) - lr * rm[i];
	}
	CLP_TRY(ck_get(e, bp, n, got));
	ck_compare(e, "param", CLP_F32, got, rp, n, op->out[CLP_F32]);
	CLP_TRY(ck_get(e, bm, n, got));
	ck_compare(e, "momentum", CLP_F32, got, rm, n, op->out[CLP_F32]);
	return CLP_OK;
}

/* the small vector kernels (cl/ops.h) at element offsets: fill, z = x + y, z = x * y (one
 * correctly rounded float operation: bitwise), y = -3 (y + 0.5 x) (two roundings), z = x */
clp_status ck_run_blas1(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const size_t n = c->d[0];
	float *x = ck_rand(e, n, -2, 2), *y = ck_rand(e, n, -2, 2), *got = ck_alloc(e, n * 4);
	double *ref = ck_alloc(e, n * 8);
	clp_buf bx, by, bz;

	CK_NEED(x && y && got && ref);
	CLP_TRY(ck_buf(e, x, n, CLP_F32, &bx));
	CLP_TRY(ck_buf(e, y, n, CLP_F32, &by));
	CLP_TRY(ck_buf(e, NULL, n, CLP_F32, &bz));
	for (size_t i = 0; i < n; i++)
		ref[i] = c->variant == 0 ? 0.25 : c->variant == 1 ? (double)(x[i] + y[i])
			 : c->variant == 2 ? (double)(x[i] * y[i])
			 : c->variant == 3 ? -3.0 * ((double)y[i] + 0.5 * x[i]) : x[i];
	if (c->variant == 0)
		CLP_TRY(clp_cl_fill(e->ctx, bz, 0.25f, n));
	else if (c->variant == 1)
		CLP_TRY(clp_cl_add(e->ctx, bz, bx, by, n));
	else if (c->variant == 2)
		CLP_TRY(clp_cl_mul(e->ctx, bz, bx, by, n));
	else if (c->variant == 4)
		CLP_TRY(clp_cl_copy(e->ctx, bz, bx, n));
	else {
		CLP_TRY(clp_cl_axpy(e->ctx, by, bx, 0.5f, n));
		CLP_TRY(clp_cl_scale(e->ctx, by, -3.0f, n));
		bz = by;
	}
	CLP_TRY(ck_get(e, bz, n, got));
	ck_compare(e, "z", CLP_F32, got, ref, n, c->variant == 3 ? op->stat : op->out[CLP_F32]);
	return CLP_OK;
}

/* sum, sum of squares and 2-norm (compensated) of values of mixed magnitude 1e-6 .. 1e6, all
 * positive (the relative error then measures the summation, not the conditioning) */
clp_status ck_run_reduce(ck_env *e, const ck_case *c)
{
	const size_t n = c->d[0];
	float *x = ck_alloc(e, n * 4), out;
	double ref;
	clp_buf bx, bo;

	CK_NEED(x);
	for (size_t i = 0; i < n; i++) {
		double u = (double)(ck_next(e) >> 11) * 0x1p-53, v = (double)(ck_next(e) >> 11) * 0x1p-53;

		x[i] = (float)(pow(10.0, -6.0 + 12.0 * u) * (0.5 + v));
	}
	ref = c->variant == 0 ? clp_ref_sum(x, n) : clp_ref_sumsq(x, n);
	if (c->variant == 2)
		ref = sqrt(ref);
	CLP_TRY(ck_buf(e, x, n, CLP_F32, &bx));
	CLP_TRY(ck_buf(e, NULL, 1, CLP_F32, &bo));
	if (c->variant == 0)
		CLP_TRY(clp_cl_sum(e->ctx, bo, bx, n));
	else if (c->variant == 1)
		CLP_TRY(clp_cl_sumsq(e->ctx, bo, bx, n));
	else
		CLP_TRY(clp_cl_nrm2(e->ctx, bo, bx, n));
	CLP_TRY(ck_get(e, bo, 1, &out));
	ck_compare(e, "result", CLP_F32, &out, &ref, 1, c->op->out[CLP_F32]);
	return CLP_OK;
}
