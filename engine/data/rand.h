/* Counter-based random numbers for the data pipeline.
 *
 * A number is a pure function of its key (seed, purpose, a, b, c): no generator state to save,
 * so a resumed or pipelined run draws exactly what the uninterrupted single-device run draws.
 * The mixer is splitmix64's finaliser applied along the key (each word added, then mixed), which
 * passes the usual avalanche tests and is plenty for shuffling and masking.
 *
 * A small local generator: when the engine-wide one (cl/base/rng.h) lands, this can become a thin
 * wrapper over it, but the shuffles and masks drawn here would change, so keep it stable. */
#ifndef CLP_DATA_RAND_H
#define CLP_DATA_RAND_H

#include <stdint.h>

/* Purposes keep unrelated streams apart under one seed. */
enum {
	CLP_DATA_PURPOSE_SHUFFLE = 0x5348, /* epoch permutation of training sequences */
	CLP_DATA_PURPOSE_MASK = 0x4d41,    /* BERT masking */
};

/* 64 random bits for the key. */
uint64_t clp_data_rand(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b, uint64_t c);
/* Uniform double in [0, 1) from 53 bits of r. */
double clp_data_unit(uint64_t r);
/* Uniform integer in [0, n) from r by multiply-shift on 40 bits: 0 < n < 2^44, bias about
 * n / 2^40 (negligible for the sizes drawn here). */
uint64_t clp_data_below(uint64_t r, uint64_t n);

/* A keyed pseudo-random permutation of [0, n): a Feistel network on the next even power of two
 * with cycle walking, so permuting index i costs O(1) time and no memory, whatever n is. */
typedef struct clp_data_perm {
	uint64_t n;
	uint64_t key[4]; /* round keys */
	unsigned half;   /* bits per Feistel half */
} clp_data_perm;

void clp_data_perm_init(clp_data_perm *p, uint64_t n, uint64_t seed, uint64_t purpose,
			uint64_t a);
/* The image of i (< n) under the permutation. */
uint64_t clp_data_perm_at(const clp_data_perm *p, uint64_t i);

#endif
