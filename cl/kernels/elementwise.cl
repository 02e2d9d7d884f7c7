/* Elementwise kernels: fill, scale, axpy, add, mul.
 *
 * Each work-item handles EW_CHUNK consecutive elements. On a CPU device (PoCL) a large chunk and
 * a local size of 1 give one plain, vectorisable loop per work-group; on a GPU a chunk of 1 gives
 * coalesced accesses. Sizes and offsets are arguments, never defines. */
#ifndef EW_CHUNK
#ifdef CLP_DEV_CPU
#define EW_CHUNK 8192
#else
#define EW_CHUNK 1
#endif
#endif

#define EW_RANGE(n)                                                                                \
	const ulong i0 = (ulong)get_global_id(0) * EW_CHUNK;                                       \
	const ulong i1 = min((ulong)(n), i0 + EW_CHUNK)

__kernel void clp_fill(__global float *y, ulong yoff, float v, ulong n)
{
	EW_RANGE(n);
	y += yoff;
	for (ulong i = i0; i < i1; i++)
		y[i] = v;
}

__kernel void clp_scale(__global float *y, ulong yoff, float a, ulong n)
{
	EW_RANGE(n);
	y += yoff;
	for (ulong i = i0; i < i1; i++)
		y[i] *= a;
}

/* y += a * x */
__kernel void clp_axpy(__global float *y, ulong yoff, __global const float *x, ulong xoff, float a,
		       ulong n)
{
	EW_RANGE(n);
	y += yoff;
	x += xoff;
	for (ulong i = i0; i < i1; i++)
		y[i] = fma(a, x[i], y[i]);
}

/* z = x + y (z may alias x or y) */
__kernel void clp_add(__global float *z, ulong zoff, __global const float *x, ulong xoff,
		      __global const float *y, ulong yoff, ulong n)
{
	EW_RANGE(n);
	z += zoff;
	x += xoff;
	y += yoff;
	for (ulong i = i0; i < i1; i++)
		z[i] = x[i] + y[i];
}

/* z = x * y (z may alias x or y) */
__kernel void clp_mul(__global float *z, ulong zoff, __global const float *x, ulong xoff,
		      __global const float *y, ulong yoff, ulong n)
{
	EW_RANGE(n);
	z += zoff;
	x += xoff;
	y += yoff;
	for (ulong i = i0; i < i1; i++)
		z[i] = x[i] * y[i];
}
