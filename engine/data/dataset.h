/* Datasets: a token stream split into training and validation sequences, drawn in batches.
 *
 * Sources: a text file through a tokeniser, a token array, or llm.c shards (glob patterns).
 * Sequences: a split's tokens [lo, hi) hold (hi - lo - 1) / T sequences; sequence i is the
 * T + 1 tokens starting at lo + i*T (inputs are its first T tokens, targets its last T), so
 * consecutive sequences share one token, as in llm.c. Shards are concatenated in sorted file
 * order and sequences may cross shard boundaries.
 * Split rule: with a validation pattern the validation shards are the validation split;
 * otherwise the last ceil(val_frac * N) tokens of the stream (at least T + 1 when val_frac > 0)
 * are validation and the rest training. No token is in both splits.
 * Shuffling: in epoch e the training sequences are visited in the order of a keyed permutation
 * of their indices (seed, e); the position (epoch, index) is all the state, so saving and
 * restoring it makes a resumed run draw exactly the same batches. Validation is read in order.
 * Details in docs/DATA.md. */
#ifndef CLP_DATA_DATASET_H
#define CLP_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"
#include "engine/data/tokenizer.h"

typedef struct clp_dataset clp_dataset;

typedef enum clp_split { CLP_SPLIT_TRAIN, CLP_SPLIT_VAL } clp_split;

typedef struct clp_data_opts {
	int seq_len;     /* T >= 1 */
	double val_frac; /* in [0, 0.5]; ignored when validation shards are given */
	uint64_t seed;   /* shuffling key */
	int shuffle;     /* 1: permute training sequences each epoch; 0: in order */
	int vocab_size;  /* > 0: every token must be below it (checked at open) */
} clp_data_opts;

/* Where the training draw stands: the next sequence is number `index` of epoch `epoch`. */
typedef struct clp_data_pos {
	uint64_t epoch, index;
} clp_data_pos;

/* A copy of n tokens; origin names the data in messages. */
clp_status clp_dataset_from_tokens(clp_dataset **ds, const int32_t *tokens, size_t n,
				   const clp_data_opts *o, const char *origin);
/* A text file encoded with tok (the whole file is one document). */
clp_status clp_dataset_open_text(clp_dataset **ds, const char *path, clp_tok *tok,
				 const clp_data_opts *o);
/* llm.c shards matching train_pattern (a path or glob, sorted); val_pattern NULL or "" splits
 * by val_frac instead. Shards are memory-mapped, not read into memory. */
clp_status clp_dataset_open_shards(clp_dataset **ds, const char *train_pattern,
				   const char *val_pattern, const clp_data_opts *o);
void clp_dataset_free(clp_dataset *ds);

int clp_dataset_seq_len(const clp_dataset *ds);
/* Number of sequences in a split. */
uint64_t clp_dataset_nseq(const clp_dataset *ds, clp_split split);
/* Number of tokens in a split. */
uint64_t clp_dataset_ntok(const clp_dataset *ds, clp_split split);

/* The T + 1 tokens of sequence i of a split (no shuffling). */
clp_status clp_dataset_seq(const clp_dataset *ds, clp_split split, uint64_t i, int32_t *out);

/* Draw the next training batch of `batch` sequences (shuffled, crossing into the next epoch
 * when one ends) and advance the position by `batch`. Only sequences [first, first + count) of
 * the batch are written, so data-parallel replicas can each take their slice of one global
 * batch: inputs and targets are (count, T). */
clp_status clp_dataset_next(clp_dataset *ds, int batch, int first, int count, int32_t *inputs,
			    int32_t *targets);
/* Validation batch: sequences first, first + 1, ... (modulo the count), inputs and targets
 * (count, T). */
clp_status clp_dataset_val(const clp_dataset *ds, uint64_t first, int count, int32_t *inputs,
			   int32_t *targets);

clp_data_pos clp_dataset_pos(const clp_dataset *ds);
/* Restore a position (index must be below the number of training sequences). */
clp_status clp_dataset_set_pos(clp_dataset *ds, clp_data_pos pos);
/* The position as text for checkpoint metadata, "epoch=E index=I nseq=N seed=S shuffle=B";
 * writes at most cap bytes. */
void clp_dataset_pos_str(const clp_dataset *ds, char *buf, size_t cap);
/* Parse such text and restore it; refuses (naming the field) a position saved for a dataset
 * with another sequence count, seed or shuffle setting. */
clp_status clp_dataset_restore(clp_dataset *ds, const char *text);

#endif
