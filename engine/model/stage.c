/* A stage's memory, parameters and optimizer; forward and backward live in stage_fwd.c and
 * stage_bwd.c. */
#include "engine/model/stage_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/convert.h"
#include "cl/gemm.h"
#include "cl/ops.h"
#include "cl/base/rng.h"
#include "engine/model/stage_mem.h"

static const char *const kind_names[5] = {"params", "grads", "adam_m", "adam_v",
					   "param values"};

clp_buf stage_unit(const clp_stage *st, clp_stage_what w, clp_role role, int block)
{
	int u = clp_param_unit_of(&st->tab, role, block);
	clp_buf none = CLP_BUF_NONE;

	/* the tied embedding: the head uses block 0's table when the stage holds it */
	if (u < 0 && role == CLP_R_TOK_EMB)
		u = clp_param_unit_of(&st->tab, role, st->has_emb ? 0 : st->cfg.n_layer + 1);
	return u < 0 ? none : st->units[w][u];
}

static clp_status alloc_params(clp_stage *st)
{
	int nu = st->tab.nunits;
	const char **names = calloc((size_t)nu, sizeof(*names));
	size_t *bytes = calloc((size_t)nu, sizeof(*bytes));
	clp_status s = CLP_OK;

	if (!names || !bytes) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory for the stage");
		goto out;
	}
	for (int u = 0; u < nu; u++)
		names[u] = st->tab.units[u].name;
	for (int k = 0; k <= CLP_ST_VALUE && s == CLP_OK; k++) {
		st->units[k] = calloc((size_t)nu, sizeof(clp_buf));
		if (!st->units[k]) {
			s = clp_error(CLP_ERR_NOMEM, "out of host memory for the stage");
			break;
		}
		/* gradients and moments: none for a unit all of whose tensors are frozen */
		for (int u = 0; u < nu; u++)
			bytes[u] = k == CLP_ST_PARAM || st->trained[u]
					   ? st->tab.units[u].numel * sizeof(float) : 0;
		if (k == CLP_ST_VALUE) { /* the copy forward and backward read */
			if (st->vt == CLP_F32) {
				memcpy(st->units[k], st->units[CLP_ST_PARAM], (size_t)nu * sizeof(clp_buf));
				break;
			}
			for (int u = 0; u < nu; u++)
				bytes[u] = st->tab.units[u].numel * clp_dtype_size(st->vt);
		}
		s = clp_cl_block_create(st->ctx, kind_names[k], nu, names, bytes, &st->blk[k]);
		for (int u = 0; s == CLP_OK && u < nu; u++)
			st->units[k][u] = bytes[u] ? clp_buf_view_as(clp_cl_block_view(st->blk[k], u),
								     k == CLP_ST_VALUE ? st->vt
										       : CLP_F32)
						   : (clp_buf)CLP_BUF_NONE;
	}
out:
	free(names);
	free(bytes);
	return s;
}

