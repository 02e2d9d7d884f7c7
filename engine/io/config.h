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

#include "cl/status.h"

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

typedef struct clp_cfg_schema {
	const char *name; /* what it configures, for messages */
	const clp_cfg_field *fields;
	int nfields;
} clp_cfg_schema;

/* Helpers to declare fields: CLP_CFG_FIELD(struct type, member, "section.key", TYPE, ...). */
#define CLP_CFG_FIELD(T, member, key, type, dflt, help, min, max, choices)                        \
	{ key, type, offsetof(T, member), sizeof(((T *)0)->member), dflt, help, min, max, choices }

clp_status clp_cfg_defaults(const clp_cfg_schema *s, void *obj);
/* Read a config file over obj (which holds defaults or earlier values). */
clp_status clp_cfg_load_file(const clp_cfg_schema *s, void *obj, const char *path);
clp_status clp_cfg_load_string(const clp_cfg_schema *s, void *obj, const char *text,
			       const char *origin);
/* Set one field from text; origin names where the text came from in messages. */
clp_status clp_cfg_set(const clp_cfg_schema *s, void *obj, const char *key, const char *value,
		       const char *origin);
const clp_cfg_field *clp_cfg_find(const clp_cfg_schema *s, const char *key);
/* Where field key was last set through clp_cfg_set ("config F:3", "command line --model.n_head"),
 * or NULL for its default (or nothing recorded). */
const char *clp_cfg_origin(const clp_cfg_schema *s, const char *key);
/* For checks that run after reading (one field against another): append to the last error where
 * each field of s that it names was set, "model.d_model = 64 is not a multiple of model.n_head =
 * 3 (model.d_model from a.toml:3; model.n_head from command line --model.n_head)", and return st. */
clp_status clp_cfg_name_origins(const clp_cfg_schema *s, clp_status st);

/* Apply command-line overrides: every "--section.key=value" or "--section.key value" whose key
 * is in the schema is applied and removed from argv; "--config F" loads F first (wherever it
 * appears). Other arguments stay, in order. */
clp_status clp_cfg_args(const clp_cfg_schema *s, void *obj, int *argc, char **argv);

/* Write obj in file syntax (with help comments when comments != 0). */
void clp_cfg_write(const clp_cfg_schema *s, const void *obj, FILE *f, int comments);
/* The same text, malloc()ed. */
char *clp_cfg_to_string(const clp_cfg_schema *s, const void *obj);
/* Print the help of every field (for --help). */
void clp_cfg_help(const clp_cfg_schema *s, FILE *f);

#endif
