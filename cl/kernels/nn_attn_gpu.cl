/* Fused multi-head attention, GPU shape: a work-group of ATG_WG work-items handles ATG_WG query
 * rows (forward, dQ) or key rows (dK, dV) of one head; the other operand streams through local
 * memory in tiles of ATG_TK rows. Each work-item keeps its row, and its accumulators, in private
 * arrays of ATG_HD (>= hd; the host picks it) so loops have compile-time bounds. Same maths and
 * the same per-row order as the CPU shape's (nn_attn.cl, which also provides the D / lse
 * pre-pass); sizes are arguments. Storage (cl/nn.h): q, k, v and out are value tensors of ST_T
 * (ST_TYPE, half.clh), converted to float when staged or loaded and rounded once when stored;
 * dout, dq, dk, dv and lse are float.
 *
 * The loops over the head dimension are written out in full (ATG_DALL: d = 0, 1, ..., in that
 * order, each accumulator's additions as a loop would make them) and the staging loops four or
 * eight elements at a time: llvmpipe (Mesa 22.3.6) silently ends a work-item's loops after
 * 65535 iterations in all (every loop of the kernel counted together; its compiler does not
 * honour #pragma unroll), which the key loop times the head-dim loops passed from T = 512 at
 * hd 64 (docs/OPENCL.md). Left per work-item: about 4 + 2 ATG_NS / ATG_SU loop iterations a
 * tile of ATG_TK rows plus ATG_TK per row loop of a tile. */
#include "half.clh"

#ifndef ATG_WG
#define ATG_WG 64
#endif
#ifndef ATG_TK
#define ATG_TK 16
#endif
#ifndef ATG_HD
#define ATG_HD 64
#endif
#define LOG2E_F 1.4426950408889634f
#if ATG_HD % 16 != 0 || ATG_HD > 256
#error "ATG_HD: a multiple of 16 up to 256"
#endif
/* X(d) for d = 0 .. ATG_HD - 1 in order */
#define ATG_R4(X, b) X((b)) X((b) + 1) X((b) + 2) X((b) + 3)
#define ATG_R16(X, b) ATG_R4(X, (b)) ATG_R4(X, (b) + 4) ATG_R4(X, (b) + 8) ATG_R4(X, (b) + 12)
#define ATG_R64(X, b) ATG_R16(X, (b)) ATG_R16(X, (b) + 16) ATG_R16(X, (b) + 32) ATG_R16(X, (b) + 48)
#define ATG_DALL(X) ATG_DALL_(X)
#if ATG_HD == 16
#define ATG_DALL_(X) ATG_R16(X, 0u)
#elif ATG_HD == 32
#define ATG_DALL_(X) ATG_R16(X, 0u) ATG_R16(X, 16u)
#elif ATG_HD == 64
#define ATG_DALL_(X) ATG_R64(X, 0u)
#elif ATG_HD == 128
#define ATG_DALL_(X) ATG_R64(X, 0u) ATG_R64(X, 64u)
#elif ATG_HD == 256
#define ATG_DALL_(X) ATG_R64(X, 0u) ATG_R64(X, 64u) ATG_R64(X, 128u) ATG_R64(X, 192u)
#else
#error "ATG_HD: 16, 32, 64, 128 or 256"
#endif
/* Elements of a tile each work-item stages, ATG_SU at a time (ATG_NS is a multiple of 4) */
#define ATG_NS (ATG_TK * ATG_HD / ATG_WG)
#if ATG_NS % 8 == 0
#define ATG_SU 8
#elif ATG_NS % 4 == 0
#define ATG_SU 4
#else
#error "ATG_TK * ATG_HD / ATG_WG: a multiple of 4"
#endif
#if ATG_SU == 8
#define ATG_SREP(X) ATG_R4(X, 0u) ATG_R4(X, 4u)
#else
#define ATG_SREP(X) ATG_R4(X, 0u)
#endif
#define LN2_F 0.6931471805599453f

static inline uint kv_limit_g(__global const int *kvlen, ulong klo, int has, uint b, uint T)
{
	return has ? (uint)clamp(kvlen[klo + b], 0, (int)T) : T;
}

/* Stage rows r0 .. r0+ATG_TK of a (B,T) x heads operand into a local tile, zero padded: a value
 * tensor (stage) or dout (stage_f). */
