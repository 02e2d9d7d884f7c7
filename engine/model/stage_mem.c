/* Device memory of a stage, computed as clp_stage_create allocates it (engine/model/stage.c):
 * parameters, gradients and AdamW moments from the parameter table, one activation slot per
 * micro-batch in flight, the backward temporaries and the misc tables, and with recomputation
 * one layer's activations shared by all slots. tests/plan/test_plan_mem.c holds this against
 * real stages' allocations, so a change to the stage's layout shows there. */
#include <string.h>

#include "engine/model/linear.h"
#include "engine/model/stage_mem.h"

size_t clp_model_lora_work(const clp_model_config *m, size_t N)
{
	size_t imax = 0;

	if (m->lora_r <= 0)
		return 1;
	for (int l = 0; m->lora_dropout > 0 && l < CLP_LIN_COUNT; l++)
		if (m->lora_mask & 1u << l) {
			clp_stage_linear_info in;

			clp_model_linear_get(m, (clp_stage_linear)l, &in);
			imax = in.I > imax ? in.I : imax;
		}
	return 2 * N * (size_t)m->lora_r + N * imax;
}

clp_status clp_model_stage_mem(const clp_model_config *m, int first, int last, size_t B,
			      size_t T, int split, int recompute, clp_model_mem *out)
{
	return clp_model_stage_mem_prec(m, first, last, B, T, split, recompute, CLP_F32, out);
}

clp_status clp_model_stage_mem_prec(const clp_model_config *m, int first, int last, size_t B,
				   size_t T, int split, int recompute, clp_dtype precision,
				   clp_model_mem *out)
{
	return clp_model_stage_mem_frozen(m, first, last, B, T, split, recompute, precision, NULL,
					  NULL, out);
}

int clp_model_lora_base(const void *model_config, const clp_tensor_desc *d)
{
	const clp_model_config *c = model_config;

	return c->lora_r > 0 && !(d->role >= CLP_R_LORA_A && d->role <= CLP_R_LORA_LAST);
}

/* The elements of the units with a tensor not frozen (stage.c's apply_frozen). */
static size_t trained_numel(const clp_param_table *t, clp_model_frozen_fn frozen,
			    const void *user)
{
	size_t n = 0;

	for (int i = 0; i < t->ntensors;) { /* a unit's tensors follow each other */
		int u = t->tensors[i].unit, trained = 0;

		for (; i < t->ntensors && t->tensors[i].unit == u; i++)
			trained |= !frozen || !frozen(user, &t->tensors[i]);
		n += trained ? t->units[u].numel : 0;
	}
	return n;
}

