/* LoRA dropout (model.lora_dropout, engine/model/stage_lora.c): y += s drop(x) A' B' on each
 * linear of tiny GPT-2, LLaMA (GQA) and BERT layers of odd sizes (N = 7 rows, I and O of 12, 33,
 * 36 ...). The branch's forward and backward (dA, dB, dx) against a host reference in double that
 * draws the mask from the same stream on the host (clp_rng_u32: element i kept when number i >=
 * p 2^32), at p = 0 and p = 0.3; against central differences of sum(y dy) with the mask fixed
 * (the same micro-batch); and in a whole stage: the same micro-batch gives bitwise the same loss
 * and adapter gradients, with and without recomputation (the backward draws the mask again;
 * fp32 and bf16),
 * another micro-batch another loss than p = 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/rng.h"
#include "engine/model/stage_internal.h"
#include "tests/harness.h"

#define NB 1
#define NT 7
#define NR (NB * NT)

static clp_model_config config(clp_preset p, float drop)
{
	clp_model_config c = {.preset = p, .n_layer = 2, .d_model = 12, .n_head = 2,
			      .n_kv_head = p == CLP_PRESET_LLAMA ? 1 : 2, .d_ff = 33, .vocab = 37,
			      .ctx = 9, .lora_r = 3, .lora_alpha = 5.0f, .lora_mask = 15,
			      .lora_dropout = drop};

	CHECK_OK(clp_model_config_resolve(&c));
	return c;
}

static clp_stage *make_prec(const clp_model_config *c, int recompute, clp_dtype prec)
{
	clp_stage_opts o = {NB, NT, 1, 0, recompute, prec, NULL};
	clp_stage *st = NULL;
	th_rng g = th_rng_seed(41);

	CHECK_OK(clp_stage_create(&st, th_ctx(), c, 0, clp_model_nblocks(c) - 1, &o));
	if (!st)
		return NULL;
	CHECK_OK(clp_stage_init_params(st, 3));
	for (int i = 0; i < st->tab.ntensors; i++) /* non-zero adapters (B starts at 0) */
		if (st->tab.tensors[i].role >= CLP_R_LORA_A) {
			float *v = malloc(st->tab.tensors[i].numel * sizeof(float));

			th_fill_normal(&g, v, st->tab.tensors[i].numel, 0.4f);
			CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, i, v));
			free(v);
		}
	return st;
}

static clp_stage *make(const clp_model_config *c, int recompute)
{
	return make_prec(c, recompute, CLP_F32);
}

static clp_buf dev(size_t n, const float *h)
{
	cl_mem m = NULL;

	CHECK_OK(clp_cl_buffer(th_ctx(), n * sizeof(float), "test", &m));
	if (m && h)
		CHECK_OK(clp_cl_write(th_ctx(), m, 0, n * sizeof(float), h));
	return clp_buf_at(m, 0);
}

static void rd(clp_buf b, size_t n, float *h)
{
	CHECK_OK(clp_cl_read(th_ctx(), b.mem, b.off * 4, n * sizeof(float), h));
}

/* The adapter of layer 0's linear lin as host arrays. */
static void adapter(clp_stage *st, clp_stage_linear lin, clp_stage_what w, float *a, float *b)
{
	for (int i = 0; i < st->tab.ntensors; i++) {
		const clp_tensor_desc *d = &st->tab.tensors[i];

		if (d->block != 1)
			continue;
		if (d->role == (clp_role)(CLP_R_LORA_A + 2 * lin))
			CHECK_OK(clp_stage_read(st, w, i, a));
		if (d->role == (clp_role)(CLP_R_LORA_B + 2 * lin))
			CHECK_OK(clp_stage_read(st, w, i, b));
	}
}

static int tensor_of(clp_stage *st, clp_role role)
{
	for (int i = 0; i < st->tab.ntensors; i++)
		if (st->tab.tensors[i].block == 1 && st->tab.tensors[i].role == role)
			return i;
	return -1;
}

/* sum(y dy) of the branch alone at the stage's current adapters and x. */
static double branch_loss(clp_stage *st, clp_stage_linear lin, clp_buf x, clp_buf y,
			  const float *dy, size_t O)
{
	float *h = calloc(NR * O, sizeof(float));
	double l = 0;

	CHECK_OK(clp_cl_write(th_ctx(), y.mem, 0, NR * O * sizeof(float), h));
	CHECK_OK(stage_lora_fwd(st, 1, lin, y, x, NR));
	rd(y, NR * O, h);
	for (size_t i = 0; i < NR * O; i++)
		l += (double)h[i] * dy[i];
	free(h);
	return l;
}

