/* llm.c token shards: read (memory-mapped, validated) and write.
 *
 * Format: a header of 256 little-endian int32 (header[0] magic, header[1] version, header[2]
 * token count, the rest zero), then the tokens:
 *   magic 20240520, version 1: uint16 tokens (GPT-2 sized vocabularies)
 *   magic 20240801, version 7: uint32 tokens (LLaMA-3 sized vocabularies)
 * The file size must be exactly 1024 + count * width. Errors name the file and what is wrong.
 * Hosts are assumed little-endian (x86, ARM). */
#ifndef CLP_DATA_SHARD_H
#define CLP_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

#define CLP_SHARD_MAGIC_U16 20240520
#define CLP_SHARD_MAGIC_U32 20240801
#define CLP_SHARD_HEADER_BYTES 1024

typedef struct clp_shard {
	char *path;
	int version;  /* 1 (uint16 tokens) or 7 (uint32) */
	size_t ntok;
	const unsigned char *tokens; /* ntok tokens of 2 or 4 bytes, inside the mapping */
	void *map;
	size_t map_len;
} clp_shard;

/* Open and validate a shard. vocab_size > 0 also checks every token is below it (one pass over
 * the file). Close with clp_shard_close (also after a failed open). */
clp_status clp_shard_open(clp_shard *s, const char *path, int vocab_size);
void clp_shard_close(clp_shard *s);

/* Tokens [first, first + n) as int32 (the caller keeps the range inside ntok). */
void clp_shard_copy(const clp_shard *s, size_t first, size_t n, int32_t *out);

/* Write a shard durably (temporary name, fsync, rename). version 1 needs every token in
 * [0, 65535], version 7 in [0, 2^31); n must fit the int32 count. */
clp_status clp_shard_write(const char *path, const int32_t *tokens, size_t n, int version);

#endif
