/* AdamW against the double reference over several steps (with and without decay, with a
 * gradient scale and the clip factor from the statistics), the gradient statistics over
 * several tensors (sum of squares, norm, clip factor, non-finite flag), and a skipped step. */
#include "tests/nn/nn_test.h"

static void test_grad_stats(void)
{
	static const size_t sizes[] = {1, 7, 33, 40000, 16384};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(51);
	float *x[5], st[4];
	cl_mem m[5], ms;
	clp_buf bufs[5];
	double ss = 0, want[4];

	if (!ctx)
		return;
	for (int i = 0; i < 5; i++) {
		x[i] = tn_rand(&r, sizes[i], -1, 1);
		m[i] = tn_buf(NULL, sizes[i] + 3);
		CHECK_OK(clp_cl_write(ctx, m[i], 12, sizes[i] * 4, x[i]));
		bufs[i] = clp_buf_at(m[i], 3);
		for (size_t j = 0; j < sizes[i]; j++)
			ss += (double)x[i][j] * x[i][j];
	}
	ms = tn_buf(NULL, 5);
	CHECK_OK(clp_nn_grad_stats(ctx, clp_buf_at(ms, 1), bufs, sizes, 5, 1.0f));
	tn_get(ms, 1, st, 4);
	want[0] = ss, want[1] = 0, want[2] = sqrt(ss), want[3] = 1.0 / (sqrt(ss) + 1e-6);
	th_close("grad stats (clipped)", st, want, 4, 1e-7, 1e-6);
	CHECK_OK(clp_nn_grad_stats(ctx, clp_buf_at(ms, 1), bufs, sizes, 5, 0.0f));
	tn_get(ms, 1, st, 4);
	want[3] = 1;
	th_close("grad stats (no clipping)", st, want, 4, 1e-7, 1e-6);
	CHECK_OK(clp_nn_grad_stats(ctx, clp_buf_at(ms, 1), bufs, sizes, 5, 1e6f));
	tn_get(ms, 1, st, 4);
	CHECK(st[3] == 1.0f, "clip factor above 1: %g", st[3]);
	/* one NaN, and separately one Inf, anywhere: flagged, factor 0 */
	for (int k = 0; k < 2; k++) {
		float bad = k ? INFINITY : NAN;

		CHECK_OK(clp_cl_write(ctx, m[3], (3 + 39999 - k * 5000) * 4, 4, &bad));
		CHECK_OK(clp_nn_grad_stats(ctx, clp_buf_at(ms, 1), bufs, sizes, 5, 1.0f));
		tn_get(ms, 1, st, 4);
		CHECK(st[1] == 1.0f && st[3] == 0.0f, "%s: non-finite flag %g, factor %g",
		      k ? "Inf" : "NaN", st[1], st[3]);
		CHECK_OK(clp_cl_write(ctx, m[3], 12, sizes[3] * 4, x[3]));
	}
	for (int i = 0; i < 5; i++) {
		clReleaseMemObject(m[i]);
		free(x[i]);
	}
	clReleaseMemObject(ms);
}

/* clp_nn_grad_stats_each: the tensors of one buffer (odd sizes and offsets, one over several
 * chunks) in two launches, bitwise what one clp_nn_grad_stats per tensor writes and within
 * 1e-7 + 1e-6|x| of the double reference; a NaN flags its own tensor only; tensors in
 * separate buffers take the per-tensor path with the same figures. */
