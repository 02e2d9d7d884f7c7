/* The whole model against PyTorch: tiny GPT-2, LLaMA (GQA) and BERT built in plain PyTorch
 * (tests/golden/make_golden.py) with fixed weights and batch. Compares the loss, the logits and
 * every parameter gradient after one forward/backward, and the loss over 10 AdamW steps; and
 * the whole model's gradient against finite differences of its own loss. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/io/safetensors.h"
#include "engine/model/stage.h"
#include "tests/harness.h"

#ifndef GOLDEN_DIR
#define GOLDEN_DIR "tests/golden"
#endif

struct golden {
	clp_st_file *f;
	clp_model_config cfg;
	size_t B, T, N;
	int32_t *tokens, *types, *targets;
	size_t valid;
};

static int read_ids(clp_st_file *f, const char *name, int32_t *dst, size_t n)
{
	const clp_st_tensor *t = clp_st_find(f, name);
	int64_t *tmp;

	if (!t || t->numel != n) {
		CHECK(0, "fixture lacks %s of %zu ids", name, n);
		return 0;
	}
	tmp = malloc(n * sizeof(*tmp));
	CHECK_OK(clp_st_read_i64(f, t, tmp));
	for (size_t i = 0; i < n; i++)
		dst[i] = (int32_t)tmp[i];
	free(tmp);
	return 1;
}

static float *read_f32(clp_st_file *f, const char *name, size_t n)
{
	const clp_st_tensor *t = clp_st_find(f, name);
	float *x;

	if (!t || t->numel != n) {
		CHECK(0, "fixture lacks %s of %zu values (has %llu)", name, n,
		      t ? (unsigned long long)t->numel : 0ULL);
		return NULL;
	}
	x = malloc(n * sizeof(float));
	CHECK_OK(clp_st_read_f32(f, t, x));
	return x;
}

static int load(const char *preset, struct golden *g)
{
	char path[512];
	json_t *cfg;
	json_error_t jerr;
	const char *text;

	memset(g, 0, sizeof(*g));
	snprintf(path, sizeof(path), "%s/%s.safetensors", GOLDEN_DIR, preset);
	CHECK_OK(clp_st_open(&g->f, path));
	if (!g->f)
		return 0;
	text = clp_st_meta(g->f, "config");
	cfg = text ? json_loads(text, 0, &jerr) : NULL;
	CHECK(cfg != NULL, "%s: no config in the metadata", path);
	if (!cfg)
		return 0;
	CHECK_OK(clp_preset_parse(json_string_value(json_object_get(cfg, "preset")),
				  &g->cfg.preset));
	g->cfg.n_layer = (int)json_integer_value(json_object_get(cfg, "n_layer"));
	g->cfg.d_model = (int)json_integer_value(json_object_get(cfg, "d_model"));
	g->cfg.n_head = (int)json_integer_value(json_object_get(cfg, "n_head"));
	g->cfg.n_kv_head = (int)json_integer_value(json_object_get(cfg, "n_kv_head"));
	g->cfg.d_ff = (int)json_integer_value(json_object_get(cfg, "d_ff"));
	g->cfg.vocab = (int)json_integer_value(json_object_get(cfg, "vocab"));
	g->cfg.ctx = (int)json_integer_value(json_object_get(cfg, "ctx"));
	g->cfg.n_types = (int)json_integer_value(json_object_get(cfg, "n_types"));
	g->cfg.norm_eps = (float)json_number_value(json_object_get(cfg, "norm_eps"));
	g->cfg.rope_theta = (float)json_number_value(json_object_get(cfg, "rope_theta"));
	g->B = (size_t)json_integer_value(json_object_get(cfg, "batch"));
	g->T = (size_t)g->cfg.ctx;
	g->N = g->B * g->T;
	json_decref(cfg);
	CHECK_OK(clp_model_config_resolve(&g->cfg));
	g->tokens = calloc(g->N, 4);
	g->types = calloc(g->N, 4);
	g->targets = calloc(g->N, 4);
	if (!read_ids(g->f, "input.tokens", g->tokens, g->N) ||
	    !read_ids(g->f, "input.targets", g->targets, g->N))
		return 0;
	if (g->cfg.preset == CLP_PRESET_BERT && !read_ids(g->f, "input.types", g->types, g->N))
		return 0;
	for (size_t i = 0; i < g->N; i++)
		g->valid += g->targets[i] >= 0;
	return 1;
}

static void unload(struct golden *g)
{
	clp_st_close(g->f);
	free(g->tokens);
	free(g->types);
	free(g->targets);
}

/* A stage holding the whole model with the fixture's weights. */
static clp_stage *make_stage(struct golden *g)
{
	clp_stage_opts o = {g->B, g->T, 1, 0, 0, CLP_F32, NULL};
	clp_stage *st = NULL;
	const clp_param_table *tab;

	CHECK_OK(clp_stage_create(&st, th_ctx(), &g->cfg, 0, clp_model_nblocks(&g->cfg) - 1, &o));
	if (!st)
		return NULL;
	tab = clp_stage_table(st);
	CHECK_OK(clp_stage_init_params(st, 1));
	for (int i = 0; i < tab->ntensors; i++) {
		float *w = read_f32(g->f, tab->tensors[i].name, tab->tensors[i].numel);

		if (w)
			CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, i, w));
		free(w);
	}
	return st;
}

