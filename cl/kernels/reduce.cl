/* Accurate fp32 reductions: sum and sum of squares of a vector.
 *
 * Two passes. Pass 1: each work-item (CPU) or work-group (GPU) sums a chunk with Neumaier's
 * compensated summation, eight lanes at a time, and writes the pair (sum, compensation). Pass 2:
 * one work-item combines the pairs, again compensated, and writes the sum, the sum of squares or
 * its square root. Error stays near one rounding of the result instead of growing with n.
 * RED_FP64 (optional, needs cl_khr_fp64) accumulates in double instead. */
#ifndef RED_CHUNK
#ifdef CLP_DEV_CPU
#define RED_CHUNK 65536
#else
#define RED_CHUNK 4096
#endif
#endif
#ifndef RED_WG
#ifdef CLP_DEV_CPU
#define RED_WG 1
#else
#define RED_WG 256
#endif
#endif

#if defined(RED_FP64) && RED_FP64 && CLP_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#define RED_SUM 0
#define RED_SUMSQ 1
#define RED_NRM2 2

/* Neumaier: add v into (s, c) */
#define NEU_ADD(s, c, v)                                                                           \
	do {                                                                                       \
		acc_t t_ = (s) + (v);                                                              \
		(c) += (fabs(s) >= fabs(v)) ? (((s)-t_) + (v)) : (((v)-t_) + (s));                 \
		(s) = t_;                                                                          \
	} while (0)

/* Pass 1: chunk partials. part[2*g] = sum, part[2*g+1] = compensation, g = group index. */
__kernel void clp_reduce_partial(__global float *part, __global const float *x, ulong xoff,
				 ulong n, int square)
{
	__local acc_t ls[RED_WG], lc[RED_WG];
	const ulong g = get_group_id(0);
	const uint l = get_local_id(0);
	const ulong c0 = g * RED_CHUNK;
	const ulong c1 = min(n, c0 + RED_CHUNK);
	acc_t s = 0, c = 0;

	x += xoff;
#if RED_WG == 1
	{
		float8 s8 = 0, c8 = 0;
		ulong i = c0;

		for (; i + 8 <= c1; i += 8) {
			float8 v = vload8(0, x + i);
			float8 t;

			if (square)
				v = v * v;
			t = s8 + v;
			c8 += select((v - t) + s8, (s8 - t) + v, isgreaterequal(fabs(s8), fabs(v)));
			s8 = t;
		}
		for (int k = 0; k < 8; k++) {
			NEU_ADD(s, c, (acc_t)s8[k]);
			c += (acc_t)c8[k];
		}
		for (; i < c1; i++) {
			acc_t v = x[i];
			if (square)
				v = v * v;
			NEU_ADD(s, c, v);
		}
	}
#else
	for (ulong i = c0 + l; i < c1; i += RED_WG) {
		acc_t v = x[i];
		if (square)
			v = v * v;
		NEU_ADD(s, c, v);
	}
#endif
	ls[l] = s;
	lc[l] = c;
	barrier(CLK_LOCAL_MEM_FENCE);
	if (l == 0) {
		acc_t ts = 0, tc = 0;
		for (uint k = 0; k < RED_WG; k++) {
			NEU_ADD(ts, tc, ls[k]);
			tc += lc[k];
		}
		part[2 * g] = (float)ts;
		/* The compensation is small; keep what float can of the remainder. */
		part[2 * g + 1] = (float)(tc + (ts - (acc_t)(float)ts));
	}
}

/* Pass 2: one work-item combines ngroups partial pairs into out[ooff]. */
__kernel void clp_reduce_final(__global float *out, ulong ooff, __global const float *part,
			       uint ngroups, int mode)
{
	acc_t s = 0, c = 0;

	if (get_global_id(0) != 0)
		return;
	for (uint g = 0; g < ngroups; g++) {
		NEU_ADD(s, c, (acc_t)part[2 * g]);
		c += (acc_t)part[2 * g + 1];
	}
	s += c;
	out[ooff] = (float)(mode == RED_NRM2 ? sqrt(s) : s);
}
