/* Frozen tensors of a stage (clp_stage_opts.frozen, clp_stage_set_frozen): which tensors the
 * optimizer leaves alone, and which units have a gradient and AdamW moments at all. */
#include "engine/model/stage_internal.h"

#include <stdlib.h>
#include <string.h>

/* opts.frozen: the stage's frozen tensors, and the units that keep a gradient and moments
 * (those with a tensor not frozen: a fused unit trains as one GEMM). */
clp_status stage_apply_frozen(clp_stage *st, const unsigned char *frozen)
{
	st->trained = malloc((size_t)st->tab.nunits + 1);
	if (!st->trained)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the stage");
	memset(st->trained, frozen ? 0 : 1, (size_t)st->tab.nunits + 1);
	for (int i = 0; frozen && i < st->tab.ntensors; i++) {
		int g = st->global_index[i];

		if (g >= 0 && frozen[g])
			CLP_TRY(clp_stage_set_frozen(st, i, 1));
		else
			st->trained[st->tab.tensors[i].unit] = 1;
	}
	return CLP_OK;
}

clp_status clp_stage_set_frozen(clp_stage *st, int tensor, int frozen)
{
	if (tensor < 0 || tensor >= st->tab.ntensors)
		return clp_error(CLP_ERR_INVALID, "freeze: tensor %d of a stage of %d", tensor,
				 st->tab.ntensors);
	if (!frozen && st->trained && !clp_stage_trained(st, tensor))
		return clp_error(CLP_ERR_STATE, "freeze: %s was frozen when its stage was made: it "
				 "has no gradient or optimizer state to train",
				 st->tab.tensors[tensor].name);
	if (!st->frozen && !(st->frozen = calloc((size_t)st->tab.ntensors, 1)))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	st->frozen[tensor] = frozen != 0;
	return CLP_OK;
}

int clp_stage_frozen(const clp_stage *st, int tensor)
{
	return st->frozen && tensor >= 0 && tensor < st->tab.ntensors && st->frozen[tensor];
}

int clp_stage_trained(const clp_stage *st, int tensor)
{
	return tensor >= 0 && tensor < st->tab.ntensors && st->trained &&
	       st->trained[st->tab.tensors[tensor].unit];
}
