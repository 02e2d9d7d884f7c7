/* The test harness's OpenCL part: the shared context of a test process (harness.h th_ctx). Apart
 * from harness.c so that host-only tests (clp_test_host) link no OpenCL. */
#include "tests/harness.h"

#include <stdlib.h>
#include <string.h>

#include "cl/nn.h"
#include "cl/runtime.h"

static clp_cl_ctx *ctx;
static int ctx_failed;

static void ctx_free(void)
{
	clp_cl_ctx_free(ctx);
	ctx = NULL;
}

clp_cl_ctx *th_ctx(void)
{
	const char *sel = getenv("CLPIPE_TEST_DEVICE");
	clp_status s;

	const char *shape = getenv("CLPIPE_TEST_SHAPE");

	if (ctx || ctx_failed)
		return ctx;
	/* CLPIPE_TEST_SHAPE=cpu|gpu: every kernel family in the other geometry than the device's
	 * own (ctest's <test>.cpushape / .gpushape) */
	if (shape && *shape) {
		int gpu = !strcmp(shape, "gpu");

		clp_cl_set_shape(gpu);
		clp_nn_set_shape(gpu ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU);
	}
	th_at_end(ctx_free);
	s = clp_cl_ctx_create(&ctx, sel);
	if (s != CLP_OK) {
		ctx_failed = 1;
		th_fail(__FILE__, __LINE__, "no OpenCL context: %s", clp_last_error());
	}
	return ctx;
}
