/* Transformer layer kernels: forward/backward pairs for GPT-2, LLaMA and BERT style models.
 *
 * Conventions (llm.c style):
 *  - Arguments: outputs, then what forward saves for backward, then inputs, weights, sizes.
 *  - Tensors are clp_buf (buffer, element offset). int32 tensors (token ids, targets, lengths)
 *    are clp_buf too, their elements being 4 bytes. A clp_buf with mem == NULL means "absent"
 *    where a comment says so.
 *  - Shapes in comments: B batch, T sequence, C channels, N rows (usually B*T), V vocabulary.
 *    Tensors are dense row-major unless a row stride (ld, in elements) is taken.
 *  - Every backward ACCUMULATES (+=) into every gradient it writes, parameter and input
 *    gradients alike; the caller zeroes gradients (clp_cl_fill) once per step. Exceptions are
 *    named (RoPE's backward works in place).
 *  - Forward saves what backward needs (LayerNorm mean/rstd, RMSNorm rstd, attention
 *    logsumexp, cross-entropy logsumexp) into caller-owned buffers named in the signature.
 *  - Parameter gradients are summed in a fixed order (no float atomics): results are bitwise
 *    reproducible run to run on one device.
 *  - Wrappers enqueue and return; nothing waits (no clFinish). Temporary memory comes from the
 *    context's scratch slots CLP_SCRATCH_USER0 .. USER0 + 4 (see nn_internal.h).
 *  - Storage (mixed precision, issue 18): a tensor's clp_buf.dt says how its elements are
 *    stored. VALUE tensors (activations: inputs and outputs of a forward, the activations a
 *    backward reads; weights and biases read by forward and backward: the 16-bit copy of the
 *    masters) may be CLP_F32, CLP_BF16 or CLP_F16, all value tensors of one call sharing one
 *    type. GRADIENTS (dinp, dout, dw, db, dq ...: every d-prefixed argument), saved STATISTICS
 *    (LayerNorm mean and rstd, RMSNorm rstd, attention and cross-entropy lse, losses, loss),
 *    the RoPE table, and everything of the optimiser (masters, m, v, stats) are always fp32.
 *    Arithmetic is fp32 throughout; a 16-bit value is rounded once, when stored (cl/base/half.h's
 *    rounding, the reference). A call breaking these rules returns CLP_ERR_INVALID naming the
 *    argument. Each kernel file builds once per storage type used ("#define ST_TYPE n",
 *    cl/kernels/half.clh's ST_LD / ST_SV).
 * All functions return CLP_OK or a status with a message (clp_last_error()). */
#ifndef CLP_CL_NN_H
#define CLP_CL_NN_H

#include <stdint.h>
#include <stdio.h>

#include "cl/base/rng.h"
#include "cl/runtime.h"

/* Kernel geometry. AUTO picks by device type: CPU (one work-item per row or block, vector loops,
 * local size 1; fast through PoCL) or GPU (work-groups with local memory). Only attention has a
 * separate GPU shape so far; the other families run their CPU shape everywhere. Process-wide;
 * meant for tests and benchmarks (force the GPU shape on a CPU device to test it). */
typedef enum clp_nn_shape { CLP_NN_SHAPE_AUTO = 0, CLP_NN_SHAPE_CPU, CLP_NN_SHAPE_GPU } clp_nn_shape;
void clp_nn_set_shape(clp_nn_shape s);

/* Build (and run once on tiny inputs) every kernel of this file, so the engine's and PoCL's
 * caches hold them. Progress lines go to log when not NULL. */
clp_status clp_nn_warmup(clp_cl_ctx *ctx, FILE *log);

/* ---- random numbers on the device (same bits as cl/base/rng.h on the host) ----------------- */

/* out[i] = mean + std * normal(first + i) / lo + (hi - lo) * uniform(first + i) /
 * raw 32-bit number (first + i), for i < n, of stream s. */
clp_status clp_nn_rng_normal(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			     uint64_t first, float mean, float std);
clp_status clp_nn_rng_uniform(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			      uint64_t first, float lo, float hi);
clp_status clp_nn_rng_u32(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			  uint64_t first);

/* ---- embeddings ---------------------------------------------------------------------------- */

