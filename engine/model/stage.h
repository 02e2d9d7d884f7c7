/* A stage: blocks first..last of a model on one device, with its parameters, gradients and
 * AdamW state (one logical block each, views per parameter unit), the activations of up to
 * `slots` micro-batches in flight, and forward/backward per micro-batch.
 *
 * Data flow of one micro-batch (slot s):
 *   forward:  input = token ids (stage holds block 0) or clp_stage_act_in(s), written by the
 *             caller (the previous stage's output); output = clp_stage_act_out(s) (N,C), or, on
 *             the stage holding the head, the per-token losses and the micro-batch's loss sum.
 *   backward: input = clp_stage_grad_in() (N,C), the gradient of this stage's output (written
 *             by the caller; ignored on the head stage); accumulates parameter gradients; leaves
 *             the gradient of the stage's input in clp_stage_grad_in() (sent to the previous
 *             stage), when the stage does not hold block 0.
 * Backward of slot s must follow forward of slot s; slots are reused freely afterwards.
 * Everything is enqueued on the context's queue; nothing waits. */
#ifndef CLP_MODEL_STAGE_H
#define CLP_MODEL_STAGE_H

#include <stdint.h>

#include "cl/nn.h"
#include "cl/runtime.h"
#include "engine/model/linear.h"
#include "engine/model/model.h"
#include "engine/model/stage_mem.h"

typedef struct clp_stage clp_stage;

typedef struct clp_stage_opts {
	size_t B, T; /* micro-batch: B sequences of T tokens (T <= ctx) */
	int slots;   /* micro-batches whose activations are held at once (>= 1) */
	int split;   /* backward in two halves (zero-bubble): input gradient, then weights */
	int recompute; /* keep only each layer's input; recompute the layer in the backward */
	clp_dtype precision; /* storage of values (CLP_F32 when zero; bf16 or fp16: mixed
			      * precision, cl/nn.h "Storage"): activations kept for the backward,
			      * the messages between stages and a 16-bit copy of the parameters
			      * that forward and backward read; masters, gradients, statistics and
			      * AdamW state stay fp32 */
	const unsigned char *frozen; /* per tensor of the whole model's table (by index): 1 =
				      * not trained (train.freeze, a LoRA base). A unit whose
				      * tensors are all frozen gets no gradient and no AdamW
				      * moments (no memory) and the backward computes no weight
				      * gradient for it (its input gradient still flows). NULL:
				      * every tensor trained */
} clp_stage_opts;

clp_status clp_stage_create(clp_stage **out, clp_cl_ctx *ctx, const clp_model_config *cfg,
			    int first_block, int last_block, const clp_stage_opts *o);
void clp_stage_free(clp_stage *st);

const clp_param_table *clp_stage_table(const clp_stage *st);
int clp_stage_has_embedding(const clp_stage *st);
int clp_stage_has_head(const clp_stage *st);

/* Parameters: initialise (GPT-2 style: normal(0, 0.02), residual output projections 0.02 /
 * sqrt(2 L), norm weights 1, biases 0), from streams keyed by (seed, tensor index in the whole
 * model, purpose INIT): any stage split draws the same numbers. Resets AdamW state. */
clp_status clp_stage_init_params(clp_stage *st, uint64_t seed);
/* Host copies of a tensor (index into the stage's table): parameter (the fp32 master), gradient,
 * AdamW m or v, or the value copy forward and backward read (CLP_ST_VALUE: the masters rounded
 * to the stage's precision, the masters themselves in fp32; read-only here, read as floats).
 * Writing a parameter refreshes its value copy. */
typedef enum clp_stage_what {
	CLP_ST_PARAM, CLP_ST_GRAD, CLP_ST_ADAM_M, CLP_ST_ADAM_V, CLP_ST_VALUE
} clp_stage_what;
clp_status clp_stage_read(clp_stage *st, clp_stage_what w, int tensor, float *host);
clp_status clp_stage_write(clp_stage *st, clp_stage_what w, int tensor, const float *host);
/* The storage type of the stage's values (opts.precision). */
clp_dtype clp_stage_precision(const clp_stage *st);
/* Round every master into the value copy (no-op in fp32) and mark the GEMM's kept packs of the
 * weights stale (cl/gemm.h "Kept packs"; in fp32 too). The stage does it itself after init,
 * clp_stage_write and clp_stage_adamw; an optimizer writing the masters another way (K-FAC,
 * Muon) must call it after its step, or the next forward reads packs of the old weights. */