static void check_branch(clp_preset p, float drop)
{
	clp_model_config c = config(p, drop);
	clp_stage *st = make(&c, 0);
	clp_stage_mb mb = {0, 3, 1, 99, NULL, NULL, NULL, 0};
	const size_t r = 3;
	const double s = 5.0 / 3.0;

	if (!st)
		return;
	st->mb_now = &mb;
	for (int lin = 0; lin < CLP_LIN_COUNT; lin++) {
		clp_stage_linear_info in;
		size_t I, O;
		float *x, *dy, *a, *b, *ga, *gb, *gx, *y;
		double *xd, *u, *g, *ry, *ra, *rb, *rx;
		clp_rng_stream rs;
		uint32_t thr = (uint32_t)fmin(floor((double)drop * 4294967296.0), 4294967295.0);
		float keep_scale = (float)(1.0 / (1.0 - (double)drop));
		clp_buf bx, by, bdy, bdx;
		th_rng rg = th_rng_seed(7 + (uint64_t)lin);
		int kept = 0;
		char what[96];

		clp_model_linear_get(&c, (clp_stage_linear)lin, &in);
		I = in.I;
		O = in.O;
		x = malloc(NR * I * sizeof(float));
		dy = malloc(NR * O * sizeof(float));
		y = malloc(NR * O * sizeof(float));
		gx = malloc(NR * I * sizeof(float));
		a = malloc(r * I * sizeof(float));
		b = malloc(O * r * sizeof(float));
		ga = malloc(r * I * sizeof(float));
		gb = malloc(O * r * sizeof(float));
		xd = calloc(NR * I, sizeof(double));
		u = calloc(NR * r, sizeof(double));
		g = calloc(NR * r, sizeof(double));
		ry = calloc(NR * O, sizeof(double));
		ra = calloc(r * I, sizeof(double));
		rb = calloc(O * r, sizeof(double));
		rx = calloc(NR * I, sizeof(double));
		th_fill_normal(&rg, x, NR * I, 1.0f);
		th_fill_normal(&rg, dy, NR * O, 1.0f);
		adapter(st, (clp_stage_linear)lin, CLP_ST_PARAM, a, b);
		/* the host's mask, from the stream the stage names (layer 0, site 3 + lin) */
		CHECK_OK(clp_rng_stream_init(&rs, 99, 3, 1, (uint32_t)(3 + lin), CLP_RNG_DROPOUT));
		for (size_t i = 0; i < NR * I; i++) {
			int keep = drop <= 0 || clp_rng_u32(&rs, i) >= thr;

			kept += keep;
			xd[i] = keep ? (double)(drop > 0 ? x[i] * keep_scale : x[i]) : 0.0;
		}
		if (drop > 0)
			CHECK(kept > 0 && kept < (int)(NR * I), "%s lin %d: %d of %zu kept",
			      clp_preset_name(p), lin, kept, NR * I);
		for (size_t n = 0; n < NR; n++)
			for (size_t k = 0; k < r; k++) {
				for (size_t i = 0; i < I; i++)
					u[n * r + k] += xd[n * I + i] * a[k * I + i];
				for (size_t o = 0; o < O; o++)
					g[n * r + k] += (double)dy[n * O + o] * b[o * r + k];
			}
		for (size_t n = 0; n < NR; n++) {
			for (size_t o = 0; o < O; o++)
				for (size_t k = 0; k < r; k++)
					ry[n * O + o] += s * u[n * r + k] * b[o * r + k];
			for (size_t i = 0; i < I; i++) {
				double t = 0;

				for (size_t k = 0; k < r; k++)
					t += s * g[n * r + k] * a[k * I + i];
				rx[n * I + i] = xd[n * I + i] != 0.0 || drop <= 0
							? (drop > 0 ? t * keep_scale : t) : 0.0;
			}
		}
		for (size_t k = 0; k < r; k++) {
			for (size_t o = 0; o < O; o++)
				for (size_t n = 0; n < NR; n++)
					rb[o * r + k] += s * dy[n * O + o] * u[n * r + k];
			for (size_t i = 0; i < I; i++)
				for (size_t n = 0; n < NR; n++)
					ra[k * I + i] += s * g[n * r + k] * xd[n * I + i];
		}
		bx = dev(NR * I, x);
		by = dev(NR * O, NULL);
		bdy = dev(NR * O, dy);
		bdx = dev(NR * I, NULL);
		if (!bx.mem || !by.mem || !bdy.mem || !bdx.mem)
			goto next;
		/* forward */
		branch_loss(st, (clp_stage_linear)lin, bx, by, dy, O);
		rd(by, NR * O, y);
		snprintf(what, sizeof(what), "%s p %.1f lin %d y", clp_preset_name(p), (double)drop,
			 lin);
		th_close(what, y, ry, NR * O, 1e-5, 1e-4);
		/* backward: dx accumulates (+=) onto what it holds */
		{
			float *z = calloc(NR * I, sizeof(float));

			for (size_t i = 0; i < NR * I; i++)
				z[i] = 0.25f;
			CHECK_OK(clp_cl_write(th_ctx(), bdx.mem, 0, NR * I * sizeof(float), z));
			for (size_t i = 0; i < NR * I; i++)
				rx[i] += 0.25;
			free(z);
		}
		CHECK_OK(clp_stage_zero_grads(st));
		CHECK_OK(stage_lora_bwd(st, 1, (clp_stage_linear)lin, bdx, bdy, bx, NR));
		adapter(st, (clp_stage_linear)lin, CLP_ST_GRAD, ga, gb);
		rd(bdx, NR * I, gx);
		snprintf(what, sizeof(what), "%s p %.1f lin %d dA", clp_preset_name(p), (double)drop,
			 lin);
		th_close(what, ga, ra, r * I, 1e-5, 1e-4);
		what[strlen(what) - 2] = '\0';
		strcat(what, "dB");
		th_close(what, gb, rb, O * r, 1e-5, 1e-4);
		what[strlen(what) - 2] = '\0';
		strcat(what, "dx");
		th_close(what, gx, rx, NR * I, 1e-5, 1e-4);
		/* central differences along a random direction of (A, B, x), the mask fixed: the
		 * loss is bilinear in (A, B) and linear in x, so they are exact but for rounding */
		{
			float *da = malloc(r * I * sizeof(float)), *db = malloc(O * r * sizeof(float));
			float *dxd = malloc(NR * I * sizeof(float)), *t = malloc(NR * I * sizeof(float));
			float *ta = malloc(r * I * sizeof(float)), *tb = malloc(O * r * sizeof(float));
			const float eps = 1e-2f;
			double gd = 0, lp = 0, lm = 0, fd;
			int ta_i = tensor_of(st, (clp_role)(CLP_R_LORA_A + 2 * lin));
			int tb_i = tensor_of(st, (clp_role)(CLP_R_LORA_B + 2 * lin));

			th_fill_uniform(&rg, da, r * I, -1, 1);
			th_fill_uniform(&rg, db, O * r, -1, 1);
			th_fill_uniform(&rg, dxd, NR * I, -1, 1);
			for (size_t i = 0; i < r * I; i++)
				gd += (double)ga[i] * da[i];
			for (size_t i = 0; i < O * r; i++)
				gd += (double)gb[i] * db[i];
			for (size_t i = 0; i < NR * I; i++)
				gd += ((double)gx[i] - 0.25) * dxd[i];
			for (int sgn = 1; sgn >= -1; sgn -= 2) {
				for (size_t i = 0; i < r * I; i++)
					ta[i] = a[i] + (float)sgn * eps * da[i];
				for (size_t i = 0; i < O * r; i++)
					tb[i] = b[i] + (float)sgn * eps * db[i];
				for (size_t i = 0; i < NR * I; i++)
					t[i] = x[i] + (float)sgn * eps * dxd[i];
				CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, ta_i, ta));
				CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, tb_i, tb));
				CHECK_OK(clp_cl_write(th_ctx(), bx.mem, 0, NR * I * sizeof(float), t));
				*(sgn > 0 ? &lp : &lm) = branch_loss(st, (clp_stage_linear)lin, bx, by,
								     dy, O);
			}
			CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, ta_i, a));
			CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, tb_i, b));
			fd = (lp - lm) / (2.0 * eps);
			CHECK(isfinite(fd) && fabs(fd - gd) <= 2e-3 * fabs(gd) + 1e-4,
			      "%s p %.1f lin %d: central differences %.8g, gradients . d %.8g",
			      clp_preset_name(p), (double)drop, lin, fd, gd);
			free(da);
			free(db);
			free(dxd);
			free(t);
			free(ta);
			free(tb);
		}