/* Positions of a batch grouped by id (token or token type), built on the host from the ids the
 * data loader holds and uploaded: what makes the embedding backward deterministic (one work-item
 * sums the rows of one id, in position order). Build once per batch; rebuilding reuses the
 * memory (and waits for the previous upload). Ids must lie in [0, V) (CLP_ERR_INVALID names
 * the first one that does not; `what` names the tensor in messages). */
typedef struct clp_nn_index clp_nn_index;
clp_status clp_nn_index_build(clp_cl_ctx *ctx, clp_nn_index **idx, const int32_t *ids, size_t n,
			      size_t V, const char *what);
void clp_nn_index_free(clp_nn_index *idx);

/* out (B,T,C) = wte[tokens[b,t]] (V,C) + wpe[t] (T_max,C) + wtt[types[b,t]] (ntypes,C).
 * wpe.mem NULL: no learned positions (RoPE models); types.mem NULL: no token types (only BERT
 * has them). tokens, types: int32 (B,T). An id outside its table gives a row of NaN. */
clp_status clp_nn_embed_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf tokens, clp_buf types,
				clp_buf wte, clp_buf wpe, clp_buf wtt, size_t B, size_t T,
				size_t C, size_t V, size_t ntypes);
/* dwte += rows of dout grouped by token (tok: index of this batch's tokens, n = B*T);
 * dwpe[t] += sum over b of dout[b,t] (dwpe.mem NULL: skipped); dwtt likewise by type (type_idx
 * or dwtt.mem NULL: skipped; dwte.mem NULL: a frozen table, skipped). Fixed summation order: bitwise reproducible. */
clp_status clp_nn_embed_backward(clp_cl_ctx *ctx, clp_buf dwte, clp_buf dwpe, clp_buf dwtt,
				 clp_buf dout, const clp_nn_index *tok,
				 const clp_nn_index *type_idx, size_t B, size_t T, size_t C);

/* RoPE, rotate-half form (Hugging Face LLaMA): for pair j < hd/2 at position p,
 *   x[j]' = x[j] cos - x[j + hd/2] sin,  x[j + hd/2]' = x[j + hd/2] cos + x[j] sin,
 * angle = p * inv_freq[j], inv_freq[j] = theta^(-2j/hd), all rounded as PyTorch does in fp32.
 * The table (T_max, hd/2, 2) holds (cos, sin); fill it on the host and upload it once. */
void clp_nn_rope_table(float *tab, size_t T_max, size_t hd, float theta);
/* In place on x rows (B,T, nh*hd) with row stride ld (so Q and K of a fused QKV buffer work):
 * rotates every head of position t by table row t. Backward applies the inverse rotation to
 * the gradient in place (it does not accumulate). hd must be even. */
clp_status clp_nn_rope_forward(clp_cl_ctx *ctx, clp_buf x, size_t ld, clp_buf tab, size_t B,
			       size_t T, size_t nh, size_t hd);
clp_status clp_nn_rope_backward(clp_cl_ctx *ctx, clp_buf dx, size_t ld, clp_buf tab, size_t B,
				size_t T, size_t nh, size_t hd);

/* ---- normalisation ------------------------------------------------------------------------- */

/* LayerNorm over rows: out (N,C) = (inp - mean) * rstd * w + b, biased variance, rstd =
 * 1/sqrt(var + eps) (PyTorch: eps 1e-5 GPT-2, 1e-12 BERT). Saves mean (N), rstd (N). */
clp_status clp_nn_layernorm_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf mean, clp_buf rstd,
				    clp_buf inp, clp_buf w, clp_buf b, size_t N, size_t C,
				    float eps);
/* Backward: dinp += the input gradient, dw, db += their column sums (mem NULL: a frozen
 * weight or bias, not accumulated). */
clp_status clp_nn_layernorm_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dw, clp_buf db,
				     clp_buf dout, clp_buf inp, clp_buf w, clp_buf mean,
				     clp_buf rstd, size_t N, size_t C);
/* A residual add then LayerNorm in one launch: xs (N,C) = a + b (kept: the residual stream),
 * out = LayerNorm(xs) as clp_nn_layernorm_forward; the same values bit for bit as
 * clp_nn_residual_forward then clp_nn_layernorm_forward. Backward: LayerNorm's, whose dinp
 * accumulation is the residual's gradient already (no launch of its own). */