clp_status clp_stage_refresh_values(clp_stage *st);
/* The device view of a tensor or unit (CLP_ST_VALUE: typed with the stage's precision). */
clp_buf clp_stage_tensor(const clp_stage *st, clp_stage_what w, int tensor);
clp_buf clp_stage_unit(const clp_stage *st, clp_stage_what w, int unit);

/* One micro-batch. tokens/types/targets are host arrays of B*T ids (types: bert only; targets:
 * on the stage with the head; -1 = no loss at that position). */
typedef struct clp_stage_mb {
	int slot;
	uint32_t step, micro_batch; /* micro_batch: the index K-FAC keeps its inputs under */
	uint64_t seed;
	const int32_t *tokens, *types, *targets;
	/* The dropout streams are named by (seed, step, micro_batch + stream_base): a replica's
	 * micro-batches pass the global index of its first one (replica r of M each: r M), so
	 * they draw the masks one device draws for them; 0 elsewhere. */
	uint32_t stream_base;
} clp_stage_mb;

/* Skip layers (global layer indices; n = 0 clears): their forward passes the residual stream
 * through unchanged and their backward passes the gradient through. For evaluating and sampling
 * a model with some of its layers removed (SkipPipe's partial inference). */
clp_status clp_stage_skip_layers(clp_stage *st, const int *layers, int n);

/* Activations are stored in the stage's precision (clp_buf.dt; N*C*clp_dtype_size bytes). */
clp_buf clp_stage_act_in(const clp_stage *st, int slot);  /* (N,C) input of a later stage */
clp_buf clp_stage_act_out(const clp_stage *st, int slot); /* (N,C) output of an earlier stage */
clp_buf clp_stage_grad_in(const clp_stage *st);           /* (N,C) fp32, see above */
/* Gradient messages: a 16-bit stage sends and receives the (N,C) gradient in its precision.
 * clp_stage_grad_wire() is that message buffer (grad_in itself in fp32); grad_pack rounds
 * grad_in into it (to send), grad_unpack widens it into grad_in (after a receive). Both are
 * no-ops in fp32. A 16-bit backward rounds the residual gradient to the precision after every
 * block (head, each layer), where a pipeline may cut the model, so pipelined and one-device
 * runs agree bitwise; it leaves the rounded input gradient in the wire as well as in grad_in. */
clp_buf clp_stage_grad_wire(const clp_stage *st);
clp_status clp_stage_grad_pack(clp_stage *st);
clp_status clp_stage_grad_unpack(clp_stage *st);
/* losses (N) and their sum (1 float, times inv_count) of a slot, on the head stage */
clp_buf clp_stage_losses(const clp_stage *st, int slot);
clp_buf clp_stage_loss(const clp_stage *st, int slot);

/* Forward of a micro-batch. On the head stage, inv_count scales the loss sum (1 / number of
 * valid targets in the whole step) so the slot losses of a step add up to the step's mean. */
clp_status clp_stage_forward(clp_stage *st, const clp_stage_mb *mb, float inv_count);
/* Backward of a micro-batch; loss_scale (the same 1 / count) scales the loss gradient. */
clp_status clp_stage_backward(clp_stage *st, const clp_stage_mb *mb, float loss_scale);
/* The two halves of a backward (stages created with opts.split): B computes the input gradient
 * and every gradient except the weight matrices of the transformer layers' linear layers, whose
 * output gradients it keeps in the slot; W then adds those weight gradients. B then W of one
 * micro-batch add exactly what clp_stage_backward adds, in the same order per tensor. */
clp_status clp_stage_backward_input(clp_stage *st, const clp_stage_mb *mb, float loss_scale);
clp_status clp_stage_backward_weight(clp_stage *st, const clp_stage_mb *mb);

/* logits (rows, V) = final hidden rows [row0, row0 + rows) of a slot's last forward times the
 * head weight (+ bias): for sampling and for tests. Head stage only. logits is fp32 whatever
 * the stage's precision (the product of its 16-bit values, accumulated in fp32). */
clp_status clp_stage_logits(clp_stage *st, int slot, size_t row0, size_t rows, clp_buf logits);

