/* Shampoo's kernels (cl/shampoo.h) against the double reference (cl/ref/shampoo_ref.h) on random
 * inputs with odd sizes (1, 7, 33, 127): the momentum (first step, lerp, gradient scale, clip
 * factor, the non-finite flag writing zeros), the inverse 4th root by the coupled Newton
 * iteration against a Jacobi eigendecomposition (well and badly conditioned), the root in
 * phases bitwise equal to the whole root, and three whole
 * steps of wide, tall and square matrices with the roots refreshed every step and every second
 * step; a skipped step leaves everything bitwise; a NaN gradient never passes; bad arguments
 * are refused. */
#include "tests/nn/nn_test.h"

#include "cl/ops.h"
#include "cl/ref/shampoo_ref.h"
#include "cl/shampoo.h"

static const size_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {7, 7}, {7, 33}, {33, 7},
				   {33, 127}, {127, 33}, {33, 33}};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))
#define ITERS 30      /* the roots alone: the hard cases need ~20 */
#define ITERS_STEP 20 /* whole steps: statistics from 0.5 I converge in ~10 (fewer launches
		       * on llvmpipe, where this test is launch-bound) */

static clp_shampoo_work work_for(size_t rows, size_t cols, cl_mem m[9])
{
	size_t d = rows > cols ? rows : cols;
	clp_shampoo_work w;

	m[0] = tn_buf(NULL, rows * cols), m[1] = tn_buf(NULL, rows * cols);
	for (int i = 0; i < 6; i++)
		m[2 + i] = tn_buf(NULL, d * d);
	m[8] = tn_buf(NULL, 4);
	w.x = clp_buf_at(m[0], 0), w.u = clp_buf_at(m[1], 0), w.nrm = clp_buf_at(m[8], 1);
	for (int i = 0; i < 6; i++)
		w.r[i] = clp_buf_at(m[2 + i], 0);
	return w;
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
	th_rng r = th_rng_seed(391);

	if (!ctx)
		return;
	for (size_t t = 0; t < 5; t++)
		for (int first = 0; first < 2; first++) {
			size_t n = sizes[t];
			float *b = tn_rand(&r, n, -1, 1), *g = tn_rand(&r, n, -2, 2), *got = malloc(n * 4);
			double *rx = malloc(n * 8);
			const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f}, skip[4] = {NAN, 1, NAN, 0};
			cl_mem mb = tn_buf(b, n), mg = tn_buf(g, n), mx = tn_buf(NULL, n);
			cl_mem ms = tn_buf(stats, 4);
			char what[64];

			for (size_t i = 0; i < n; i++) {
				double gr = (double)g[i] * 0.75 * 0.5;

				rx[i] = first ? gr : gr + 0.9 * (b[i] - gr);
			}
			CHECK_OK(clp_shampoo_momentum(ctx, clp_buf_at(mb, 0), clp_buf_at(mg, 0),
						      clp_buf_at(mx, 0), n, 0.9f, first, 0.75f,
						      clp_buf_at(ms, 0)));
			snprintf(what, sizeof(what), "shampoo momentum n=%zu first=%d", n, first);
			tn_get(mx, 0, got, n);
			th_close(what, got, rx, n, 1e-7, 1e-6);
			/* the non-finite flag: x = 0, so the statistics gain nothing */
			CHECK_OK(clp_cl_write(ctx, ms, 0, 16, skip));
			CHECK_OK(clp_shampoo_momentum(ctx, clp_buf_at(mb, 0), clp_buf_at(mg, 0),
						      clp_buf_at(mx, 0), n, 0.9f, first, 0.75f,
						      clp_buf_at(ms, 0)));
			tn_get(mx, 0, got, n);
			for (size_t i = 0; i < n; i++)
				rx[i] = 0;
			th_close(what, got, rx, n, 0, 0);
			release((cl_mem[]){mb, mg, mx, ms}, 4);
			free(b), free(g), free(got), free(rx);
		}
	CHECK_ERR(clp_shampoo_momentum(ctx, clp_buf_at(NULL, 0), clp_buf_at(NULL, 0),
				       clp_buf_at(NULL, 0), 1, 1.0f, 0, 1.0f, clp_buf_at(NULL, 0)),
		  CLP_ERR_INVALID, "momentum");
}

