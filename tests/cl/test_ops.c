/* Small kernels against plain C: fill, scale, axpy, add, mul at odd sizes and offsets, and the
 * compensated reductions on 10^7 elements of mixed magnitude (relative error <= 1e-6). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/ops.h"
#include "cl/ref/ref.h"
#include "tests/harness.h"

static const size_t sizes[] = {1, 7, 33, 127, 1000, 8191, 8193, 70001};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define OFF 5 /* element offset: no view starts aligned */

static void test_elementwise(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(1);
	size_t nmax = sizes[NSIZES - 1] + 2 * OFF;
	float *x = malloc(nmax * 4), *y = malloc(nmax * 4), *got = malloc(nmax * 4);
	double *ref = malloc(nmax * 8);
	cl_mem dx, dy, dz;

	if (!ctx || !x || !y || !got || !ref)
		goto out;
	CHECK_OK(clp_cl_buffer(ctx, nmax * 4, "x", &dx));
	CHECK_OK(clp_cl_buffer(ctx, nmax * 4, "y", &dy));
	CHECK_OK(clp_cl_buffer(ctx, nmax * 4, "z", &dz));
	for (size_t si = 0; si < NSIZES; si++) {
		size_t n = sizes[si];
		char what[64];

		th_fill_uniform(&r, x, nmax, -2, 2);
		th_fill_uniform(&r, y, nmax, -2, 2);
		CHECK_OK(clp_cl_write(ctx, dx, 0, nmax * 4, x));
		CHECK_OK(clp_cl_write(ctx, dy, 0, nmax * 4, y));
		th_poison(got, nmax);
		CHECK_OK(clp_cl_write(ctx, dz, 0, nmax * 4, got));

		/* fill: exactly n elements after the offset, neighbours untouched */
		CHECK_OK(clp_cl_fill(ctx, clp_buf_at(dz, OFF), 0.25f, n));
		CHECK_OK(clp_cl_read(ctx, dz, 0, nmax * 4, got));
		for (size_t i = 0; i < nmax; i++)
			CHECK(i >= OFF && i < OFF + n ? got[i] == 0.25f : isnan(got[i]),
			      "fill n=%zu: element %zu is %g", n, i, got[i]);

		/* z = x + y */
		CHECK_OK(clp_cl_add(ctx, clp_buf_at(dz, OFF), clp_buf_at(dx, 1), clp_buf_at(dy, 2), n));
		CHECK_OK(clp_cl_read(ctx, dz, OFF * 4, n * 4, got));
		for (size_t i = 0; i < n; i++)
			ref[i] = (double)(x[1 + i] + y[2 + i]);
		snprintf(what, sizeof(what), "add n=%zu", n);
		th_close(what, got, ref, n, 0, 0);

		/* z = x * y */
		CHECK_OK(clp_cl_mul(ctx, clp_buf_at(dz, OFF), clp_buf_at(dx, 1), clp_buf_at(dy, 2), n));
		CHECK_OK(clp_cl_read(ctx, dz, OFF * 4, n * 4, got));
		for (size_t i = 0; i < n; i++)
			ref[i] = (double)(x[1 + i] * y[2 + i]);
		snprintf(what, sizeof(what), "mul n=%zu", n);
		th_close(what, got, ref, n, 0, 0);

		/* y += 0.5 x; then y *= -3 */
		CHECK_OK(clp_cl_axpy(ctx, clp_buf_at(dy, OFF), clp_buf_at(dx, 0), 0.5f, n));
		CHECK_OK(clp_cl_scale(ctx, clp_buf_at(dy, OFF), -3.0f, n));
		CHECK_OK(clp_cl_read(ctx, dy, 0, nmax * 4, got));
		for (size_t i = 0; i < n; i++)
			ref[i] = -3.0 * ((double)y[OFF + i] + 0.5 * x[i]);
		snprintf(what, sizeof(what), "axpy+scale n=%zu", n);
		th_close(what, got + OFF, ref, n, 1e-6, 1e-6);
		CHECK(got[OFF - 1] == y[OFF - 1] && got[OFF + n] == y[OFF + n],
		      "axpy n=%zu wrote outside its range", n);
	}
	clReleaseMemObject(dx);
	clReleaseMemObject(dy);
	clReleaseMemObject(dz);
out:
	free(x);
	free(y);
	free(got);
	free(ref);
}

