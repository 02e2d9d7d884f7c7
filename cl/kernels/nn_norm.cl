/* LayerNorm and RMSNorm forward/backward, bias add and bias gradient (CPU shape).
 *
 * Forward: one work-item per row, float8 loops over C. Backward: one work-item per block of R
 * rows writes the input gradient of its rows and the block's partial parameter gradients
 * (part, 2C or C per block); clp_nn_colsum then adds the partials of all blocks in order. No
 * atomics: the result does not depend on scheduling. Sizes are arguments.
 *
 * Storage (cl/nn.h): inp, out, w, b and bias are value tensors of ST_T (ST_TYPE: fp32, bf16 or
 * fp16), loaded with ST_LD and stored with ST_SV (rounded once); dinp, dout, the partials and
 * the statistics mean and rstd are float. The fp32 build is the code as it was. */
#include "half.clh"

#ifndef NN_COLS
#define NN_COLS 64
#endif

static inline float hsum8(float8 v)
{
	float4 a = v.lo + v.hi;
	float2 b = a.lo + a.hi;
	return b.x + b.y;
}

/* One row: y = (x - mean) * rstd * w + b; saves mean, rstd. */
static inline void ln_row(__global ST_T *y, __global float *mean, __global float *rstd,
			  const __global ST_T *x, const __global ST_T *w, const __global ST_T *b,
			  uint C, float eps)
{
	uint c;
	float8 s8 = 0;
	for (c = 0; c + 8 <= C; c += 8)
		s8 += ST_LD8(x, c);
	float s = hsum8(s8);
	for (; c < C; c++)
		s += ST_LD(x, c);
	const float m = s / (float)C;
	float8 v8 = 0;
	for (c = 0; c + 8 <= C; c += 8) {
		float8 d = ST_LD8(x, c) - m;
		v8 = CLP_FMA(d, d, v8);
	}
	float v = hsum8(v8);
	for (; c < C; c++)
		v += (ST_LD(x, c) - m) * (ST_LD(x, c) - m);
	const float r = rsqrt(v / (float)C + eps);
	for (c = 0; c + 8 <= C; c += 8)
		ST_SV8(y, c, CLP_FMA((ST_LD8(x, c) - m) * r, ST_LD8(w, c), ST_LD8(b, c)));
	for (; c < C; c++)
		ST_SV(y, c, CLP_FMA((ST_LD(x, c) - m) * r, ST_LD(w, c), ST_LD(b, c)));
	*mean = m;
	*rstd = r;
}

/* out = (x - mean) * rstd * w + b; saves mean, rstd. */
__kernel void clp_ln_forward(__global ST_T *out, ulong oo, __global float *mean, ulong mo,
			     __global float *rstd, ulong ro, __global const ST_T *inp, ulong io,
			     __global const ST_T *w, ulong wo, __global const ST_T *b, ulong bo,
			     uint N, uint C, float eps)
{
	const size_t n = get_global_id(0);

	if (n >= N)
		return;
	ln_row(out + oo + n * C, mean + mo + n, rstd + ro + n, inp + io + n * C, w + wo, b + bo, C,
	       eps);
}

/* xs = xa + xb (the residual stream, stored and kept), then out = LayerNorm(xs) read back as
 * stored: clp_residual_forward (or clp_cl_add in fp32) and clp_ln_forward in one launch, the
 * same arithmetic element for element (issue 30). */
__kernel void clp_ln_residual_forward(__global ST_T *out, ulong oo, __global float *mean,
				      ulong mo, __global float *rstd, ulong ro, __global ST_T *xs,
				      ulong xso, __global const ST_T *xa, ulong xao,
				      __global const ST_T *xb, ulong xbo, __global const ST_T *w,
				      ulong wo, __global const ST_T *b, ulong bo, uint N, uint C,
				      float eps)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	__global ST_T *x = xs + xso + n * C;
	xa += xao + n * C;
	xb += xbo + n * C;
	for (c = 0; c + 8 <= C; c += 8)
		ST_SV8(x, c, ST_LD8(xa, c) + ST_LD8(xb, c));
	for (; c < C; c++)
		ST_SV(x, c, ST_LD(xa, c) + ST_LD(xb, c));
	ln_row(out + oo + n * C, mean + mo + n, rstd + ro + n, x, w + wo, b + bo, C, eps);
}

