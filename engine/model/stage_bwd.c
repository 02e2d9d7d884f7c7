/* Backward of the blocks of a stage, in reverse. One residual-gradient buffer (TV_DRES) flows
 * through in place: on entry to a block it holds the gradient of the block's output, on exit
 * that of its input. Parameter gradients accumulate (+=) over the micro-batches of a step. */
#include "engine/model/stage_internal.h"

#include "cl/gemm.h"
#include "cl/ops.h"

#define OFF(b, n) clp_buf_plus((b), (n))
/* parameter / gradient unit of a role in block blk (a local of each function) */
#define W(role) stage_unit(st, CLP_ST_VALUE, role, blk)
#define G(role) stage_unit(st, CLP_ST_GRAD, role, blk)

/* dW += x' dy for y = x W; layouts as stage_linear_fwd. */
static clp_status weight_grad(clp_stage *st, clp_buf dw, clp_buf dy, clp_buf x, size_t N,
			      size_t I, size_t O, int in_out)
{
	if (!dw.mem) /* frozen: no gradient, no product */
		return CLP_OK;
	if (in_out)
		return clp_cl_gemm(st->ctx, CLP_T, CLP_N, I, O, N, 1.0f, x, I, dy, O, 1.0f, dw, O);
	return clp_cl_gemm(st->ctx, CLP_T, CLP_N, O, I, N, 1.0f, dy, O, x, I, 1.0f, dw, I);
}

/* For y = x W (+ b): dx = beta dx + dy W' (skipped when dx.mem is NULL), db += column sums of
 * dy, and dW += x' dy, or, in the input half of a split backward, dy kept in stash for the
 * weight half. A frozen W or b (dw, db with mem NULL) gets no product. Layouts as
 * stage_linear_fwd. */
static clp_status linear_bwd(clp_stage *st, clp_buf dx, float beta, clp_buf dw, clp_buf db,
			     clp_buf dy, clp_buf x, clp_buf w, size_t N, size_t I, size_t O,
			     int in_out, clp_buf stash)
{
	clp_cl_ctx *ctx = st->ctx;

	if (dx.mem)
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, in_out ? CLP_T : CLP_N, N, I, O, 1.0f, dy, O, w,
				    in_out ? O : I, beta, dx, I));
	if (st->bw_mode == 1 && stash.mem) {
		if (dw.mem)
			CLP_TRY(clp_cl_copy(ctx, stash, dy, N * O));
	}
	else
		CLP_TRY(weight_grad(st, dw, dy, x, N, I, O, in_out));
	if (db.mem)
		CLP_TRY(clp_nn_bias_backward(ctx, db, dy, N, O));
	return CLP_OK;
}

/* The gradient entering a residual branch: dy itself, or its dropout-masked copy in TV_TMP. */
static clp_status branch_grad(clp_stage *st, clp_buf dy, const clp_stage_mb *mb, int layer,
			      int site, clp_buf *out)
{
	size_t n = st->N * st->C;

	*out = dy;
	if (st->cfg.dropout <= 0.0f)
		return CLP_OK;
	CLP_TRY(clp_cl_fill(st->ctx, st->tv[TV_TMP], 0.0f, n));
	CLP_TRY(stage_dropout(st, dy, n, mb, layer, site, 1, st->tv[TV_TMP]));
	*out = st->tv[TV_TMP];
	return CLP_OK;
}

static clp_status attention_bwd(clp_stage *st, struct slot *s, int li, clp_buf dout)
{
	clp_buf *la = s->la[li], *tv = st->tv;
	size_t ko = st->H * st->hd, vo = ko + st->KVH * st->hd;
	clp_nn_attn a;

	stage_attn_geometry(st, &a);
	CLP_TRY(clp_cl_fill(st->ctx, tv[TV_DQKV], 0.0f, st->N * st->dq));
	return clp_nn_attention_backward(st->ctx, tv[TV_DQKV], OFF(tv[TV_DQKV], ko),
					 OFF(tv[TV_DQKV], vo), dout, la[LA_QKV],
					 OFF(la[LA_QKV], ko), OFF(la[LA_QKV], vo), la[LA_ATT],
					 la[LA_LSE], &a);
}

