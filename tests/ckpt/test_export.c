/* clp_ckpt_export: a two-rank checkpoint of random fp32 masters (values at every scale, ties,
 * overflow to fp16's infinity, denormals) becomes one 16-bit model file that our reader loads
 * back equal, bit for bit, to cl/base/half.h's rounding of each master; config.json says the dtype;
 * the tokenizer files follow; nothing is written into a checkpoint or without a config. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cl/base/half.h"
#include "engine/io/checkpoint.h"
#include "tests/data/testutil.h"

#define NP 3
static const char *const pname[NP] = {"transformer.wte.weight", "transformer.h.0.mlp.c_fc.weight",
				      "transformer.ln_f.bias"};
static const int64_t pshape[NP][2] = {{33, 7}, {7, 29}, {1, 7}};
static float pdata[NP][33 * 7];

static size_t numel(int p)
{
	return (size_t)(pshape[p][0] * pshape[p][1]);
}

static void fill(void)
{
	th_rng r = th_rng_seed(18);

	for (int p = 0; p < NP; p++)
		for (size_t i = 0; i < numel(p); i++) {
			double e = th_uniform(&r) * 40 - 30; /* 1e-9 .. 1e3 */

			pdata[p][i] = (float)((th_uniform(&r) < 0.5 ? -1 : 1) * pow(2, e));
		}
	pdata[0][0] = 1.0f + 0x1p-8f;  /* a bf16 tie: rounds to even (1.0) */
	pdata[0][1] = 1.0f + 0x1p-11f; /* an fp16 tie */
	pdata[0][2] = 70000.0f;        /* past fp16's largest: inf */
	pdata[0][3] = 3e-6f;           /* an fp16 denormal */
	pdata[0][4] = -0.0f;
}

/* A checkpoint of two ranks (parameter p on rank p % 2) with a config.json in its directory. */
static void save(const char *root, long step)
{
	static const char cfg[] = "{\"model_type\": \"gpt2\", \"n_embd\": 7, \"dtype\": \"float32\"}\n";
	clp_ckpt_writer *w[2] = {0};
	char path[1100];

	fill();
	for (int r = 0; r < 2; r++) {
		CHECK_OK(clp_ckpt_writer_create(&w[r], root, step, r, 2));
		if (!w[r])
			return;
		for (int p = 0; p < NP; p++)
			if (p % 2 == r)
				CHECK_OK(clp_ckpt_writer_add(w[r], CLP_CKPT_MODEL, pname[p], pdata[p], 2,
							     pshape[p]));
		CHECK_OK(clp_ckpt_writer_write(w[r]));
	}
	snprintf(path, sizeof(path), "%s/config.json", clp_ckpt_writer_dir(w[0]));
	CHECK_OK(clp_io_write_file(path, cfg, strlen(cfg)));
	snprintf(path, sizeof(path), "%s/merges.txt", clp_ckpt_writer_dir(w[0]));
	CHECK_OK(clp_io_write_file(path, "#version: 0.2\n", 14));
	CHECK_OK(clp_ckpt_writer_commit(w[0], 0));
	for (int r = 0; r < 2; r++)
		clp_ckpt_writer_free(w[r]);
}

