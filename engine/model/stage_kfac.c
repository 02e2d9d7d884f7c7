/* What K-FAC needs from a stage (stage.h, "K-FAC hooks"): the geometry of each linear layer,
 * the inputs the forward saved for it, its weight and bias, and a tap on the output gradients
 * inside the backward. Kept apart from the forward and backward code, which only call stage_tap. */
#include "engine/model/stage_internal.h"

void clp_stage_linear_get(const clp_stage *st, clp_stage_linear lin, clp_stage_linear_info *o)
{
	clp_model_linear_get(&st->cfg, lin, o);
}

void clp_model_kfac_layer(const clp_model_config *m, size_t tokens, int64_t *keep_a,
			  int64_t *keep_b, int *dims, int *nf, int max)
{
	int n = 0;

	*keep_a = *keep_b = 0;
	for (int l = 0; l < CLP_LIN_COUNT; l++) {
		clp_stage_linear_info in;

		clp_model_linear_get(m, (clp_stage_linear)l, &in);
		*keep_a += (int64_t)(tokens * in.I * sizeof(float));
		*keep_b += (int64_t)(tokens * in.O * sizeof(float));
		if (dims && n + 1 + in.nparts <= max) {
			dims[n++] = (int)in.I;
			for (int p = 0; p < in.nparts; p++)
				dims[n++] = (int)in.part[p];
		}
	}
	if (nf)
		*nf = n;
}

void clp_model_linear_get(const clp_model_config *m, clp_stage_linear lin,
			  clp_stage_linear_info *o)
{
	clp_preset p = m->preset;
	size_t C = (size_t)m->d_model, H = (size_t)m->n_head, hd = C / H;
	size_t HD = H * hd, KV = (size_t)m->n_kv_head * hd, F = (size_t)m->d_ff;
	size_t dq = HD + 2 * KV, dfc = p == CLP_PRESET_LLAMA ? 2 * F : F;

	o->in_out = p == CLP_PRESET_GPT2;
	o->nparts = 1;
	o->part[1] = o->part[2] = 0;
	switch (lin) {
	case CLP_LIN_QKV:
		o->I = C;
		o->O = dq;
		o->weight = CLP_R_QKV_W;
		o->bias = p == CLP_PRESET_LLAMA ? CLP_R_COUNT : CLP_R_QKV_B;
		if (p != CLP_PRESET_GPT2) { /* separate q, k, v tensors: three layers, one input */
			o->nparts = 3;
			o->part[0] = HD;
			o->part[1] = o->part[2] = KV;
		}
		break;
	case CLP_LIN_ATT_O:
		o->I = HD;
		o->O = C;
		o->weight = CLP_R_ATT_O_W;
		o->bias = p == CLP_PRESET_LLAMA ? CLP_R_COUNT : CLP_R_ATT_O_B;
		break;
	case CLP_LIN_FC:
		o->I = C;
		o->O = dfc;
		o->weight = CLP_R_FC_W;
		o->bias = p == CLP_PRESET_LLAMA ? CLP_R_COUNT : CLP_R_FC_B;
		if (p == CLP_PRESET_LLAMA) { /* gate and up */
			o->nparts = 2;
			o->part[0] = o->part[1] = F;
		}
		break;
	default:
		o->I = F;
		o->O = C;
		o->weight = CLP_R_PROJ_W;
		o->bias = p == CLP_PRESET_LLAMA ? CLP_R_COUNT : CLP_R_PROJ_B;
		break;
	}
	if (o->nparts == 1)
		o->part[0] = o->O;
}

clp_cl_ctx *clp_stage_ctx(const clp_stage *st)
{
	return st->ctx;
}

int clp_stage_recomputes(const clp_stage *st)
{
	return st->recompute;
}

int clp_stage_model_layers(const clp_stage *st)
{
	return st->cfg.n_layer;
}

int clp_stage_first_layer(const clp_stage *st)
{
	return st->l0;
}

int clp_stage_nlayers(const clp_stage *st)
{
	return st->nl;
}

size_t clp_stage_rows(const clp_stage *st)
{
	return st->N;
}

clp_buf clp_stage_linear_input(const clp_stage *st, int slot, int li, clp_stage_linear lin)
{
	const struct slot *s = &st->slots[slot];
	int bert = st->cfg.preset == CLP_PRESET_BERT;

	switch (lin) {
	case CLP_LIN_QKV: return bert ? s->x[li] : s->la[li][LA_LN1];
	case CLP_LIN_ATT_O: return s->la[li][LA_ATT];
	case CLP_LIN_FC: return s->la[li][bert ? LA_XMID : LA_LN2];
	default: return s->la[li][LA_ACT];
	}
}

clp_buf clp_stage_linear_tensor(const clp_stage *st, clp_stage_what w, int li,
				clp_stage_linear lin, int bias)
{
	clp_stage_linear_info in;
	clp_buf none = CLP_BUF_NONE;

	clp_stage_linear_get(st, lin, &in);
	if (bias && in.bias == CLP_R_COUNT)
		return none;
	return stage_unit(st, w, bias ? in.bias : in.weight, st->l0 + li + 1);
}

void clp_stage_set_tap(clp_stage *st, clp_stage_tap_fn fn, void *user)
{
	st->tap = fn;
	st->tap_user = user;
}
