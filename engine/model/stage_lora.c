/* LoRA adapters on a layer's linears (model.lora_r, lora_mask): y = x W (+ b) + s x A' B',
 * s = alpha / r, A (r, I), B (O, r) in the parameter table (CLP_R_LORA_A + 2 l, B after it),
 * every product on the engine's GEMM. The forward keeps nothing: the backward recomputes
 * u = x A' (N x r, cheap) in the stage's LoRA work buffer. In a 16-bit stage A, B and x are the
 * 16-bit values (the base weight too: W is read from the 16-bit copy as ever); u, dy B and every
 * gradient are fp32.
 *
 * model.lora_dropout p (PEFT's lora_dropout): the branch reads drop(x) = mask x / (1 - p)
 * instead of x, y += s drop(x) A' B'. The mask is the engine's dropout (clp_nn_dropout_*) on a
 * stream of (seed, step, micro-batch, layer, site 3 + l): any pipeline layout and a resumed run
 * draw the same one, and the backward draws it again (dA += s g' drop(x), dx += mask (s g A) /
 * (1 - p)). p = 0 runs none of it. */
#include "engine/model/stage_internal.h"

#include "cl/gemm.h"
#include "cl/nn.h"
#include "cl/base/rng.h"

static float scale(const clp_stage *st)
{
	return st->cfg.lora_alpha / (float)st->cfg.lora_r;
}

/* The adapter of linear lin in block blk (A.mem NULL: none), its inputs and outputs. */
static int adapter(const clp_stage *st, int blk, clp_stage_linear lin, clp_stage_what w,
		   clp_buf *a, clp_buf *b, size_t *I, size_t *O)
{
	clp_stage_linear_info in;

	if (st->cfg.lora_r <= 0 || !(st->cfg.lora_mask & 1u << lin))
		return 0;
	*a = stage_unit(st, w, (clp_role)(CLP_R_LORA_A + 2 * lin), blk);
	*b = stage_unit(st, w, (clp_role)(CLP_R_LORA_B + 2 * lin), blk);
	if (!a->mem || !b->mem)
		return 0;
	clp_model_linear_get(&st->cfg, lin, &in);
	*I = in.I;
	*O = in.O;
	return 1;
}

/* drop(x) into the work buffer (p > 0; the forward's mask again in the backward). */
static clp_status dropped(clp_stage *st, int blk, clp_stage_linear lin, clp_buf x, size_t n,
			  clp_buf *xd, clp_rng_stream *rs)
{
	const clp_stage_mb *mb = st->mb_now;

	*xd = x;
	if (!(st->cfg.lora_dropout > 0))
		return CLP_OK;
	if (!mb)
		return clp_error(CLP_ERR_STATE, "stage: LoRA dropout outside a micro-batch's "
				 "forward or backward");
	CLP_TRY(clp_rng_stream_init(rs, mb->seed, mb->step,
				    mb->micro_batch + mb->stream_base,
				    (uint32_t)((blk - 1) * 8 + 3 + (int)lin), CLP_RNG_DROPOUT));
	*xd = st->lora_x;
	return clp_nn_dropout_forward(st->ctx, *xd, x, n, st->cfg.lora_dropout, rs);
}

clp_status stage_lora_fwd(clp_stage *st, int blk, clp_stage_linear lin, clp_buf y, clp_buf x,
			  size_t N)
{
	clp_buf a, b, xd;
	size_t I, O, r = (size_t)st->cfg.lora_r;
	clp_rng_stream rs;

	if (!adapter(st, blk, lin, CLP_ST_VALUE, &a, &b, &I, &O))
		return CLP_OK;
	CLP_TRY(dropped(st, blk, lin, x, N * I, &xd, &rs));
	/* u (N, r) = drop(x) A'; y += s u B' */
	CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_T, N, r, I, 1.0f, xd, I, a, I, 0.0f, st->lora_u,
			    r));
	return clp_cl_gemm(st->ctx, CLP_N, CLP_T, N, O, r, scale(st), st->lora_u, r, b, r, 1.0f, y,
			   O);
}

clp_status stage_lora_bwd(clp_stage *st, int blk, clp_stage_linear lin, clp_buf dx, clp_buf dy,
			  clp_buf x, size_t N)
{
	clp_buf a, b, da, db, xd;
	size_t I, O, r = (size_t)st->cfg.lora_r;
	float s = scale(st);
	clp_rng_stream rs;

	if (!adapter(st, blk, lin, CLP_ST_VALUE, &a, &b, &I, &O))
		return CLP_OK;
	da = stage_unit(st, CLP_ST_GRAD, (clp_role)(CLP_R_LORA_A + 2 * lin), blk);
	db = stage_unit(st, CLP_ST_GRAD, (clp_role)(CLP_R_LORA_B + 2 * lin), blk);
	if (!da.mem && !db.mem && !dx.mem)
		return CLP_OK;
	CLP_TRY(dropped(st, blk, lin, x, N * I, &xd, &rs));
	/* u = drop(x) A' (recomputed); dB += s dy' u; g = dy B; dA += s g' drop(x); dx += s g A,
	 * through the mask (a frozen adapter, train.freeze: no dA, dB) */
	if (db.mem) {
		CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_T, N, r, I, 1.0f, xd, I, a, I, 0.0f,
				    st->lora_u, r));
		CLP_TRY(clp_cl_gemm(st->ctx, CLP_T, CLP_N, O, r, N, s, dy, O, st->lora_u, r, 1.0f,
				    db, r));
	}
	if (!da.mem && !dx.mem)
		return CLP_OK;
	CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_N, N, r, O, 1.0f, dy, O, b, r, 0.0f, st->lora_g,
			    r));
	if (da.mem)
		CLP_TRY(clp_cl_gemm(st->ctx, CLP_T, CLP_N, r, I, N, s, st->lora_g, r, xd, I, 1.0f,
				    da, I));
	if (!dx.mem)
		return CLP_OK;
	if (!(st->cfg.lora_dropout > 0))
		return clp_cl_gemm(st->ctx, CLP_N, CLP_N, N, I, r, s, st->lora_g, r, a, I, 1.0f, dx,
				   I);
	/* t = s g A over drop(x)'s memory (done with it), then dx += mask t / (1 - p) */
	CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_N, N, I, r, s, st->lora_g, r, a, I, 0.0f,
			    st->lora_t, I));
	return clp_nn_dropout_backward(st->ctx, dx, st->lora_t, N * I, st->cfg.lora_dropout, &rs);
}
