/* BERT masked-language-model masking of a batch.
 *
 * Each position whose token is not special is chosen with probability `prob` (0.15); a chosen
 * position's target is its original token and its input becomes [MASK] with probability 0.8, a
 * random non-special token with 0.1, and stays unchanged with 0.1. Positions not chosen get
 * target -1 (ignored by the loss). Every decision is a pure function of (seed, step, micro,
 * position), so pipelined and resumed runs mask identically. */
#ifndef CLP_DATA_MASK_H
#define CLP_DATA_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

typedef struct clp_mask_opts {
	double prob;            /* chance a non-special position is chosen (0.15) */
	int32_t mask_id;        /* the [MASK] token */
	int vocab_size;         /* random replacements are drawn from [0, vocab_size) */
	const int32_t *special; /* (nspecial) ids never chosen and never drawn as replacements */
	int nspecial;
	uint64_t seed;
} clp_mask_opts;

/* Mask tokens (n positions, e.g. (B, T) flattened) in place and write targets (n). The step
 * and micro-batch index key the randomness. Returns an error for bad options or a token
 * outside the vocabulary. */
clp_status clp_data_mask_bert(const clp_mask_opts *o, uint64_t step, uint64_t micro,
			      int32_t *tokens, int32_t *targets, size_t n);

#endif