/* Lay out one slot's activations as one block of views. */
static clp_status alloc_slot(clp_stage *st, struct slot *sl, int index)
{
	size_t N = st->N, C = st->C;
	size_t la_size[LA_COUNT] = {
		[LA_LN1] = N * C, [LA_LN1_MEAN] = N, [LA_LN1_RSTD] = N,
		[LA_QKV] = N * st->dq, [LA_ATT] = N * st->H * st->hd, [LA_LSE] = st->B * st->H * st->T,
		[LA_RES1] = st->cfg.preset == CLP_PRESET_BERT ? N * C : 0,
		[LA_XMID] = N * C,
		[LA_LN2] = st->cfg.preset == CLP_PRESET_BERT ? 0 : N * C, [LA_LN2_MEAN] = N,
		[LA_LN2_RSTD] = N, [LA_FC] = N * st->dfc, [LA_ACT] = N * st->F,
		[LA_RES2] = st->cfg.preset == CLP_PRESET_BERT ? N * C : 0,
		[LA_DY_QKV] = st->split ? N * st->dq : 0, [LA_DY_O] = st->split ? N * C : 0,
		[LA_DY_FC] = st->split ? N * st->dfc : 0, [LA_DY_PROJ] = st->split ? N * C : 0,
	};
	int bert = st->cfg.preset == CLP_PRESET_BERT;
	size_t sa_size[SA_COUNT] = {
		[SA_TOKENS] = N, [SA_TYPES] = N, [SA_TARGETS] = N,
		[SA_EMB] = bert && st->has_emb ? N * C : 0, [SA_EMB_MEAN] = N, [SA_EMB_RSTD] = N,
		[SA_HEAD_D] = bert && st->has_head ? N * C : 0,
		[SA_HEAD_G] = bert && st->has_head ? N * C : 0,
		[SA_LNF] = st->has_head ? N * C : 0, [SA_LNF_MEAN] = N, [SA_LNF_RSTD] = N,
		[SA_XLSE] = N, [SA_LOSSES] = N, [SA_LOSS] = 1,
	};
	int nv = (st->nl + 1) + st->nl * LA_COUNT + SA_COUNT, v = 0;
	size_t la_slot[LA_COUNT], vs = clp_dtype_size(st->vt);

	/* with recomputation a slot keeps only the split backward's output gradients; the rest
	 * of a layer's activations live once, in st->rla, and are rebuilt layer by layer */
	for (int a = 0; a < LA_COUNT; a++)
		la_slot[a] = st->recompute && a < LA_DY_QKV ? 0 : la_size[a];
	/* room for the recomputed layer's LA_COUNT views too (more than nv on a head-only stage) */
	const char **names = calloc((size_t)(nv > LA_COUNT ? nv : LA_COUNT), sizeof(*names));
	size_t *bytes = calloc((size_t)(nv > LA_COUNT ? nv : LA_COUNT), sizeof(*bytes));
	char label[64];
	clp_status s = CLP_OK;

	sl->x = calloc((size_t)st->nl + 1, sizeof(clp_buf));
	sl->la = calloc((size_t)st->nl + 1, sizeof(*sl->la));
	sl->tokens = calloc(N, sizeof(int32_t));
	sl->types = calloc(N, sizeof(int32_t));
	if (!names || !bytes || !sl->x || !sl->la || !sl->tokens || !sl->types) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory for activations");
		goto out;
	}
	for (int i = 0; i <= st->nl; i++) {
		names[v] = "residual";
		bytes[v++] = N * C * vs;
	}
	for (int l = 0; l < st->nl; l++)
		for (int a = 0; a < LA_COUNT; a++) {
			names[v] = "layer activation";
			bytes[v++] = la_slot[a] * clp_dtype_size(stage_la_type(st, a));
		}
	for (int a = 0; a < SA_COUNT; a++) {
		names[v] = "stage activation";
		bytes[v++] = sa_size[a] * clp_dtype_size(stage_sa_type(st, a));
	}
	snprintf(label, sizeof(label), "activations of slot %d", index);
	s = clp_cl_block_create(st->ctx, label, nv, names, bytes, &sl->mem);
	if (s != CLP_OK)
		goto out;
	v = 0;
	for (int i = 0; i <= st->nl; i++)
		sl->x[i] = clp_buf_view_as(clp_cl_block_view(sl->mem, v++), st->vt);
	for (int l = 0; l < st->nl; l++)
		for (int a = 0; a < LA_COUNT; a++) {
			sl->la[l][a] = clp_buf_view_as(clp_cl_block_view(sl->mem, v++),
						       stage_la_type(st, a));
			if (st->recompute && a < LA_DY_QKV)
				sl->la[l][a] = st->rla[a];
		}
	if (st->recompute && !st->rmem) {
		const char *rn[LA_COUNT];

		for (int a = 0; a < LA_COUNT; a++) {
			rn[a] = "recomputed activation";
			bytes[a] = a < LA_DY_QKV ? la_size[a] * clp_dtype_size(stage_la_type(st, a))
						 : 0;
		}
		s = clp_cl_block_create(st->ctx, "recomputed layer", LA_COUNT, rn, bytes, &st->rmem);
		for (int a = 0; s == CLP_OK && a < LA_COUNT; a++)
			st->rla[a] = clp_buf_view_as(clp_cl_block_view(st->rmem, a),
						     stage_la_type(st, a));
		for (int l = 0; s == CLP_OK && l < st->nl; l++)
			for (int a = 0; a < LA_DY_QKV; a++)
				sl->la[l][a] = st->rla[a];
	}
	for (int a = 0; a < SA_COUNT; a++)
		sl->sa[a] = clp_buf_view_as(clp_cl_block_view(sl->mem, v++), stage_sa_type(st, a));
out:
	free(names);
	free(bytes);
	return s;
}

