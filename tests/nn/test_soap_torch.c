/* SOAP (cl/soap.h) against pytorch-optimizer's SOAP (pytorch_optimizer 4.1.0) on recorded
 * gradients: the fixture fixtures/soap_torch.json, written by tools/check_soap.py from the
 * package itself (shapes, initial values, 9 steps of gradients, a learning-rate schedule, per
 * matrix its betas, shampoo_beta, eps, correct_bias and precondition_frequency), so this runs
 * without torch (tools/check_soap.sh runs it on a fresh one: $CLP_SOAP_FIXTURE overrides the
 * path).
 *
 * The package's first call only initialises GG and Q (Q by torch.linalg.eigh, whose basis of a
 * rank-deficient GG's null space is LAPACK's choice; the engine's soap.init_iters subspace
 * iteration is its own), so every run continues from the fixture's "state1", the package's
 * float64 GG and Q after that call rounded to fp32: steps 2..9 (updates, moments, statistics and
 * the refreshes: power iteration, argsort, the moments' permutation and Householder QR) are what
 * is compared. The fixture holds the package's results two ways: "ref_fp64" (float64, with the
 * fp32 cast before its QR removed: exact) and "ref" (as shipped, fp32). For each matrix and each
 * set (params, exp_avg = m, exp_avg_sq = v, GG0 = L, GG1 = R, Q0 = QL, Q1 = QR):
 *   1. the double reference cl/ref/soap_ref.c equals ref_fp64 within 2e-8 of the set's
 *      largest value (the fixture's 9 digits): the algorithm is the package's;
 *   2. the fp32 engine is within max(TOL64 x max(1, the set's largest value), 3 e32) of the
 *      double reference, e32 = max |ref - ref_fp64| of that set: as exact as the package's own
 *      fp32 code is on the same problem, or within TOL64;
 *   3. the engine is within 3 e32 + TOL64 of the package as shipped (ref).
 * Q is compared as it is, column signs included: the device's Householder QR has LAPACK's
 * convention (beta = -sign(alpha) ||x||), so the signs agree. docs/OPTIMIZERS.md has the
 * figures. */
#include <jansson.h>

#include "tests/nn/nn_test.h"

#include "cl/ref/soap_ref.h"
#include "cl/soap.h"

#define NSETS 7
#define TOL64 2e-6 /* of max(1, the set's largest value) */

static const char *const sets[NSETS] = {"params", "exp_avg", "exp_avg_sq", "GG0",
					"GG1",    "Q0",      "Q1"};

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
		e = fmax(e, isfinite(a[j]) && isfinite(b[j]) ? fabs(a[j] - b[j]) : INFINITY);
	return e;
}

/* One set of one matrix: got (the engine), ref (the double reference), n values. */
static void check_set(const char *what, const char *k, const float *got, const double *ref,
		      json_t *fx, size_t i, size_t n)
{
	double *w64 = malloc(n * 8), *w32 = malloc(n * 8), *tol = malloc(n * 8), *g = malloc(n * 8);
	double e32, e0, big = 1, t64;
	char msg[256];

	CHECK(json_array_size(at(fx, "ref_fp64", k, i)) == n &&
		      json_array_size(at(fx, "ref", k, i)) == n,
	      "fixture: %s %s holds %zu values, not %zu", what, k,
	      json_array_size(at(fx, "ref_fp64", k, i)), n);
	get_arr(at(fx, "ref_fp64", k, i), NULL, w64, n);
	get_arr(at(fx, "ref", k, i), NULL, w32, n);
	for (size_t j = 0; j < n; j++)
		g[j] = got[j];
	e32 = maxdiff(w32, w64, n), e0 = maxdiff(ref, w64, n);
	for (size_t j = 0; j < n; j++)
		big = fmax(big, fabs(w64[j]));
	t64 = TOL64 * big;
	snprintf(msg, sizeof(msg), "%s %s: the double reference vs the package in fp64", what, k);
	CHECK(e0 <= 2e-8 * big, "%s: %.3g of values up to %.3g", msg, e0, big);
	for (size_t j = 0; j < n; j++)
		tol[j] = fmax(t64, 3 * e32);
	snprintf(msg, sizeof(msg), "%s %s: the engine vs the double reference (the package's "
		 "fp32 error %.2g)", what, k, e32);
	th_close_tol(msg, got, ref, tol, n);
	for (size_t j = 0; j < n; j++)
		tol[j] = 3 * e32 + t64;
	snprintf(msg, sizeof(msg), "%s %s: the engine vs the package as shipped", what, k);
	th_close_tol(msg, got, w32, tol, n);
	printf("%-40s %-10s engine-ref %.2g, engine-fp64 %.2g, package fp32-fp64 %.2g, "
	       "ref-fp64 %.2g\n", what, k, maxdiff(g, ref, n), maxdiff(g, w64, n), e32, e0);
	free(w64), free(w32), free(tol), free(g);
}

