/* UTF-8 decoding and the Unicode classes GPT-2's pre-tokeniser needs: letters (\p{L}), numbers
 * (\p{N}) and whitespace (\s); BERT's classes, lowercasing and NFD. Letter and number ranges are generated from Python's unicodedata
 * (engine/data/gen_unicode.py), so they match the regex module for that Unicode version. */
#ifndef CLP_DATA_UNICODE_H
#define CLP_DATA_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Decode one code point at s[0..n) (n > 0). Returns its length in bytes; an invalid or truncated
 * sequence, an overlong form or a surrogate yields length 1 and *cp = -1, so every byte of any
 * input is consumed exactly once. */
int clp_utf8_decode(const unsigned char *s, size_t n, int32_t *cp);
/* Encode a code point (0..0x10FFFF) to o (4 bytes room); returns the length. */
int clp_utf8_encode(int32_t cp, unsigned char *o);

int clp_uni_is_letter(int32_t cp);
int clp_uni_is_number(int32_t cp);
/* Unicode White_Space (what \s matches in the regex module). */
int clp_uni_is_space(int32_t cp);

/* BERT's character classes (engine/data/unicode_bert.c) as Hugging Face `tokenizers` sees them
 * (probed from it, see gen_unicode.py: its tables are older than Unicode 14): the nonspacing
 * marks strip_accents removes, the punctuation BertPreTokenizer isolates, and the characters
 * clean_text removes (control, format, private use; NUL and U+FFFD; not unassigned ones). */
int clp_uni_is_mark(int32_t cp);
int clp_uni_is_punct(int32_t cp);
int clp_uni_is_other(int32_t cp);
/* The lowercase of one code point (Python's str.lower() of that character alone, which is
 * Rust's char::to_lowercase): writes 1 or 2 code points to out and returns the count. */
int clp_uni_lower(int32_t cp, int32_t out[2]);
/* Canonical combining class (0 for starters). */
int clp_uni_ccc(int32_t cp);
/* NFD of n code points in (cp < 0 passes through): the full canonical decomposition of each,
 * Hangul syllables included, then the canonical ordering of combining marks. Writes at most
 * cap code points to out and returns how many NFD has (more than cap: call again larger).
 * A code point decomposes to at most 4. */
size_t clp_uni_nfd(const int32_t *in, size_t n, int32_t *out, size_t cap);

/* NFC of n code points in place (NFD first, then canonical composition, Hangul included); a
 * negative code point is a starter that composes with nothing. Returns the new count, or
 * (size_t)-1 when out of memory. */
size_t clp_uni_nfc(int32_t **cps, size_t n, size_t *cap);

extern const uint32_t clp_uni_letters[][2];
extern const int clp_uni_letters_n;
extern const uint32_t clp_uni_numbers[][2];
extern const int clp_uni_numbers_n;

extern const uint32_t clp_uni_marks[][2];
extern const int clp_uni_marks_n;
extern const uint32_t clp_uni_punct[][2];
extern const int clp_uni_punct_n;
extern const uint32_t clp_uni_other[][2];
extern const int clp_uni_other_n;
extern const int32_t clp_uni_lower_tab[];   /* (first, last, step, delta) quadruples */
extern const int clp_uni_lower_tab_n;
extern const uint32_t clp_uni_decomp[]; /* (cp, first, second or 0) triples, by cp */
extern const int clp_uni_decomp_n;
extern const uint32_t clp_uni_comp[];   /* (first, second, composite) triples, by pair */
extern const int clp_uni_comp_n;
extern const uint32_t clp_uni_ccc_tab[];    /* (first, last, class) triples */
extern const int clp_uni_ccc_tab_n;

#endif
