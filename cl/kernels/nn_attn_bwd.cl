/* Fused multi-head attention, CPU shape: the backward (the D / lse pre-pass, which the GPU shape
 * uses too, dQ, and dK / dV). The scheme, the storage rules and the helpers: nn_attn.clh; the
 * transposed operands come from nn_attn.cl's clp_attn_transpose. */
#include "nn_attn.clh"

/* D = rowsum(dO * O) and lse * log2(e) into (B, H, Tp) arrays; padding rows get D = 0 and
 * +inf (probability 0). dO rows use the stride of O. */
__kernel void clp_attn_bwd_pre(__global float *dd, ulong ddo, __global float *l2, ulong l2o,
			       __global const float *dout, ulong doo, __global const ST_T *out,
			       ulong oo, ulong ldo, __global const float *lse, ulong lo, uint T,
			       uint Tp, uint H, uint hd)
{
	const uint t0 = get_global_id(0) * 8, h = get_global_id(1), b = get_global_id(2);

	for (uint t = t0; t < min(t0 + 8, Tp); t++) {
		const size_t o = ((size_t)b * H + h) * Tp + t;
		if (t >= T) {
			dd[ddo + o] = 0.0f;
			l2[l2o + o] = INFINITY;
			continue;
		}
		const size_t row = ((size_t)b * T + t) * ldo + (size_t)h * hd;
		float8 a8 = 0.0f;
		uint d = 0;
		for (; d + 8 <= hd; d += 8)
			a8 = CLP_FMA(vload8(0, dout + doo + row + d), ST_LD8(out, oo + row + d), a8);
		float a = hsum8(a8);
		for (; d < hd; d++)
			a = CLP_FMA(dout[doo + row + d], ST_LD(out, oo + row + d), a);
		dd[ddo + o] = a;
		l2[l2o + o] = lse[lo + ((size_t)b * H + h) * T + t] * LOG2E_F;
	}
}

