/* SOAP's kernels (cl/soap.h) against the double reference (cl/ref/soap_ref.h) on random inputs
 * with odd sizes (1, 7, 33, 127 and non-square combinations): the Householder QR
 * (orthogonality, A = QR, rank-deficient and zero inputs without NaN), the refresh's argsort
 * and permutations, the initial basis by subspace iteration (Q^T A Q diagonal, descending),
 * and whole steps with refreshes (the gradient's scaling, clp_shampoo_momentum's first step,
 * with and without the clip factor; test_shampoo tests that kernel alone); a skipped step
 * leaves W, m, v bitwise; a NaN gradient never passes; bad arguments (a 16-bit gradient among
 * them) are refused. */
#include "tests/nn/nn_test.h"

#include <string.h>

#include "cl/ops.h"
#include "cl/ref/soap_ref.h"
#include "cl/soap.h"

static const size_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {7, 7}, {7, 33}, {33, 7},
				   {33, 127}, {127, 33}, {33, 33}};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static clp_soap_work work_for(size_t rows, size_t cols, cl_mem m[CLP_SOAP_NWORK + 1])
{
	size_t n[CLP_SOAP_NWORK + 1];
	clp_soap_work w;
	clp_buf *b[CLP_SOAP_NWORK + 1] = {&w.x, &w.a, &w.b, &w.r[0], &w.r[1], &w.r[2], &w.est,
					   &w.perm, &w.qr};

	clp_soap_work_sizes(rows, cols, n);
	for (int i = 0; i <= CLP_SOAP_NWORK; i++) {
		m[i] = tn_buf(NULL, n[i] + 3);
		*b[i] = clp_buf_at(m[i], 3); /* offsets are honoured */
	}
	return w;
}

static void release(cl_mem *m, int n)
{
	for (int i = 0; i < n; i++)
		if (m[i])
			clReleaseMemObject(m[i]);
}

static double *dbl(const float *x, size_t n)
{
	double *y = malloc(n * sizeof(*y));

	for (size_t i = 0; i < n; i++)
		y[i] = x[i];
	return y;
}

/* max |Q^T Q - I| of a float d x d */
static double orth_err(const float *q, size_t d)
{
	double e = 0;

	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < d; j++) {
			double s = 0;

			for (size_t k = 0; k < d; k++)
				s += (double)q[k * d + i] * q[k * d + j];
			s -= i == j;
			e = fmax(e, fabs(s));
			if (isnan(s))
				return NAN;
		}
	return e;
}

/* max |A - Q (Q^T A)| / max |A|, and max |(Q^T A)[i, j]| (i > j) / max |A|: A = QR with R upper
 * triangular */
static void qr_errs(const float *a, const float *q, size_t d, double *rec, double *low)
{
	double amax = 0, *r = calloc(d * d, sizeof(*r));

	*rec = *low = 0;
	for (size_t i = 0; i < d * d; i++)
		amax = fmax(amax, fabs(a[i]));
	if (amax == 0)
		amax = 1;
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < d; j++) {
			double s = 0;

			for (size_t k = 0; k < d; k++)
				s += (double)q[k * d + i] * a[k * d + j];
			r[i * d + j] = s;
			if (i > j)
				*low = fmax(*low, fabs(s) / amax);
		}
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < d; j++) {
			double s = 0;

			for (size_t k = 0; k < d; k++)
				s += (double)q[i * d + k] * r[k * d + j];
			*rec = fmax(*rec, fabs(s - a[i * d + j]) / amax);
		}
	free(r);
}

/* kind 0 random, 1 rank-deficient (d x k times k x d, k = d / 3), 2 zero columns and rows,
 * 3 all zero */
static void make_a(th_rng *r, size_t d, int kind, float *a)
{
	if (kind == 0 || kind == 2) {
		th_fill_uniform(r, a, d * d, -1, 1);
		if (kind == 2)
			for (size_t i = 0; i < d; i++) {
				a[i * d + d / 2] = 0;
				a[(d / 3) * d + i] = 0;
			}
	} else if (kind == 1) {
		size_t k = d / 3 ? d / 3 : 1;
		float *u = tn_rand(r, d * k, -1, 1), *v = tn_rand(r, k * d, -1, 1);

		for (size_t i = 0; i < d; i++)
			for (size_t j = 0; j < d; j++) {
				double s = 0;

				for (size_t l = 0; l < k; l++)
					s += (double)u[i * k + l] * v[l * d + j];
				a[i * d + j] = (float)s;
			}
		free(u), free(v);
	} else {
		memset(a, 0, d * d * 4);
	}
}

