/* Median and quartiles of repeated measurements. */
#include "tools/stats.h"

#include <stdlib.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double quantile(const double *x, int n, double q)
{
	double pos = q * (n - 1);
	int i = (int)pos;
	double f = pos - i;

	return i + 1 < n ? x[i] * (1 - f) + x[i + 1] * f : x[n - 1];
}

clp_stats clp_stats_of(double *x, int n)
{
	clp_stats s = {0, 0, 0, 0, 0, n};

	if (n <= 0)
		return s;
	qsort(x, (size_t)n, sizeof(*x), cmp_double);
	s.min = x[0];
	s.max = x[n - 1];
	s.median = quantile(x, n, 0.5);
	s.q1 = quantile(x, n, 0.25);
	s.q3 = quantile(x, n, 0.75);
	return s;
}

double clp_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
