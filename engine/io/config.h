/* Configuration: a schema-driven reader and writer for clpipe's config files.
 *
 * Format (docs/CONFIG.md): a subset of TOML. Sections in [brackets], `key = value` lines, values
 * are integers, floats, true/false, "strings" or lists of integers [1, 2, 3]; # starts a comment.
 * Every field has a full name "section.key" and can be overridden on the command line with
 * --section.key=value (or --section.key value). The effective config prints in the same format,
 * so a printed config is a valid config file, and as JSON for checkpoints and logs.
 *
 * A schema is a table of fields (name, type, offset into a struct, default, help), declared once
 * per struct; unknown keys, bad values and out-of-range numbers are errors that name the file,
 * line and key. */
#ifndef CLP_IO_CONFIG_H
#define CLP_IO_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "cl/base/status.h"

typedef enum clp_cfg_type {
	CLP_CFG_INT,    /* long */
	CLP_CFG_FLOAT,  /* double */
	CLP_CFG_BOOL,   /* int, 0 or 1 */
	CLP_CFG_STRING, /* char[size] */
	CLP_CFG_INTS,   /* clp_cfg_ints */
} clp_cfg_type;

#define CLP_CFG_MAX_INTS 64
typedef struct clp_cfg_ints {
	int n;
	long v[CLP_CFG_MAX_INTS];
} clp_cfg_ints;

typedef struct clp_cfg_field {
	const char *key;     /* "section.name" */
	clp_cfg_type type;
	size_t offset;       /* of the member in the config struct */
	size_t size;         /* of the member (string capacity) */
	const char *dflt;    /* default, in file syntax ("12", "3e-4", "true", "\"gpt2\"", "[]") */
	const char *help;
	double min, max;     /* inclusive range for INT/FLOAT/INTS elements when min < max */
	const char *choices; /* "a|b|c" for STRING fields with a fixed set of values, or NULL */
} clp_cfg_field;

/* Where a value came from ("default", "run.toml:12", "command line --model.n_layer",
 * "gpt2/config.json n_embd"), for messages and the printed effective config. */
#define CLP_CFG_ORIGIN_LEN 96
typedef char clp_cfg_origin[CLP_CFG_ORIGIN_LEN];

typedef struct clp_cfg_schema {
	const char *name; /* what it configures, for messages */
	const clp_cfg_field *fields;
	int nfields;
	/* offset of a clp_cfg_origin[nfields] member of the config struct where clp_cfg_set
	 * records each field's origin; 0 when the struct keeps none */
	size_t origins;
} clp_cfg_schema;

/* Helpers to declare fields: CLP_CFG_FIELD(struct type, member, "section.key", TYPE, ...). */
#define CLP_CFG_FIELD(T, member, key, type, dflt, help, min, max, choices)                        \
	{ key, type, offsetof(T, member), sizeof(((T *)0)->member), dflt, help, min, max, choices }

clp_status clp_cfg_defaults(const clp_cfg_schema *s, void *obj);
/* Read a config file over obj (which holds defaults or earlier values). */
clp_status clp_cfg_load_file(const clp_cfg_schema *s, void *obj, const char *path);
clp_status clp_cfg_load_string(const clp_cfg_schema *s, void *obj, const char *text,
			       const char *origin);
/* Set one field from text in file syntax (surrounding blanks are ignored, strings may be
 * quoted); origin names where the text came from in messages (and is recorded). */
clp_status clp_cfg_set(const clp_cfg_schema *s, void *obj, const char *key, const char *value,
		       const char *origin);
/* The same for a command-line argument: a string value is taken as it is, blanks included
 * (`--prompt "The "`), unless the whole value is quoted. */
clp_status clp_cfg_set_arg(const clp_cfg_schema *s, void *obj, const char *key,
			   const char *value, const char *origin);
/* The recorded origin of a field ("" when the schema keeps none). */
const char *clp_cfg_origin_of(const clp_cfg_schema *s, const void *obj, const char *key);
/* Set a field from a source that describes the thing itself (a model's config.json, the
 * config stored in a checkpoint): a value set before from anywhere but the defaults that
 * differs is an error naming both values and their origins; the field is left unchanged. */
clp_status clp_cfg_set_strict(const clp_cfg_schema *s, void *obj, const char *key,
			      const char *value, const char *origin);
/* A field's value in file syntax into buf (truncated to n); "" for an unknown key. */
void clp_cfg_get(const clp_cfg_schema *s, const void *obj, const char *key, char *buf, size_t n);
/* Record an origin for a field set directly in the struct. */
void clp_cfg_set_origin(const clp_cfg_schema *s, void *obj, const char *key, const char *origin);
const clp_cfg_field *clp_cfg_find(const clp_cfg_schema *s, const char *key);
/* The key of s closest to a misspelt one (a few edits, or "batch" for "train.batch"), or NULL;
 * and the edit distance it uses (insertions, deletions, substitutions, adjacent swaps). */
const char *clp_cfg_nearest(const clp_cfg_schema *s, const char *key);
int clp_cfg_distance(const char *a, const char *b);
/* For checks that run after reading (one field against another): append to the last error where
 * each field of s that it names was set, as recorded in obj's origins, "model.d_model = 64 is not
 * a multiple of model.n_head = 3 (model.d_model from a.toml:3; model.n_head from command line
 * --model.n_head)", and return st. */
clp_status clp_cfg_name_origins(const clp_cfg_schema *s, const void *obj, clp_status st);

/* Apply command-line overrides: every "--section.key=value" or "--section.key value" whose key
 * is in the schema is applied and removed from argv; "--config F" loads F first (wherever it
 * appears). Other arguments stay, in order. */
clp_status clp_cfg_args(const clp_cfg_schema *s, void *obj, int *argc, char **argv);

/* Write obj in file syntax, valid TOML (each section once): with CLP_CFG_HELP each field's help
 * as a comment above it, with CLP_CFG_ORIGINS the origin of every value that is not a default
 * as a comment after it. */
enum { CLP_CFG_HELP = 1, CLP_CFG_ORIGINS = 2 };
void clp_cfg_write(const clp_cfg_schema *s, const void *obj, FILE *f, int flags);
/* The same text, malloc()ed. */
char *clp_cfg_to_string(const clp_cfg_schema *s, const void *obj);
/* Print the help of every field (for --help). */
void clp_cfg_help(const clp_cfg_schema *s, FILE *f);

#endif