static void test_grad_stats_each(void)
{
	static const size_t sizes[] = {1, 7, 33, 127, 40000, 16384};
	enum { NT = 6 };
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(52);
	float *x = NULL, each[4 * NT + 3], one[4 * NT + 3], bad = NAN;
	size_t at[NT], off[NT], total = 5;
	clp_buf g[NT], gs[NT];
	cl_mem m, ms, ms1, sep[NT];

	if (!ctx)
		return;
	for (int i = 0; i < NT; i++)
		at[i] = total, total += sizes[i] + 3, off[i] = 3 + 4 * (size_t)(NT - 1 - i);
	x = tn_rand(&r, total, -1, 1);
	m = tn_buf(x, total);
	ms = tn_buf(NULL, 4 * NT + 3);
	ms1 = tn_buf(NULL, 4 * NT + 3);
	for (int i = 0; i < NT; i++) {
		g[i] = clp_buf_at(m, at[i]);
		sep[i] = tn_buf(x + at[i], sizes[i]);
		gs[i] = clp_buf_at(sep[i], 0);
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) { /* a NaN in tensor 4 (of 40000) only */
			CHECK_OK(clp_cl_write(ctx, m, (at[4] + 20001) * 4, 4, &bad));
			CHECK_OK(clp_cl_write(ctx, sep[4], 20001 * 4, 4, &bad));
		}
		CHECK_OK(clp_nn_grad_stats_each(ctx, ms, off, g, sizes, NT, 1.0f));
		for (int i = 0; i < NT; i++)
			CHECK_OK(clp_nn_grad_stats(ctx, clp_buf_at(ms1, off[i]), &g[i], &sizes[i], 1,
						   1.0f));
		tn_get(ms, 0, each, 4 * NT + 3);
		tn_get(ms1, 0, one, 4 * NT + 3);
		for (int i = 0; i < NT; i++) {
			double ss = 0, want[4];

			CHECK(!memcmp(each + off[i], one + off[i], 4 * sizeof(float)),
			      "pass %d tensor %d (%zu): %g %g %g %g, one call each %g %g %g %g", pass,
			      i, sizes[i], each[off[i]], each[off[i] + 1], each[off[i] + 2],
			      each[off[i] + 3], one[off[i]], one[off[i] + 1], one[off[i] + 2],
			      one[off[i] + 3]);
			if (pass == 1 && i == 4) {
				CHECK(each[off[i] + 1] == 1.0f && each[off[i] + 3] == 0.0f,
				      "NaN not flagged: %g, factor %g", each[off[i] + 1],
				      each[off[i] + 3]);
				continue;
			}
			for (size_t j = 0; j < sizes[i]; j++)
				ss += (double)x[at[i] + j] * x[at[i] + j];
			want[0] = ss, want[1] = 0, want[2] = sqrt(ss);
			want[3] = fmin(1.0, 1.0 / (sqrt(ss) + 1e-6));
			th_close("grad stats each", each + off[i], want, 4, 1e-7, 1e-6);
		}
		/* separate buffers: the per-tensor path, the same figures */
		CHECK_OK(clp_nn_grad_stats_each(ctx, ms1, off, gs, sizes, NT, 1.0f));
		tn_get(ms1, 0, one, 4 * NT + 3);
		for (int i = 0; i < NT; i++)
			CHECK(!memcmp(each + off[i], one + off[i], 4 * sizeof(float)),
			      "pass %d tensor %d: separate buffers differ", pass, i);
	}
	CHECK_OK(clp_nn_grad_stats_each(ctx, ms, off, g, sizes, 0, 1.0f)); /* none: no launch */
	for (int i = 0; i < NT; i++)
		clReleaseMemObject(sep[i]);
	clReleaseMemObject(m);
	clReleaseMemObject(ms);
	clReleaseMemObject(ms1);
	free(x);
}

