/* Models written by Hugging Face transformers (tests/hf/fixtures, made by make_hf_fixtures.py):
 * for each family and layout, the settings come from config.json alone, the tensors load under
 * the names that class writes (prefixed or not, tied heads, shards, F16/BF16), and the loss on
 * the recorded batch and the greedy continuation of the recorded prompt match transformers'. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/model/stage.h"
#include "engine/train/hf.h"
#include "tests/harness.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/hf/fixtures"
#endif

/* The model settings as clpipe eval builds them from the config (session.c's model_config). */
static int model_of(const clp_train_config *c, clp_model_config *m)
{
	memset(m, 0, sizeof(*m));
	CHECK_OK(clp_preset_parse(c->model.preset, &m->preset));
	m->n_layer = (int)c->model.n_layer;
	m->d_model = (int)c->model.d_model;
	m->n_head = (int)c->model.n_head;
	m->n_kv_head = (int)c->model.n_kv_head;
	m->d_ff = (int)c->model.d_ff;
	m->vocab = (int)c->model.vocab;
	m->ctx = (int)c->model.ctx;
	m->norm_eps = (float)c->model.norm_eps;
	m->rope_theta = (float)c->model.rope_theta;
	m->tied = c->model.tie_embeddings;
	return clp_model_config_resolve(m) == CLP_OK;
}

/* rows x cols integers from a JSON array of arrays. */
static int32_t *ids(json_t *a, size_t *rows, size_t *cols)
{
	size_t r = json_array_size(a), c = json_array_size(json_array_get(a, 0));
	int32_t *v = calloc(r * c + 1, sizeof(*v));

	for (size_t i = 0; v && i < r; i++)
		for (size_t j = 0; j < c; j++)
			v[i * c + j] = (int32_t)json_integer_value(json_array_get(json_array_get(a, i),
										   j));
	*rows = r;
	*cols = c;
	return v;
}

/* A stage of the whole model with the fixture's weights, read through clp_hf_read. */
static clp_stage *load(const clp_model_config *m, clp_ckpt *ck, size_t B, size_t T)
{
	clp_stage_opts o = {B, T, 1, 0, 0, CLP_F32, NULL};
	clp_stage *st = NULL;
	const clp_param_table *tab;

	CHECK_OK(clp_stage_create(&st, th_ctx(), m, 0, clp_model_nblocks(m) - 1, &o));
	if (!st)
		return NULL;
	CHECK_OK(clp_stage_init_params(st, 1));
	tab = clp_stage_table(st);
	for (int i = 0; i < tab->ntensors; i++) {
		const clp_tensor_desc *d = &tab->tensors[i];
		int64_t shape[2] = {(int64_t)d->shape[0], (int64_t)d->shape[1]};
		float *w = malloc(d->numel * sizeof(float));

		CHECK_OK(clp_hf_read(ck, CLP_CKPT_MODEL, m->preset, d->name, "", w, d->ndim, shape));
		CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, i, w));
		free(w);
	}
	return st;
}

static void check_loss(const char *name, const clp_model_config *m, clp_ckpt *ck, json_t *e)
{
	size_t B, T, b2, t2, valid = 0;
	int32_t *in = ids(json_object_get(e, "inputs"), &B, &T);
	int32_t *tg = ids(json_object_get(e, "targets"), &b2, &t2);
	int32_t *types = calloc(B * T + 1, sizeof(*types));
	double want = json_number_value(json_object_get(e, "loss"));
	clp_stage *st = NULL;
	float loss = NAN;

	CHECK(in && tg && types && B == b2 && T == t2 && B * T > 0, "%s: a batch", name);
	if (!in || !tg || !types || B != b2 || T != t2 || !(st = load(m, ck, B, T)))
		goto out;
	for (size_t i = 0; i < B * T; i++)
		valid += tg[i] >= 0;
	{
		clp_stage_mb mb = {0, 0, 0, 7, in, types, tg, 0};
		clp_buf l = clp_stage_loss(st, 0);

		CHECK_OK(clp_stage_forward(st, &mb, 1.0f / (float)valid));
		CHECK_OK(clp_cl_read(th_ctx(), l.mem, l.off * sizeof(float), sizeof(float), &loss));
	}
	CHECK(fabs(loss - want) <= 1e-5 * fabs(want), "%s: loss %.8f, transformers %.8f (rel %.2e)",
	      name, (double)loss, want, fabs(loss - want) / fabs(want));
	printf("  %-14s loss %.8f transformers %.8f rel %.1e\n", name, (double)loss, want,
	       fabs(loss - want) / fabs(want));
out:
	clp_stage_free(st);
	free(in);
	free(tg);
	free(types);
}

