/* What a run trains, for the planner and the memory model outside a session (session_freeze.c):
 * train.freeze patterns and LoRA's frozen base by tensor, and model.lora_targets as linears. */
#ifndef CLP_TRAIN_FREEZE_H
#define CLP_TRAIN_FREEZE_H

#include "cl/base/status.h"
#include "engine/model/model.h"

/* Is tensor d of model m not trained: a LoRA base (m->lora_r > 0, d not an adapter) or
 * matched by one of the comma-separated name globs of patterns (train.freeze; names as
 * checkpoints store them)? A session also trains what train.init did not find in its file;
 * this cannot know that. */
int clp_train_frozen(const clp_model_config *m, const char *patterns, const clp_tensor_desc *d);
/* model.lora_targets of model m as linears (bit l: clp_stage_linear l; "": all four). */
clp_status clp_train_lora_mask(const clp_model_config *m, const char *targets, unsigned *mask);

#endif
