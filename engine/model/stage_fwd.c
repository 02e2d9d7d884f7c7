/* Forward of the blocks of a stage: embedding, transformer layers (gpt2: pre-LayerNorm, GELU;
 * llama: pre-RMSNorm, RoPE, GQA, SwiGLU; bert: post-LayerNorm, bidirectional), head and loss.
 * Shapes: N = B*T rows, C model width, F MLP width. Saves in the slot what backward needs. */
#include "engine/model/stage_internal.h"

#include <string.h>

#include "cl/gemm.h"
#include "cl/ops.h"

#define OFF(b, n) clp_buf_plus((b), (n))

/* y (N,O) = x (N,I) W (+ b). W is (I,O) when in_out (GPT-2's Conv1D), else (O,I) (Linear).
 * The bias goes in the GEMM's store where the backend can (clp_cl_gemm_bias: bitwise the
 * separate clp_nn_bias_forward, which runs otherwise). */
clp_status stage_linear_fwd(clp_stage *st, clp_buf y, clp_buf x, clp_buf w, clp_buf b, size_t N,
			 size_t I, size_t O, int in_out)
{
	int fused = 0;

	CLP_TRY(clp_cl_gemm_bias(st->ctx, CLP_N, in_out ? CLP_N : CLP_T, N, O, I, 1.0f, x, I, w,
				 in_out ? O : I, 0.0f, y, O, b, &fused));
	if (b.mem && !fused)
		CLP_TRY(clp_nn_bias_forward(st->ctx, y, b, N, O));
	return CLP_OK;
}

/* Dropout on a residual branch; site names the place within the layer. */
clp_status stage_dropout(clp_stage *st, clp_buf x, size_t n, const clp_stage_mb *mb, int layer,
		      int site, int backward, clp_buf dx)
{
	clp_rng_stream rs;

	if (st->cfg.dropout <= 0.0f)
		return CLP_OK;
	CLP_TRY(clp_rng_stream_init(&rs, mb->seed, mb->step,
				    mb->micro_batch + mb->stream_base, (uint32_t)(layer * 8 + site),
				    CLP_RNG_DROPOUT));
	if (backward)
		return clp_nn_dropout_backward(st->ctx, dx, x, n, st->cfg.dropout, &rs);
	return clp_nn_dropout_forward(st->ctx, x, x, n, st->cfg.dropout, &rs);
}

void stage_attn_geometry(const clp_stage *st, clp_nn_attn *a)
{
	a->B = st->B;
	a->T = st->T;
	a->H = st->H;
	a->KVH = st->KVH;
	a->hd = st->hd;
	a->ldq = a->ldk = a->ldv = st->dq;
	a->ldo = st->H * st->hd;
	a->causal = st->cfg.preset != CLP_PRESET_BERT;
	a->scale = 0.0f;
	a->kv_len.mem = NULL;
	a->kv_len.off = 0;
}

/* Offsets of K and V in a QKV row. */
static size_t k_off(const clp_stage *st)
{
	return st->H * st->hd;
}

static size_t v_off(const clp_stage *st)
{
	return st->H * st->hd + st->KVH * st->hd;
}

clp_status stage_embedding_forward(clp_stage *st, struct slot *s, const clp_stage_mb *mb)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C;
	int bert = st->cfg.preset == CLP_PRESET_BERT;
	clp_buf none = CLP_BUF_NONE;
	clp_buf out = bert ? s->sa[SA_EMB] : s->x[0];

	if (!mb->tokens || (bert && !mb->types))
		return clp_error(CLP_ERR_INVALID, "stage: the embedding needs token ids%s",
				 bert ? " and token types" : "");
	memcpy(s->tokens, mb->tokens, N * sizeof(int32_t));
	CLP_TRY(clp_cl_write(ctx, s->sa[SA_TOKENS].mem, s->sa[SA_TOKENS].off * 4, N * 4, s->tokens));
	CLP_TRY(clp_nn_index_build(ctx, &s->tok_idx, s->tokens, N, st->V, "token ids"));
	if (bert) {
		memcpy(s->types, mb->types, N * sizeof(int32_t));
		CLP_TRY(clp_cl_write(ctx, s->sa[SA_TYPES].mem, s->sa[SA_TYPES].off * 4, N * 4,
				     s->types));
		CLP_TRY(clp_nn_index_build(ctx, &s->type_idx, s->types, N,
					   (size_t)st->cfg.n_types, "token types"));
	}
	CLP_TRY(clp_nn_embed_forward(ctx, out, s->sa[SA_TOKENS], bert ? s->sa[SA_TYPES] : none,
				     stage_unit(st, CLP_ST_VALUE, CLP_R_TOK_EMB, 0),
				     stage_unit(st, CLP_ST_VALUE, CLP_R_POS_EMB, 0),
				     stage_unit(st, CLP_ST_VALUE, CLP_R_TYPE_EMB, 0), st->B, st->T, C,
				     st->V, (size_t)st->cfg.n_types));
	if (bert)
		CLP_TRY(clp_nn_layernorm_forward(ctx, s->x[0], s->sa[SA_EMB_MEAN], s->sa[SA_EMB_RSTD],
						 s->sa[SA_EMB],
						 stage_unit(st, CLP_ST_VALUE, CLP_R_EMB_LN_W, 0),
						 stage_unit(st, CLP_ST_VALUE, CLP_R_EMB_LN_B, 0), N, C,
						 st->cfg.norm_eps));
	return stage_dropout(st, s->x[0], N * C, mb, st->cfg.n_layer, 2, 0, none);
}

