/* Storage conversions fp32 <-> bf16 / fp16 (host side cl/convert.c, reference cl/base/half.h).
 * One element per work-item; offsets and n in elements of each buffer's own type. */
#include "half.clh"

__kernel void clp_f32_to_bf16(__global ushort *y, ulong yo, __global const float *x, ulong xo,
			      ulong n)
{
	const size_t i = get_global_id(0);
	if (i < n)
		y[yo + i] = clp_bf16_from(x[xo + i]);
}

__kernel void clp_bf16_to_f32(__global float *y, ulong yo, __global const ushort *x, ulong xo,
			      ulong n)
{
	const size_t i = get_global_id(0);
	if (i < n)
		y[yo + i] = CLP_BF16_LD(x, xo + i);
}

__kernel void clp_f32_to_f16(__global ushort *y, ulong yo, __global const float *x, ulong xo,
			     ulong n)
{
	const size_t i = get_global_id(0);
	if (i < n)
		clp_f16_store(x[xo + i], y, yo + i);
}

__kernel void clp_f16_to_f32(__global float *y, ulong yo, __global const half *x, ulong xo,
			     ulong n)
{
	const size_t i = get_global_id(0);
	if (i < n)
		y[yo + i] = clp_nan_canonical(vload_half(xo + i, x));
}
