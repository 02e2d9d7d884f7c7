/* The counter-based random number generator (Philox4x32-10) on the host. The same generator runs
 * in kernels (cl/kernels/philox.clh, shared source), so host and device draw identical bits.
 *
 * Every random number in clpipe (initialisation, dropout, masking, shuffling) is number `index`
 * of a stream named by (seed, step, micro-batch, layer, purpose), never by device or rank: a
 * pipelined or resumed run draws exactly what the single-device run draws. */
#ifndef CLP_BASE_RNG_H
#define CLP_BASE_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

/* What a number is for: part of the stream's name, so two purposes never share numbers. */
enum clp_rng_purpose {
	CLP_RNG_INIT = 1,     /* parameter initialisation (layer = parameter tensor index) */
	CLP_RNG_DROPOUT = 2,  /* dropout masks (layer = layer index * 8 + site) */
	CLP_RNG_MASK = 3,     /* masked-language-model masking */
	CLP_RNG_SHUFFLE = 4,  /* data order */
	CLP_RNG_SAMPLE = 5,   /* text generation */
	CLP_RNG_USER = 256    /* first value free for other uses */
};

/* A stream in packed form: Philox key (k0, k1) and the fixed counter words (see philox.clh).
 * Pass it to kernels as cl_uint2 {k0, k1} and cl_uint4 {0, c1, c2, c3} (clp_rng_args). */
typedef struct clp_rng_stream {
	uint32_t k0, k1; /* seed */
	uint32_t c1;     /* purpose << 16 */
	uint32_t c2;     /* layer | micro-batch << 16 */
	uint32_t c3;     /* step */
} clp_rng_stream;

/* Name a stream. micro_batch, layer and purpose must be < 65536 (CLP_ERR_INVALID otherwise). */
clp_status clp_rng_stream_init(clp_rng_stream *s, uint64_t seed, uint32_t step,
			       uint32_t micro_batch, uint32_t layer, uint32_t purpose);

/* The raw block function (for known-answer tests): ctr[4] is replaced by Philox4x32-10(ctr, key). */
void clp_rng_philox(uint32_t ctr[4], const uint32_t key[2]);

/* Number `index` of the stream: 32 random bits, a uniform float in [0, 1) (24 bits), a standard
 * normal (Box-Muller; index 2p and 2p+1 share one pair of raw numbers). */
uint32_t clp_rng_u32(const clp_rng_stream *s, uint64_t index);
float clp_rng_uniform(const clp_rng_stream *s, uint64_t index);
float clp_rng_normal(const clp_rng_stream *s, uint64_t index);

/* x[i] = mean + std * normal(first + i), or lo + (hi - lo) * uniform(first + i); the same bits as
 * clp_nn_rng_normal / clp_nn_rng_uniform on a device. */
void clp_rng_fill_normal(float *x, size_t n, const clp_rng_stream *s, uint64_t first, float mean,
			 float std);
void clp_rng_fill_uniform(float *x, size_t n, const clp_rng_stream *s, uint64_t first, float lo,
			  float hi);

#endif
