/* The planner's stage memory (clp_model_stage_mem) against what real stages allocate: parameters,
 * gradients, AdamW moments, one activation slot, temporaries and the recomputation buffer, for
 * each preset, stage range, split backward and recomputation: the bytes the stage's views ask
 * for, exactly (the buffers then pad each view to the device's alignment). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/runtime.h"
#include "engine/model/stage_internal.h"
#include "engine/plan/plan.h"
#include "tests/harness.h"

/* The bytes a block's views ask for (the buffers add alignment padding). */
static int64_t block(const clp_cl_block *b)
{
	int64_t n = 0;

	for (int i = 0; b && i < clp_cl_block_nviews(b); i++)
		n += (int64_t)clp_cl_block_view(b, i)->bytes;
	return n;
}

static void same(const char *what, int64_t real, int64_t formula, const char *at)
{
	CHECK(real == formula, "%s: %s: the stage's views hold %lld bytes, the formula says %lld",
	      at, what, (long long)real, (long long)formula);
}

static void test_against_stages(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const clp_preset presets[] = {CLP_PRESET_GPT2, CLP_PRESET_LLAMA, CLP_PRESET_BERT};
	const int ranges[][2] = {{0, 0}, {0, 2}, {1, 2}, {3, 4}, {4, 4}, {0, 4}};

	if (!ctx)
		return;
	for (int pi = 0; pi < 3; pi++)
		for (size_t ri = 0; ri < sizeof(ranges) / sizeof(ranges[0]); ri++)
			for (int mode = 0; mode < 12; mode++) {
				clp_model_config m = {.preset = presets[pi], .n_layer = 3,
						      .d_model = 32, .n_head = 4, .vocab = 53,
						      .ctx = 16, .n_types = 2};
				clp_stage_opts so = {.B = 3, .T = 7, .slots = 2, .split = mode & 1,
						     .recompute = (mode >> 1) & 1,
						     .precision = (clp_dtype)(mode >> 2)};
				clp_stage *st = NULL;
				clp_model_mem f;
				char at[96];
				int64_t kinds = 0;

				if (presets[pi] == CLP_PRESET_LLAMA)
					m.n_kv_head = 2;
				snprintf(at, sizeof(at), "%s blocks %d..%d split %d recompute %d %s",
					 clp_preset_name(m.preset), ranges[ri][0], ranges[ri][1],
					 so.split, so.recompute, clp_dtype_name(so.precision));
				CHECK_OK(clp_stage_create(&st, ctx, &m, ranges[ri][0], ranges[ri][1], &so));
				CHECK_OK(clp_model_stage_mem_prec(&m, ranges[ri][0], ranges[ri][1], so.B,
								 so.T, so.split, so.recompute,
								 so.precision, &f));
				if (!st)
					continue;
				same("parameters", block(st->blk[CLP_ST_PARAM]), f.param_bytes, at);
				same("gradients", block(st->blk[CLP_ST_GRAD]), f.param_bytes, at);
				same("16-bit parameter copy", block(st->blk[CLP_ST_VALUE]), f.copy_bytes,
				     at);
				CHECK(f.copy_bytes == (so.precision ? f.param_bytes / 2 : 0),
				      "%s: the copy is half the masters in 16 bits", at);
				for (int k = CLP_ST_ADAM_M; k <= CLP_ST_ADAM_V; k++)
					kinds += block(st->blk[k]);
				same("AdamW moments", kinds, f.opt_bytes, at);
				same("one slot", block(st->slots[1].mem), f.act_bytes, at);
				same("workspace", block(st->tmp) + block(st->misc) + block(st->rmem),
				     f.work_bytes, at);
				CHECK(f.out_bytes == (int64_t)(so.B * so.T * 32 *
							      clp_dtype_size(so.precision)),
				      "%s: out bytes", at);
				clp_stage_free(st);
			}
}

/* Frozen tensors: the stage allocates gradients and moments for the trained units only, and
 * the model (clp_model_stage_mem_frozen) counts exactly those; parameters stay whole. */
static int by_mask(const void *user, const clp_tensor_desc *d)
{
	const clp_param_table *full = ((const void *const *)user)[0];
	const unsigned char *fz = ((const void *const *)user)[1];
	int i = clp_param_find(full, d->name);

	return i >= 0 && fz[i];
}

