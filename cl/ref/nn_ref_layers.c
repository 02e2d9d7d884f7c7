/* References: LayerNorm, RMSNorm, GELU, SwiGLU, bias, dropout, embeddings, RoPE. */
#include "cl/ref/nn_ref.h"

#include <math.h>

void clp_ref_layernorm_forward(double *out, double *mean, double *rstd, const float *inp,
			       const float *w, const float *b, size_t N, size_t C, float eps)
{
	for (size_t n = 0; n < N; n++) {
		const float *x = inp + n * C;
		double m = 0, v = 0, r;

		for (size_t c = 0; c < C; c++)
			m += x[c];
		m /= (double)C;
		for (size_t c = 0; c < C; c++)
			v += (x[c] - m) * (x[c] - m);
		r = 1.0 / sqrt(v / (double)C + eps);
		for (size_t c = 0; c < C; c++)
			out[n * C + c] = (x[c] - m) * r * w[c] + b[c];
		if (mean)
			mean[n] = m;
		if (rstd)
			rstd[n] = r;
	}
}

void clp_ref_layernorm_backward(double *dinp, double *dw, double *db, const float *dout,
				const float *inp, const float *w, size_t N, size_t C, float eps)
{
	for (size_t n = 0; n < N; n++) {
		const float *x = inp + n * C, *g = dout + n * C;
		double m = 0, v = 0, r, a = 0, bb = 0;

		for (size_t c = 0; c < C; c++)
			m += x[c];
		m /= (double)C;
		for (size_t c = 0; c < C; c++)
			v += (x[c] - m) * (x[c] - m);
		r = 1.0 / sqrt(v / (double)C + eps);
		for (size_t c = 0; c < C; c++) {
			double xh = (x[c] - m) * r;

			a += (double)w[c] * g[c];
			bb += (double)w[c] * g[c] * xh;
		}
		a /= (double)C;
		bb /= (double)C;
		for (size_t c = 0; c < C; c++) {
			double xh = (x[c] - m) * r;

			dinp[n * C + c] += ((double)w[c] * g[c] - a - xh * bb) * r;
			dw[c] += g[c] * xh;
			db[c] += g[c];
		}
	}
}

void clp_ref_rmsnorm_forward(double *out, double *rstd, const float *inp, const float *w,
			     size_t N, size_t C, float eps)
{
	for (size_t n = 0; n < N; n++) {
		const float *x = inp + n * C;
		double s = 0, r;

		for (size_t c = 0; c < C; c++)
			s += (double)x[c] * x[c];
		r = 1.0 / sqrt(s / (double)C + eps);
		for (size_t c = 0; c < C; c++)
			out[n * C + c] = x[c] * r * w[c];
		if (rstd)
			rstd[n] = r;
	}
}

void clp_ref_rmsnorm_backward(double *dinp, double *dw, const float *dout, const float *inp,
			      const float *w, size_t N, size_t C, float eps)
{
	for (size_t n = 0; n < N; n++) {
		const float *x = inp + n * C, *g = dout + n * C;
		double s = 0, r, bb = 0;

		for (size_t c = 0; c < C; c++)
			s += (double)x[c] * x[c];
		r = 1.0 / sqrt(s / (double)C + eps);
		for (size_t c = 0; c < C; c++)
			bb += (double)w[c] * g[c] * x[c] * r;
		bb /= (double)C;
		for (size_t c = 0; c < C; c++) {
			double xh = x[c] * r;

			dinp[n * C + c] += ((double)w[c] * g[c] - xh * bb) * r;
			dw[c] += g[c] * xh;
		}
	}
}