static void test_qr(void)
{
	static const size_t sizes[] = {1, 2, 7, 33, 127};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(482);

	if (!ctx)
		return;
	for (size_t t = 0; t < 5; t++)
		for (int kind = 0; kind < 4; kind++) {
			const size_t d = sizes[t];
			cl_mem wm[CLP_SOAP_NWORK + 1];
			clp_soap_work w = work_for(d, d, wm);
			float *a = malloc(d * d * 4), *q = malloc(d * d * 4);
			double *ad, *rq = malloc(d * d * 8), rec, low, oe;
			cl_mem ma, mq;
			char what[64];

			make_a(&r, d, kind, a);
			ad = dbl(a, d * d);
			ma = tn_buf(a, d * d), mq = tn_buf(NULL, d * d);
			CHECK_OK(clp_soap_qr(ctx, clp_buf_at(ma, 0), d, clp_buf_at(mq, 0), &w));
			tn_get(mq, 0, q, d * d);
			snprintf(what, sizeof(what), "soap qr d=%zu kind=%d", d, kind);
			oe = orth_err(q, d);
			qr_errs(a, q, d, &rec, &low);
			/* Householder QR in fp32: ||Q^T Q - I|| and ||A - QR|| / ||A|| ~ d u; the
			 * entries' bound 4e-6 d^(1/2) holds with margin (measured below 1e-6 at 127) */
			CHECK(oe <= 1e-6 * (1 + sqrt((double)d)) * 4, "%s: |Q^T Q - I| %.3g", what,
			      oe);
			CHECK(rec <= 1e-6 * (1 + sqrt((double)d)) * 4 && low <= 1e-6 * (1 +
			      sqrt((double)d)) * 4, "%s: |A - QR| %.3g, R's lower part %.3g", what,
			      rec, low);
			/* full rank: the same reflectors as the reference, so the same Q (the first
			 * columns of a rank-deficient A are determined too, the completion is not) */
			CHECK(clp_ref_soap_qr(ad, d, rq) == 0, "reference");
			if (kind == 0)
				th_close(what, q, rq, d * d, 2e-5 * sqrt((double)d), 0);
			release(wm, CLP_SOAP_NWORK + 1);
			release((cl_mem[]){ma, mq}, 2);
			free(a), free(q), free(ad), free(rq);
		}
}

/* a = G G^T / k + diag(spread) for n x k G: separated eigenvalues */
static void spd(th_rng *r, size_t n, size_t k, float *a)
{
	float *g = tn_rand(r, n * k, -1, 1);

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			double s = i == j ? 2.0 * (double)(n - i) / (double)n : 0;

			for (size_t l = 0; l < k; l++)
				s += (double)g[i * k + l] * g[j * k + l] / (double)k;
			a[i * n + j] = (float)s;
		}
	for (size_t i = 0; i < n; i++) /* exactly symmetric */
		for (size_t j = 0; j < i; j++)
			a[i * n + j] = a[j * n + i];
	free(g);
}

