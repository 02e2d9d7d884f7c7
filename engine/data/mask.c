/* BERT masking (see mask.h). */
#include "engine/data/mask.h"

#include "engine/data/rand.h"

static int is_special(const clp_mask_opts *o, int32_t id)
{
	for (int i = 0; i < o->nspecial; i++)
		if (o->special[i] == id)
			return 1;
	return 0;
}

clp_status clp_data_mask_bert(const clp_mask_opts *o, uint64_t step, uint64_t micro,
			      int32_t *tokens, int32_t *targets, size_t n)
{
	if (!(o->prob >= 0 && o->prob <= 1) || o->vocab_size <= o->nspecial ||
	    o->mask_id < 0 || o->mask_id >= o->vocab_size || (o->nspecial > 0 && !o->special))
		return clp_error(CLP_ERR_INVALID, "BERT masking: bad options (prob %g, mask id %d, "
				 "vocabulary %d, %d specials)", o->prob, (int)o->mask_id,
				 o->vocab_size, o->nspecial);
	for (size_t i = 0; i < n; i++) {
		int32_t t = tokens[i];
		uint64_t r;
		double u;

		if (t < 0 || t >= o->vocab_size)
			return clp_error(CLP_ERR_INVALID, "BERT masking: token %d at position %zu is "
					 "outside the vocabulary [0, %d)", (int)t, i, o->vocab_size);
		targets[i] = -1;
		if (is_special(o, t))
			continue;
		/* two decisions from one 64-bit draw: the high 32 bits choose, the low 32 act */
		r = clp_data_rand(o->seed, CLP_DATA_PURPOSE_MASK, step, micro, i);
		if ((double)(r >> 32) * (1.0 / 4294967296.0) >= o->prob)
			continue;
		targets[i] = t;
		u = (double)(r & 0xffffffffu) * (1.0 / 4294967296.0);
		if (u < 0.8) {
			tokens[i] = o->mask_id;
		} else if (u < 0.9) {
			/* redraw on a special: the expected number of draws is tiny */
			for (uint64_t k = 1;; k++) {
				int32_t c = (int32_t)clp_data_below(
					clp_data_rand(o->seed, CLP_DATA_PURPOSE_MASK, step, micro,
						      i + (k << 48)),
					(uint64_t)o->vocab_size);

				if (!is_special(o, c)) {
					tokens[i] = c;
					break;
				}
			}
		}
	}
	return CLP_OK;
}