/* Greedy decoding as clpipe sample does it (one sequence, the window of the last ctx tokens). */
static void check_greedy(const char *name, const clp_model_config *m, clp_ckpt *ck, json_t *g)
{
	json_t *prompt = json_object_get(g, "prompt"), *want = json_object_get(g, "tokens");
	size_t T = (size_t)m->ctx, V = (size_t)m->vocab, n = json_array_size(prompt);
	size_t total = n + json_array_size(want);
	int32_t *seq = calloc(total + 1, sizeof(int32_t)), *win = calloc(T, sizeof(int32_t));
	int32_t *tg = malloc(T * sizeof(int32_t));
	float *logits = malloc(V * sizeof(float));
	clp_stage *st = load(m, ck, 1, T);
	cl_mem dl = NULL;

	if (!st || !seq || !win || !tg || !logits)
		goto out;
	CHECK_OK(clp_cl_buffer(th_ctx(), V * sizeof(float), "logits", &dl));
	for (size_t t = 0; t < T; t++)
		tg[t] = -1;
	for (size_t i = 0; i < n; i++)
		seq[i] = (int32_t)json_integer_value(json_array_get(prompt, i));
	for (size_t k = n; dl && k < total; k++) {
		size_t len = k < T ? k : T, best = 0;
		clp_stage_mb mb = {0, 0, 0, 7, win, NULL, tg, 0};

		memset(win, 0, T * sizeof(int32_t));
		memcpy(win, seq + k - len, len * sizeof(int32_t));
		CHECK_OK(clp_stage_forward(st, &mb, 1.0f));
		CHECK_OK(clp_stage_logits(st, 0, len - 1, 1, clp_buf_at(dl, 0)));
		CHECK_OK(clp_cl_read(th_ctx(), dl, 0, V * sizeof(float), logits));
		for (size_t v = 1; v < V; v++)
			if (logits[v] > logits[best])
				best = v;
		seq[k] = (int32_t)best;
		CHECK(seq[k] == json_integer_value(json_array_get(want, k - n)),
		      "%s: greedy token %zu is %d, transformers %lld", name, k - n, seq[k],
		      (long long)json_integer_value(json_array_get(want, k - n)));
	}
out:
	if (dl)
		clReleaseMemObject(dl);
	clp_stage_free(st);
	free(seq);
	free(win);
	free(tg);
	free(logits);
}

static void check_fixture(const char *name, const char *preset, int tied)
{
	char dir[512], path[600];
	clp_train_config *c = malloc(sizeof(*c));
	clp_model_config m;
	clp_ckpt *ck = NULL;
	json_error_t je;
	json_t *e = NULL;
	int found = 0;

	snprintf(dir, sizeof(dir), "%s/%s", FIXTURE_DIR, name);
	snprintf(path, sizeof(path), "%s/expect.json", dir);
	if (!c || !th_ctx())
		goto out;
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, c));
	CHECK_OK(clp_hf_config_apply(dir, c, &found));
	CHECK(found, "%s: config.json found", name);
	CHECK(!strcmp(c->model.preset, preset), "%s: preset %s", name, c->model.preset);
	CHECK(strstr(clp_cfg_origin_of(&clp_train_schema, c, "model.n_layer"), "config.json"),
	      "%s: n_layer's origin is %s", name,
	      clp_cfg_origin_of(&clp_train_schema, c, "model.n_layer"));
	if (!model_of(c, &m))
		goto out;
	CHECK(m.tied == tied, "%s: tied %d", name, m.tied);
	CHECK_OK(clp_ckpt_open(&ck, dir));
	e = json_load_file(path, 0, &je);
	CHECK(e != NULL, "%s: %s", path, je.text);
	if (!ck || !e)
		goto out;
	check_loss(name, &m, ck, e);
	if (json_object_get(e, "greedy"))
		check_greedy(name, &m, ck, json_object_get(e, "greedy"));
out:
	json_decref(e);
	clp_ckpt_close(ck);
	free(c);
}

static void test_gpt2(void)
{
	check_fixture("gpt2", "gpt2", 1);
}

static void test_gpt2_hub(void)
{
	check_fixture("gpt2_hub", "gpt2", 1);
}

static void test_gpt2_bpe(void)
{
	check_fixture("gpt2_bpe", "gpt2", 1);
}

