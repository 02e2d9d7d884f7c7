/* Mutations for the fuzzing harness: text-aware ones (numbers, types, nesting) that work on the
 * JSON, TOML and XML inputs and on the JSON header of a safetensors file, and blind ones (flips,
 * truncation, garbage, hostile integers) for everything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

uint64_t fz_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static size_t pick(uint64_t *r, size_t n)
{
	return n ? (size_t)(fz_next(r) % n) : 0;
}

static int reserve(fz_buf *b, size_t n)
{
	unsigned char *p;
	size_t cap;

	if (n + 1 <= b->cap)
		return 0;
	cap = (n + 1) * 2;
	if (!(p = realloc(b->p, cap)))
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int fz_buf_set(fz_buf *b, const void *data, size_t n)
{
	if (reserve(b, n))
		return -1;
	memcpy(b->p, data, n);
	b->n = n;
	return 0;
}

void fz_buf_free(fz_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

int fz_read(const char *path, fz_buf *b)
{
	FILE *f = fopen(path, "rb");
	unsigned char chunk[65536];
	size_t got;

	b->n = 0;
	if (!f)
		return -1;
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (reserve(b, b->n + got)) {
			fclose(f);
			return -1;
		}
		memcpy(b->p + b->n, chunk, got);
		b->n += got;
	}
	fclose(f);
	return 0;
}

int fz_write(const char *path, const fz_buf *b)
{
	FILE *f = fopen(path, "wb");
	int bad;

	if (!f)
		return -1;
	bad = fwrite(b->p, 1, b->n, f) != b->n;
	bad |= fclose(f) != 0;
	return bad ? -1 : 0;
}

/* Replace b[at, at + len) by n bytes of s. */
static int splice(fz_buf *b, size_t at, size_t len, const void *s, size_t n)
{
	if (at > b->n)
		at = b->n;
	if (len > b->n - at)
		len = b->n - at;
	if (reserve(b, b->n - len + n))
		return -1;
	memmove(b->p + at + n, b->p + at + len, b->n - at - len);
	memcpy(b->p + at, s, n);
	b->n = b->n - len + n;
	return 0;
}

/* A random run of decimal digits (with its sign); 0 when there is none. */
static int find_number(const fz_buf *b, uint64_t *r, size_t *at, size_t *len)
{
	size_t start = pick(r, b->n);

	for (size_t k = 0; k < b->n; k++) {
		size_t i = (start + k) % b->n, j;

		if (b->p[i] < '0' || b->p[i] > '9' || (i > 0 && b->p[i - 1] >= '0' && b->p[i - 1] <= '9'))
			continue;
		if (i > 0 && b->p[i - 1] == '-')
			i--;
		for (j = i + 1; j < b->n && ((b->p[j] >= '0' && b->p[j] <= '9') || b->p[j] == '.' ||
					     b->p[j] == 'e' || b->p[j] == 'E'); j++)
			;
		*at = i;
		*len = j - i;
		return 1;
	}
	return 0;
}

/* A random "..." string literal (without escapes); 0 when there is none. */
static int find_string(const fz_buf *b, uint64_t *r, size_t *at, size_t *len)
{
	size_t start = pick(r, b->n);

	for (size_t k = 0; k < b->n; k++) {
		size_t i = (start + k) % b->n, j;

		if (b->p[i] != '"')
			continue;
		for (j = i + 1; j < b->n && b->p[j] != '"' && b->p[j] != '\n'; j++)
			;
		if (j < b->n && b->p[j] == '"') {
			*at = i;
			*len = j - i + 1;
			return 1;
		}
	}
	return 0;
}

static const char *const hostile[] = {
	"9223372036854775807", "-9223372036854775808", "18446744073709551616", "4294967296",
	"2147483647", "-2147483648", "-1", "0", "1e308", "-1e308", "1e-320", "NaN", "Infinity",
	"4611686018427387904", "65536", "65535", "1048576", "1099511627776", "3.5", "-0",
	"99999999999999999999999999999", "0x7fffffff",
};

static const char *const wrong[] = {"\"x\"", "[]", "{}", "true", "null", "[1, 2]", "\"\"",
				    "{\"a\": 1}", "-", "\"9\""};

