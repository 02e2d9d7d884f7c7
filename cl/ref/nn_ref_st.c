/* Storage-aware references (issue 18): the double references of nn_ref_layers.c with value
 * outputs rounded the way a 16-bit kernel stores them (cl/base/half.h). */
#include "cl/ref/nn_ref.h"

void clp_ref_load(clp_dtype dt, float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = clp_dtype_round(dt, x[i]);
}

void clp_ref_store(clp_dtype dt, double *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = clp_dtype_round(dt, (float)y[i]);
}

void clp_ref_layernorm_forward_st(clp_dtype dt, double *out, double *mean, double *rstd,
				  const float *inp, const float *w, const float *b, size_t N,
				  size_t C, float eps)
{
	clp_ref_layernorm_forward(out, mean, rstd, inp, w, b, N, C, eps);
	clp_ref_store(dt, out, N * C);
}

void clp_ref_rmsnorm_forward_st(clp_dtype dt, double *out, double *rstd, const float *inp,
				const float *w, size_t N, size_t C, float eps)
{
	clp_ref_rmsnorm_forward(out, rstd, inp, w, N, C, eps);
	clp_ref_store(dt, out, N * C);
}

void clp_ref_bias_forward_st(clp_dtype dt, double *out, const float *bias, size_t N, size_t C)
{
	for (size_t i = 0; i < N * C; i++)
		out[i] += bias[i % C];
	clp_ref_store(dt, out, N * C);
}

void clp_ref_gelu_forward_st(clp_dtype dt, double *out, const float *inp, size_t n,
			     clp_nn_gelu kind)
{
	clp_ref_gelu_forward(out, inp, n, kind);
	clp_ref_store(dt, out, n);
}

void clp_ref_swiglu_forward_st(clp_dtype dt, double *out, const float *gate, const float *up,
			       size_t ld, size_t N, size_t F)
{
	clp_ref_swiglu_forward(out, gate, up, ld, N, F);
	clp_ref_store(dt, out, N * F);
}

void clp_ref_residual_forward_st(clp_dtype dt, double *out, const float *a, const float *b,
				 size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (double)a[i] + b[i];
	clp_ref_store(dt, out, n);
}

void clp_ref_dropout_st(clp_dtype dt, double *out, const float *inp, size_t n, float p,
			const clp_rng_stream *s)
{
	clp_ref_dropout(out, inp, n, p, s);
	clp_ref_store(dt, out, n);
}

void clp_ref_embed_forward_st(clp_dtype dt, double *out, const int32_t *tok,
			      const int32_t *types, const float *wte, const float *wpe,
			      const float *wtt, size_t B, size_t T, size_t C)
{
	clp_ref_embed_forward(out, tok, types, wte, wpe, wtt, B, T, C);
	clp_ref_store(dt, out, B * T * C);
}

void clp_ref_rope_st(clp_dtype dt, double *out, const float *x, size_t ld, const float *tab,
		     size_t B, size_t T, size_t nh, size_t hd, int dir)
{
	clp_ref_rope(out, x, ld, tab, B, T, nh, hd, dir);
	for (size_t n = 0; n < B * T; n++)
		clp_ref_store(dt, out + n * ld, nh * hd);
}
