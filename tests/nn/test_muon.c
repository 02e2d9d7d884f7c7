/* Muon's kernels (cl/muon.h) against the double reference (cl/ref/muon_ref.h) on random
 * matrices with odd sizes (1, 7, 33, 127; wide, tall and square): the momentum with and
 * without Nesterov, the normalisation, the Newton-Schulz iteration alone and three whole steps
 * (a gradient scale, the clip factor on step 2); a non-finite flag skips the step; a NaN
 * gradient never passes; bad arguments are refused. The one-step-delayed step (muon.delay:
 * clp_muon_ns_phase, clp_muon_delayed_commit) against its reference for three steps, a
 * non-finite one and the step after it. */
#include "tests/nn/nn_test.h"

#include "cl/muon.h"
#include "cl/ops.h"
#include "cl/ref/muon_ref.h"

static const size_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {7, 7}, {7, 33}, {33, 7},
				   {33, 127}, {127, 33}, {33, 33}};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static clp_muon_work work_for(size_t rows, size_t cols, cl_mem m[5])
{
	size_t s = rows < cols ? rows : cols;

	m[0] = tn_buf(NULL, rows * cols), m[1] = tn_buf(NULL, rows * cols);
	m[2] = tn_buf(NULL, s * s), m[3] = tn_buf(NULL, s * s), m[4] = tn_buf(NULL, 4);
	return (clp_muon_work){clp_buf_at(m[0], 0), clp_buf_at(m[1], 0), clp_buf_at(m[2], 0),
			       clp_buf_at(m[3], 0), clp_buf_at(m[4], 1)};
}

static void release(cl_mem *m, int n)
{
	for (int i = 0; i < n; i++)
		if (m[i])
			clReleaseMemObject(m[i]);
}

static void test_momentum(void)
{
	static const size_t sizes[] = {1, 7, 33, 127, 20001};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(291);

	if (!ctx)
		return;
	for (size_t t = 0; t < 5; t++)
		for (int nes = 0; nes < 2; nes++) {
			size_t n = sizes[t];
			float *b = tn_rand(&r, n, -1, 1), *g = tn_rand(&r, n, -2, 2), *got = malloc(n * 4);
			double *rb = malloc(n * 8), *ru = malloc(n * 8);
			const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f};
			cl_mem mb = tn_buf(b, n), mg = tn_buf(g, n), mu = tn_buf(NULL, n);
			cl_mem ms = tn_buf(stats, 4);
			char what[64];

			for (size_t i = 0; i < n; i++) {
				double gr = (double)g[i] * 0.75 * 0.5;

				rb[i] = b[i] + 0.05 * (gr - b[i]);
				ru[i] = nes ? gr + 0.95 * (rb[i] - gr) : rb[i];
			}
			CHECK_OK(clp_muon_momentum(ctx, clp_buf_at(mb, 0), clp_buf_at(mg, 0),
						   clp_buf_at(mu, 0), n, 0.95f, nes, 0.75f,
						   clp_buf_at(ms, 0)));
			snprintf(what, sizeof(what), "muon momentum n=%zu nesterov=%d", n, nes);
			tn_get(mb, 0, got, n);
			th_close(what, got, rb, n, 1e-7, 1e-6);
			tn_get(mu, 0, got, n);
			th_close(what, got, ru, n, 1e-7, 1e-6);
			release((cl_mem[]){mb, mg, mu, ms}, 4);
			free(b), free(g), free(got), free(rb), free(ru);
		}
	CHECK_ERR(clp_muon_momentum(ctx, clp_buf_at(NULL, 0), clp_buf_at(NULL, 0),
				    clp_buf_at(NULL, 0), 1, 1.0f, 1, 1.0f, clp_buf_at(NULL, 0)),
		  CLP_ERR_INVALID, "momentum");
}

