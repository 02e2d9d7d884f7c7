/* LoRA adapters on a layer's linears (model.lora_r, lora_mask): y = x W (+ b) + s x A' B',
 * s = alpha / r, A (r, I), B (O, r) in the parameter table (CLP_R_LORA_A + 2 l, B after it),
 * every product on the engine's GEMM. The forward keeps nothing: the backward recomputes
 * u = x A' (N x r, cheap) in the stage's LoRA work buffer. In a 16-bit stage A, B and x are the
 * 16-bit values (the base weight too: W is read from the 16-bit copy as ever); u, dy B and every
 * gradient are fp32. */
#include "engine/model/stage_internal.h"

#include "cl/gemm.h"

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

clp_status stage_lora_fwd(clp_stage *st, int blk, clp_stage_linear lin, clp_buf y, clp_buf x,
			  size_t N)
{
	clp_buf a, b;
	size_t I, O, r = (size_t)st->cfg.lora_r;

	if (!adapter(st, blk, lin, CLP_ST_VALUE, &a, &b, &I, &O))
		return CLP_OK;
	/* u (N, r) = x A'; y += s u B' */
	CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_T, N, r, I, 1.0f, x, I, a, I, 0.0f, st->lora_u,
			    r));
	return clp_cl_gemm(st->ctx, CLP_N, CLP_T, N, O, r, scale(st), st->lora_u, r, b, r, 1.0f, y,
			   O);
}

clp_status stage_lora_bwd(clp_stage *st, int blk, clp_stage_linear lin, clp_buf dx, clp_buf dy,
			  clp_buf x, size_t N)
{
	clp_buf a, b, da, db;
	size_t I, O, r = (size_t)st->cfg.lora_r;
	float s = scale(st);

	if (!adapter(st, blk, lin, CLP_ST_VALUE, &a, &b, &I, &O))
		return CLP_OK;
	da = stage_unit(st, CLP_ST_GRAD, (clp_role)(CLP_R_LORA_A + 2 * lin), blk);
	db = stage_unit(st, CLP_ST_GRAD, (clp_role)(CLP_R_LORA_B + 2 * lin), blk);
	/* u = x A' (recomputed); dB += s dy' u; g = dy B; dA += s g' x; dx += s g A (a frozen
	 * adapter, train.freeze: no dA, dB) */
	if (db.mem) {
		CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_T, N, r, I, 1.0f, x, I, a, I, 0.0f,
				    st->lora_u, r));
		CLP_TRY(clp_cl_gemm(st->ctx, CLP_T, CLP_N, O, r, N, s, dy, O, st->lora_u, r, 1.0f,
				    db, r));
	}
	if (!da.mem && !dx.mem)
		return CLP_OK;
	CLP_TRY(clp_cl_gemm(st->ctx, CLP_N, CLP_N, N, r, O, 1.0f, dy, O, b, r, 0.0f, st->lora_g,
			    r));
	if (da.mem)
		CLP_TRY(clp_cl_gemm(st->ctx, CLP_T, CLP_N, r, I, N, s, st->lora_g, r, x, I, 1.0f,
				    da, I));
	if (!dx.mem)
		return CLP_OK;
	return clp_cl_gemm(st->ctx, CLP_N, CLP_N, N, I, r, s, st->lora_g, r, a, I, 1.0f, dx, I);
}
