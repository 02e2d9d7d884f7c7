/* Small JSON helpers shared by the topology readers and writers (internal): typed field reads
 * whose errors name the file and the field, and whole-file load/store. */
#ifndef CLP_TOPO_JSON_UTIL_H
#define CLP_TOPO_JSON_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cl/status.h"

/* Each reads o[key]. Missing: CLP_ERR_FORMAT when required, else the destination is left as it
 * was. Wrong type or out of range: CLP_ERR_FORMAT "origin: where.key: ...". Strings longer than
 * the destination are cut. */
clp_status tj_str(const json_t *o, const char *key, char *dst, size_t n, int required,
		  const char *origin, const char *where);
clp_status tj_int(const json_t *o, const char *key, int *dst, long long min, long long max,
		  int required, const char *origin, const char *where);
clp_status tj_u64(const json_t *o, const char *key, uint64_t *dst, int required,
		  const char *origin, const char *where);
clp_status tj_u32(const json_t *o, const char *key, uint32_t *dst, int required,
		  const char *origin, const char *where);
clp_status tj_bool(const json_t *o, const char *key, int *dst, int required, const char *origin,
		   const char *where);
clp_status tj_double(const json_t *o, const char *key, double *dst, int required,
		     const char *origin, const char *where);
/* o[key] must be an array (required) */
clp_status tj_array(const json_t *o, const char *key, const json_t **arr, int required,
		    const char *origin, const char *where);

/* Parse a file; errors name the path, line and column. *out is a new reference. */
clp_status tj_load(const char *path, json_t **out);
/* Write j (indented) to path through a temporary file and a rename. */
clp_status tj_store(const json_t *j, const char *path);

#endif
