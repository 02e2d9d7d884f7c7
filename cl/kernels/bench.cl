/* Device benchmark kernels (clpipe bench; topology/bench.h).
 *
 * bench_mad        peak compute, clpeak's method: two dependent multiply-add chains per lane
 *                  (x = y*x + y; y = x*y + x), 4096 flops per work-item at every vector width
 * bench_mad_indep  peak compute with CHAINS independent chains per lane, so that the FMA
 *                  pipelines stay full (x_c = x_c*m + b, bounded values)
 * bench_read       read-only bandwidth, clpeak's method: 16 loads per work-item, strided by the
 *                  local size (one work-group reads one contiguous block) or by the global size,
 *                  summed into one float per work-item
 * bench_write      write-only, 16 stores per work-item, local-size stride
 * bench_copy       16 loads and 16 stores per work-item, local-size stride
 * bench_noop       launch latency
 *
 * Tunables (defines): VW vector width (1, 2, 4, 8, 16), CHAINS (bench_mad_indep). Problem sizes
 * are the NDRange; the host picks local sizes (topology/bench_kernels.c). */
#ifndef VW
#define VW 4
#endif
#ifndef CHAINS
#define CHAINS 8
#endif
#define FETCH_PER_WI 16

#define CLP_CAT_(a, b) a##b
#define CLP_CAT(a, b) CLP_CAT_(a, b)
#if VW == 1
typedef float floatv;
#define LANES (0.0f)
#else
typedef CLP_CAT(float, VW) floatv;
#endif
#if VW == 2
#define LANES ((floatv)(0, 1))
#elif VW == 4
#define LANES ((floatv)(0, 1, 2, 3))
#elif VW == 8
#define LANES ((floatv)(0, 1, 2, 3, 4, 5, 6, 7))
#elif VW == 16
#define LANES ((floatv)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif

static float lanes_sum(floatv v)
{
#if VW == 1
	return v;
#elif VW == 2
	return v.s0 + v.s1;
#elif VW == 4
	return dot(v, (float4)(1.0f));
#elif VW == 8
	return dot(v.lo + v.hi, (float4)(1.0f));
#else
	float8 h = v.lo + v.hi;
	return dot(h.lo + h.hi, (float4)(1.0f));
#endif
}

#define MAD_4(x, y)                                                                             \
	x = mad(y, x, y);                                                                        \
	y = mad(x, y, x);                                                                        \
	x = mad(y, x, y);                                                                        \
	y = mad(x, y, x);
#define MAD_16(x, y) MAD_4(x, y) MAD_4(x, y) MAD_4(x, y) MAD_4(x, y)

__kernel void bench_mad(__global float *out, float a)
{
	floatv x = (floatv)(a) + LANES;
	floatv y = (floatv)((float)get_local_id(0));

	for (int i = 0; i < 128 / VW; i++) {
		MAD_16(x, y)
	}
	out[get_global_id(0)] = lanes_sum(y);
}

/* flops per work-item: iters * CHAINS * 2 * VW */
__kernel void bench_mad_indep(__global float *out, float m, float b, int iters)
{
	floatv x[CHAINS];
	floatv acc = (floatv)(0.0f);

	for (int c = 0; c < CHAINS; c++)
		x[c] = (floatv)((float)(get_global_id(0) & 7) + (float)c) + LANES;
	for (int i = 0; i < iters; i++) {
#pragma unroll
		for (int c = 0; c < CHAINS; c++)
			x[c] = mad(x[c], (floatv)(m), (floatv)(b));
	}
	for (int c = 0; c < CHAINS; c++)
		acc += x[c];
	out[get_global_id(0)] = lanes_sum(acc);
}

/* The bandwidth kernels keep clpeak's indexing (int) and loop (4 x 4 accesses): measured side by
 * side, a fully unrolled loop with 64-bit indices reads 10-25% faster through PoCL, and the
 * point of this figure is to compare with clpeak. */
#define STEP4(op)                                                                               \
	op;                                                                                     \
	id += step;                                                                             \
	op;                                                                                     \
	id += step;                                                                             \
	op;                                                                                     \
	id += step;                                                                             \
	op;                                                                                     \
	id += step;

__kernel void bench_read(__global const floatv *a, __global float *out, int global_stride)
{
	int id, step;
	floatv sum = (floatv)(0.0f);

	if (global_stride) {
		id = get_global_id(0);
		step = get_global_size(0);
	} else {
		id = get_group_id(0) * get_local_size(0) * FETCH_PER_WI + get_local_id(0);
		step = get_local_size(0);
	}
	for (int i = 0; i < FETCH_PER_WI / 4; i++) {
		STEP4(sum += a[id])
	}
	out[get_global_id(0)] = lanes_sum(sum);
}

__kernel void bench_write(__global floatv *b, float v)
{
	int id = get_group_id(0) * get_local_size(0) * FETCH_PER_WI + get_local_id(0);
	int step = get_local_size(0);
	floatv x = (floatv)(v) + LANES;

	for (int i = 0; i < FETCH_PER_WI / 4; i++) {
		STEP4(b[id] = x)
	}
}

__kernel void bench_copy(__global const floatv *a, __global floatv *b)
{
	int id = get_group_id(0) * get_local_size(0) * FETCH_PER_WI + get_local_id(0);
	int step = get_local_size(0);

	for (int i = 0; i < FETCH_PER_WI / 4; i++) {
		STEP4(b[id] = a[id])
	}
}

__kernel void bench_noop(__global float *out)
{
	if (get_global_id(0) == (size_t)-1)
		out[0] = 0.0f; /* never: keeps the argument used */
}
