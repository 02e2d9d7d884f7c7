/* JSON reading helpers with file- and field-naming messages (see json_util.h). */
#include "cl/base/json_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "cl/base/infile.h"

/* "stages[3].fwd_s", or "fwd_s" at the root. */
static const char *field(char *buf, size_t n, const char *at, const char *key)
{
	snprintf(buf, n, "%s%s%s", at, at[0] && key[0] ? "." : "", key);
	return buf;
}

clp_status clp_json_parse(const char *name, const char *text, size_t n, json_t **root)
{
	json_error_t err;

	*root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
	if (*root)
		return CLP_OK;
	return clp_error(CLP_ERR_FORMAT, "%s: line %d column %d: not valid JSON: %s", name,
			 err.line, err.column, err.text);
}

clp_status clp_json_load(const char *path, json_t **root)
{
	char *text;
	size_t n;
	clp_status s;

	*root = NULL;
	CLP_TRY(clp_infile_read(NULL, path, CLP_INFILE_JSON_MAX, &text, &n));
	s = clp_json_parse(path, text, n, root);
	free(text);
	return s;
}

clp_status clp_json_check_format(const char *file, const json_t *root, const char *format,
				 int max_version)
{
	char got[64] = "";
	int version = 1;

	if (!json_is_object(root))
		return clp_error(CLP_ERR_FORMAT, "%s: expected a JSON object at the top", file);
	CLP_TRY(clp_json_str(file, "", root, "format", 0, got, sizeof(got)));
	if (got[0] && strcmp(got, format))
		return clp_error(CLP_ERR_FORMAT, "%s: format: expected \"%s\", found \"%s\"", file,
				 format, got);
	CLP_TRY(clp_json_int(file, "", root, "version", 0, 1, max_version, &version));
	return CLP_OK;
}

clp_status clp_json_check_keys(const char *file, const char *at, const json_t *obj,
			       const char *const *allowed)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v) {
		int ok = 0;
		char buf[256];

		for (const char *const *a = allowed; *a && !ok; a++)
			ok = !strcmp(*a, key);
		if (!ok)
			return clp_error(CLP_ERR_FORMAT, "%s: %s: unknown field", file,
					 field(buf, sizeof(buf), at, key));
	}
	return CLP_OK;
}

/* obj[key]; a JSON null counts as absent (NULL). */
static json_t *member(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

static clp_status missing(const char *file, const char *at, const char *key)
{
	char buf[256];

	return clp_error(CLP_ERR_FORMAT, "%s: %s: missing (the field '%s' is required)", file,
			 field(buf, sizeof(buf), at, key), key);
}

clp_status clp_json_num(const char *file, const char *at, const json_t *obj, const char *key,
			int required, double min, double max, double *out)
{
	json_t *v = member(obj, key);
	char buf[256];
	double x;

	if (!v)
		return required ? missing(file, at, key) : CLP_OK;
	if (!json_is_number(v))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected a number", file,
				 field(buf, sizeof(buf), at, key));
	x = json_number_value(v);
	if (!isfinite(x) || x < min || x > max)
		return clp_error(CLP_ERR_FORMAT, "%s: %s: %g is out of range, outside [%g, %g]",
				 file, field(buf, sizeof(buf), at, key), x, min, max);
	*out = x;
	return CLP_OK;
}

clp_status clp_json_i64(const char *file, const char *at, const json_t *obj, const char *key,
			int required, int64_t min, int64_t max, int64_t *out)
{
	json_t *v = member(obj, key);
	char buf[256];
	double d = json_is_real(v) ? json_real_value(v) : 0.5;
	int64_t x;

	if (!v)
		return required ? missing(file, at, key) : CLP_OK;
	if (json_is_integer(v)) {
		x = (int64_t)json_integer_value(v);
	} else if (json_is_real(v) && d == floor(d) && fabs(d) < 9e18) {
		x = (int64_t)d; /* 1e9 written as a real is still a whole number of bytes */
	} else {
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an integer", file,
				 field(buf, sizeof(buf), at, key));
	}
	if (x < min || x > max)
		return clp_error(CLP_ERR_FORMAT, "%s: %s: %lld is out of range, outside [%lld, "
				 "%lld]", file, field(buf, sizeof(buf), at, key), (long long)x,
				 (long long)min, (long long)max);
	*out = x;
	return CLP_OK;
}