/* a = eps I + G G^T / k for a random n x k G: k >= n well conditioned, k = 1 rank one (the
 * statistics of a first step of a 1-row gradient: eigenvalues eps and |g|^2) */
static void spd(th_rng *r, size_t n, size_t k, double eps, float *a, double *ad)
{
	float *g = tn_rand(r, n * k, -1, 1);

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			double s = i == j ? eps : 0;

			for (size_t l = 0; l < k; l++)
				s += (double)g[i * k + l] * g[j * k + l] / (double)k;
			ad[i * n + j] = s;
		}
	for (size_t i = 0; i < n * n; i++)
		a[i] = (float)ad[i];
	for (size_t i = 0; i < n * n; i++) /* the float matrix is what both see */
		ad[i] = a[i];
	free(g);
}

static void test_inv_root(void)
{
	static const size_t sizes[] = {1, 7, 33, 127};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(392);

	if (!ctx)
		return;
	for (size_t t = 0; t < 4; t++)
		for (int bad = 0; bad < 2; bad++) {
			size_t n = sizes[t];
			float *a = malloc(n * n * 4), *got = malloc(n * n * 4);
			double *ad = malloc(n * n * 8), *ref = malloc(n * n * 8);
			cl_mem m[9], ma, mo;
			clp_shampoo_work w = work_for(n, n, m);
			double err = 0, big = 0, lo = INFINITY, hi = 0, tol;
			char what[80];

			spd(&r, n, bad ? 1 : n + 3, bad ? 1e-4 : 1e-2, a, ad);
			ma = tn_buf(a, n * n), mo = tn_buf(NULL, n * n);
			CHECK(clp_ref_shampoo_inv_root(ad, n, 4, CLP_SHAMPOO_RIDGE, ref) == 0, "reference");
			CHECK_OK(clp_shampoo_inv_root(ctx, clp_buf_at(ma, 0), n, 4, ITERS, &w,
						      clp_buf_at(mo, 0)));
			tn_get(mo, 0, got, n * n);
			for (size_t i = 0; i < n * n; i++) {
				double d = fabs(got[i] - ref[i]);

				err = d > err || isnan(got[i]) ? (isnan(got[i]) ? INFINITY : d) : err;
				big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
			}
			for (size_t i = 0; i < n * n; i++) /* kappa <= ||a||_F / eps */
				hi += ad[i] * ad[i];
			hi = sqrt(hi), lo = bad ? 1e-4 : 1e-2;
			snprintf(what, sizeof(what), "inverse 4th root n=%zu %s", n,
				 bad ? "rank one + 1e-4 I" : "well conditioned");
			/* fp32 holds a's products only to u ||a|| (u = 2^-24), which moves the smallest
			 * eigenvalue by u kappa of itself and its root, the largest entries, by
			 * u kappa / 4 of themselves (kappa: the condition number, bounded here by
			 * ||a||_F / eps, exact for the rank-one matrices).
			 * Tolerance: (u kappa / 4 + 2e-5) of the largest entry. Measured: <= 2e-6 of it
			 * well conditioned; for the rank-one matrices (kappa 2e4..4e5) 6e-5..8.5e-4 of
			 * it, 0.14..0.24 of u kappa / 4 (the same with 60 iterations as with 30: round-off,
			 * not convergence; an fp32 SVD has it too). */
			tol = (ldexp(1.0, -24) * hi / lo / 4 + 2e-5) * big;
			CHECK(err <= tol, "%s: max error %.3g of entries up to %.3g (tolerance %.3g)",
			      what, err, big, tol);
			printf("%s: max error %.3g (relative %.3g, kappa <= %.3g)\n", what, err, err / big,
			       hi / lo);
			release(m, 9);
			release((cl_mem[]){ma, mo}, 2);
			free(a), free(got), free(ad), free(ref);
		}
	{
		clp_buf b = clp_buf_at(NULL, 0);
		clp_shampoo_work w = {b, b, {b, b, b, b, b, b}, b};

		CHECK_ERR(clp_shampoo_inv_root(ctx, b, 2, 9, 10, &w, b), CLP_ERR_INVALID, "root 9");
		CHECK_ERR(clp_shampoo_inv_root(ctx, b, 2, 4, -1, &w, b), CLP_ERR_INVALID,
			  "iterations");
	}
}