/* The MLP's first linear and GELU: fc = x W + b and act = gelu(fc), the bias and GELU in the
 * GEMM's store or in one launch after it (issue 30; bitwise the separate kernels), unless a
 * LoRA adapter adds to fc after the bias. */
static clp_status mlp_up(clp_stage *st, clp_buf *la, int blk, clp_buf x, clp_nn_gelu kind,
			 int in_out)
{
	size_t N = st->N, C = st->C, F = st->F;
	clp_buf w = stage_unit(st, CLP_ST_VALUE, CLP_R_FC_W, blk);
	clp_buf b = stage_unit(st, CLP_ST_VALUE, CLP_R_FC_B, blk), none = CLP_BUF_NONE;

	if (b.mem && (st->cfg.lora_r <= 0 || !(st->cfg.lora_mask & 1u << CLP_LIN_FC))) {
		int fused = 0;

		/* both in the GEMM's store where that is bitwise the same (cl/gemm.h) */
		if (clp_nn_gelu_store_ok(st->ctx, F))
			CLP_TRY(clp_cl_gemm_bias_gelu(st->ctx, CLP_N, in_out ? CLP_N : CLP_T, N, F, C,
						      1.0f, x, C, w, in_out ? F : C, 0.0f,
						      la[LA_FC], F, b, la[LA_ACT], (int)kind,
						      &fused));
		else
			CLP_TRY(stage_linear_fwd(st, la[LA_FC], x, w, none, N, C, F, in_out));
		if (fused)
			return CLP_OK;
		return clp_nn_bias_gelu_forward(st->ctx, la[LA_ACT], la[LA_FC], b, N, F, kind);
	}
	CLP_TRY(stage_linear_fwd(st, la[LA_FC], x, w, b, N, C, F, in_out));
	CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_FC, la[LA_FC], x, N));
	return clp_nn_gelu_forward(st->ctx, la[LA_ACT], la[LA_FC], N * F, kind);
}

clp_status stage_layer_forward(clp_stage *st, struct slot *s, int li, const clp_stage_mb *mb)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C, F = st->F, HD = st->H * st->hd;
	int blk = st->l0 + li + 1, layer = st->l0 + li;
	clp_buf *la = s->la[li], x = s->x[li], xo = s->x[li + 1], tmp = st->ftmp;
	clp_buf none = CLP_BUF_NONE;
	float eps = st->cfg.norm_eps;
	clp_nn_attn a;