static inline void stage(__local float *tile, const __global ST_T *base, ulong ld, uint r0,
			 uint T, uint hd)
{
	for (uint t = 0; t < ATG_NS; t += ATG_SU) {
#define ST1(u)                                                                                    \
	{                                                                                          \
		const uint x = get_local_id(0) + (t + (u)) * ATG_WG, rr = x / ATG_HD, d = x % ATG_HD; \
		tile[x] = (r0 + rr < T && d < hd) ? ST_LD(base, (size_t)(r0 + rr) * ld + d) : 0.0f; \
	}
		ATG_SREP(ST1)
#undef ST1
	}
}

static inline void stage_f(__local float *tile, const __global float *base, ulong ld, uint r0,
			   uint T, uint hd)
{
	for (uint t = 0; t < ATG_NS; t += ATG_SU) {
#define ST1(u)                                                                                    \
	{                                                                                          \
		const uint x = get_local_id(0) + (t + (u)) * ATG_WG, rr = x / ATG_HD, d = x % ATG_HD; \
		tile[x] = (r0 + rr < T && d < hd) ? base[(size_t)(r0 + rr) * ld + d] : 0.0f;        \
	}
		ATG_SREP(ST1)
#undef ST1
	}
}

__kernel __attribute__((reqd_work_group_size(ATG_WG, 1, 1)))
void clp_attng_forward(__global ST_T *out, ulong oo, ulong ldo, __global float *lse, ulong lo,
		       __global const ST_T *q, ulong qo, ulong ldq, __global const ST_T *k,
		       ulong ko, ulong ldk, __global const ST_T *v, ulong vo, ulong ldv,
		       __global const int *kvlen, ulong klo, int has_kvlen, uint T, uint H,
		       uint KVH, uint hd, int causal, float scale)
{
	__local float ks[ATG_TK * ATG_HD], vs[ATG_TK * ATG_HD];
	const uint gi0 = get_group_id(0) * ATG_WG, i = gi0 + get_local_id(0);
	const uint h = get_group_id(1), b = get_group_id(2), g = h / (H / KVH);
	const uint L = kv_limit_g(kvlen, klo, has_kvlen, b, T);
	const uint kend = causal ? min(min(T, gi0 + ATG_WG), L) : L;
	const uint lim = causal ? min(i + 1, L) : L;
	const float sl2 = scale * LOG2E_F;
	const __global ST_T *kb = k + ko + (size_t)b * T * ldk + (size_t)g * hd;
	const __global ST_T *vb = v + vo + (size_t)b * T * ldv + (size_t)g * hd;
	float qr[ATG_HD], o[ATG_HD], m = -INFINITY, l = 0.0f;

#define FW_INIT(d)                                                                                \
	qr[d] = (i < T && (d) < hd) ? ST_LD(q, qo + ((size_t)b * T + i) * ldq + (size_t)h * hd + (d)) \
				    : 0.0f;                                                       \
	o[d] = 0.0f;
	ATG_DALL(FW_INIT)
#undef FW_INIT
	for (uint j0 = 0; j0 < kend; j0 += ATG_TK) {
		float s[ATG_TK], mx = m;
		barrier(CLK_LOCAL_MEM_FENCE);
		stage(ks, kb, ldk, j0, T, hd);
		stage(vs, vb, ldv, j0, T, hd);
		barrier(CLK_LOCAL_MEM_FENCE);
		for (uint jj = 0; jj < ATG_TK; jj++) {
			float a = 0.0f;
#define FW_S(d) a = CLP_FMA(qr[d], ks[jj * ATG_HD + (d)], a);
			ATG_DALL(FW_S)
#undef FW_S
			s[jj] = j0 + jj < lim ? a * sl2 : -INFINITY;
			mx = fmax(mx, s[jj]);
		}
		if (mx == -INFINITY) { /* nothing visible yet, unless a score is NaN (then NaN on) */
			int nan = 0;
			for (uint jj = 0; jj < ATG_TK; jj++)
				nan |= isnan(s[jj]);
			if (!nan)
				continue;
		}
		const float corr = exp2(m - mx);
		l *= corr;
#define FW_C(d) o[d] *= corr;
		ATG_DALL(FW_C)
#undef FW_C
		for (uint jj = 0; jj < ATG_TK; jj++) {
			const float p = exp2(s[jj] - mx);
			l += p;
#define FW_O(d) o[d] = CLP_FMA(p, vs[jj * ATG_HD + (d)], o[d]);
			ATG_DALL(FW_O)
#undef FW_O
		}
		m = mx;
	}
	if (i >= T)
		return;
	const float inv = l != 0.0f ? 1.0f / l : 0.0f; /* l >= 0 or NaN */
#define FW_ST(d)                                                                                  \
	if ((d) < hd)                                                                              \
		ST_SV(out, oo + ((size_t)b * T + i) * ldo + (size_t)h * hd + (d), o[d] * inv);
	ATG_DALL(FW_ST)
#undef FW_ST
	lse[lo + ((size_t)b * H + h) * T + i] = l != 0.0f ? CLP_FMA(m, LN2_F, log(l)) : INFINITY;
}

