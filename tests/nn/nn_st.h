/* Helpers of the 16-bit storage tests (issue 18): device tensors of a storage type, the
 * comparison of a rounded kernel output with the rounded reference, and the NaN rule. */
#ifndef CLP_TESTS_NN_ST_H
#define CLP_TESTS_NN_ST_H

#include <stdint.h>

#include "cl/base/half.h"
#include "tests/nn/nn_test.h"

/* Offset (in elements of the tensor's type) at which ts_buf places its data: odd, so element
 * offsets of 16-bit tensors are exercised, and vector loads start unaligned. */
#define TS_OFF 3

/* A device buffer holding TS_OFF elements of garbage then x (n floats) in storage type dt
 * (packed: rounded to dt). */
static inline cl_mem ts_buf(clp_dtype dt, const float *x, size_t n)
{
	size_t sz = clp_dtype_size(dt), tot = n + TS_OFF;
	unsigned char *h = malloc(tot * sz);
	cl_mem m = NULL;

	memset(h, 0x5a, TS_OFF * sz);
	if (dt == CLP_F32)
		memcpy(h + TS_OFF * sz, x, n * sz);
	else
		clp_dtype_pack(dt, (uint16_t *)(void *)(h + TS_OFF * sz), x, n);
	CHECK_OK(clp_cl_buffer(th_ctx(), tot * sz, "test", &m));
	if (m)
		CHECK_OK(clp_cl_write(th_ctx(), m, 0, tot * sz, h));
	free(h);
	return m;
}

static inline clp_buf ts_at(cl_mem m, clp_dtype dt)
{
	return clp_buf_typed(m, TS_OFF, dt);
}

/* n values of a ts_buf tensor as floats. */
static inline void ts_get(clp_dtype dt, cl_mem m, float *dst, size_t n)
{
	size_t sz = clp_dtype_size(dt);
	uint16_t *h = malloc((n ? n : 1) * 2);

	if (dt == CLP_F32)
		CHECK_OK(clp_cl_read(th_ctx(), m, TS_OFF * sz, n * sz, dst));
	else {
		CHECK_OK(clp_cl_read(th_ctx(), m, TS_OFF * sz, n * sz, h));
		clp_dtype_unpack(dt, dst, h, n);
		/* an fp16 NaN is stored as the quiet NaN of its sign (cl/base/half.h), on every
		 * path */
		for (size_t i = 0; i < n && dt == CLP_F16; i++)
			if ((h[i] & 0x7c00u) == 0x7c00u && (h[i] & 0x3ffu))
				CHECK((h[i] & 0x7fffu) == 0x7e00u, "fp16 NaN stored as 0x%04x at [%zu], "
				      "not 0x7e00 | sign", h[i], i);
	}
	free(h);
}

/* One unit in the last place of dt at magnitude |v| (the gap above |v|'s binade start). */
static inline double ts_ulp(clp_dtype dt, double v)
{
	int e;
	double a = fabs(v);

	if (dt == CLP_F32 || !(a > 0))
		return dt == CLP_BF16 ? 0x1p-133 : dt == CLP_F16 ? 0x1p-24 : 0x1p-149;
	frexp(a, &e); /* a in [2^(e-1), 2^e) */
	if (dt == CLP_BF16)
		return ldexp(1.0, e - 1 - 7);
	return e - 1 < -14 ? 0x1p-24 : ldexp(1.0, e - 1 - 10);
}

/* got vs ref, element by element: where ref is NaN got must be NaN; elsewhere got must be
 * finite (or the same infinity) and within atol + rtol |ref| + ulps units in the last place of
 * dt at |ref| + atol + rtol |ref|. The float computation before the store is within atol + rtol
 * |ref| of the exact value (the fp32 kernel's tolerance), and rounding to nearest is monotone,
 * so the stored value is then within that plus one unit of the rounded reference (ulps = 1).
 * ulps = 0 with atol = rtol = 0: bitwise. Reports the worst element; returns 1 when all pass. */
static inline int ts_check(const char *what, clp_dtype dt, const float *got, const double *ref,
			   size_t n, double atol, double rtol, double ulps)
{
	size_t bad = 0, worst = 0;
	double wr = -1;

	for (size_t i = 0; i < n; i++) {
		double r;

		if (isnan(ref[i]) || isinf(ref[i])) {
			r = (isnan(ref[i]) ? isnan(got[i]) : (double)got[i] == ref[i]) ? 0 : INFINITY;
		} else {
			double e = atol + rtol * fabs(ref[i]);
			double tol = e + ulps * ts_ulp(dt, fabs(ref[i]) + e);
			double d = fabs((double)got[i] - ref[i]);

			r = !isfinite(got[i]) ? INFINITY : d == 0 ? 0 : tol > 0 ? d / tol : INFINITY;
		}
		if (!(r <= 1.0))
			bad++;
		if (!(r <= wr)) {
			wr = r;
			worst = i;
		}
	}
	if (bad)
		th_fail(__FILE__, __LINE__, "%s (%s): %zu of %zu elements off; worst [%zu] got %.9g "
			"want %.9g", what, clp_dtype_name(dt), bad, n, worst, got[worst], ref[worst]);
	return bad == 0;
}

/* A kernel's accumulated fp32 gradient (got - start, n elements) against central differences
 * (step h) of loss() with respect to x, the rounded 16-bit inputs as floats. Passes when the
 * RMS difference is at most 1e-4 of the gradient's RMS plus 2e-6: the kernel gradient's fp32
 * error (~1e-6 relative), the rounding of the accumulation onto start (|start| <= 1: 6e-8), the
 * O(h^2) error of the differences of a double forward (~1e-6 at h = 1e-3). The absolute part
 * keeps a gradient near zero (GELU's minimum, n = 1) from failing on relative error alone. */
static inline void ts_fd_check(const char *what, const char *name, clp_dtype dt, float *x,
			       size_t n, const float *got, const float *start, tn_loss_fn loss,
			       void *ud)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		float x0 = x[i], xp = x0 + 1e-3f, xm = x0 - 1e-3f;
		double lp, lm, fd, k = (double)got[i] - start[i];

		x[i] = xp;
		lp = loss(ud);
		x[i] = xm;
		lm = loss(ud);
		x[i] = x0;
		fd = (lp - lm) / ((double)xp - xm);
		num += (fd - k) * (fd - k);
		den += k * k;
	}
	num = sqrt(num / (double)(n ? n : 1));
	den = sqrt(den / (double)(n ? n : 1));
	CHECK(num <= 1e-4 * den + 2e-6, "%s (%s): %s vs finite differences of the fp32 forward: RMS "
	      "error %g, gradient RMS %g", what, clp_dtype_name(dt), name, num, den);
}

static const clp_dtype ts_types[] = {CLP_BF16, CLP_F16};
#define TS_NTYPES 2

#endif