next:
		for (int k = 0; k < 4; k++) {
			cl_mem m = k == 0 ? bx.mem : k == 1 ? by.mem : k == 2 ? bdy.mem : bdx.mem;

			if (m)
				clReleaseMemObject(m);
		}
		free(x);
		free(dy);
		free(y);
		free(gx);
		free(a);
		free(b);
		free(ga);
		free(gb);
		free(xd);
		free(u);
		free(g);
		free(ry);
		free(ra);
		free(rb);
		free(rx);
	}
	st->mb_now = NULL;
	clp_stage_free(st);
}

/* A whole stage: loss and adapter gradients of one micro-batch. */
static float run(clp_stage *st, const clp_model_config *c, uint32_t micro_batch, float **grads)
{
	int32_t tok[NR], types[NR] = {0}, tg[NR];
	clp_stage_mb mb = {0, 5, micro_batch, 17, tok, types, tg, 0};
	float loss = NAN;
	size_t off = 0;

	for (int i = 0; i < NR; i++) {
		tok[i] = (int32_t)((i * 7 + 3) % c->vocab);
		tg[i] = (int32_t)((i * 5 + 1) % c->vocab);
	}
	CHECK_OK(clp_stage_zero_grads(st));
	CHECK_OK(clp_stage_forward(st, &mb, 1.0f / NR));
	CHECK_OK(clp_stage_backward(st, &mb, 1.0f / NR));
	CHECK_OK(clp_stage_fold_tied(st));
	CHECK_OK(clp_cl_read(th_ctx(), clp_stage_loss(st, 0).mem, clp_stage_loss(st, 0).off * 4, 4,
			     &loss));
	*grads = malloc(st->tab.numel * sizeof(float));
	for (int i = 0; i < st->tab.ntensors; i++) {
		CHECK_OK(clp_stage_read(st, CLP_ST_GRAD, i, *grads + off));
		off += st->tab.tensors[i].numel;
	}
	return loss;
}

