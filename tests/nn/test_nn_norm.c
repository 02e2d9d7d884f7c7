/* LayerNorm, RMSNorm and bias: forward and backward against the double references (odd
 * shapes, poisoned outputs, non-zero gradients to check accumulation), references against
 * finite differences, and bitwise reproducible parameter gradients; the norms also on rows
 * wider than a strip of the CPU-shape backward. */
#include "tests/nn/nn_test.h"

static const size_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {70, 100}, {3, 768}};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))
/* The norms only: rows wider than one strip of the CPU-shape backward (NORM_BWD_COLS = 4096
 * columns), whose row sums come first: two blocks, a strip with a float8 part and one of 4
 * scalar columns. A whole block's rows in one work-item were wrong at C = 8001 on llvmpipe in
 * the CPU shape (its 65535 loop iterations a work-item). */
static const size_t wide[][2] = {{33, 8001}, {9, 4100}};

struct fd_ctx {
	float *inp, *w, *b, *g;
	size_t N, C;
	int rms;
	double *out;
};

static double norm_loss(void *ud)
{
	struct fd_ctx *f = ud;

	if (f->rms)
		clp_ref_rmsnorm_forward(f->out, NULL, f->inp, f->w, f->N, f->C, 1e-5f);
	else
		clp_ref_layernorm_forward(f->out, NULL, NULL, f->inp, f->w, f->b, f->N, f->C, 1e-5f);
	return tn_dot(f->g, f->out, f->N * f->C);
}