static clp_status alloc_tmp(clp_stage *st)
{
	size_t N = st->N, C = st->C;
	size_t sz[TV_COUNT] = {
		[TV_DRES] = N * C, [TV_DA] = N * C, [TV_TMP] = N * C, [TV_DQKV] = N * st->dq,
		[TV_DATT] = N * st->H * st->hd, [TV_DFC] = N * st->dfc, [TV_DACT] = N * st->F,
		[TV_DLN] = N * C,
	};
	static const char *const names[TV_COUNT] = {"dres", "da", "tmp", "dqkv", "datt", "dfc",
						     "dact", "dln"};
	size_t bytes[TV_COUNT];

	for (int i = 0; i < TV_COUNT; i++)
		bytes[i] = sz[i] * sizeof(float);
	CLP_TRY(clp_cl_block_create(st->ctx, "backward temporaries", TV_COUNT, names, bytes,
				    &st->tmp));
	for (int i = 0; i < TV_COUNT; i++)
		st->tv[i] = clp_buf_view(clp_cl_block_view(st->tmp, i));
	/* the forward's temporary is a value: the same memory (sized for fp32), typed vt */
	st->ftmp = clp_buf_view_as(clp_cl_block_view(st->tmp, TV_TMP), st->vt);
	return CLP_OK;
}

static int holds_tied_pair(const clp_stage *st)
{
	return st->has_emb && st->has_head && st->cfg.tied;
}

/* ... and trains it: the head's share of its gradient is kept apart (tied_grad). */
static int trains_tied_pair(const clp_stage *st)
{
	return holds_tied_pair(st) && stage_unit(st, CLP_ST_GRAD, CLP_R_TOK_EMB, 0).mem;
}

static clp_status alloc_misc(clp_stage *st)
{
	const char *names[5] = {"grad stats", "rope table", "tied head gradient",
				"gradient message", "lora work"};
	size_t half = st->hd / 2;
	size_t bytes[5] = {4 * sizeof(float), st->cfg.preset == CLP_PRESET_LLAMA
						      ? (size_t)st->cfg.ctx * half * 2 * sizeof(float)
						      : 4,
			   trains_tied_pair(st) ? st->V * st->C * sizeof(float) : 4,
			   st->vt != CLP_F32 ? st->N * st->C * clp_dtype_size(st->vt) : 4,
			   clp_model_lora_work(&st->cfg, st->N) * sizeof(float)};
	float *tab;
	clp_status s;

	CLP_TRY(clp_cl_block_create(st->ctx, "stage misc", 5, names, bytes, &st->misc));
	st->lora_u = clp_buf_view(clp_cl_block_view(st->misc, 4));
	st->lora_g = clp_buf_plus(st->lora_u, st->N * (size_t)st->cfg.lora_r);
	st->lora_t = clp_buf_plus(st->lora_g, st->N * (size_t)st->cfg.lora_r);
	/* the same memory typed as a value: drop(x) */
	st->lora_x = clp_buf_typed(st->lora_t.mem, st->lora_t.off * 4 / clp_dtype_size(st->vt),
				   st->vt);
	st->stats = clp_buf_view(clp_cl_block_view(st->misc, 0));
	st->rope = clp_buf_view(clp_cl_block_view(st->misc, 1));
	st->tied_grad = trains_tied_pair(st) ? clp_buf_view(clp_cl_block_view(st->misc, 2))
					     : (clp_buf)CLP_BUF_NONE;
	st->gwire = st->vt != CLP_F32 ? clp_buf_view_as(clp_cl_block_view(st->misc, 3), st->vt)
				      : st->tv[TV_DRES];
	if (st->cfg.preset != CLP_PRESET_LLAMA)
		return CLP_OK;
	tab = malloc(bytes[1]);
	if (!tab)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the rope table");
	clp_nn_rope_table(tab, (size_t)st->cfg.ctx, st->hd, st->cfg.rope_theta);
	s = clp_cl_write(st->ctx, st->rope.mem, st->rope.off * 4, bytes[1], tab);
	free(tab);
	return s;
}

static clp_status map_global(clp_stage *st)
{
	clp_param_table full;

	CLP_TRY(clp_param_table_build(&st->cfg, 0, clp_model_nblocks(&st->cfg) - 1, &full));
	st->global_index = calloc((size_t)st->tab.ntensors, sizeof(int));
	if (!st->global_index) {
		clp_param_table_free(&full);
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the stage");
	}
	for (int i = 0; i < st->tab.ntensors; i++)
		st->global_index[i] = clp_param_find(&full, st->tab.tensors[i].name);
	clp_param_table_free(&full);
	return CLP_OK;
}