/* One row of LayerNorm's backward: *dm = mean(w g), *dn = mean(w g xhat) */
static inline void ln_row_sums(const __global ST_T *x, const __global float *g,
			       const __global ST_T *w, float m, float r, uint C, float *dm,
			       float *dn)
{
	float8 a8 = 0, b8 = 0;
	uint c;

	for (c = 0; c + 8 <= C; c += 8) {
		float8 wg = ST_LD8(w, c) * vload8(0, g + c);
		a8 += wg;
		b8 = CLP_FMA(wg, (ST_LD8(x, c) - m) * r, b8);
	}
	float a = hsum8(a8), bb = hsum8(b8);
	for (; c < C; c++) {
		float wg = ST_LD(w, c) * g[c];
		a += wg;
		bb = CLP_FMA(wg, (ST_LD(x, c) - m) * r, bb);
	}
	*dm = a / (float)C;
	*dn = bb / (float)C;
}

/* st[2n], st[2n + 1] = ln_row_sums of row n, one work-item a row: for clp_ln_backward when C
 * takes more than one strip. */
__kernel void clp_ln_backward_rows(__global float *st, ulong so, __global const float *dout,
				   ulong doo, __global const ST_T *inp, ulong io,
				   __global const ST_T *w, ulong wo, __global const float *mean,
				   ulong mo, __global const float *rstd, ulong ro, uint N, uint C)
{
	const size_t n = get_global_id(0);
	float dm, dn;

	if (n >= N)
		return;
	ln_row_sums(inp + io + n * C, dout + doo + n * C, w + wo, mean[mo + n], rstd[ro + n], C,
		    &dm, &dn);
	st[so + 2 * n] = dm;
	st[so + 2 * n + 1] = dn;
}

/* dinp += ...; part[blk] = (sum dout * xhat, sum dout) over the block's rows: one work-item a
 * block of R rows and strip of S columns (S a multiple of 8; work-item blk * strips + strip).
 * One strip (C <= S): the work-item takes each row's sums itself; more: from st
 * (clp_ln_backward_rows). Each element sees the same operations, and the block's rows come in
 * the same order, either way; a work-item's loops run S + R S / 8 iterations at most (plus
 * R (C / 8 + 7) for one strip), not C + R C / 4 (llvmpipe's 65535, docs/OPENCL.md). */
__kernel void clp_ln_backward(__global float *dinp, ulong dio, __global float *part,
			      __global const float *st, ulong so, __global const float *dout,
			      ulong doo, __global const ST_T *inp, ulong io,
			      __global const ST_T *w, ulong wo, __global const float *mean,
			      ulong mo, __global const float *rstd, ulong ro, uint N, uint C,
			      uint R, uint S)
{
	const uint strips = C / S + (C % S != 0);
	const size_t blk = get_global_id(0) / strips;
	const uint c0 = (uint)(get_global_id(0) % strips) * S, c1 = min(C, c0 + S);
	const size_t n0 = blk * R, n1 = min((size_t)N, n0 + R);
	__global float *pw = part + blk * 2 * C, *pb = pw + C;
	uint c;

	w += wo;
	for (c = c0; c < c1; c++)
		pw[c] = pb[c] = 0.0f;
	for (size_t n = n0; n < n1; n++) {
		const __global ST_T *x = inp + io + n * C;
		const __global float *g = dout + doo + n * C;
		__global float *dx = dinp + dio + n * C;
		const float m = mean[mo + n], r = rstd[ro + n];
		float dm, dn;

		if (strips == 1) {
			ln_row_sums(x, g, w, m, r, C, &dm, &dn);
		} else {
			dm = st[so + 2 * n];
			dn = st[so + 2 * n + 1];
		}
		for (c = c0; c + 8 <= c1; c += 8) {
			float8 gg = vload8(0, g + c), xh = (ST_LD8(x, c) - m) * r;
			float8 t = CLP_FMA(-xh, dn, CLP_FMA(ST_LD8(w, c), gg, -dm));
			vstore8(CLP_FMA(t, r, vload8(0, dx + c)), 0, dx + c);
			vstore8(CLP_FMA(gg, xh, vload8(0, pw + c)), 0, pw + c);
			vstore8(vload8(0, pb + c) + gg, 0, pb + c);
		}
		for (; c < c1; c++) {
			float gg = g[c], xh = (ST_LD(x, c) - m) * r;
			float t = CLP_FMA(-xh, dn, CLP_FMA(ST_LD(w, c), gg, -dm));
			dx[c] = CLP_FMA(t, r, dx[c]);
			pw[c] = CLP_FMA(gg, xh, pw[c]);
			pb[c] += gg;
		}
	}
}