/* One shape, LayerNorm (rms = 0) or RMSNorm (rms = 1). */
static void check_norm(size_t N, size_t C, int rms, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	const size_t nc = N * C;
	float *inp = tn_rand(r, nc, -2, 3), *w = tn_rand(r, C, 0.5f, 1.5f), *b = tn_rand(r, C, -1, 1);
	float *g = tn_rand(r, nc, -1, 1), *dinp0 = tn_rand(r, nc, -1, 1), *dw0 = tn_rand(r, C, -1, 1);
	float *db0 = tn_rand(r, C, -1, 1), *got = malloc(nc * 4), *got2 = malloc(C * 4);
	double *out = malloc(nc * 8), *mean = malloc(N * 8), *rstd = malloc(N * 8);
	double *dinp = tn_dbl(dinp0, nc), *dw = tn_dbl(dw0, C), *db = tn_dbl(db0, C);
	cl_mem mi = tn_buf(inp, nc), mw = tn_buf(w, C), mb = tn_buf(b, C), mg = tn_buf(g, nc);
	cl_mem mo, mm = tn_buf(NULL, N), mr = tn_buf(NULL, N), mdi = tn_buf(dinp0, nc);
	cl_mem mdw = tn_buf(dw0, C), mdb = tn_buf(db0, C);
	char what[64];

	th_poison(got, nc);
	mo = tn_buf(got, nc);
	if (rms) {
		clp_ref_rmsnorm_forward(out, rstd, inp, w, N, C, 1e-5f);
		clp_ref_rmsnorm_backward(dinp, dw, g, inp, w, N, C, 1e-5f);
		CHECK_OK(clp_nn_rmsnorm_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mr, 0),
						clp_buf_at(mi, 0), clp_buf_at(mw, 0), N, C, 1e-5f));
		CHECK_OK(clp_nn_rmsnorm_backward(ctx, clp_buf_at(mdi, 0), clp_buf_at(mdw, 0),
						 clp_buf_at(mg, 0), clp_buf_at(mi, 0),
						 clp_buf_at(mw, 0), clp_buf_at(mr, 0), N, C));
	} else {
		clp_ref_layernorm_forward(out, mean, rstd, inp, w, b, N, C, 1e-5f);
		clp_ref_layernorm_backward(dinp, dw, db, g, inp, w, N, C, 1e-5f);
		CHECK_OK(clp_nn_layernorm_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(mm, 0),
						  clp_buf_at(mr, 0), clp_buf_at(mi, 0),
						  clp_buf_at(mw, 0), clp_buf_at(mb, 0), N, C, 1e-5f));
		CHECK_OK(clp_nn_layernorm_backward(ctx, clp_buf_at(mdi, 0), clp_buf_at(mdw, 0),
						   clp_buf_at(mdb, 0), clp_buf_at(mg, 0),
						   clp_buf_at(mi, 0), clp_buf_at(mw, 0),
						   clp_buf_at(mm, 0), clp_buf_at(mr, 0), N, C));
	}
	snprintf(what, sizeof(what), "%s N=%zu C=%zu", rms ? "rmsnorm" : "layernorm", N, C);
	tn_get(mo, 0, got, nc);
	th_close(what, got, out, nc, 1e-5, 1e-5);
	tn_get(mr, 0, got, N);
	th_close(what, got, rstd, N, 1e-6, 1e-5);
	tn_get(mdi, 0, got, nc);
	th_close(what, got, dinp, nc, 1e-4, 1e-4);
	tn_get(mdw, 0, got2, C);
	th_close(what, got2, dw, C, 1e-4, 1e-4);
	if (!rms) {
		tn_get(mdb, 0, got2, C);
		th_close(what, got2, db, C, 1e-4, 1e-4);
	}
	/* a frozen weight and bias (dw, db mem NULL): the same input gradient, bit for bit */
	{
		cl_mem mdi2 = tn_buf(dinp0, nc);
		float *got3 = malloc(nc * 4);

		tn_get(mdi, 0, got, nc);
		if (rms)
			CHECK_OK(clp_nn_rmsnorm_backward(ctx, clp_buf_at(mdi2, 0), CLP_BUF_NONE,
							 clp_buf_at(mg, 0), clp_buf_at(mi, 0),
							 clp_buf_at(mw, 0), clp_buf_at(mr, 0), N, C));
		else
			CHECK_OK(clp_nn_layernorm_backward(ctx, clp_buf_at(mdi2, 0), CLP_BUF_NONE,
							   CLP_BUF_NONE, clp_buf_at(mg, 0),
							   clp_buf_at(mi, 0), clp_buf_at(mw, 0),
							   clp_buf_at(mm, 0), clp_buf_at(mr, 0), N, C));
		tn_get(mdi2, 0, got3, nc);
		CHECK(!memcmp(got, got3, nc * 4), "%s: dinp differs without dw, db", what);
		clReleaseMemObject(mdi2);
		free(got3);
	}
	/* The reference backward against finite differences (small shapes only). */
	if (nc <= 800) {
		struct fd_ctx f = {inp, w, b, g, N, C, rms, out};
		double *gi = tn_dbl(NULL, nc), *gw = tn_dbl(NULL, C), *gb = tn_dbl(NULL, C), e;

		if (rms)
			clp_ref_rmsnorm_backward(gi, gw, g, inp, w, N, C, 1e-5f);
		else
			clp_ref_layernorm_backward(gi, gw, gb, g, inp, w, N, C, 1e-5f);
		e = tn_fd(inp, nc, 1, gi, norm_loss, &f, 1e-3f);
		CHECK(e < TN_FD_TOL || C == 1, "%s: dinp vs finite differences %g", what, e);
		e = tn_fd(w, C, 1, gw, norm_loss, &f, 1e-3f);
		CHECK(e < TN_FD_TOL, "%s: dw vs finite differences %g", what, e);
		if (!rms) {
			e = tn_fd(b, C, 1, gb, norm_loss, &f, 1e-3f);
			CHECK(e < TN_FD_TOL, "%s: db vs finite differences %g", what, e);
		}
		free(gi);
		free(gw);
		free(gb);
	}
	clReleaseMemObject(mi), clReleaseMemObject(mw), clReleaseMemObject(mb);
	clReleaseMemObject(mg), clReleaseMemObject(mo), clReleaseMemObject(mm);
	clReleaseMemObject(mr), clReleaseMemObject(mdi), clReleaseMemObject(mdw);
	clReleaseMemObject(mdb);
	free(inp), free(w), free(b), free(g), free(dinp0), free(dw0), free(db0), free(got);
	free(got2), free(out), free(mean), free(rstd), free(dinp), free(dw), free(db);
}

static void test_layernorm(void)
{
	th_rng r = th_rng_seed(1);

	if (!th_ctx())
		return;
	for (size_t i = 0; i < NSHAPES; i++)
		check_norm(shapes[i][0], shapes[i][1], 0, &r);
	for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++)
		check_norm(wide[i][0], wide[i][1], 0, &r);
}

static void test_rmsnorm(void)
{
	th_rng r = th_rng_seed(2);

	if (!th_ctx())
		return;
	for (size_t i = 0; i < NSHAPES; i++)
		check_norm(shapes[i][0], shapes[i][1], 1, &r);
	for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++)
		check_norm(wide[i][0], wide[i][1], 1, &r);
}