/* The parameters' whole change over the steps: the engine's ||W - W_ref|| / ||W_ref - W0||
 * within 2e-5, W_ref the double reference (measured <= 2e-6 on PoCL, rusticl and Intel: about
 * 20 fp32 ulps of the change; test_soap allows 3e-4 of one step, where m's lerp of one
 * gradient can cancel). */
static void check_update(const char *what, const float *got, const double *ref, json_t *fx,
			 size_t i, size_t n)
{
	double *p0 = malloc(n * 8), num2 = 0, den2 = 0, e;

	get_arr(json_array_get(json_object_get(fx, "params0"), i), NULL, p0, n);
	for (size_t j = 0; j < n; j++) {
		num2 += (got[j] - ref[j]) * (got[j] - ref[j]);
		den2 += (ref[j] - p0[j]) * (ref[j] - p0[j]);
	}
	e = sqrt(num2 / den2);
	CHECK(e <= 2e-5, "%s: the update's normalised error %.3g (of ||dW|| %.3g)", what, e,
	      sqrt(den2));
	printf("%-40s %-10s normalised error of the whole update %.2g (||dW|| %.3g)\n", what,
	       "update", e, sqrt(den2));
	free(p0);
}

static clp_soap_work work_for(size_t rows, size_t cols, cl_mem m[CLP_SOAP_NWORK + 1])
{
	size_t n[CLP_SOAP_NWORK + 1];
	clp_soap_work w;
	clp_buf *b[CLP_SOAP_NWORK + 1] = {&w.x, &w.a, &w.b, &w.r[0], &w.r[1], &w.r[2], &w.est,
					   &w.perm, &w.qr};

	clp_soap_work_sizes(rows, cols, n);
	for (int i = 0; i <= CLP_SOAP_NWORK; i++) {
		m[i] = tn_buf(NULL, n[i]);
		*b[i] = clp_buf_at(m[i], 0);
	}
	return w;
}