static clp_status gpt2_llama_layer_bwd(clp_stage *st, struct slot *s, int li,
				       const clp_stage_mb *mb)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C, F = st->F, HD = st->H * st->hd;
	int blk = st->l0 + li + 1, layer = st->l0 + li, gpt2 = st->cfg.preset == CLP_PRESET_GPT2;
	clp_buf *la = s->la[li], *tv = st->tv, x = s->x[li], dres = tv[TV_DRES], dy;

	/* MLP half: xo = xmid + proj(act(fc(norm2(xmid)))) */
	CLP_TRY(branch_grad(st, dres, mb, layer, 1, &dy));
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_PROJ, dy));
	CLP_TRY(linear_bwd(st, tv[TV_DACT], 0.0f, G(CLP_R_PROJ_W), G(CLP_R_PROJ_B), dy, la[LA_ACT],
			   W(CLP_R_PROJ_W), N, F, C, gpt2, la[LA_DY_PROJ]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_PROJ, tv[TV_DACT], dy, la[LA_ACT], N));
	if (gpt2) { /* overwrites: no fill (issue 30) */
		CLP_TRY(clp_nn_gelu_backward_set(ctx, tv[TV_DFC], tv[TV_DACT], la[LA_FC], N * F,
						 CLP_NN_GELU_TANH));
	} else {
		CLP_TRY(clp_cl_fill(ctx, tv[TV_DFC], 0.0f, N * st->dfc));
		CLP_TRY(clp_nn_swiglu_backward(ctx, tv[TV_DFC], OFF(tv[TV_DFC], F), tv[TV_DACT],
					       la[LA_FC], OFF(la[LA_FC], F), 2 * F, N, F));
	}
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_FC, tv[TV_DFC]));
	CLP_TRY(linear_bwd(st, tv[TV_DLN], 0.0f, G(CLP_R_FC_W), G(CLP_R_FC_B), tv[TV_DFC],
			   la[LA_LN2], W(CLP_R_FC_W), N, C, st->dfc, gpt2, la[LA_DY_FC]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_FC, tv[TV_DLN], tv[TV_DFC], la[LA_LN2], N));
	if (gpt2)
		CLP_TRY(clp_nn_layernorm_backward(ctx, dres, G(CLP_R_LN2_W), G(CLP_R_LN2_B),
						  tv[TV_DLN], la[LA_XMID], W(CLP_R_LN2_W),
						  la[LA_LN2_MEAN], la[LA_LN2_RSTD], N, C));
	else
		CLP_TRY(clp_nn_rmsnorm_backward(ctx, dres, G(CLP_R_LN2_W), tv[TV_DLN], la[LA_XMID],
						W(CLP_R_LN2_W), la[LA_LN2_RSTD], N, C));
	/* attention half: xmid = x + o(attn(qkv(norm1(x)))) */
	CLP_TRY(branch_grad(st, dres, mb, layer, 0, &dy));
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_ATT_O, dy));
	CLP_TRY(linear_bwd(st, tv[TV_DATT], 0.0f, G(CLP_R_ATT_O_W), G(CLP_R_ATT_O_B), dy,
			   la[LA_ATT], W(CLP_R_ATT_O_W), N, HD, C, gpt2, la[LA_DY_O]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_ATT_O, tv[TV_DATT], dy, la[LA_ATT], N));
	CLP_TRY(attention_bwd(st, s, li, tv[TV_DATT]));
	if (!gpt2) {
		CLP_TRY(clp_nn_rope_backward(ctx, tv[TV_DQKV], st->dq, st->rope, st->B, st->T, st->H,
					     st->hd));
		CLP_TRY(clp_nn_rope_backward(ctx, OFF(tv[TV_DQKV], HD), st->dq, st->rope, st->B,
					     st->T, st->KVH, st->hd));
	}
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_QKV, tv[TV_DQKV]));
	CLP_TRY(linear_bwd(st, tv[TV_DLN], 0.0f, G(CLP_R_QKV_W), G(CLP_R_QKV_B), tv[TV_DQKV],
			   la[LA_LN1], W(CLP_R_QKV_W), N, C, st->dq, gpt2, la[LA_DY_QKV]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_QKV, tv[TV_DLN], tv[TV_DQKV], la[LA_LN1], N));
	if (gpt2)
		return clp_nn_layernorm_backward(ctx, dres, G(CLP_R_LN1_W), G(CLP_R_LN1_B),
						 tv[TV_DLN], x, W(CLP_R_LN1_W), la[LA_LN1_MEAN],
						 la[LA_LN1_RSTD], N, C);
	return clp_nn_rmsnorm_backward(ctx, dres, G(CLP_R_LN1_W), tv[TV_DLN], x, W(CLP_R_LN1_W),
				       la[LA_LN1_RSTD], N, C);
}