clp_status clp_nn_residual_layernorm_forward(clp_cl_ctx *ctx, clp_buf xs, clp_buf out,
					     clp_buf mean, clp_buf rstd, clp_buf a, clp_buf b,
					     clp_buf w, clp_buf bias, size_t N, size_t C, float eps);

/* RMSNorm (LLaMA): out (N,C) = inp * rstd * w, rstd = 1/sqrt(mean(inp^2) + eps). Saves rstd. */
clp_status clp_nn_rmsnorm_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf rstd, clp_buf inp,
				  clp_buf w, size_t N, size_t C, float eps);
/* Backward as layernorm's (dw.mem NULL: not accumulated). */
clp_status clp_nn_rmsnorm_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dw, clp_buf dout,
				   clp_buf inp, clp_buf w, clp_buf rstd, size_t N, size_t C);

/* ---- elementwise and bias ------------------------------------------------------------------ */

typedef enum clp_nn_gelu {
	CLP_NN_GELU_TANH = 0, /* GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
	CLP_NN_GELU_ERF = 1   /* BERT: 0.5 x (1 + erf(x / sqrt(2))) */
} clp_nn_gelu;
/* out (n) = gelu(inp); out may be inp. Backward: dinp += gelu'(inp) * dout. */
clp_status clp_nn_gelu_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf inp, size_t n,
			       clp_nn_gelu kind);
clp_status clp_nn_gelu_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, clp_buf inp,
				size_t n, clp_nn_gelu kind);
/* dinp = gelu'(inp) * dout, overwritten: bitwise a zero fill then clp_nn_gelu_backward. */
clp_status clp_nn_gelu_backward_set(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, clp_buf inp,
				    size_t n, clp_nn_gelu kind);
/* The MLP up projection's epilogue in one launch: fc (N,F, dense) += bias (F), in place and
 * kept for the backward, then act = gelu(fc); bitwise clp_nn_bias_forward then
 * clp_nn_gelu_forward. The backward is clp_nn_gelu_backward(_set) and clp_nn_bias_backward. */
clp_status clp_nn_bias_gelu_forward(clp_cl_ctx *ctx, clp_buf act, clp_buf fc, clp_buf bias,
				    size_t N, size_t F, clp_nn_gelu kind);
/* Whether clp_nn_bias_gelu_forward puts every element of an (N, F) fc on its float8 path here
 * (F and the elementwise chunk multiples of 8), so that the packed GEMM's store can do the same
 * (cl/gemm.h clp_cl_gemm_bias_gelu) bitwise. */
int clp_nn_gelu_store_ok(const clp_cl_ctx *ctx, size_t F);

/* SwiGLU: out (N,F) = silu(gate) * up, gate and up (N,F) read with row stride ld. With LLaMA's
 * gate and up projections fused into one (2F, C) weight, one GEMM gives h (N, 2F) and
 * gate = h, up = h + F, ld = 2F. Backward accumulates into dgate, dup (same stride ld). */
clp_status clp_nn_swiglu_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf gate, clp_buf up,
				 size_t ld, size_t N, size_t F);
clp_status clp_nn_swiglu_backward(clp_cl_ctx *ctx, clp_buf dgate, clp_buf dup, clp_buf dout,
				  clp_buf gate, clp_buf up, size_t ld, size_t N, size_t F);

/* Residual: out = a + b (clp_cl_add). Backward: da += dout, db += dout (da may be db). */
clp_status clp_nn_residual_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf a, clp_buf b, size_t n);
clp_status clp_nn_residual_backward(clp_cl_ctx *ctx, clp_buf da, clp_buf db, clp_buf dout,
				    size_t n);

/* Bias: out (N,C) += bias (C) in place (after a GEMM). Backward: dbias += column sums of dout,
 * in a fixed order (blocks of NN_ROWS_PER_BLOCK rows summed in order, then the blocks' sums in
 * order), one launch. */
clp_status clp_nn_bias_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf bias, size_t N, size_t C);
clp_status clp_nn_bias_backward(clp_cl_ctx *ctx, clp_buf dbias, clp_buf dout, size_t N, size_t C);

/* Dropout with probability p: element i is kept when number i of stream s is >= p * 2^32, and
 * kept elements are scaled by 1/(1-p). The mask is never stored: backward draws it again from
 * the same stream. out may be inp. p = 0 copies. Backward: dinp += mask * dout / (1-p). */
