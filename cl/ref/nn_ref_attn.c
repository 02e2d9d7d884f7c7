/* References: attention (all T x T scores), cross-entropy (full logits), AdamW. */
#include "cl/ref/nn_ref.h"
#include "cl/base/half.h"

#include <math.h>
#include <stdlib.h>

static double att_scale(const clp_nn_attn *a)
{
	return a->scale != 0.0f ? a->scale : 1.0 / sqrt((double)a->hd);
}

/* x as a value of storage type t holds it */
static double rd(clp_dtype t, float x)
{
	return t == CLP_F32 ? (double)x : (double)clp_dtype_round(t, x);
}

static size_t att_lim(const clp_nn_attn *a, const int32_t *kv_len, size_t b, size_t i)
{
	size_t L = a->T;

	if (kv_len)
		L = kv_len[b] < 0 ? 0 : (size_t)kv_len[b] < a->T ? (size_t)kv_len[b] : a->T;
	return a->causal && i + 1 < L ? i + 1 : L;
}

/* P (T) for query (b, h, i); returns the number of visible keys and sets *lse. */
static size_t att_probs(double *p, const float *q, const float *k, const clp_nn_attn *a,
			const int32_t *kv_len, size_t b, size_t h, size_t i, double *lse,
			clp_dtype dt)
{
	const size_t g = h / (a->H / a->KVH), lim = att_lim(a, kv_len, b, i);
	const float *qi = q + (b * a->T + i) * a->ldq + h * a->hd;
	double m = -INFINITY, s = 0;

	for (size_t j = 0; j < lim; j++) {
		const float *kj = k + (b * a->T + j) * a->ldk + g * a->hd;
		double d = 0;

		for (size_t e = 0; e < a->hd; e++)
			d += rd(dt, qi[e]) * rd(dt, kj[e]);
		p[j] = d * att_scale(a);
		if (p[j] > m)
			m = p[j];
	}
	for (size_t j = 0; j < lim; j++)
		s += exp(p[j] - m);
	for (size_t j = 0; j < lim; j++)
		p[j] = exp(p[j] - m) / s;
	*lse = lim ? m + log(s) : INFINITY;
	return lim;
}

void clp_ref_attention_forward_st(double *out, double *lse, const float *q, const float *k,
				  const float *v, const clp_nn_attn *a, const int32_t *kv_len,
				  clp_dtype dt)
{
	double *p = malloc(a->T * sizeof(*p));

	if (!p)
		return;
	for (size_t b = 0; b < a->B; b++)
		for (size_t h = 0; h < a->H; h++)
			for (size_t i = 0; i < a->T; i++) {
				const size_t g = h / (a->H / a->KVH);
				double l;
				size_t lim = att_probs(p, q, k, a, kv_len, b, h, i, &l, dt);
				double *o = out + (b * a->T + i) * a->H * a->hd + h * a->hd;

				lse[(b * a->H + h) * a->T + i] = l;
				for (size_t e = 0; e < a->hd; e++) {
					double acc = 0;

					for (size_t j = 0; j < lim; j++)
						acc += p[j] * rd(dt, v[(b * a->T + j) * a->ldv +
								       g * a->hd + e]);
					o[e] = dt == CLP_F32 ? acc : rd(dt, (float)acc);
				}
			}
	free(p);
}

void clp_ref_attention_forward(double *out, double *lse, const float *q, const float *k,
			       const float *v, const clp_nn_attn *a, const int32_t *kv_len)
{
	clp_ref_attention_forward_st(out, lse, q, k, v, a, kv_len, CLP_F32);
}

