/* Kept packs of the packed GEMM's B operand (cl/gemm.h "Kept packs"): a weight read from a
 * held buffer is packed once and the strips are reused until the buffer is marked stale. */
#include "cl/gemm_internal.h"
#include "cl/runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HELD 16

struct pack_entry {
	struct clp_gemm_pack_key key;
	cl_mem packed;
	size_t bytes;
	int valid; /* 0: the strips are from before the buffer last changed */
};

struct clp_gemm_cache {
	cl_mem held[MAX_HELD];
	int nheld;
	struct pack_entry *e;
	int n, cap;
	size_t bytes, limit;
	clp_gemm_cache_stats stats;
};

/* CLPIPE_GEMM_KEEP_PACKS=0 turns the cache off; CLPIPE_GEMM_KEEP_PACKS_MB caps its memory
 * (default: a quarter of the device's global memory). */
size_t clp_gemm_keep_limit(const clp_cl_devinfo *dev)
{
	const char *off = getenv("CLPIPE_GEMM_KEEP_PACKS");
	const char *mb = getenv("CLPIPE_GEMM_KEEP_PACKS_MB");

	if (off && strcmp(off, "0") == 0)
		return 0;
	return mb && *mb ? (size_t)strtoull(mb, NULL, 10) << 20 : (size_t)(dev->global_mem / 4);
}

size_t clp_cl_gemm_keep_limit(const clp_cl_ctx *ctx)
{
	return clp_gemm_keep_limit(&ctx->info);
}

static struct clp_gemm_cache *cache_get(clp_cl_ctx *ctx)
{
	const char *off = getenv("CLPIPE_GEMM_KEEP_PACKS");

	if (ctx->gemm_cache || (off && strcmp(off, "0") == 0))
		return ctx->gemm_cache;
	ctx->gemm_cache = calloc(1, sizeof(*ctx->gemm_cache));
	if (ctx->gemm_cache)
		ctx->gemm_cache->limit = clp_cl_gemm_keep_limit(ctx);
	return ctx->gemm_cache;
}

static int held_index(const struct clp_gemm_cache *c, cl_mem mem)
{
	for (int i = 0; c && i < c->nheld; i++)
		if (c->held[i] == mem)
			return i;
	return -1;
}

clp_status clp_cl_gemm_hold(clp_cl_ctx *ctx, cl_mem mem)
{
	struct clp_gemm_cache *c = cache_get(ctx);

	if (!c || !mem || held_index(c, mem) >= 0)
		return CLP_OK;
	if (c->nheld == MAX_HELD)
		return CLP_OK; /* not kept: packed every time, as without the cache */
	c->held[c->nheld++] = mem;
	return CLP_OK;
}

int clp_cl_gemm_held(const clp_cl_ctx *ctx, cl_mem mem)
{
	return held_index(ctx->gemm_cache, mem) >= 0;
}

void clp_cl_gemm_stale(clp_cl_ctx *ctx, cl_mem mem)
{
	struct clp_gemm_cache *c = ctx->gemm_cache;

	for (int i = 0; c && i < c->n; i++)
		if (c->e[i].key.mem == mem)
			c->e[i].valid = 0;
}

void clp_cl_gemm_release(clp_cl_ctx *ctx, cl_mem mem)
{
	struct clp_gemm_cache *c = ctx->gemm_cache;
	int h = held_index(c, mem), j = 0;

	if (h < 0)
		return;
	c->held[h] = c->held[--c->nheld];
	for (int i = 0; i < c->n; i++) {
		if (c->e[i].key.mem == mem) {
			clReleaseMemObject(c->e[i].packed);
			c->bytes -= c->e[i].bytes;
			continue;
		}
		c->e[j++] = c->e[i];
	}
	c->n = j;
}

void clp_cl_gemm_cache_stats(const clp_cl_ctx *ctx, clp_gemm_cache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (ctx->gemm_cache) {
		*out = ctx->gemm_cache->stats;
		out->entries = ctx->gemm_cache->n;
		out->bytes = ctx->gemm_cache->bytes;
	}
}

void clp_cl_gemm_cache_reset_peak(clp_cl_ctx *ctx)
{
	if (ctx->gemm_cache)
		ctx->gemm_cache->stats.peak = ctx->gemm_cache->bytes;
}

void clp_gemm_cache_free(clp_cl_ctx *ctx)
{
	struct clp_gemm_cache *c = ctx->gemm_cache;

	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		clReleaseMemObject(c->e[i].packed);
	free(c->e);
	free(c);
	ctx->gemm_cache = NULL;
}

static int same_key(const struct clp_gemm_pack_key *a, const struct clp_gemm_pack_key *b)
{
	return a->kernel == b->kernel && a->mem == b->mem && a->off == b->off && a->ld == b->ld &&
	       a->trans == b->trans && a->rows == b->rows && a->K == b->K &&
	       a->stride == b->stride && a->batch == b->batch;
}

clp_status clp_gemm_cache_find(clp_cl_ctx *ctx, const struct clp_gemm_pack_key *key,
			       size_t bytes, cl_mem *packed, int *valid)
{
	struct clp_gemm_cache *c = ctx->gemm_cache;
	struct pack_entry *e;

	*packed = NULL;
	*valid = 0;
	if (!c || held_index(c, key->mem) < 0)
		return CLP_OK;
	for (int i = 0; i < c->n; i++)
		if (same_key(&c->e[i].key, key)) {
			*packed = c->e[i].packed;
			*valid = c->e[i].valid;
			c->stats.hits += *valid;
			c->stats.repacks += !*valid;
			c->e[i].valid = 1; /* the caller packs it now when it was not */
			return CLP_OK;
		}
	if (c->bytes + bytes > c->limit)
		return CLP_OK; /* over the cap: packed into scratch, as without the cache */
	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 64;
		struct pack_entry *ne = realloc(c->e, (size_t)cap * sizeof(*ne));

		if (!ne)
			return clp_error(CLP_ERR_NOMEM, "out of host memory for the GEMM's packs");
		c->e = ne;
		c->cap = cap;
	}
	e = &c->e[c->n];
	memset(e, 0, sizeof(*e));
	if (clp_cl_buffer(ctx, bytes, "a kept GEMM pack", &e->packed) != CLP_OK) {
		clp_error_clear(); /* the device is full: keep no more, pack into scratch */
		c->limit = c->bytes;
		return CLP_OK;
	}
	e->key = *key;
	e->bytes = bytes;
	e->valid = 1;
	c->n++;
	c->bytes += bytes;
	if (c->bytes > c->stats.peak)
		c->stats.peak = c->bytes;
	c->stats.packs++;
	*packed = e->packed;
	return CLP_OK;
}