/* The GEMM's kept packs of the weights (cl/gemm.h): the value buffers are held from creation to
 * free, and every change of the weights (an update, a write, the start of a step) marks them
 * stale, so each weight is packed once per step per way it is read. */
enum { PACKS_HOLD, PACKS_STALE, PACKS_RELEASE };
static void weight_packs(clp_stage *st, int what)
{
	const clp_buf *v = st->units[CLP_ST_VALUE];

	for (int u = 0; v && u < st->tab.nunits; u++) {
		if (!v[u].mem || (u > 0 && v[u].mem == v[u - 1].mem))
			continue;
		if (what == PACKS_HOLD)
			(void)clp_cl_gemm_hold(st->ctx, v[u].mem);
		else if (what == PACKS_STALE)
			clp_cl_gemm_stale(st->ctx, v[u].mem);
		else
			clp_cl_gemm_release(st->ctx, v[u].mem);
	}
}

clp_status clp_stage_create(clp_stage **out, clp_cl_ctx *ctx, const clp_model_config *cfg,
			    int first_block, int last_block, const clp_stage_opts *o)
{
	clp_stage *st;
	clp_status s;

	*out = NULL;
	if (o->B < 1 || o->T < 1 || o->slots < 1)
		return clp_error(CLP_ERR_INVALID, "stage: batch %zu x %zu with %d slots: all must "
				 "be positive", o->B, o->T, o->slots);
	if ((unsigned)o->precision >= CLP_DTYPE_COUNT)
		return clp_error(CLP_ERR_INVALID, "stage: unknown precision %d", (int)o->precision);
	if (o->T > (size_t)cfg->ctx)
		return clp_error(CLP_ERR_INVALID, "stage: sequence length %zu is over the model's "
				 "context (model.ctx = %d)", o->T, cfg->ctx);
	st = calloc(1, sizeof(*st));
	if (!st)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the stage");
	st->ctx = ctx;
	st->cfg = *cfg;
	s = clp_model_config_resolve(&st->cfg);
	if (s == CLP_OK)
		s = clp_param_table_build(&st->cfg, first_block, last_block, &st->tab);
	if (s != CLP_OK) {
		free(st);
		return s;
	}
	st->first = first_block;
	st->last = last_block;
	st->has_emb = first_block == 0;
	st->has_head = last_block == clp_model_nblocks(&st->cfg) - 1;
	/* layers held: blocks max(first,1)..min(last,L) */
	{
		int lo = first_block < 1 ? 1 : first_block;
		int hi = last_block > st->cfg.n_layer ? st->cfg.n_layer : last_block;

		st->l0 = lo - 1;
		st->nl = hi >= lo ? hi - lo + 1 : 0;
	}
	st->B = o->B;
	st->T = o->T;
	st->N = o->B * o->T;
	st->C = (size_t)st->cfg.d_model;
	st->H = (size_t)st->cfg.n_head;
	st->KVH = (size_t)st->cfg.n_kv_head;
	st->hd = st->C / st->H;
	st->F = (size_t)st->cfg.d_ff;
	st->V = (size_t)st->cfg.vocab;
	st->dq = st->H * st->hd + 2 * st->KVH * st->hd;
	st->dfc = st->cfg.preset == CLP_PRESET_LLAMA ? 2 * st->F : st->F;
	st->nslots = o->slots;
	st->split = o->split;
	if (st->cfg.lora_r > 0 && o->split)
		s = clp_error(CLP_ERR_UNSUPPORTED, "LoRA adapters with a split backward (zbh1): not "
			      "implemented; use another schedule");
	st->recompute = o->recompute;
	st->vt = o->precision;
	st->slots = calloc((size_t)o->slots, sizeof(*st->slots));
	if (!st->slots)
		s = clp_error(CLP_ERR_NOMEM, "out of host memory for the stage");
	if (s == CLP_OK)
		s = map_global(st);
	if (s == CLP_OK)
		s = stage_apply_frozen(st, o->frozen);
	if (s == CLP_OK)
		s = alloc_params(st);
	if (s == CLP_OK)
		weight_packs(st, PACKS_HOLD);
	for (int i = 0; s == CLP_OK && i < o->slots; i++)
		s = alloc_slot(st, &st->slots[i], i);
	if (s == CLP_OK)
		s = alloc_tmp(st);
	if (s == CLP_OK)
		s = alloc_misc(st);
	if (s != CLP_OK) {
		clp_stage_free(st);
		return s;
	}
	*out = st;
	return CLP_OK;
}