static clp_status bert_layer_bwd(clp_stage *st, struct slot *s, int li, const clp_stage_mb *mb)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C, F = st->F;
	int blk = st->l0 + li + 1, layer = st->l0 + li;
	clp_buf *la = s->la[li], *tv = st->tv, x = s->x[li], dres = tv[TV_DRES], dy;

	/* xo = LN2(res2), res2 = xmid + proj(gelu(fc(xmid))) */
	CLP_TRY(clp_cl_fill(ctx, tv[TV_DA], 0.0f, N * C));
	CLP_TRY(clp_nn_layernorm_backward(ctx, tv[TV_DA], G(CLP_R_LN2_W), G(CLP_R_LN2_B), dres,
					  la[LA_RES2], W(CLP_R_LN2_W), la[LA_LN2_MEAN],
					  la[LA_LN2_RSTD], N, C));
	CLP_TRY(branch_grad(st, tv[TV_DA], mb, layer, 1, &dy));
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_PROJ, dy));
	CLP_TRY(linear_bwd(st, tv[TV_DACT], 0.0f, G(CLP_R_PROJ_W), G(CLP_R_PROJ_B), dy, la[LA_ACT],
			   W(CLP_R_PROJ_W), N, F, C, 0, la[LA_DY_PROJ]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_PROJ, tv[TV_DACT], dy, la[LA_ACT], N));
	CLP_TRY(clp_nn_gelu_backward_set(ctx, tv[TV_DFC], tv[TV_DACT], la[LA_FC], N * F,
					 CLP_NN_GELU_ERF));
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_FC, tv[TV_DFC]));
	CLP_TRY(linear_bwd(st, tv[TV_DA], 1.0f, G(CLP_R_FC_W), G(CLP_R_FC_B), tv[TV_DFC],
			   la[LA_XMID], W(CLP_R_FC_W), N, C, F, 0, la[LA_DY_FC]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_FC, tv[TV_DA], tv[TV_DFC], la[LA_XMID], N));
	/* xmid = LN1(res1), res1 = x + o(attn(qkv(x))) */
	CLP_TRY(clp_cl_fill(ctx, dres, 0.0f, N * C));
	CLP_TRY(clp_nn_layernorm_backward(ctx, dres, G(CLP_R_LN1_W), G(CLP_R_LN1_B), tv[TV_DA],
					  la[LA_RES1], W(CLP_R_LN1_W), la[LA_LN1_MEAN],
					  la[LA_LN1_RSTD], N, C));
	CLP_TRY(branch_grad(st, dres, mb, layer, 0, &dy));
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_ATT_O, dy));
	CLP_TRY(linear_bwd(st, tv[TV_DATT], 0.0f, G(CLP_R_ATT_O_W), G(CLP_R_ATT_O_B), dy,
			   la[LA_ATT], W(CLP_R_ATT_O_W), N, C, C, 0, la[LA_DY_O]));
	CLP_TRY(stage_lora_bwd(st, blk, CLP_LIN_ATT_O, tv[TV_DATT], dy, la[LA_ATT], N));
	CLP_TRY(attention_bwd(st, s, li, tv[TV_DATT]));
	CLP_TRY(stage_tap(st, mb, li, CLP_LIN_QKV, tv[TV_DQKV]));
	CLP_TRY(linear_bwd(st, dres, 1.0f, G(CLP_R_QKV_W), G(CLP_R_QKV_B), tv[TV_DQKV], x,
			   W(CLP_R_QKV_W), N, C, st->dq, 0, la[LA_DY_QKV]));
	return stage_lora_bwd(st, blk, CLP_LIN_QKV, dres, tv[TV_DQKV], x, N);
}

