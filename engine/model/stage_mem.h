/* The device memory of a stage, computed as clp_stage_create allocates it: the one memory model
 * that the planner, a training session's check before allocation and `clpipe bench --model`
 * use (tests/plan/test_plan_mem.c holds it equal to real stages). */
#ifndef CLP_ENGINE_MODEL_STAGE_MEM_H
#define CLP_ENGINE_MODEL_STAGE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "cl/status.h"
#include "engine/model/model.h"

/* Device memory of a stage holding blocks first..last (0 embedding, 1..L layers, L+1 head) as
 * clp_stage_create allocates it (alignment padding aside). */
typedef struct clp_model_mem {
	int64_t param_bytes; /* parameters; gradients are as large */
	int64_t opt_bytes;   /* AdamW's two moments */
	int64_t act_bytes;   /* one micro-batch's activation slot */
	int64_t out_bytes;   /* the stage's output (N, C): the message to the next stage */
	int64_t work_bytes;  /* backward temporaries, misc tables, the recomputation buffer */
	int64_t kfac_bytes;  /* K-FAC factors and both sets of inverses of its layers */
} clp_model_mem;
clp_status clp_model_stage_mem(const clp_model_config *m, int first_block, int last_block,
			      size_t B, size_t T, int split, int recompute, clp_model_mem *out);

#endif