void clp_stage_free(clp_stage *st)
{
	if (!st)
		return;
	clp_cl_finish(st->ctx);
	for (int i = 0; st->slots && i < st->nslots; i++) {
		struct slot *sl = &st->slots[i];

		clp_cl_block_free(sl->mem);
		clp_nn_index_free(sl->tok_idx);
		clp_nn_index_free(sl->type_idx);
		free(sl->x);
		free(sl->la);
		free(sl->tokens);
		free(sl->types);
	}
	free(st->slots);
	weight_packs(st, PACKS_RELEASE);
	for (int k = 0; k <= CLP_ST_VALUE; k++) {
		clp_cl_block_free(st->blk[k]);
		free(st->units[k]);
	}
	clp_cl_block_free(st->tmp);
	clp_cl_block_free(st->misc);
	clp_cl_block_free(st->rmem);
	free(st->global_index);
	free(st->skip);
	free(st->frozen);
	free(st->trained);
	clp_param_table_free(&st->tab);
	free(st);
}

const clp_param_table *clp_stage_table(const clp_stage *st)
{
	return &st->tab;
}

int clp_stage_has_embedding(const clp_stage *st)
{
	return st->has_emb;
}

int clp_stage_has_head(const clp_stage *st)
{
	return st->has_head;
}

clp_buf clp_stage_unit(const clp_stage *st, clp_stage_what w, int unit)
{
	return st->units[w][unit];
}

clp_buf clp_stage_tensor(const clp_stage *st, clp_stage_what w, int tensor)
{
	const clp_tensor_desc *d = &st->tab.tensors[tensor];

	return clp_buf_plus(st->units[w][d->unit], d->offset);
}

clp_dtype clp_stage_precision(const clp_stage *st)
{
	return st->vt;
}

clp_status clp_stage_read(clp_stage *st, clp_stage_what w, int tensor, float *host)
{
	clp_buf b = clp_stage_tensor(st, w, tensor);
	size_t n = st->tab.tensors[tensor].numel;
	uint16_t *h16;
	clp_status s;

	if (!b.mem) { /* a frozen tensor's gradient or moments: none, read as zeros */
		memset(host, 0, n * sizeof(float));
		return CLP_OK;
	}
	if (b.dt == CLP_F32)
		return clp_cl_read(st->ctx, b.mem, b.off * 4, n * 4, host);
	if (!(h16 = malloc(n * 2 + 2)))
		return clp_error(CLP_ERR_NOMEM, "out of host memory reading %s",
				 st->tab.tensors[tensor].name);
	s = clp_cl_read(st->ctx, b.mem, b.off * 2, n * 2, h16);
	if (s == CLP_OK)
		clp_dtype_unpack(b.dt, host, h16, n);
	free(h16);
	return s;
}

/* Round tensor's master into its value copy (a 16-bit stage). */
static clp_status refresh_tensor(clp_stage *st, int tensor)
{
	if (st->vt == CLP_F32)
		return CLP_OK;
	return clp_cl_convert(st->ctx, clp_stage_tensor(st, CLP_ST_VALUE, tensor), st->vt,
			      clp_stage_tensor(st, CLP_ST_PARAM, tensor), CLP_F32,
			      st->tab.tensors[tensor].numel);
}

clp_status clp_stage_refresh_values(clp_stage *st)
{
	weight_packs(st, PACKS_STALE); /* every writer of the masters calls this (stage.h) */
	if (st->vt == CLP_F32)
		return CLP_OK;
	for (int u = 0; u < st->tab.nunits; u++)
		CLP_TRY(clp_cl_convert(st->ctx, st->units[CLP_ST_VALUE][u], st->vt,
				       st->units[CLP_ST_PARAM][u], CLP_F32, st->tab.units[u].numel));
	return CLP_OK;
}

clp_status clp_stage_write(clp_stage *st, clp_stage_what w, int tensor, const float *host)
{
	clp_buf b = clp_stage_tensor(st, w, tensor);

	if (w == CLP_ST_VALUE && st->vt != CLP_F32)
		return clp_error(CLP_ERR_INVALID, "stage: %s: the %s value copy is written through "
				 "its master (CLP_ST_PARAM)", st->tab.tensors[tensor].name,
				 clp_dtype_name(st->vt));
	if (!b.mem) { /* a frozen tensor has no gradient or moments: only zeros fit */
		for (size_t i = 0; i < st->tab.tensors[tensor].numel; i++)
			if (host[i] != 0.0f)
				return clp_error(CLP_ERR_STATE, "stage: %s is frozen: it has no %s",
						 st->tab.tensors[tensor].name,
						 w == CLP_ST_GRAD ? "gradient" : "optimizer state");
		return CLP_OK;
	}
	CLP_TRY(clp_cl_write(st->ctx, b.mem, b.off * 4, st->tab.tensors[tensor].numel * 4, host));
	if (w == CLP_ST_PARAM || w == CLP_ST_VALUE)
		weight_packs(st, PACKS_STALE);
	return w == CLP_ST_PARAM || w == CLP_ST_VALUE ? refresh_tensor(st, tensor) : CLP_OK;
}