void clp_ref_attention_backward_st(double *dq, double *dk, double *dv, const float *dout,
				   const float *q, const float *k, const float *v,
				   const float *out, const clp_nn_attn *a, const int32_t *kv_len,
				   clp_dtype dt)
{
	double *p = malloc(a->T * sizeof(*p)), *dp = malloc(a->T * sizeof(*dp));
	const double sc = att_scale(a);

	if (!p || !dp)
		goto out;
	for (size_t b = 0; b < a->B; b++)
		for (size_t h = 0; h < a->H; h++)
			for (size_t i = 0; i < a->T; i++) {
				const size_t g = h / (a->H / a->KVH);
				const size_t qi = (b * a->T + i) * a->ldq + h * a->hd;
				const float *go = dout + (b * a->T + i) * a->ldo + h * a->hd;
				double l, D = 0;
				size_t lim = att_probs(p, q, k, a, kv_len, b, h, i, &l, dt);

				for (size_t j = 0; j < lim; j++) {
					const float *vj = v + (b * a->T + j) * a->ldv + g * a->hd;

					dp[j] = 0;
					for (size_t e = 0; e < a->hd; e++)
						dp[j] += (double)go[e] * rd(dt, vj[e]);
					D += p[j] * dp[j];
				}
				if (out) {
					const float *oi = out + (b * a->T + i) * a->ldo + h * a->hd;

					D = 0;
					for (size_t e = 0; e < a->hd; e++)
						D += (double)go[e] * rd(dt, oi[e]);
				}
				for (size_t j = 0; j < lim; j++) {
					const size_t kj = (b * a->T + j) * a->ldk + g * a->hd;
					const size_t vj = (b * a->T + j) * a->ldv + g * a->hd;
					const double ds = p[j] * (dp[j] - D) * sc;

					for (size_t e = 0; e < a->hd; e++) {
						dq[qi + e] += ds * rd(dt, k[kj + e]);
						dk[kj + e] += ds * rd(dt, q[qi + e]);
						dv[vj + e] += p[j] * go[e];
					}
				}
			}
out:
	free(p);
	free(dp);
}

void clp_ref_attention_backward(double *dq, double *dk, double *dv, const float *dout,
				const float *q, const float *k, const float *v,
				const clp_nn_attn *a, const int32_t *kv_len)
{
	clp_ref_attention_backward_st(dq, dk, dv, dout, q, k, v, NULL, a, kv_len, CLP_F32);
}

static void logits_row(double *l, const float *h, const float *w, const float *bias, size_t n,
		       size_t C, size_t V)
{
	for (size_t j = 0; j < V; j++) {
		double d = bias ? bias[j] : 0.0;

		for (size_t c = 0; c < C; c++)
			d += (double)h[n * C + c] * w[j * C + c];
		l[j] = d;
	}
}

static double row_lse(const double *l, size_t V)
{
	double m = -INFINITY, s = 0;

	for (size_t j = 0; j < V; j++)
		if (l[j] > m)
			m = l[j];
	for (size_t j = 0; j < V; j++)
		s += exp(l[j] - m);
	return m + log(s);
}

void clp_ref_xent_forward(double *losses, double *lse, const float *h, const float *w,
			  const float *bias, const int32_t *targets, size_t N, size_t C, size_t V)
{
	double *l = malloc(V * sizeof(*l));

	if (!l)
		return;
	for (size_t n = 0; n < N; n++) {
		double z;

		logits_row(l, h, w, bias, n, C, V);
		z = row_lse(l, V);
		if (lse)
			lse[n] = z;
		losses[n] = targets[n] < 0 ? 0.0 : z - l[targets[n]];
	}
	free(l);
}

void clp_ref_xent_backward(double *dh, double *dw, double *dbias, const float *h, const float *w,
			   const float *bias, const int32_t *targets, float scale, size_t N,
			   size_t C, size_t V)
{
	double *l = malloc(V * sizeof(*l));

	if (!l)
		return;
	for (size_t n = 0; n < N; n++) {
		double z;

		if (targets[n] < 0)
			continue;
		logits_row(l, h, w, bias, n, C, V);
		z = row_lse(l, V);
		for (size_t j = 0; j < V; j++) {
			double d = (exp(l[j] - z) - (j == (size_t)targets[n])) * scale;

			if (dbias)
				dbias[j] += d;

			for (size_t c = 0; c < C; c++) {
				dh[n * C + c] += d * w[j * C + c];
				dw[j * C + c] += d * h[n * C + c];
			}
		}
	}
	free(l);
}

void clp_ref_adamw(float *p, float *m, float *v, const float *g, size_t n,
		   const clp_nn_adamw_hp *hp, int decay, float gscale)
{
	double bc1 = 1 - pow(hp->beta1, (double)hp->step), bc2 = 1 - pow(hp->beta2, (double)hp->step);

	for (size_t i = 0; i < n; i++) {
		double gr = (double)g[i] * gscale, pp = p[i];
		double mi = m[i] + (1 - (double)hp->beta1) * (gr - m[i]);
		double vi = (double)hp->beta2 * v[i] + (1 - (double)hp->beta2) * gr * gr;

		if (decay)
			pp *= 1 - (double)hp->lr * hp->weight_decay;
		pp -= hp->lr / bc1 * mi / (sqrt(vi) / sqrt(bc2) + hp->eps);
		p[i] = (float)pp;
		m[i] = (float)mi;
		v[i] = (float)vi;
	}
}