/* dq += scale * sum_j P (dP - D) k_j; dd, l2 from clp_attn_bwd_pre ((B,H,Tp) rows). */
__kernel __attribute__((reqd_work_group_size(ATG_WG, 1, 1)))
void clp_attng_bwd_dq(__global float *dq, ulong dqo, ulong ldq, __global const ST_T *q, ulong qo,
		      __global const ST_T *k, ulong ko, ulong ldk, __global const ST_T *v,
		      ulong vo, ulong ldv, __global const float *dout, ulong doo, ulong ldo,
		      __global const float *dd, ulong ddo, __global const float *l2, ulong l2o,
		      __global const int *kvlen, ulong klo, int has_kvlen, uint T, uint Tp,
		      uint H, uint KVH, uint hd, int causal, float scale)
{
	__local float ks[ATG_TK * ATG_HD], vs[ATG_TK * ATG_HD];
	const uint gi0 = get_group_id(0) * ATG_WG, i = gi0 + get_local_id(0);
	const uint h = get_group_id(1), b = get_group_id(2), g = h / (H / KVH);
	const uint L = kv_limit_g(kvlen, klo, has_kvlen, b, T);
	const uint kend = causal ? min(min(T, gi0 + ATG_WG), L) : L;
	const uint lim = causal ? min(i + 1, L) : L;
	const float sl2 = scale * LOG2E_F;
	const __global ST_T *kb = k + ko + (size_t)b * T * ldk + (size_t)g * hd;
	const __global ST_T *vb = v + vo + (size_t)b * T * ldv + (size_t)g * hd;
	const size_t qrow = ((size_t)b * T + i) * ldq + (size_t)h * hd;
	const size_t grow = ((size_t)b * T + i) * ldo + (size_t)h * hd;
	const size_t ri = ((size_t)b * H + h) * Tp + min(i, Tp - 1);
	float qr[ATG_HD], gr[ATG_HD], acc[ATG_HD];

#define DQ_INIT(d)                                                                                \
	qr[d] = (i < T && (d) < hd) ? ST_LD(q, qo + qrow + (d)) : 0.0f;                            \
	gr[d] = (i < T && (d) < hd) ? dout[doo + grow + (d)] : 0.0f;                               \
	acc[d] = 0.0f;
	ATG_DALL(DQ_INIT)
#undef DQ_INIT
	for (uint j0 = 0; j0 < kend; j0 += ATG_TK) {
		barrier(CLK_LOCAL_MEM_FENCE);
		stage(ks, kb, ldk, j0, T, hd);
		stage(vs, vb, ldv, j0, T, hd);
		barrier(CLK_LOCAL_MEM_FENCE);
		/* The row's lse and D are read here, after the barrier, not once before the loop:
		 * Intel's CPU compiler gives every work-item the last 16-lane chunk's copy of a
		 * value defined before a barrier when it feeds a multiply-add negated (s * sl2 - lr);
		 * docs/OPENCL.md, tests/cl/test_barrier_live.c. */
		const float lr = l2[l2o + ri], dr = dd[ddo + ri];
		for (uint jj = 0; jj < ATG_TK; jj++) {
			float s = 0.0f, dp = 0.0f;
#define DQ_S(d)                                                                                   \
	s = CLP_FMA(qr[d], ks[jj * ATG_HD + (d)], s);                                              \
	dp = CLP_FMA(gr[d], vs[jj * ATG_HD + (d)], dp);
			ATG_DALL(DQ_S)
#undef DQ_S
			const float p = j0 + jj < lim ? exp2(s * sl2 - lr) : 0.0f;
			const float ds = p * (dp - dr) * scale;
#define DQ_A(d) acc[d] = CLP_FMA(ds, ks[jj * ATG_HD + (d)], acc[d]);
			ATG_DALL(DQ_A)
#undef DQ_A
		}
	}
	if (i >= T)
		return;
#define DQ_ST(d)                                                                                  \
	if ((d) < hd)                                                                              \
		dq[dqo + qrow + (d)] += acc[d];
	ATG_DALL(DQ_ST)
#undef DQ_ST
}