static int residual_projection(clp_role r)
{
	return r == CLP_R_ATT_O_W || r == CLP_R_PROJ_W;
}

clp_status clp_stage_init_params(clp_stage *st, uint64_t seed)
{
	float std_res = 0.02f / sqrtf(2.0f * (float)st->cfg.n_layer);

	for (int i = 0; i < st->tab.ntensors; i++) {
		const clp_tensor_desc *d = &st->tab.tensors[i];
		clp_buf p = clp_stage_tensor(st, CLP_ST_PARAM, i);
		clp_rng_stream rs;

		if (d->ndim == 1) {
			int is_weight = strstr(d->name, "bias") == NULL;

			/* norm weights 1, biases 0 */
			CLP_TRY(clp_cl_fill(st->ctx, p, is_weight ? 1.0f : 0.0f, d->numel));
			continue;
		}
		/* keyed by the tensor's index in the whole model: its low 16 bits as the layer,
		 * the rest as the micro-batch (0 below 65,536 tensors, the keys of old) */
		CLP_TRY(clp_rng_stream_init(&rs, seed, 0, (uint32_t)st->global_index[i] >> 16,
					    (uint32_t)st->global_index[i] & 0xffff, CLP_RNG_INIT));
		if (d->role >= CLP_R_LORA_A && d->role <= CLP_R_LORA_LAST &&
		    (d->role - CLP_R_LORA_A) % 2) { /* LoRA's B: 0, the adapter starts as none */
			CLP_TRY(clp_cl_fill(st->ctx, p, 0.0f, d->numel));
			continue;
		}
		CLP_TRY(clp_nn_rng_normal(st->ctx, p, d->numel, &rs, 0, 0.0f,
					  d->role >= CLP_R_LORA_A && d->role <= CLP_R_LORA_LAST
					  ? 1.0f / sqrtf(3.0f * (float)d->shape[1]) /* kaiming */
					  : residual_projection(d->role) ? std_res : 0.02f));
	}
	for (int k = CLP_ST_GRAD; k <= CLP_ST_ADAM_V; k++)
		for (int u = 0; u < st->tab.nunits; u++)
			if (st->units[k][u].mem)
				CLP_TRY(clp_cl_fill(st->ctx, st->units[k][u], 0.0f,
						    st->tab.units[u].numel));
	return clp_stage_refresh_values(st);
}

clp_buf clp_stage_act_in(const clp_stage *st, int slot)
{
	return st->slots[slot].x[0];
}

clp_buf clp_stage_act_out(const clp_stage *st, int slot)
{
	return st->slots[slot].x[st->nl];
}

clp_buf clp_stage_grad_in(const clp_stage *st)
{
	return st->tv[TV_DRES];
}

clp_buf clp_stage_grad_wire(const clp_stage *st)
{
	return st->gwire;
}

clp_status clp_stage_grad_pack(clp_stage *st)
{
	if (st->vt == CLP_F32)
		return CLP_OK;
	return clp_cl_convert(st->ctx, st->gwire, st->vt, st->tv[TV_DRES], CLP_F32, st->N * st->C);
}

clp_status clp_stage_grad_unpack(clp_stage *st)
{
	if (st->vt == CLP_F32)
		return CLP_OK;
	return clp_cl_convert(st->ctx, st->tv[TV_DRES], CLP_F32, st->gwire, st->vt, st->N * st->C);
}

clp_buf clp_stage_losses(const clp_stage *st, int slot)
{
	return st->slots[slot].sa[SA_LOSSES];
}

clp_buf clp_stage_loss(const clp_stage *st, int slot)
{
	return st->slots[slot].sa[SA_LOSS];
}

clp_buf clp_stage_stats(const clp_stage *st)
{
	return st->stats;
}

