/* A tiny model stage with two micro-batches for the K-FAC optimizer tests: random batches, a
 * tap that records every output gradient on the host before handing it to the optimizer, and
 * host copies of the layers' inputs. */
#ifndef CLP_TESTS_KFAC_RIG_H
#define CLP_TESTS_KFAC_RIG_H

#include <stdlib.h>
#include <string.h>

#include "engine/optim/kfac.h"
#include "tests/harness.h"

#define RIG_M 2      /* micro-batches */
#define RIG_LAYERS 2 /* model layers */

typedef struct rig {
	clp_model_config cfg;
	clp_stage *st;
	clp_kfac_opt *k;
	size_t B, T, N;
	int32_t tok[RIG_M][64], types[RIG_M][64], tg[RIG_M][64];
	size_t count; /* valid targets over the step */
	float *in[RIG_M][RIG_LAYERS][CLP_LIN_COUNT];
	float *dy[RIG_M][RIG_LAYERS][CLP_LIN_COUNT];
} rig;

static inline float *rig_read(clp_buf b, size_t n)
{
	float *h = malloc((n ? n : 1) * sizeof(float));

	CHECK_OK(clp_cl_read(th_ctx(), b.mem, b.off * 4, n * 4, h));
	return h;
}

static inline clp_status rig_tap(void *user, const clp_stage_mb *mb, int li, clp_stage_linear lin,
				 clp_buf dy)
{
	rig *r = user;
	clp_stage_linear_info in;
	float **slot = &r->dy[mb->micro_batch][li][lin];

	clp_stage_linear_get(r->st, lin, &in);
	free(*slot);
	*slot = rig_read(dy, r->N * in.O);
	return r->k ? clp_kfac_opt_tap(r->k, mb, li, lin, dy) : CLP_OK;
}

/* gpt2 (Conv1D layout, biases), llama (q/k/v and gate/up parts, GQA, no biases), bert (parts
 * and biases, masked targets): 2 layers of width 12, MLP 20, vocabulary 23, B 2 x T 7. */
static inline int rig_open(rig *r, clp_preset preset, uint64_t seed)
{
	clp_stage_opts so = {2, 7, 1, 0, 0, CLP_F32, NULL};
	th_rng g = th_rng_seed(seed);

	memset(r, 0, sizeof(*r));
	r->cfg.preset = preset;
	r->cfg.n_layer = RIG_LAYERS;
	r->cfg.d_model = 12;
	r->cfg.n_head = 2;
	r->cfg.n_kv_head = preset == CLP_PRESET_LLAMA ? 1 : 0;
	r->cfg.d_ff = 20;
	r->cfg.vocab = 23;
	r->cfg.ctx = 8;
	r->cfg.n_types = 2;
	r->B = so.B;
	r->T = so.T;
	r->N = so.B * so.T;
	if (!th_ctx())
		return 0;
	CHECK_OK(clp_model_config_resolve(&r->cfg));
	CHECK_OK(clp_stage_create(&r->st, th_ctx(), &r->cfg, 0, RIG_LAYERS + 1, &so));
	if (!r->st)
		return 0;
	CHECK_OK(clp_stage_init_params(r->st, seed));
	for (int m = 0; m < RIG_M; m++)
		for (size_t i = 0; i < r->N; i++) {
			r->tok[m][i] = (int32_t)(th_next(&g) % 23);
			r->types[m][i] = (int32_t)(i >= r->T / 2);
			r->tg[m][i] = preset == CLP_PRESET_BERT && th_next(&g) % 3 ? -1
											: (int32_t)(th_next(&g) % 23);
			r->count += r->tg[m][i] >= 0;
		}
	return 1;
}

/* Forward and backward of micro-batch m of step `step` in slot 0; the layer inputs are copied
 * to the host (the optimizer's tap takes the factors during the backward). */
static inline void rig_fwd_bwd(rig *r, uint32_t step, int m)
{
	clp_stage_mb mb = {0, step, (uint32_t)m, 7, r->tok[m], r->types[m], r->tg[m], 0};
	float inv = 1.0f / (float)r->count;

	CHECK_OK(clp_stage_forward(r->st, &mb, inv));
	for (int li = 0; li < RIG_LAYERS; li++)
		for (int lin = 0; lin < CLP_LIN_COUNT; lin++) {
			clp_stage_linear_info in;

			clp_stage_linear_get(r->st, (clp_stage_linear)lin, &in);
			free(r->in[m][li][lin]);
			r->in[m][li][lin] = rig_read(clp_stage_linear_input(r->st, 0, li,
									    (clp_stage_linear)lin),
						     r->N * in.I);
		}
	CHECK_OK(clp_stage_backward(r->st, &mb, inv));
}

static inline void rig_close(rig *r)
{
	clp_kfac_opt_free(r->k);
	clp_stage_free(r->st);
	for (int m = 0; m < RIG_M; m++)
		for (int l = 0; l < RIG_LAYERS; l++)
			for (int j = 0; j < CLP_LIN_COUNT; j++) {
				free(r->in[m][l][j]);
				free(r->dy[m][l][j]);
			}
	memset(r, 0, sizeof(*r));
}

#endif
