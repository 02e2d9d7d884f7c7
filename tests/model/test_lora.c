/* LoRA adapters (engine/model/stage_lora.c) on every linear of tiny GPT-2, LLaMA (GQA) and BERT
 * models of odd sizes, with non-zero random adapters: the reference is the merged model, the
 * same model without adapters and W + (alpha / r) B A in each adapted weight, computed on the
 * host in double. The adapter model's loss equals the merged model's, and so does the gradient
 * of every base tensor (through which the adapters' input gradients flow to the embeddings);
 * the adapters' gradients match finite differences of the loss; with recomputation the same
 * gradients come out; in bf16 the loss stays near the fp32 one. */
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
	th_rng g = th_rng_seed(5 + (uint64_t)p);
	int n = 0;

	memset(r, 0, sizeof(*r));
	r->cfg = (clp_model_config){.preset = p, .n_layer = 2, .d_model = 12, .n_head = 2,
				    .n_kv_head = p == CLP_PRESET_LLAMA ? 1 : 2, .d_ff = 33,
				    .vocab = 37, .ctx = 9, .tied = p != CLP_PRESET_LLAMA};
	CHECK_OK(clp_model_config_resolve(&r->cfg));
	for (int i = 0; i < B * T; i++) {
		r->tokens[i] = (int32_t)(th_next(&g) % 37);
		r->targets[i] = th_uniform(&g) < 0.3 ? -1 : (int32_t)(th_next(&g) % 37);
		n += r->targets[i] >= 0;
	}
	r->valid = (float)n;
}

static clp_stage *make(const clp_model_config *c, int recompute, clp_dtype prec)
{
	clp_stage_opts o = {B, T, 1, 0, recompute, prec, NULL};
	clp_stage *st = NULL;

	CHECK_OK(clp_stage_create(&st, th_ctx(), c, 0, clp_model_nblocks(c) - 1, &o));
	if (st)
		CHECK_OK(clp_stage_init_params(st, 3));
	return st;
}

static float *get(clp_stage *st, clp_stage_what w, int i)
{
	float *p = malloc(clp_stage_table(st)->tensors[i].numel * sizeof(float));

	CHECK_OK(clp_stage_read(st, w, i, p));
	return p;
}

static double step(clp_stage *st, struct run *r)
{
	clp_stage_mb mb = {0, 0, 0, 7, r->tokens, r->types, r->targets, 0};
	float loss = NAN;

	CHECK_OK(clp_stage_zero_grads(st));
	CHECK_OK(clp_stage_forward(st, &mb, 1.0f / r->valid));
	CHECK_OK(clp_stage_backward(st, &mb, 1.0f / r->valid));
	CHECK_OK(clp_stage_fold_tied(st));
	CHECK_OK(clp_cl_read(th_ctx(), clp_stage_loss(st, 0).mem, clp_stage_loss(st, 0).off * 4, 4,
			     &loss));
	return loss;
}

static int lora_role(clp_role role)
{
	return role >= CLP_R_LORA_A && role <= CLP_R_LORA_LAST;
}

/* Copy the base tensors of st into ref (no adapters), merging each adapter pair into its unit:
 * unit row o (all parts in order; GPT-2's (I, O) weights by column) += s sum_k B[o,k] A[k,i]. */
