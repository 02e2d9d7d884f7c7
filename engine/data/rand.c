/* Counter-based random numbers and keyed permutations (see rand.h). */
#include "engine/data/rand.h"

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t clp_data_rand(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b, uint64_t c)
{
	const uint64_t g = 0x9e3779b97f4a7c15ULL;
	uint64_t h = mix64(seed + g);

	h = mix64(h ^ (purpose + 2 * g));
	h = mix64(h ^ (a + 3 * g));
	h = mix64(h ^ (b + 4 * g));
	return mix64(h ^ (c + 5 * g));
}

double clp_data_unit(uint64_t r)
{
	return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t clp_data_below(uint64_t r, uint64_t n)
{
	/* floor(x * n / 2^40) for 40 random bits x, split so that nothing overflows */
	uint64_t x = r >> 24; /* 40 bits */
	uint64_t lo = (x & 0xfffff) * n, hi = (x >> 20) * n;

	return (hi + (lo >> 20)) >> 20;
}

void clp_data_perm_init(clp_data_perm *p, uint64_t n, uint64_t seed, uint64_t purpose,
			uint64_t a)
{
	unsigned bits = 2;

	while (bits < 64 && (1ULL << bits) < n)
		bits++;
	bits += bits & 1;
	p->n = n;
	p->half = bits / 2;
	for (int k = 0; k < 4; k++)
		p->key[k] = clp_data_rand(seed, purpose, a, (uint64_t)k, 0);
}

static uint64_t feistel(const clp_data_perm *p, uint64_t x)
{
	uint64_t mask = (1ULL << p->half) - 1;
	uint64_t l = x >> p->half, r = x & mask;

	for (int k = 0; k < 4; k++) {
		uint64_t t = l ^ (mix64(r ^ p->key[k]) & mask);

		l = r;
		r = t;
	}
	return (l << p->half) | r;
}

uint64_t clp_data_perm_at(const clp_data_perm *p, uint64_t i)
{
	/* The domain is at most 4n, so cycle walking takes under 4 steps on average. */
	uint64_t x = feistel(p, i);

	while (x >= p->n)
		x = feistel(p, x);
	return x;
}