static int nest(fz_buf *b, uint64_t *r)
{
	static const size_t depths[] = {64, 3000, 100000};
	size_t d = depths[pick(r, 3)], at = pick(r, b->n + 1);
	int obj = (int)pick(r, 2);
	size_t unit = obj ? 5 : 1, n = d * unit + 1 + d;
	char *s = malloc(n);
	int rc;

	if (!s)
		return -1;
	for (size_t i = 0; i < d; i++)
		memcpy(s + i * unit, obj ? "{\"a\":" : "[", unit);
	s[d * unit] = '1';
	memset(s + d * unit + 1, obj ? '}' : ']', d);
	/* after a separator, where a value would start, when there is one near */
	for (size_t k = at; k < b->n && k < at + 64; k++)
		if (b->p[k] == ':' || b->p[k] == '=' || b->p[k] == '[') {
			at = k + 1;
			break;
		}
	rc = splice(b, at, 0, s, n);
	free(s);
	return rc;
}

static int mutate_once(fz_buf *b, uint64_t *r, const char **name)
{
	size_t at, len;

	/* weights of 12: numbers 3, types 2, flips 2, truncation, garbage, nesting, repeats and
	 * binary integers 1 each */
	static const int kind[12] = {0, 0, 1, 2, 3, 3, 3, 4, 4, 5, 6, 8};

	switch (kind[pick(r, 12)]) {
	case 0:
		*name = "flip";
		for (size_t k = 1 + pick(r, 8); k > 0 && b->n; k--)
			b->p[pick(r, b->n)] ^= (unsigned char)(1u << pick(r, 8));
		return 0;
	case 1:
		*name = "truncate";
		b->n = pick(r, b->n);
		return 0;
	case 2: {
		static const char tok[] = "{}[]\",:=\\\n\t #<>/'0-.e\xff\xc3";
		unsigned char g[64];
		size_t n = 1 + pick(r, sizeof(g));

		*name = "garbage";
		for (size_t i = 0; i < n; i++)
			g[i] = pick(r, 2) ? (unsigned char)tok[pick(r, sizeof(tok) - 1)]
					  : (unsigned char)fz_next(r);
		return splice(b, pick(r, b->n + 1), 0, g, n);
	}
	case 3:
		*name = "number";
		if (!find_number(b, r, &at, &len))
			return 0;
		{
			const char *h = hostile[pick(r, sizeof(hostile) / sizeof(hostile[0]))];

			return splice(b, at, len, h, strlen(h));
		}
	case 4:
		*name = "type";
		if (pick(r, 2) ? !find_number(b, r, &at, &len) : !find_string(b, r, &at, &len))
			return 0;
		{
			const char *w = wrong[pick(r, sizeof(wrong) / sizeof(wrong[0]))];

			return splice(b, at, len, w, strlen(w));
		}
	case 5:
		*name = "nest";
		return nest(b, r);
	case 6: {
		size_t a = pick(r, b->n + 1), l = pick(r, 256), times = 1 + pick(r, 64);

		*name = "repeat";
		if (l > b->n - a)
			l = b->n - a;
		for (size_t t = 0; t < times && l; t++) {
			unsigned char tmp[256];

			memcpy(tmp, b->p + a, l);
			if (splice(b, a, 0, tmp, l))
				return -1;
		}
		return 0;
	}
	default: {
		/* a hostile binary integer at a random offset, mostly in the first KiB (headers) */
		static const uint64_t v[] = {0, ~0ULL, 0x7fffffffULL, 0x80000000ULL, 1ULL << 40,
					     0x7fffffffffffffffULL, 0xffffffffULL, 20240520, 7, 1};
		uint64_t x = v[pick(r, sizeof(v) / sizeof(v[0]))];
		size_t w = pick(r, 2) ? 8 : 4, lim = pick(r, 4) ? (b->n < 1024 ? b->n : 1024) : b->n;

		*name = "int";
		if (lim < w)
			return 0;
		at = pick(r, lim - w + 1);
		for (size_t i = 0; i < w; i++)
			b->p[at + i] = (unsigned char)(x >> (8 * i));
		return 0;
	}
	}
}

int fz_mutate(fz_buf *b, uint64_t *rng, char *names, size_t len)
{
	size_t k = 1 + (pick(rng, 10) >= 6) + (pick(rng, 10) >= 7), used = 0;

	names[0] = '\0';
	for (size_t i = 0; i < k; i++) {
		const char *n = "";

		if (mutate_once(b, rng, &n))
			return -1;
		used += (size_t)snprintf(names + used, used < len ? len - used : 0, "%s%s",
					 i ? "+" : "", n);
		if (used >= len)
			used = len - 1;
	}
	return 0;
}