clp_status clp_model_stage_mem_frozen(const clp_model_config *m, int first, int last, size_t B,
				     size_t T, int split, int recompute, clp_dtype precision,
				     clp_model_frozen_fn frozen, const void *user,
				     clp_model_mem *out)
{
	clp_model_config c = *m;
	clp_param_table tab;
	size_t N = B * T, C, H, KVH, hd, F, V, dq, dfc, nl, la = 0, rla, sa, tmp, misc;
	size_t vs = clp_dtype_size(precision), lav, laf, sav, saf;
	int bert, llama, emb, head, L, tied_grad;

	memset(out, 0, sizeof(*out));
	CLP_TRY(clp_model_config_resolve(&c));
	L = c.n_layer;
	if (first < 0 || last < first || last > L + 1)
		return clp_error(CLP_ERR_INVALID, "stage memory: blocks %d..%d of a model of %d "
				 "blocks", first, last, L + 2);
	CLP_TRY(clp_param_table_build(&c, first, last, &tab));
	if ((unsigned)precision >= CLP_DTYPE_COUNT)
		return clp_error(CLP_ERR_INVALID, "stage memory: unknown precision %d",
				 (int)precision);
	out->param_bytes = (int64_t)tab.numel * 4;
	out->grad_bytes = (int64_t)trained_numel(&tab, frozen, user) * 4;
	out->copy_bytes = precision == CLP_F32 ? 0 : (int64_t)(tab.numel * vs);
	out->opt_bytes = 2 * out->grad_bytes;
	/* the head's share of a tied embedding's gradient, kept apart on a stage holding both
	 * ends: only when the embedding trains */
	tied_grad = first == 0 && last == c.n_layer + 1 && c.tied &&
		    (!frozen || !frozen(user, &tab.tensors[0]));
	clp_param_table_free(&tab);

	C = (size_t)c.d_model, H = (size_t)c.n_head, KVH = (size_t)c.n_kv_head, hd = C / H;
	F = (size_t)c.d_ff, V = (size_t)c.vocab;
	{
		/* every term below is at most a small multiple of (layers + 2) x (N + D + ctx) x D
		 * elements, D the widest dimension: bounded in double first, so that the sizes the
		 * flags allow (d_ff up to 2^22, batch x seq up to 2^40) cannot wrap the sums */
		double D = (double)(F > C ? F : C) * 3 + (double)V, nb = (double)(last - first + 3);

		if (nb * ((double)N + D + c.ctx) * D * 4 * 64 > 0x1p63)
			return clp_error(CLP_ERR_NOMEM, "stage memory: blocks %d..%d of this model "
					 "(model.d_model = %d, model.d_ff = %d, model.vocab = %d) at "
					 "batch %zu x %zu tokens need more than 2^57 bytes a device",
					 first, last, c.d_model, c.d_ff, c.vocab, B, T);
	}
	bert = c.preset == CLP_PRESET_BERT, llama = c.preset == CLP_PRESET_LLAMA;
	dq = H * hd + 2 * KVH * hd;
	dfc = llama ? 2 * F : F;
	emb = first == 0, head = last == L + 1;
	{
		int lo = first < 1 ? 1 : first, hi = last > L ? L : last;

		nl = hi >= lo ? (size_t)(hi - lo + 1) : 0;
	}
	/* one layer's activations (stage.c's la_size, LA_LN1 .. LA_RES2) in bytes: values (lav
	 * elements, in the precision) and statistics (laf, fp32); then the split backward's
	 * output gradients (LA_DY_*, fp32) */
	lav = N * C + N * dq + N * H * hd + (bert ? N * C : 0) + N * C + (bert ? 0 : N * C) +
	      N * dfc + N * F + (bert ? N * C : 0);
	laf = 2 * N + B * H * T + 2 * N;
	rla = lav * vs + laf * 4;
	if (!recompute)
		la = rla;
	if (split)
		la += (N * dq + N * C + N * dfc + N * C) * 4;
	/* per-slot stage activations (SA_*): ids, embedding and head state (values), statistics
	 * and losses */
	sav = (bert && emb ? N * C : 0) + (bert && head ? 2 * N * C : 0) + (head ? N * C : 0);
	saf = 3 * N + 2 * N + 2 * N + 2 * N + 1;
	sa = sav * vs + saf * 4;
	out->act_bytes = (int64_t)((nl + 1) * N * C * vs + nl * la + sa);
	out->out_bytes = (int64_t)(N * C * vs);
	tmp = 3 * N * C + N * dq + N * H * hd + N * dfc + N * F + N * C;
	misc = 4 + (llama ? (size_t)c.ctx * (hd / 2) * 2 : 1) + (tied_grad ? V * C : 1) +
	       clp_model_lora_work(&c, N); /* LoRA's work (stage_lora.c) */
	/* the gradient message buffer of a 16-bit stage (4 bytes in fp32) */
	out->work_bytes = (int64_t)((tmp + misc) * 4 + (precision == CLP_F32 ? 4 : N * C * vs) +
				    (recompute ? rla : 0));
	/* K-FAC: per linear a factor A (inputs) and a factor B per output part, each with an
	 * active and a next inverse (engine/optim/kfac.c) */
	{
		size_t qkv_a = C, o_a = H * hd, fc_a = C, proj_a = F;
		size_t bsq = llama || bert ? H * hd * H * hd + 2 * KVH * hd * KVH * hd : dq * dq;
		size_t bsfc = llama ? 2 * F * F : dfc * dfc;
		size_t per = qkv_a * qkv_a + bsq + o_a * o_a + C * C + fc_a * fc_a + bsfc +
			     proj_a * proj_a + C * C;

		size_t maxd = F > C ? F : C, maxw = dfc * C > dq * C ? dfc * C : dq * C;

		/* factors, active and next inverses; and the optimizer's work matrices once */
		out->kfac_bytes = nl ? (int64_t)((nl * per * 3 + maxd * maxd + 2 * maxw) * 4) : 0;
	}
	return CLP_OK;
}

