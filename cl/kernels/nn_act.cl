/* Elementwise layer kernels: GELU (tanh and erf), SwiGLU, residual backward, dropout with masks
 * drawn again from Philox instead of stored, and the device side of the random fills.
 *
 * Each work-item handles NN_EW_CHUNK consecutive elements (large on a CPU device, local size 1;
 * small on a GPU). NN_EW_CHUNK is a multiple of 4 so one Philox block serves four elements.
 * The vector loops (EW_VEC) are compiled only where a chunk can hold their vectors: in the GPU
 * shape (chunk 4) they never run, and on llvmpipe their mere presence made a kernel 3x slower
 * (docs/OPENCL.md); each element gets the same arithmetic on either path.
 * Streams arrive as (uint2 key, uint4 counter words), see philox.clh.
 *
 * Storage (cl/nn.h): activations (GELU's and SwiGLU's inputs and outputs, the residual sum,
 * dropout's forward) are ST_T (ST_TYPE: fp32, bf16 or fp16), loaded with ST_LD and stored once
 * with ST_SV; gradients, dropout's backward and the random fills are float. */
#ifdef __clang__ /* ulong8 helpers without AVX-512 change the x86 call ABI: internal, harmless */
#pragma clang diagnostic ignored "-Wpsabi"
#endif
#include "philox.clh"
#include "half.clh"

#ifndef NN_EW_CHUNK
#define NN_EW_CHUNK 8192
#endif

#define EW_RANGE(n)                                                                                \
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK;                                    \
	const ulong i1 = min((ulong)(n), i0 + NN_EW_CHUNK)

#include "nn_gelu.clh"

__kernel void clp_gelu_forward(__global ST_T *out, ulong oo, __global const ST_T *inp, ulong io,
			       ulong n, int kind)
{
	EW_RANGE(n);
	out += oo;
	inp += io;
	ulong i = i0;
#if NN_EW_CHUNK >= 8 /* EW_VEC */
	for (; i + 8 <= i1; i += 8)
		ST_SV8(out, i, gelu_f8(ST_LD8(inp, i), kind));
#endif
	for (; i < i1; i++)
		ST_SV(out, i, gelu_f(ST_LD(inp, i), kind));
}

/* fc (N,F dense) = fc + bias, rounded and kept for the backward; act = gelu(fc) as stored:
 * clp_bias_forward then clp_gelu_forward in one launch (the MLP up projection's epilogue, issue
 * 30), element for element the same arithmetic, each element on the vector or scalar path
 * clp_gelu_forward puts it on (the same EW_RANGE chunks). */
__kernel void clp_bias_gelu_forward(__global ST_T *act, ulong ao, __global ST_T *fc, ulong fo,
				    __global const ST_T *bias, ulong bo, ulong n, uint F, int kind)
{
	EW_RANGE(n);
	act += ao;
	fc += fo;
	bias += bo;
	ulong i = i0;
	uint c = (uint)(i0 % F); /* the column of element i */
#if NN_EW_CHUNK >= 8 /* EW_VEC */
	for (; i + 8 <= i1; i += 8) {
		float8 bv;
		if (c + 8 <= F) { /* the eight in one row */
			bv = ST_LD8(bias, c);
			c = c + 8 == F ? 0 : c + 8;
		} else {
			float t[8];
			for (int j = 0; j < 8; j++) {
				t[j] = ST_LD(bias, c);
				c = c + 1 == F ? 0 : c + 1;
			}
			bv = vload8(0, t);
		}
		ST_SV8(fc, i, ST_LD8(fc, i) + bv);
		ST_SV8(act, i, gelu_f8(ST_LD8(fc, i), kind));
	}
#endif
	for (; i < i1; i++) {
		ST_SV(fc, i, ST_LD(fc, i) + ST_LD(bias, c));
		ST_SV(act, i, gelu_f(ST_LD(fc, i), kind));
		c = c + 1 == F ? 0 : c + 1;
	}
}

/* dinp += gelu'(inp) dout; set: dinp = the same onto zeros (fma with 0: the bits of a zero fill
 * then this kernel, without the fill's launch). */
__kernel void clp_gelu_backward(__global float *dinp, ulong dio, __global const float *dout,
				ulong doo, __global const ST_T *inp, ulong io, ulong n, int kind,
				int set)
{
	EW_RANGE(n);
	dinp += dio;
	dout += doo;
	inp += io;
	ulong i = i0;
#if NN_EW_CHUNK >= 8 /* EW_VEC */
	for (; i + 8 <= i1; i += 8)
		vstore8(CLP_FMA(gelu_df8(ST_LD8(inp, i), kind), vload8(0, dout + i),
			    set ? (float8)(0.0f) : vload8(0, dinp + i)),
			0, dinp + i);
#endif
	for (; i < i1; i++)
		dinp[i] = CLP_FMA(gelu_df(ST_LD(inp, i), kind), dout[i], set ? 0.0f : dinp[i]);
}