/* out = x * rstd * w; saves rstd. */
__kernel void clp_rms_forward(__global ST_T *out, ulong oo, __global float *rstd, ulong ro,
			      __global const ST_T *inp, ulong io, __global const ST_T *w,
			      ulong wo, uint N, uint C, float eps)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	const __global ST_T *x = inp + io + n * C;
	__global ST_T *y = out + oo + n * C;
	w += wo;
	float8 s8 = 0;
	for (c = 0; c + 8 <= C; c += 8) {
		float8 v = ST_LD8(x, c);
		s8 = CLP_FMA(v, v, s8);
	}
	float s = hsum8(s8);
	for (; c < C; c++)
		s = CLP_FMA(ST_LD(x, c), ST_LD(x, c), s);
	const float r = rsqrt(s / (float)C + eps);
	for (c = 0; c + 8 <= C; c += 8)
		ST_SV8(y, c, ST_LD8(x, c) * r * ST_LD8(w, c));
	for (; c < C; c++)
		ST_SV(y, c, ST_LD(x, c) * r * ST_LD(w, c));
	rstd[ro + n] = r;
}

/* One row of RMSNorm's backward: mean(w g xhat) */
static inline float rms_row_sum(const __global ST_T *x, const __global float *g,
				const __global ST_T *w, float r, uint C)
{
	float8 b8 = 0;
	uint c;

	for (c = 0; c + 8 <= C; c += 8)
		b8 = CLP_FMA(ST_LD8(w, c) * vload8(0, g + c), ST_LD8(x, c) * r, b8);
	float bb = hsum8(b8);
	for (; c < C; c++)
		bb = CLP_FMA(ST_LD(w, c) * g[c], ST_LD(x, c) * r, bb);
	return bb / (float)C;
}

/* st[n] = rms_row_sum of row n, one work-item a row (as clp_ln_backward_rows) */
__kernel void clp_rms_backward_rows(__global float *st, ulong so, __global const float *dout,
				    ulong doo, __global const ST_T *inp, ulong io,
				    __global const ST_T *w, ulong wo, __global const float *rstd,
				    ulong ro, uint N, uint C)
{
	const size_t n = get_global_id(0);

	if (n >= N)
		return;
	st[so + n] = rms_row_sum(inp + io + n * C, dout + doo + n * C, w + wo, rstd[ro + n], C);
}

/* dinp += rstd (w g - xhat mean(w g xhat)); part[blk] = sum g xhat over the block's rows, in
 * strips as clp_ln_backward (st from clp_rms_backward_rows when C takes more than one). */
