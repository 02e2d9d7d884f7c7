/* UTF-8 decoding and character classes (see unicode.h). */
#include "engine/data/unicode.h"

int clp_utf8_decode(const unsigned char *s, size_t n, int32_t *cp)
{
	unsigned c = s[0];
	int len;
	int32_t v, min;

	if (c < 0x80) {
		*cp = (int32_t)c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		v = c & 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		v = c & 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		v = c & 0x07;
		min = 0x10000;
	} else {
		*cp = -1;
		return 1;
	}
	if ((size_t)len > n)
		goto invalid;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto invalid;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		goto invalid;
	*cp = v;
	return len;
invalid:
	*cp = -1;
	return 1;
}

static int in_ranges(const uint32_t (*r)[2], int n, int32_t cp)
{
	int lo = 0, hi = n - 1;

	if (cp < 0)
		return 0;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if ((uint32_t)cp < r[mid][0])
			hi = mid - 1;
		else if ((uint32_t)cp > r[mid][1])
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

int clp_uni_is_letter(int32_t cp)
{
	if (cp < 0x80)
		return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
	return in_ranges(clp_uni_letters, clp_uni_letters_n, cp);
}

int clp_uni_is_number(int32_t cp)
{
	if (cp < 0x80)
		return cp >= '0' && cp <= '9';
	return in_ranges(clp_uni_numbers, clp_uni_numbers_n, cp);
}

int clp_uni_is_space(int32_t cp)
{
	return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 ||
	       cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