/* dQ for ATT_QB query rows: loops over key blocks, recomputing P and dP = dO V^T. */
__kernel void clp_attn_bwd_dq(__global float *dq, ulong dqo, ulong ldq, __global const ST_T *q,
			      ulong qo, __global const ST_T *k, ulong ko, ulong ldk,
			      __global const float *qt, ulong qto,
			      __global const float *kt, ulong kto, __global const float *vt,
			      ulong vto, __global const float *dout, ulong doo, ulong ldo,
			      __global const float *dd, ulong ddo, __global const float *l2,
			      ulong l2o, __global const int *kvlen, ulong klo, int has_kvlen,
			      uint T, uint Tp, uint H, uint KVH, uint hd, int causal, float scale)
{
	const uint i0 = get_global_id(0) * ATT_QB, h = get_global_id(1), b = get_global_id(2);

	if (i0 >= T)
		return;
	const uint nr = min((uint)ATT_QB, T - i0), g = h / (H / KVH);
	const uint L = kv_limit(kvlen, klo, has_kvlen, b, T);
	const float sl2 = scale * LOG2E_F;
	const __global ST_T *qp[ATT_QB];
	const __global float *gp[ATT_QB];
	__global float *dqp[ATT_QB];
	const __global float *ktb = kt + kto + (size_t)(b * KVH + g) * hd * Tp;
	const __global float *vtb = vt + vto + (size_t)(b * KVH + g) * hd * Tp;
#if ATT_TREAD
	const __global float *qtb = qt + qto + ((size_t)b * H + h) * hd * Tp;
#endif
	const __global ST_T *kb = k + ko + (size_t)b * T * ldk + (size_t)g * hd;
	float lr[ATT_QB], dr[ATT_QB], ds[ATT_QB][8];
	int lim[ATT_QB];

	#pragma unroll
	for (uint r = 0; r < ATT_QB; r++) {
		const uint rr = min(r, nr - 1);
		const size_t o = ((size_t)b * H + h) * Tp + i0 + rr;
		qp[r] = q + qo + ((size_t)b * T + i0 + rr) * ldq + (size_t)h * hd;
		dqp[r] = dq + dqo + ((size_t)b * T + i0 + rr) * ldq + (size_t)h * hd;
		gp[r] = dout + doo + ((size_t)b * T + i0 + rr) * ldo + (size_t)h * hd;
		lr[r] = l2[l2o + o];
		dr[r] = dd[ddo + o];
		lim[r] = (int)(causal ? min(i0 + rr + 1, L) : L);
	}
	const uint kend = causal ? min(i0 + nr, L) : L;
	for (uint j0 = 0; j0 < kend; j0 += 8) {
		float8 s[ATT_QB], dp[ATT_QB];
		#pragma unroll
		for (uint r = 0; r < ATT_QB; r++)
			s[r] = dp[r] = 0.0f;
#define ATQ_S(x)                                                                           \
	{                                                                                  \
		const float8 k8 = vload8(0, ktb + (size_t)(x) * Tp + j0);                  \
		const float8 v8 = vload8(0, vtb + (size_t)(x) * Tp + j0);                  \
		_Pragma("unroll")                                                          \
		for (uint r = 0; r < ATT_QB; r++) {                                        \
			s[r] = CLP_FMA((float8)(Q_AT(r, (x))), k8, s[r]);                  \
			dp[r] = CLP_FMA((float8)(gp[r][(x)]), v8, dp[r]);                  \
		}                                                                          \
	}
		uint e = 0;
		for (; e + 8 <= hd; e += 8) {
			ATT_BY8(ATQ_S, e)
		}
		for (; e < hd; e++)
			ATQ_S(e)
		#pragma unroll
		for (uint r = 0; r < ATT_QB; r++) {
			float8 pv = exp2(s[r] * sl2 - lr[r]);
			pv = select(pv, (float8)(0.0f), (int8)(j0) + LANES >= (int8)(lim[r]));
			vstore8(pv * (dp[r] - dr[r]) * scale, 0, ds[r]);
		}
		const uint jn = min(8u, kend - j0);
		uint d = 0;
		for (; d + 8 <= hd; d += 8) {
			float8 acc[ATT_QB];
			#pragma unroll
			for (uint r = 0; r < ATT_QB; r++)
				acc[r] = vload8(0, dqp[r] + d);
#define ATQ_DK(j)                                                                          \
	if ((j) < jn) {                                                                    \
		const float8 kk = ST_LD8(kb, (size_t)(j0 + (j)) * ldk + d);                \
		_Pragma("unroll")                                                          \
		for (uint r = 0; r < ATT_QB; r++)                                          \
			acc[r] = CLP_FMA((float8)(ds[r][(j)]), kk, acc[r]);                \
	}
			ATT_BY8(ATQ_DK, 0)
			for (uint r = 0; r < ATT_QB; r++)
				if (r < nr)
					vstore8(acc[r], 0, dqp[r] + d);
		}
#define ATQ_DK1(j)                                                                         \
	if ((j) < jn)                                                                      \
		a = CLP_FMA(ds[r][(j)], ST_LD(kb, (size_t)(j0 + (j)) * ldk + d), a);
		for (; d < hd; d++)
			for (uint r = 0; r < ATT_QB; r++)
				if (r < nr) {
					float a = dqp[r][d];
					ATT_BY8(ATQ_DK1, 0)
					dqp[r][d] = a;
				}
	}
}

/* dK, dV for ATT_KB key rows of one key/value head, summed over the query heads of its group
 * and over query blocks of 8 (vectorised over queries through Qt and dOt). */
