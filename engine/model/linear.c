/* The linear layers of a transformer layer from a model config (linear.h): no device. */
#include "engine/model/linear.h"

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
