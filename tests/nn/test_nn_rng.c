/* The counter-based generator: known answers, stream naming, distribution sanity, and
 * bit-identical numbers on host and device. */
#include "tests/nn/nn_test.h"

static void test_known_answers(void)
{
	/* Random123's kat_vectors for philox4x32-10. */
	static const uint32_t kat[3][10] = {
		{0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
		{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
		 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
		{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
		 0x94fdcceb, 0x5001e420, 0x24126ea1},
	};

	for (int t = 0; t < 3; t++) {
		uint32_t c[4] = {kat[t][0], kat[t][1], kat[t][2], kat[t][3]};
		uint32_t k[2] = {kat[t][4], kat[t][5]};

		clp_rng_philox(c, k);
		for (int i = 0; i < 4; i++)
			CHECK(c[i] == kat[t][6 + i], "vector %d word %d: %08x want %08x", t, i, c[i],
			      kat[t][6 + i]);
	}
}

static void test_streams(void)
{
	clp_rng_stream a, b;
	int same = 0;

	CHECK_ERR(clp_rng_stream_init(&a, 1, 0, 70000, 0, 1), CLP_ERR_INVALID, "micro-batch",
		  "65536");
	CHECK_OK(clp_rng_stream_init(&a, 42, 7, 3, 5, CLP_RNG_DROPOUT));
	CHECK_OK(clp_rng_stream_init(&b, 42, 7, 3, 6, CLP_RNG_DROPOUT));
	for (uint64_t i = 0; i < 64; i++)
		same += clp_rng_u32(&a, i) == clp_rng_u32(&b, i);
	CHECK(same < 2, "streams of two layers share %d of 64 numbers", same);
	/* index i lies in block i/4 lane i%4; indices past 2^32 reach the high counter bits */
	CHECK(clp_rng_u32(&a, (1ull << 34) + 1) != clp_rng_u32(&a, 1), "high index bits unused");
}

static void test_distributions(void)
{
	clp_rng_stream s;
	const size_t n = 200000;
	double su = 0, sn = 0, sn2 = 0, mn = 1, mx = 0, worst = 0;

	CHECK_OK(clp_rng_stream_init(&s, 123, 1, 0, 0, CLP_RNG_INIT));
	for (size_t i = 0; i < n; i++) {
		float u = clp_rng_uniform(&s, i), z = clp_rng_normal(&s, i);

		su += u;
		mn = fmin(mn, u);
		mx = fmax(mx, u);
		sn += z;
		sn2 += (double)z * z;
		CHECK(u >= 0.0f && u < 1.0f && isfinite(z), "number %zu: u %g z %g", i, u, z);
	}
	CHECK(fabs(su / n - 0.5) < 0.005 && mn < 1e-4 && mx > 1 - 1e-4, "uniform mean %g range "
	      "[%g, %g]", su / n, mn, mx);
	CHECK(fabs(sn / n) < 0.01 && fabs(sn2 / n - 1) < 0.01, "normal mean %g var %g", sn / n,
	      sn2 / n);
	/* The fma-only Box-Muller against libm's. */
	for (size_t i = 0; i < 4096; i += 2) {
		double u1 = ((clp_rng_u32(&s, i) >> 8) + 1) * 0x1p-24, u2 = clp_rng_u32(&s, i + 1) * 0x1p-32;
		double r = sqrt(-2 * log(u1)), z0 = r * cos(2 * M_PI * u2), z1 = r * sin(2 * M_PI * u2);

		worst = fmax(worst, fabs(clp_rng_normal(&s, i) - z0));
		worst = fmax(worst, fabs(clp_rng_normal(&s, i + 1) - z1));
	}
	CHECK(worst < 2e-5, "Box-Muller differs from libm's by %g", worst);
}

static void test_device_bits(void)
{
	static const size_t sizes[] = {1, 7, 1000, 20001};
	clp_cl_ctx *ctx = th_ctx();
	clp_rng_stream s;

	if (!ctx)
		return;
	CHECK_OK(clp_rng_stream_init(&s, 0x123456789abcdefull, 99, 2, 11, CLP_RNG_INIT));
	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		size_t n = sizes[t];
		uint64_t first = t * 12345 + 3;
		float *host = malloc(n * 4), *dev = malloc(n * 4);
		uint32_t *hu = malloc(n * 4), *du = malloc(n * 4);
		cl_mem m = tn_buf(NULL, n + 5);
		size_t bad = 0;

		for (int mode = 0; mode < 3; mode++) {
			bad = 0;
			if (mode == 0) {
				clp_rng_fill_normal(host, n, &s, first, 0.5f, 0.02f);
				CHECK_OK(clp_nn_rng_normal(ctx, clp_buf_at(m, 5), n, &s, first, 0.5f,
							   0.02f));
			} else if (mode == 1) {
				clp_rng_fill_uniform(host, n, &s, first, -0.1f, 0.3f);
				CHECK_OK(clp_nn_rng_uniform(ctx, clp_buf_at(m, 5), n, &s, first,
							    -0.1f, 0.3f));
			} else {
				for (size_t i = 0; i < n; i++)
					hu[i] = clp_rng_u32(&s, first + i);
				memcpy(host, hu, n * 4);
				CHECK_OK(clp_nn_rng_u32(ctx, clp_buf_at(m, 5), n, &s, first));
			}
			tn_get(m, 5, dev, n);
			memcpy(du, dev, n * 4);
			memcpy(hu, host, n * 4);
			for (size_t i = 0; i < n; i++)
				bad += hu[i] != du[i];
			CHECK(bad == 0, "mode %d n %zu: %zu of %zu numbers differ between host and "
			      "device", mode, n, bad, n);
		}
		clReleaseMemObject(m);
		free(host);
		free(dev);
		free(hu);
		free(du);
	}
}

TH_MAIN(TH_TEST(test_known_answers), TH_TEST(test_streams), TH_TEST(test_distributions),
	TH_TEST(test_device_bits))