static void test_frozen_stages(void)
{
	clp_cl_ctx *ctx = th_ctx();
	const clp_preset presets[] = {CLP_PRESET_GPT2, CLP_PRESET_LLAMA, CLP_PRESET_BERT};
	const int ranges[][2] = {{0, 0}, {0, 2}, {3, 4}, {0, 4}};

	if (!ctx)
		return;
	for (int pi = 0; pi < 3; pi++)
		for (size_t ri = 0; ri < sizeof(ranges) / sizeof(ranges[0]); ri++)
			for (int mode = 0; mode < 4; mode++) {
				clp_model_config m = {.preset = presets[pi], .n_layer = 3,
						      .d_model = 32, .n_head = 4, .vocab = 53,
						      .ctx = 16, .n_types = 2};
				clp_stage_opts so = {.B = 3, .T = 7, .slots = 2,
						     .precision = mode & 1 ? CLP_BF16 : CLP_F32};
				clp_param_table full;
				unsigned char *fz;
				const void *user[2];
				clp_stage *st = NULL;
				clp_model_mem f, all;
				char at[96];

				if (presets[pi] == CLP_PRESET_LLAMA)
					m.n_kv_head = 2;
				if (mode >> 1) { /* LoRA, its base frozen */
					m.lora_r = 3;
					m.lora_alpha = 6;
					m.lora_mask = 15;
					m.lora_dropout = mode & 1 ? 0.2f : 0.0f; /* drop(x) */
				}
				CHECK_OK(clp_model_config_resolve(&m));
				CHECK_OK(clp_param_table_build(&m, 0, 4, &full));
				fz = calloc((size_t)full.ntensors, 1);
				for (int i = 0; i < full.ntensors; i++) /* LoRA base; else the
									 * embedding and layer 2 */
					fz[i] = mode >> 1 ? clp_model_lora_base(&m, &full.tensors[i])
							  : full.tensors[i].block == 0 ||
								    full.tensors[i].block == 3;
				user[0] = &full;
				user[1] = fz;
				so.frozen = fz;
				snprintf(at, sizeof(at), "%s blocks %d..%d %s, %s frozen",
					 clp_preset_name(m.preset), ranges[ri][0], ranges[ri][1],
					 clp_dtype_name(so.precision),
					 mode >> 1 ? "the LoRA base" : "embedding and layer 2");
				CHECK_OK(clp_stage_create(&st, ctx, &m, ranges[ri][0], ranges[ri][1], &so));
				CHECK_OK(clp_model_stage_mem_frozen(&m, ranges[ri][0], ranges[ri][1], so.B,
								   so.T, 0, 0, so.precision, by_mask,
								   user, &f));
				CHECK_OK(clp_model_stage_mem_prec(&m, ranges[ri][0], ranges[ri][1], so.B,
								 so.T, 0, 0, so.precision, &all));
				if (st) {
					same("parameters", block(st->blk[CLP_ST_PARAM]), f.param_bytes, at);
					same("gradients", block(st->blk[CLP_ST_GRAD]), f.grad_bytes, at);
					same("AdamW moments",
					     block(st->blk[CLP_ST_ADAM_M]) + block(st->blk[CLP_ST_ADAM_V]),
					     f.opt_bytes, at);
					same("workspace", block(st->tmp) + block(st->misc) +
							      block(st->rmem), f.work_bytes, at);
				}
				CHECK(f.param_bytes == all.param_bytes && f.copy_bytes == all.copy_bytes &&
				      f.act_bytes == all.act_bytes && f.opt_bytes == 2 * f.grad_bytes,
				      "%s: weights, copy, activations as without freezing", at);
				CHECK(f.grad_bytes < all.grad_bytes || ranges[ri][0] == 3,
				      "%s: gradients %lld, %lld with everything trained", at,
				      (long long)f.grad_bytes, (long long)all.grad_bytes);
				clp_stage_free(st);
				clp_param_table_free(&full);
				free(fz);
			}
}

/* A LoRA run against a full fine-tune of an all-MiniLM-L6-v2-shaped BERT (6 layers, width 384,
 * 12 heads, vocabulary 30522, 512 positions), one stage, micro-batch 8 x 128, r = 8 on all four
 * linears: the memory model (and so the planner and the session's check) saves exactly what
 * the parameter counts say. P base parameters, A adapter parameters, N = 8 x 128 rows:
 *   full  4P weights + 4P gradients + 8P moments, the tied head's V C gradient share
 *   LoRA  4(P + A) weights + 4A gradients + 8A moments, LoRA's 2 N r work floats
 * so full - LoRA = 12 P - 16 A + 4 (V C - 2 N r) + (bf16: -2 A for the 16-bit copy). */
