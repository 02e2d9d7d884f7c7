/* The planner's stage memory (clp_model_stage_mem) against what real stages allocate: parameters,
 * gradients, AdamW moments, one activation slot, temporaries and the recomputation buffer, for
 * each preset, stage range, split backward and recomputation: the bytes the stage's views ask
 * for, exactly (the buffers then pad each view to the device's alignment). */
#include <stdio.h>
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

TH_MAIN(TH_TEST(test_against_stages))
