/* 16-bit storage formats and their rounding, in plain C: the host side and the references of the
 * device kernels (cl/kernels/half.clh computes the same bits).
 *
 *   bf16  the upper 16 bits of an IEEE fp32: 8-bit exponent, 7-bit mantissa. Store rounds to
 *         nearest, ties to even; a NaN stays a NaN (sign and upper payload kept, quiet bit set);
 *         finite values past the largest bf16 round to inf. Load is exact (a shift).
 *   fp16  IEEE binary16: 5-bit exponent, 10-bit mantissa. Store rounds to nearest, ties to even
 *         (what vstore_half_rte does), with denormals; every NaN becomes the quiet NaN of its sign
 *         (0x7e00 | sign: payloads are implementation-defined in OpenCL, so both sides make it
 *         canonical). Load is exact; a NaN loads as the quiet fp32 NaN of its sign.
 * Only storage: arithmetic stays fp32 everywhere (cl_khr_fp16 is absent on PoCL's CPU device and
 * NVIDIA's OpenCL). */
#ifndef CLP_BASE_HALF_H
#define CLP_BASE_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum clp_dtype {
	CLP_F32 = 0,
	CLP_BF16 = 1,
	CLP_F16 = 2,
	CLP_DTYPE_COUNT
} clp_dtype;

static inline const char *clp_dtype_name(clp_dtype t)
{
	return t == CLP_F32 ? "fp32" : t == CLP_BF16 ? "bf16" : t == CLP_F16 ? "fp16" : "?";
}

static inline size_t clp_dtype_size(clp_dtype t)
{
	return t == CLP_F32 ? 4 : 2;
}

static inline uint32_t clp_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float clp_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint16_t clp_bf16_from_f32(float f)
{
	uint32_t u = clp_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float clp_bf16_value(uint16_t h)
{
	return clp_bits_f32((uint32_t)h << 16);
}

static inline uint16_t clp_f16_from_f32(float f)
{
	uint32_t u = clp_f32_bits(f), a = u & 0x7fffffffu, r;
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);

	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);
	if (a >= 0x477ff000u) /* 65520 and up (and inf): the tie above 65504 goes to even, inf */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x33000000u) /* below 2^-25: zero */
		return sign;
	if (a < 0x38800000u) { /* below 2^-14: a denormal in units of 2^-24 */
		uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
		uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);

		if (rem > half || (rem == half && (q & 1u)))
			q++;
		return (uint16_t)(sign | q);
	}
	r = a - 0x38000000u; /* rebias 127 -> 15 */
	r += 0xfffu + ((r >> 13) & 1u);
	return (uint16_t)(sign | (r >> 13));
}

static inline float clp_f16_value(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

	if (e == 31)
		return clp_bits_f32(sign | (m ? 0x7fc00000u : 0x7f800000u));
	if (e == 0) {
		float v = (float)m * 0x1p-24f; /* exact */

		return clp_bits_f32(sign | clp_f32_bits(v));
	}
	return clp_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* The program define that picks a kernel's value storage (cl/kernels/half.clh ST_TYPE): "" for
 * fp32, so an fp32 program builds exactly as one that knows no storage types. */
static inline const char *clp_dtype_st_define(clp_dtype t)
{
	return t == CLP_BF16 ? "#define ST_TYPE 1\n" : t == CLP_F16 ? "#define ST_TYPE 2\n" : "";
}

/* One value through a storage format and back (the rounding a 16-bit operand sees). */
static inline float clp_dtype_round(clp_dtype t, float f)
{
	return t == CLP_BF16 ? clp_bf16_value(clp_bf16_from_f32(f))
	       : t == CLP_F16 ? clp_f16_value(clp_f16_from_f32(f))
			      : f;
}

/* n values between a float array and 16-bit words (t = CLP_BF16 or CLP_F16). */
static inline void clp_dtype_pack(clp_dtype t, uint16_t *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = t == CLP_BF16 ? clp_bf16_from_f32(src[i]) : clp_f16_from_f32(src[i]);
}

static inline void clp_dtype_unpack(clp_dtype t, float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = t == CLP_BF16 ? clp_bf16_value(src[i]) : clp_f16_value(src[i]);
}

#endif