static void test_adamw(void)
{
	static const size_t sizes[] = {1, 7, 1000, 20001};
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(52);

	if (!ctx)
		return;
	for (size_t t = 0; t < 4; t++)
		for (int decay = 0; decay < 2; decay++) {
			size_t n = sizes[t];
			float *p = tn_rand(&r, n, -1, 1), *m = tn_rand(&r, n, -0.1f, 0.1f);
			float *v = tn_rand(&r, n, 0, 0.01f), *g = malloc(n * 4), *got = malloc(n * 4);
			double *ref = malloc(n * 8);
			cl_mem mp = tn_buf(p, n), mm = tn_buf(m, n), mv = tn_buf(v, n), mg, ms;
			clp_nn_adamw_hp hp = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
			const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f};
			char what[64];

			mg = tn_buf(NULL, n);
			ms = tn_buf(stats, 4);
			snprintf(what, sizeof(what), "adamw n=%zu decay=%d", n, decay);
			for (int step = 1; step <= 3; step++) {
				th_fill_uniform(&r, g, n, -2, 2);
				CHECK_OK(clp_cl_write(ctx, mg, 0, n * 4, g));
				hp.step = step;
				hp.lr = 3e-3f * (float)step;
				/* step 2 applies the clip factor 0.5 from the stats */
				CHECK_OK(clp_nn_adamw_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0),
							     clp_buf_at(mv, 0), clp_buf_at(mg, 0), n,
							     &hp, decay,
							     step == 2 ? clp_buf_at(ms, 0)
								       : clp_buf_at(NULL, 0),
							     0.75f));
				clp_ref_adamw(p, m, v, g, n, &hp, decay, step == 2 ? 0.375f : 0.75f);
			}
			tn_get(mp, 0, got, n);
			for (size_t i = 0; i < n; i++)
				ref[i] = p[i];
			th_close(what, got, ref, n, 1e-6, 1e-5);
			tn_get(mv, 0, got, n);
			for (size_t i = 0; i < n; i++)
				ref[i] = v[i];
			th_close(what, got, ref, n, 1e-9, 1e-5);
			/* a non-finite flag in the stats skips the update entirely */
			{
				const float skip[4] = {NAN, 1.0f, NAN, 0.0f};
				float *before = malloc(n * 4);

				tn_get(mp, 0, before, n);
				CHECK_OK(clp_cl_write(ctx, ms, 0, 16, skip));
				CHECK_OK(clp_nn_adamw_update(ctx, clp_buf_at(mp, 0), clp_buf_at(mm, 0),
							     clp_buf_at(mv, 0), clp_buf_at(mg, 0), n,
							     &hp, decay, clp_buf_at(ms, 0), 1.0f));
				tn_get(mp, 0, got, n);
				CHECK(memcmp(got, before, n * 4) == 0, "%s: skipped step changed the "
				      "parameters", what);
				free(before);
			}
			clReleaseMemObject(mp), clReleaseMemObject(mm), clReleaseMemObject(mv);
			clReleaseMemObject(mg), clReleaseMemObject(ms);
			free(p), free(m), free(v), free(g), free(got), free(ref);
		}
	{
		clp_nn_adamw_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0};

		CHECK_ERR(clp_nn_adamw_update(ctx, clp_buf_at(NULL, 0), clp_buf_at(NULL, 0),
					      clp_buf_at(NULL, 0), clp_buf_at(NULL, 0), 1, &hp, 1,
					      clp_buf_at(NULL, 0), 1.0f),
			  CLP_ERR_INVALID, "step 0");
	}
}

/* clp_nn_adamw_update_each: the tensors of one buffer per role (odd sizes, a different offset
 * per role, decay on some) in one launch, three steps (the second with the clip factor of the
 * stats) and a skipped one: bitwise what one clp_nn_adamw_update per tensor does, and within
 * the tolerances of test_adamw of the double reference. */
