/* UTF-8 decoding and the Unicode classes GPT-2's pre-tokeniser needs: letters (\p{L}), numbers
 * (\p{N}) and whitespace (\s). Letter and number ranges are generated from Python's unicodedata
 * (engine/data/gen_unicode.py), so they match the regex module for that Unicode version. */
#ifndef CLP_DATA_UNICODE_H
#define CLP_DATA_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Decode one code point at s[0..n) (n > 0). Returns its length in bytes; an invalid or truncated
 * sequence, an overlong form or a surrogate yields length 1 and *cp = -1, so every byte of any
 * input is consumed exactly once. */
int clp_utf8_decode(const unsigned char *s, size_t n, int32_t *cp);

int clp_uni_is_letter(int32_t cp);
int clp_uni_is_number(int32_t cp);
/* Unicode White_Space (what \s matches in the regex module). */
int clp_uni_is_space(int32_t cp);

extern const uint32_t clp_uni_letters[][2];
extern const int clp_uni_letters_n;
extern const uint32_t clp_uni_numbers[][2];
extern const int clp_uni_numbers_n;

#endif