/* 2-D: dim 0 over column chunks, dim 1 over rows. out rows are dense (F), gate/up use ld. */
__kernel void clp_swiglu_forward(__global ST_T *out, ulong oo, __global const ST_T *gate,
				 ulong go, __global const ST_T *up, ulong uo, ulong ld, uint N,
				 uint F)
{
	const ulong n = get_global_id(1);
	EW_RANGE(F);
	if (n >= N)
		return;
	out += oo + n * F;
	gate += go + n * ld;
	up += uo + n * ld;
	for (ulong i = i0; i < i1; i++) {
		float g = ST_LD(gate, i);
		ST_SV(out, i, g / (1.0f + exp(-g)) * ST_LD(up, i));
	}
}

__kernel void clp_swiglu_backward(__global float *dgate, ulong dgo, __global float *dup, ulong duo,
				  __global const float *dout, ulong doo,
				  __global const ST_T *gate, ulong go, __global const ST_T *up,
				  ulong uo, ulong ld, uint N, uint F)
{
	const ulong n = get_global_id(1);
	EW_RANGE(F);
	if (n >= N)
		return;
	dgate += dgo + n * ld;
	dup += duo + n * ld;
	dout += doo + n * F;
	gate += go + n * ld;
	up += uo + n * ld;
	for (ulong i = i0; i < i1; i++) {
		float g = ST_LD(gate, i), s = 1.0f / (1.0f + exp(-g)), d = dout[i];
		dup[i] += d * g * s;
		dgate[i] = CLP_FMA(d * ST_LD(up, i), s * (1.0f + g * (1.0f - s)), dgate[i]);
	}
}

/* out = a + b for 16-bit values (fp32 residuals go through clp_cl_add). */
__kernel void clp_residual_forward(__global ST_T *out, ulong oo, __global const ST_T *a, ulong ao,
				   __global const ST_T *b, ulong bo, ulong n)
{
	EW_RANGE(n);
	out += oo;
	a += ao;
	b += bo;
	ulong i = i0;
#if NN_EW_CHUNK >= 8 /* EW_VEC */
	for (; i + 8 <= i1; i += 8)
		ST_SV8(out, i, ST_LD8(a, i) + ST_LD8(b, i));
#endif
	for (; i < i1; i++)
		ST_SV(out, i, ST_LD(a, i) + ST_LD(b, i));
}

/* da += dout; db += dout (da may be db: both updates happen, in order). */
__kernel void clp_residual_backward(__global float *da, ulong dao, __global float *db, ulong dbo,
				    __global const float *dout, ulong doo, ulong n)
{
	EW_RANGE(n);
	da += dao;
	db += dbo;
	dout += doo;
	for (ulong i = i0; i < i1; i++) {
		float d = dout[i];
		da[i] += d;
		db[i] += d;
	}
}

/* mode 0: out = keep ? x * scale : 0 (forward, out may be x); mode 1: out += keep ? x * scale : 0
 * (backward: gradients, always the fp32 build). keep: number i of the stream >= thr. */
__kernel void clp_dropout(__global ST_T *out, ulong oo, __global const ST_T *x, ulong xo,
			  ulong n, uint thr, float scale, uint2 rk, uint4 rc, int mode)
{
	EW_RANGE(n);
	phx_u32 b[32];
	ulong i = i0;

	out += oo;
	x += xo;
	/* whole groups of 32 (eight Philox blocks in vector lanes), then one block at a time */
#if NN_EW_CHUNK >= 32 /* EW_VEC */
	for (; (i & 31) == 0 && i + 32 <= i1; i += 32) {
		phx_block8(b, rk.x, rk.y, rc.y, rc.z, rc.w, i >> 2);
		for (int k = 0; k < 4; k++) {
			const uint8 u = vload8(k, b);
			const float8 v = select((float8)(0.0f), ST_LD8(x, i + 8 * k) * scale, u >= thr);
			ST_SV8(out, i + 8 * k, mode ? ST_LD8(out, i + 8 * k) + v : v);
		}
	}
#endif
	for (; i < i1; i++) {
		if ((i & 3) == 0 || i == i0 || (i & 31) == 0)
			phx_block(b, rk.x, rk.y, rc.y, rc.z, rc.w, i >> 2);
		float v = b[i & 3] >= thr ? ST_LD(x, i) * scale : 0.0f;
		ST_SV(out, i, mode ? ST_LD(out, i) + v : v);
	}
}

/* Random fills of number (first + i): mode 0 normal (a + b z), 1 uniform (a + b u), 2 raw bits. */
__kernel void clp_rng_fill(__global float *out, ulong oo, ulong n, ulong first, float a, float b,
			   uint2 rk, uint4 rc, int mode)
{
	EW_RANGE(n);
	out += oo;
	for (ulong i = i0; i < i1; i++) {
		ulong idx = first + i;
		if (mode == 0)
			out[i] = PHX_FMA(b, phx_normal_at(rk.x, rk.y, rc.y, rc.z, rc.w, idx), a);
		else if (mode == 1)
			out[i] = PHX_FMA(b, phx_uniform(phx_u32_at(rk.x, rk.y, rc.y, rc.z, rc.w, idx)), a);
		else
			((__global uint *)out)[i] = phx_u32_at(rk.x, rk.y, rc.y, rc.z, rc.w, idx);
	}
}
