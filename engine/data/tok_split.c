/* The pre-tokeniser pattern of LLaMA-3 (tiktoken's cl100k) and Qwen2, by hand like GPT-2's:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *   \s*[\r\n]+|\s+(?!\S)|\s+
 * (Qwen2 has \p{N} for \p{N}{1,3}). The alternatives are tried in order at each position, as the
 * regex engine does; an invalid UTF-8 byte counts as "other" (neither letter, number nor
 * space). */
#include "engine/data/tok_internal.h"

#include "engine/data/unicode.h"

enum { K_SPACE, K_LETTER, K_NUMBER, K_OTHER };

static int kind_at(const unsigned char *s, size_t n, size_t i, size_t *next, int32_t *cp)
{
	*next = i + (size_t)clp_utf8_decode(s + i, n - i, cp);
	if (clp_uni_is_letter(*cp))
		return K_LETTER;
	if (clp_uni_is_number(*cp))
		return K_NUMBER;
	if (*cp >= 0 && clp_uni_is_space(*cp))
		return K_SPACE;
	return K_OTHER;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: the end, or 0. Case-insensitive as Unicode folds: long s
 * (U+017F) is an s; Kelvin's K and the like fold to letters not in the list. */
static size_t contraction(const unsigned char *s, size_t n, size_t i)
{
	static const char *const alt[] = {"s", "t", "re", "ve", "m", "ll", "d"};

	if (s[i] != '\'')
		return 0;
	for (int a = 0; a < 7; a++) {
		size_t k = i + 1;
		const char *p = alt[a];

		for (; *p && k < n; p++) {
			if ((s[k] | 0x20) == *p) {
				k++;
			} else if (*p == 's' && k + 1 < n && s[k] == 0xc5 && s[k + 1] == 0xbf) {
				k += 2;
			} else {
				break;
			}
		}
		if (!*p)
			return k;
	}
	return 0;
}

size_t clp_tok_llama3_split(const char *text, size_t n, size_t i, int max_digits)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t j, k, e, last_nl = 0;
	int32_t cp, cp2;
	int kd, nl = 0;

	if ((e = contraction(s, n, i)))
		return e;
	kd = kind_at(s, n, i, &j, &cp);
	/* [^\r\n\p{L}\p{N}]?\p{L}+ */
	if (kd == K_LETTER || (kd != K_NUMBER && cp != '\r' && cp != '\n' && j < n &&
			       kind_at(s, n, j, &k, &cp2) == K_LETTER)) {
		for (k = kd == K_LETTER ? i : j; k < n && kind_at(s, n, k, &e, &cp2) == K_LETTER;)
			k = e;
		return k;
	}
	if (kd == K_NUMBER) { /* \p{N}{1,max} */
		k = j;
		for (int d = 1; d < max_digits && k < n && kind_at(s, n, k, &e, &cp2) == K_NUMBER; d++)
			k = e;
		return k;
	}
	/* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
	k = kd == K_OTHER ? i : (cp == ' ' && j < n && kind_at(s, n, j, &e, &cp2) == K_OTHER) ? j : n;
	if (k < n) {
		while (k < n && kind_at(s, n, k, &e, &cp2) == K_OTHER)
			k = e;
		while (k < n && (s[k] == '\r' || s[k] == '\n'))
			k++;
		return k;
	}
	/* whitespace from here: the run and its last \r or \n */
	for (k = i; k < n && kind_at(s, n, k, &e, &cp2) == K_SPACE;) {
		if (cp2 == '\r' || cp2 == '\n') {
			nl = 1;
			last_nl = k;
		}
		k = e;
	}
	if (nl) /* \s*[\r\n]+ */
		return last_nl + 1;
	if (k == n || k == j) /* \s+(?!\S) to the end, or a single space before a non-space */
		return k;
	/* \s+(?!\S): the run less its last character, which leads the next piece */
	for (e = i, last_nl = i; e < k;) {
		last_nl = e;
		kind_at(s, n, e, &e, &cp2);
	}
	return last_nl;
}