clp_status clp_json_int(const char *file, const char *at, const json_t *obj, const char *key,
			int required, int min, int max, int *out)
{
	int64_t x = *out;

	CLP_TRY(clp_json_i64(file, at, obj, key, required, min, max, &x));
	*out = (int)x;
	return CLP_OK;
}

clp_status clp_json_u64(const char *file, const char *at, const json_t *obj, const char *key,
			int required, uint64_t max, uint64_t *out)
{
	int64_t x = (int64_t)*out;

	CLP_TRY(clp_json_i64(file, at, obj, key, required, 0,
			     max > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)max, &x));
	*out = (uint64_t)x;
	return CLP_OK;
}

clp_status clp_json_u32(const char *file, const char *at, const json_t *obj, const char *key,
			int required, uint32_t max, uint32_t *out)
{
	int64_t x = (int64_t)*out;

	CLP_TRY(clp_json_i64(file, at, obj, key, required, 0, (int64_t)max, &x));
	*out = (uint32_t)x;
	return CLP_OK;
}

clp_status clp_json_bool(const char *file, const char *at, const json_t *obj, const char *key,
			 int required, int *out)
{
	json_t *v = member(obj, key);
	char buf[256];

	if (!v)
		return required ? missing(file, at, key) : CLP_OK;
	if (!json_is_boolean(v))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected true or false", file,
				 field(buf, sizeof(buf), at, key));
	*out = json_is_true(v);
	return CLP_OK;
}

clp_status clp_json_str(const char *file, const char *at, const json_t *obj, const char *key,
			int required, char *out, size_t cap)
{
	json_t *v = member(obj, key);
	char buf[256];

	if (!v)
		return required ? missing(file, at, key) : CLP_OK;
	if (!json_is_string(v))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected a string", file,
				 field(buf, sizeof(buf), at, key));
	if (strlen(json_string_value(v)) >= cap)
		return clp_error(CLP_ERR_FORMAT, "%s: %s: longer than %zu characters", file,
				 field(buf, sizeof(buf), at, key), cap - 1);
	snprintf(out, cap, "%s", json_string_value(v));
	return CLP_OK;
}

clp_status clp_json_arr(const char *file, const char *at, const json_t *obj, const char *key,
			int required, json_t **out)
{
	json_t *v = member(obj, key);
	char buf[256];

	*out = NULL;
	if (!v)
		return required ? missing(file, at, key) : CLP_OK;
	if (!json_is_array(v))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an array", file,
				 field(buf, sizeof(buf), at, key));
	*out = v;
	return CLP_OK;
}

clp_status clp_json_obj(const char *file, const char *at, const json_t *obj, const char *key,
			int required, json_t **out)
{
	json_t *v = member(obj, key);
	char buf[256];

	*out = NULL;
	if (!v)
		return required ? missing(file, at, key) : CLP_OK;
	if (!json_is_object(v))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an object", file,
				 field(buf, sizeof(buf), at, key));
	*out = v;
	return CLP_OK;
}

clp_status clp_json_expect_obj(const char *file, const char *at, const json_t *v)
{
	if (!json_is_object(v))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an object", file, at);
	return CLP_OK;
}

clp_status clp_json_save(const char *path, json_t *root)
{
	return clp_io_write_json(path, root,
				 JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), 0, 0);
}

clp_status clp_json_save_shared(const char *path, const json_t *root)
{
	return clp_io_write_json(path, root, JSON_INDENT(2), 1, CLP_IO_SHARED);
}
