/* The GEMM's kept packs of a stage's weights (cl/gemm.h "Kept packs", engine/model/stage.c):
 * within a step the weights are packed once and reused across micro-batches and by the head's
 * backward (hits counted), and every way the weights change marks the packs stale: after
 * clp_stage_adamw, after clp_stage_write, and after an optimizer's own write of the masters
 * followed by clp_stage_refresh_values (K-FAC, Muon), a forward without a new step (an
 * evaluation) gives bitwise the loss of a new stage that was given the same weights. A stage
 * that kept packs of the old weights fails this (the update changes the loss, checked). Tiny
 * GPT-2 (Conv1D weights), LLaMA (GQA, untied head) and BERT (post-norm, head bias) of odd
 * sizes, in fp32 and bf16.
 * The memory model of the packs (engine/model/stage_mem.c clp_model_stage_pack_mem, which the
 * session's memory check adds): the bytes the cache holds after a forward, after a step, and
 * at a second step's peak (the loss backward's hidden rows on top) equal the model's kept and
 * kept + transient,
 * on a model with several vocabulary chunks (V > 4096 at 1024 rows) and K chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/gemm.h"
#include "cl/ops.h"
#include "engine/model/stage.h"
#include "tests/harness.h"

#define B 2
#define T 7

struct run {
	clp_model_config cfg;
	int32_t tokens[2][B * T], types[B * T], targets[2][B * T];
	float valid;
};

static void setup(struct run *r, clp_preset p)
{
	th_rng g = th_rng_seed(11 + (uint64_t)p);
	int n = 0;

	memset(r, 0, sizeof(*r));
	r->cfg = (clp_model_config){.preset = p, .n_layer = 2, .d_model = 12, .n_head = 2,
				    .n_kv_head = p == CLP_PRESET_LLAMA ? 1 : 2, .d_ff = 33,
				    .vocab = 127, .ctx = 9, .tied = p != CLP_PRESET_LLAMA};
	CHECK_OK(clp_model_config_resolve(&r->cfg));
	for (int m = 0; m < 2; m++)
		for (int i = 0; i < B * T; i++) {
			r->tokens[m][i] = (int32_t)(th_next(&g) % 127);
			r->targets[m][i] = th_uniform(&g) < 0.3 ? -1 : (int32_t)(th_next(&g) % 127);
			n += r->targets[m][i] >= 0;
		}
	r->valid = (float)n;
}

static clp_stage *make(const clp_model_config *c, clp_dtype prec)
{
	clp_stage_opts o = {B, T, 1, 0, 0, prec, NULL};
	clp_stage *st = NULL;

	CHECK_OK(clp_stage_create(&st, th_ctx(), c, 0, clp_model_nblocks(c) - 1, &o));
	if (st)
		CHECK_OK(clp_stage_init_params(st, 3));
	return st;
}

static float forward(clp_stage *st, struct run *r, int m)
{
	clp_stage_mb mb = {0, 1, (uint32_t)m, 7, r->tokens[m], r->types, r->targets[m], 0};
	float loss = NAN;

	CHECK_OK(clp_stage_forward(st, &mb, 1.0f / r->valid));
	CHECK_OK(clp_cl_read(th_ctx(), clp_stage_loss(st, 0).mem, clp_stage_loss(st, 0).off * 4, 4,
			     &loss));
	return loss;
}

/* b's masters := a's (clp_stage_write: b packs afresh) */
static void copy_params(clp_stage *b, clp_stage *a)
{
	const clp_param_table *t = clp_stage_table(a);

	for (int i = 0; i < t->ntensors; i++) {
		float *h = malloc(t->tensors[i].numel * sizeof(float));

		CHECK_OK(clp_stage_read(a, CLP_ST_PARAM, i, h));
		CHECK_OK(clp_stage_write(b, CLP_ST_PARAM, i, h));
		free(h);
	}
}

/* The loss of micro-batch m on a new stage given a's masters: no pack of it is older than them. */
static float fresh_loss(clp_stage *a, struct run *r, int m, clp_dtype prec)
{
	clp_stage *b = make(&r->cfg, prec);
	float l = NAN;

	if (b) {
		copy_params(b, a);
		l = forward(b, r, m);
	}
	clp_stage_free(b);
	return l;
}

static void same(const char *what, float got, float want)
{
	CHECK(isfinite(got) && memcmp(&got, &want, sizeof(got)) == 0,
	      "%s: loss %.9g with kept packs, %.9g packed afresh", what, got, want);
}

static int packed_backend(void)
{
	const clp_gemm_tuning *t;

	return clp_cl_gemm_tuning(th_ctx(), &t) == CLP_OK && t->backend == CLP_GEMM_PACKED &&
	       getenv("CLPIPE_GEMM_KEEP_PACKS") == NULL;
}

