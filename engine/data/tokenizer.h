/* Tokenisers: text bytes <-> token ids.
 *
 * Four kinds behind one handle:
 *   byte   ids 0..255 are the bytes themselves; the specials given at creation follow
 *          (256, 257, ...). Any file is valid input.
 *   gpt2   GPT-2's byte-level BPE, loaded from the standard vocab.json and merges.txt. Text is
 *          split by GPT-2's pre-tokeniser pattern
 *            's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *          (implemented by hand, with Unicode letter/number tables; see docs/DATA.md for how
 *          invalid UTF-8 is treated), then each piece is merged by rank as in GPT-2's encoder.py.
 *   bpe    byte-level BPE from a Hugging Face tokenizer.json (GPT-2, LLaMA-3 and Qwen2 style
 *          pre-tokenisers, merges as "a b" or ["a", "b"], ignore_merges, added tokens).
 *   wordpiece  BERT's WordPiece, from tokenizer.json or a bare vocab.txt (BERT's defaults:
 *          lowercase, strip accents, clean text, Chinese characters split).
 * clp_tok_open reads a model directory or a file and picks the kind; docs/DATA.md lists what
 * each reader accepts and what it refuses.
 *
 * Special tokens are never produced from text (like tiktoken's encode_ordinary, or `tokenizers`
 * with encode_special_tokens = True): the string "<|endoftext|>" in a file encodes as ordinary
 * text. Added tokens that are not special (tokenizer.json) are matched in text, as there.
 * Callers insert special ids themselves, e.g. clp_tok_role_id(t, CLP_TOK_EOS) between
 * documents.
 *
 * Token ids are int32_t everywhere (batches use -1 for "no target"). A clp_tok is not
 * thread-safe while encoding (the BPE cache); decoding only reads. */
#ifndef CLP_DATA_TOKENIZER_H
#define CLP_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

typedef struct clp_tok clp_tok;

/* A growable array of token ids. Zero-initialise; free with clp_ids_free. */
typedef struct clp_ids {
	int32_t *v;
	size_t n, cap;
} clp_ids;

clp_status clp_ids_push(clp_ids *a, int32_t id);
void clp_ids_free(clp_ids *a);

/* Special-token sets for the byte tokeniser: GPT-style and BERT-style. */
extern const char *const clp_tok_specials_gpt[];  /* <|endoftext|> */
extern const int clp_tok_specials_gpt_n;
extern const char *const clp_tok_specials_bert[]; /* [PAD] [CLS] [SEP] [MASK] [UNK] */
extern const int clp_tok_specials_bert_n;

/* The byte tokeniser with specials 256, 257, ... in the given order (names must be distinct
 * and non-empty; nspecial may be 0). */
clp_status clp_tok_byte_create(clp_tok **t, const char *const *specials, int nspecial);
/* GPT-2 BPE from vocab.json (token string -> id, in GPT-2's byte-to-unicode alphabet) and
 * merges.txt (one "a b" pair per line, highest priority first; an optional "#version" first
 * line). Errors name the file and the line or token at fault. "<|endoftext|>", if present in
 * the vocabulary, is the special end-of-text token. */
clp_status clp_tok_gpt2_load(clp_tok **t, const char *vocab_path, const char *merges_path);
/* A tokenizer from a path: a directory holding tokenizer.json (preferred), vocab.txt, or
 * vocab.json with merges.txt; or one of those files (merges.txt is looked for beside a
 * vocab.json). tokenizer_config.json beside it, when present, names the special tokens' roles
 * (mask_token, cls_token, ...). Errors name the path and what was looked for. */
clp_status clp_tok_open(clp_tok **t, const char *path);
void clp_tok_free(clp_tok *t);

/* The special tokens' roles, for masking, padding and document separators. */
typedef enum clp_tok_role {
	CLP_TOK_UNK, CLP_TOK_PAD, CLP_TOK_CLS, CLP_TOK_SEP, CLP_TOK_MASK, CLP_TOK_BOS, CLP_TOK_EOS,
	CLP_TOK_NROLES
} clp_tok_role;
/* The id playing a role, or -1 when the tokenizer has none. */
int32_t clp_tok_role_id(const clp_tok *t, clp_tok_role role);
/* The path a tokenizer was read from ("" for the byte tokenizer). */
const char *clp_tok_path(const clp_tok *t);

/* Number of ids (all ids are in [0, vocab size)). */
int clp_tok_vocab_size(const clp_tok *t);
/* Id of a special token by name, or -1. */
int32_t clp_tok_special_id(const clp_tok *t, const char *name);
/* 1 when id is a special token (for masking and loss). */
int clp_tok_is_special(const clp_tok *t, int32_t id);
/* "byte", "gpt2", "bpe" or "wordpiece". */
const char *clp_tok_kind(const clp_tok *t);

/* Encode len bytes of text, appending ids to out. */
clp_status clp_tok_encode(clp_tok *t, const char *text, size_t len, clp_ids *out);
/* Encode a whole file (a missing or empty file is an error naming it). */
clp_status clp_tok_encode_file(clp_tok *t, const char *path, clp_ids *out);

/* The bytes of one token (a special's name for byte-tokeniser specials; a WordPiece token as
 * the vocabulary writes it, "##ing"); pointer owned by t. */
clp_status clp_tok_token(const clp_tok *t, int32_t id, const char **bytes, size_t *len);
/* Decode n ids into a malloc()ed, NUL-terminated byte string (*len excludes the NUL). An id out
 * of range is an error naming it and its position. Byte-level kinds concatenate the tokens'
 * bytes (lossless); WordPiece joins words with spaces, glues "##" pieces and applies
 * `tokenizers`' cleanup (" ." -> "."), like its WordPiece decoder. */
clp_status clp_tok_decode(const clp_tok *t, const int32_t *ids, size_t n, char **text,
			  size_t *len);

/* GPT-2's pre-tokeniser: the end of the piece that starts at byte pos (< len) of text. Pieces
 * cover the text exactly; exposed for tests and tools. */
size_t clp_tok_gpt2_split(const char *text, size_t len, size_t pos);

#endif