static void test_bias(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(3);

	if (!ctx)
		return;
	for (size_t s = 0; s < NSHAPES; s++) {
		size_t N = shapes[s][0], C = shapes[s][1], nc = N * C;
		float *x = tn_rand(&r, nc, -1, 1), *b = tn_rand(&r, C, -1, 1), *d0 = tn_rand(&r, C, -1, 1);
		float *got = malloc(nc * 4);
		double *ref = tn_dbl(x, nc), *db = tn_dbl(d0, C);
		cl_mem mx = tn_buf(x, nc), mb = tn_buf(b, C), md = tn_buf(d0, C);
		uint32_t first[1024];

		for (size_t i = 0; i < nc; i++)
			ref[i] += b[i % C];
		clp_ref_bias_backward(db, x, N, C);
		CHECK_OK(clp_nn_bias_forward(ctx, clp_buf_at(mx, 0), clp_buf_at(mb, 0), N, C));
		tn_get(mx, 0, got, nc);
		th_close("bias forward", got, ref, nc, 1e-6, 1e-6);
		/* backward twice from the same start: the same bits */
		CHECK_OK(clp_cl_write(ctx, mx, 0, nc * 4, x));
		CHECK_OK(clp_nn_bias_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mx, 0), N, C));
		tn_get(md, 0, got, C);
		th_close("bias backward", got, db, C, 1e-5, 1e-5);
		memcpy(first, got, C * 4);
		CHECK_OK(clp_cl_write(ctx, md, 0, C * 4, d0));
		CHECK_OK(clp_nn_bias_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mx, 0), N, C));
		tn_get(md, 0, got, C);
		CHECK(memcmp(first, got, C * 4) == 0, "bias backward not bitwise reproducible");
		clReleaseMemObject(mx), clReleaseMemObject(mb), clReleaseMemObject(md);
		free(x), free(b), free(d0), free(got), free(ref), free(db);
	}
}

/* The bias gradient at N over one launch of the CPU shape's BIAS_ROWS_LAUNCH = 2048 rows (its
 * running sums carried between launches in scratch, so that no work-item loops over more than
 * 2048 rows: llvmpipe silently ends a work-item's loops after 65535 iterations): against the
 * reference, and bitwise equal to the GPU shape's block partials and column sums, which add the
 * same numbers in the same order. C = 65: a full 64-column strip and a 1-column one. */
static void test_bias_launches(void)
{
	static const size_t shapes_l[][2] = {{2048, 65}, {2049, 65}, {4099, 65}, {6144, 7}};
	const char *env = getenv("CLPIPE_TEST_SHAPE");
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(5);

	if (!ctx)
		return;
	for (size_t s = 0; s < sizeof(shapes_l) / sizeof(shapes_l[0]); s++) {
		size_t N = shapes_l[s][0], C = shapes_l[s][1], nc = N * C;
		float *x = tn_rand(&r, nc, -1, 1), *d0 = tn_rand(&r, C, -1, 1);
		float *cpu = malloc(C * 4), *gpu = malloc(C * 4);
		double *db = tn_dbl(d0, C);
		cl_mem mx = tn_buf(x, nc), md = tn_buf(d0, C);

		clp_ref_bias_backward(db, x, N, C);
		clp_nn_set_shape(CLP_NN_SHAPE_CPU);
		CHECK_OK(clp_nn_bias_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mx, 0), N, C));
		tn_get(md, 0, cpu, C);
		CHECK(th_close("bias backward, CPU shape", cpu, db, C, 1e-5, 1e-5), "N=%zu C=%zu", N,
		      C);
		CHECK_OK(clp_cl_write(ctx, md, 0, C * 4, d0));
		clp_nn_set_shape(CLP_NN_SHAPE_GPU);
		CHECK_OK(clp_nn_bias_backward(ctx, clp_buf_at(md, 0), clp_buf_at(mx, 0), N, C));
		tn_get(md, 0, gpu, C);
		CHECK(memcmp(cpu, gpu, C * 4) == 0, "bias backward N=%zu C=%zu: the shapes differ", N,
		      C);
		clReleaseMemObject(mx), clReleaseMemObject(md);
		free(x), free(d0), free(cpu), free(gpu), free(db);
	}
	/* back to what the harness set (CLPIPE_TEST_SHAPE) */
	clp_nn_set_shape(env && *env ? (!strcmp(env, "gpu") ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU)
				     : CLP_NN_SHAPE_AUTO);
}

TH_MAIN(TH_TEST(test_layernorm), TH_TEST(test_rmsnorm), TH_TEST(test_bias),
	TH_TEST(test_bias_launches))