/* The root in phases (clp_shampoo_inv_root_phase) is bitwise the whole root, for odd sizes, 4th
 * and 3rd roots (the 3rd's products rotate through more buffers), in 1 phase, 3, one per
 * iteration and more phases than iterations, with the scratch overwritten by NaN between
 * phases (other work of the step uses it): only am and xs carry the root from phase to phase. */
static void test_inv_root_phases(void)
{
	static const size_t sizes[] = {1, 7, 33, 127};
	static const int nph[] = {1, 3, ITERS, ITERS + 2};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(393);

	if (!ctx)
		return;
	for (size_t t = 0; t < 4; t++)
		for (int p = 4; p >= 3; p--) {
			size_t n = sizes[t];
			float *a = malloc(n * n * 4), *want = malloc(n * n * 4), *got = malloc(n * n * 4);
			float *nan = malloc(n * n * 4);
			double *ad = malloc(n * n * 8);
			cl_mem m[9], ma, mo, mx, mn;
			clp_shampoo_work w = work_for(n, n, m);

			if (p == 3 && (n == 1 || n == 127)) { /* the 3rd root's rotation: 7 and 33 */
				release(m, 9);
				free(a), free(want), free(got), free(nan), free(ad);
				continue;
			}
			for (size_t i = 0; i < n * n; i++)
				nan[i] = NAN;
			spd(&r, n, t % 2 ? 1 : n + 3, t % 2 ? 1e-4 : 1e-2, a, ad);
			ma = tn_buf(a, n * n), mo = tn_buf(NULL, n * n), mx = tn_buf(NULL, n * n);
			mn = tn_buf(nan, n * n);
			CHECK_OK(clp_shampoo_inv_root(ctx, clp_buf_at(ma, 0), n, p, ITERS, &w,
						      clp_buf_at(mo, 0)));
			tn_get(mo, 0, want, n * n);
			for (size_t k = 0; k < sizeof(nph) / sizeof(nph[0]); k++) {
				char what[96];
				size_t differ = 0;

				CHECK_OK(clp_cl_write(ctx, ma, 0, n * n * 4, a));
				for (int ph = 0; ph < nph[k]; ph++) {
					CHECK_OK(clp_shampoo_inv_root_phase(ctx, clp_buf_at(ma, 0),
									    clp_buf_at(mx, 0), n, p,
									    ITERS, ph, nph[k], &w));
					for (int i = 0; i < 6; i++) /* the step's other work */
						CHECK_OK(clp_cl_copy(ctx, w.r[i], clp_buf_at(mn, 0),
								     n * n));
					CHECK_OK(clp_cl_copy(ctx, w.nrm, clp_buf_at(mn, 0), 1));
				}
				tn_get(ma, 0, got, n * n);
				for (size_t i = 0; i < n * n; i++)
					differ += memcmp(&got[i], &want[i], 4) != 0;
				snprintf(what, sizeof(what), "root 1/%d n=%zu in %d phases", p, n,
					 nph[k]);
				CHECK(!differ && !isnan(want[0]), "%s: %zu of %zu entries differ from "
				      "the whole root", what, differ, n * n);
				printf("%s: bitwise the whole root\n", what);
			}
			release(m, 9);
			release((cl_mem[]){ma, mo, mx, mn}, 4);
			free(a), free(want), free(got), free(nan), free(ad);
		}
	{
		clp_buf b = clp_buf_at(NULL, 0);
		clp_shampoo_work w = {b, b, {b, b, b, b, b, b}, b};

		CHECK_ERR(clp_shampoo_inv_root_phase(ctx, b, b, 2, 4, 10, 3, 3, &w), CLP_ERR_INVALID,
			  "phase 3 of a root in 3 phases");
		CHECK_ERR(clp_shampoo_inv_root_phase(ctx, b, b, 2, 4, 10, 0, 0, &w), CLP_ERR_INVALID,
			  "in 0 phases");
		CHECK_ERR(clp_shampoo_inv_root_phase(ctx, b, b, 2, 9, 10, 0, 1, &w), CLP_ERR_INVALID,
			  "root 9");
	}
}