static void check_export(const char *out, clp_dtype dt)
{
	char path[1100];
	clp_st_file *f = NULL;
	json_t *cfg;
	json_error_t e;
	float back[33 * 7];
	const char *want = dt == CLP_BF16 ? "bfloat16" : dt == CLP_F16 ? "float16" : "float32";

	snprintf(path, sizeof(path), "%s/model.safetensors", out);
	CHECK_OK(clp_st_open(&f, path));
	if (!f)
		return;
	CHECK(clp_st_count(f) == NP, "%s: %d tensors", path, clp_st_count(f));
	CHECK(clp_st_meta(f, "format") && !strcmp(clp_st_meta(f, "format"), "pt"),
	      "format: pt (transformers needs it)");
	for (int p = 0; p < NP; p++) {
		const clp_st_tensor *t = clp_st_find(f, pname[p]);
		size_t bad = 0;

		CHECK(t != NULL, "%s missing", pname[p]);
		if (!t)
			continue;
		CHECK(t->dtype == (dt == CLP_BF16 ? CLP_ST_BF16 : dt == CLP_F16 ? CLP_ST_F16
										 : CLP_ST_F32) &&
		      t->ndim == 2 && t->shape[0] == pshape[p][0] && t->shape[1] == pshape[p][1],
		      "%s: dtype %s shape", pname[p], t->dtype_name);
		th_poison(back, numel(p));
		CHECK_OK(clp_st_read_f32(f, t, back));
		for (size_t i = 0; i < numel(p); i++) {
			float r = clp_dtype_round(dt, pdata[p][i]);

			bad += memcmp(&back[i], &r, sizeof(float)) != 0;
		}
		CHECK(bad == 0, "%s %s: %zu of %zu values differ from the rounding of the masters",
		      clp_dtype_name(dt), pname[p], bad, numel(p));
	}
	clp_st_close(f);
	snprintf(path, sizeof(path), "%s/config.json", out);
	cfg = json_load_file(path, 0, &e);
	CHECK(cfg && !strcmp(json_string_value(json_object_get(cfg, "dtype")), want) &&
	      !strcmp(json_string_value(json_object_get(cfg, "torch_dtype")), want) &&
	      json_integer_value(json_object_get(cfg, "n_embd")) == 7,
	      "%s: dtype and torch_dtype %s, the rest kept", path, want);
	json_decref(cfg);
	snprintf(path, sizeof(path), "%s/merges.txt", out);
	CHECK(access(path, F_OK) == 0, "the tokenizer's merges.txt copied");
}

static void test_export(void)
{
	int n = 0;

	save(tu_path("ck"), 7);
	CHECK(fabsf(clp_dtype_round(CLP_BF16, pdata[0][0]) - 1.0f) == 0 &&
	      isinf(clp_dtype_round(CLP_F16, pdata[0][2])), "the special values are what they test");
	CHECK_OK(clp_ckpt_export(tu_path("ck"), tu_path("bf"), CLP_BF16, &n));
	CHECK(n == NP, "exported %d tensors", n);
	check_export(tu_path("bf"), CLP_BF16);
	CHECK_OK(clp_ckpt_export(tu_path("ck/step-00000007"), tu_path("h/fp16"), CLP_F16, NULL));
	check_export(tu_path("h/fp16"), CLP_F16);
	CHECK_OK(clp_ckpt_export(tu_path("bf"), tu_path("f32"), CLP_F32, NULL));
	/* fp32 of the bf16 export: the bf16 values, exactly */
	{
		clp_ckpt *c = NULL;
		float back[33 * 7];

		CHECK_OK(clp_ckpt_open(&c, tu_path("f32")));
		if (c) {
			CHECK_OK(clp_ckpt_read(c, CLP_CKPT_MODEL, pname[1], back, 2, pshape[1]));
			for (size_t i = 0; i < numel(1); i++)
				CHECK(back[i] == clp_dtype_round(CLP_BF16, pdata[1][i]), "f32[%zu]", i);
		}
		clp_ckpt_close(c);
	}
}

static void test_refusals(void)
{
	save(tu_path("ck2"), 3);
	CHECK_ERR(clp_ckpt_export(tu_path("ck2"), tu_path("ck2/step-00000003"), CLP_BF16, NULL),
		  CLP_ERR_INVALID, "step-00000003", "checkpoint", "another directory");
	CHECK(access(tu_path("ck2/step-00000003/model-rank0.safetensors"), F_OK) == 0,
	      "the checkpoint's files stay");
	CHECK_OK(clp_ckpt_export(tu_path("ck2"), tu_path("x"), CLP_BF16, NULL));
	CHECK_ERR(clp_ckpt_export(tu_path("x"), tu_path("x"), CLP_F16, NULL), CLP_ERR_INVALID,
		  "own directory");
	unlink(tu_path("x/config.json"));
	CHECK_ERR(clp_ckpt_export(tu_path("x"), tu_path("y"), CLP_F16, NULL), CLP_ERR_NOT_FOUND,
		  "config.json", "not found");
	CHECK(access(tu_path("y/model.safetensors"), F_OK) != 0,
	      "nothing written without a config");
}

TH_MAIN(TH_TEST(test_export), TH_TEST(test_refusals))