static void merge_into(clp_stage *st, clp_stage *ref, const clp_model_config *c)
{
	const clp_param_table *t = clp_stage_table(st), *rt = clp_stage_table(ref);
	double s = c->lora_alpha / c->lora_r;
	size_t r = (size_t)c->lora_r;

	for (int i = 0; i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];
		int ri = clp_param_find(rt, d->name);
		float *w;

		if (lora_role(d->role))
			continue;
		w = get(st, CLP_ST_PARAM, i);
		CHECK(ri >= 0, "%s missing in the merged model", d->name);
		for (int l = 0; ri >= 0 && l < 4; l++) {
			static const clp_role wr[4] = {CLP_R_QKV_W, CLP_R_ATT_O_W, CLP_R_FC_W,
						       CLP_R_PROJ_W};
			int ua = clp_param_unit_of(t, (clp_role)(CLP_R_LORA_A + 2 * l), d->block);
			int ub = clp_param_unit_of(t, (clp_role)(CLP_R_LORA_B + 2 * l), d->block);
			size_t I, row0, rows;
			float *a, *b;
			int ia = -1, ib = -1;

			if (d->role != wr[l] || ua < 0)
				continue;
			for (int k = 0; k < t->ntensors; k++) {
				ia = t->tensors[k].unit == ua ? k : ia;
				ib = t->tensors[k].unit == ub ? k : ib;
			}
			a = get(st, CLP_ST_PARAM, ia);
			b = get(st, CLP_ST_PARAM, ib);
			I = t->tensors[ia].shape[1];
			if (c->preset == CLP_PRESET_GPT2) { /* (I, O): this tensor is the unit */
				size_t O = d->shape[1];

				for (size_t x = 0; x < I; x++)
					for (size_t o = 0; o < O; o++) {
						double acc = 0;

						for (size_t k = 0; k < r; k++)
							acc += (double)b[o * r + k] * a[k * I + x];
						w[x * O + o] = (float)(w[x * O + o] + s * acc);
					}
			} else { /* (O, I) rows offset / I .. of the unit */
				row0 = d->offset / I;
				rows = d->shape[0];
				for (size_t o = 0; o < rows; o++)
					for (size_t x = 0; x < I; x++) {
						double acc = 0;

						for (size_t k = 0; k < r; k++)
							acc += (double)b[(row0 + o) * r + k] * a[k * I + x];
						w[o * I + x] = (float)(w[o * I + x] + s * acc);
					}
			}
			free(a);
			free(b);
		}
		if (ri >= 0)
			CHECK_OK(clp_stage_write(ref, CLP_ST_PARAM, ri, w));
		free(w);
	}
}

