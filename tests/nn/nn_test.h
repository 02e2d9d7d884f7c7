/* Helpers shared by the nn tests: device buffers from host arrays, reads, random arrays and
 * finite-difference checks of the double-precision references. */
#ifndef CLP_TESTS_NN_TEST_H
#define CLP_TESTS_NN_TEST_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/nn.h"
#include "cl/ref/nn_ref.h"
#include "tests/harness.h"

/* A device buffer of n 4-byte elements holding host (or zeros when host is NULL). */
static inline cl_mem tn_buf(const void *host, size_t n)
{
	cl_mem m = NULL;

	CHECK_OK(clp_cl_buffer(th_ctx(), (n ? n : 1) * 4, "test", &m));
	if (m && host && n)
		CHECK_OK(clp_cl_write(th_ctx(), m, 0, n * 4, host));
	return m;
}

static inline void tn_get(cl_mem m, size_t off, void *dst, size_t n)
{
	CHECK_OK(clp_cl_read(th_ctx(), m, off * 4, n * 4, dst));
}

static inline float *tn_rand(th_rng *r, size_t n, float lo, float hi)
{
	float *x = malloc((n ? n : 1) * sizeof(*x));

	th_fill_uniform(r, x, n, lo, hi);
	return x;
}

static inline double *tn_dbl(const float *x, size_t n)
{
	double *d = malloc((n ? n : 1) * sizeof(*d));

	for (size_t i = 0; i < n; i++)
		d[i] = x ? x[i] : 0.0;
	return d;
}

/* Σ g_i y_i: the scalar whose gradient a backward computes when dout = g. */
static inline double tn_dot(const float *g, const double *y, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)g[i] * y[i];
	return s;
}

/* Central differences of loss() with respect to x[i] (every stride-th element), compared with
 * grad: returns ||fd - grad|| / ||grad|| over the checked elements. */
typedef double (*tn_loss_fn)(void *ud);
static inline double tn_fd(float *x, size_t n, size_t stride, const double *grad, tn_loss_fn loss,
			   void *ud, float h)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i += stride) {
		float x0 = x[i], xp = x0 + h, xm = x0 - h;
		double lp, lm, fd;

		x[i] = xp;
		lp = loss(ud);
		x[i] = xm;
		lm = loss(ud);
		x[i] = x0;
		fd = (lp - lm) / ((double)xp - xm);
		num += (fd - grad[i]) * (fd - grad[i]);
		den += grad[i] * grad[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define TN_FD_TOL 1e-5

#endif
