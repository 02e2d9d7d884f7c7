/* Capability probe (cl/caps.c): launch overhead, and one axpy in each kernel shape, so that the
 * shape that runs faster on a device is measured instead of guessed from its type or name.
 * CPU shape: a work-group of one work-item loops over a chunk. GPU shape: one element per
 * work-item, 64 work-items per work-group. */
__kernel void clp_probe_empty(__global float *x)
{
}

__kernel void clp_probe_axpy_loop(__global float *y, __global const float *x, uint n, uint chunk)
{
	const uint i0 = (uint)get_global_id(0) * chunk;
	const uint i1 = min(n, i0 + chunk);

	for (uint i = i0; i < i1; i++)
		y[i] += 2.0f * x[i];
}

__kernel void clp_probe_axpy_wide(__global float *y, __global const float *x, uint n)
{
	const uint i = (uint)get_global_id(0);

	if (i < n)
		y[i] += 2.0f * x[i];
}

/* fma() against mad(): PROBE_FMA_N dependent multiply-adds per work-item (cl/caps.c: a device
 * whose fma() is much the slower gets CLP_SLOW_FMA, half.clh). */
__kernel void clp_probe_fma(__global float *y, uint n)
{
	const uint i = (uint)get_global_id(0);
	float s = y[i], a = 0.999f + 1e-7f * (float)(i & 7);

	for (uint k = 0; k < n; k++)
		s = fma(s, a, 0.5f);
	y[i] = s;
}

__kernel void clp_probe_mad(__global float *y, uint n)
{
	const uint i = (uint)get_global_id(0);
	float s = y[i], a = 0.999f + 1e-7f * (float)(i & 7);

	for (uint k = 0; k < n; k++)
		s = mad(s, a, 0.5f);
	y[i] = s;
}
