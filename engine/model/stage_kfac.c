/* What K-FAC needs from a stage (stage.h, "K-FAC hooks"): the geometry of each linear layer,
 * the inputs the forward saved for it, its weight and bias, and a tap on the output gradients
 * inside the backward. Kept apart from the forward and backward code, which only call stage_tap. */
#include "engine/model/stage_internal.h"

void clp_stage_linear_get(const clp_stage *st, clp_stage_linear lin, clp_stage_linear_info *o)
{
	clp_model_linear_get(&st->cfg, lin, o);
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