static clp_status check_slot(const clp_stage *st, const clp_stage_mb *mb)
{
	if (mb->slot < 0 || mb->slot >= st->nslots)
		return clp_error(CLP_ERR_INVALID, "stage: slot %d out of range (%d slots)", mb->slot,
				 st->nslots);
	return CLP_OK;
}

clp_status clp_stage_forward(clp_stage *st, const clp_stage_mb *mb, float inv_count)
{
	struct slot *s;

	CLP_TRY(check_slot(st, mb));
	s = &st->slots[mb->slot];
	st->mb_now = mb;
	if (st->has_emb)
		CLP_TRY(stage_embedding_forward(st, s, mb));
	if (st->has_head && mb->targets)
		CLP_TRY(clp_cl_write(st->ctx, s->sa[SA_TARGETS].mem, s->sa[SA_TARGETS].off * 4,
				     st->N * 4, mb->targets));
	for (int l = 0; l < st->nl; l++) {
		if (st->skip && st->skip[l])
			CLP_TRY(clp_cl_copy(st->ctx, s->x[l + 1], s->x[l], st->N * st->C));
		else
			CLP_TRY(stage_layer_forward(st, s, l, mb));
	}
	if (st->has_head)
		CLP_TRY(stage_head_forward(st, s, inv_count));
	return CLP_OK;
}

/* A 16-bit stage rounds the residual gradient to its precision at every block boundary, the
 * places where a pipeline may cut the model and send it as a 16-bit message: a pipelined run
 * then computes what one device does, bit for bit, whatever the split. The rounded gradient
 * stays in the message buffer (clp_stage_grad_wire) for the send. */
static clp_status round_block_grad(clp_stage *st)
{
	if (st->vt == CLP_F32)
		return CLP_OK;
	CLP_TRY(clp_stage_grad_pack(st));
	return clp_stage_grad_unpack(st);
}

clp_status clp_stage_backward(clp_stage *st, const clp_stage_mb *mb, float loss_scale)
{
	struct slot *s;

	CLP_TRY(check_slot(st, mb));
	s = &st->slots[mb->slot];
	st->mb_now = mb;
	if (st->has_head) {
		CLP_TRY(stage_head_backward(st, s, loss_scale));
		CLP_TRY(round_block_grad(st));
	}
	for (int l = st->nl - 1; l >= 0; l--) {
		if (st->skip && st->skip[l])
			continue; /* identity: the gradient passes through */
		if (st->recompute) /* the layer's activations again, from its input */
			CLP_TRY(stage_layer_forward(st, s, l, mb));
		CLP_TRY(stage_layer_backward(st, s, l, mb));
		CLP_TRY(round_block_grad(st));
	}
	if (st->has_emb)
		CLP_TRY(stage_embedding_backward(st, s, mb));
	return CLP_OK;
}

clp_status clp_stage_backward_input(clp_stage *st, const clp_stage_mb *mb, float loss_scale)
{
	clp_status s;

	if (!st->split)
		return clp_error(CLP_ERR_STATE, "stage: split backward on a stage created without "
				 "opts.split");
	st->bw_mode = 1;
	s = clp_stage_backward(st, mb, loss_scale);
	st->bw_mode = 0;
	return s;
}

clp_status clp_stage_backward_weight(clp_stage *st, const clp_stage_mb *mb)
{
	struct slot *s;

	CLP_TRY(check_slot(st, mb));
	if (!st->split)
		return clp_error(CLP_ERR_STATE, "stage: split backward on a stage created without "
				 "opts.split");
	s = &st->slots[mb->slot];
	st->mb_now = mb;
	for (int l = st->nl - 1; l >= 0; l--) {
		if (st->skip && st->skip[l])
			continue;
		if (st->recompute)
			CLP_TRY(stage_layer_forward(st, s, l, mb));
		CLP_TRY(stage_layer_weight_grads(st, s, l));
	}
	return CLP_OK;
}

/* One fill per run of units that follow each other in one buffer of the gradient block (the
 * block holds nothing else, so its alignment gaps may be zeroed too): issue 30. */
clp_status clp_stage_zero_grads(clp_stage *st)
{
	const clp_buf *g = st->units[CLP_ST_GRAD];

	weight_packs(st, PACKS_STALE); /* a step starts with fresh packs, whoever wrote before */
	for (int u = 0, v; u < st->tab.nunits; u = v) {
		size_t end = g[u].off + st->tab.units[u].numel;

		if (!g[u].mem) { /* frozen: no gradient */
			v = u + 1;
			continue;
		}
		for (v = u + 1; v < st->tab.nunits && g[v].mem == g[u].mem && g[v].off >= end; v++)
			end = g[v].off + st->tab.units[v].numel;
		CLP_TRY(clp_cl_fill(st->ctx, g[u], 0.0f, end - g[u].off));
	}
	if (trains_tied_pair(st))
		CLP_TRY(clp_cl_fill(st->ctx, st->tied_grad, 0.0f, st->V * st->C));
	return CLP_OK;
}

