/* Recognising binary files given as text (see sniff.h). */
#include "engine/data/sniff.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/data/shard.h"

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

clp_status clp_data_sniff_text(const char *path)
{
	unsigned char b[4096];
	FILE *f = fopen(path, "rb");
	size_t n;
	uint64_t hlen = 0;

	if (!f)
		return CLP_OK;
	n = fread(b, 1, sizeof(b), f);
	fclose(f);
	if (n >= 12 && (le32(b) == CLP_SHARD_MAGIC_U16 || le32(b) == CLP_SHARD_MAGIC_U32))
		return clp_error(CLP_ERR_FORMAT, "%s is an llm.c token shard (magic %u, version %u, "
				 "%u tokens of %s), not text: read it with data.format = "
				 "\"shards\" (and the tokenizer it was made with, data.tokenizer)",
				 path, le32(b), le32(b + 4), le32(b + 8),
				 le32(b) == CLP_SHARD_MAGIC_U16 ? "16 bits" : "32 bits");
	for (int i = 7; n >= 9 && i >= 0; i--)
		hlen = hlen << 8 | b[i];
	if (n >= 9 && b[8] == '{' && hlen >= 2 && hlen < (100u << 20))
		return clp_error(CLP_ERR_FORMAT, "%s is a safetensors file (tensors, not text): to "
				 "score a model, clpipe eval --ckpt %s; to train, give a text file or "
				 "token shards", path, path);
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return clp_error(CLP_ERR_FORMAT, "%s is gzip-compressed, not text: decompress it "
				 "first (gunzip)", path);
	if (n >= 4 && !memcmp(b, "PK\3\4", 4))
		return clp_error(CLP_ERR_FORMAT, "%s is a zip archive, not text: unpack it first",
				 path);
	if (n >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4))
		return clp_error(CLP_ERR_FORMAT, "%s is zstd-compressed, not text: decompress it "
				 "first (unzstd)", path);
	/* other binary data: many control characters (text has tabs and newlines; a stray NUL or
	 * invalid byte in text is the byte tokenizer's to keep) */
	if (n >= 256) {
		size_t ctl = 0, first = n;

		for (size_t i = 0; i < n; i++)
			if (b[i] < 0x20 && (!b[i] || !strchr("\t\n\r\f\v", b[i]))) {
				ctl++;
				if (first == n)
					first = i;
			}
		if (ctl * 10 > n)
			return clp_error(CLP_ERR_FORMAT, "%s looks binary, not text (%zu of its first "
					 "%zu bytes are control characters, the first at offset "
					 "%zu): give a text file, or token shards with data.format = "
					 "\"shards\"", path, ctl, n, first);
	}
	return CLP_OK;
}