static double gelu(double x, clp_nn_gelu kind)
{
	if (kind == CLP_NN_GELU_TANH)
		return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static double gelu_d(double x, clp_nn_gelu kind)
{
	if (kind == CLP_NN_GELU_TANH) {
		double k = sqrt(2 / M_PI), t = tanh(k * (x + 0.044715 * x * x * x));

		return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
	}
	return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

void clp_ref_gelu_forward(double *out, const float *inp, size_t n, clp_nn_gelu kind)
{
	for (size_t i = 0; i < n; i++)
		out[i] = gelu(inp[i], kind);
}

void clp_ref_gelu_backward(double *dinp, const float *dout, const float *inp, size_t n,
			   clp_nn_gelu kind)
{
	for (size_t i = 0; i < n; i++)
		dinp[i] += gelu_d(inp[i], kind) * dout[i];
}

void clp_ref_swiglu_forward(double *out, const float *gate, const float *up, size_t ld, size_t N,
			    size_t F)
{
	for (size_t n = 0; n < N; n++)
		for (size_t f = 0; f < F; f++) {
			double g = gate[n * ld + f];

			out[n * F + f] = g / (1 + exp(-g)) * up[n * ld + f];
		}
}

void clp_ref_swiglu_backward(double *dgate, double *dup, const float *dout, const float *gate,
			     const float *up, size_t ld, size_t N, size_t F)
{
	for (size_t n = 0; n < N; n++)
		for (size_t f = 0; f < F; f++) {
			double g = gate[n * ld + f], s = 1 / (1 + exp(-g)), d = dout[n * F + f];

			dup[n * ld + f] += d * g * s;
			dgate[n * ld + f] += d * up[n * ld + f] * s * (1 + g * (1 - s));
		}
}

void clp_ref_bias_backward(double *dbias, const float *dout, size_t N, size_t C)
{
	for (size_t n = 0; n < N; n++)
		for (size_t c = 0; c < C; c++)
			dbias[c] += dout[n * C + c];
}

void clp_ref_dropout(double *out, const float *inp, size_t n, float p, const clp_rng_stream *s)
{
	uint32_t thr = (uint32_t)fmin(floor((double)p * 4294967296.0), 4294967295.0);
	double scale = 1.0 / (1.0 - (double)p);

	for (size_t i = 0; i < n; i++)
		out[i] = clp_rng_u32(s, i) >= thr ? inp[i] * scale : 0.0;
}

void clp_ref_embed_forward(double *out, const int32_t *tok, const int32_t *types,
			   const float *wte, const float *wpe, const float *wtt, size_t B,
			   size_t T, size_t C)
{
	for (size_t n = 0; n < B * T; n++)
		for (size_t c = 0; c < C; c++) {
			double v = wte[(size_t)tok[n] * C + c];

			if (wpe)
				v += wpe[(n % T) * C + c];
			if (types)
				v += wtt[(size_t)types[n] * C + c];
			out[n * C + c] = v;
		}
}

void clp_ref_embed_backward(double *dwte, double *dwpe, double *dwtt, const float *dout,
			    const int32_t *tok, const int32_t *types, size_t B, size_t T, size_t C)
{
	for (size_t n = 0; n < B * T; n++)
		for (size_t c = 0; c < C; c++) {
			double g = dout[n * C + c];

			dwte[(size_t)tok[n] * C + c] += g;
			if (dwpe)
				dwpe[(n % T) * C + c] += g;
			if (types)
				dwtt[(size_t)types[n] * C + c] += g;
		}
}

void clp_ref_rope(double *out, const float *x, size_t ld, const float *tab, size_t B, size_t T,
		  size_t nh, size_t hd, int dir)
{
	for (size_t n = 0; n < B * T; n++)
		for (size_t h = 0; h < nh; h++)
			for (size_t j = 0; j < hd / 2; j++) {
				const float *cs = tab + (n % T) * hd + 2 * j;
				size_t a = n * ld + h * hd + j, b = a + hd / 2;
				double c = cs[0], s = dir * (double)cs[1];

				out[a] = x[a] * c - x[b] * s;
				out[b] = x[b] * c + x[a] * s;
			}
}
