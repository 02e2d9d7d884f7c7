/* llm.c token shards (see shard.h). */
#include "engine/data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl/base/durable.h"

static int32_t le32(const unsigned char *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

static uint32_t token_at(const clp_shard *s, size_t i)
{
	const unsigned char *p = s->tokens + (s->version == 1 ? 2 : 4) * i;

	if (s->version == 1)
		return (uint32_t)p[0] | (uint32_t)p[1] << 8;
	return (uint32_t)le32(p);
}

void clp_shard_copy(const clp_shard *s, size_t first, size_t n, int32_t *out)
{
	if (s->version == 1) {
		const uint16_t *t = (const uint16_t *)(const void *)s->tokens + first;

		for (size_t i = 0; i < n; i++)
			out[i] = t[i];
	} else {
		const uint32_t *t = (const uint32_t *)(const void *)s->tokens + first;

		for (size_t i = 0; i < n; i++)
			out[i] = (int32_t)t[i];
	}
}

void clp_shard_close(clp_shard *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static clp_status validate(clp_shard *s, const char *path, size_t size, int vocab_size)
{
	const unsigned char *h = s->map;
	int32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
	size_t width, want;

	if (magic == CLP_SHARD_MAGIC_U16 && version == 1)
		width = 2;
	else if (magic == CLP_SHARD_MAGIC_U32 && version == 7)
		width = 4;
	else if (magic == CLP_SHARD_MAGIC_U16 || magic == CLP_SHARD_MAGIC_U32)
		return clp_error(CLP_ERR_FORMAT, "%s: magic %d needs version %d, found version %d",
				 path, magic, magic == CLP_SHARD_MAGIC_U16 ? 1 : 7, version);
	else
		return clp_error(CLP_ERR_FORMAT, "%s: not an llm.c token shard: magic %d (expected "
				 "%d for uint16 tokens or %d for uint32 tokens)", path, magic,
				 CLP_SHARD_MAGIC_U16, CLP_SHARD_MAGIC_U32);
	if (count <= 0)
		return clp_error(CLP_ERR_FORMAT, "%s: the header's token count is %d; a shard needs "
				 "at least one token", path, count);
	want = CLP_SHARD_HEADER_BYTES + (size_t)count * width;
	if (size < want)
		return clp_error(CLP_ERR_FORMAT, "%s: truncated: the header announces %d tokens "
				 "(%zu bytes) but the file has %zu bytes", path, count, want, size);
	if (size > want)
		return clp_error(CLP_ERR_FORMAT, "%s: %zu bytes follow the %d tokens the header "
				 "announces (file %zu bytes, expected %zu)", path, size - want, count,
				 size, want);
	s->version = version;
	s->ntok = (size_t)count;
	s->tokens = h + CLP_SHARD_HEADER_BYTES;
	if (vocab_size > 0)
		for (size_t i = 0; i < s->ntok; i++) {
			uint32_t t = token_at(s, i);

			if (t >= (uint32_t)vocab_size)
				return clp_error(CLP_ERR_FORMAT, "%s: token %u at position %zu is not "
						 "below the vocabulary size %d", path, t, i,
						 vocab_size);
		}
	return CLP_OK;
}

clp_status clp_shard_open(clp_shard *s, const char *path, int vocab_size)
{
	struct stat st;
	int fd;

	memset(s, 0, sizeof(*s));
	s->path = strdup(path);
	if (!s->path)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block */
	if (fd < 0)
		return clp_error(CLP_ERR_IO, "%s: cannot open token shard: %s", path,
				 strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return clp_error(CLP_ERR_IO, "%s: not a regular file", path);
	}
	if (st.st_size == 0) {
		close(fd);
		return clp_error(CLP_ERR_FORMAT, "%s: the token shard is empty", path);
	}
	if (st.st_size < CLP_SHARD_HEADER_BYTES) {
		close(fd);
		return clp_error(CLP_ERR_FORMAT, "%s: truncated: %lld bytes, shorter than the "
				 "%d-byte header of an llm.c shard", path, (long long)st.st_size,
				 CLP_SHARD_HEADER_BYTES);
	}
	s->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return clp_error(CLP_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
	}
	s->map_len = (size_t)st.st_size;
	return validate(s, path, (size_t)st.st_size, vocab_size);
}

clp_status clp_shard_write(const char *path, const int32_t *tokens, size_t n, int version)
{
	unsigned char header[CLP_SHARD_HEADER_BYTES] = {0};
	int32_t hv[3];
	int64_t max = version == 1 ? 65535 : INT32_MAX;
	clp_afile a;
	clp_status s;
	enum { CHUNK = 1 << 14 };
	unsigned char buf[4 * CHUNK];

	if (version != 1 && version != 7)
		return clp_error(CLP_ERR_INVALID, "%s: shard version %d is not 1 (uint16) or 7 "
				 "(uint32)", path, version);
	if (n == 0 || n > INT32_MAX)
		return clp_error(CLP_ERR_INVALID, "%s: a shard holds 1 to %d tokens, not %zu", path,
				 INT32_MAX, n);
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] > max)
			return clp_error(CLP_ERR_INVALID, "%s: token %d at position %zu does not fit "
					 "a version %d shard (0..%lld)", path, (int)tokens[i], i,
					 version, (long long)max);
	hv[0] = version == 1 ? CLP_SHARD_MAGIC_U16 : CLP_SHARD_MAGIC_U32;
	hv[1] = version;
	hv[2] = (int32_t)n;
	for (int k = 0; k < 3; k++)
		for (int b = 0; b < 4; b++)
			header[4 * k + b] = (unsigned char)((uint32_t)hv[k] >> (8 * b));
	CLP_TRY(clp_afile_open(&a, path));
	s = clp_afile_write(&a, header, sizeof(header));
	for (size_t i = 0; s == CLP_OK && i < n; i += CHUNK) {
		size_t m = n - i < CHUNK ? n - i : CHUNK, w = version == 1 ? 2 : 4;

		for (size_t k = 0; k < m; k++)
			for (size_t b = 0; b < w; b++)
				buf[w * k + b] = (unsigned char)((uint32_t)tokens[i + k] >> (8 * b));
		s = clp_afile_write(&a, buf, m * w);
	}
	if (s != CLP_OK) {
		clp_afile_abort(&a);
		return s;
	}
	return clp_afile_commit(&a);
}