__kernel void clp_rms_backward(__global float *dinp, ulong dio, __global float *part,
			       __global const float *st, ulong so, __global const float *dout,
			       ulong doo, __global const ST_T *inp, ulong io,
			       __global const ST_T *w, ulong wo, __global const float *rstd,
			       ulong ro, uint N, uint C, uint R, uint S)
{
	const uint strips = C / S + (C % S != 0);
	const size_t blk = get_global_id(0) / strips;
	const uint c0 = (uint)(get_global_id(0) % strips) * S, c1 = min(C, c0 + S);
	const size_t n0 = blk * R, n1 = min((size_t)N, n0 + R);
	__global float *pw = part + blk * C;
	uint c;

	w += wo;
	for (c = c0; c < c1; c++)
		pw[c] = 0.0f;
	for (size_t n = n0; n < n1; n++) {
		const __global ST_T *x = inp + io + n * C;
		const __global float *g = dout + doo + n * C;
		__global float *dx = dinp + dio + n * C;
		const float r = rstd[ro + n];
		const float dn = strips == 1 ? rms_row_sum(x, g, w, r, C) : st[so + n];

		for (c = c0; c + 8 <= c1; c += 8) {
			float8 gg = vload8(0, g + c), xh = ST_LD8(x, c) * r;
			float8 t = CLP_FMA(-xh, dn, ST_LD8(w, c) * gg);
			vstore8(CLP_FMA(t, r, vload8(0, dx + c)), 0, dx + c);
			vstore8(CLP_FMA(gg, xh, vload8(0, pw + c)), 0, pw + c);
		}
		for (; c < c1; c++) {
			float gg = g[c], xh = ST_LD(x, c) * r;
			dx[c] = CLP_FMA(CLP_FMA(-xh, dn, ST_LD(w, c) * gg), r, dx[c]);
			pw[c] = CLP_FMA(gg, xh, pw[c]);
		}
	}
}

/* The GPU shape of the norms (issue 30): one work-item per row in work-groups of adjacent rows,
 * scalar loads only, and the backward's parameter gradients as column sums of their own
 * (clp_norm_grad_cols) instead of row-block partials. On llvmpipe (rusticl), which runs the
 * work-items of a group as the lanes of its SIMD and every float8 value as eight of them, the
 * CPU shape's float8 loops in one-work-item groups cost 8-25 ms for 128 x 64 (docs/OPENCL.md).
 * The sums are those of the CPU shape, in its order: S8_* keep the eight lanes of its float8
 * accumulators as eight scalars and add them as hsum8 does; the tails are its tails. */
#define S8_U(S) S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7)
#define S8_DECL(a) float a##0 = 0.0f, a##1 = 0.0f, a##2 = 0.0f, a##3 = 0.0f, a##4 = 0.0f, \
	a##5 = 0.0f, a##6 = 0.0f, a##7 = 0.0f
#define S8_HSUM(a) (((a##0 + a##4) + (a##2 + a##6)) + ((a##1 + a##5) + (a##3 + a##7)))

/* ln_row's sums and outputs with scalar loads, the same arithmetic element for element */
static inline void ln_row_s(__global ST_T *y, __global float *mean, __global float *rstd,
			    const __global ST_T *x, const __global ST_T *w, const __global ST_T *b,
			    uint C, float eps)
{
	uint c;
	S8_DECL(s);
	S8_DECL(v);
	for (c = 0; c + 8 <= C; c += 8) {
#define LN_S(j) s##j += ST_LD(x, c + j);
		S8_U(LN_S)
#undef LN_S
	}
	float sum = S8_HSUM(s);
	for (; c < C; c++)
		sum += ST_LD(x, c);
	const float m = sum / (float)C;
	for (c = 0; c + 8 <= C; c += 8) {
#define LN_V(j)                                                                                    \
	{                                                                                          \
		const float d = ST_LD(x, c + j) - m;                                               \
		v##j = CLP_FMA(d, d, v##j);                                                            \
	}
		S8_U(LN_V)
#undef LN_V
	}
	float var = S8_HSUM(v);
	for (; c < C; c++)
		var += (ST_LD(x, c) - m) * (ST_LD(x, c) - m);
	const float r = rsqrt(var / (float)C + eps);
	for (c = 0; c < C; c++)
		ST_SV(y, c, CLP_FMA((ST_LD(x, c) - m) * r, ST_LD(w, c), ST_LD(b, c)));
	*mean = m;
	*rstd = r;
}

__kernel void clp_ln_forward_g(__global ST_T *out, ulong oo, __global float *mean, ulong mo,
			       __global float *rstd, ulong ro, __global const ST_T *inp, ulong io,
			       __global const ST_T *w, ulong wo, __global const ST_T *b, ulong bo,
			       uint N, uint C, float eps)
{
	const size_t n = get_global_id(0);

	if (n < N)
		ln_row_s(out + oo + n * C, mean + mo + n, rstd + ro + n, inp + io + n * C, w + wo,
			 b + bo, C, eps);
}