#define W(role) stage_unit(st, CLP_ST_VALUE, role, blk)
	stage_attn_geometry(st, &a);
	switch (st->cfg.preset) {
	case CLP_PRESET_GPT2:
		CLP_TRY(clp_nn_layernorm_forward(ctx, la[LA_LN1], la[LA_LN1_MEAN], la[LA_LN1_RSTD],
						 x, W(CLP_R_LN1_W), W(CLP_R_LN1_B), N, C, eps));
		CLP_TRY(stage_linear_fwd(st, la[LA_QKV], la[LA_LN1], W(CLP_R_QKV_W), W(CLP_R_QKV_B), N,
				      C, st->dq, 1));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_QKV, la[LA_QKV], la[LA_LN1], N));
		break;
	case CLP_PRESET_LLAMA:
		CLP_TRY(clp_nn_rmsnorm_forward(ctx, la[LA_LN1], la[LA_LN1_RSTD], x, W(CLP_R_LN1_W),
					       N, C, eps));
		CLP_TRY(stage_linear_fwd(st, la[LA_QKV], la[LA_LN1], W(CLP_R_QKV_W), none, N, C,
				      st->dq, 0));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_QKV, la[LA_QKV], la[LA_LN1], N));
		CLP_TRY(clp_nn_rope_forward(ctx, la[LA_QKV], st->dq, st->rope, st->B, st->T, st->H,
					    st->hd));
		CLP_TRY(clp_nn_rope_forward(ctx, OFF(la[LA_QKV], k_off(st)), st->dq, st->rope,
					    st->B, st->T, st->KVH, st->hd));
		break;
	case CLP_PRESET_BERT:
		CLP_TRY(stage_linear_fwd(st, la[LA_QKV], x, W(CLP_R_QKV_W), W(CLP_R_QKV_B), N, C,
				      st->dq, 0));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_QKV, la[LA_QKV], x, N));
		break;
	}
	CLP_TRY(clp_nn_attention_forward(ctx, la[LA_ATT], la[LA_LSE], la[LA_QKV],
					 OFF(la[LA_QKV], k_off(st)), OFF(la[LA_QKV], v_off(st)), &a));
	CLP_TRY(stage_linear_fwd(st, tmp, la[LA_ATT], W(CLP_R_ATT_O_W), W(CLP_R_ATT_O_B), N, HD, C,
			      st->cfg.preset == CLP_PRESET_GPT2));
	CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_ATT_O, tmp, la[LA_ATT], N));
	CLP_TRY(stage_dropout(st, tmp, N * C, mb, layer, 0, 0, none));
	switch (st->cfg.preset) {
	case CLP_PRESET_GPT2: /* the residual and LayerNorm in one launch (issue 30) */
		CLP_TRY(clp_nn_residual_layernorm_forward(ctx, la[LA_XMID], la[LA_LN2],
							  la[LA_LN2_MEAN], la[LA_LN2_RSTD], x, tmp,
							  W(CLP_R_LN2_W), W(CLP_R_LN2_B), N, C, eps));
		CLP_TRY(mlp_up(st, la, blk, la[LA_LN2], CLP_NN_GELU_TANH, 1));
		CLP_TRY(stage_linear_fwd(st, tmp, la[LA_ACT], W(CLP_R_PROJ_W), W(CLP_R_PROJ_B), N, F,
				      C, 1));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_PROJ, tmp, la[LA_ACT], N));
		CLP_TRY(stage_dropout(st, tmp, N * C, mb, layer, 1, 0, none));
		return clp_nn_residual_forward(ctx, xo, la[LA_XMID], tmp, N * C);
	case CLP_PRESET_LLAMA:
		CLP_TRY(clp_nn_residual_forward(ctx, la[LA_XMID], x, tmp, N * C));
		CLP_TRY(clp_nn_rmsnorm_forward(ctx, la[LA_LN2], la[LA_LN2_RSTD], la[LA_XMID],
					       W(CLP_R_LN2_W), N, C, eps));
		CLP_TRY(stage_linear_fwd(st, la[LA_FC], la[LA_LN2], W(CLP_R_FC_W), none, N, C, 2 * F,
				      0));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_FC, la[LA_FC], la[LA_LN2], N));
		CLP_TRY(clp_nn_swiglu_forward(ctx, la[LA_ACT], la[LA_FC], OFF(la[LA_FC], F), 2 * F,
					      N, F));
		CLP_TRY(stage_linear_fwd(st, tmp, la[LA_ACT], W(CLP_R_PROJ_W), none, N, F, C, 0));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_PROJ, tmp, la[LA_ACT], N));
		CLP_TRY(stage_dropout(st, tmp, N * C, mb, layer, 1, 0, none));
		return clp_nn_residual_forward(ctx, xo, la[LA_XMID], tmp, N * C);
	case CLP_PRESET_BERT:
		CLP_TRY(clp_nn_residual_layernorm_forward(ctx, la[LA_RES1], la[LA_XMID],
							  la[LA_LN1_MEAN], la[LA_LN1_RSTD], x, tmp,
							  W(CLP_R_LN1_W), W(CLP_R_LN1_B), N, C, eps));
		CLP_TRY(mlp_up(st, la, blk, la[LA_XMID], CLP_NN_GELU_ERF, 0));
		CLP_TRY(stage_linear_fwd(st, tmp, la[LA_ACT], W(CLP_R_PROJ_W), W(CLP_R_PROJ_B), N, F,
				      C, 0));
		CLP_TRY(stage_lora_fwd(st, blk, CLP_LIN_PROJ, tmp, la[LA_ACT], N));
		CLP_TRY(stage_dropout(st, tmp, N * C, mb, layer, 1, 0, none));
		return clp_nn_residual_layernorm_forward(ctx, la[LA_RES2], xo, la[LA_LN2_MEAN],
							 la[LA_LN2_RSTD], la[LA_XMID], tmp,
							 W(CLP_R_LN2_W), W(CLP_R_LN2_B), N, C, eps);
	}
