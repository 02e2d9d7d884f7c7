/* NFC: NFD (unicode.c) then canonical composition (UAX #15), for tokenizer.json's NFC
 * normaliser. */
#include <stdlib.h>

#include "engine/data/unicode.h"

static int32_t compose(int32_t a, int32_t b)
{
	int lo = 0, hi = clp_uni_comp_n - 1;
	uint64_t key;

	if (a < 0 || b < 0)
		return -1;
	if (a >= 0x1100 && a < 0x1100 + 19 && b >= 0x1161 && b < 0x1161 + 21) /* Hangul L V */
		return 0xac00 + ((a - 0x1100) * 21 + (b - 0x1161)) * 28;
	if (a >= 0xac00 && a < 0xac00 + 11172 && (a - 0xac00) % 28 == 0 && b > 0x11a7 &&
	    b < 0x11a7 + 28) /* Hangul LV T */
		return a + (b - 0x11a7);
	key = (uint64_t)a << 21 | (uint64_t)b;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		uint64_t k = (uint64_t)clp_uni_comp[3 * mid] << 21 | clp_uni_comp[3 * mid + 1];

		if (key < k)
			hi = mid - 1;
		else if (key > k)
			lo = mid + 1;
		else
			return (int32_t)clp_uni_comp[3 * mid + 2];
	}
	return -1;
}

size_t clp_uni_nfc(int32_t **cps, size_t n, size_t *cap)
{
	size_t need = clp_uni_nfd(*cps, n, NULL, 0), w = 0;
	int32_t *d = malloc((need ? need : 1) * sizeof(*d));
	long sp = -1;
	int last = 0;

	if (!d)
		return (size_t)-1;
	clp_uni_nfd(*cps, n, d, need);
	for (size_t i = 0; i < need; i++) {
		int32_t c = d[i], k;
		int cc = c < 0 ? 0 : clp_uni_ccc(c);

		/* not blocked: adjacent to the starter, or every mark between has a lower class */
		if (sp >= 0 && ((size_t)sp == w - 1 || (last != 0 && last < cc)) &&
		    (k = compose(d[sp], c)) >= 0) {
			d[sp] = k;
			continue;
		}
		d[w++] = c;
		last = cc;
		if (cc == 0)
			sp = (long)(w - 1);
	}
	free(*cps);
	*cps = d;
	*cap = need ? need : 1;
	return w;
}
