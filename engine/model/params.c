/* The parameter table of a stage: Hugging Face names, shapes and roles, grouped into fused units
 * that lie contiguous in memory. */
#include "engine/model/model.h"
#include "engine/model/linear.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name index, so that looking up every tensor of a model is O(n log n), not O(n^2) (a model of
 * 10,000 layers has 120,000 tensors). */
struct clp_param_name {
	const char *name; /* into tensors[index] */
	int index;
};

static int by_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct clp_param_name *)a)->name,
		      ((const struct clp_param_name *)b)->name);
}

struct builder {
	clp_param_table *t;
	int cap_t, cap_u;
	clp_status err;
};

static void start_unit(struct builder *b, const char *name, int block, clp_role role)
{
	clp_param_table *t = b->t;
	clp_param_unit *u;

	if (b->err)
		return;
	if (t->nunits == b->cap_u) {
		int cap = b->cap_u ? 2 * b->cap_u : 64;
		clp_param_unit *nu = realloc(t->units, (size_t)cap * sizeof(*nu));

		if (!nu) {
			b->err = clp_error(CLP_ERR_NOMEM, "out of host memory for the parameter table");
			return;
		}
		t->units = nu;
		b->cap_u = cap;
	}
	u = &t->units[t->nunits++];
	memset(u, 0, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->block = block;
	u->role = role;
}

/* Add a tensor to the current unit. */
static void add(struct builder *b, const char *name, size_t r, size_t c, int decay)
{
	clp_param_table *t = b->t;
	clp_param_unit *u;
	clp_tensor_desc *d;

	if (b->err)
		return;
	if (t->ntensors == b->cap_t) {
		int cap = b->cap_t ? 2 * b->cap_t : 64;
		clp_tensor_desc *nt = realloc(t->tensors, (size_t)cap * sizeof(*nt));

		if (!nt) {
			b->err = clp_error(CLP_ERR_NOMEM, "out of host memory for the parameter table");
			return;
		}
		t->tensors = nt;
		b->cap_t = cap;
	}
	u = &t->units[t->nunits - 1];
	d = &t->tensors[t->ntensors++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->ndim = c ? 2 : 1;
	d->shape[0] = r;
	d->shape[1] = c;
	d->numel = c ? r * c : r;
	d->decay = decay;
	d->block = u->block;
	d->role = u->role;
	d->unit = t->nunits - 1;
	d->offset = u->numel;
	u->numel += d->numel;
	t->numel += d->numel;
}

/* A unit of one tensor. */
static void one(struct builder *b, const char *name, int block, clp_role role, size_t r, size_t c,
		int decay)
{
	start_unit(b, name, block, role);
	add(b, name, r, c, decay);
}

static void embedding(struct builder *b, const clp_model_config *c)
{
	size_t C = (size_t)c->d_model, V = (size_t)c->vocab, T = (size_t)c->ctx;

	switch (c->preset) {
	case CLP_PRESET_GPT2:
		one(b, "wte.weight", 0, CLP_R_TOK_EMB, V, C, 1);
		one(b, "wpe.weight", 0, CLP_R_POS_EMB, T, C, 1);
		break;
	case CLP_PRESET_LLAMA:
		one(b, "model.embed_tokens.weight", 0, CLP_R_TOK_EMB, V, C, 1);
		break;
	case CLP_PRESET_BERT:
		one(b, "bert.embeddings.word_embeddings.weight", 0, CLP_R_TOK_EMB, V, C, 1);
		one(b, "bert.embeddings.position_embeddings.weight", 0, CLP_R_POS_EMB, T, C, 1);
		one(b, "bert.embeddings.token_type_embeddings.weight", 0, CLP_R_TYPE_EMB,
		    (size_t)c->n_types, C, 1);
		one(b, "bert.embeddings.LayerNorm.weight", 0, CLP_R_EMB_LN_W, C, 0, 0);
		one(b, "bert.embeddings.LayerNorm.bias", 0, CLP_R_EMB_LN_B, C, 0, 0);
		break;
	}
}

/* LoRA's A (r, I) and B (O, r) for each linear of the mask, named after the linear's weight
 * unit ("h.0.attn.c_attn.lora_A.weight", "model.layers.0.self_attn.qkv_proj.lora_B.weight"). */
static void lora(struct builder *b, const clp_model_config *c, int blk, const int *unit_of)
{
	for (int l = 0; l < CLP_LIN_COUNT; l++) {
		clp_stage_linear_info in;
		char base[CLP_MAX_NAME], n[CLP_MAX_NAME + 32];
		size_t len;

		if (!(c->lora_mask & 1u << l) || c->lora_r <= 0 || b->err || unit_of[l] < 0)
			continue;
		clp_model_linear_get(c, (clp_stage_linear)l, &in);
		snprintf(base, sizeof(base), "%s", b->t->units[unit_of[l]].name);
		len = strlen(base);
		if (len > 7 && !strcmp(base + len - 7, ".weight"))
			base[len - 7] = '\0';
		snprintf(n, sizeof(n), "%s.lora_A.weight", base);
		one(b, n, blk, (clp_role)(CLP_R_LORA_A + 2 * l), (size_t)c->lora_r, in.I, 1);
		snprintf(n, sizeof(n), "%s.lora_B.weight", base);
		one(b, n, blk, (clp_role)(CLP_R_LORA_B + 2 * l), in.O, (size_t)c->lora_r, 1);
	}
}

static void layer_base(struct builder *b, const clp_model_config *c, int i);

static void layer(struct builder *b, const clp_model_config *c, int i)
{
	static const clp_role w[CLP_LIN_COUNT] = {CLP_R_QKV_W, CLP_R_ATT_O_W, CLP_R_FC_W,
						  CLP_R_PROJ_W};
	int first = b->t->nunits, unit_of[CLP_LIN_COUNT];

	layer_base(b, c, i);
	for (int l = 0; l < CLP_LIN_COUNT; l++) {
		unit_of[l] = -1;
		for (int u = first; !b->err && u < b->t->nunits; u++)
			if (b->t->units[u].role == w[l])
				unit_of[l] = u;
	}
	lora(b, c, i + 1, unit_of);
}

static void layer_base(struct builder *b, const clp_model_config *c, int i)
{
	size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, hd = C / (size_t)c->n_head;
	size_t KV = (size_t)c->n_kv_head * hd;
	int blk = i + 1;
	char p[40], n[CLP_MAX_NAME + 48];

#define NAME(suffix) (snprintf(n, sizeof(n), "%s%s", p, suffix), n)
	switch (c->preset) {
	case CLP_PRESET_GPT2:
		snprintf(p, sizeof(p), "h.%d.", i);
		one(b, NAME("ln_1.weight"), blk, CLP_R_LN1_W, C, 0, 0);
		one(b, NAME("ln_1.bias"), blk, CLP_R_LN1_B, C, 0, 0);
		one(b, NAME("attn.c_attn.weight"), blk, CLP_R_QKV_W, C, 3 * C, 1);
		one(b, NAME("attn.c_attn.bias"), blk, CLP_R_QKV_B, 3 * C, 0, 0);
		one(b, NAME("attn.c_proj.weight"), blk, CLP_R_ATT_O_W, C, C, 1);
		one(b, NAME("attn.c_proj.bias"), blk, CLP_R_ATT_O_B, C, 0, 0);
		one(b, NAME("ln_2.weight"), blk, CLP_R_LN2_W, C, 0, 0);
		one(b, NAME("ln_2.bias"), blk, CLP_R_LN2_B, C, 0, 0);
		one(b, NAME("mlp.c_fc.weight"), blk, CLP_R_FC_W, C, F, 1);
		one(b, NAME("mlp.c_fc.bias"), blk, CLP_R_FC_B, F, 0, 0);
		one(b, NAME("mlp.c_proj.weight"), blk, CLP_R_PROJ_W, F, C, 1);
		one(b, NAME("mlp.c_proj.bias"), blk, CLP_R_PROJ_B, C, 0, 0);
		break;
	case CLP_PRESET_LLAMA:
		snprintf(p, sizeof(p), "model.layers.%d.", i);
		one(b, NAME("input_layernorm.weight"), blk, CLP_R_LN1_W, C, 0, 0);
		start_unit(b, NAME("self_attn.qkv_proj.weight"), blk, CLP_R_QKV_W);
		add(b, NAME("self_attn.q_proj.weight"), C, C, 1);
		add(b, NAME("self_attn.k_proj.weight"), KV, C, 1);
		add(b, NAME("self_attn.v_proj.weight"), KV, C, 1);
		one(b, NAME("self_attn.o_proj.weight"), blk, CLP_R_ATT_O_W, C, C, 1);
		one(b, NAME("post_attention_layernorm.weight"), blk, CLP_R_LN2_W, C, 0, 0);
		start_unit(b, NAME("mlp.gate_up_proj.weight"), blk, CLP_R_FC_W);
		add(b, NAME("mlp.gate_proj.weight"), F, C, 1);
		add(b, NAME("mlp.up_proj.weight"), F, C, 1);
		one(b, NAME("mlp.down_proj.weight"), blk, CLP_R_PROJ_W, C, F, 1);
		break;
	case CLP_PRESET_BERT:
		snprintf(p, sizeof(p), "bert.encoder.layer.%d.", i);
		start_unit(b, NAME("attention.self.qkv.weight"), blk, CLP_R_QKV_W);
		add(b, NAME("attention.self.query.weight"), C, C, 1);
		add(b, NAME("attention.self.key.weight"), C, C, 1);
		add(b, NAME("attention.self.value.weight"), C, C, 1);
		start_unit(b, NAME("attention.self.qkv.bias"), blk, CLP_R_QKV_B);
		add(b, NAME("attention.self.query.bias"), C, 0, 0);
		add(b, NAME("attention.self.key.bias"), C, 0, 0);
		add(b, NAME("attention.self.value.bias"), C, 0, 0);
		one(b, NAME("attention.output.dense.weight"), blk, CLP_R_ATT_O_W, C, C, 1);
		one(b, NAME("attention.output.dense.bias"), blk, CLP_R_ATT_O_B, C, 0, 0);
		one(b, NAME("attention.output.LayerNorm.weight"), blk, CLP_R_LN1_W, C, 0, 0);
		one(b, NAME("attention.output.LayerNorm.bias"), blk, CLP_R_LN1_B, C, 0, 0);
		one(b, NAME("intermediate.dense.weight"), blk, CLP_R_FC_W, F, C, 1);
		one(b, NAME("intermediate.dense.bias"), blk, CLP_R_FC_B, F, 0, 0);
		one(b, NAME("output.dense.weight"), blk, CLP_R_PROJ_W, C, F, 1);
		one(b, NAME("output.dense.bias"), blk, CLP_R_PROJ_B, C, 0, 0);
		one(b, NAME("output.LayerNorm.weight"), blk, CLP_R_LN2_W, C, 0, 0);
		one(b, NAME("output.LayerNorm.bias"), blk, CLP_R_LN2_B, C, 0, 0);
		break;
	}
#undef NAME
}

static void head(struct builder *b, const clp_model_config *c, int has_embedding)
{
	size_t C = (size_t)c->d_model, V = (size_t)c->vocab;
	int blk = c->n_layer + 1;

	switch (c->preset) {
	case CLP_PRESET_GPT2:
		one(b, "ln_f.weight", blk, CLP_R_LNF_W, C, 0, 0);
		one(b, "ln_f.bias", blk, CLP_R_LNF_B, C, 0, 0);
		if (!has_embedding)
			one(b, "wte.weight", blk, CLP_R_TOK_EMB, V, C, 1);
		break;
	case CLP_PRESET_LLAMA:
		one(b, "model.norm.weight", blk, CLP_R_LNF_W, C, 0, 0);
		if (!c->tied)
			one(b, "lm_head.weight", blk, CLP_R_HEAD_W, V, C, 1);
		else if (!has_embedding)
			one(b, "model.embed_tokens.weight", blk, CLP_R_TOK_EMB, V, C, 1);
		break;
	case CLP_PRESET_BERT:
		one(b, "cls.predictions.transform.dense.weight", blk, CLP_R_HEAD_DENSE_W, C, C, 1);
		one(b, "cls.predictions.transform.dense.bias", blk, CLP_R_HEAD_DENSE_B, C, 0, 0);
		one(b, "cls.predictions.transform.LayerNorm.weight", blk, CLP_R_HEAD_LN_W, C, 0, 0);
		one(b, "cls.predictions.transform.LayerNorm.bias", blk, CLP_R_HEAD_LN_B, C, 0, 0);
		one(b, "cls.predictions.bias", blk, CLP_R_HEAD_BIAS, V, 0, 0);
		if (!has_embedding)
			one(b, "bert.embeddings.word_embeddings.weight", blk, CLP_R_TOK_EMB, V, C, 1);
		break;
	}
}

clp_status clp_param_table_build(const clp_model_config *c, int first, int last,
				 clp_param_table *t)
{
	struct builder b = {t, 0, 0, CLP_OK};
	int nb = clp_model_nblocks(c), span;

	memset(t, 0, sizeof(*t));
	if (first < 0 || last >= nb || first > last)
		return clp_error(CLP_ERR_INVALID, "blocks %d..%d: a %d-layer model has blocks 0..%d",
				 first, last, c->n_layer, nb - 1);
	t->first_block = first;
	t->last_block = last;
	for (int blk = first; blk <= last; blk++) {
		if (blk == 0)
			embedding(&b, c);
		else if (blk == nb - 1)
			head(&b, c, first == 0);
		else
			layer(&b, c, blk - 1);
	}
	span = last - first + 1;
	t->by_role = malloc((size_t)span * CLP_R_COUNT * sizeof(int));
	t->by_name = malloc(((size_t)t->ntensors + 1) * sizeof(*t->by_name));
	if (!b.err && (!t->by_role || !t->by_name))
		b.err = clp_error(CLP_ERR_NOMEM, "out of host memory for the parameter table");
	if (b.err) {
		clp_param_table_free(t);
		return b.err;
	}
	for (int i = 0; i < span * CLP_R_COUNT; i++)
		t->by_role[i] = -1;
	for (int u = 0; u < t->nunits; u++)
		t->by_role[(t->units[u].block - first) * CLP_R_COUNT + t->units[u].role] = u;
	for (int i = 0; i < t->ntensors; i++)
		t->by_name[i] = (struct clp_param_name){t->tensors[i].name, i};
	qsort(t->by_name, (size_t)t->ntensors, sizeof(*t->by_name), by_name_cmp);
	return CLP_OK;
}

void clp_param_table_free(clp_param_table *t)
{
	free(t->tensors);
	free(t->units);
	free(t->by_role);
	free(t->by_name);
	memset(t, 0, sizeof(*t));
}

int clp_param_unit_of(const clp_param_table *t, clp_role role, int block)
{
	if (block < t->first_block || block > t->last_block || (unsigned)role >= CLP_R_COUNT)
		return -1;
	return t->by_role[(block - t->first_block) * CLP_R_COUNT + role];
}

int clp_param_find(const clp_param_table *t, const char *name)
{
	struct clp_param_name key = {name, -1};
	const struct clp_param_name *hit;

	if (!t->by_name || !t->ntensors)
		return -1;
	hit = bsearch(&key, t->by_name, (size_t)t->ntensors, sizeof(key), by_name_cmp);
	return hit ? hit->index : -1;
}
