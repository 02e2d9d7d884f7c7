/* Shampoo (cl/shampoo.h) against pytorch-optimizer's Shampoo (pytorch_optimizer 4.1.0) on
 * recorded gradients: the fixture fixtures/shampoo_ref.json, written by tools/check_shampoo.py
 * from the package itself (shapes, initial values, 4 steps of gradients, a learning-rate
 * schedule, per matrix its momentum, matrix_eps and root interval 1 or 2), so this runs without
 * torch (tools/check_shampoo.sh runs it on a fresh one: $CLP_SHAMPOO_FIXTURE overrides the
 * path). The fixture holds the package's results two ways: "ref_fp64" (float64 parameters, its
 * SVD in float64: exact) and "ref" (as shipped, fp32 with an fp32 SVD). Three checks per
 * matrix, on the parameters, the momentum buffer and the statistics L and R:
 *   1. the double reference cl/ref/shampoo_ref.c without a ridge equals ref_fp64 within 2e-8
 *      of the set's largest value (the fixture's 9 digits; measured <= 1.3e-8): the algorithm
 *      is the package's;
 *   2. the fp32 engine is within max(TOL64 x max(1, the set's largest value), 3 e32) of the
 *      double reference with the engine's ridge (CLP_SHAMPOO_RIDGE), e32 = max |ref - ref_fp64|
 *      of that set: the engine is as exact as the package's own fp32 code is on the same
 *      problem (its SVD errs as far, u kappa / 4, see test_shampoo; two fp32 methods' errors
 *      there differ by a factor: worst measured 2.4 e32, 7x1's L), or within TOL64;
 *   3. the engine is within that plus the ridge's own effect (max |reference with ridge -
 *      reference without|) of ref_fp64, and within 3 e32 + TOL64 + the ridge's effect of ref.
 * docs/OPTIMIZERS.md has the figures. */
#include <jansson.h>

#include "tests/nn/nn_test.h"

#include "cl/ref/shampoo_ref.h"
#include "cl/shampoo.h"

#define ITERS 25   /* the engine's default (shampoo.iters) */
#define TOL64 2e-6 /* of max(1, the set's largest value): 17 fp32 ulps of the parameters
		    * (0.1..0.3), 8..17 of the statistics' largest entries */

static const char *const sets[4] = {"params", "momentum", "L", "R"};

static void get_arr(json_t *a, float *f, double *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v = json_number_value(json_array_get(a, i));

		if (f)
			f[i] = (float)v;
		if (d)
			d[i] = v;
	}
}