clp_buf stage_tied_head_grad(clp_stage *st)
{
	return holds_tied_pair(st) ? st->tied_grad : stage_unit(st, CLP_ST_GRAD, CLP_R_TOK_EMB,
							      st->cfg.n_layer + 1);
}

clp_status clp_stage_fold_tied(clp_stage *st)
{
	clp_buf g = stage_unit(st, CLP_ST_GRAD, CLP_R_TOK_EMB, 0);

	if (!trains_tied_pair(st))
		return CLP_OK;
	CLP_TRY(clp_cl_add(st->ctx, g, g, st->tied_grad, st->V * st->C));
	return clp_cl_fill(st->ctx, st->tied_grad, 0.0f, st->V * st->C); /* once only */
}

clp_status clp_stage_grad_stats(clp_stage *st, clp_buf stats, float max_norm)
{
	int nu = st->tab.nunits, m = 0;
	clp_buf *g = calloc((size_t)nu + 1, sizeof(*g));
	size_t *n = calloc((size_t)nu + 1, sizeof(*n));
	clp_status s;

	if (!g || !n) {
		free(g);
		free(n);
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	}
	for (int u = 0; u < nu; u++)
		if (st->units[CLP_ST_GRAD][u].mem) { /* a frozen unit: no gradient */
			g[m] = st->units[CLP_ST_GRAD][u];
			n[m++] = st->tab.units[u].numel;
		}
	s = clp_nn_grad_stats(st->ctx, stats, g, n, m, max_norm);
	free(g);
	free(n);
	return s;
}

clp_status clp_stage_adamw_scaled(clp_stage *st, const clp_nn_adamw_hp *hp, clp_buf stats,
				  float gscale)
{
	int nt = st->tab.ntensors;
	clp_buf *b = malloc((size_t)nt * 4 * sizeof(*b) + 1);
	size_t *n = malloc((size_t)nt * sizeof(*n) + 1);
	int *decay = malloc((size_t)nt * sizeof(*decay) + 1);
	static const int roles[4] = {CLP_ST_PARAM, CLP_ST_ADAM_M, CLP_ST_ADAM_V, CLP_ST_GRAD};
	int ok = b && n && decay;
	clp_status s = CLP_OK;

	if (ok) { /* every tensor of the stage in one launch (issue 30) */
		const clp_buf *t[4] = {b, b + nt, b + 2 * nt, b + 3 * nt};

		int m = 0;

		for (int i = 0; i < nt; i++) {
			if (clp_stage_frozen(st, i)) /* train.freeze, a LoRA base: not updated */
				continue;
			for (int j = 0; j < 4; j++)
				b[j * nt + m] = clp_stage_tensor(st, roles[j], i);
			n[m] = st->tab.tensors[i].numel;
			decay[m++] = st->tab.tensors[i].decay;
		}
		if (m > 0)
			s = clp_nn_adamw_update_each(st->ctx, t, n, decay, m, hp, stats, gscale);
	}
	free(b);
	free(n);
	free(decay);
	if (!ok)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	CLP_TRY(s);
	/* a skipped (non-finite) step left the masters as they were: the copy is too */
	return clp_stage_refresh_values(st);
}

clp_status clp_stage_adamw(clp_stage *st, const clp_nn_adamw_hp *hp, clp_buf stats)
{
	return clp_stage_adamw_scaled(st, hp, stats, 1.0f);
}

clp_status clp_stage_skip_layers(clp_stage *st, const int *layers, int n)
{
	free(st->skip);
	st->skip = NULL;
	if (n == 0)
		return CLP_OK;
	st->skip = calloc((size_t)st->nl + 1, 1);
	if (!st->skip)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int i = 0; i < n; i++) {
		if (layers[i] < 0 || layers[i] >= st->cfg.n_layer)
			return clp_error(CLP_ERR_INVALID, "skip layer %d: the model has layers 0..%d",
					 layers[i], st->cfg.n_layer - 1);
		if (layers[i] >= st->l0 && layers[i] < st->l0 + st->nl)
			st->skip[layers[i] - st->l0] = 1;
	}
	return CLP_OK;
}
