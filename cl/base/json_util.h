/* Reading clpipe's JSON files (cluster, costs, layout, schedules, traces, inventories, device
 * profiles, tuning tables, caches, tokenizer vocabularies) with one API and one message format
 * that names the file and the field, e.g. "costs.json: stages[3].fwd_s: expected a
 * number", "cluster.json: hosts: missing (the field 'hosts' is required)", "x.json: line 2
 * column 7: not valid JSON: ...".
 *
 * `file` is the name used in messages; `at` is the path of the object inside the document
 * ("stages[3]", or "" for the root). Getters return CLP_ERR_FORMAT on a wrong type or range and on
 * a missing required field; an optional missing field (absent, or JSON null) leaves the default;
 * a string longer than its destination is an error, never cut. */
#ifndef CLP_BASE_JSON_UTIL_H
#define CLP_BASE_JSON_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

/* Parse a file: a regular file of at most CLP_INFILE_JSON_MAX bytes (cl/base/infile.h), duplicate
 * keys refused; errors give line and column ("path: line 2 column 7: not valid JSON: ..."). *root
 * is owned by the caller (json_decref). Every JSON file clpipe reads goes through here. */
clp_status clp_json_load(const char *path, json_t **root);
/* The same for n bytes of text already in memory (an embedded table, a schedule string); `name`
 * stands for the file in messages. */
clp_status clp_json_parse(const char *name, const char *text, size_t n, json_t **root);
/* Check "format" and "version" (version <= max_version). */
clp_status clp_json_check_format(const char *file, const json_t *root, const char *format,
				 int max_version);
/* Reject keys not in the NULL-ended list (catches typos such as "fwd" for "fwd_s"). */
clp_status clp_json_check_keys(const char *file, const char *at, const json_t *obj,
			       const char *const *allowed);

clp_status clp_json_num(const char *file, const char *at, const json_t *obj, const char *key,
			int required, double min, double max, double *out);
clp_status clp_json_i64(const char *file, const char *at, const json_t *obj, const char *key,
			int required, int64_t min, int64_t max, int64_t *out);
clp_status clp_json_int(const char *file, const char *at, const json_t *obj, const char *key,
			int required, int min, int max, int *out);
/* Unsigned destinations: a whole number in [0, max] (max at most INT64_MAX). */
clp_status clp_json_u64(const char *file, const char *at, const json_t *obj, const char *key,
			int required, uint64_t max, uint64_t *out);
clp_status clp_json_u32(const char *file, const char *at, const json_t *obj, const char *key,
			int required, uint32_t max, uint32_t *out);
clp_status clp_json_bool(const char *file, const char *at, const json_t *obj, const char *key,
			 int required, int *out);
clp_status clp_json_str(const char *file, const char *at, const json_t *obj, const char *key,
			int required, char *out, size_t cap);
/* An array (or object, for clp_json_obj) member; *out is borrowed, NULL if absent. */
clp_status clp_json_arr(const char *file, const char *at, const json_t *obj, const char *key,
			int required, json_t **out);
clp_status clp_json_obj(const char *file, const char *at, const json_t *obj, const char *key,
			int required, json_t **out);
/* The type check for array elements: "stages[3]: expected an object". */
clp_status clp_json_expect_obj(const char *file, const char *at, const json_t *v);

/* Write root to path (2-space indent, keys in insertion order), atomically via a temp file. */
clp_status clp_json_save(const char *path, json_t *root);
/* Write root to path (2-space indent, jansson's key order and reals, a newline after), durably,
 * where several processes may write the same path (CLP_IO_SHARED: inventories, device
 * descriptions). */
clp_status clp_json_save_shared(const char *path, const json_t *root);

#endif
