/* JSON helpers of the topology readers and writers (internal): cl/base/json_util.h's typed field reads
 * and file load in topology's argument order (object and key first, origin and where last), and
 * the durable store of an indented document. */
#ifndef CLP_TOPO_JSON_UTIL_H
#define CLP_TOPO_JSON_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cl/base/status.h"

/* Each reads o[key]. Missing (or null): CLP_ERR_FORMAT when required, else the destination is
 * left as it was. Wrong type, out of range or a string longer than the destination:
 * CLP_ERR_FORMAT "origin: where.key: ...". */
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
/* Write j (indented) to path durably (cl/base/durable.h; several ranks may write one path). */
clp_status tj_store(const json_t *j, const char *path);

#endif
