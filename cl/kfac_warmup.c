/* Build and run every K-FAC kernel once on tiny inputs, so later runs find them in the engine's
 * and PoCL's caches (`clpipe kernels`). */
#include <stdio.h>
#include <time.h>

#include "cl/kfac.h"
#include "cl/ops.h"
#include "cl/base/clock.h"

clp_status clp_kfac_warmup(clp_cl_ctx *ctx, FILE *log)
{
	/* 40: more than one block of the CPU shape, so every kernel of the blocked path runs */
	const size_t n = 40;
	cl_mem m = NULL;
	double t0 = clp_now();
	clp_status s;
	clp_buf F, W, inv, ws, st, info, sc;

	s = clp_cl_buffer(ctx, (4 * n * n + clp_kfac_workspace(ctx, n) + 16) * sizeof(float),
			  "kfac warmup", &m);
	if (s != CLP_OK)
		return s;
	F = clp_buf_at(m, 0);
	W = clp_buf_at(m, n * n);
	inv = clp_buf_at(m, 2 * n * n);
	st = clp_buf_at(m, 3 * n * n);
	info = clp_buf_at(m, 3 * n * n + 8);
	sc = clp_buf_at(m, 3 * n * n + 10);
	ws = clp_buf_at(m, 4 * n * n + 16);
	if ((s = clp_cl_fill(ctx, W, 1.0f, n * n)) == CLP_OK &&
	    (s = clp_kfac_factor(ctx, F, W, n, n, n, 1.0f / (float)n, 0.0f)) == CLP_OK &&
	    (s = clp_kfac_damping(ctx, st, F, n, &F, &n, 1, 0.1f)) == CLP_OK &&
	    (s = clp_kfac_damped_copy(ctx, W, F, n, st, 0)) == CLP_OK &&
	    (s = clp_kfac_spd_inverse(ctx, inv, W, n, ws, info)) == CLP_OK &&
	    (s = clp_kfac_precondition(ctx, W, n, F, n, inv, inv, n, n, 0, ws)) == CLP_OK &&
	    (s = clp_kfac_dot(ctx, sc, W, F, n * n)) == CLP_OK &&
	    (s = clp_kfac_kl_clip(ctx, clp_buf_at(m, 3 * n * n + 11), sc, clp_buf_at(NULL, 0),
				  0.1f, 1e-3f)) == CLP_OK &&
	    (s = clp_kfac_sgd(ctx, F, W, inv, n * n, 0.1f, 0.9f, 0.0f, clp_buf_at(NULL, 0),
			      clp_buf_at(m, 3 * n * n + 11))) == CLP_OK)
		s = clp_cl_finish(ctx);
	clReleaseMemObject(m);
	if (s == CLP_OK && log)
		fprintf(log, "  kfac.cl                     %6.2f s\n", clp_now() - t0);
	return s;
}