__kernel void clp_attn_bwd_dkv(__global float *dk, ulong dko, ulong ldk, __global float *dv,
			       ulong dvo, ulong ldv, __global const ST_T *q, ulong qo, ulong ldq,
			       __global const ST_T *k, ulong ko, __global const ST_T *v, ulong vo,
			       __global const float *kt, ulong kto, __global const float *vt,
			       ulong vto, __global const float *qt, ulong qto, __global const float *gt,
			       ulong gto, __global const float *dout, ulong doo, ulong ldo,
			       __global const float *dd, ulong ddo, __global const float *l2,
			       ulong l2o, __global const int *kvlen, ulong klo, int has_kvlen,
			       uint T, uint Tp, uint H, uint KVH, uint hd, int causal, float scale)
{
	const uint j0 = get_global_id(0) * ATT_KB, g = get_global_id(1), b = get_global_id(2);
	const uint L = kv_limit(kvlen, klo, has_kvlen, b, T);

	if (j0 >= L)
		return; /* padding keys get no gradient */
	const uint nk = min((uint)ATT_KB, L - j0), grp = H / KVH;
	const float sl2 = scale * LOG2E_F;
	const __global ST_T *kp[ATT_KB], *vp[ATT_KB];
	__global float *dkp[ATT_KB], *dvp[ATT_KB];
	float pt[ATT_KB][8], st[ATT_KB][8];
#if ATT_TREAD
	const __global float *ktb = kt + kto + (size_t)(b * KVH + g) * hd * Tp;
	const __global float *vtb = vt + vto + (size_t)(b * KVH + g) * hd * Tp;
#endif

	#pragma unroll
	for (uint c = 0; c < ATT_KB; c++) {
		const size_t row = (size_t)b * T + j0 + min(c, nk - 1);
		kp[c] = k + ko + row * ldk + (size_t)g * hd;
		vp[c] = v + vo + row * ldv + (size_t)g * hd;
		dkp[c] = dk + dko + row * ldk + (size_t)g * hd;
		dvp[c] = dv + dvo + row * ldv + (size_t)g * hd;
	}
	for (uint hh = 0; hh < grp; hh++) {
		const uint h = g * grp + hh;
		const size_t bh = (size_t)b * H + h;
		const __global float *qtb = qt + qto + bh * hd * Tp, *gtb = gt + gto + bh * hd * Tp;
		const __global ST_T *qb = q + qo + (size_t)b * T * ldq + (size_t)h * hd;
		const __global float *gb = dout + doo + (size_t)b * T * ldo + (size_t)h * hd;
		for (uint i0 = causal ? (j0 & ~7u) : 0; i0 < T; i0 += 8) {
			float8 s[ATT_KB], dp[ATT_KB];
			#pragma unroll
			for (uint c = 0; c < ATT_KB; c++)
				s[c] = dp[c] = 0.0f;
#define ATK_S(x)                                                                           \
	{                                                                                  \
		const float8 q8 = vload8(0, qtb + (size_t)(x) * Tp + i0);                  \
		const float8 g8 = vload8(0, gtb + (size_t)(x) * Tp + i0);                  \
		_Pragma("unroll")                                                          \
		for (uint c = 0; c < ATT_KB; c++) {                                        \
			s[c] = CLP_FMA((float8)(K_AT(c, (x))), q8, s[c]);                  \
			dp[c] = CLP_FMA((float8)(V_AT(c, (x))), g8, dp[c]);                \
		}                                                                          \
	}
			uint e = 0;
			for (; e + 8 <= hd; e += 8) {
				ATT_BY8(ATK_S, e)
			}
			for (; e < hd; e++)
				ATK_S(e)
			const float8 l8 = vload8(0, l2 + l2o + bh * Tp + i0);
			const float8 d8 = vload8(0, dd + ddo + bh * Tp + i0);
			#pragma unroll
			for (uint c = 0; c < ATT_KB; c++) {
				float8 pv = exp2(s[c] * sl2 - l8);
				if (causal)
					pv = select(pv, (float8)(0.0f),
						    (int8)(i0) + LANES < (int8)(j0 + c));
				vstore8(pv, 0, pt[c]);
				vstore8(pv * (dp[c] - d8) * scale, 0, st[c]);
			}
			const uint in = min(8u, T - i0);
			uint d = 0;
			for (; d + 8 <= hd; d += 8) {
				float8 av[ATT_KB], ak[ATT_KB];
				#pragma unroll
				for (uint c = 0; c < ATT_KB; c++) {
					av[c] = vload8(0, dvp[c] + d);
					ak[c] = vload8(0, dkp[c] + d);
				}
#define ATK_GQ(i)                                                                          \
	if ((i) < in) {                                                                    \
		const float8 gg = vload8(0, gb + (size_t)(i0 + (i)) * ldo + d);            \
		const float8 qq = ST_LD8(qb, (size_t)(i0 + (i)) * ldq + d);                \
		_Pragma("unroll")                                                          \
		for (uint c = 0; c < ATT_KB; c++) {                                        \
			av[c] = CLP_FMA((float8)(pt[c][(i)]), gg, av[c]);                  \
			ak[c] = CLP_FMA((float8)(st[c][(i)]), qq, ak[c]);                  \
		}                                                                          \
	}
				ATT_BY8(ATK_GQ, 0)
				for (uint c = 0; c < ATT_KB; c++)
					if (c < nk) {
						vstore8(av[c], 0, dvp[c] + d);
						vstore8(ak[c], 0, dkp[c] + d);
					}
			}
#define ATK_GQ1(i)                                                                         \
	if ((i) < in) {                                                                    \
		a = CLP_FMA(pt[c][(i)], gb[(size_t)(i0 + (i)) * ldo + d], a);              \
		bk = CLP_FMA(st[c][(i)], ST_LD(qb, (size_t)(i0 + (i)) * ldq + d), bk);     \
	}
			for (; d < hd; d++)
				for (uint c = 0; c < ATT_KB; c++)
					if (c < nk) {
						float a = dvp[c][d], bk = dkp[c][d];
						ATT_BY8(ATK_GQ1, 0)
						dvp[c][d] = a;
						dkp[c][d] = bk;
					}
		}
	}
}
