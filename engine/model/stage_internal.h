/* Internals of a stage shared by stage.c (memory, parameters, optimizer) and stage_fwd.c /
 * stage_bwd.c (the blocks' forward and backward). */
#ifndef CLP_MODEL_STAGE_INTERNAL_H
#define CLP_MODEL_STAGE_INTERNAL_H

#include "engine/model/stage.h"

/* Activations one micro-batch keeps for backward, per layer held by the stage. */
enum lact {
	LA_LN1, LA_LN1_MEAN, LA_LN1_RSTD, /* gpt2/llama: norm of x; bert: LN of res1 is xmid */
	LA_QKV, LA_ATT, LA_LSE,
	LA_RES1,  /* bert: x + attention output (input of the first LayerNorm) */
	LA_XMID,  /* input of the MLP half: gpt2/llama x + attn; bert LN1(res1) */
	LA_LN2, LA_LN2_MEAN, LA_LN2_RSTD,
	LA_FC,    /* MLP pre-activation (gpt2/bert F, llama 2F: gate then up) */
	LA_ACT,   /* MLP activation (N,F) */
	LA_RES2,  /* bert: xmid + MLP output */
	/* split backward: output gradients of the four linear layers, kept from B for W */
	LA_DY_QKV, LA_DY_O, LA_DY_FC, LA_DY_PROJ,
	LA_COUNT
};

/* Per-slot activations outside layers. */
enum sact {
	SA_TOKENS, SA_TYPES, SA_TARGETS, /* int32 (N) */
	SA_EMB, SA_EMB_MEAN, SA_EMB_RSTD, /* bert: embedding sum before its LayerNorm */
	SA_HEAD_D, SA_HEAD_G,             /* bert: transform dense output and its GELU */
	SA_LNF, SA_LNF_MEAN, SA_LNF_RSTD, /* final norm (bert: transform LayerNorm) */
	SA_XLSE, SA_LOSSES, SA_LOSS,
	SA_COUNT
};

/* The storage of a slot's tensors: values (activations) in the stage's precision; saved
 * statistics, the split backward's kept output gradients and the ids fp32 (4 bytes). */
static inline clp_dtype stage_la_type(const struct clp_stage *st, int a);
static inline clp_dtype stage_sa_type(const struct clp_stage *st, int a);

/* Stage-wide temporaries (one micro-batch at a time). */
enum tmpv { TV_DRES, TV_DA, TV_TMP, TV_DQKV, TV_DATT, TV_DFC, TV_DACT, TV_DLN, TV_COUNT };

struct slot {
	clp_cl_block *mem;
	clp_buf *x;              /* nlayers + 1 residual streams: x[0] input, x[nl] output */
	clp_buf (*la)[LA_COUNT]; /* per layer */
	clp_buf sa[SA_COUNT];
	int32_t *tokens, *types; /* host copies for the embedding backward indexes */
	clp_nn_index *tok_idx, *type_idx;
	int has_tokens;
};

struct clp_stage {
	clp_cl_ctx *ctx;
	clp_model_config cfg;
	clp_param_table tab;
	int first, last;        /* blocks */
	int has_emb, has_head;
	int l0, nl;             /* first layer index held, number of layers held */
	size_t B, T, N, C, H, KVH, hd, F, V;
	size_t dq;              /* width of the QKV activation */
	size_t dfc;             /* width of the MLP pre-activation */
	clp_dtype vt;           /* storage of values (opts.precision) */
	clp_cl_block *blk[5];   /* param (fp32 masters), grad, adam m, adam v, and in a 16-bit
				   stage the value copy forward and backward read (NULL in fp32) */
	clp_buf *units[5];      /* per kind, per unit (CLP_ST_VALUE: the masters in fp32) */
	int nslots;
	struct slot *slots;
	int split;              /* created for split backward */
	int recompute;          /* layers recomputed in the backward from their inputs */
	unsigned char *skip;    /* per layer held: 1 = identity (partial inference) */
	unsigned char *frozen;  /* per tensor: 1 = not trained (train.freeze); NULL: none */
	unsigned char *trained; /* per unit: 1 = has gradient and moments (opts.frozen) */
	clp_cl_block *rmem;     /* recompute: one layer's activations, shared by all */
	clp_buf rla[LA_COUNT];
	int bw_mode;            /* 0 full backward, 1 input half (B) */
	clp_cl_block *tmp;
	clp_buf tv[TV_COUNT];   /* gradients, fp32 */
	clp_buf ftmp;           /* the forward's temporary: a value, TV_TMP's memory typed vt */
	clp_buf gwire;          /* 16-bit stage: the (N,C) gradient message; else TV_DRES */
	clp_buf lora_u, lora_g; /* LoRA: (N, r) fp32 x A' and dy B (stage_lora.c) */
	clp_buf lora_x, lora_t; /* model.lora_dropout: (N, I) drop(x) (a value), then in the
				 * backward s g A (fp32) in the same memory */
	const clp_stage_mb *mb_now; /* the micro-batch being run: LoRA dropout's streams */
	clp_buf rope;           /* (T, hd/2, 2) cos/sin table (llama) */
	clp_cl_block *misc;
	clp_buf stats;
	clp_buf tied_grad;      /* the head's share of the tied embedding's gradient, kept apart
				   until clp_stage_fold_tied() (stages holding both ends) */
	int *global_index;      /* per tensor: index in the whole model's table (init streams) */
	clp_stage_tap_fn tap;   /* K-FAC: output gradients of the linear layers (stage_kfac.c) */
	void *tap_user;
};