#undef W
	return CLP_OK;
}

clp_status stage_head_forward(clp_stage *st, struct slot *s, float inv_count)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C;
	int blk = st->cfg.n_layer + 1;
	clp_buf x = s->x[st->nl], w;
	float eps = st->cfg.norm_eps;

#define W(role) stage_unit(st, CLP_ST_VALUE, role, blk)
	switch (st->cfg.preset) {
	case CLP_PRESET_GPT2:
		CLP_TRY(clp_nn_layernorm_forward(ctx, s->sa[SA_LNF], s->sa[SA_LNF_MEAN],
						 s->sa[SA_LNF_RSTD], x, W(CLP_R_LNF_W),
						 W(CLP_R_LNF_B), N, C, eps));
		w = stage_unit(st, CLP_ST_VALUE, CLP_R_TOK_EMB, blk);
		break;
	case CLP_PRESET_LLAMA:
		CLP_TRY(clp_nn_rmsnorm_forward(ctx, s->sa[SA_LNF], s->sa[SA_LNF_RSTD], x,
					       W(CLP_R_LNF_W), N, C, eps));
		w = st->cfg.tied ? stage_unit(st, CLP_ST_VALUE, CLP_R_TOK_EMB, blk) : W(CLP_R_HEAD_W);
		break;
	default: /* bert: transform (dense, GELU, LayerNorm), then the tied decoder with a bias */
		CLP_TRY(stage_linear_fwd(st, s->sa[SA_HEAD_D], x, W(CLP_R_HEAD_DENSE_W),
				      W(CLP_R_HEAD_DENSE_B), N, C, C, 0));
		CLP_TRY(clp_nn_gelu_forward(ctx, s->sa[SA_HEAD_G], s->sa[SA_HEAD_D], N * C,
					    CLP_NN_GELU_ERF));
		CLP_TRY(clp_nn_layernorm_forward(ctx, s->sa[SA_LNF], s->sa[SA_LNF_MEAN],
						 s->sa[SA_LNF_RSTD], s->sa[SA_HEAD_G],
						 W(CLP_R_HEAD_LN_W), W(CLP_R_HEAD_LN_B), N, C, eps));
		w = stage_unit(st, CLP_ST_VALUE, CLP_R_TOK_EMB, blk);
		break;
	}
	CLP_TRY(clp_nn_xent_forward(ctx, s->sa[SA_LOSSES], s->sa[SA_XLSE], s->sa[SA_LNF], w,
				    W(CLP_R_HEAD_BIAS), s->sa[SA_TARGETS], N, C, st->V, 0));
#undef W
	return clp_nn_xent_mean(ctx, s->sa[SA_LOSS], s->sa[SA_LOSSES], N, inv_count);
}

clp_status clp_stage_logits(clp_stage *st, int slot, size_t row0, size_t rows, clp_buf logits)
{
	int blk = st->cfg.n_layer + 1;
	clp_buf h, w, bias;

	if (!st->has_head || slot < 0 || slot >= st->nslots || row0 + rows > st->N)
		return clp_error(CLP_ERR_INVALID, "stage logits: rows %zu..%zu of slot %d (head "
				 "stage: %s)", row0, row0 + rows, slot, st->has_head ? "yes" : "no");
	h = clp_buf_plus(st->slots[slot].sa[SA_LNF], row0 * st->C);
	w = st->cfg.preset == CLP_PRESET_LLAMA && !st->cfg.tied
		    ? stage_unit(st, CLP_ST_VALUE, CLP_R_HEAD_W, blk)
		    : stage_unit(st, CLP_ST_VALUE, CLP_R_TOK_EMB, blk);
	/* the logits are fp32 (a GEMM's C from 16-bit A and B); the bias added to them is the
	 * fp32 master (a bias shares its output's type; bert only) */
	bias = stage_unit(st, logits.dt == st->vt ? CLP_ST_VALUE : CLP_ST_PARAM, CLP_R_HEAD_BIAS,
			  blk);
	return stage_linear_fwd(st, logits, h, w, bias, rows, st->C, st->V, 0);
}
