/* Storage conversions fp32 <-> bf16 / fp16 on the device against cl/base/half.h, bitwise: random
 * values of every magnitude at odd sizes and offsets, and the special values (NaN of both signs,
 * inf, -0, fp32 and fp16 denormals, values that round up to inf or to the next power of two, exact
 * ties either way). The reference itself is checked on hand-computed cases first. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/convert.h"
#include "tests/harness.h"

static const size_t sizes[] = {1, 7, 33, 127, 1000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define OFF 3

static float fb(uint32_t u)
{
	return clp_bits_f32(u);
}

/* The reference on cases worked out by hand. */
static void test_reference(void)
{
	static const struct {
		uint32_t f;
		uint16_t bf, h;
	} cases[] = {
		{0x00000000u, 0x0000, 0x0000}, /* 0 */
		{0x80000000u, 0x8000, 0x8000}, /* -0 */
		{0x3f800000u, 0x3f80, 0x3c00}, /* 1 */
		{0xbf800000u, 0xbf80, 0xbc00}, /* -1 */
		{0x7f800000u, 0x7f80, 0x7c00}, /* inf */
		{0xff800000u, 0xff80, 0xfc00}, /* -inf */
		{0x7fc00000u, 0x7fc0, 0x7e00}, /* NaN */
		{0xff800001u, 0xffc0, 0xfe00}, /* -sNaN, low payload: stays NaN */
		{0x7f7fffffu, 0x7f80, 0x7c00}, /* FLT_MAX: rounds up to inf in both */
		{0x3f808000u, 0x3f80, 0x3c04}, /* 1 + 2^-8: bf16 tie to even (down) */
		{0x3f818000u, 0x3f82, 0x3c0c}, /* 1 + 3 * 2^-8: bf16 tie to even (up) */
		{0x3f801000u, 0x3f80, 0x3c00}, /* 1 + 2^-11: fp16 tie to even (down) */
		{0x3f803000u, 0x3f80, 0x3c02}, /* 1 + 3 * 2^-11: fp16 tie to even (up) */
		{0x477fe000u, 0x4780, 0x7bff}, /* 65504: the largest fp16 */
		{0x477fefffu, 0x4780, 0x7bff}, /* just below 65520: stays 65504 */
		{0x477ff000u, 0x4780, 0x7c00}, /* 65520: the tie goes to even, inf */
		{0x38800000u, 0x3880, 0x0400}, /* 2^-14: the smallest fp16 normal */
		{0x33800000u, 0x3380, 0x0001}, /* 2^-24: the smallest fp16 denormal */
		{0x33000000u, 0x3300, 0x0000}, /* 2^-25: tie between 0 and 2^-24: even, 0 */
		{0x33000001u, 0x3300, 0x0001}, /* just above 2^-25: up */
		{0x33c00000u, 0x33c0, 0x0002}, /* 1.5 * 2^-24: tie, up to even 2 */
		{0x38ffffffu, 0x3900, 0x0800}, /* just below 2^-13: rounds up a binade */
		{0x00000001u, 0x0000, 0x0000}, /* the smallest fp32 denormal */
		{0x807fffffu, 0x8080, 0x8000}, /* the largest negative fp32 denormal */
		{0x007f8000u, 0x0080, 0x0000}, /* fp32 denormal, bf16 tie up to the smallest normal */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		float f = fb(cases[i].f);
		uint16_t bf = clp_bf16_from_f32(f), h = clp_f16_from_f32(f);

		CHECK(bf == cases[i].bf, "bf16(0x%08x) = 0x%04x, want 0x%04x", cases[i].f, bf,
		      cases[i].bf);
		CHECK(h == cases[i].h, "fp16(0x%08x) = 0x%04x, want 0x%04x", cases[i].f, h,
		      cases[i].h);
	}
	/* every fp16 goes to fp32 and back unchanged (NaNs: to the quiet NaN of their sign) */
	for (uint32_t h = 0; h < 0x10000u; h++) {
		float f = clp_f16_value((uint16_t)h);
		uint16_t back = clp_f16_from_f32(f);
		int nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
		uint16_t want = nan ? (uint16_t)((h & 0x8000u) | 0x7e00u) : (uint16_t)h;

		if (back != want) {
			CHECK(0, "fp16 0x%04x -> %a -> 0x%04x", h, (double)f, back);
			break;
		}
		if (!nan && (double)f != ldexp((h & 0x7c00u) ? (double)(0x400 | (h & 0x3ffu)) :
							     (double)(h & 0x3ffu),
						 (h & 0x7c00u) ? (int)((h >> 10) & 0x1f) - 25 : -24) *
						   (h & 0x8000u ? -1 : 1) &&
		    (h & 0x7c00u) != 0x7c00u) {
			CHECK(0, "fp16 0x%04x loads as %a", h, (double)f);
			break;
		}
	}
	/* bf16 -> fp32 -> bf16 is the identity, NaNs included (they are already quiet or get
	 * the quiet bit) */
	for (uint32_t h = 0; h < 0x10000u; h++) {
		uint16_t back = clp_bf16_from_f32(clp_bf16_value((uint16_t)h));
		int nan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);

		if (back != (nan ? (uint16_t)(h | 0x40u) : (uint16_t)h)) {
			CHECK(0, "bf16 0x%04x -> fp32 -> 0x%04x", h, back);
			break;
		}
	}
}