__kernel void clp_ln_residual_forward_g(__global ST_T *out, ulong oo, __global float *mean,
					ulong mo, __global float *rstd, ulong ro, __global ST_T *xs,
					ulong xso, __global const ST_T *xa, ulong xao,
					__global const ST_T *xb, ulong xbo, __global const ST_T *w,
					ulong wo, __global const ST_T *b, ulong bo, uint N, uint C,
					float eps)
{
	const size_t n = get_global_id(0);

	if (n >= N)
		return;
	__global ST_T *x = xs + xso + n * C;
	xa += xao + n * C;
	xb += xbo + n * C;
	for (uint c = 0; c < C; c++)
		ST_SV(x, c, ST_LD(xa, c) + ST_LD(xb, c));
	ln_row_s(out + oo + n * C, mean + mo + n, rstd + ro + n, x, w + wo, b + bo, C, eps);
}

/* dinp += ... for one row (clp_ln_backward's row arithmetic; the parameter gradients are
 * clp_norm_grad_cols') */
__kernel void clp_ln_backward_g(__global float *dinp, ulong dio, __global const float *dout,
				ulong doo, __global const ST_T *inp, ulong io,
				__global const ST_T *w, ulong wo, __global const float *mean,
				ulong mo, __global const float *rstd, ulong ro, uint N, uint C)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	const __global ST_T *x = inp + io + n * C;
	const __global float *g = dout + doo + n * C;
	__global float *dx = dinp + dio + n * C;
	const float m = mean[mo + n], r = rstd[ro + n];
	S8_DECL(a);
	S8_DECL(q);

	w += wo;
	for (c = 0; c + 8 <= C; c += 8) {
#define LB_S(j)                                                                                    \
	{                                                                                          \
		const float wg = ST_LD(w, c + j) * g[c + j];                                       \
		a##j += wg;                                                                        \
		q##j = CLP_FMA(wg, (ST_LD(x, c + j) - m) * r, q##j);                                   \
	}
		S8_U(LB_S)
#undef LB_S
	}
	float sa = S8_HSUM(a), sb = S8_HSUM(q);
	for (; c < C; c++) {
		float wg = ST_LD(w, c) * g[c];
		sa += wg;
		sb = CLP_FMA(wg, (ST_LD(x, c) - m) * r, sb);
	}
	const float dm = sa / (float)C, dn = sb / (float)C;
	for (c = 0; c < C; c++) {
		const float gg = g[c], xh = (ST_LD(x, c) - m) * r;
		const float t = CLP_FMA(-xh, dn, CLP_FMA(ST_LD(w, c), gg, -dm));
		dx[c] = CLP_FMA(t, r, dx[c]);
	}
}

/* dinp += rstd (w g - xhat mean(w g xhat)) for one row (clp_rms_backward's row arithmetic) */
__kernel void clp_rms_backward_g(__global float *dinp, ulong dio, __global const float *dout,
				 ulong doo, __global const ST_T *inp, ulong io,
				 __global const ST_T *w, ulong wo, __global const float *rstd,
				 ulong ro, uint N, uint C)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	const __global ST_T *x = inp + io + n * C;
	const __global float *g = dout + doo + n * C;
	__global float *dx = dinp + dio + n * C;
	const float r = rstd[ro + n];
	S8_DECL(q);

	w += wo;
	for (c = 0; c + 8 <= C; c += 8) {
#define RB_S(j) q##j = CLP_FMA(ST_LD(w, c + j) * g[c + j], ST_LD(x, c + j) * r, q##j);
		S8_U(RB_S)
#undef RB_S
	}
	float sb = S8_HSUM(q);
	for (; c < C; c++)
		sb = CLP_FMA(ST_LD(w, c) * g[c], ST_LD(x, c) * r, sb);
	const float dn = sb / (float)C;
	for (c = 0; c < C; c++) {
		const float gg = g[c], xh = ST_LD(x, c) * r;
		dx[c] = CLP_FMA(CLP_FMA(-xh, dn, ST_LD(w, c) * gg), r, dx[c]);
	}
}