static void check(clp_preset p)
{
	struct run r;
	clp_model_config lc;
	clp_stage *st, *ref, *rc;
	const clp_param_table *t;
	th_rng g = th_rng_seed(9);
	double l_lora, l_ref, gd = 0, lp = 0, lm = 0;
	const float eps = 1e-3f;
	int nlora = 0;

	if (!th_ctx())
		return;
	setup(&r, p);
	lc = r.cfg;
	lc.lora_r = 3;
	lc.lora_alpha = 5.0f;
	lc.lora_mask = 15;
	CHECK_OK(clp_model_config_resolve(&lc));
	st = make(&lc, 0, CLP_F32);
	ref = make(&r.cfg, 0, CLP_F32);
	if (!st || !ref)
		goto out;
	t = clp_stage_table(st);
	for (int i = 0; i < t->ntensors; i++) /* non-zero adapters (B starts at 0) */
		if (lora_role(t->tensors[i].role)) {
			float *v = malloc(t->tensors[i].numel * sizeof(float));

			th_fill_normal(&g, v, t->tensors[i].numel, 0.4f);
			CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, i, v));
			free(v);
			nlora++;
		}
	CHECK(nlora == 2 * 4 * 2, "%s: %d adapter tensors, expected 16", clp_preset_name(p), nlora);
	merge_into(st, ref, &lc);
	l_lora = step(st, &r);
	l_ref = step(ref, &r);
	CHECK(isfinite(l_lora) && fabs(l_lora - l_ref) <= 1e-5 * fabs(l_ref),
	      "%s: adapter model's loss %.9g, merged model's %.9g", clp_preset_name(p), l_lora, l_ref);
	/* every base tensor's gradient is the merged model's (the adapters' dx reach them all) */
	for (int i = 0; i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];
		int ri = clp_param_find(clp_stage_table(ref), d->name);
		float *ga, *gb;
		double num = 0, den = 0;

		if (lora_role(d->role) || ri < 0)
			continue;
		ga = get(st, CLP_ST_GRAD, i);
		gb = get(ref, CLP_ST_GRAD, ri);
		for (size_t j = 0; j < d->numel; j++) {
			num += ((double)ga[j] - gb[j]) * ((double)ga[j] - gb[j]);
			den += (double)gb[j] * gb[j];
		}
		CHECK(num <= 1e-8 * den + 1e-14, "%s: gradient of %s off the merged model's by "
		      "%.3g (relative)", clp_preset_name(p), d->name, sqrt(num / (den + 1e-30)));
		free(ga);
		free(gb);
	}
	/* recomputation: the same adapter gradients */
	rc = make(&lc, 1, CLP_F32);
	if (rc) {
		for (int i = 0; i < t->ntensors; i++) {
			float *v = get(st, CLP_ST_PARAM, i);

			CHECK_OK(clp_stage_write(rc, CLP_ST_PARAM, i, v));
			free(v);
		}
		step(st, &r);
		step(rc, &r);
		for (int i = 0; i < t->ntensors; i++)
			if (lora_role(t->tensors[i].role)) {
				float *x = get(st, CLP_ST_GRAD, i), *y = get(rc, CLP_ST_GRAD, i);

				CHECK(!memcmp(x, y, t->tensors[i].numel * sizeof(float)),
				      "%s: %s's gradient differs with recomputation",
				      clp_preset_name(p), t->tensors[i].name);
				free(x);
				free(y);
			}
		clp_stage_free(rc);
	}
	/* the adapters' gradient against central differences along a random direction */
	step(st, &r);
	for (int pass = 0; pass < 3; pass++) {
		g = th_rng_seed(21);
		for (int i = 0; i < t->ntensors; i++) {
			size_t n = t->tensors[i].numel;
			float *d, *v;

			if (!lora_role(t->tensors[i].role))
				continue;
			d = malloc(n * sizeof(float));
			th_fill_uniform(&g, d, n, -1, 1);
			v = get(st, pass == 0 ? CLP_ST_GRAD : CLP_ST_PARAM, i);
			for (size_t j = 0; j < n; j++)
				if (pass == 0)
					gd += (double)v[j] * d[j];
				else
					v[j] += (pass == 1 ? 1 : -2) * eps * d[j];
			if (pass)
				CHECK_OK(clp_stage_write(st, CLP_ST_PARAM, i, v));
			free(d);
			free(v);
		}
		if (pass == 1)
			lp = step(st, &r);
		if (pass == 2)
			lm = step(st, &r);
	}
	{
		double fd = (lp - lm) / (2.0 * eps);

		CHECK(fabs(fd - gd) <= 2e-2 * fabs(gd) + 1e-4, "%s: finite differences %.6g, "
		      "adapter gradients . d %.6g", clp_preset_name(p), fd, gd);
	}
	/* bf16: adapters and base read from the 16-bit copy; the loss stays close */
	{
		clp_stage *h = make(&lc, 0, CLP_BF16);

		if (h) {
			for (int i = 0; i < t->ntensors; i++) {
				float *v = get(st, CLP_ST_PARAM, i);

				CHECK_OK(clp_stage_write(h, CLP_ST_PARAM, i, v));
				free(v);
			}
			CHECK_OK(clp_stage_refresh_values(h));
			lp = step(st, &r);
			lm = step(h, &r);
			CHECK(isfinite(lm) && fabs(lm - lp) <= 3e-2 * fabs(lp),
			      "%s: bf16 loss %.6g, fp32 %.6g", clp_preset_name(p), lm, lp);
			clp_stage_free(h);
		}
	}
out:
	clp_stage_free(st);
	clp_stage_free(ref);
}

static void test_gpt2(void)
{
	check(CLP_PRESET_GPT2);
}

static void test_llama(void)
{
	check(CLP_PRESET_LLAMA);
}

static void test_bert(void)
{
	check(CLP_PRESET_BERT);
}

TH_MAIN(TH_TEST(test_gpt2), TH_TEST(test_llama), TH_TEST(test_bert))
