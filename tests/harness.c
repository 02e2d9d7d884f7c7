/* The test harness (see harness.h). */
#include "tests/harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl/base/clock.h"

static int failures;
static const char *current = "";
static void (*at_end)(void);

void th_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	failures++;
	fprintf(stderr, "FAIL [%s] %s:%d: ", current, file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int th_failures(void)
{
	return failures;
}

void th_check_err(const char *file, int line, const char *expr, clp_status got, clp_status want, ...)
{
	va_list ap;
	const char *needle;

	if (got != want) {
		th_fail(file, line, "%s: expected %s, got %s (%s)", expr, clp_status_str(want),
			clp_status_str(got), clp_last_error());
		return;
	}
	va_start(ap, want);
	while ((needle = va_arg(ap, const char *)))
		if (!strstr(clp_last_error(), needle))
			th_fail(file, line, "%s: message lacks '%s': %s", expr, needle,
				clp_last_error());
	va_end(ap);
}

int th_close_tol(const char *what, const float *got, const double *ref, const double *tol, size_t n)
{
	size_t worst = 0, bad = 0;
	double wratio = -1;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		double ratio = isfinite(got[i]) ? d / (tol[i] > 0 ? tol[i] : 1e-300) : INFINITY;

		if (!(ratio <= 1.0))
			bad++;
		if (!(ratio <= wratio) || wratio < 0) {
			wratio = ratio;
			worst = i;
		}
	}
	if (bad) {
		th_fail(__FILE__, __LINE__, "%s: %zu of %zu elements off; worst [%zu] got %.9g want "
			"%.9g (tolerance %.3g)", what, bad, n, worst, got[worst], ref[worst],
			tol[worst]);
		return 0;
	}
	return 1;
}

int th_close(const char *what, const float *got, const double *ref, size_t n, double atol,
	     double rtol)
{
	double *tol = malloc((n ? n : 1) * sizeof(*tol));
	int ok;

	if (!tol) {
		th_fail(__FILE__, __LINE__, "%s: out of memory", what);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		tol[i] = atol + rtol * fabs(ref[i]);
	ok = th_close_tol(what, got, ref, tol, n);
	free(tol);
	return ok;
}

double th_norm_err(const float *got, const double *ref, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			return NAN;
		num += (got[i] - ref[i]) * (got[i] - ref[i]);
		den += ref[i] * ref[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

void th_at_end(void (*fn)(void))
{
	at_end = fn;
}

th_rng th_rng_seed(uint64_t seed)
{
	th_rng r = {seed * 0x9e3779b97f4a7c15ULL + 1};
	return r;
}

uint64_t th_next(th_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

double th_uniform(th_rng *r)
{
	return (double)(th_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

void th_fill_uniform(th_rng *r, float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * (float)th_uniform(r);
}

void th_fill_normal(th_rng *r, float *x, size_t n, float std)
{
	for (size_t i = 0; i < n; i++) {
		double u1 = th_uniform(r) + 1e-300, u2 = th_uniform(r);

		x[i] = (float)(std * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
	}
}

void th_poison(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = NAN;
}

int th_main(int argc, char **argv, const struct th_test *tests, int ntests)
{
	int ran = 0;

	for (int i = 0; i < ntests; i++) {
		int selected = argc < 2;
		int before = failures;
		double t0;

		for (int a = 1; a < argc; a++)
			if (strcmp(argv[a], tests[i].name) == 0)
				selected = 1;
		if (!selected)
			continue;
		current = tests[i].name;
		t0 = clp_now();
		tests[i].fn();
		printf("%s %s (%.2f s)\n", failures == before ? "ok  " : "FAIL", tests[i].name,
		       clp_now() - t0);
		fflush(stdout);
		ran++;
	}
	if (ran == 0) {
		fprintf(stderr, "no test matched; tests are:");
		for (int i = 0; i < ntests; i++)
			fprintf(stderr, " %s", tests[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	if (at_end)
		at_end();
	printf("%d test%s, %d failure%s\n", ran, ran == 1 ? "" : "s", failures,
	       failures == 1 ? "" : "s");
	return failures ? 1 : 0;
}