static void one(clp_preset p, clp_dtype prec)
{
	struct run r;
	clp_stage *a;
	clp_nn_adamw_hp hp = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
	clp_gemm_cache_stats s0, s1;
	float before, la;
	char what[64];

	snprintf(what, sizeof(what), "%s %s", p == CLP_PRESET_GPT2 ? "gpt2" :
		 p == CLP_PRESET_LLAMA ? "llama" : "bert", clp_dtype_name(prec));
	setup(&r, p);
	a = make(&r.cfg, prec);
	if (!a)
		goto out;
	/* a step of two micro-batches: the second and the backward reuse the first's packs */
	clp_cl_gemm_cache_stats(th_ctx(), &s0);
	CHECK_OK(clp_stage_zero_grads(a));
	for (int m = 0; m < 2; m++) {
		clp_stage_mb mb = {0, 1, (uint32_t)m, 7, r.tokens[m], r.types, r.targets[m], 0};

		CHECK_OK(clp_stage_forward(a, &mb, 1.0f / r.valid));
		CHECK_OK(clp_stage_backward(a, &mb, 1.0f / r.valid));
	}
	clp_cl_gemm_cache_stats(th_ctx(), &s1);
	CHECK(!packed_backend() || s1.hits > s0.hits, "%s: no kept pack reused in a step of two "
	      "micro-batches (hits %ld -> %ld)", what, s0.hits, s1.hits);
	before = forward(a, &r, 0);
	CHECK_OK(clp_stage_fold_tied(a));
	CHECK_OK(clp_stage_grad_stats(a, clp_stage_stats(a), 1.0f));
	CHECK_OK(clp_stage_adamw(a, &hp, clp_stage_stats(a)));
	/* 1. after the update: an evaluation's forward, no new step */
	la = forward(a, &r, 0);
	CHECK(la != before, "%s: the update left the loss at %.9g: the test sees nothing", what,
	      before);
	same("after clp_stage_adamw", la, fresh_loss(a, &r, 0, prec));
	/* 2. clp_stage_write of one weight matrix (the first 2-d tensor after the embeddings) */
	{
		const clp_param_table *t = clp_stage_table(a);
		int w = -1;

		for (int i = 0; i < t->ntensors && w < 0; i++)
			if (t->tensors[i].ndim == 2 && t->tensors[i].role != CLP_R_TOK_EMB &&
			    t->tensors[i].role != CLP_R_POS_EMB && t->tensors[i].role != CLP_R_TYPE_EMB)
				w = i;
		if (w >= 0) {
			size_t n = t->tensors[w].numel;
			float *h = malloc(n * sizeof(float));
			th_rng g = th_rng_seed(9);

			th_fill_normal(&g, h, n, 0.3f);
			CHECK_OK(clp_stage_write(a, CLP_ST_PARAM, w, h));
			la = forward(a, &r, 1);
			same("after clp_stage_write", la, fresh_loss(a, &r, 1, prec));
			free(h);
		}
	}
	/* 3. an optimizer's own write of the masters, then clp_stage_refresh_values */
	{
		const clp_param_table *t = clp_stage_table(a);

		for (int i = 0; i < t->ntensors; i++) {
			clp_buf m = clp_stage_tensor(a, CLP_ST_PARAM, i);

			CHECK_OK(clp_cl_scale(th_ctx(), m, 0.75f, t->tensors[i].numel));
		}
		CHECK_OK(clp_stage_refresh_values(a));
		la = forward(a, &r, 0);
		same("after clp_stage_refresh_values", la, fresh_loss(a, &r, 0, prec));
	}
out:
	clp_stage_free(a);
	clp_cl_gemm_cache_stats(th_ctx(), &s1);
	CHECK(s1.entries == 0, "%s: %d kept packs left after the stages were freed", what,
	      s1.entries);
}

/* The model's kept (forward only, then with the backward) and transient bytes against the
 * cache's, for one stage of the whole model at B x T tokens. */