static void test_basis(void)
{
	static const size_t sizes[] = {1, 7, 33, 127};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(483);

	if (!ctx)
		return;
	for (size_t t = 0; t < 4; t++) {
		const size_t d = sizes[t];
		cl_mem wm[CLP_SOAP_NWORK + 1];
		clp_soap_work w = work_for(d, d, wm);
		float *a = malloc(d * d * 4), *q = malloc(d * d * 4), *q0 = tn_rand(&r, d * d, -1, 1);
		unsigned *perm = malloc(d * 4), *rperm = malloc(d * 4);
		double *ad, *rq0, *rq = malloc(d * d * 8), offd = 0, dmax = 0;
		cl_mem ma, mq, mq0, mqn, mp;
		char what[64];
		int desc = 1;

		spd(&r, d, d + 3, a);
		ad = dbl(a, d * d);
		ma = tn_buf(a, d * d), mq = tn_buf(NULL, d * d), mqn = tn_buf(NULL, d * d);
		mp = tn_buf(NULL, d);
		/* one refresh from an orthogonal q0 (the reference's QR of random numbers) */
		rq0 = dbl(q0, d * d);
		CHECK(clp_ref_soap_qr(rq0, d, rq) == 0, "reference");
		for (size_t i = 0; i < d * d; i++)
			q0[i] = (float)rq[i], rq0[i] = q0[i];
		mq0 = tn_buf(q0, d * d);
		CHECK_OK(clp_soap_basis_next(ctx, clp_buf_at(ma, 0), clp_buf_at(mq0, 0), d,
					     clp_buf_at(mqn, 0), clp_buf_at(mp, 0), &w));
		CHECK(clp_ref_soap_basis_next(ad, rq0, d, rq, rperm) == 0, "reference");
		tn_get(mqn, 0, q, d * d);
		tn_get(mp, 0, perm, d);
		snprintf(what, sizeof(what), "soap basis_next d=%zu", d);
		CHECK(memcmp(perm, rperm, d * 4) == 0, "%s: the permutation differs", what);
		th_close(what, q, rq, d * d, 1e-4, 0);
		/* the initial basis: clp_soap_basis_init is eye and then `iters` rounds of the
		 * basis_next just compared. At d = 127, its default 3 rounds against 3 rounds of the
		 * double reference from I (each round's tolerance as above, three of them); up to
		 * d = 33 also 200 rounds, the subspace iteration converged (eigenvalue ratios of
		 * neighbours ~ 1 - 1/d here, so the columns converge slowly: a generous bound; at
		 * 127 the 200 rounds are ~80k launches, 80 s on llvmpipe, for no other kernel) */
		if (d > 33) {
			double *rqi = calloc(d * d, 8), *rqn = malloc(d * d * 8);

			for (size_t i = 0; i < d; i++)
				rqi[i * d + i] = 1;
			for (int it = 0; it < 3; it++) {
				CHECK(clp_ref_soap_basis_next(ad, rqi, d, rqn, rperm) == 0, "reference");
				memcpy(rqi, rqn, d * d * 8);
			}
			CHECK_OK(clp_soap_basis_init(ctx, clp_buf_at(ma, 0), d, clp_buf_at(mq, 0), 3,
						     &w));
			tn_get(mq, 0, q, d * d);
			snprintf(what, sizeof(what), "soap basis_init d=%zu, 3 rounds", d);
			CHECK(orth_err(q, d) <= 1e-5, "%s: |Q^T Q - I| %.3g", what, orth_err(q, d));
			th_close(what, q, rqi, d * d, 3e-4, 0);
			free(rqi), free(rqn);
		} else {
			CHECK_OK(clp_soap_basis_init(ctx, clp_buf_at(ma, 0), d, clp_buf_at(mq, 0), 200,
						     &w));
			tn_get(mq, 0, q, d * d);
			snprintf(what, sizeof(what), "soap basis_init d=%zu", d);
			CHECK(orth_err(q, d) <= 1e-5, "%s: |Q^T Q - I| %.3g", what, orth_err(q, d));
			{
				double *e = malloc(d * 8);

				for (size_t i = 0; i < d; i++)
					for (size_t j = 0; j < d; j++) {
						double s = 0;

						for (size_t k = 0; k < d; k++)
							for (size_t l = 0; l < d; l++)
								s += (double)q[k * d + i] *
								     ad[k * d + l] * q[l * d + j];
						if (i == j)
							e[i] = s, dmax = fmax(dmax, fabs(s));
						else
							offd = fmax(offd, fabs(s));
					}
				for (size_t i = 1; i < d; i++)
					desc &= e[i] <= e[i - 1];
				free(e);
			}
			CHECK(desc, "%s: diagonal not descending", what);
			CHECK(offd <= 1e-2 * dmax, "%s: off-diagonal %.3g of %.3g", what, offd, dmax);
			printf("%s: off-diagonal %.3g of max diagonal %.3g\n", what, offd, dmax);
		}
		release(wm, CLP_SOAP_NWORK + 1);
		release((cl_mem[]){ma, mq, mq0, mqn, mp}, 5);
		free(a), free(q), free(q0), free(perm), free(rperm), free(ad), free(rq0), free(rq);
	}
}