static void run_step(clp_stage *st, struct golden *g, uint32_t step)
{
	clp_stage_mb mb = {0, step, 0, 7, g->tokens, g->types, g->targets, 0};

	CHECK_OK(clp_stage_forward(st, &mb, 1.0f / (float)g->valid));
	CHECK_OK(clp_stage_backward(st, &mb, 1.0f / (float)g->valid));
	CHECK_OK(clp_stage_fold_tied(st));
}

static void check_preset(const char *preset)
{
	struct golden g;
	clp_stage *st;
	const clp_param_table *tab;
	float loss, *logits = NULL, *want;
	cl_mem ml = NULL;
	size_t V;

	if (!th_ctx() || !load(preset, &g))
		goto out;
	st = make_stage(&g);
	if (!st)
		goto out;
	tab = clp_stage_table(st);
	V = (size_t)g.cfg.vocab;
	CHECK_OK(clp_stage_zero_grads(st));
	run_step(st, &g, 0);

	/* loss */
	CHECK_OK(clp_cl_read(th_ctx(), clp_stage_loss(st, 0).mem, clp_stage_loss(st, 0).off * 4, 4,
			     &loss));
	want = read_f32(g.f, "out.loss", 1);
	if (want) {
		double w = want[0];
		char what[64];

		snprintf(what, sizeof(what), "%s loss", preset);
		th_close(what, &loss, &w, 1, 0, 2e-6);
	}
	free(want);

	/* logits of every position */
	logits = malloc(g.N * V * 4);
	CHECK_OK(clp_cl_buffer(th_ctx(), g.N * V * 4, "logits", &ml));
	CHECK_OK(clp_stage_logits(st, 0, 0, g.N, clp_buf_at(ml, 0)));
	CHECK_OK(clp_cl_read(th_ctx(), ml, 0, g.N * V * 4, logits));
	want = read_f32(g.f, "out.logits", g.N * V);
	if (want) {
		double *w = malloc(g.N * V * 8);
		char what[64];

		for (size_t i = 0; i < g.N * V; i++)
			w[i] = want[i];
		snprintf(what, sizeof(what), "%s logits", preset);
		th_close(what, logits, w, g.N * V, 2e-5, 1e-4);
		free(w);
	}
	free(want);

	/* every gradient, as a normalised error */
	for (int i = 0; i < tab->ntensors; i++) {
		size_t n = tab->tensors[i].numel;
		char name[200];
		float *got = malloc(n * 4);
		double *ref = malloc(n * 8), e;

		snprintf(name, sizeof(name), "grad.%s", tab->tensors[i].name);
		want = read_f32(g.f, name, n);
		CHECK_OK(clp_stage_read(st, CLP_ST_GRAD, i, got));
		if (want) {
			double rms = 0;

			for (size_t j = 0; j < n; j++) {
				ref[j] = want[j];
				rms += (got[j] - ref[j]) * (got[j] - ref[j]) / (double)n;
			}
			e = th_norm_err(got, ref, n);
			/* BERT's key bias has an exactly zero gradient (softmax ignores a constant
			 * per query): there the absolute error must be at rounding level */
			CHECK(e <= 1e-4 || sqrt(rms) <= 1e-8, "%s %s: normalised error %.3g (> 1e-4), "
			      "rms error %.3g", preset, name, e, sqrt(rms));
		}
		free(want);
		free(got);
		free(ref);
	}

	/* 10 AdamW steps on the same batch: lr 1e-3, betas (0.9, 0.95), eps 1e-8, decay 0.1 on
	 * matrices, clip at 1.0 */
	want = read_f32(g.f, "adamw.loss", 10);
	for (int step = 0; want && step < 10; step++) {
		clp_nn_adamw_hp hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step + 1};
		double w = want[step];
		char what[64];

		if (step > 0) { /* step 0's forward/backward happened above */
			CHECK_OK(clp_stage_zero_grads(st));
			run_step(st, &g, (uint32_t)step);
		}
		CHECK_OK(clp_cl_read(th_ctx(), clp_stage_loss(st, 0).mem,
				     clp_stage_loss(st, 0).off * 4, 4, &loss));
		snprintf(what, sizeof(what), "%s loss before AdamW step %d", preset, step + 1);
		th_close(what, &loss, &w, 1, 0, 2e-5);
		CHECK_OK(clp_stage_grad_stats(st, clp_stage_stats(st), 1.0f));
		CHECK_OK(clp_stage_adamw(st, &hp, clp_stage_stats(st)));
	}
	free(want);
	clp_stage_free(st);