/* three whole steps of every shape (roots every step, every second step, and every second
 * step with the graft, whose first step is Adam's direction alone, the last also with the
 * statistics as moving averages, beta2 0.9), a skipped step, a NaN gradient */
static void test_update(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(393);

	if (!ctx)
		return;
	for (size_t t = 0; t < NSHAPES; t++)
		for (int var = 0; var < 4; var++) {
			const int k = var ? 2 : 1, graft = var >= 2;
			size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
			float *p = tn_rand(&r, n, -1, 1), *g = malloc(n * 4), *got = malloc(n * 4);
			float *before = malloc(n * 4), *l0 = malloc(rows * rows * 4);
			float *r0 = malloc(cols * cols * 4);
			double *rp = tn_dbl(p, n), *rb = tn_dbl(NULL, n), *rv = tn_dbl(NULL, n);
			double *rl = tn_dbl(NULL, rows * rows), *rr = tn_dbl(NULL, cols * cols);
			double *rli = tn_dbl(NULL, rows * rows), *rri = tn_dbl(NULL, cols * cols);
			cl_mem m[9], mp = tn_buf(p, n), mb = tn_buf(NULL, n), mg = tn_buf(NULL, n);
			cl_mem mv = tn_buf(NULL, n);
			cl_mem ml, mr, mli = tn_buf(NULL, rows * rows), mri = tn_buf(NULL, cols * cols);
			const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f}, skip[4] = {NAN, 1, NAN, 0};
			cl_mem ms = tn_buf(stats, 4);
			clp_shampoo_work w = work_for(rows, cols, m);
			clp_shampoo_hp hp = {0.02f, 0.1f, 0.9f, 1, 1, ITERS_STEP, graft, 0.95f, 1e-8f, 1,
					     var == 3 ? 0.9f : 0.0f};
			char what[80];

			for (size_t i = 0; i < rows; i++)
				for (size_t j = 0; j < rows; j++)
					rl[i * rows + j] = l0[i * rows + j] = i == j ? 0.5f : 0.0f;
			for (size_t i = 0; i < cols; i++)
				for (size_t j = 0; j < cols; j++)
					rr[i * cols + j] = r0[i * cols + j] = i == j ? 0.5f : 0.0f;
			for (size_t i = 0; i < rows * rows; i++)
				rl[i] = l0[i];
			for (size_t i = 0; i < cols * cols; i++)
				rr[i] = r0[i];
			ml = tn_buf(l0, rows * rows), mr = tn_buf(r0, cols * cols);
			snprintf(what, sizeof(what), "shampoo step %zux%zu interval %d graft %d beta2 %g",
				 rows, cols, k, graft, (double)hp.stat_beta);
			for (int step = 1; step <= 3; step++) {
				th_fill_uniform(&r, g, n, -2, 2);
				CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
				hp.lr = 0.02f * (float)step;
				hp.first = step == 1;
				hp.refresh = step % k == 0;
				hp.t = step;
				CHECK_OK(clp_shampoo_update(
					ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0), clp_buf_at(mv, 0),
					clp_buf_at(mg, 0), clp_buf_at(ml, 0), clp_buf_at(mr, 0),
					clp_buf_at(mli, 0),
					clp_buf_at(mri, 0), rows, cols, &hp,
					step == 2 ? clp_buf_at(ms, 0) : clp_buf_at(NULL, 0), 0.75f, &w));
				CHECK(clp_ref_shampoo_step(rp, rb, rv, rl, rr, rli, rri, g, rows, cols, &hp,
							   step == 2 ? 0.375 : 0.75,
							   CLP_SHAMPOO_RIDGE) == 0,
				      "reference");
			}
			/* statistics from 0.5 I (kappa <= ~100: the ill-conditioned roots are
			 * test_inv_root's); the update's entries are O(1) (the roots undo the gradients'
			 * scale): fp32 products and 20 Newton iterations, tolerance 1e-5 */
			tn_get(mp, 0, got, n);
			th_close(what, got, rp, n, 1e-5, 0);
			/* the statistics: sums, or moving averages with beta2 (fp32 products of
			 * O(1) entries, at most 127 terms: relative 1e-5; with the graft they take
			 * the momentum's error, below) */
			{
				float *gs = malloc((rows * rows + cols * cols) * 4);

				tn_get(ml, 0, gs, rows * rows);
				tn_get(mr, 0, gs + rows * rows, cols * cols);
				if (graft)
					CHECK(th_norm_err(gs, rl, rows * rows) <= 5e-5 &&
					      th_norm_err(gs + rows * rows, rr, cols * cols) <= 5e-5,
					      "%s: statistics normalised error %.3g, %.3g", what,
					      th_norm_err(gs, rl, rows * rows),
					      th_norm_err(gs + rows * rows, rr, cols * cols));
				else
					th_close(what, gs, rl, rows * rows, 1e-5, 1e-5),
					th_close(what, gs + rows * rows, rr, cols * cols, 1e-5, 1e-5);
				free(gs);
			}
			tn_get(mb, 0, got, n);
			/* the graft scales u, and its error, by ||a|| / ||u|| (up to ~15 here): the
			 * error relative to the norm is what the scale keeps, that of roots with kappa
			 * up to ~400 (statistics from 0.5 I); measured <= 1.5e-5 (127 x 33), tolerance
			 * 5e-5 */
			if (graft)
				CHECK(th_norm_err(got, rb, n) <= 5e-5, "%s: momentum normalised error %.3g",
				      what, th_norm_err(got, rb, n));
			else
				th_close(what, got, rb, n, 2e-5, 1e-5);
			if (graft) {
				tn_get(mv, 0, got, n);
				th_close(what, got, rv, n, 1e-6, 1e-5);
			}
			/* the non-finite flag: neither the parameters nor the momentum move */
			tn_get(mp, 0, before, n);
			CHECK_OK(clp_cl_write(ctx, ms, 0, 16, skip));
			hp.first = 0, hp.refresh = 1, hp.t = 4;
			CHECK_OK(clp_shampoo_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
						    clp_buf_at(mv, 0), clp_buf_at(mg, 0),
						    clp_buf_at(ml, 0), clp_buf_at(mr, 0),
						    clp_buf_at(mli, 0),
						    clp_buf_at(mri, 0), rows, cols, &hp,
						    clp_buf_at(ms, 0), 1.0f, &w));
			tn_get(mp, 0, got, n);
			CHECK(memcmp(got, before, n * 4) == 0, "%s: skipped step changed the "
			      "parameters", what);
			tn_get(mb, 0, got, n);
			if (graft)
				CHECK(th_norm_err(got, rb, n) <= 5e-5, "%s: momentum after the skipped "
				      "step", what);
			else
				th_close(what, got, rb, n, 2e-5, 1e-5);
			/* a NaN in the gradient (no statistics to catch it) shows in the parameters */
			g[n / 2] = NAN;
			hp.refresh = 0;
			CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
			CHECK_OK(clp_shampoo_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
						    clp_buf_at(mv, 0), clp_buf_at(mg, 0),
						    clp_buf_at(ml, 0), clp_buf_at(mr, 0),
						    clp_buf_at(mli, 0),
						    clp_buf_at(mri, 0), rows, cols, &hp,
						    clp_buf_at(NULL, 0), 1.0f, &w));
			tn_get(mp, 0, got, n);
			CHECK(isnan(got[n / 2]), "%s: a NaN gradient left a finite parameter", what);
			release(m, 9);
			release((cl_mem[]){mp, mb, mg, ml, mr, mli, mri, ms, mv}, 9);
			free(p), free(g), free(got), free(before), free(l0), free(r0);
			free(rp), free(rb), free(rl), free(rr), free(rli), free(rri), free(rv);
		}
}

TH_MAIN(TH_TEST(test_momentum), TH_TEST(test_inv_root), TH_TEST(test_inv_root_phases),
	TH_TEST(test_update))
