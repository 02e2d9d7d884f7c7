/* Optimiser kernels: gradient statistics (global norm, non-finite check, clip factor) over many
 * tensors, and AdamW. Partial sums of squares are compensated (Neumaier), GS_CHUNK elements per
 * work-item, eight lanes at a time; the final pass adds the partials of all tensors in order. */
#include "half.clh" /* CLP_FMA: fma(), or mad() where the probe found fma() slow */

#ifndef GS_CHUNK
#define GS_CHUNK 16384
#endif
#ifndef NN_EW_CHUNK
#define NN_EW_CHUNK 8192
#endif

/* out[0..2] = (sum of squares, compensation, 1 if any element is NaN/Inf) of x[0 .. n): eight
 * lanes, then the lanes in order, then the tail (clp_gstat_partial and clp_gstat_partial_each,
 * so that one launch per tensor and one per stage give the same bits). */
static void gstat_span(__global float *out, const __global float *x, ulong n)
{
	float8 s8 = 0.0f, k8 = 0.0f;
	int8 ok8 = (int8)(-1);
	float s = 0.0f, k = 0.0f;
	int ok = 1;
	ulong i = 0;

	for (; i + 8 <= n; i += 8) {
		const float8 v = vload8(0, x + i);
		const float8 sq = v * v, t = s8 + sq;
		ok8 &= isfinite(v);
		k8 += select((sq - t) + s8, (s8 - t) + sq, isgreaterequal(fabs(s8), sq));
		s8 = t;
	}
	for (int l = 0; l < 8; l++) {
		const float v = s8[l], t = s + v;
		k += (fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s) + k8[l];
		s = t;
		ok &= ok8[l] != 0;
	}
	for (; i < n; i++) {
		const float v = x[i] * x[i], t = s + v;
		ok &= isfinite(x[i]);
		k += fabs(s) >= v ? (s - t) + v : (v - t) + s;
		s = t;
	}
	out[0] = s;
	out[1] = k;
	out[2] = ok ? 0.0f : 1.0f;
}

/* part[3 (base + g) ..] = (sum of squares, compensation, 1 if any element is NaN/Inf). */
__kernel void clp_gstat_partial(__global float *part, ulong base, __global const float *x,
				ulong xo, ulong n)
{
	const ulong g = get_global_id(0), c0 = g * GS_CHUNK, c1 = min(n, c0 + GS_CHUNK);

	gstat_span(part + 3 * (base + g), x + xo + c0, c1 > c0 ? c1 - c0 : 0); /* past n: zeros */
}

/* stats[0..3] = (sumsq, nonfinite, norm, clip scale) from ng partial triples, added in order. */
static void gstat_reduce(__global float *stats, const __global float *part, ulong ng,
			 float max_norm)
{
	float s = 0.0f, k = 0.0f, bad = 0.0f;

	for (ulong g = 0; g < ng; g++) {
		const float v = part[3 * g], t = s + v;
		k += (fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s) + part[3 * g + 1];
		s = t;
		bad = fmax(bad, part[3 * g + 2]);
	}
	s += k;
	if (!isfinite(s))
		bad = 1.0f;
	const float norm = sqrt(s);
	stats[0] = s;
	stats[1] = bad;
	stats[2] = norm;
	stats[3] = bad != 0.0f ? 0.0f : max_norm > 0.0f ? fmin(1.0f, max_norm / (norm + 1e-6f)) : 1.0f;
}

/* stats = (sumsq, nonfinite, norm, clip scale) from ng partial triples. */
__kernel void clp_gstat_final(__global float *stats, ulong so, __global const float *part,
			      ulong ng, float max_norm)
{
	if (get_global_id(0) == 0)
		gstat_reduce(stats + so, part, ng, max_norm);
}

/* AdamW in PyTorch's order: p *= 1 - lr wd; m = lerp(m, g, 1 - b1); v = b2 v + (1 - b2) g^2;
 * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps), over n elements, g scaled by gs
 * (clp_adamw and clp_adamw_each). */
