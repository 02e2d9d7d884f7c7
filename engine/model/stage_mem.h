/* The device memory of a stage, computed as clp_stage_create allocates it: the one memory model
 * that the planner, a training session's check before allocation and `clpipe bench --model`
 * use (tests/plan/test_plan_mem.c holds it equal to real stages). */
#ifndef CLP_ENGINE_MODEL_STAGE_MEM_H
#define CLP_ENGINE_MODEL_STAGE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/half.h"
#include "cl/base/status.h"
#include "engine/model/model.h"

/* Device memory of a stage holding blocks first..last (0 embedding, 1..L layers, L+1 head) as
 * clp_stage_create allocates it (alignment padding aside). */
typedef struct clp_model_mem {
	int64_t param_bytes; /* parameters (fp32 masters), frozen ones included */
	int64_t grad_bytes;  /* gradients: the units with a trained tensor (param_bytes when
			      * nothing is frozen) */
	int64_t copy_bytes;  /* the 16-bit copy of the parameters (0 in fp32) */
	int64_t opt_bytes;   /* AdamW's two moments: 2 x grad_bytes */
	int64_t act_bytes;   /* one micro-batch's activation slot */
	int64_t out_bytes;   /* the stage's output (N, C) in the precision: the message to the next
			      * stage, and the gradient message back */
	int64_t work_bytes;  /* backward temporaries, misc tables, the recomputation buffer */
	int64_t kfac_bytes;  /* K-FAC factors and both sets of inverses of its layers */
	int64_t own_bytes;   /* the optimizer's own buffers beyond AdamW's moments (Shampoo's
			      * statistics and roots, Muon's and Shampoo's scratch): 0 from the
			      * functions here, which do not know the optimizer; clp_plan_stage_mem
			      * sets it and adds it to opt_bytes */
} clp_model_mem;
clp_status clp_model_stage_mem(const clp_model_config *m, int first_block, int last_block,
			      size_t B, size_t T, int split, int recompute, clp_model_mem *out);
/* The same for a stage storing values in precision (clp_stage_opts.precision; mixed precision
 * keeps activations 16-bit, statistics and gradients fp32, and adds the 16-bit parameter copy
 * and a gradient message buffer). clp_model_stage_mem is this with CLP_F32. */
clp_status clp_model_stage_mem_prec(const clp_model_config *m, int first_block, int last_block,
				   size_t B, size_t T, int split, int recompute,
				   clp_dtype precision, clp_model_mem *out);
/* LoRA's work buffer of a stage, in floats (N rows): u = x A' and g = dy B (N x r each), and
 * with model.lora_dropout the dropped input drop(x) of the widest adapted linear (N x I),
 * which the backward reuses for s g A. At least 1. */
size_t clp_model_lora_work(const clp_model_config *m, size_t N);
/* Which tensors a run does not train (train.freeze, a LoRA base): frozen(user, d) is 1 for
 * those. A unit whose tensors are all frozen has no gradient and no optimizer state (as
 * clp_stage_opts.frozen makes a stage); its weights (and 16-bit copy) stay. */
typedef int (*clp_model_frozen_fn)(const void *user, const clp_tensor_desc *d);
/* The LoRA rule: with m->lora_r > 0, every tensor but the adapters (user: the config). */
int clp_model_lora_base(const void *model_config, const clp_tensor_desc *d);
/* clp_model_stage_mem_prec with frozen tensors (frozen NULL: all trained, as _prec). */
clp_status clp_model_stage_mem_frozen(const clp_model_config *m, int first_block, int last_block,
				     size_t B, size_t T, int split, int recompute,
				     clp_dtype precision, clp_model_frozen_fn frozen,
				     const void *user, clp_model_mem *out);

/* The packed GEMM's strip shape (cl/gemm.h clp_gemm_pack_shape of the context's tuning). */
typedef struct clp_model_pack_shape {
	int nr;       /* strip width VW x NV; 0: nothing packed or kept */
	int kch;      /* K chunk of a product whose A is packed (KCH; <= 0: one chunk) */
	int direct_a; /* DIRECT_A: a non-transposed A is read directly (one chunk) */
} clp_model_pack_shape;
/* The bytes kept for op(B) of n columns and k rows (ta: A transposed), as cl/gemm_packed.c
 * allocates them: ceil(n / nr) nr kk 4 + 4 per K chunk kk. */
int64_t clp_model_kept_bytes(const clp_model_pack_shape *p, int ta, size_t n, size_t k);
/* The packed GEMM's kept packs of a stage's weights (cl/gemm.h "Kept packs") for strips of
 * shape p: *kept, the strips of each weight
 * per way a product reads it (every linear's x W, and with backward its dY W'; the LM head's
 * vocabulary chunks h E' and, with backward, dl E), allocated on first use and held as long as
 * the stage; *transient (with backward, on the head stage), the final hidden rows packed for
 * the vocabulary chunks' dW products, allocated and freed within each loss backward. Exactly the
 * bytes the packed backend allocates (tests/model/test_stage_packs.c), before the cap
 * (clp_cl_gemm_keep_limit), which the caller applies to all the stages of a device together.
 * Not counted: LoRA adapters, and clp_stage_logits' sampling products (generation only). */
clp_status clp_model_stage_pack_mem(const clp_model_config *m, int first_block, int last_block,
				    size_t B, size_t T, int backward, const clp_model_pack_shape *p,
				    int64_t *kept, int64_t *transient);

#endif