/* Values of mixed magnitude: 10^-6 .. 10^6, positive (a sum without cancellation, so the
 * relative error measures the summation, not the conditioning). */
static void mixed(th_rng *r, float *x, size_t n, int signs)
{
	for (size_t i = 0; i < n; i++) {
		double mag = pow(10.0, -6.0 + 12.0 * th_uniform(r));
		double v = mag * (0.5 + th_uniform(r));

		x[i] = (float)(signs && (th_next(r) & 1) && (i % 3) ? -0.5 * v : v);
	}
}

static void test_reductions(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(7);
	const size_t big = 10000000;
	const size_t ns[] = {1, 7, 33, 127, 1000, 65537, big};
	float *x = malloc(big * 4);
	float out[3];
	cl_mem dx, dout;

	if (!ctx || !x)
		goto out;
	CHECK_OK(clp_cl_buffer(ctx, big * 4, "x", &dx));
	CHECK_OK(clp_cl_buffer(ctx, 64, "out", &dout));
	for (int signs = 0; signs < 2; signs++) {
		mixed(&r, x, big, signs);
		CHECK_OK(clp_cl_write(ctx, dx, 0, big * 4, x));
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			size_t n = ns[i];
			double s = clp_ref_sum(x, n), q = clp_ref_sumsq(x, n);
			double es, eq, en;

			th_poison(out, 3);
			CHECK_OK(clp_cl_write(ctx, dout, 0, sizeof(out), out));
			CHECK_OK(clp_cl_sum(ctx, clp_buf_at(dout, 0), clp_buf_at(dx, 0), n));
			CHECK_OK(clp_cl_sumsq(ctx, clp_buf_at(dout, 1), clp_buf_at(dx, 0), n));
			CHECK_OK(clp_cl_nrm2(ctx, clp_buf_at(dout, 2), clp_buf_at(dx, 0), n));
			CHECK_OK(clp_cl_read(ctx, dout, 0, sizeof(out), out));
			es = fabs(out[0] - s) / fabs(s);
			eq = fabs(out[1] - q) / q;
			en = fabs(out[2] - sqrt(q)) / sqrt(q);
			CHECK(es <= 1e-6, "sum n=%zu signs=%d: %.9g vs %.9g, rel err %.2e", n, signs,
			      out[0], s, es);
			CHECK(eq <= 1e-6, "sumsq n=%zu: %.9g vs %.9g, rel err %.2e", n, out[1], q, eq);
			CHECK(en <= 1e-6, "nrm2 n=%zu: %.9g vs %.9g, rel err %.2e", n, out[2], sqrt(q),
			      en);
		}
	}
	/* a NaN anywhere shows in the sum */
	x[12345] = NAN;
	CHECK_OK(clp_cl_write(ctx, dx, 12345 * 4, 4, &x[12345]));
	CHECK_OK(clp_cl_sum(ctx, clp_buf_at(dout, 0), clp_buf_at(dx, 0), big));
	CHECK_OK(clp_cl_read(ctx, dout, 0, 4, out));
	CHECK(isnan(out[0]), "a NaN input gives a NaN sum, got %g", out[0]);
	clReleaseMemObject(dx);
	clReleaseMemObject(dout);
out:
	free(x);
}

/* A naive float loop loses digits on the same data: the test would catch a plain sum. */
static void test_reference_is_demanding(void)
{
	th_rng r = th_rng_seed(7);
	const size_t n = 10000000;
	float *x = malloc(n * 4), naive = 0;

	if (!x)
		return;
	mixed(&r, x, n, 0);
	for (size_t i = 0; i < n; i++)
		naive += x[i];
	CHECK(fabs(naive - clp_ref_sum(x, n)) / clp_ref_sum(x, n) > 1e-6,
	      "plain float summation should fail the 1e-6 bound on this data");
	free(x);
}

TH_MAIN(TH_TEST(test_elementwise), TH_TEST(test_reductions), TH_TEST(test_reference_is_demanding))
