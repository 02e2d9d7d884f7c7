/* The tokeniser handle, shared by tokenizer.c (byte tokeniser, common calls) and tok_gpt2.c. */
#ifndef CLP_DATA_TOK_INTERNAL_H
#define CLP_DATA_TOK_INTERNAL_H

#include "engine/data/hashmap.h"
#include "engine/data/tokenizer.h"

enum { CLP_TOK_BYTE, CLP_TOK_GPT2 };

struct clp_tok {
	int kind;
	int vocab;
	char *pool;   /* bytes of every token, back to back */
	size_t *off;  /* (vocab + 1): token i is pool[off[i] .. off[i+1]) */
	int nspecial;
	int32_t *special; /* (nspecial) ids of the special tokens */

	/* gpt2 only */
	char *vocab_path;
	int32_t byte_id[256]; /* id of each single-byte token, -1 if the vocabulary lacks it */
	clp_smap tok2id;      /* token bytes -> id */
	clp_umap merges;      /* (left << 32 | right) -> (rank << 32 | merged id) */
	clp_smap cache;       /* piece bytes -> (offset << 16 | count) into cache_ids */
	clp_ids cache_ids;
	clp_ids word, next;   /* merge scratch */
};

clp_status clp_tok_gpt2_encode(clp_tok *t, const char *text, size_t len, clp_ids *out);
void clp_tok_gpt2_release(clp_tok *t);

#endif