static void test_permute(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(484);

	if (!ctx)
		return;
	for (size_t s = 0; s < NSHAPES; s++)
		for (int axis = 0; axis < 2; axis++) {
			const size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
			const size_t d = axis ? cols : rows;
			cl_mem wm[CLP_SOAP_NWORK + 1];
			clp_soap_work w = work_for(rows, cols, wm);
			float *v = tn_rand(&r, n, -1, 1), *got = malloc(n * 4);
			unsigned *perm = malloc(d * 4);
			double *rv = dbl(v, n);
			cl_mem mv, mp;

			for (size_t i = 0; i < d; i++)
				perm[i] = (unsigned)i;
			for (size_t i = d; i > 1; i--) {
				size_t j = th_next(&r) % i;
				unsigned x = perm[i - 1];

				perm[i - 1] = perm[j], perm[j] = x;
			}
			mv = tn_buf(v, n), mp = tn_buf(perm, d);
			CHECK_OK(clp_soap_permute(ctx, clp_buf_at(mv, 0), rows, cols, axis,
						  clp_buf_at(mp, 0), &w));
			CHECK(clp_ref_soap_permute(rv, rows, cols, axis, perm) == 0, "reference");
			tn_get(mv, 0, got, n);
			th_close("soap permute", got, rv, n, 0, 0);
			release(wm, CLP_SOAP_NWORK + 1);
			release((cl_mem[]){mv, mp}, 2);
			free(v), free(got), free(perm), free(rv);
		}
}

static void get_dbl(cl_mem m, double *out, size_t n)
{
	float *f = malloc(n * 4);

	tn_get(m, 0, f, n);
	for (size_t i = 0; i < n; i++)
		out[i] = f[i];
	free(f);
}

/* Ten steps of each shape, refreshes every third, weight decay, the bias correction; the
 * device's and the reference's state compared after each step. The reference restarts from
 * the device's state after each step (its fp32 state rounded to double), so each comparison
 * is of one step's error, not of the divergence of two runs. */