/* The norms' parameter-gradient partials in the GPU shape: work-item (i, blk) sums column
 * j = j0 + i of block blk's R rows in order from 0 (j < C: dout xhat with fma, as the row-block
 * kernels do; else dout of column j - C) into part[blk * stride + j]; clp_nn_colsum then adds
 * the blocks in order, as in the CPU shape. xhat = (x - mean) rstd, or x rstd without mean
 * (RMSNorm: has_mean 0). The loops stay short on purpose: llvmpipe (Mesa 22.3.6) ends every
 * loop nest of a work-item after 65535 iterations in all, counting divergent branches
 * (docs/OPENCL.md); a column's whole N rows in one work-item gave wrong sums at N = 32001. */
__kernel void clp_norm_grad_part(__global float *part, uint stride,
				 __global const float *dout, ulong doo, __global const ST_T *inp,
				 ulong io, __global const float *mean, ulong mo, int has_mean,
				 __global const float *rstd, ulong ro, uint N, uint C, uint R,
				 uint j0, uint ncols)
{
	const uint i = get_global_id(0), j = j0 + i, blk = get_global_id(1);
	const size_t n0 = (size_t)blk * R, n1 = min((size_t)N, n0 + R);

	if (i >= ncols || n0 >= N)
		return;
	const uint jc = j < C ? j : j - C;
	const __global float *g = dout + doo + jc;
	const __global ST_T *x = inp + io + jc;
	float p = 0.0f;
	if (j >= C)
		for (size_t n = n0; n < n1; n++)
			p += g[n * C];
	else if (has_mean)
		for (size_t n = n0; n < n1; n++)
			p = CLP_FMA(g[n * C], (ST_LD(x, n * C) - mean[mo + n]) * rstd[ro + n], p);
	else
		for (size_t n = n0; n < n1; n++)
			p = CLP_FMA(g[n * C], ST_LD(x, n * C) * rstd[ro + n], p);
	part[(size_t)blk * stride + j] = p;
}

/* out[n] += bias, one row per work-item. */
__kernel void clp_bias_forward(__global ST_T *out, ulong oo, __global const ST_T *bias,
			       ulong bo, uint N, uint C)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	__global ST_T *y = out + oo + n * C;
	bias += bo;
	for (c = 0; c + 8 <= C; c += 8)
		ST_SV8(y, c, ST_LD8(y, c) + ST_LD8(bias, c));
	for (; c < C; c++)
		ST_SV(y, c, ST_LD(y, c) + ST_LD(bias, c));
}

/* dst[c] += the column sums of x (N,C): each block of R rows summed in order from 0, the
 * blocks' sums added in order from 0 (the order of the two launches they replace, a row-block
 * partial kernel then clp_nn_colsum), the bias gradient (issue 30). The CPU shape: NN_COLS
 * columns per work-item, each row read contiguously, eight columns a vector. A launch sums
 * rows n0 .. n1 (whole blocks) onto the running sums carry[c] (from 0 when first), and adds
 * them to dst when last, else leaves them in carry: the host bounds n1 - n0 so that a
 * work-item's loops stay far below llvmpipe's silent 65535 iterations in all (N = 32001 in
 * one launch: dbias off by 25), the same additions in the same order as one launch. */
