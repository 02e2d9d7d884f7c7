/* Frozen tensors (clp_stage_opts.frozen: train.freeze, a LoRA base) on tiny GPT-2, LLaMA (GQA)
 * and BERT models of odd sizes: a unit all of whose tensors are frozen has no gradient and no
 * AdamW moments (mem NULL, read as zeros, a non-zero write refused), the backward computes no
 * weight gradient for it, and the trained tensors' gradients are bitwise those of the same
 * stage made with everything trained (the input gradient still flows through the frozen
 * layers); AdamW then moves the trained tensors bitwise as on that stage with the same tensors
 * frozen late (clp_stage_set_frozen) and leaves the frozen ones alone. Masks: a whole layer and
 * a single norm weight; the tied embedding alone (the head's share of its gradient is not
 * kept); LoRA's base (every tensor but the adapters, the embedding's backward skipped). Each in
 * fp32, and in bf16 for GPT-2. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/stage.h"
#include "tests/harness.h"

#define B 2
#define T 7

struct run {
	clp_model_config cfg;
	int32_t tokens[B * T], types[B * T], targets[B * T];
	float valid;
};

static void setup(struct run *r, clp_preset p)
{
	th_rng g = th_rng_seed(11 + (uint64_t)p);
	int n = 0;

	memset(r, 0, sizeof(*r));
	r->cfg = (clp_model_config){.preset = p, .n_layer = 3, .d_model = 12, .n_head = 2,
				    .n_kv_head = p == CLP_PRESET_LLAMA ? 1 : 2, .d_ff = 33,
				    .vocab = 37, .ctx = 9, .n_types = 2,
				    .tied = p != CLP_PRESET_LLAMA};
	CHECK_OK(clp_model_config_resolve(&r->cfg));
	for (int i = 0; i < B * T; i++) {
		r->tokens[i] = (int32_t)(th_next(&g) % 37);
		r->types[i] = (int32_t)(th_next(&g) % 2);
		r->targets[i] = th_uniform(&g) < 0.3 ? -1 : (int32_t)(th_next(&g) % 37);
		n += r->targets[i] >= 0;
	}
	r->valid = (float)n;
}

static clp_stage *make(const clp_model_config *c, clp_dtype prec, const unsigned char *frozen)
{
	clp_stage_opts o = {B, T, 1, 0, 0, prec, frozen};
	clp_stage *st = NULL;

	CHECK_OK(clp_stage_create(&st, th_ctx(), c, 0, clp_model_nblocks(c) - 1, &o));
	if (st)
		CHECK_OK(clp_stage_init_params(st, 3));
	return st;
}

static float *get(clp_stage *st, clp_stage_what w, int i)
{
	float *p = malloc(clp_stage_table(st)->tensors[i].numel * sizeof(float) + 4);

	CHECK_OK(clp_stage_read(st, w, i, p));
	return p;
}

static void step(clp_stage *st, const struct run *r)
{
	clp_stage_mb mb = {0, 0, 0, 7, r->tokens, r->types, r->targets, 0};

	CHECK_OK(clp_stage_zero_grads(st));
	CHECK_OK(clp_stage_forward(st, &mb, 1.0f / r->valid));
	CHECK_OK(clp_stage_backward(st, &mb, 1.0f / r->valid));
	CHECK_OK(clp_stage_fold_tied(st));
}

static int is_lora(clp_role role)
{
	return role >= CLP_R_LORA_A && role <= CLP_R_LORA_LAST;
}

enum mask { M_LAYER, M_TIED, M_LORA, M_COUNT };
static const char *const mask_names[M_COUNT] = {"layer 1 and a norm weight",
						 "the tied embedding", "the LoRA base"};

/* The mask (whole model's order: the stage holds it all) and whether any unit lost memory. */
static int fill_mask(const clp_param_table *t, enum mask m, unsigned char *fz)
{
	int any = 0;

	for (int i = 0; i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];

		switch (m) {
		case M_LAYER: /* all of layer 1 (block 2); layer 0's first norm weight */
			fz[i] = d->block == 2 || (d->block == 1 && d->role == CLP_R_LN1_W);
			break;
		case M_TIED:
			fz[i] = d->role == CLP_R_TOK_EMB;
			break;
		default:
			fz[i] = !is_lora(d->role);
		}
		any |= fz[i];
	}
	return any;
}

