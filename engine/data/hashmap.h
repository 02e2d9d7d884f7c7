/* Two small open-addressing hash maps for the tokenisers: byte strings -> int64 (vocabularies,
 * the BPE cache) and uint64 -> uint64 (BPE merge pairs). Internal to engine/data. */
#ifndef CLP_DATA_HASHMAP_H
#define CLP_DATA_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct clp_smap_slot {
	char *key; /* NULL: empty */
	size_t len;
	uint64_t hash;
	int64_t val;
} clp_smap_slot;

typedef struct clp_smap {
	clp_smap_slot *slots;
	size_t cap, n; /* cap is a power of two (or 0) */
} clp_smap;

/* Insert or overwrite; the key is copied. Returns 0, or -1 when out of memory. */
int clp_smap_put(clp_smap *m, const void *key, size_t len, int64_t val);
/* 1 and *val when present, else 0. */
int clp_smap_get(const clp_smap *m, const void *key, size_t len, int64_t *val);
void clp_smap_clear(clp_smap *m); /* drop all entries, keep nothing allocated */

typedef struct clp_umap {
	uint64_t *keys; /* key + 1 stored, so 0 marks an empty slot */
	uint64_t *vals;
	size_t cap, n;
} clp_umap;

int clp_umap_put(clp_umap *m, uint64_t key, uint64_t val);
int clp_umap_get(const clp_umap *m, uint64_t key, uint64_t *val);
void clp_umap_clear(clp_umap *m);

#endif