/* dk, dv += over the query heads of key/value head g and all query tiles. */
__kernel __attribute__((reqd_work_group_size(ATG_WG, 1, 1)))
void clp_attng_bwd_dkv(__global float *dk, ulong dko, ulong ldk, __global float *dv, ulong dvo,
		       ulong ldv, __global const ST_T *q, ulong qo, ulong ldq,
		       __global const ST_T *k, ulong ko, __global const ST_T *v, ulong vo,
		       __global const float *dout, ulong doo, ulong ldo, __global const float *dd,
		       ulong ddo, __global const float *l2, ulong l2o, __global const int *kvlen,
		       ulong klo, int has_kvlen, uint T, uint Tp, uint H, uint KVH, uint hd,
		       int causal, float scale)
{
	__local float qs[ATG_TK * ATG_HD], gs[ATG_TK * ATG_HD], ls[ATG_TK], dsr[ATG_TK];
	const uint gj0 = get_group_id(0) * ATG_WG, j = gj0 + get_local_id(0);
	const uint g = get_group_id(1), b = get_group_id(2), grp = H / KVH;
	const uint L = kv_limit_g(kvlen, klo, has_kvlen, b, T);
	const float sl2 = scale * LOG2E_F;
	const int live = j < L;
	const size_t krow = ((size_t)b * T + j) * ldk + (size_t)g * hd;
	const size_t vrow = ((size_t)b * T + j) * ldv + (size_t)g * hd;
	float kr[ATG_HD], vr[ATG_HD], ak[ATG_HD], av[ATG_HD];

#define KV_INIT(d)                                                                                \
	kr[d] = (live && (d) < hd) ? ST_LD(k, ko + krow + (d)) : 0.0f;                             \
	vr[d] = (live && (d) < hd) ? ST_LD(v, vo + vrow + (d)) : 0.0f;                             \
	ak[d] = av[d] = 0.0f;
	ATG_DALL(KV_INIT)
#undef KV_INIT
	for (uint hh = 0; hh < grp; hh++) {
		const uint h = g * grp + hh;
		const size_t bh = (size_t)b * H + h;
		const __global ST_T *qb = q + qo + (size_t)b * T * ldq + (size_t)h * hd;
		const __global float *gb = dout + doo + (size_t)b * T * ldo + (size_t)h * hd;
		for (uint i0 = causal ? gj0 / ATG_TK * ATG_TK : 0; i0 < T; i0 += ATG_TK) {
			barrier(CLK_LOCAL_MEM_FENCE);
			stage(qs, qb, ldq, i0, T, hd);
			stage_f(gs, gb, ldo, i0, T, hd);
			for (uint x = get_local_id(0); x < ATG_TK; x += ATG_WG) {
				ls[x] = i0 + x < T ? l2[l2o + bh * Tp + i0 + x] : INFINITY;
				dsr[x] = i0 + x < T ? dd[ddo + bh * Tp + i0 + x] : 0.0f;
			}
			barrier(CLK_LOCAL_MEM_FENCE);
			for (uint ii = 0; ii < ATG_TK; ii++) {
				float s = 0.0f, dp = 0.0f;
#define KV_S(d)                                                                                   \
	s = CLP_FMA(kr[d], qs[ii * ATG_HD + (d)], s);                                              \
	dp = CLP_FMA(vr[d], gs[ii * ATG_HD + (d)], dp);
				ATG_DALL(KV_S)
#undef KV_S
				const int vis = live && !(causal && i0 + ii < j);
				const float p = vis ? exp2(s * sl2 - ls[ii]) : 0.0f;
				const float ds = p * (dp - dsr[ii]) * scale;
#define KV_A(d)                                                                                   \
	av[d] = CLP_FMA(p, gs[ii * ATG_HD + (d)], av[d]);                                          \
	ak[d] = CLP_FMA(ds, qs[ii * ATG_HD + (d)], ak[d]);
				ATG_DALL(KV_A)
#undef KV_A
			}
		}
	}
	if (!live)
		return;
#define KV_ST(d)                                                                                  \
	if ((d) < hd) {                                                                            \
		dk[dko + krow + (d)] += ak[d];                                                     \
		dv[dvo + vrow + (d)] += av[d];                                                     \
	}
	ATG_DALL(KV_ST)
#undef KV_ST
}
