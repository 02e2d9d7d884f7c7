/* Host side of the counter-based generator: the kernel header compiled as C. */
#include "cl/base/rng.h"

#include "cl/kernels/philox.clh"

clp_status clp_rng_stream_init(clp_rng_stream *s, uint64_t seed, uint32_t step,
			       uint32_t micro_batch, uint32_t layer, uint32_t purpose)
{
	if (micro_batch > 0xffff || layer > 0xffff || purpose > 0xffff)
		return clp_error(CLP_ERR_INVALID, "rng stream: micro-batch %u, layer %u and purpose "
				 "%u must each be < 65536", micro_batch, layer, purpose);
	s->k0 = (uint32_t)seed;
	s->k1 = (uint32_t)(seed >> 32);
	s->c1 = purpose << 16;
	s->c2 = layer | micro_batch << 16;
	s->c3 = step;
	return CLP_OK;
}

void clp_rng_philox(uint32_t ctr[4], const uint32_t key[2])
{
	phx_philox(ctr, key[0], key[1]);
}

uint32_t clp_rng_u32(const clp_rng_stream *s, uint64_t index)
{
	return phx_u32_at(s->k0, s->k1, s->c1, s->c2, s->c3, index);
}

float clp_rng_uniform(const clp_rng_stream *s, uint64_t index)
{
	return phx_uniform(clp_rng_u32(s, index));
}

float clp_rng_normal(const clp_rng_stream *s, uint64_t index)
{
	return phx_normal_at(s->k0, s->k1, s->c1, s->c2, s->c3, index);
}

void clp_rng_fill_normal(float *x, size_t n, const clp_rng_stream *s, uint64_t first, float mean,
			 float std)
{
	for (size_t i = 0; i < n; i++)
		x[i] = PHX_FMA(std, clp_rng_normal(s, first + i), mean);
}

void clp_rng_fill_uniform(float *x, size_t n, const clp_rng_stream *s, uint64_t first, float lo,
			  float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = PHX_FMA(hi - lo, clp_rng_uniform(s, first + i), lo);
}