static void check_stage(clp_preset p)
{
	clp_model_config c = config(p, 0.3f), c0 = config(p, 0.0f);
	clp_stage *st = make(&c, 0), *rc = make(&c, 1), *s0 = make(&c0, 0);
	float *g1 = NULL, *g2 = NULL, *g3 = NULL, *g4 = NULL, *g5 = NULL;
	float l1, l2, l3, l4, l5;

	if (!st || !rc || !s0)
		goto out;
	l1 = run(st, &c, 2, &g1);
	l2 = run(st, &c, 2, &g2);
	l3 = run(rc, &c, 2, &g3);
	l4 = run(st, &c, 3, &g4);
	l5 = run(s0, &c0, 2, &g5);
	CHECK(isfinite(l1) && l1 == l2 && !memcmp(g1, g2, st->tab.numel * sizeof(float)),
	      "%s: one micro-batch twice: loss %.9g then %.9g", clp_preset_name(p), (double)l1,
	      (double)l2);
	CHECK(l3 == l1 && !memcmp(g1, g3, st->tab.numel * sizeof(float)),
	      "%s: with recomputation loss %.9g (gradients alike: %d), without %.9g",
	      clp_preset_name(p), (double)l3, !memcmp(g1, g3, st->tab.numel * sizeof(float)),
	      (double)l1);
	CHECK(isfinite(l4) && l4 != l1, "%s: another micro-batch draws another mask: %.9g, %.9g",
	      clp_preset_name(p), (double)l4, (double)l1);
	CHECK(l5 != l1, "%s: p = 0.3 changes the loss (%.9g) from p = 0's (%.9g)",
	      clp_preset_name(p), (double)l1, (double)l5);
	{ /* bf16: drop(x) a 16-bit value; recomputation draws the same mask */
		clp_stage *h = make_prec(&c, 0, CLP_BF16), *hr = make_prec(&c, 1, CLP_BF16);
		float *ha = NULL, *hb = NULL, la, lb;

		if (h && hr) {
			la = run(h, &c, 2, &ha);
			lb = run(hr, &c, 2, &hb);
			CHECK(isfinite(la) && la == lb && !memcmp(ha, hb, h->tab.numel * sizeof(float)),
			      "%s bf16: loss %.9g, with recomputation %.9g", clp_preset_name(p),
			      (double)la, (double)lb);
			CHECK(fabs(la - l1) <= 3e-2 * fabs(l1), "%s bf16 loss %.6g, fp32 %.6g",
			      clp_preset_name(p), (double)la, (double)l1);
		}
		free(ha);
		free(hb);
		clp_stage_free(h);
		clp_stage_free(hr);
	}
out:
	free(g1);
	free(g2);
	free(g3);
	free(g4);
	free(g5);
	clp_stage_free(st);
	clp_stage_free(rc);
	clp_stage_free(s0);
}

static void test_branch(void)
{
	if (!th_ctx())
		return;
	for (int p = 0; p < 3; p++) {
		check_branch((clp_preset)p, 0.0f);
		check_branch((clp_preset)p, 0.3f);
	}
}

static void test_stage(void)
{
	if (!th_ctx())
		return;
	for (int p = 0; p < 3; p++)
		check_stage((clp_preset)p);
}

TH_MAIN(TH_TEST(test_branch), TH_TEST(test_stage))