static void test_llama(void)
{
	check_fixture("llama", "llama", 0);
}

static void test_llama_tied(void)
{
	check_fixture("llama_tied", "llama", 1);
}

static void test_llama_sharded(void)
{
	check_fixture("llama_sharded", "llama", 0);
}

static void test_bert(void)
{
	check_fixture("bert", "bert", 1);
}

/* Settings the file gives (rms_norm_eps 1e-5, rope_theta 5e5: not the defaults) are used. */
static void test_config_values(void)
{
	clp_train_config *c = malloc(sizeof(*c));

	if (!c)
		return;
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, c));
	CHECK_OK(clp_cfg_set_arg(&clp_train_schema, c, "model.n_kv_head", "1", "command line"));
	CHECK_OK(clp_cfg_set_arg(&clp_train_schema, c, "model.ctx", "8", "command line"));
	{
		int found;

		CHECK_OK(clp_hf_config_apply(FIXTURE_DIR "/llama", c, &found));
	}
	CHECK(c->model.norm_eps == 1e-5 && c->model.rope_theta == 500000.0 &&
	      c->model.n_kv_head == 1 && c->model.n_layer == 2 && c->model.vocab == 264 &&
	      c->model.d_ff == 24 && !c->model.tie_embeddings,
	      "llama settings: eps %g theta %g kv %ld", c->model.norm_eps, c->model.rope_theta,
	      c->model.n_kv_head);
	CHECK(c->model.ctx == 8, "a shorter llama context is kept: %ld", c->model.ctx);
	CHECK_OK(clp_cfg_set_arg(&clp_train_schema, c, "model.n_head", "4", "command line"));
	{
		int found;

		CHECK_ERR(clp_hf_config_apply(FIXTURE_DIR "/llama", c, &found), CLP_ERR_INVALID,
			  "model.n_head = 4 (command line) contradicts model.n_head = 2",
			  "num_attention_heads");
	}
	free(c);
}

/* What clpipe cannot run is refused, naming the file and the key. */
static void test_config_refusals(void)
{
	static const struct {
		const char *json, *want1, *want2;
		clp_status st;
	} cases[] = {
		{"{\"model_type\": \"mistral\"}", "model_type \"mistral\"", "gpt2, llama and bert",
		 CLP_ERR_UNSUPPORTED},
		{"{\"model_type\": \"gpt2\", \"activation_function\": \"relu\"}",
		 "activation_function = relu", "gelu_new", CLP_ERR_UNSUPPORTED},
		{"{\"model_type\": \"llama\", \"attention_bias\": true}", "attention_bias = true",
		 "false only", CLP_ERR_UNSUPPORTED},
		{"{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"yarn\"}}",
		 "rope_scaling.rope_type = \"yarn\"", "default", CLP_ERR_UNSUPPORTED},
		{"{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_attention_heads\": 2, "
		 "\"head_dim\": 8}", "head_dim = 8", "= 4", CLP_ERR_UNSUPPORTED},
		{"{\"model_type\": \"bert\", \"type_vocab_size\": 3}", "type_vocab_size = 3", "2",
		 CLP_ERR_UNSUPPORTED},
		{"{\"model_type\": \"gpt2\", \"n_layer\": \"two\"}", "n_layer",
		 "not a non-negative integer", CLP_ERR_FORMAT},
		{"{\"model_type\": \"gpt2\",", "config.json:1", "malformed JSON", CLP_ERR_FORMAT},
	};
	char dir[] = "/tmp/clpipe-hf-config-XXXXXX", path[64];

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/config.json", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clp_train_config *c = malloc(sizeof(*c));
		FILE *f = fopen(path, "w");
		int found;

		if (!c || !f) {
			CHECK(0, "setup");
			free(c);
			if (f)
				fclose(f);
			break;
		}
		fputs(cases[i].json, f);
		fclose(f);
		CHECK_OK(clp_cfg_defaults(&clp_train_schema, c));
		CHECK_ERR(clp_hf_config_apply(dir, c, &found), cases[i].st, path, cases[i].want1,
			  cases[i].want2);
		free(c);
	}
	unlink(path);
	rmdir(dir);
}

TH_MAIN(TH_TEST(test_gpt2), TH_TEST(test_gpt2_hub), TH_TEST(test_gpt2_bpe), TH_TEST(test_llama),
	TH_TEST(test_llama_tied), TH_TEST(test_llama_sharded), TH_TEST(test_bert),
	TH_TEST(test_config_values), TH_TEST(test_config_refusals))