/* normalisation + Newton-Schulz against the reference, for every shape */
static void test_newton_schulz(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(292);

	if (!ctx)
		return;
	for (size_t t = 0; t < NSHAPES; t++) {
		size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
		float *x = tn_rand(&r, n, -1, 1), *got = malloc(n * 4);
		double *ref = tn_dbl(x, n);
		cl_mem m[5];
		clp_muon_work w = work_for(rows, cols, m);
		clp_buf res;
		char what[80];

		CHECK_OK(clp_cl_write(ctx, m[0], 0, n * 4, x));
		CHECK_OK(clp_cl_nrm2(ctx, w.nrm, w.x, n));
		CHECK_OK(clp_muon_normalize(ctx, w.x, n, w.nrm, (float)CLP_MUON_EPS));
		CHECK_OK(clp_muon_newton_schulz(ctx, w.x, w.x2, w.ga, w.gb, rows, cols, 5, &res));
		CHECK(res.mem == m[1], "5 steps end in x2");
		tn_get(res.mem, res.off, got, n);
		clp_ref_muon_orthogonalize(ref, rows, cols, 5);
		snprintf(what, sizeof(what), "newton-schulz %zux%zu", rows, cols);
		/* entries 0.1..0.7; fp32 GEMMs, 5 steps of a polynomial whose slope is up to a = 3.4
		 * per step: worst measured 5.3e-7 (33 x 33), tolerance 3e-6 */
		th_close(what, got, ref, n, 3e-6, 0);
		release(m, 5);
		free(x), free(got), free(ref);
	}
	{
		clp_buf b = clp_buf_at(NULL, 0), out;

		CHECK_ERR(clp_muon_newton_schulz(ctx, b, b, b, b, 2, 2, 100, &out), CLP_ERR_INVALID,
			  "Newton-Schulz steps");
	}
}

/* three whole steps of every shape, a step skipped by the non-finite flag, a NaN gradient */
static void test_update(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(293);

	if (!ctx)
		return;
	for (size_t t = 0; t < NSHAPES; t++)
		for (int nes = 0; nes < 2; nes++) {
			size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
			float *p = tn_rand(&r, n, -1, 1), *g = malloc(n * 4), *got = malloc(n * 4);
			float *before = malloc(n * 4);
			double *rp = tn_dbl(p, n), *rb = tn_dbl(NULL, n);
			cl_mem m[5], mp = tn_buf(p, n), mb = tn_buf(NULL, n), mg = tn_buf(NULL, n);
			const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f}, skip[4] = {NAN, 1, NAN, 0};
			cl_mem ms = tn_buf(stats, 4);
			clp_muon_work w = work_for(rows, cols, m);
			clp_muon_hp hp = {0.02f, 0.1f, 0.95f, nes, 5};
			char what[80];

			snprintf(what, sizeof(what), "muon step %zux%zu nesterov=%d", rows, cols, nes);
			for (int step = 1; step <= 3; step++) {
				th_fill_uniform(&r, g, n, -2, 2);
				CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
				hp.lr = 0.02f * (float)step;
				CHECK_OK(clp_muon_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
							 clp_buf_at(mg, 0), rows, cols, &hp,
							 step == 2 ? clp_buf_at(ms, 0)
								   : clp_buf_at(NULL, 0),
							 0.75f, &w));
				clp_ref_muon_step(rp, rb, g, rows, cols, &hp,
						  step == 2 ? 0.375 : 0.75);
			}
			tn_get(mp, 0, got, n);
			th_close(what, got, rp, n, 1e-6, 0);
			tn_get(mb, 0, got, n);
			th_close(what, got, rb, n, 1e-7, 1e-5);
			/* the non-finite flag: neither the parameters nor the momentum move */
			tn_get(mp, 0, before, n);
			CHECK_OK(clp_cl_write(ctx, ms, 0, 16, skip));
			CHECK_OK(clp_muon_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
						 clp_buf_at(mg, 0), rows, cols, &hp, clp_buf_at(ms, 0),
						 1.0f, &w));
			tn_get(mp, 0, got, n);
			CHECK(memcmp(got, before, n * 4) == 0, "%s: skipped step changed the "
			      "parameters", what);
			tn_get(mb, 0, got, n);
			th_close(what, got, rb, n, 1e-7, 1e-5);
			/* a NaN in the gradient (no statistics to catch it) shows in the parameters */
			g[n / 2] = NAN;
			CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
			CHECK_OK(clp_muon_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
						 clp_buf_at(mg, 0), rows, cols, &hp,
						 clp_buf_at(NULL, 0), 1.0f, &w));
			tn_get(mp, 0, got, n);
			CHECK(isnan(got[n / 2]), "%s: a NaN gradient left a finite parameter", what);
			release(m, 5);
			release((cl_mem[]){mp, mb, mg, ms}, 4);
			free(p), free(g), free(got), free(before), free(rp), free(rb);
		}
}