out:
	if (ml)
		clReleaseMemObject(ml);
	free(logits);
	unload(&g);
}

/* The whole model's gradient against finite differences of its own loss: along a random
 * direction d over all parameters, (L(p + e d) - L(p - e d)) / 2e must equal g . d. Central
 * differences in fp32 with this step agree to about 1e-3 (larger steps meet the curvature of
 * BERT's post-LayerNorm); a wrong gradient is off by far more. */
static void check_fd(const char *preset)
{
	struct golden g;
	clp_stage *st;
	const clp_param_table *tab;
	th_rng r = th_rng_seed(11);
	double gd = 0, lp = 0, lm = 0, dd = 0;
	const float eps = 1e-3f;

	if (!th_ctx() || !load(preset, &g))
		goto out;
	st = make_stage(&g);
	if (!st)
		goto out;
	tab = clp_stage_table(st);
	CHECK_OK(clp_stage_zero_grads(st));
	run_step(st, &g, 0);
	for (int pass = 0; pass < 3; pass++) {
		r = th_rng_seed(11);
		for (int i = 0; i < tab->ntensors; i++) {
			size_t n = tab->tensors[i].numel;
			float *p = malloc(n * 4), *d = malloc(n * 4), *gr = malloc(n * 4);

			th_fill_uniform(&r, d, n, -1, 1);
			CHECK_OK(clp_stage_read(st, pass == 0 ? CLP_ST_GRAD : CLP_ST_PARAM, i,
						pass == 0 ? gr : p));
			for (size_t j = 0; j < n; j++) {
				if (pass == 0) {
					gd += (double)gr[j] * d[j];
					dd += (double)d[j] * d[j];
				} else {
					p[j] += (pass == 1 ? 1 : -2) * eps * d[j];
				}
			}
			if (pass > 0)
				CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, i, p));
			free(p);
			free(d);
			free(gr);
		}
		if (pass > 0) {
			clp_stage_mb mb = {0, 0, 0, 7, g.tokens, g.types, g.targets, 0};
			float loss;

			CHECK_OK(clp_stage_forward(st, &mb, 1.0f / (float)g.valid));
			CHECK_OK(clp_cl_read(th_ctx(), clp_stage_loss(st, 0).mem,
					     clp_stage_loss(st, 0).off * 4, 4, &loss));
			*(pass == 1 ? &lp : &lm) = loss;
		}
	}
	{
		double fd = (lp - lm) / (2.0 * eps);

		CHECK(fabs(fd - gd) <= 1e-2 * fabs(gd) + 1e-4 * sqrt(dd),
		      "%s: finite differences %.6g vs g.d %.6g along a random direction", preset, fd,
		      gd);
	}
	clp_stage_free(st);
out:
	unload(&g);
}

static void test_finite_differences(void)
{
	check_fd("gpt2");
	check_fd("llama");
	check_fd("bert");
}

static void test_gpt2(void)
{
	check_preset("gpt2");
}

static void test_llama(void)
{
	check_preset("llama");
}

static void test_bert(void)
{
	check_preset("bert");
}

TH_MAIN(TH_TEST(test_gpt2), TH_TEST(test_llama), TH_TEST(test_bert),
	TH_TEST(test_finite_differences))