static double num(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

static json_t *at(json_t *fx, const char *set, const char *what, size_t i)
{
	return json_array_get(json_object_get(json_object_get(fx, set), what), i);
}

static double maxdiff(const double *a, const double *b, size_t n)
{
	double e = 0;

	for (size_t j = 0; j < n; j++)
		e = fmax(e, fabs(a[j] - b[j]));
	return e;
}

/* One set (params, momentum, L or R) of one matrix: got (the engine), r0 and rr (the double
 * reference without and with the engine's ridge), n values. */
static void check_set(const char *what, const char *k, const float *got, const double *r0,
		      const double *rr, json_t *fx, size_t i, size_t n)
{
	double *w64 = malloc(n * 8), *w32 = malloc(n * 8), *tol = malloc(n * 8), *g = malloc(n * 8);
	double e32, ridge, e0, big = 1, t64;
	char msg[256];

	get_arr(at(fx, "ref_fp64", k, i), NULL, w64, n);
	get_arr(at(fx, "ref", k, i), NULL, w32, n);
	for (size_t j = 0; j < n; j++)
		g[j] = got[j];
	e32 = maxdiff(w32, w64, n), ridge = maxdiff(rr, r0, n), e0 = maxdiff(r0, w64, n);
	for (size_t j = 0; j < n; j++)
		big = fmax(big, fabs(w64[j]));
	t64 = TOL64 * big;
	snprintf(msg, sizeof(msg), "%s %s: the double reference vs the package in fp64", what, k);
	CHECK(e0 <= 2e-8 * big, "%s: %.3g of values up to %.3g", msg, e0, big);
	for (size_t j = 0; j < n; j++)
		tol[j] = fmax(t64, 3 * e32);
	snprintf(msg, sizeof(msg), "%s %s: the engine vs the double reference (the package's "
		 "fp32 error %.2g)", what, k, e32);
	th_close_tol(msg, got, rr, tol, n);
	for (size_t j = 0; j < n; j++)
		tol[j] = fmax(t64, 3 * e32) + ridge;
	snprintf(msg, sizeof(msg), "%s %s: the engine vs the package in fp64 (ridge %.2g)", what, k,
		 ridge);
	th_close_tol(msg, got, w64, tol, n);
	for (size_t j = 0; j < n; j++)
		tol[j] = 3 * e32 + t64 + ridge;
	snprintf(msg, sizeof(msg), "%s %s: the engine vs the package as shipped", what, k);
	th_close_tol(msg, got, w32, tol, n);
	printf("%-34s %-8s engine-ref %.2g, engine-fp64 %.2g, package fp32-fp64 %.2g, "
	       "ridge %.2g, ref0-fp64 %.2g\n", what, k, maxdiff(g, rr, n), maxdiff(g, w64, n), e32,
	       ridge, e0);
	free(w64), free(w32), free(tol), free(g);
}

/* the double reference's state of one matrix */
typedef struct rstate {
	double *p, *b, *l, *r, *li, *ri;
} rstate;

static rstate rstate_new(const double *p0, size_t rows, size_t cols, double eps)
{
	const size_t n = rows * cols;
	rstate s = {malloc(n * 8), calloc(n, 8), calloc(rows * rows, 8), calloc(cols * cols, 8),
		    calloc(rows * rows, 8), calloc(cols * cols, 8)};

	memcpy(s.p, p0, n * 8);
	for (size_t j = 0; j < rows; j++)
		s.l[j * rows + j] = (float)eps;
	for (size_t j = 0; j < cols; j++)
		s.r[j * cols + j] = (float)eps;
	return s;
}

static void rstate_free(rstate *s)
{
	free(s->p), free(s->b), free(s->l), free(s->r), free(s->li), free(s->ri);
}

static void test_against_reference(void)
{
	clp_cl_ctx *ctx = th_ctx();
	json_error_t err;
	const char *path = getenv("CLP_SHAMPOO_FIXTURE") ? getenv("CLP_SHAMPOO_FIXTURE")
							  : CLP_SHAMPOO_FIXTURE;
	json_t *fx = json_load_file(path, 0, &err), *mats;
	int steps;
	double lr, wd;

	if (!ctx)
		return;
	CHECK(fx != NULL, "%s: %s (line %d)", path, err.text, err.line);
	if (!fx)
		return;
	mats = json_object_get(fx, "mats");
	steps = (int)json_integer_value(json_object_get(fx, "steps"));
	lr = num(fx, "lr"), wd = num(fx, "weight_decay");
	CHECK(json_array_size(mats) >= 5 && steps >= 3, "fixture: %zu matrices, %d steps",
	      json_array_size(mats), steps);
	for (size_t i = 0; i < json_array_size(mats); i++) {
		json_t *mj = json_array_get(mats, i);
		size_t rows = (size_t)json_integer_value(json_object_get(mj, "rows"));
		size_t cols = (size_t)json_integer_value(json_object_get(mj, "cols"));
		size_t n = rows * cols, d = rows > cols ? rows : cols, sz[4];
		int interval = (int)json_integer_value(json_object_get(mj, "interval"));
		float eps = (float)num(mj, "eps"), mom = (float)num(mj, "momentum");
		float *p = malloc(n * 4), *g = malloc(n * 4), *got = malloc(d * d * 4);
		float *l0 = calloc(rows * rows, 4), *r0 = calloc(cols * cols, 4);
		double *p0 = malloc(n * 8);
		cl_mem mp, mb = tn_buf(NULL, n), mg = tn_buf(NULL, n), ml, mr, m[9], dev[4];
		cl_mem mli = tn_buf(NULL, rows * rows), mri = tn_buf(NULL, cols * cols);
		clp_shampoo_work w;
		clp_shampoo_hp hp = {0, (float)wd, mom, 1, 0, ITERS, 0, 0, 0, 0, 0}; /* no graft,
									       * sums */
		rstate z, rg;
		char what[96];

		for (size_t j = 0; j < rows; j++)
			l0[j * rows + j] = eps;
		for (size_t j = 0; j < cols; j++)
			r0[j * cols + j] = eps;
		ml = tn_buf(l0, rows * rows), mr = tn_buf(r0, cols * cols);
		get_arr(json_array_get(json_object_get(fx, "params0"), i), p, p0, n);
		mp = tn_buf(p, n);
		z = rstate_new(p0, rows, cols, eps), rg = rstate_new(p0, rows, cols, eps);
		m[0] = tn_buf(NULL, n), m[1] = tn_buf(NULL, n), m[8] = tn_buf(NULL, 2);
		for (int k = 0; k < 6; k++)
			m[2 + k] = tn_buf(NULL, d * d);
		w.x = clp_buf_at(m[0], 0), w.u = clp_buf_at(m[1], 0), w.nrm = clp_buf_at(m[8], 0);
		for (int k = 0; k < 6; k++)
			w.r[k] = clp_buf_at(m[2 + k], 0);
		for (int t = 0; t < steps; t++) {
			get_arr(json_array_get(json_array_get(json_object_get(fx, "grads"), i), t), g,
				NULL, n);
			CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
			hp.lr = (float)(lr * (t + 1) / steps);
			hp.first = t == 0;
			hp.refresh = (t + 1) % interval == 0;
			CHECK_OK(clp_shampoo_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mb, 0),
						    clp_buf_at(NULL, 0), clp_buf_at(mg, 0), clp_buf_at(ml, 0),
						    clp_buf_at(mr, 0), clp_buf_at(mli, 0),
						    clp_buf_at(mri, 0), rows, cols, &hp,
						    clp_buf_at(NULL, 0), 1.0f, &w));
			CHECK(clp_ref_shampoo_step(z.p, z.b, NULL, z.l, z.r, z.li, z.ri, g, rows, cols,
						   &hp, 1.0, 0.0) == 0 &&
				      clp_ref_shampoo_step(rg.p, rg.b, NULL, rg.l, rg.r, rg.li, rg.ri, g,
							   rows, cols, &hp, 1.0,
							   CLP_SHAMPOO_RIDGE) == 0,
			      "reference");
		}
		snprintf(what, sizeof(what), "%zux%zu mom=%g eps=%g interval=%d", rows, cols, mom,
			 eps, interval);
		dev[0] = mp, dev[1] = mb, dev[2] = ml, dev[3] = mr;
		sz[0] = sz[1] = n, sz[2] = rows * rows, sz[3] = cols * cols;
		for (int k = 0; k < 4; k++) {
			const double *a = k == 0 ? z.p : k == 1 ? z.b : k == 2 ? z.l : z.r;
			const double *b = k == 0 ? rg.p : k == 1 ? rg.b : k == 2 ? rg.l : rg.r;

			tn_get(dev[k], 0, got, sz[k]);
			check_set(what, sets[k], got, a, b, fx, i, sz[k]);
		}
		for (int k = 0; k < 9; k++)
			clReleaseMemObject(m[k]);
		clReleaseMemObject(mp), clReleaseMemObject(mb), clReleaseMemObject(mg);
		clReleaseMemObject(ml), clReleaseMemObject(mr), clReleaseMemObject(mli);
		clReleaseMemObject(mri);
		rstate_free(&z), rstate_free(&rg);
		free(p), free(g), free(got), free(l0), free(r0), free(p0);
	}
	json_decref(fx);
}

TH_MAIN(TH_TEST(test_against_reference))