/* One matrix of the fixture: steps 2..steps from state1 on the device and in the reference. */
static void one_matrix(clp_cl_ctx *ctx, json_t *fx, size_t i, int steps, double lr, double wd,
		       double lr_div)
{
	json_t *mj = json_array_get(json_object_get(fx, "mats"), i);
	json_t *s1 = json_array_get(json_object_get(fx, "state1"), i);
	const size_t rows = (size_t)json_integer_value(json_object_get(mj, "rows"));
	const size_t cols = (size_t)json_integer_value(json_object_get(mj, "cols"));
	const size_t n = rows * cols, sz[NSETS] = {n, n, n, rows * rows, cols * cols, rows * rows,
						   cols * cols};
	const int freq = (int)json_integer_value(json_object_get(mj, "frequency"));
	clp_soap_hp hp = {0, (float)num(mj, "beta1"), (float)num(mj, "beta2"),
			  (float)num(mj, "shampoo_beta"), (float)num(mj, "eps"), (float)wd, 0,
			  json_is_true(json_object_get(mj, "correct_bias")), 0, 0};
	static const char *const s1k[4] = {"GG0", "GG1", "Q0", "Q1"};
	double *ref[NSETS];
	float *f[NSETS], *g = malloc(n * 4), *got = malloc((rows > cols ? rows : cols) *
							  (rows > cols ? rows : cols) * 4);
	cl_mem dev[NSETS], mg = tn_buf(NULL, n), mw[CLP_SOAP_NWORK + 1];
	clp_soap_work w = work_for(rows, cols, mw);
	char what[128];

	for (int k = 0; k < NSETS; k++) {
		ref[k] = calloc(sz[k], 8), f[k] = calloc(sz[k], 4);
		if (k == 0)
			get_arr(json_array_get(json_object_get(fx, "params0"), i), f[k], ref[k], n);
		else if (k >= 3)
			get_arr(json_object_get(s1, s1k[k - 3]), f[k], ref[k], sz[k]);
		CHECK(k < 3 || json_array_size(json_object_get(s1, s1k[k - 3])) == sz[k],
		      "fixture: state1 %s of matrix %zu", s1k[k - 3 < 0 ? 0 : k - 3], i);
		dev[k] = tn_buf(f[k], sz[k]);
	}
	for (int t = 2; t <= steps; t++) {
		get_arr(json_array_get(json_array_get(json_object_get(fx, "grads"), i), t - 1), g,
			NULL, n);
		CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
		hp.lr = (float)(lr * t / lr_div);
		hp.t = t;
		hp.refresh = (t - 1) % freq == 0;
		CHECK_OK(clp_soap_update(ctx, clp_buf_at(dev[0], 0), clp_buf_at(dev[1], 0),
					 clp_buf_at(dev[2], 0), clp_buf_at(mg, 0),
					 clp_buf_at(dev[3], 0), clp_buf_at(dev[4], 0),
					 clp_buf_at(dev[5], 0), clp_buf_at(dev[6], 0), rows, cols, &hp,
					 CLP_BUF_NONE, 1.0f, &w));
		CHECK(clp_ref_soap_step(ref[0], ref[1], ref[2], ref[3], ref[4], ref[5], ref[6], g,
					rows, cols, &hp, 1.0, 0) == 0,
		      "reference");
	}
	snprintf(what, sizeof(what), "%zux%zu b=%g/%g sb=%g f=%d cb=%d eps=%g", rows, cols,
		 hp.beta1, hp.beta2, hp.shampoo_beta, freq, hp.correct_bias, hp.eps);
	for (int k = 0; k < NSETS; k++) {
		tn_get(dev[k], 0, got, sz[k]);
		check_set(what, sets[k], got, ref[k], fx, i, sz[k]);
		if (k == 0)
			check_update(what, got, ref[0], fx, i, n);
		clReleaseMemObject(dev[k]);
		free(ref[k]), free(f[k]);
	}
	for (int k = 0; k <= CLP_SOAP_NWORK; k++)
		clReleaseMemObject(mw[k]);
	clReleaseMemObject(mg);
	free(g), free(got);
}

static void test_against_reference(void)
{
	clp_cl_ctx *ctx = th_ctx();
	json_error_t err;
	const char *path = getenv("CLP_SOAP_FIXTURE") ? getenv("CLP_SOAP_FIXTURE")
						      : CLP_SOAP_FIXTURE;
	json_t *fx = json_load_file(path, 0, &err), *mats;
	int steps;

	if (!ctx)
		return;
	CHECK(fx != NULL, "%s: %s (line %d)", path, err.text, err.line);
	if (!fx)
		return;
	mats = json_object_get(fx, "mats");
	steps = (int)json_integer_value(json_object_get(fx, "steps"));
	CHECK(json_array_size(mats) >= 5 && steps >= 5 && num(fx, "lr_div") > 0 &&
		      json_array_size(json_object_get(fx, "state1")) == json_array_size(mats),
	      "fixture: %zu matrices, %d steps", json_array_size(mats), steps);
	for (size_t i = 0; i < json_array_size(mats); i++)
		one_matrix(ctx, fx, i, steps, num(fx, "lr"), num(fx, "weight_decay"),
			   num(fx, "lr_div"));
	json_decref(fx);
}

TH_MAIN(TH_TEST(test_against_reference))