clp_status stage_layer_backward(clp_stage *st, struct slot *s, int li, const clp_stage_mb *mb)
{
	if (st->cfg.preset == CLP_PRESET_BERT)
		return bert_layer_bwd(st, s, li, mb);
	return gpt2_llama_layer_bwd(st, s, li, mb);
}

clp_status stage_head_backward(clp_stage *st, struct slot *s, float scale)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C;
	int blk = st->cfg.n_layer + 1;
	clp_buf *tv = st->tv, x = s->x[st->nl], dres = tv[TV_DRES], w, dw, none = CLP_BUF_NONE;

	if (st->cfg.preset == CLP_PRESET_LLAMA && !st->cfg.tied) {
		w = W(CLP_R_HEAD_W);
		dw = G(CLP_R_HEAD_W);
	} else {
		w = stage_unit(st, CLP_ST_VALUE, CLP_R_TOK_EMB, blk);
		dw = stage_tied_head_grad(st);
	}
	CLP_TRY(clp_cl_fill(ctx, tv[TV_DLN], 0.0f, N * C));
	CLP_TRY(clp_nn_xent_backward(ctx, tv[TV_DLN], dw, G(CLP_R_HEAD_BIAS), s->sa[SA_LNF], w,
				     W(CLP_R_HEAD_BIAS), s->sa[SA_TARGETS], s->sa[SA_XLSE], scale,
				     N, C, st->V, 0));
	switch (st->cfg.preset) {
	case CLP_PRESET_GPT2:
		CLP_TRY(clp_cl_fill(ctx, dres, 0.0f, N * C));
		return clp_nn_layernorm_backward(ctx, dres, G(CLP_R_LNF_W), G(CLP_R_LNF_B),
						 tv[TV_DLN], x, W(CLP_R_LNF_W), s->sa[SA_LNF_MEAN],
						 s->sa[SA_LNF_RSTD], N, C);
	case CLP_PRESET_LLAMA:
		CLP_TRY(clp_cl_fill(ctx, dres, 0.0f, N * C));
		return clp_nn_rmsnorm_backward(ctx, dres, G(CLP_R_LNF_W), tv[TV_DLN], x,
					       W(CLP_R_LNF_W), s->sa[SA_LNF_RSTD], N, C);
	default:
		CLP_TRY(clp_cl_fill(ctx, tv[TV_DA], 0.0f, N * C));
		CLP_TRY(clp_nn_layernorm_backward(ctx, tv[TV_DA], G(CLP_R_HEAD_LN_W),
						  G(CLP_R_HEAD_LN_B), tv[TV_DLN], s->sa[SA_HEAD_G],
						  W(CLP_R_HEAD_LN_W), s->sa[SA_LNF_MEAN],
						  s->sa[SA_LNF_RSTD], N, C));
		CLP_TRY(clp_nn_gelu_backward_set(ctx, tv[TV_TMP], tv[TV_DA], s->sa[SA_HEAD_D],
						 N * C, CLP_NN_GELU_ERF));
		return linear_bwd(st, dres, 0.0f, G(CLP_R_HEAD_DENSE_W), G(CLP_R_HEAD_DENSE_B),
				  tv[TV_TMP], x, W(CLP_R_HEAD_DENSE_W), N, C, C, 0, none);
	}
}

