/* Transformer models: presets (gpt2, llama, bert), their configuration, and the table of
 * parameter tensors under Hugging Face names.
 *
 * A model is a sequence of blocks: block 0 is the embedding, blocks 1..L the layers, block L+1
 * the final norm + head + loss. A stage holds a contiguous range of blocks; nothing assumes the
 * first block sits on rank 0. Parameters of a stage live in one logical block of device memory
 * with named views (see clp_param_table). */
#ifndef CLP_MODEL_H
#define CLP_MODEL_H

#include <stddef.h>

#include "cl/base/status.h"

typedef enum clp_preset { CLP_PRESET_GPT2 = 0, CLP_PRESET_LLAMA, CLP_PRESET_BERT } clp_preset;

typedef struct clp_model_config {
	clp_preset preset;
	int n_layer;
	int d_model;   /* C */
	int n_head;    /* H */
	int n_kv_head; /* KVH, divides H (GQA); = H for gpt2 and bert */
	int d_ff;      /* F */
	int vocab;     /* V, including the specials of the tokenizer */
	int ctx;       /* T_max */
	int n_types;   /* token types (bert) */
	float norm_eps;
	float rope_theta;
	float dropout; /* on residual branches and embeddings; 0 disables */
	int tied;      /* head weight is the token embedding */
	int lora_r;    /* LoRA: rank of the adapters (0: none) on the linears of lora_mask */
	float lora_alpha; /* LoRA: the adapters' output is scaled by lora_alpha / lora_r */
	unsigned lora_mask; /* LoRA: bit l for linear l (clp_stage_linear, linear.h) */
	float lora_dropout; /* LoRA: dropout on the adapters' input, y += s B A drop(x) (PEFT's
			     * lora_dropout); 0 disables (and is 0 without adapters) */
} clp_model_config;

const char *clp_preset_name(clp_preset p);
clp_status clp_preset_parse(const char *name, clp_preset *out);

/* Fill a config with the preset's defaults for fields left 0 (d_ff = 4C for gpt2/bert,
 * 256-rounded 8C/3 for llama; n_kv_head = n_head; eps 1e-5 / 1e-6 / 1e-12; theta 10000; tied
 * for gpt2 and bert) and check it; errors name the field. */
clp_status clp_model_config_resolve(clp_model_config *c);

/* Blocks of a model: 0 embedding, 1..L layers, L+1 head. */
static inline int clp_model_nblocks(const clp_model_config *c)
{
	return c->n_layer + 2;
}

/* What a parameter tensor is for; the forward code finds tensors by (role, layer). */
typedef enum clp_role {
	/* embedding block */
	CLP_R_TOK_EMB, CLP_R_POS_EMB, CLP_R_TYPE_EMB, CLP_R_EMB_LN_W, CLP_R_EMB_LN_B,
	/* layers */
	CLP_R_LN1_W, CLP_R_LN1_B,
	CLP_R_QKV_W, /* gpt2: c_attn (C, 3C) in (in, out) layout; llama/bert: q, k, v rows */
	CLP_R_QKV_B,
	CLP_R_ATT_O_W, CLP_R_ATT_O_B,
	CLP_R_LN2_W, CLP_R_LN2_B,
	CLP_R_FC_W,  /* gpt2 c_fc (C, F) (in, out); llama gate and up rows (2F, C); bert (F, C) */
	CLP_R_FC_B,
	CLP_R_PROJ_W, CLP_R_PROJ_B, /* back to C */
	/* head block */
	CLP_R_LNF_W, CLP_R_LNF_B,
	CLP_R_HEAD_W,                       /* untied head (llama lm_head) */
	CLP_R_HEAD_DENSE_W, CLP_R_HEAD_DENSE_B, /* bert transform */
	CLP_R_HEAD_LN_W, CLP_R_HEAD_LN_B,
	CLP_R_HEAD_BIAS,                    /* bert decoder bias */
	/* LoRA adapters of a layer's linear l (clp_stage_linear): A (r, I) at CLP_R_LORA_A + 2 l,
	 * B (O, r) after it; y += (alpha / r) x A' B' */
	CLP_R_LORA_A, CLP_R_LORA_B,
	CLP_R_LORA_LAST = CLP_R_LORA_A + 7,
	CLP_R_COUNT
} clp_role;

#define CLP_MAX_NAME 96
/* One tensor as it is stored in checkpoints (its Hugging Face name and shape). Several tensors
 * can form one fused unit (llama's q, k, v projections; gate and up) that lies contiguous in
 * memory so one GEMM covers them: unit is the index of the unit, offset the tensor's start in it
 * (elements). */
typedef struct clp_tensor_desc {
	char name[CLP_MAX_NAME];
	int ndim;
	size_t shape[2];
	size_t numel;
	int decay; /* AdamW weight decay: matrices and embeddings yes, norms and biases no */
	int block;
	clp_role role;
	int unit;
	size_t offset;
} clp_tensor_desc;

typedef struct clp_param_unit {
	char name[CLP_MAX_NAME]; /* the first tensor's name, or a fused name */
	size_t numel;
	int block;
	clp_role role;  /* role of the unit as the forward code addresses it */
} clp_param_unit;

typedef struct clp_param_table {
	int ntensors, nunits;
	clp_tensor_desc *tensors;
	clp_param_unit *units;
	size_t numel; /* total elements */
	int first_block, last_block;
	/* unit index by (role, block); -1 if absent */
	int *by_role; /* [(last_block - first_block + 1) * CLP_R_COUNT] */
	struct clp_param_name *by_name; /* [ntensors] sorted by name, for clp_param_find */
} clp_param_table;

/* The tensors of blocks first..last (inclusive) in block order. The tied token embedding
 * appears in the head block too when the head's stage lacks block 0 (so that stage has its own
 * copy; the pipeline all-reduces the two copies' gradients). */
clp_status clp_param_table_build(const clp_model_config *c, int first, int last,
				 clp_param_table *t);
void clp_param_table_free(clp_param_table *t);
/* Unit index of (role, block) or -1. */
int clp_param_unit_of(const clp_param_table *t, clp_role role, int block);
/* Tensor index by Hugging Face name, or -1. */
int clp_param_find(const clp_param_table *t, const char *name);

#endif