clp_status clp_stage_zero_grads(clp_stage *st);
/* A stage holding both the embedding and the tied head keeps the head's share of the
 * embedding's gradient apart, as a pipeline does when they sit on two ranks, and adds it once
 * all micro-batches are done: call this before reading gradients, summing them over replicas,
 * the norm or the optimizer. The sum (embedding + head) is then the same in both layouts, bit
 * for bit. It clears the head's share, so a second call adds nothing. */
clp_status clp_stage_fold_tied(clp_stage *st);
/* Sum of squares and non-finite flag of all gradients into stats (see clp_nn_grad_stats). */
clp_status clp_stage_grad_stats(clp_stage *st, clp_buf stats, float max_norm);
/* AdamW on every parameter not frozen (decay per tensor), using stats (scale / skip) as clp_nn_adamw; then
 * refreshes the value copy. gscale multiplies every gradient first (1 / the fp16 loss scale;
 * 1 otherwise). */
clp_status clp_stage_adamw(clp_stage *st, const clp_nn_adamw_hp *hp, clp_buf stats);
clp_status clp_stage_adamw_scaled(clp_stage *st, const clp_nn_adamw_hp *hp, clp_buf stats,
				  float gscale);
/* train.freeze: a frozen tensor is not trained: clp_stage_adamw leaves it and its moments as
 * they are (bit for bit) and the executor leaves its gradient out of the norm. Tensors frozen
 * by opts.frozen have no gradient or moments at all (clp_stage_trained): clp_stage_tensor gives
 * a buffer with mem NULL for them, clp_stage_read zeros, and clp_stage_write takes only zeros.
 * Freezing an allocated tensor later keeps its memory; unfreezing one without memory is an
 * error. */
clp_status clp_stage_set_frozen(clp_stage *st, int tensor, int frozen);
int clp_stage_frozen(const clp_stage *st, int tensor);
/* Has tensor a gradient and AdamW moments (its unit holds a tensor not frozen at creation)? */
int clp_stage_trained(const clp_stage *st, int tensor);
/* A device buffer of 4 floats for grad stats, owned by the stage. */
clp_buf clp_stage_stats(const clp_stage *st);

/* ---- K-FAC hooks (engine/model/stage_kfac.c) ------------------------------------------------ */

/* The geometry of linear lin (engine/model/linear.h) in this stage's model. */
void clp_stage_linear_get(const clp_stage *st, clp_stage_linear lin, clp_stage_linear_info *out);
/* Layers held: model layers first .. first + n - 1 of the model's model_layers; rows N = B*T of
 * a micro-batch; the stage's context. */
clp_cl_ctx *clp_stage_ctx(const clp_stage *st);
int clp_stage_recomputes(const clp_stage *st); /* layers recomputed in the backward */
int clp_stage_model_layers(const clp_stage *st);
int clp_stage_first_layer(const clp_stage *st);
int clp_stage_nlayers(const clp_stage *st);
size_t clp_stage_rows(const clp_stage *st);
/* The input rows (N, I), dense, of linear lin of stage layer li as slot's last forward saved
 * them; valid until that slot's next forward. */
clp_buf clp_stage_linear_input(const clp_stage *st, int slot, int li, clp_stage_linear lin);
/* Weight (bias: its bias, mem NULL if none) of linear lin of stage layer li, of kind w. */
clp_buf clp_stage_linear_tensor(const clp_stage *st, clp_stage_what w, int li,
				clp_stage_linear lin, int bias);
/* Called by the backward with the gradient dy (N, O), dense, of the output of linear lin of
 * stage layer li, just before the backward consumes it (dy is overwritten afterwards). NULL
 * removes the tap. */
typedef clp_status (*clp_stage_tap_fn)(void *user, const clp_stage_mb *mb, int li,
				       clp_stage_linear lin, clp_buf dy);
void clp_stage_set_tap(clp_stage *st, clp_stage_tap_fn fn, void *user);

/* The strip shape of the kept GEMM packs on ctx (engine/model/stage_packs.c): nr 0 when its
 * GEMM backend packs nothing or CLPIPE_GEMM_KEEP_PACKS=0 keeps nothing. With
 * clp_model_stage_pack_mem it gives what a stage's kept packs take there. */
clp_status clp_stage_pack_shape(clp_cl_ctx *ctx, clp_model_pack_shape *out);

#endif