static void mem_one(const clp_model_config *c, size_t b, size_t t, clp_dtype prec)
{
	clp_stage_opts o = {b, t, 1, 0, 0, prec, NULL};
	clp_model_pack_shape ps;
	clp_gemm_cache_stats s0, s1;
	clp_stage *st = NULL;
	int64_t kf, kb, tr, tr0;
	int L = clp_model_nblocks(c) - 1;
	int32_t *tok = calloc(b * t, sizeof(int32_t)), *tgt = calloc(b * t, sizeof(int32_t));
	int32_t *types = calloc(b * t, sizeof(int32_t));
	char what[96];

	snprintf(what, sizeof(what), "pack memory %s %s, %zu x %zu tokens, vocab %d",
		 clp_preset_name(c->preset), clp_dtype_name(prec), b, t, c->vocab);
	CHECK_OK(clp_stage_pack_shape(th_ctx(), &ps));
	CHECK_OK(clp_model_stage_pack_mem(c, 0, L, b, t, 0, &ps, &kf, &tr0));
	CHECK_OK(clp_model_stage_pack_mem(c, 0, L, b, t, 1, &ps, &kb, &tr));
	CHECK(tr0 == 0 && (ps.nr ? kb > kf && kf > 0 && tr > 0 : kb == 0 && tr == 0) &&
	      !ps.nr == !packed_backend(),
	      "%s: model kept %lld / %lld, transient %lld / %lld", what, (long long)kf,
	      (long long)kb, (long long)tr0, (long long)tr);
	CHECK_OK(clp_stage_create(&st, th_ctx(), c, 0, L, &o));
	if (!st || !tok || !tgt || !types)
		goto out;
	CHECK_OK(clp_stage_init_params(st, 5));
	for (size_t i = 0; i < b * t; i++) {
		tok[i] = (int32_t)((i * 7919) % (size_t)c->vocab);
		tgt[i] = (int32_t)((i * 104729 + 3) % (size_t)c->vocab);
	}
	{
		clp_stage_mb mb = {0, 1, 0, 7, tok, types, tgt, 0};

		clp_cl_gemm_cache_stats(th_ctx(), &s0);
		clp_cl_gemm_cache_reset_peak(th_ctx());
		CHECK_OK(clp_stage_zero_grads(st));
		CHECK_OK(clp_stage_forward(st, &mb, 1.0f / (float)(b * t)));
		clp_cl_gemm_cache_stats(th_ctx(), &s1);
		CHECK((int64_t)(s1.bytes - s0.bytes) == (packed_backend() ? kf : 0),
		      "%s: after a forward the cache keeps %zu bytes, the model says %lld", what,
		      s1.bytes - s0.bytes, (long long)kf);
		CHECK_OK(clp_stage_backward(st, &mb, 1.0f / (float)(b * t)));
		clp_cl_gemm_cache_stats(th_ctx(), &s1);
		CHECK((int64_t)(s1.bytes - s0.bytes) == (packed_backend() ? kb : 0),
		      "%s: after a step the cache keeps %zu bytes, the model says %lld", what,
		      s1.bytes - s0.bytes, (long long)kb);
		/* a second step repacks into the kept memory: its peak is the loss backward's
		 * hidden rows on top of all of it (in the first, the layers' dY W' packs come
		 * after those rows are freed) */
		clp_cl_gemm_cache_reset_peak(th_ctx());
		CHECK_OK(clp_stage_zero_grads(st));
		CHECK_OK(clp_stage_forward(st, &mb, 1.0f / (float)(b * t)));
		CHECK_OK(clp_stage_backward(st, &mb, 1.0f / (float)(b * t)));
		clp_cl_gemm_cache_stats(th_ctx(), &s1);
		CHECK((int64_t)(s1.bytes - s0.bytes) == (packed_backend() ? kb : 0) &&
		      (int64_t)(s1.peak - s0.bytes) == (packed_backend() ? kb + tr : 0),
		      "%s: in a second step the cache keeps %zu bytes at its peak and %zu after, "
		      "the model's kept + transient %lld and kept %lld", what, s1.peak - s0.bytes,
		      s1.bytes - s0.bytes, (long long)(kb + tr), (long long)kb);
	}
out:
	clp_stage_free(st);
	free(tok);
	free(tgt);
	free(types);
}

static void test_pack_mem(void)
{
	static const clp_preset ps[3] = {CLP_PRESET_GPT2, CLP_PRESET_LLAMA, CLP_PRESET_BERT};
	struct run r;

	if (!th_ctx())
		return;
	for (int i = 0; i < 3; i++) {
		clp_model_config c;

		setup(&r, ps[i]);
		mem_one(&r.cfg, B, T, CLP_F32);
		mem_one(&r.cfg, B, T, CLP_BF16);
		/* 1024 rows: vocabulary chunks of 4096 (two here), K chunks of the dW products */
		c = r.cfg;
		c.vocab = 4097 + 64 * i;
		c.ctx = 256;
		c.n_layer = 1;
		CHECK_OK(clp_model_config_resolve(&c));
		mem_one(&c, 4, 256, CLP_F32);
	}
}

static void test_stage_packs(void)
{
	static const clp_preset ps[3] = {CLP_PRESET_GPT2, CLP_PRESET_LLAMA, CLP_PRESET_BERT};

	if (!th_ctx())
		return;
	for (int i = 0; i < 3; i++) {
		one(ps[i], CLP_F32);
		one(ps[i], CLP_BF16);
	}
}

TH_MAIN(TH_TEST(test_stage_packs), TH_TEST(test_pack_mem))
