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

/* out = (x - mean) * rstd * w + b; saves mean, rstd. */
__kernel void clp_ln_forward(__global ST_T *out, ulong oo, __global float *mean, ulong mo,
			     __global float *rstd, ulong ro, __global const ST_T *inp, ulong io,
			     __global const ST_T *w, ulong wo, __global const ST_T *b, ulong bo,
			     uint N, uint C, float eps)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	const __global ST_T *x = inp + io + n * C;
	__global ST_T *y = out + oo + n * C;
	w += wo;
	b += bo;
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
		v8 = fma(d, d, v8);
	}
	float v = hsum8(v8);
	for (; c < C; c++)
		v += (ST_LD(x, c) - m) * (ST_LD(x, c) - m);
	const float r = rsqrt(v / (float)C + eps);
	for (c = 0; c + 8 <= C; c += 8)
		ST_SV8(y, c, fma((ST_LD8(x, c) - m) * r, ST_LD8(w, c), ST_LD8(b, c)));
	for (; c < C; c++)
		ST_SV(y, c, fma((ST_LD(x, c) - m) * r, ST_LD(w, c), ST_LD(b, c)));
	mean[mo + n] = m;
	rstd[ro + n] = r;
}

/* dinp += ...; part[blk] = (sum dout * xhat, sum dout) over the block's rows. */
__kernel void clp_ln_backward(__global float *dinp, ulong dio, __global float *part,
			      __global const float *dout, ulong doo, __global const ST_T *inp,
			      ulong io, __global const ST_T *w, ulong wo,
			      __global const float *mean, ulong mo, __global const float *rstd,
			      ulong ro, uint N, uint C, uint R)
{
	const size_t blk = get_global_id(0);
	const size_t n0 = blk * R, n1 = min((size_t)N, n0 + R);
	__global float *pw = part + blk * 2 * C, *pb = pw + C;
	uint c;

	w += wo;
	for (c = 0; c < C; c++)
		pw[c] = pb[c] = 0.0f;
	for (size_t n = n0; n < n1; n++) {
		const __global ST_T *x = inp + io + n * C;
		const __global float *g = dout + doo + n * C;
		__global float *dx = dinp + dio + n * C;
		const float m = mean[mo + n], r = rstd[ro + n];
		float8 a8 = 0, b8 = 0;

		for (c = 0; c + 8 <= C; c += 8) {
			float8 wg = ST_LD8(w, c) * vload8(0, g + c);
			a8 += wg;
			b8 = fma(wg, (ST_LD8(x, c) - m) * r, b8);
		}
		float a = hsum8(a8), bb = hsum8(b8);
		for (; c < C; c++) {
			float wg = ST_LD(w, c) * g[c];
			a += wg;
			bb = fma(wg, (ST_LD(x, c) - m) * r, bb);
		}
		const float dm = a / (float)C, dn = bb / (float)C;
		for (c = 0; c + 8 <= C; c += 8) {
			float8 gg = vload8(0, g + c), xh = (ST_LD8(x, c) - m) * r;
			float8 t = fma(-xh, dn, fma(ST_LD8(w, c), gg, -dm));
			vstore8(fma(t, r, vload8(0, dx + c)), 0, dx + c);
			vstore8(fma(gg, xh, vload8(0, pw + c)), 0, pw + c);
			vstore8(vload8(0, pb + c) + gg, 0, pb + c);
		}
		for (; c < C; c++) {
			float gg = g[c], xh = (ST_LD(x, c) - m) * r;
			float t = fma(-xh, dn, fma(ST_LD(w, c), gg, -dm));
			dx[c] = fma(t, r, dx[c]);
			pw[c] = fma(gg, xh, pw[c]);
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
		s8 = fma(v, v, s8);
	}
	float s = hsum8(s8);
	for (; c < C; c++)
		s = fma(ST_LD(x, c), ST_LD(x, c), s);
	const float r = rsqrt(s / (float)C + eps);
	for (c = 0; c + 8 <= C; c += 8)
		ST_SV8(y, c, ST_LD8(x, c) * r * ST_LD8(w, c));
	for (; c < C; c++)
		ST_SV(y, c, ST_LD(x, c) * r * ST_LD(w, c));
	rstd[ro + n] = r;
}

/* dinp += rstd (w g - xhat mean(w g xhat)); part[blk] = sum g xhat over the block's rows. */
__kernel void clp_rms_backward(__global float *dinp, ulong dio, __global float *part,
			       __global const float *dout, ulong doo, __global const ST_T *inp,
			       ulong io, __global const ST_T *w, ulong wo,
			       __global const float *rstd, ulong ro, uint N, uint C, uint R)
{
	const size_t blk = get_global_id(0);
	const size_t n0 = blk * R, n1 = min((size_t)N, n0 + R);
	__global float *pw = part + blk * C;
	uint c;

	w += wo;
	for (c = 0; c < C; c++)
		pw[c] = 0.0f;
	for (size_t n = n0; n < n1; n++) {
		const __global ST_T *x = inp + io + n * C;
		const __global float *g = dout + doo + n * C;
		__global float *dx = dinp + dio + n * C;
		const float r = rstd[ro + n];
		float8 b8 = 0;

		for (c = 0; c + 8 <= C; c += 8)
			b8 = fma(ST_LD8(w, c) * vload8(0, g + c), ST_LD8(x, c) * r, b8);
		float bb = hsum8(b8);
		for (; c < C; c++)
			bb = fma(ST_LD(w, c) * g[c], ST_LD(x, c) * r, bb);
		const float dn = bb / (float)C;
		for (c = 0; c + 8 <= C; c += 8) {
			float8 gg = vload8(0, g + c), xh = ST_LD8(x, c) * r;
			float8 t = fma(-xh, dn, ST_LD8(w, c) * gg);
			vstore8(fma(t, r, vload8(0, dx + c)), 0, dx + c);
			vstore8(fma(gg, xh, vload8(0, pw + c)), 0, pw + c);
		}
		for (; c < C; c++) {
			float gg = g[c], xh = ST_LD(x, c) * r;
			dx[c] = fma(fma(-xh, dn, ST_LD(w, c) * gg), r, dx[c]);
			pw[c] = fma(gg, xh, pw[c]);
		}
	}
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

/* part[blk] = sum of the block's R rows of x (N,C). */
__kernel void clp_rowblock_sum(__global float *part, __global const float *x, ulong xo, uint N,
			       uint C, uint R)
{
	const size_t blk = get_global_id(0);
	const size_t n0 = blk * R, n1 = min((size_t)N, n0 + R);
	__global float *p = part + blk * C;
	uint c;

	x += xo;
	for (c = 0; c < C; c++)
		p[c] = 0.0f;
	for (size_t n = n0; n < n1; n++) {
		const __global float *row = x + n * C;
		for (c = 0; c + 8 <= C; c += 8)
			vstore8(vload8(0, p + c) + vload8(0, row + c), 0, p + c);
		for (; c < C; c++)
			p[c] += row[c];
	}
}

/* dst[c] += sum over blocks of part[po + blk * stride + c], blocks in order; NN_COLS columns per
 * work-item. */
__kernel void clp_nn_colsum(__global float *dst, ulong dso, __global const float *part, ulong po,
			    uint stride, uint nblocks, uint C)
{
	const uint c0 = get_global_id(0) * NN_COLS;
	const uint c1 = min(C, c0 + NN_COLS);
	float acc[NN_COLS];

	if (c0 >= C)
		return;
	part += po;
	dst += dso;
	for (uint c = 0; c < NN_COLS; c++)
		acc[c] = 0.0f;
	for (uint blk = 0; blk < nblocks; blk++) {
		const __global float *p = part + (size_t)blk * stride;
		for (uint c = c0; c < c1; c++)
			acc[c - c0] += p[c];
	}
	for (uint c = c0; c < c1; c++)
		dst[c] += acc[c - c0];
}