static void test_adamw_each(void)
{
	static const size_t sizes[] = {1, 7, 33, 127, 20001};
	enum { NT = 5 };
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(53);
	size_t at[4][NT], total[4] = {3, 5, 1, 9}, all = 0;
	float *host[4], *ref[3], *got = NULL, *want = NULL;
	cl_mem big[4], sep[4][NT], ms;
	clp_buf tb[4][NT];
	const clp_buf *t[4] = {tb[0], tb[1], tb[2], tb[3]};
	int decay[NT] = {1, 0, 1, 0, 1};
	const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f}, skip[4] = {NAN, 1.0f, NAN, 0.0f};
	clp_nn_adamw_hp hp = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};

	if (!ctx)
		return;
	for (int j = 0; j < 4; j++)
		for (int i = 0; i < NT; i++)
			at[j][i] = total[j], total[j] += sizes[i] + (size_t)j;
	for (int j = 0; j < 4; j++) {
		host[j] = tn_rand(&r, total[j], j == 2 ? 0 : -1, j == 2 ? 0.01f : 1);
		big[j] = tn_buf(host[j], total[j]);
		for (int i = 0; i < NT; i++) {
			tb[j][i] = clp_buf_at(big[j], at[j][i]);
			sep[j][i] = tn_buf(host[j] + at[j][i], sizes[i]);
		}
		all = total[j] > all ? total[j] : all;
	}
	for (int j = 0; j < 3; j++) { /* the double reference of the parameters, m, v */
		ref[j] = malloc(total[j] * sizeof(float));
		memcpy(ref[j], host[j], total[j] * sizeof(float));
	}
	got = malloc(all * sizeof(float));
	want = malloc(all * sizeof(float));
	ms = tn_buf(stats, 4);
	for (int step = 1; step <= 4; step++) {
		clp_buf sb = step == 2 || step == 4 ? clp_buf_at(ms, 0) : clp_buf_at(NULL, 0);

		th_fill_uniform(&r, host[3], total[3], -2, 2);
		CHECK_OK(clp_cl_write(ctx, big[3], 0, total[3] * 4, host[3]));
		for (int i = 0; i < NT; i++)
			CHECK_OK(clp_cl_write(ctx, sep[3][i], 0, sizes[i] * 4, host[3] + at[3][i]));
		if (step == 4)
			CHECK_OK(clp_cl_write(ctx, ms, 0, 16, skip));
		hp.step = step;
		hp.lr = 3e-3f * (float)step;
		CHECK_OK(clp_nn_adamw_update_each(ctx, t, sizes, decay, NT, &hp, sb, 0.75f));
		for (int i = 0; i < NT; i++) {
			CHECK_OK(clp_nn_adamw_update(ctx, clp_buf_at(sep[0][i], 0),
						     clp_buf_at(sep[1][i], 0), clp_buf_at(sep[2][i], 0),
						     clp_buf_at(sep[3][i], 0), sizes[i], &hp, decay[i], sb,
						     0.75f));
			if (step < 4)
				clp_ref_adamw(ref[0] + at[0][i], ref[1] + at[1][i], ref[2] + at[2][i],
					      host[3] + at[3][i], sizes[i], &hp, decay[i],
					      step == 2 ? 0.375f : 0.75f);
		}
	}
	for (int j = 0; j < 3; j++) {
		tn_get(big[j], 0, got, total[j]);
		for (int i = 0; i < NT; i++) {
			double *d = malloc(sizes[i] * sizeof(double));
			char what[64];

			tn_get(sep[j][i], 0, want, sizes[i]);
			CHECK(!memcmp(got + at[j][i], want, sizes[i] * 4),
			      "role %d tensor %d (n %zu): not bitwise one call per tensor", j, i,
			      sizes[i]);
			for (size_t e = 0; e < sizes[i]; e++)
				d[e] = ref[j][at[j][i] + e];
			snprintf(what, sizeof(what), "adamw each: role %d n=%zu", j, sizes[i]);
			th_close(what, got + at[j][i], d, sizes[i], j == 2 ? 1e-9 : 1e-6, 1e-5);
			free(d);
		}
		/* the gaps between tensors are left alone */
		for (int i = 1; i < NT; i++)
			CHECK(!memcmp(got + at[j][i] - j, host[j] + at[j][i] - j, (size_t)j * 4),
			      "role %d: the gap before tensor %d was written", j, i);
	}
	for (int j = 0; j < 4; j++) {
		for (int i = 0; i < NT; i++)
			clReleaseMemObject(sep[j][i]);
		clReleaseMemObject(big[j]);
		free(host[j]);
	}
	for (int j = 0; j < 3; j++)
		free(ref[j]);
	clReleaseMemObject(ms);
	free(got);
	free(want);
}

TH_MAIN(TH_TEST(test_grad_stats), TH_TEST(test_grad_stats_each), TH_TEST(test_adamw),
	TH_TEST(test_adamw_each))