clp_status stage_embedding_backward(clp_stage *st, struct slot *s, const clp_stage_mb *mb)
{
	clp_cl_ctx *ctx = st->ctx;
	size_t N = st->N, C = st->C;
	int bert = st->cfg.preset == CLP_PRESET_BERT;
	clp_buf dy;

	/* nothing before the embedding: with all its tensors frozen it has nothing to do */
	if (!stage_unit(st, CLP_ST_GRAD, CLP_R_TOK_EMB, 0).mem &&
	    !stage_unit(st, CLP_ST_GRAD, CLP_R_POS_EMB, 0).mem &&
	    !stage_unit(st, CLP_ST_GRAD, CLP_R_TYPE_EMB, 0).mem &&
	    !stage_unit(st, CLP_ST_GRAD, CLP_R_EMB_LN_W, 0).mem &&
	    !stage_unit(st, CLP_ST_GRAD, CLP_R_EMB_LN_B, 0).mem)
		return CLP_OK;
	CLP_TRY(branch_grad(st, st->tv[TV_DRES], mb, st->cfg.n_layer, 2, &dy));
	if (bert) {
		CLP_TRY(clp_cl_fill(ctx, st->tv[TV_DA], 0.0f, N * C));
		CLP_TRY(clp_nn_layernorm_backward(ctx, st->tv[TV_DA],
						  stage_unit(st, CLP_ST_GRAD, CLP_R_EMB_LN_W, 0),
						  stage_unit(st, CLP_ST_GRAD, CLP_R_EMB_LN_B, 0), dy,
						  s->sa[SA_EMB],
						  stage_unit(st, CLP_ST_VALUE, CLP_R_EMB_LN_W, 0),
						  s->sa[SA_EMB_MEAN], s->sa[SA_EMB_RSTD], N, C));
		dy = st->tv[TV_DA];
	}
	return clp_nn_embed_backward(ctx, stage_unit(st, CLP_ST_GRAD, CLP_R_TOK_EMB, 0),
				     stage_unit(st, CLP_ST_GRAD, CLP_R_POS_EMB, 0),
				     stage_unit(st, CLP_ST_GRAD, CLP_R_TYPE_EMB, 0), dy, s->tok_idx,
				     bert ? s->type_idx : NULL, st->B, st->T, C);
}
/* The weight half of a split backward for one layer: dW += x' dy from the kept dy. */
clp_status stage_layer_weight_grads(clp_stage *st, struct slot *s, int li)
{
	size_t N = st->N, C = st->C, F = st->F, HD = st->H * st->hd;
	int blk = st->l0 + li + 1, io = st->cfg.preset == CLP_PRESET_GPT2;
	int bert = st->cfg.preset == CLP_PRESET_BERT;
	clp_buf *la = s->la[li];

	CLP_TRY(weight_grad(st, G(CLP_R_PROJ_W), la[LA_DY_PROJ], la[LA_ACT], N, F, C, io));
	CLP_TRY(weight_grad(st, G(CLP_R_FC_W), la[LA_DY_FC], bert ? la[LA_XMID] : la[LA_LN2], N, C,
			    st->dfc, io));
	CLP_TRY(weight_grad(st, G(CLP_R_ATT_O_W), la[LA_DY_O], la[LA_ATT], N, HD, C, io));
	return weight_grad(st, G(CLP_R_QKV_W), la[LA_DY_QKV], bert ? s->x[li] : la[LA_LN1], N, C,
			   st->dq, io);
}

#undef W
#undef G
