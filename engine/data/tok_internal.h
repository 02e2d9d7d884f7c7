/* The tokeniser handle, shared by the files of engine/data/tok_*.c and tokenizer.c:
 *   tokenizer.c     the byte tokeniser and the calls common to every kind
 *   tok_gpt2.c      byte-level BPE: GPT-2's vocab.json + merges.txt, the merge loop
 *   tok_split.c     the LLaMA-3 / Qwen2 pre-tokeniser pattern
 *   tok_wordpiece.c WordPiece: BERT's normaliser and pre-tokeniser, vocab.txt, decoding
 *   tok_json.c      Hugging Face tokenizer.json
 *   tok_open.c      a model directory or file: which reader, and the special-token roles */
#ifndef CLP_DATA_TOK_INTERNAL_H
#define CLP_DATA_TOK_INTERNAL_H

#include "engine/data/hashmap.h"
#include "engine/data/tokenizer.h"

enum { CLP_TOK_BYTE, CLP_TOK_GPT2, CLP_TOK_BPE, CLP_TOK_WORDPIECE };

/* How byte-level BPE splits text before merging. */
enum {
	CLP_SPLIT_GPT2,   /* GPT-2's pattern (clp_tok_gpt2_split) */
	CLP_SPLIT_LLAMA3, /* LLaMA-3's: numbers in runs of at most 3 */
	CLP_SPLIT_QWEN2,  /* Qwen2's: LLaMA-3's with single-digit numbers */
	CLP_SPLIT_NONE,   /* ByteLevel with use_regex = false and no Split: one piece */
};

typedef struct clp_tok_added {
	int32_t id;
	char *text; /* its content, matched in text when not special */
	size_t len;
	int special;
} clp_tok_added;

struct clp_tok {
	int kind;
	int vocab;
	char *pool;   /* bytes of every token, back to back */
	size_t *off;  /* (vocab + 1): token i is pool[off[i] .. off[i+1]) */
	int nspecial;
	int32_t *special; /* (nspecial) ids of the special tokens */
	int32_t role[CLP_TOK_NROLES]; /* -1: none */
	char *path;   /* the file read, for messages */

	int nadded;   /* tokenizer.json added_tokens */
	clp_tok_added *added;
	int nmatch;   /* how many of them are matched in text (the non-special ones) */

	/* byte-level BPE (gpt2, bpe) */
	char *vocab_path;
	int split, add_prefix_space, ignore_merges, nfc;
	int32_t byte_id[256]; /* id of each single-byte token, -1 if the vocabulary lacks it */
	clp_smap tok2id;      /* token bytes -> id (wordpiece: the token as written) */
	clp_umap merges;      /* (left << 32 | right) -> (rank << 32 | merged id) */
	clp_smap cache;       /* piece bytes -> (offset << 16 | count) into cache_ids */
	clp_ids cache_ids;
	clp_ids word, next;   /* merge scratch */

	/* wordpiece */
	int clean_text, chinese, strip_accents, lowercase, max_chars, cleanup;
	char prefix[16];      /* continuing_subword_prefix, "##" */
	int32_t *cps;         /* code point scratch */
	size_t ncps;
	unsigned char *wbuf;  /* word bytes scratch */
	size_t nwbuf;
};

/* Byte-level BPE (tok_gpt2.c). */
clp_status clp_tok_gpt2_encode(clp_tok *t, const char *text, size_t len, clp_ids *out);
void clp_tok_gpt2_release(clp_tok *t);
/* A token in GPT-2's byte-to-unicode alphabet as raw bytes (out holds len bytes): the byte
 * count, or -1 with *bad the code point outside the alphabet. */
long clp_tok_bytelevel_unmap(const char *s, size_t len, unsigned char *out, int32_t *bad);
/* Add the merge of a and b (strings in the byte alphabet) at rank; `where` names the entry in
 * messages ("merges.txt:7", "tokenizer.json: model.merges[6]"). */
clp_status clp_tok_bpe_add_merge(clp_tok *t, const char *where, const char *a, size_t la,
				 const char *b, size_t lb, uint64_t rank);
/* The end of the LLaMA-3 (max_digits 3) or Qwen2 (1) pre-tokeniser piece starting at pos. */
size_t clp_tok_llama3_split(const char *text, size_t len, size_t pos, int max_digits);

/* Fill pool/off/vocab from n token byte strings (NULL entries are an error naming the id). */
clp_status clp_tok_set_pool(clp_tok *t, unsigned char *const *tok, const size_t *len, size_t n);

/* WordPiece (tok_wordpiece.c). */
clp_status clp_tok_wp_encode(clp_tok *t, const char *text, size_t len, clp_ids *out);
clp_status clp_tok_wp_decode(const clp_tok *t, const int32_t *ids, size_t n, char **text,
			     size_t *len);
/* vocab.txt with BERT's defaults. */
clp_status clp_tok_vocab_txt_load(clp_tok **t, const char *path);
/* BERT's defaults (clean_text, Chinese characters, lowercase and accent stripping). */
void clp_tok_wp_defaults(clp_tok *t);

/* tokenizer.json (tok_json.c). */
clp_status clp_tok_json_load(clp_tok **t, const char *path);

/* Roles by the well-known names ([MASK], <|endoftext|>, ...) among the specials (tok_open.c). */
void clp_tok_roles_by_name(clp_tok *t);

#endif