/* Random fp32 bit patterns over every exponent, plus the special values at the front. */
static void fill_inputs(th_rng *r, float *x, size_t n)
{
	static const uint32_t special[] = {
		0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
		0x7f800001u, 0x7f7fffffu, 0xff7fffffu, 0x3f808000u, 0x3f818000u, 0x3f801000u,
		0x3f803000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x33000000u, 0x33c00000u,
		0x00000001u, 0x807fffffu, 0x007f8000u, 0x38ffffffu, 0x387fffffu, 0x7f7f8000u,
	};
	size_t ns = sizeof(special) / sizeof(special[0]);

	for (size_t i = 0; i < n; i++) {
		uint64_t v = th_next(r);

		if (i < ns) {
			x[i] = fb(special[i]);
		} else if (v & 1) { /* near the fp16 range, where its rounding matters */
			uint32_t e = (uint32_t)(96 + (v >> 8) % 48);
			x[i] = fb((uint32_t)((v >> 40) & 0x80000000u) | e << 23 |
				  (uint32_t)((v >> 16) & 0x7fffffu));
		} else {
			x[i] = fb((uint32_t)(v >> 32));
		}
	}
}

static void run_type(clp_dtype t)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(7 + (uint64_t)t);
	size_t nmax = sizes[NSIZES - 1] + 2 * OFF;
	float *x = malloc(nmax * 4), *back = malloc(nmax * 4);
	uint16_t *h = malloc(nmax * 2), *want = malloc(nmax * 2);
	cl_mem dx = NULL, dh = NULL, dy = NULL;

	if (!ctx || !x || !back || !h || !want)
		goto out;
	CHECK_OK(clp_cl_buffer(ctx, nmax * 4, "x", &dx));
	CHECK_OK(clp_cl_buffer(ctx, nmax * 2, "h", &dh));
	CHECK_OK(clp_cl_buffer(ctx, nmax * 4, "y", &dy));
	if (!dx || !dh || !dy)
		goto out;
	for (size_t si = 0; si < NSIZES; si++) {
		size_t n = sizes[si], bad = 0;

		fill_inputs(&r, x + OFF, n);
		CHECK_OK(clp_cl_write(ctx, dx, 0, nmax * 4, x));
		memset(h, 0xa5, nmax * 2);
		CHECK_OK(clp_cl_write(ctx, dh, 0, nmax * 2, h));
		/* fp32 -> 16 bits: the neighbours of the range stay untouched */
		CHECK_OK(clp_cl_convert(ctx, clp_buf_at(dh, OFF + 1), t, clp_buf_at(dx, OFF), CLP_F32,
					n));
		CHECK_OK(clp_cl_read(ctx, dh, 0, nmax * 2, h));
		clp_dtype_pack(t, want, x + OFF, n);
		for (size_t i = 0; i < nmax && bad < 5; i++) {
			uint16_t w = i >= OFF + 1 && i < OFF + 1 + n ? want[i - OFF - 1] : 0xa5a5;

			if (h[i] != w) {
				CHECK(0, "%s n=%zu: element %zu of 0x%08x is 0x%04x, want 0x%04x",
				      clp_dtype_name(t), n, i, clp_f32_bits(x[i >= OFF + 1 ? i - 1 : 0]),
				      h[i], w);
				bad++;
			}
		}
		/* 16 bits -> fp32, of those words and of random words (every pattern class) */
		for (size_t i = 0; i < n; i += 2)
			want[i] = (uint16_t)th_next(&r);
		CHECK_OK(clp_cl_write(ctx, dh, 0, n * 2, want));
		CHECK_OK(clp_cl_convert(ctx, clp_buf_at(dy, OFF), CLP_F32, clp_buf_at(dh, 0), t, n));
		CHECK_OK(clp_cl_read(ctx, dy, OFF * 4, n * 4, back));
		for (size_t i = 0; i < n && bad < 5; i++) {
			float w = t == CLP_BF16 ? clp_bf16_value(want[i]) : clp_f16_value(want[i]);

			if (clp_f32_bits(back[i]) != clp_f32_bits(w)) {
				CHECK(0, "%s n=%zu: 0x%04x loads as 0x%08x, want 0x%08x",
				      clp_dtype_name(t), n, want[i], clp_f32_bits(back[i]),
				      clp_f32_bits(w));
				bad++;
			}
		}
	}
out:
	if (dx)
		clReleaseMemObject(dx);
	if (dh)
		clReleaseMemObject(dh);
	if (dy)
		clReleaseMemObject(dy);
	free(x);
	free(back);
	free(h);
	free(want);
}

static void test_bf16(void)
{
	run_type(CLP_BF16);
}

static void test_f16(void)
{
	run_type(CLP_F16);
}

static void test_errors(void)
{
	clp_cl_ctx *ctx = th_ctx();
	cl_mem m;

	if (!ctx)
		return;
	CHECK_OK(clp_cl_buffer(ctx, 64, "m", &m));
	CHECK_ERR(clp_cl_convert(ctx, clp_buf_at(m, 0), CLP_F16, clp_buf_at(m, 8), CLP_BF16, 4),
		  CLP_ERR_INVALID, "bf16 -> fp16");
	CHECK_ERR(clp_cl_convert(ctx, clp_buf_at(m, 0), (clp_dtype)7, clp_buf_at(m, 8), CLP_F32, 4),
		  CLP_ERR_INVALID, "storage type");
	clReleaseMemObject(m);
}

TH_MAIN(TH_TEST(test_reference), TH_TEST(test_bf16), TH_TEST(test_f16), TH_TEST(test_errors))
