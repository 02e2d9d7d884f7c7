/* Open-addressing hash maps with linear probing (see hashmap.h). Load factor stays below 1/2. */
#include "engine/data/hashmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static clp_smap_slot *smap_find(const clp_smap *m, const void *key, size_t len, uint64_t h)
{
	size_t mask = m->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		clp_smap_slot *s = &m->slots[i];

		if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0))
			return s;
	}
}

static int smap_grow(clp_smap *m)
{
	size_t ncap = m->cap ? 2 * m->cap : 64;
	clp_smap old = *m;

	m->slots = calloc(ncap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -1;
	}
	m->cap = ncap;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key)
			*smap_find(m, old.slots[i].key, old.slots[i].len, old.slots[i].hash) =
				old.slots[i];
	free(old.slots);
	return 0;
}

int clp_smap_put(clp_smap *m, const void *key, size_t len, int64_t val)
{
	uint64_t h = hash_bytes(key, len);
	clp_smap_slot *s;

	if (2 * (m->n + 1) > m->cap && smap_grow(m) != 0)
		return -1;
	s = smap_find(m, key, len, h);
	if (!s->key) {
		s->key = malloc(len ? len : 1);
		if (!s->key)
			return -1;
		memcpy(s->key, key, len);
		s->len = len;
		s->hash = h;
		m->n++;
	}
	s->val = val;
	return 0;
}

int clp_smap_get(const clp_smap *m, const void *key, size_t len, int64_t *val)
{
	clp_smap_slot *s;

	if (!m->cap)
		return 0;
	s = smap_find(m, key, len, hash_bytes(key, len));
	if (!s->key)
		return 0;
	*val = s->val;
	return 1;
}

void clp_smap_clear(clp_smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static size_t umap_find(const clp_umap *m, uint64_t key)
{
	size_t mask = m->cap - 1;

	for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask)
		if (m->keys[i] == 0 || m->keys[i] == key + 1)
			return i;
}

static int umap_grow(clp_umap *m)
{
	size_t ncap = m->cap ? 2 * m->cap : 64;
	clp_umap old = *m;

	m->keys = calloc(ncap, sizeof(*m->keys));
	m->vals = calloc(ncap, sizeof(*m->vals));
	if (!m->keys || !m->vals) {
		free(m->keys);
		free(m->vals);
		*m = old;
		return -1;
	}
	m->cap = ncap;
	for (size_t i = 0; i < old.cap; i++)
		if (old.keys[i]) {
			size_t j = umap_find(m, old.keys[i] - 1);

			m->keys[j] = old.keys[i];
			m->vals[j] = old.vals[i];
		}
	free(old.keys);
	free(old.vals);
	return 0;
}

int clp_umap_put(clp_umap *m, uint64_t key, uint64_t val)
{
	size_t i;

	if (2 * (m->n + 1) > m->cap && umap_grow(m) != 0)
		return -1;
	i = umap_find(m, key);
	if (!m->keys[i]) {
		m->keys[i] = key + 1;
		m->n++;
	}
	m->vals[i] = val;
	return 0;
}

int clp_umap_get(const clp_umap *m, uint64_t key, uint64_t *val)
{
	size_t i;

	if (!m->cap)
		return 0;
	i = umap_find(m, key);
	if (!m->keys[i])
		return 0;
	*val = m->vals[i];
	return 1;
}

void clp_umap_clear(clp_umap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
