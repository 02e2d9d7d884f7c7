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

int clp_utf8_encode(int32_t c, unsigned char *o)
{
	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (unsigned char)(0xc0 | c >> 6);
		o[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (unsigned char)(0xe0 | c >> 12);
		o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | c >> 18);
	o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
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

int clp_uni_is_mark(int32_t cp)
{
	return cp >= 0x300 && in_ranges(clp_uni_marks, clp_uni_marks_n, cp);
}

int clp_uni_is_punct(int32_t cp)
{
	return in_ranges(clp_uni_punct, clp_uni_punct_n, cp);
}

int clp_uni_is_other(int32_t cp)
{
	return in_ranges(clp_uni_other, clp_uni_other_n, cp);
}

int clp_uni_lower(int32_t cp, int32_t out[2])
{
	int lo = 0, hi = clp_uni_lower_tab_n - 1;

	out[0] = cp;
	if (cp == 0x130) { /* the one two-character lowercase: "i" and COMBINING DOT ABOVE */
		out[0] = 'i';
		out[1] = 0x307;
		return 2;
	}
	if (cp < 0x80) {
		if (cp >= 'A' && cp <= 'Z')
			out[0] = cp + 32;
		return 1;
	}
	while (lo <= hi) { /* the last run starting at or before cp */
		int mid = (lo + hi) / 2;

		if (clp_uni_lower_tab[4 * mid] <= cp)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	if (hi >= 0) {
		const int32_t *r = clp_uni_lower_tab + 4 * hi;

		if (cp <= r[1] && (cp - r[0]) % r[2] == 0)
			out[0] = cp + r[3];
	}
	return 1;
}

int clp_uni_ccc(int32_t cp)
{
	int lo = 0, hi = clp_uni_ccc_tab_n - 1;

	if (cp < 0x300)
		return 0;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if ((uint32_t)cp < clp_uni_ccc_tab[3 * mid])
			hi = mid - 1;
		else if ((uint32_t)cp > clp_uni_ccc_tab[3 * mid + 1])
			lo = mid + 1;
		else
			return (int)clp_uni_ccc_tab[3 * mid + 2];
	}
	return 0;
}

/* One level of canonical decomposition: 0 (none), 1 or 2 code points. */
static int decomp1(int32_t cp, int32_t d[2])
{
	int lo = 0, hi = clp_uni_decomp_n - 1;

	if (cp < 0xc0)
		return 0;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		uint32_t c = clp_uni_decomp[3 * mid];

		if ((uint32_t)cp < c) {
			hi = mid - 1;
		} else if ((uint32_t)cp > c) {
			lo = mid + 1;
		} else {
			d[0] = (int32_t)clp_uni_decomp[3 * mid + 1];
			d[1] = (int32_t)clp_uni_decomp[3 * mid + 2];
			return d[1] ? 2 : 1;
		}
	}
	return 0;
}

static size_t decompose(int32_t cp, int32_t *out, size_t at, size_t cap)
{
	int32_t d[2];
	int nd;

	if (cp >= 0xac00 && cp < 0xac00 + 11172) { /* Hangul syllables, algorithmically */
		int32_t s = cp - 0xac00, t = s % 28;

		if (at < cap)
			out[at] = 0x1100 + s / 588;
		if (at + 1 < cap)
			out[at + 1] = 0x1161 + (s % 588) / 28;
		if (t && at + 2 < cap)
			out[at + 2] = 0x11a7 + t;
		return at + (t ? 3 : 2);
	}
	nd = cp < 0 ? 0 : decomp1(cp, d);
	if (nd == 0) {
		if (at < cap)
			out[at] = cp;
		return at + 1;
	}
	at = decompose(d[0], out, at, cap);
	return nd == 2 ? decompose(d[1], out, at, cap) : at;
}

size_t clp_uni_nfd(const int32_t *in, size_t n, int32_t *out, size_t cap)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		m = decompose(in[i], out, m, cap);
	if (m > cap)
		return m;
	/* canonical ordering: a stable sort by class of each run of non-starters */
	for (size_t i = 1; i < m; i++) {
		int32_t c = out[i];
		int k = clp_uni_ccc(c);
		size_t j = i;

		if (!k)
			continue;
		while (j > 0 && clp_uni_ccc(out[j - 1]) > k) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = c;
	}
	return m;
}
