/* Typed JSON field reads with errors that name the file and field; whole-file load and store. */
#include "topology/json_util.h"

#include <math.h>

#include "cl/base/durable.h"
#include "cl/base/json_util.h"

/* The readers are cl/base/json_util.h's (one implementation, one message format: "file: at.key: ...");
 * these keep topology's argument order (object and key first, origin and where last). */

clp_status tj_str(const json_t *o, const char *key, char *dst, size_t n, int required,
		  const char *origin, const char *where)
{
	return clp_json_str(origin, where, o, key, required, dst, n);
}

clp_status tj_int(const json_t *o, const char *key, int *dst, long long min, long long max,
		  int required, const char *origin, const char *where)
{
	int64_t v = *dst;

	CLP_TRY(clp_json_i64(origin, where, o, key, required, min, max, &v));
	*dst = (int)v;
	return CLP_OK;
}

clp_status tj_u64(const json_t *o, const char *key, uint64_t *dst, int required,
		  const char *origin, const char *where)
{
	int64_t v = (int64_t)*dst;

	CLP_TRY(clp_json_i64(origin, where, o, key, required, 0, INT64_MAX, &v));
	*dst = (uint64_t)v;
	return CLP_OK;
}

clp_status tj_u32(const json_t *o, const char *key, uint32_t *dst, int required,
		  const char *origin, const char *where)
{
	int64_t v = (int64_t)*dst;

	CLP_TRY(clp_json_i64(origin, where, o, key, required, 0, 2147483647LL, &v));
	*dst = (uint32_t)v;
	return CLP_OK;
}

clp_status tj_bool(const json_t *o, const char *key, int *dst, int required, const char *origin,
		   const char *where)
{
	return clp_json_bool(origin, where, o, key, required, dst);
}

clp_status tj_double(const json_t *o, const char *key, double *dst, int required,
		     const char *origin, const char *where)
{
	return clp_json_num(origin, where, o, key, required, -HUGE_VAL, HUGE_VAL, dst);
}

clp_status tj_array(const json_t *o, const char *key, const json_t **arr, int required,
		    const char *origin, const char *where)
{
	json_t *a = NULL;
	clp_status st = clp_json_arr(origin, where, o, key, required, &a);

	*arr = a;
	return st;
}

clp_status tj_load(const char *path, json_t **out)
{
	return clp_json_load(path, out);
}

clp_status tj_store(const json_t *j, const char *path)
{
	return clp_io_write_json(path, j, JSON_INDENT(2), 1, CLP_IO_SHARED);
}