static void test_update(void)
{
	double worst_upd = 0;
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(485);

	if (!ctx)
		return;
	for (size_t s = 0; s < NSHAPES; s++) {
		const size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
		cl_mem wm[CLP_SOAP_NWORK + 1];
		clp_soap_work w = work_for(rows, cols, wm);
		float *p = tn_rand(&r, n, -1, 1), *g = malloc(n * 4), *got = malloc(n * 4);
		float *before = malloc(3 * n * 4), *zero = calloc(rows * rows + cols * cols + n, 4);
		double *rp = malloc(n * 8), *rm = malloc(n * 8), *rv = malloc(n * 8);
		double *rl = malloc(rows * rows * 8), *rr = malloc(cols * cols * 8);
		double *rql = malloc(rows * rows * 8), *rqr = malloc(cols * cols * 8);
		const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f}, skip[4] = {NAN, 1, NAN, 0};
		cl_mem mp = tn_buf(p, n), mm = tn_buf(zero, n), mv = tn_buf(zero, n);
		cl_mem mg = tn_buf(NULL, n), ml = tn_buf(zero, rows * rows);
		cl_mem mr = tn_buf(zero, cols * cols), mql = tn_buf(NULL, rows * rows);
		cl_mem mqr = tn_buf(NULL, cols * cols), ms = tn_buf(stats, 4);
		clp_soap_hp hp = {.lr = 3e-3f, .beta1 = 0.95f, .beta2 = 0.95f, .shampoo_beta = 0.9f,
				  .eps = 1e-8f, .weight_decay = 0.01f, .correct_bias = 1,
				  .init_iters = 3};
		char what[96];
		double *p_prev = malloc(n * 8);

		for (long t = 1; t <= 10; t++) {
			const int with_stats = t == 4;

			th_fill_uniform(&r, g, n, -1, 1);
			CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
			hp.t = t;
			hp.refresh = t >= 2 && (t - 1) % 3 == 0;
			get_dbl(mp, rp, n), get_dbl(mm, rm, n), get_dbl(mv, rv, n);
			memcpy(p_prev, rp, n * 8);
			get_dbl(ml, rl, rows * rows), get_dbl(mr, rr, cols * cols);
			get_dbl(mql, rql, rows * rows), get_dbl(mqr, rqr, cols * cols);
			CHECK_OK(clp_soap_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0),
						 clp_buf_at(mv, 0), clp_buf_at(mg, 0),
						 clp_buf_at(ml, 0), clp_buf_at(mr, 0),
						 clp_buf_at(mql, 0), clp_buf_at(mqr, 0), rows, cols,
						 &hp, with_stats ? clp_buf_at(ms, 0)
								 : clp_buf_at(NULL, 0), 0.75f, &w));
			CHECK(clp_ref_soap_step(rp, rm, rv, rl, rr, rql, rqr, g, rows, cols, &hp,
						with_stats ? 0.375 : 0.75, 0) == 0, "reference");
			snprintf(what, sizeof(what), "soap step %zux%zu t=%ld refresh=%d", rows,
				 cols, t, hp.refresh);
			/* one step's fp32 error: the parameters move by ~lr per entry, m and v are
			 * lerps of O(1) values, the statistics fp32 products of O(1) entries with up to
			 * 127 terms */
			/* the parameters: the update's normalised error (an entry of the ratio whose
			 * projected gradient is near 0 is the ratio of two separately rounded
			 * projections, so single entries of the direction carry relative errors far
			 * above u: the norm is what a step's accuracy means), and each entry within
			 * 1e-3 of the step's size */
			tn_get(mp, 0, got, n);
			{
				double *dr = malloc(n * 8), *pd = malloc(n * 8), e;
				float *dg = malloc(n * 4);
				const double sz = hp.lr * 5; /* |step| |ratio| <= lr sqrt(1-b2)/(1-b1) */

				get_dbl(mp, pd, n);
				for (size_t i = 0; i < n; i++)
					dg[i] = (float)(pd[i] - p_prev[i]), dr[i] = rp[i] - p_prev[i];
				e = th_norm_err(dg, dr, n);
				/* 3e-4: measured worst 1.12e-4 on every implementation (the 1 x 1
				 * matrix at t = 7, whose m is a lerp of gradients of both signs:
				 * its cancellation leaves m's fp32 rounding 1e-4 of m) */
				if (t >= 2)
					CHECK(e <= 3e-4, "%s: the update's normalised error %.3g", what,
					      e);
				worst_upd = fmax(worst_upd, t >= 2 ? e : 0);
				th_close(what, got, rp, n, 1e-3 * sz, 1e-6);
				free(dr), free(pd), free(dg);
			}
			tn_get(mm, 0, got, n);
			th_close(what, got, rm, n, 1e-6, 1e-5);
			tn_get(mv, 0, got, n);
			th_close(what, got, rv, n, 1e-6, 1e-4);
			{
				float *gs = malloc((rows * rows + cols * cols) * 4);

				tn_get(ml, 0, gs, rows * rows);
				tn_get(mr, 0, gs + rows * rows, cols * cols);
				th_close(what, gs, rl, rows * rows, 1e-5, 1e-5);
				th_close(what, gs + rows * rows, rr, cols * cols, 1e-5, 1e-5);
				free(gs);
			}
		}
		/* the non-finite flag: W, m and v bitwise unchanged */
		tn_get(mp, 0, before, n), tn_get(mm, 0, before + n, n), tn_get(mv, 0, before + 2 * n, n);
		CHECK_OK(clp_cl_write(ctx, ms, 0, 16, skip));
		hp.t = 11, hp.refresh = 0;
		CHECK_OK(clp_soap_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0), clp_buf_at(mv, 0),
					 clp_buf_at(mg, 0), clp_buf_at(ml, 0), clp_buf_at(mr, 0),
					 clp_buf_at(mql, 0), clp_buf_at(mqr, 0), rows, cols, &hp,
					 clp_buf_at(ms, 0), 1.0f, &w));
		tn_get(mp, 0, got, n);
		CHECK(memcmp(got, before, n * 4) == 0, "%s: skipped step changed W", what);
		tn_get(mm, 0, got, n);
		CHECK(memcmp(got, before + n, n * 4) == 0, "%s: skipped step changed m", what);
		tn_get(mv, 0, got, n);
		CHECK(memcmp(got, before + 2 * n, n * 4) == 0, "%s: skipped step changed v", what);
		/* a NaN in the gradient (no statistics to catch it) shows in the parameters */
		g[n / 2] = NAN;
		hp.t = 12;
		CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
		CHECK_OK(clp_soap_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0), clp_buf_at(mv, 0),
					 clp_buf_at(mg, 0), clp_buf_at(ml, 0), clp_buf_at(mr, 0),
					 clp_buf_at(mql, 0), clp_buf_at(mqr, 0), rows, cols, &hp,
					 clp_buf_at(NULL, 0), 1.0f, &w));
		tn_get(mp, 0, got, n);
		CHECK(isnan(got[n / 2]), "%s: a NaN gradient left a finite parameter", what);
		release(wm, CLP_SOAP_NWORK + 1);
		release((cl_mem[]){mp, mm, mv, mg, ml, mr, mql, mqr, ms}, 9);
		free(p), free(g), free(got), free(before), free(zero);
		free(rp), free(rm), free(rv), free(rl), free(rr), free(rql), free(rqr), free(p_prev);
	}
	printf("soap steps: worst normalised error of an update %.3g\n", worst_upd);
}

