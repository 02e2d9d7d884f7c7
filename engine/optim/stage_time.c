/* A stage's training step, timed part by part (stage_time.h). */
#include "engine/optim/stage_time.h"

#include <stdlib.h>

#include "cl/base/clock.h"
#include "cl/runtime.h"

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 33;
}

static clp_status fill_random(clp_cl_ctx *ctx, clp_buf b, size_t n, float scale, uint64_t *x)
{
	float *h = malloc(n * sizeof(float) + 1);
	clp_status st;

	if (!h)
		return clp_error(CLP_ERR_NOMEM, "out of host memory measuring a stage");
	for (size_t i = 0; i < n; i++)
		h[i] = scale * ((float)(lcg(x) % 2001) / 1000.0f - 1.0f);
	if (b.dt != CLP_F32) { /* a 16-bit activation (mixed precision) */
		uint16_t *h16 = malloc(n * 2 + 2);

		if (!h16) {
			free(h);
			return clp_error(CLP_ERR_NOMEM, "out of host memory measuring a stage");
		}
		clp_dtype_pack(b.dt, h16, h, n);
		st = clp_cl_write(ctx, b.mem, b.off * 2, n * 2, h16);
		free(h16);
		free(h);
		return st;
	}
	st = clp_cl_write(ctx, b.mem, b.off * 4, n * sizeof(float), h);
	free(h);
	return st;
}

/* Seconds since *t after the device finished; *t moves on. */
static clp_status lap(clp_cl_ctx *ctx, double *t, double *out)
{
	double n;

	CLP_TRY(clp_cl_finish(ctx));
	n = clp_now();
	*out = n - *t;
	*t = n;
	return CLP_OK;
}

/* Run expr, then wait for the device and put the seconds since t into slot. */
#define TIMED(expr, slot)                                                                          \
	do {                                                                                       \
		CLP_TRY(expr);                                                                     \
		CLP_TRY(lap(ctx, &t, &(slot)));                                                    \
	} while (0)

static clp_status adamw_step(clp_stage *st)
{
	clp_nn_adamw_hp hp = {.lr = 1e-5f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
			      .weight_decay = 0.1f, .step = 1};

	CLP_TRY(clp_stage_grad_stats(st, clp_stage_stats(st), 1.0f));
	return clp_stage_adamw(st, &hp, clp_stage_stats(st));
}

static clp_status kfac_items(clp_cl_ctx *ctx, clp_stage *st, clp_kfac_opt *k, int mb,
			     clp_stage_times *d)
{
	clp_nn_adamw_hp hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = 1};
	double t = clp_now(), junk;

	TIMED(clp_kfac_opt_curv_a_kept(k, -1, mb), d->kfac_a);
	TIMED(clp_kfac_opt_curv_b_kept(k, -1, mb), d->kfac_b);
	TIMED(clp_kfac_opt_invert(k, -1, -1), d->kfac_inv);
	TIMED(clp_stage_grad_stats(st, clp_stage_stats(st), 0.0f), junk);
	TIMED(clp_kfac_opt_precondition(k), d->kfac_pre);
	TIMED(clp_kfac_opt_update(k, &hp, hp.lr, clp_stage_stats(st)), d->opt);
	return CLP_OK;
}

clp_status clp_stage_time(clp_stage *st, clp_kfac_opt *k, int split, const clp_stage_mb *m,
			  size_t width, uint64_t *rng, clp_stage_times *d)
{
	clp_cl_ctx *ctx = clp_stage_ctx(st);
	size_t tokens = clp_stage_rows(st), n = tokens * width;
	float ic = 1.0f / (float)tokens;
	double t, junk;

	*d = (clp_stage_times){0};
	CLP_TRY(clp_stage_zero_grads(st));
	if (k) {
		CLP_TRY(clp_kfac_opt_step_begin(k, 0, (double)tokens, (double)tokens, NULL));
		clp_kfac_opt_defer(k, 1);
	}
	if (!clp_stage_has_embedding(st))
		CLP_TRY(fill_random(ctx, clp_stage_act_in(st, m->slot), n, 1.0f, rng));
	CLP_TRY(clp_cl_finish(ctx));
	t = clp_now();
	TIMED(clp_stage_forward(st, m, ic), d->fwd);
	if (!clp_stage_has_head(st))
		CLP_TRY(fill_random(ctx, clp_stage_grad_in(st), n, 1e-3f, rng));
	CLP_TRY(lap(ctx, &t, &junk)); /* the upload is not timed */
	if (split) {
		TIMED(clp_stage_backward_input(st, m, ic), d->bwd_b);
		TIMED(clp_stage_backward_weight(st, m), d->bwd_w);
		d->bwd = d->bwd_b + d->bwd_w;
	} else {
		TIMED(clp_stage_backward(st, m, ic), d->bwd);
		d->bwd_b = d->bwd_w = d->bwd / 2;
	}
	if (k)
		return kfac_items(ctx, st, k, (int)m->micro_batch, d);
	TIMED(adamw_step(st), d->opt);
	return CLP_OK;
}