/* The LM head's vocabulary chunk: as cl/nn_xent.c's chunk_cols (vchunk 0). */
static size_t xent_chunk(size_t N, size_t V)
{
	size_t vc = (4u << 20) / (N ? N : 1) / 64 * 64;

	return vc < 64 ? (V < 64 ? V : 64) : vc < V ? vc : V;
}

int64_t clp_model_kept_bytes(const clp_model_pack_shape *p, int ta, size_t n, size_t k)
{
	size_t nr = p->nr > 0 ? (size_t)p->nr : 0;
	size_t ch = p->kch > 0 && (ta || !p->direct_a) ? (size_t)p->kch : k, bytes = 0;

	if (!nr || !n || !k)
		return 0;
	for (size_t k0 = 0; k0 < k; k0 += ch) /* one kept set per K chunk, as pack_b's keys */
		bytes += (n + nr - 1) / nr * nr * (k - k0 < ch ? k - k0 : ch) * 4 + 4;
	return (int64_t)bytes;
}

clp_status clp_model_stage_pack_mem(const clp_model_config *m, int first, int last, size_t B,
				    size_t T, int backward, const clp_model_pack_shape *t,
				    int64_t *kept, int64_t *transient)
{
	clp_model_config c = *m;
	size_t N = B * T, C, V;
	int64_t k = 0, tr = 0;
	int L;

	*kept = *transient = 0;
	CLP_TRY(clp_model_config_resolve(&c));
	L = c.n_layer;
	if (first < 0 || last < first || last > L + 1)
		return clp_error(CLP_ERR_INVALID, "stage packs: blocks %d..%d of a model of %d "
				 "blocks", first, last, L + 2);
	C = (size_t)c.d_model, V = (size_t)c.vocab;
	for (int b = first < 1 ? 1 : first; b <= last && b <= L; b++)
		for (int l = 0; l < CLP_LIN_COUNT; l++) { /* stage_linear_fwd and linear_bwd */
			clp_stage_linear_info in;

			clp_model_linear_get(&c, (clp_stage_linear)l, &in);
			k += clp_model_kept_bytes(t, 0, in.O, in.I);
			if (backward)
				k += clp_model_kept_bytes(t, 0, in.I, in.O);
		}
	if (last == L + 1) {
		size_t vc = xent_chunk(N, V);

		if (c.preset == CLP_PRESET_BERT) /* the head transform's dense C x C */
			k += clp_model_kept_bytes(t, 0, C, C) * (backward ? 2 : 1);
		for (size_t c0 = 0; c0 < V; c0 += vc) { /* cl/nn_xent.c's chunks */
			size_t cw = V - c0 < vc ? V - c0 : vc;

			k += clp_model_kept_bytes(t, 0, cw, C);
			if (backward)
				k += clp_model_kept_bytes(t, 0, C, cw);
		}
		if (backward) /* dW of each chunk: dl' h, h held for the loss backward */
			tr = clp_model_kept_bytes(t, 1, C, N);
	}
	*kept = k;
	*transient = tr;
	return CLP_OK;
}
