/* The linear layers of a transformer layer as K-FAC sees them, from a resolved model config
 * alone: no stage, no device (engine/model/linear.c). The planner, the PipeFisher pass and
 * training's PipeFisher start-up size K-FAC's kept inputs with it; stages (stage.h) expose the
 * same geometry per stage. */
#ifndef CLP_MODEL_LINEAR_H
#define CLP_MODEL_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model/model.h"

/* The linear layers of a transformer layer, as K-FAC sees them: one input each. */
typedef enum clp_stage_linear {
	CLP_LIN_QKV,   /* fused Q, K, V (input: the attention's normed input; bert: the residual) */
	CLP_LIN_ATT_O, /* attention output projection */
	CLP_LIN_FC,    /* MLP first layer (llama: gate and up fused) */
	CLP_LIN_PROJ,  /* MLP second layer */
	CLP_LIN_COUNT
} clp_stage_linear;

typedef struct clp_stage_linear_info {
	size_t I, O;        /* inputs, outputs (all parts) */
	int in_out;         /* weight stored (I, O) (GPT-2's Conv1D), else (O, I) */
	int nparts;         /* output parts that are separate layers sharing this input (llama and
			     * bert q, k, v; llama gate, up); 1 otherwise */
	size_t part[3];     /* their widths, in output order */
	clp_role weight, bias; /* bias CLP_R_COUNT: none */
} clp_stage_linear_info;
/* The geometry of linear lin from a resolved model config. */
void clp_model_linear_get(const clp_model_config *m, clp_stage_linear lin,
			  clp_stage_linear_info *out);
/* What K-FAC keeps of one layer for a micro-batch of `tokens` tokens: its linears' inputs (factor
 * A, *keep_a bytes) and output gradients (factor B, *keep_b bytes); and, when dims is given, the
 * dimensions of a layer's factors in the optimizer's order (per linear its A, then its B parts),
 * *nf of them, at most max. One computation for training's PipeFisher start-up and the planner. */
void clp_model_kfac_layer(const clp_model_config *m, size_t tokens, int64_t *keep_a,
			  int64_t *keep_b, int *dims, int *nf, int max);

#endif