static void test_bad_args(void)
{
	clp_cl_ctx *ctx = th_ctx();
	cl_mem wm[CLP_SOAP_NWORK + 1], m;
	clp_soap_work w;
	clp_soap_hp hp = {.lr = 1e-3f, .beta1 = 0.95f, .beta2 = 0.95f, .shampoo_beta = 0.95f,
			  .eps = 1e-8f, .t = 2};
	clp_buf b;

	if (!ctx)
		return;
	w = work_for(7, 7, wm);
	m = tn_buf(NULL, 49);
	b = clp_buf_at(m, 0);
	CHECK_ERR(clp_soap_qr(ctx, b, 7, b, &w), CLP_ERR_INVALID, "soap qr");
	CHECK_ERR(clp_soap_basis_next(ctx, b, b, 7, w.r[2], b, &w), CLP_ERR_INVALID, "soap basis");
	CHECK_ERR(clp_soap_basis_init(ctx, b, 7, b, -1, &w), CLP_ERR_INVALID, "rounds");
	CHECK_ERR(clp_soap_permute(ctx, b, 7, 7, 2, b, &w), CLP_ERR_INVALID, "axis");
	CHECK_ERR(clp_soap_stats(ctx, b, 7, 7, b, b, 1.5f), CLP_ERR_INVALID, "shampoo_beta");
	hp.beta1 = 1.0f;
	CHECK_ERR(clp_soap_adam(ctx, b, b, b, w.x, b, b, 7, 7, &hp, CLP_BUF_NONE, &w),
		  CLP_ERR_INVALID, "betas");
	hp.beta1 = 0.95f, hp.t = 1;
	CHECK_ERR(clp_soap_adam(ctx, b, b, b, w.x, b, b, 7, 7, &hp, CLP_BUF_NONE, &w),
		  CLP_ERR_INVALID, "starts at 2");
	hp.t = 0;
	CHECK_ERR(clp_soap_update(ctx, b, b, b, b, b, b, b, b, 7, 7, &hp, CLP_BUF_NONE, 1.0f, &w),
		  CLP_ERR_INVALID, "step");
	hp.t = 2;
	CHECK_ERR(clp_soap_update(ctx, b, b, b, b, b, b, w.r[0], b, 7, 7, &hp, CLP_BUF_NONE, 1.0f,
				  &w), CLP_ERR_INVALID, "scratch");
	CHECK_ERR(clp_soap_update(ctx, b, b, b, clp_buf_typed(m, 0, CLP_BF16), b, b, b, b, 7, 7,
				  &hp, CLP_BUF_NONE, 1.0f, &w), CLP_ERR_INVALID, "grad is bf16");
	release(wm, CLP_SOAP_NWORK + 1);
	clReleaseMemObject(m);
}

TH_MAIN(TH_TEST(test_qr), TH_TEST(test_basis), TH_TEST(test_permute),
	TH_TEST(test_update), TH_TEST(test_bad_args))
