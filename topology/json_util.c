/* Typed JSON field reads with errors that name the file and field; whole-file load and store. */
#include "topology/json_util.h"

#include "cl/durable.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const json_t *field(const json_t *o, const char *key)
{
	return json_is_object(o) ? json_object_get(o, key) : NULL;
}

static clp_status missing(int required, const char *key, const char *origin, const char *where)
{
	if (!required)
		return CLP_OK;
	return clp_error(CLP_ERR_FORMAT, "%s: %s: missing field '%s'", origin, where, key);
}

static clp_status wrong(const char *key, const char *what, const char *origin, const char *where)
{
	return clp_error(CLP_ERR_FORMAT, "%s: %s.%s: %s", origin, where, key, what);
}

clp_status tj_str(const json_t *o, const char *key, char *dst, size_t n, int required,
		  const char *origin, const char *where)
{
	const json_t *v = field(o, key);

	if (!v || json_is_null(v))
		return missing(required, key, origin, where);
	if (!json_is_string(v))
		return wrong(key, "expected a string", origin, where);
	snprintf(dst, n, "%s", json_string_value(v));
	return CLP_OK;
}

static clp_status get_ll(const json_t *o, const char *key, long long *dst, int *found,
			 int required, const char *origin, const char *where)
{
	const json_t *v = field(o, key);

	*found = 0;
	if (!v || json_is_null(v))
		return missing(required, key, origin, where);
	if (json_is_integer(v)) {
		*dst = (long long)json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v)) {
		*dst = (long long)json_real_value(v); /* 1e9 written as a float is still whole */
	} else {
		return wrong(key, "expected an integer", origin, where);
	}
	*found = 1;
	return CLP_OK;
}

clp_status tj_int(const json_t *o, const char *key, int *dst, long long min, long long max,
		  int required, const char *origin, const char *where)
{
	long long v;
	int found;

	CLP_TRY(get_ll(o, key, &v, &found, required, origin, where));
	if (!found)
		return CLP_OK;
	if (v < min || v > max)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.%s: %lld is outside [%lld, %lld]", origin,
				 where, key, v, min, max);
	*dst = (int)v;
	return CLP_OK;
}

clp_status tj_u64(const json_t *o, const char *key, uint64_t *dst, int required,
		  const char *origin, const char *where)
{
	long long v;
	int found;

	CLP_TRY(get_ll(o, key, &v, &found, required, origin, where));
	if (!found)
		return CLP_OK;
	if (v < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.%s: %lld is negative", origin, where, key,
				 v);
	*dst = (uint64_t)v;
	return CLP_OK;
}

clp_status tj_u32(const json_t *o, const char *key, uint32_t *dst, int required,
		  const char *origin, const char *where)
{
	int v = 0;
	int found = field(o, key) != NULL && !json_is_null(field(o, key));

	CLP_TRY(tj_int(o, key, &v, 0, 2147483647LL, required, origin, where));
	if (found)
		*dst = (uint32_t)v;
	return CLP_OK;
}

clp_status tj_bool(const json_t *o, const char *key, int *dst, int required, const char *origin,
		   const char *where)
{
	const json_t *v = field(o, key);

	if (!v || json_is_null(v))
		return missing(required, key, origin, where);
	if (!json_is_boolean(v))
		return wrong(key, "expected true or false", origin, where);
	*dst = json_is_true(v);
	return CLP_OK;
}

clp_status tj_double(const json_t *o, const char *key, double *dst, int required,
		     const char *origin, const char *where)
{
	const json_t *v = field(o, key);

	if (!v || json_is_null(v))
		return missing(required, key, origin, where);
	if (!json_is_number(v))
		return wrong(key, "expected a number", origin, where);
	*dst = json_number_value(v);
	return CLP_OK;
}

clp_status tj_array(const json_t *o, const char *key, const json_t **arr, int required,
		    const char *origin, const char *where)
{
	const json_t *v = field(o, key);

	*arr = NULL;
	if (!v || json_is_null(v))
		return missing(required, key, origin, where);
	if (!json_is_array(v))
		return wrong(key, "expected an array", origin, where);
	*arr = v;
	return CLP_OK;
}

clp_status tj_load(const char *path, json_t **out)
{
	json_error_t err;
	FILE *f;

	*out = NULL;
	f = fopen(path, "r");
	if (!f)
		return clp_error(CLP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
	*out = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
	fclose(f);
	if (!*out)
		return clp_error(CLP_ERR_FORMAT, "%s:%d:%d: not valid JSON: %s", path, err.line,
				 err.column, err.text);
	return CLP_OK;
}

clp_status tj_store(const json_t *j, const char *path)
{
	return clp_io_write_json(path, j, JSON_INDENT(2), 1, CLP_IO_SHARED);
}
