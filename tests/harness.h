/* The test harness: checks that are always compiled in (never assert), comparisons that let no
 * NaN or Inf through, poisoned outputs, a deterministic random source (harness.c, library
 * clp_test_host: no OpenCL), and a shared OpenCL context per test process (harness_cl.c, library
 * clp_test_harness; the fixture: kernels are built once and cached on disk). */
#ifndef CLP_TEST_HARNESS_H
#define CLP_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

struct clp_cl_ctx;

void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int th_failures(void);

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			th_fail(__FILE__, __LINE__, __VA_ARGS__);                                  \
	} while (0)

#define CHECK_OK(expr)                                                                             \
	do {                                                                                       \
		clp_status th_s_ = (expr);                                                         \
		if (th_s_ != CLP_OK)                                                               \
			th_fail(__FILE__, __LINE__, "%s -> %s: %s", #expr, clp_status_str(th_s_),  \
				clp_last_error());                                                 \
	} while (0)

/* Expect a failure with the given status whose message contains every needle (NULL-ended). */
#define CHECK_ERR(expr, status, ...) th_check_err(__FILE__, __LINE__, #expr, (expr), status, __VA_ARGS__, (const char *)0)
void th_check_err(const char *file, int line, const char *expr, clp_status got, clp_status want, ...);

/* got[i] vs ref[i]: |got - ref| <= atol + rtol * |ref| (or tol[i] when tol is given); any NaN or
 * Inf in got fails. Reports the worst element. Returns 1 when all pass. */
int th_close(const char *what, const float *got, const double *ref, size_t n, double atol,
	     double rtol);
int th_close_tol(const char *what, const float *got, const double *ref, const double *tol,
		 size_t n);
/* The normalised error ||got - ref|| / ||ref|| (2-norms); NaN if got has a non-finite value. */
double th_norm_err(const float *got, const double *ref, size_t n);

/* Deterministic random numbers (splitmix64). */
typedef struct th_rng {
	uint64_t s;
} th_rng;
th_rng th_rng_seed(uint64_t seed);
uint64_t th_next(th_rng *r);
double th_uniform(th_rng *r);                        /* [0, 1) */
void th_fill_uniform(th_rng *r, float *x, size_t n, float lo, float hi);
void th_fill_normal(th_rng *r, float *x, size_t n, float std);
void th_poison(float *x, size_t n); /* quiet NaN: unwritten elements show */

/* The process-wide OpenCL context (device: CLPIPE_TEST_DEVICE, else CLPIPE_DEVICE, else the
 * default); NULL after a failure that th_fail() already reported. */
struct clp_cl_ctx *th_ctx(void);

/* Run fn once when th_main has run the tests (the context's release). */
void th_at_end(void (*fn)(void));

/* Tests: a table of named functions; th_main runs those named on the command line, or all. */
struct th_test {
	const char *name;
	void (*fn)(void);
};
int th_main(int argc, char **argv, const struct th_test *tests, int ntests);
#define TH_MAIN(...)                                                                               \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		static const struct th_test tests_[] = {__VA_ARGS__};                              \
		return th_main(argc, argv, tests_, (int)(sizeof(tests_) / sizeof(tests_[0])));     \
	}
#define TH_TEST(fn) {#fn, fn}

#endif