__kernel void clp_bias_grad_rows(__global float *dst, ulong dso, __global const float *x,
				 ulong xo, uint N, uint C, uint R, __global float *carry,
				 uint n0, uint n1, int first, int last)
{
	const uint c0 = get_global_id(0) * NN_COLS;

	if (c0 >= C)
		return;
	const uint w = min(C - c0, (uint)NN_COLS), nv = w / 8, nt = w - 8 * nv;
	float8 acc[NN_COLS / 8], p[NN_COLS / 8];
	float tacc[8], tp[8];

	x += xo + c0;
	dst += dso + c0;
	carry += c0;
	n1 = min(n1, N);
	for (uint v = 0; v < NN_COLS / 8; v++)
		acc[v] = 0.0f;
	for (uint t = 0; t < 8; t++)
		tacc[t] = 0.0f;
	if (!first) {
		for (uint v = 0; v < nv; v++)
			acc[v] = vload8(v, carry);
		for (uint t = 0; t < nt; t++)
			tacc[t] = carry[8 * nv + t];
	}
	for (size_t b0 = n0; b0 < n1; b0 += R) {
		const size_t b1 = min((size_t)n1, b0 + R);
		for (uint v = 0; v < NN_COLS / 8; v++)
			p[v] = 0.0f;
		for (uint t = 0; t < 8; t++)
			tp[t] = 0.0f;
		if (w == NN_COLS) { /* a full strip: a fixed count the compiler keeps in registers */
			for (size_t n = b0; n < b1; n++) {
				const __global float *row = x + n * C;
				_Pragma("unroll") for (uint v = 0; v < NN_COLS / 8; v++)
					p[v] += vload8(v, row);
			}
		} else {
			for (size_t n = b0; n < b1; n++) {
				const __global float *row = x + n * C;
				for (uint v = 0; v < nv; v++)
					p[v] += vload8(v, row);
				for (uint t = 0; t < nt; t++)
					tp[t] += row[8 * nv + t];
			}
		}
		for (uint v = 0; v < nv; v++)
			acc[v] += p[v];
		for (uint t = 0; t < nt; t++)
			tacc[t] += tp[t];
	}
	if (!last) {
		for (uint v = 0; v < nv; v++)
			vstore8(acc[v], v, carry);
		for (uint t = 0; t < nt; t++)
			carry[8 * nv + t] = tacc[t];
		return;
	}
	for (uint v = 0; v < nv; v++)
		vstore8(vload8(v, dst) + acc[v], v, dst);
	for (uint t = 0; t < nt; t++)
		dst[8 * nv + t] += tacc[t];
}

/* The same sums, the GPU shape, in two launches: work-item (c, blk) sums column c of block
 * blk's R rows in order from 0 into part[blk * C + c]; clp_nn_colsum then adds the blocks in
 * order from 0 and adds that to dst once (the same additions in the same order as the one
 * launch above). Not a column's N rows in one work-item: llvmpipe (Mesa 22.3.6) ends a
 * work-item's loops after 65535 iterations in all, silently (wrong from about 63500 rows). */
__kernel void clp_bias_grad_part(__global float *part, __global const float *x, ulong xo,
				 uint N, uint C, uint R)
{
	const uint c = get_global_id(0), blk = get_global_id(1);
	const size_t n0 = (size_t)blk * R, n1 = min((size_t)N, n0 + R);

	if (c >= C || n0 >= N)
		return;
	x += xo + c;
	float p = 0.0f;
	for (size_t n = n0; n < n1; n++)
		p += x[n * C];
	part[(size_t)blk * C + c] = p;
}

/* dst[c] += sum over blocks of part[po + blk * stride + c], blocks in order from 0 (then added
 * to dst once); one column per work-item. A strip of NN_COLS columns per work-item in a private
 * array indexed c - c0 gave wrong sums on llvmpipe (Mesa 22.3.6) from about 1000 blocks on
 * (N = 32001 rows at C = 65: every column off, the input gradient right; clpipe check's
 * layernorm / rmsnorm rows of that size): no OpenCL rule limits a private array's indexing or
 * a loop's count, so that is llvmpipe's. The sums are the same, in the same order. */
__kernel void clp_nn_colsum(__global float *dst, ulong dso, __global const float *part, ulong po,
			    uint stride, uint nblocks, uint C)
{
	const uint c = get_global_id(0);

	if (c >= C)
		return;
	part += po + c;
	float acc = 0.0f;
	for (uint blk = 0; blk < nblocks; blk++)
		acc += part[(size_t)blk * stride];
	dst[dso + c] += acc;
}

/* The same for two destinations side by side in the partials (LayerNorm's dw then db, 2C
 * columns per block): column j < C adds into d1[j], the others into d2[j - C]; one launch. */
__kernel void clp_nn_colsum2(__global float *d1, ulong o1, __global float *d2, ulong o2,
			     __global const float *part, ulong po, uint nblocks, uint C)
{
	const uint C2 = 2 * C, c = get_global_id(0);

	if (c >= C2)
		return;
	part += po + c;
	float acc = 0.0f;
	for (uint blk = 0; blk < nblocks; blk++)
		acc += part[(size_t)blk * C2];
	if (c < C)
		d1[o1 + c] += acc;
	else
		d2[o2 + c - C] += acc;
}