/* The step in two parts (clp_muon_orthogonalize before the norm, clp_muon_commit after; the
 * executor's early placement): bitwise clp_muon_update's parameters and momentum when the
 * clipping factor is 1, the momentum left alone by the first part, nothing moved with the
 * non-finite flag set (the second moment's buffer holding a direction full of NaN). */
static void test_split(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(517);

	if (!ctx)
		return;
	for (size_t t = 0; t < NSHAPES; t++)
		for (int nes = 0; nes < 2; nes++) {
			size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
			float *p = tn_rand(&r, n, -1, 1), *b = tn_rand(&r, n, -1, 1);
			float *g = malloc(n * 4), *x = malloc(n * 4), *y = malloc(n * 4);
			cl_mem m[5], pa = tn_buf(p, n), ba = tn_buf(b, n), pb = tn_buf(p, n);
			cl_mem bb = tn_buf(b, n), mg = tn_buf(NULL, n), mu = tn_buf(NULL, n);
			const float one[4] = {4.0f, 0.0f, 2.0f, 1.0f}, skip[4] = {NAN, 1, NAN, 0};
			cl_mem ms = tn_buf(one, 4);
			clp_muon_work w = work_for(rows, cols, m);
			clp_muon_hp hp = {0.02f, 0.1f, 0.95f, nes, 5};
			char what[80];

			snprintf(what, sizeof(what), "muon split %zux%zu nesterov=%d", rows, cols, nes);
			for (int step = 1; step <= 3; step++) {
				th_fill_uniform(&r, g, n, -2, 2);
				if (step == 3)
					g[n / 2] = NAN;
				CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
				CHECK_OK(clp_cl_write(ctx, ms, 0, 16, step == 3 ? skip : one));
				CHECK_OK(clp_muon_update(ctx, clp_buf_at(pa, 0), clp_buf_at(ba, 0),
							 clp_buf_at(mg, 0), rows, cols, &hp,
							 clp_buf_at(ms, 0), 0.75f, &w));
				tn_get(bb, 0, x, n);
				CHECK_OK(clp_muon_orthogonalize(ctx, clp_buf_at(bb, 0), clp_buf_at(mg, 0),
								clp_buf_at(mu, 0), rows, cols, &hp,
								0.75f, &w));
				tn_get(bb, 0, y, n);
				CHECK(memcmp(x, y, n * 4) == 0, "%s step %d: the first part moved the "
				      "momentum", what, step);
				CHECK_OK(clp_muon_commit(ctx, clp_buf_at(pb, 0), clp_buf_at(bb, 0),
							 clp_buf_at(mg, 0), clp_buf_at(mu, 0), rows, cols,
							 &hp, clp_buf_at(ms, 0), 0.75f, &w));
				tn_get(pa, 0, x, n);
				tn_get(pb, 0, y, n);
				CHECK(memcmp(x, y, n * 4) == 0, "%s step %d: parameters differ", what,
				      step);
				tn_get(ba, 0, x, n);
				tn_get(bb, 0, y, n);
				CHECK(memcmp(x, y, n * 4) == 0, "%s step %d: momenta differ", what, step);
			}
			release(m, 5);
			release((cl_mem[]){pa, ba, pb, bb, mg, mu, ms}, 7);
			free(p), free(b), free(g), free(x), free(y);
		}
}

/* The one-step-delayed step: D = NS(P) in phases in d (the executor's AdamW v), the commit
 * with P := the new direction, against clp_ref_muon_delayed_step for three steps (the clip
 * factor 0.5 on step 2; step 1's P is 0: decay only); the same on a d lying 3 floats into its
 * buffer is bitwise the same; a non-finite step moves neither the parameters nor the momentum
 * and sets P to 0, so the step after it only decays; a phase out of range is refused. */
