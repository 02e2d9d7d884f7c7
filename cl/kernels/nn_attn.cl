/* Fused multi-head attention, CPU shape: the transpose to Kt (and Qt, Vt, dOt for the backward)
 * and the forward. The scheme, the storage rules and the helpers: nn_attn.clh. */
#include "nn_attn.clh"

/* dst (B, nh, hd, Tp) = rows (B, T) of nh heads (src + so, row stride ld), zero padded. */
__kernel void clp_attn_transpose(__global float *dst, ulong dso, __global const ST_T *src,
				 ulong so, ulong ld, uint T, uint Tp, uint nh, uint hd)
{
	const uint t0 = get_global_id(0) * 8, h = get_global_id(1), b = get_global_id(2);

	if (t0 >= Tp)
		return;
	__global float *d = dst + dso + ((size_t)(b * nh + h) * hd) * Tp + t0;
	const __global ST_T *s = src + so + (size_t)b * T * ld + (size_t)h * hd;
	const uint nt = min(8u, T - min(T, t0));
	for (uint e = 0; e < hd; e++) {
		float tmp[8];
		for (uint l = 0; l < 8; l++)
			tmp[l] = l < nt ? ST_LD(s, (size_t)(t0 + l) * ld + e) : 0.0f;
		vstore8(vload8(0, tmp), 0, d + (size_t)e * Tp);
	}
}

__kernel void clp_attn_forward(__global ST_T *out, ulong oo, ulong ldo, __global float *acc,
			       ulong ao, ulong lda, __global float *lse, ulong lo,
			       __global const ST_T *q, ulong qo, ulong ldq,
			       __global const float *qt, ulong qto,
			       __global const float *kt, ulong kto, __global const ST_T *v,
			       ulong vo, ulong ldv, __global const int *kvlen, ulong klo,
			       int has_kvlen, uint T, uint Tp, uint H, uint KVH, uint hd,
			       int causal, float scale)
{
	const uint i0 = get_global_id(0) * ATT_QB, h = get_global_id(1), b = get_global_id(2);

	if (i0 >= T)
		return;
	const uint nr = min((uint)ATT_QB, T - i0), g = h / (H / KVH);
	const uint L = kv_limit(kvlen, klo, has_kvlen, b, T);
	const float sl2 = scale * LOG2E_F;
	const __global ST_T *qp[ATT_QB];
	__global ST_T *sp[ATT_QB];
	__global float *op[ATT_QB];
	const __global float *ktb = kt + kto + (size_t)(b * KVH + g) * hd * Tp;
#if ATT_TREAD
	const __global float *qtb = qt + qto + ((size_t)b * H + h) * hd * Tp;
#endif
	const __global ST_T *vb = v + vo + (size_t)b * T * ldv + (size_t)g * hd;
	float m[ATT_QB], l[ATT_QB], al[ATT_QB], p[ATT_QB][8];
	int lim[ATT_QB];

	#pragma unroll
	for (uint r = 0; r < ATT_QB; r++) {
		const uint rr = min(r, nr - 1); /* rows past T repeat the last one, never stored */
		qp[r] = q + qo + ((size_t)b * T + i0 + rr) * ldq + (size_t)h * hd;
		sp[r] = out + oo + ((size_t)b * T + i0 + rr) * ldo + (size_t)h * hd;
		op[r] = acc + ao + ((size_t)b * T + i0 + rr) * lda + (size_t)h * hd;
		m[r] = -INFINITY;
		l[r] = 0.0f;
		lim[r] = (int)(causal ? min(i0 + rr + 1, L) : L);
	}
	for (uint r = 0; r < ATT_QB; r++)
		if (r < nr)
			for (uint d = 0; d < hd; d++)
				op[r][d] = 0.0f;
	const uint kend = causal ? min(i0 + nr, L) : L;
	for (uint j0 = 0; j0 < kend; j0 += 8) {
		float8 s[ATT_QB];
		#pragma unroll
		for (uint r = 0; r < ATT_QB; r++)
			s[r] = 0.0f;
#define ATF_S(x)                                                                           \
	{                                                                                  \
		const float8 k8 = vload8(0, ktb + (size_t)(x) * Tp + j0);                  \
		_Pragma("unroll")                                                          \
		for (uint r = 0; r < ATT_QB; r++)                                          \
			s[r] = CLP_FMA((float8)(Q_AT(r, (x))), k8, s[r]);                  \
	}
		uint e = 0;
		for (; e + 8 <= hd; e += 8) {
			ATT_BY8(ATF_S, e)
		}
		for (; e < hd; e++)
			ATF_S(e)
		#pragma unroll
		for (uint r = 0; r < ATT_QB; r++) {
			float8 sv = select(s[r] * sl2, (float8)(-INFINITY),
					   (int8)(j0) + LANES >= (int8)(lim[r]));
			const float mx = fmax(m[r], hmax8(sv));
			/* nothing visible yet; a NaN score (NaN in q or k) goes on and makes
			 * the row NaN instead */
			if (mx == -INFINITY && !any(isnan(sv))) {
				al[r] = 1.0f;
				vstore8((float8)(0.0f), 0, p[r]);
				continue;
			}
			const float8 pv = exp2(sv - mx);
			al[r] = exp2(m[r] - mx);
			l[r] = CLP_FMA(l[r], al[r], hsum8(pv));
			m[r] = mx;
			vstore8(pv, 0, p[r]);
		}
		const uint jn = min(8u, kend - j0);
		uint d = 0;
		for (; d + 8 <= hd; d += 8) {
			float8 acc[ATT_QB];
			#pragma unroll
			for (uint r = 0; r < ATT_QB; r++)
				acc[r] = vload8(0, op[r] + d) * al[r];
#define ATF_PV(j)                                                                          \
	if ((j) < jn) {                                                                    \
		const float8 vv = ST_LD8(vb, (size_t)(j0 + (j)) * ldv + d);                \
		_Pragma("unroll")                                                          \
		for (uint r = 0; r < ATT_QB; r++)                                          \
			acc[r] = CLP_FMA((float8)(p[r][(j)]), vv, acc[r]);                 \
	}
			ATT_BY8(ATF_PV, 0)
			for (uint r = 0; r < ATT_QB; r++)
				if (r < nr)
					vstore8(acc[r], 0, op[r] + d);
		}
#define ATF_PV1(j)                                                                         \
	if ((j) < jn)                                                                      \
		a = CLP_FMA(p[r][(j)], ST_LD(vb, (size_t)(j0 + (j)) * ldv + d), a);
		for (; d < hd; d++)
			for (uint r = 0; r < ATT_QB; r++)
				if (r < nr) {
					float a = op[r][d] * al[r];
					ATT_BY8(ATF_PV1, 0)
					op[r][d] = a;
				}
	}
	for (uint r = 0; r < ATT_QB; r++) {
		if (r >= nr)
			break;
		const float inv = l[r] != 0.0f ? 1.0f / l[r] : 0.0f; /* l >= 0 or NaN */
		for (uint d = 0; d < hd; d++)
			ST_SV(sp[r], d, op[r][d] * inv);
		lse[lo + ((size_t)b * H + h) * T + i0 + r] =
			l[r] != 0.0f ? CLP_FMA(m[r], LN2_F, log(l[r])) : INFINITY;
	}
}