clp_status clp_nn_dropout_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf inp, size_t n, float p,
				  const clp_rng_stream *s);
clp_status clp_nn_dropout_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, size_t n, float p,
				   const clp_rng_stream *s);

/* ---- attention ----------------------------------------------------------------------------- */

/* Fused multi-head attention, flash style: keys in blocks with a running max and sum, so memory
 * per head grows with T, not T^2. Query head h reads key/value head h / (H / KVH) (GQA; KVH = H
 * is plain multi-head). Row (b,t) of Q holds H heads of hd values at q + (b*T + t) * ldq + h*hd;
 * K and V rows hold KVH heads likewise (ldk, ldv); O rows H heads (ldo). GPT-2's fused QKV
 * buffer (B,T,3C): q = qkv, k = qkv + C, v = qkv + 2C, ldq = ldk = ldv = 3C. Gradients dq, dk,
 * dv use the strides of q, k, v. */
typedef struct clp_nn_attn {
	size_t B, T;              /* batch, sequence length */
	size_t H, KVH, hd;        /* query heads, key/value heads (divides H), head dimension */
	size_t ldq, ldk, ldv, ldo; /* row strides in elements */
	int causal;               /* 1: query t sees keys <= t (GPT, LLaMA); 0: all (BERT) */
	float scale;              /* scores = scale * q.k; 0 means 1/sqrt(hd) */
	clp_buf kv_len;           /* optional int32 (B): keys >= kv_len[b] are padding (masked);
				     mem NULL: all T keys are real */
} clp_nn_attn;

/* out (B,T,H*hd) = softmax(scale q k^T + mask) v. Saves lse (B,H,T): the natural-log
 * logsumexp of each query row's scores (+inf for a row with no visible key, whose output is 0;
 * NaN for a row with a NaN score). Storage: q, k, v, out values; lse fp32; kv_len int32. */
clp_status clp_nn_attention_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf lse, clp_buf q,
				    clp_buf k, clp_buf v, const clp_nn_attn *a);
/* dq, dk, dv += gradients, recomputing the probabilities from q, k and the saved lse
 * (D = rowsum(dout * out) first). dout has the layout of out (row stride ldo). Storage: q, k,
 * v, out values; dq, dk, dv, dout and lse fp32. Deterministic: dq is summed per query row, dk
 * and dv per key row (over the query heads sharing it), each by one work-item in a fixed
 * order. */
clp_status clp_nn_attention_backward(clp_cl_ctx *ctx, clp_buf dq, clp_buf dk, clp_buf dv,
				     clp_buf dout, clp_buf q, clp_buf k, clp_buf v, clp_buf out,
				     clp_buf lse, const clp_nn_attn *a);

/* ---- loss ---------------------------------------------------------------------------------- */

/* Softmax cross-entropy fused with the output projection: logits = h (N,C) w^T, w (V,C) (the
 * tied token embedding for GPT-2; h, w, dh, dw dense), never materialised whole: chunks of vchunk
 * columns (0: chosen from N) go through clp_cl_gemm into scratch while a running max, sum and
 * target logit are kept per row. targets: int32 (N), -1 = ignore (BERT MLM). Writes losses (N):
 * -log softmax(logits)[target], 0 for ignored rows (NaN for a target outside [-1, V)); saves
 * lse (N). The mean loss is sum(losses) / count of valid targets (clp_nn_xent_mean).
 * bias (V): added to the logits (BERT's decoder bias); mem NULL: none.
 * Storage: h, w and bias are values (fp32, bf16 or fp16, one type); losses, lse, loss, dh, dw
 * and dbias fp32; the logits are computed and kept in fp32. */
clp_status clp_nn_xent_forward(clp_cl_ctx *ctx, clp_buf losses, clp_buf lse, clp_buf h, clp_buf w,
			       clp_buf bias, clp_buf targets, size_t N, size_t C, size_t V,
			       size_t vchunk);
/* dh (N,C) += dlogits w, dw (V,C) += dlogits^T h with dlogits = (softmax - onehot) * scale for
 * valid rows (scale = 1 / global count of valid targets, so micro-batches of a pipeline sum to
 * the global mean's gradient). Logits are recomputed per chunk, or copied back where the last
 * forward kept them for these operands (clp_nn_xent_kept_bytes; the same bits either way). With
 * a bias, dbias (V) += column sums of dlogits (dbias.mem NULL: not accumulated; dw.mem NULL
 * likewise: a frozen head). */