static inline clp_dtype stage_la_type(const struct clp_stage *st, int a)
{
	switch (a) {
	case LA_LN1_MEAN: case LA_LN1_RSTD: case LA_LSE: case LA_LN2_MEAN: case LA_LN2_RSTD:
	case LA_DY_QKV: case LA_DY_O: case LA_DY_FC: case LA_DY_PROJ:
		return CLP_F32;
	default:
		return st->vt;
	}
}

static inline clp_dtype stage_sa_type(const struct clp_stage *st, int a)
{
	switch (a) {
	case SA_EMB: case SA_HEAD_D: case SA_HEAD_G: case SA_LNF:
		return st->vt;
	default:
		return CLP_F32;
	}
}

static inline clp_status stage_tap(clp_stage *st, const clp_stage_mb *mb, int li,
				clp_stage_linear lin, clp_buf dy)
{
	return st->tap ? st->tap(st->tap_user, mb, li, lin, dy) : CLP_OK;
}

/* The unit of (role, block) of kind w, or a buffer with mem NULL. Forward and backward read
 * CLP_ST_VALUE (the 16-bit copy, or the masters in fp32); the optimizer writes CLP_ST_PARAM. */
clp_buf stage_unit(const clp_stage *st, clp_stage_what w, clp_role role, int block);

clp_status stage_linear_fwd(clp_stage *st, clp_buf y, clp_buf x, clp_buf w, clp_buf b, size_t N,
			 size_t I, size_t O, int in_out);
clp_status stage_dropout(clp_stage *st, clp_buf x, size_t n, const clp_stage_mb *mb, int layer,
		      int site, int backward, clp_buf dx);
void stage_attn_geometry(const clp_stage *st, clp_nn_attn *a);

/* stage_frozen.c: st->frozen and st->trained from clp_stage_opts.frozen (before allocation). */
clp_status stage_apply_frozen(clp_stage *st, const unsigned char *frozen);
/* Where the head accumulates the tied embedding's gradient. */
clp_buf stage_tied_head_grad(clp_stage *st);
/* stage_lora.c: after linear lin of block blk, y += s x A' B' (forward); its backward adds the
 * adapter's share to dx (unless dx.mem is NULL) and accumulates dA, dB. No-ops without one. */
clp_status stage_lora_fwd(clp_stage *st, int blk, clp_stage_linear lin, clp_buf y, clp_buf x,
			  size_t N);
clp_status stage_lora_bwd(clp_stage *st, int blk, clp_stage_linear lin, clp_buf dx, clp_buf dy,
			  clp_buf x, size_t N);

clp_status stage_embedding_forward(clp_stage *st, struct slot *s, const clp_stage_mb *mb);
clp_status stage_layer_forward(clp_stage *st, struct slot *s, int li, const clp_stage_mb *mb);
clp_status stage_head_forward(clp_stage *st, struct slot *s, float inv_count);
clp_status stage_head_backward(clp_stage *st, struct slot *s, float scale);
clp_status stage_layer_backward(clp_stage *st, struct slot *s, int li, const clp_stage_mb *mb);
clp_status stage_layer_weight_grads(clp_stage *st, struct slot *s, int li);
clp_status stage_embedding_backward(clp_stage *st, struct slot *s, const clp_stage_mb *mb);

#endif