static void test_delayed(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(733);

	if (!ctx)
		return;
	for (size_t t = 0; t < NSHAPES; t++)
		for (int nes = 0; nes < 2; nes++) {
			size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
			float *p = tn_rand(&r, n, -1, 1), *g = malloc(n * 4), *got = malloc(n * 4);
			float *other = malloc(n * 4);
			double *rp = tn_dbl(p, n), *rb = tn_dbl(NULL, n), *rd = tn_dbl(NULL, n);
			cl_mem m[5], mp = tn_buf(p, n), mb = tn_buf(NULL, n), mg = tn_buf(NULL, n);
			cl_mem md = tn_buf(NULL, n), mp2 = tn_buf(p, n), mb2 = tn_buf(NULL, n);
			cl_mem md2 = tn_buf(NULL, n + 3);
			const float one[4] = {4.0f, 0.0f, 2.0f, 1.0f}, half[4] = {4.0f, 0.0f, 2.0f, 0.5f};
			const float skip[4] = {NAN, 1, NAN, 0};
			cl_mem ms = tn_buf(one, 4);
			clp_muon_work w = work_for(rows, cols, m);
			clp_muon_hp hp = {0.02f, 0.1f, 0.95f, nes, t == 3 ? 0 : 5};
			char what[80];

			snprintf(what, sizeof(what), "muon delayed %zux%zu nesterov=%d ns=%d", rows, cols,
				 nes, hp.ns_steps);
			for (int step = 1; step <= 5; step++) {
				const int bad = step == 4;
				const float *st = bad ? skip : step == 2 ? half : one;

				th_fill_uniform(&r, g, n, -2, 2);
				if (bad)
					g[n / 2] = NAN;
				CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
				CHECK_OK(clp_cl_write(ctx, ms, 0, 16, st));
				hp.lr = 0.02f * (float)step;
				for (int k = 0; k < 2; k++) {
					clp_buf d = k ? clp_buf_at(md2, 3) : clp_buf_at(md, 0);

					for (int ph = 0; ph < clp_muon_phases(hp.ns_steps); ph++)
						CHECK_OK(clp_muon_ns_phase(ctx, d, rows, cols, hp.ns_steps,
									   ph, &w));
					CHECK_OK(clp_muon_delayed_commit(
						ctx, clp_buf_at(k ? mp2 : mp, 0), clp_buf_at(k ? mb2 : mb, 0),
						clp_buf_at(mg, 0), d, rows, cols, &hp, clp_buf_at(ms, 0),
						0.75f, bad));
				}
				clp_ref_muon_delayed_step(rp, rb, rd, g, rows, cols, &hp,
							  0.75 * st[3], bad);
				if (step == 3 || step == 5) {
					tn_get(mp, 0, got, n);
					th_close(what, got, rp, n, 1e-6, 0);
					tn_get(mb, 0, got, n);
					th_close(what, got, rb, n, 1e-7, 1e-5);
					tn_get(md, 0, got, n);
					th_close(what, got, rd, n, 1e-7, 1e-5);
				}
				if (step == 4) { /* nothing moved, P dropped */
					tn_get(md, 0, got, n);
					for (size_t i = 0; i < n; i++)
						CHECK(got[i] == 0.0f, "%s: P %g after a non-finite step",
						      what, got[i]);
				}
				/* the copy whose d lies elsewhere: the same bits */
				tn_get(mp, 0, got, n);
				tn_get(mp2, 0, other, n);
				CHECK(memcmp(got, other, n * 4) == 0, "%s step %d: parameters depend on "
				      "where d lies", what, step);
			}
			release(m, 5);
			release((cl_mem[]){mp, mb, mg, md, mp2, mb2, md2, ms}, 8);
			free(p), free(g), free(got), free(other), free(rp), free(rb), free(rd);
		}
	{
		clp_muon_work w;
		clp_buf b = clp_buf_at(NULL, 0);

		memset(&w, 0, sizeof(w));
		CHECK_ERR(clp_muon_ns_phase(ctx, b, 2, 2, 5, 5, &w), CLP_ERR_INVALID, "phase 5");
		CHECK_ERR(clp_muon_ns_phase(ctx, b, 2, 2, 0, 1, &w), CLP_ERR_INVALID, "phase 1");
	}
}

static void test_scaled_lr(void)
{
	CHECK(clp_muon_scaled_lr(0.02, 3072, 768) == 0.04, "4:1 scales by 2: %.17g",
	      clp_muon_scaled_lr(0.02, 3072, 768));
	CHECK(clp_muon_scaled_lr(0.02, 768, 3072) == 0.02, "wide: unscaled");
	CHECK(clp_muon_scaled_lr(0.02, 7, 7) == 0.02, "square: unscaled");
}

TH_MAIN(TH_TEST(test_momentum), TH_TEST(test_newton_schulz), TH_TEST(test_update),
	TH_TEST(test_split), TH_TEST(test_delayed), TH_TEST(test_scaled_lr))