clp_status clp_nn_xent_backward(clp_cl_ctx *ctx, clp_buf dh, clp_buf dw, clp_buf dbias,
				clp_buf h, clp_buf w, clp_buf bias, clp_buf targets, clp_buf lse,
				float scale, size_t N, size_t C, size_t V, size_t vchunk);
/* The scratch bytes the forward of N rows over a vocabulary of V keeps its logits in for the
 * backward on this context (N V 4 within CLPIPE_XENT_KEEP_MB, cl/nn_xent.c), 0 when it keeps
 * none: the session's memory check counts them. */
size_t clp_nn_xent_kept_bytes(clp_cl_ctx *ctx, size_t N, size_t V);
/* loss[0] = sum(losses (N)) * inv_count (compensated sum). */
clp_status clp_nn_xent_mean(clp_cl_ctx *ctx, clp_buf loss, clp_buf losses, size_t N,
			    float inv_count);

/* ---- optimiser ----------------------------------------------------------------------------- */

/* The gradient statistics one call of clp_nn_grad_stats writes (4 floats). */
enum clp_nn_gstat {
	CLP_NN_GSTAT_SUMSQ = 0,     /* sum of squares over all gradients (compensated) */
	CLP_NN_GSTAT_NONFINITE = 1, /* 1 if any gradient is NaN/Inf (or the sum overflowed) */
	CLP_NN_GSTAT_NORM = 2,      /* sqrt(sumsq) */
	CLP_NN_GSTAT_SCALE = 3,     /* clip factor min(1, max_norm / (norm + 1e-6)); 1 without
				       clipping; 0 when non-finite */
	CLP_NN_GSTAT_COUNT = 4
};
/* Global gradient norm and non-finite check over count gradient tensors (grads[i], n[i]
 * elements), computed on the device into stats (4 floats). max_norm <= 0: no clipping. */
clp_status clp_nn_grad_stats(clp_cl_ctx *ctx, clp_buf stats, const clp_buf *grads,
			     const size_t *n, int count, float max_norm);
/* The statistics of each tensor alone, tensor i's 4 floats at element stats_off[i] of stats:
 * bitwise what one clp_nn_grad_stats call per tensor writes, in two launches when all the
 * tensors lie in one buffer (else one call per tensor). */
clp_status clp_nn_grad_stats_each(clp_cl_ctx *ctx, cl_mem stats, const size_t *stats_off,
				  const clp_buf *grads, const size_t *n, int count, float max_norm);

typedef struct clp_nn_adamw_hp {
	float lr;           /* this step's learning rate (schedules live in the caller) */
	float beta1, beta2; /* 0.9, 0.95 or 0.999 */
	float eps;          /* 1e-8 */
	float weight_decay; /* decoupled: param *= 1 - lr * weight_decay */
	long step;          /* 1-based step number, for bias correction */
} clp_nn_adamw_hp;
/* AdamW (PyTorch's formulas and order) on one tensor: param, m, v, grad of n elements. decay = 0
 * for tensors without weight decay (norm weights, biases). The gradient is multiplied by gscale
 * and, when stats.mem is given (from clp_nn_grad_stats), by stats[SCALE]; and when
 * stats[NONFINITE] is set the update does nothing at all, so a step with a NaN gradient is
 * skipped without the host waiting (the caller reads stats to log it and to not count it). */
clp_status clp_nn_adamw_update(clp_cl_ctx *ctx, clp_buf param, clp_buf m, clp_buf v, clp_buf grad,
			       size_t n, const clp_nn_adamw_hp *hp, int decay, clp_buf stats,
			       float gscale);
/* AdamW on count tensors, t[0..3][i] = param, m, v, grad of tensor i (n[i] elements, decay[i]):
 * element for element clp_nn_adamw_update's arithmetic (bitwise equal), in one launch when each
 * role's tensors lie in one buffer (else one call per tensor). */
clp_status clp_nn_adamw_update_each(clp_cl_ctx *ctx, const clp_buf *const t[4], const size_t *n,
				    const int *decay, int count, const clp_nn_adamw_hp *hp,
				    clp_buf stats, float gscale);

#endif
