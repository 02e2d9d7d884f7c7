/* The fuzzing harness of the readers (tests/fuzz, docs/ROBUSTNESS.md): seeded mutants of a valid
 * input per format, each consumed in a child process (fuzz.c), the outcome counted. */
#ifndef CLP_TEST_FUZZ_H
#define CLP_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

/* A growable byte buffer (the input being mutated). */
typedef struct fz_buf {
	unsigned char *p;
	size_t n, cap;
} fz_buf;

int fz_buf_set(fz_buf *b, const void *data, size_t n);
void fz_buf_free(fz_buf *b);
int fz_read(const char *path, fz_buf *b);
int fz_write(const char *path, const fz_buf *b);

/* splitmix64 */
uint64_t fz_next(uint64_t *state);

/* Apply 1..3 random mutations (byte flips, truncation, inserted garbage, huge and negative
 * numbers, deep nesting, wrong types, repeated slices, hostile binary integers) to b. names
 * gets the mutations applied ("flip+number"). Returns 0, or -1 when out of memory. */
int fz_mutate(fz_buf *b, uint64_t *rng, char *names, size_t len);

/* A format: where its seed is and what consumes an input the way clpipe does. */
typedef struct fz_format {
	const char *name;
	const char *ext;        /* of the mutant's file name (".json") */
	const char *seed;       /* a valid input; for in_dir formats the file inside the seed
				 * directory */
	const char *seed_dir;   /* NULL, or a directory (a checkpoint) copied for each mutant with
				 * the file `seed` names inside mutated; the consumer gets the dir */
	clp_status (*eat)(const char *path);
} fz_format;

/* fuzz_formats.c: the formats (seeds made under work/ where they are not fixtures). */
int fz_formats(const char *work, const fz_format **out);

#endif