static void check(clp_preset p, enum mask m, clp_dtype prec)
{
	struct run r;
	clp_model_config c;
	clp_stage *fs = NULL, *ref = NULL;
	const clp_param_table *t;
	unsigned char *fz;
	clp_nn_adamw_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f,
			      .weight_decay = 0.1f, .step = 1};
	char at[128];
	int nfrozen = 0;

	if (!th_ctx())
		return;
	if (m == M_TIED && p == CLP_PRESET_LLAMA)
		return; /* untied */
	setup(&r, p);
	c = r.cfg;
	if (m == M_LORA) {
		c.lora_r = 2;
		c.lora_alpha = 3.0f;
		c.lora_mask = 15;
		CHECK_OK(clp_model_config_resolve(&c));
	}
	snprintf(at, sizeof(at), "%s %s, %s frozen", clp_preset_name(p), clp_dtype_name(prec),
		 mask_names[m]);
	ref = make(&c, prec, NULL);
	if (!ref)
		return;
	t = clp_stage_table(ref);
	fz = calloc((size_t)t->ntensors, 1);
	CHECK(fill_mask(t, m, fz), "%s: the mask freezes something", at);
	fs = make(&c, prec, fz);
	if (!fs)
		goto out;
	/* the same parameters, non-zero adapters (B starts at 0) */
	{
		th_rng g = th_rng_seed(23);

		for (int i = 0; i < t->ntensors; i++) {
			float *v = get(ref, CLP_ST_PARAM, i);

			if (is_lora(t->tensors[i].role))
				th_fill_normal(&g, v, t->tensors[i].numel, 0.3f);
			CHECK_OK(clp_stage_write(ref, CLP_ST_PARAM, i, v));
			CHECK_OK(clp_stage_write(fs, CLP_ST_PARAM, i, v));
			free(v);
		}
	}
	step(ref, &r);
	step(fs, &r);
	for (int i = 0; i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];
		size_t n = d->numel;

		CHECK(clp_stage_frozen(fs, i) == fz[i], "%s: %s frozen %d, mask %d", at, d->name,
		      clp_stage_frozen(fs, i), fz[i]);
		if (!clp_stage_trained(fs, i)) {
			float *z = get(fs, CLP_ST_GRAD, i), one = 1.0f;
			int zeros = 1;

			nfrozen++;
			CHECK(fz[i], "%s: %s has no gradient but is not frozen", at, d->name);
			for (int k = CLP_ST_GRAD; k <= CLP_ST_ADAM_V; k++)
				CHECK(!clp_stage_tensor(fs, (clp_stage_what)k, i).mem,
				      "%s: frozen %s has memory of kind %d", at, d->name, k);
			for (size_t j = 0; j < n; j++)
				zeros &= z[j] == 0.0f;
			CHECK(zeros, "%s: frozen %s's gradient does not read as zeros", at, d->name);
			z[0] = one;
			CHECK_ERR(clp_stage_write(fs, CLP_ST_ADAM_M, i, z), CLP_ERR_STATE, d->name,
				  "frozen");
			CHECK_ERR(clp_stage_set_frozen(fs, i, 0), CLP_ERR_STATE, d->name);
			free(z);
			continue;
		}
		{
			float *a = get(fs, CLP_ST_GRAD, i), *b = get(ref, CLP_ST_GRAD, i);
			int finite = 1;

			for (size_t j = 0; j < n; j++)
				finite &= isfinite(a[j]) != 0;
			CHECK(finite && !memcmp(a, b, n * sizeof(float)),
			      "%s: trained %s's gradient differs from the all-trained stage's", at,
			      d->name);
			free(a);
			free(b);
		}
	}
	CHECK(nfrozen > 0, "%s: no unit lost its gradient", at);
	/* AdamW with the frozen stage's statistics on both: the trained tensors move alike, the
	 * frozen stay bitwise */
	CHECK_OK(clp_stage_grad_stats(fs, clp_stage_stats(fs), 1.0f));
	for (int i = 0; i < t->ntensors; i++)
		if (fz[i])
			CHECK_OK(clp_stage_set_frozen(ref, i, 1));
	{
		float st4[4];

		CHECK_OK(clp_cl_read(th_ctx(), clp_stage_stats(fs).mem, clp_stage_stats(fs).off * 4,
				     sizeof(st4), st4));
		CHECK_OK(clp_cl_write(th_ctx(), clp_stage_stats(ref).mem,
				      clp_stage_stats(ref).off * 4, sizeof(st4), st4));
		CHECK(isfinite(st4[0]) && st4[0] > 0, "%s: gradient sum of squares %g", at,
		      (double)st4[0]);
	}
	CHECK_OK(clp_stage_adamw(fs, &hp, clp_stage_stats(fs)));
	CHECK_OK(clp_stage_adamw(ref, &hp, clp_stage_stats(ref)));
	for (int i = 0; i < t->ntensors; i++) {
		float *a = get(fs, CLP_ST_PARAM, i), *b = get(ref, CLP_ST_PARAM, i);

		CHECK(!memcmp(a, b, t->tensors[i].numel * sizeof(float)),
		      "%s: %s after AdamW differs from the all-trained stage's", at,
		      t->tensors[i].name);
		free(a);
		free(b);
	}
out:
	free(fz);
	clp_stage_free(fs);
	clp_stage_free(ref);
}

static void test_gpt2(void)
{
	for (int m = 0; m < M_COUNT; m++)
		check(CLP_PRESET_GPT2, (enum mask)m, CLP_F32);
	for (int m = 0; m < M_COUNT; m++)
		check(CLP_PRESET_GPT2, (enum mask)m, CLP_BF16);
}

static void test_llama(void)
{
	for (int m = 0; m < M_COUNT; m++)
		check(CLP_PRESET_LLAMA, (enum mask)m, CLP_F32);
}

static void test_bert(void)
{
	for (int m = 0; m < M_COUNT; m++)
		check(CLP_PRESET_BERT, (enum mask)m, CLP_F32);
}

TH_MAIN(TH_TEST(test_gpt2), TH_TEST(test_llama), TH_TEST(test_bert))