static void adamw_span(__global float *p, __global float *m, __global float *v,
		       const __global float *g, ulong n, float decay_mul, float b1, float b2,
		       float eps, float step_size, float bc2_sqrt, float gs)
{
	for (ulong i = 0; i < n; i++) {
		const float gr = g[i] * gs;
		const float mi = CLP_FMA(1.0f - b1, gr - m[i], m[i]);
		const float vi = CLP_FMA(1.0f - b2, gr * gr, v[i] * b2);
		const float denom = sqrt(vi) / bc2_sqrt + eps;
		m[i] = mi;
		v[i] = vi;
		p[i] = CLP_FMA(-step_size, mi / denom, p[i] * decay_mul);
	}
}

/* AdamW of one tensor: g is scaled by gscale (and the clip factor from stats); a set non-finite
 * flag in stats makes the whole update a no-op. */
__kernel void clp_adamw(__global float *p, ulong po, __global float *m, ulong mo,
			__global float *v, ulong vo, __global const float *g, ulong go, ulong n,
			float decay_mul, float b1, float b2, float eps, float step_size,
			float bc2_sqrt, float gscale, __global const float *stats, ulong so,
			int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);
	float gs = gscale;

	if (has_stats) {
		if (stats[so + 1] != 0.0f)
			return;
		gs *= stats[so + 3];
	}
	if (i0 < i1)
		adamw_span(p + po + i0, m + mo + i0, v + vo + i0, g + go + i0, i1 - i0, decay_mul, b1,
			   b2, eps, step_size, bc2_sqrt, gs);
}

/* Per-tensor statistics of many tensors of one buffer in two launches (clp_nn_grad_stats_each):
 * the same chunks, lanes and order as clp_gstat_partial and clp_gstat_final called once per
 * tensor, so that the figures are bitwise those. The table sits in the partials' buffer from
 * float tab (8-byte aligned): per chunk g (x offset, length), then per tensor t (first chunk,
 * chunks, stats offset). */
__kernel void clp_gstat_partial_each(__global float *part, ulong tab, __global const float *x)
{
	const ulong g = get_global_id(0);
	__global const ulong *tb = (__global const ulong *)(part + tab);

	gstat_span(part + 3 * g, x + tb[2 * g], tb[2 * g + 1]);
}

/* One work-item per tensor: stats[so_t ..] = (sumsq, nonfinite, norm, clip scale) of its
 * chunks' partials, as clp_gstat_final. */
__kernel void clp_gstat_final_each(__global float *stats, __global const float *part, ulong tab,
				   ulong nchunks, ulong ntensors, float max_norm)
{
	const ulong t0 = get_global_id(0);
	__global const ulong *tb = (__global const ulong *)(part + tab) + 2 * nchunks + 3 * t0;

	if (t0 < ntensors)
		gstat_reduce(stats + tb[2], part + 3 * tb[0], tb[1], max_norm);
}

/* AdamW over many tensors in one launch (clp_nn_adamw_update_each): work-item w takes table
 * row w (p, m, v, g offsets of its chunk, length, decay flag) and runs clp_adamw's loop body
 * on it, element by element the same arithmetic. */
__kernel void clp_adamw_each(__global float *p, __global float *m, __global float *v,
			     __global const float *g, __global const ulong *tab, ulong rows,
			     float decay_mul, float b1, float b2, float eps, float step_size,
			     float bc2_sqrt, float gscale, __global const float *stats, ulong so,
			     int has_stats)
{
	const ulong w = get_global_id(0);
	float gs = gscale, dm;

	if (w >= rows)
		return;
	if (has_stats) {
		if (stats[so + 1] != 0.0f)
			return;
		gs *= stats[so + 3];
	}
	tab += 6 * w;
	dm = tab[5] ? decay_mul : 1.0f;
	adamw_span(p + tab[0], m + tab[1], v + tab[2], g + tab[3], tab[4], dm, b1, b2, eps,
		   step_size, bc2_sqrt, gs);
}
