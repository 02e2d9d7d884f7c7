/* Plain C references of the transformer kernels (cl/nn.h), in double precision: float inputs,
 * double outputs, so tests compare device results against them and check every backward
 * against finite differences of the forward. Backward references accumulate (+=) like the
 * kernels. Layouts and argument meanings are those of the matching clp_nn_* function. */
#ifndef CLP_REF_NN_REF_H
#define CLP_REF_NN_REF_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/half.h"
#include "cl/nn.h"

void clp_ref_layernorm_forward(double *out, double *mean, double *rstd, const float *inp,
			       const float *w, const float *b, size_t N, size_t C, float eps);
void clp_ref_layernorm_backward(double *dinp, double *dw, double *db, const float *dout,
				const float *inp, const float *w, size_t N, size_t C, float eps);
void clp_ref_rmsnorm_forward(double *out, double *rstd, const float *inp, const float *w,
			     size_t N, size_t C, float eps);
void clp_ref_rmsnorm_backward(double *dinp, double *dw, const float *dout, const float *inp,
			      const float *w, size_t N, size_t C, float eps);

void clp_ref_gelu_forward(double *out, const float *inp, size_t n, clp_nn_gelu kind);
void clp_ref_gelu_backward(double *dinp, const float *dout, const float *inp, size_t n,
			   clp_nn_gelu kind);
void clp_ref_swiglu_forward(double *out, const float *gate, const float *up, size_t ld, size_t N,
			    size_t F);
void clp_ref_swiglu_backward(double *dgate, double *dup, const float *dout, const float *gate,
			     const float *up, size_t ld, size_t N, size_t F);
void clp_ref_bias_backward(double *dbias, const float *dout, size_t N, size_t C);
/* out = inp * keep / (1 - p) with keep from stream s (clp_rng_u32(s, i) >= p 2^32). */
void clp_ref_dropout(double *out, const float *inp, size_t n, float p, const clp_rng_stream *s);

/* wpe, types/wtt may be NULL. */
void clp_ref_embed_forward(double *out, const int32_t *tok, const int32_t *types,
			   const float *wte, const float *wpe, const float *wtt, size_t B,
			   size_t T, size_t C);
void clp_ref_embed_backward(double *dwte, double *dwpe, double *dwtt, const float *dout,
			    const int32_t *tok, const int32_t *types, size_t B, size_t T, size_t C);
/* out rows have the layout of x (stride ld); dir +1 forward, -1 backward (the transpose). */
void clp_ref_rope(double *out, const float *x, size_t ld, const float *tab, size_t B, size_t T,
		  size_t nh, size_t hd, int dir);

/* Naive attention over all T x T scores. kv_len: host int32 (B) or NULL; a->kv_len unused.
 * out (B,T,H*hd) dense, lse (B,H,T); gradients have the strides of q, k, v. */
void clp_ref_attention_forward(double *out, double *lse, const float *q, const float *k,
			       const float *v, const clp_nn_attn *a, const int32_t *kv_len);
void clp_ref_attention_backward(double *dq, double *dk, double *dv, const float *dout,
				const float *q, const float *k, const float *v,
				const clp_nn_attn *a, const int32_t *kv_len);
/* The same with values stored as dt (cl/nn.h "Storage"): q, k, v (and out) go through dt's
 * rounding when read (cl/base/half.h), the maths stays double, and the forward's out is rounded
 * through dt once (lse is not). The backward takes D = rowsum(dout * out) from the forward's
 * stored output out (row stride ldo), as the kernels do, or from the probabilities when out is
 * NULL (what clp_ref_attention_backward does). */
void clp_ref_attention_forward_st(double *out, double *lse, const float *q, const float *k,
				  const float *v, const clp_nn_attn *a, const int32_t *kv_len,
				  clp_dtype dt);
void clp_ref_attention_backward_st(double *dq, double *dk, double *dv, const float *dout,
				   const float *q, const float *k, const float *v,
				   const float *out, const clp_nn_attn *a, const int32_t *kv_len,
				   clp_dtype dt);

/* bias (V) may be NULL; dbias (V) may be NULL. */
void clp_ref_xent_forward(double *losses, double *lse, const float *h, const float *w,
			  const float *bias, const int32_t *targets, size_t N, size_t C, size_t V);
void clp_ref_xent_backward(double *dh, double *dw, double *dbias, const float *h, const float *w,
			   const float *bias, const int32_t *targets, float scale, size_t N,
			   size_t C, size_t V);

/* Storage-aware forms (mixed precision, cl/nn.h "Storage"). A 16-bit VALUE input is given as
 * the float array of its values (clp_ref_load rounds an array in place: what a kernel reads from
 * a bf16 or fp16 tensor holding it); a value OUTPUT is computed in double exactly as above and
 * then rounded to float and to the storage type dt (clp_ref_store), what a kernel computing in
 * float and storing once writes, up to the float computation's own error. Gradients and
 * statistics stay fp32: the plain references above, given the rounded inputs, are the 16-bit
 * references of every backward and of mean, rstd. dt = CLP_F32 gives the plain forward. */
void clp_ref_load(clp_dtype dt, float *x, size_t n);
void clp_ref_store(clp_dtype dt, double *y, size_t n);
void clp_ref_layernorm_forward_st(clp_dtype dt, double *out, double *mean, double *rstd,
				  const float *inp, const float *w, const float *b, size_t N,
				  size_t C, float eps);
void clp_ref_rmsnorm_forward_st(clp_dtype dt, double *out, double *rstd, const float *inp,
				const float *w, size_t N, size_t C, float eps);
/* out (N,C) = round(out + bias) in place (out holds the rounded values before). */
void clp_ref_bias_forward_st(clp_dtype dt, double *out, const float *bias, size_t N, size_t C);
void clp_ref_gelu_forward_st(clp_dtype dt, double *out, const float *inp, size_t n,
			     clp_nn_gelu kind);
void clp_ref_swiglu_forward_st(clp_dtype dt, double *out, const float *gate, const float *up,
			       size_t ld, size_t N, size_t F);
/* out = round(a + b) */
void clp_ref_residual_forward_st(clp_dtype dt, double *out, const float *a, const float *b,
				 size_t n);
void clp_ref_dropout_st(clp_dtype dt, double *out, const float *inp, size_t n, float p,
			const clp_rng_stream *s);
void clp_ref_embed_forward_st(clp_dtype dt, double *out, const int32_t *tok,
			      const int32_t *types, const float *wte, const float *wpe,
			      const float *wtt, size_t B, size_t T, size_t C);
/* The rotated elements of out rounded (forward on a 16-bit x); others left as they are. */
void clp_ref_rope_st(clp_dtype dt, double *out, const float *x, size_t ld, const float *tab,
		     size_t B, size_t T, size_t nh, size_t hd, int dir);

/* One AdamW step in place (double arithmetic, PyTorch's formulas). */
void clp_ref_adamw(float *p, float *m, float *v, const float *g, size_t n,
		   const clp_nn_adamw_hp *hp, int decay, float gscale);

#endif