static void test_lora_saving(void)
{
	clp_model_config m = {.preset = CLP_PRESET_BERT, .n_layer = 6, .d_model = 384,
			      .n_head = 12, .d_ff = 1536, .vocab = 30522, .ctx = 512,
			      .n_types = 2};
	clp_model_config l;
	clp_param_table tp, tl;
	const size_t Bm = 8, Tm = 128, r = 8;

	CHECK_OK(clp_model_config_resolve(&m));
	l = m;
	l.lora_r = (int)r;
	l.lora_alpha = 16;
	l.lora_mask = 15;
	CHECK_OK(clp_model_config_resolve(&l));
	CHECK_OK(clp_param_table_build(&m, 0, 7, &tp));
	CHECK_OK(clp_param_table_build(&l, 0, 7, &tl));
	for (int prec = 0; prec < 2; prec++) {
		clp_dtype dt = prec ? CLP_BF16 : CLP_F32;
		clp_model_mem a, b;
		int64_t P = (int64_t)tp.numel, A = (int64_t)(tl.numel - tp.numel), ta, tb, want;

		CHECK_OK(clp_model_stage_mem_prec(&m, 0, 7, Bm, Tm, 0, 0, dt, &a));
		CHECK_OK(clp_model_stage_mem_frozen(&l, 0, 7, Bm, Tm, 0, 0, dt, clp_model_lora_base,
						   &l, &b));
		ta = a.param_bytes + a.grad_bytes + a.opt_bytes + a.copy_bytes + a.act_bytes +
		     a.work_bytes;
		tb = b.param_bytes + b.grad_bytes + b.opt_bytes + b.copy_bytes + b.act_bytes +
		     b.work_bytes;
		want = 12 * P - 16 * A + 4 * ((int64_t)m.vocab * m.d_model -
					      2 * (int64_t)(Bm * Tm * r)) -
		       (int64_t)clp_dtype_size(dt) * A * (dt != CLP_F32);
		CHECK(A == 6 * (int64_t)r * ((384 + 3 * 384) + (384 + 384) + (384 + 1536) + (1536 + 384)),
		      "adapters: %lld parameters", (long long)A);
		CHECK(ta - tb == want, "%s: full %lld bytes, LoRA %lld: saves %lld, the counts say "
		      "%lld", clp_dtype_name(dt), (long long)ta, (long long)tb, (long long)(ta - tb),
		      (long long)want);
		fprintf(stderr, "MiniLM shape, %s, micro-batch 8 x 128: full fine-tune %.1f MiB "
			"(gradients %.1f, moments %.1f), LoRA r=8 %.1f MiB (gradients %.2f, "
			"moments %.2f): %.1f MiB less; P = %lld, A = %lld\n", clp_dtype_name(dt),
			ta / 1048576.0, a.grad_bytes / 1048576.0, a.opt_bytes / 1048576.0,
			tb / 1048576.0, b.grad_bytes / 1048576.0, b.opt_bytes / 1048576.0,
			(ta - tb) / 1048576.0, (long long)P, (long long)A);
	}
	clp_param_table_free(&tp);
	clp_param_table_free(&tl);
}

/* The planner counts LoRA's base and train.freeze's tensors as weights only. */
static void test_planner_frozen(void)
{
	clp_train_config c;
	clp_plan_model pm;
	clp_model_mem got, want, all;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.preset", "bert", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.n_layer", "2", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.d_model", "32", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.n_head", "4", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.ctx", "16", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "train.seq", "16", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.lora_r", "4", "test"));
	CHECK_OK(clp_plan_model_from_config(&c, &pm));
	CHECK(pm.cfg.lora_r == 4 && pm.cfg.lora_mask == 15, "plan model LoRA r %d mask %u",
	      pm.cfg.lora_r, pm.cfg.lora_mask);
	CHECK_OK(clp_plan_stage_mem(&pm, &pm.cfg, 0, 3, 0, 0, &got));
	CHECK_OK(clp_model_stage_mem_frozen(&pm.cfg, 0, 3, pm.batch, pm.seq, 0, 0, pm.precision,
					   clp_model_lora_base, &pm.cfg, &want));
	CHECK_OK(clp_model_stage_mem_prec(&pm.cfg, 0, 3, pm.batch, pm.seq, 0, 0, pm.precision,
					 &all));
	CHECK(got.grad_bytes == want.grad_bytes && got.grad_bytes < all.grad_bytes / 4,
	      "planner with LoRA: gradients %lld, the LoRA rule %lld, all %lld",
	      (long long)got.grad_bytes, (long long)want.grad_bytes, (long long)all.grad_bytes);
	/* train.freeze alone: the embedding's tables and LayerNorm as weights only */
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.lora_r", "0", "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "train.freeze", "bert.embeddings.*", "test"));
	CHECK_OK(clp_plan_model_from_config(&c, &pm));
	CHECK_OK(clp_plan_stage_mem(&pm, &pm.cfg, 0, 3, 0, 0, &got));
	CHECK_OK(clp_model_stage_mem_prec(&pm.cfg, 0, 3, pm.batch, pm.seq, 0, 0, pm.precision,
					 &all));
	{
		int64_t emb = (int64_t)(pm.cfg.vocab + 16 + 2 + 2) * 32 * 4; /* tables + LN */

		CHECK(all.grad_bytes - got.grad_bytes == emb, "planner with train.freeze: "
		      "gradients %lld, %lld unfrozen, the embedding holds %lld",
		      (long long)got.grad_bytes, (long long)all.grad_bytes, (long long)emb);
	}
}

TH_MAIN(TH_TEST(test_against_stages), TH_TEST(test_frozen_stages), TH_TEST(test_lora_saving),
	TH_TEST(test_planner_frozen))
