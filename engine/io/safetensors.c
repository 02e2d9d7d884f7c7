/* safetensors reader: header validation, tensor lookup, reads with dtype conversion
 * (see safetensors.h; the writer is in safetensors_write.c). */
#include "engine/io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl/base/half.h"

/* Headers beyond this are refused, as the Hugging Face library does (a corrupt length field
 * would otherwise ask for gigabytes). */
#define MAX_HEADER (100u << 20)

struct clp_st_file {
	char *path;
	int fd;
	uint64_t size, data_off; /* file size; data section starts at 8 + N */
	json_t *header;          /* owns the name and dtype strings */
	clp_st_tensor *t;
	int n;
	const char **mkey, **mval;
	int nmeta;
};

static const struct {
	const char *name;
	clp_st_dtype dtype;
	int bytes;
} dtypes[] = {
	{"F32", CLP_ST_F32, 4},   {"F16", CLP_ST_F16, 2},   {"BF16", CLP_ST_BF16, 2},
	{"F64", CLP_ST_F64, 8},   {"I64", CLP_ST_I64, 8},   {"I32", CLP_ST_I32, 4},
	{"I16", CLP_ST_I16, 2},   {"I8", CLP_ST_I8, 1},     {"U8", CLP_ST_U8, 1},
	{"BOOL", CLP_ST_BOOL, 1}, {"U16", CLP_ST_OTHER, 2}, {"U32", CLP_ST_OTHER, 4},
	{"U64", CLP_ST_OTHER, 8}, {"F8_E4M3", CLP_ST_OTHER, 1}, {"F8_E5M2", CLP_ST_OTHER, 1},
};

void clp_st_close(clp_st_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	json_decref(f->header);
	free(f->t);
	free(f->mkey);
	free(f->mval);
	free(f->path);
	free(f);
}

static int by_begin(const void *a, const void *b)
{
	const clp_st_tensor *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static clp_status parse_meta(clp_st_file *f, json_t *meta)
{
	const char *key;
	json_t *v;
	size_t n = json_object_size(meta);
	int i = 0;

	if (!json_is_object(meta))
		return clp_error(CLP_ERR_FORMAT, "%s: __metadata__ is not an object", f->path);
	f->mkey = calloc(n ? n : 1, sizeof(*f->mkey));
	f->mval = calloc(n ? n : 1, sizeof(*f->mval));
	if (!f->mkey || !f->mval)
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", f->path);
	json_object_foreach(meta, key, v) {
		if (!json_is_string(v))
			return clp_error(CLP_ERR_FORMAT, "%s: __metadata__ value of \"%s\" is not a "
					 "string", f->path, key);
		f->mkey[i] = key;
		f->mval[i++] = json_string_value(v);
	}
	f->nmeta = i;
	return CLP_OK;
}

static clp_status parse_tensor(clp_st_file *f, const char *name, json_t *e, clp_st_tensor *t)
{
	json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape");
	json_t *off = json_object_get(e, "data_offsets");
	uint64_t numel = 1;
	size_t k;

	memset(t, 0, sizeof(*t));
	t->name = name;
	if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(sh) ||
	    !json_is_array(off) || json_array_size(off) != 2)
		return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\" needs \"dtype\" (string), "
				 "\"shape\" (array) and \"data_offsets\" ([begin, end])", f->path,
				 name);
	t->dtype_name = json_string_value(dt);
	for (k = 0; k < sizeof(dtypes) / sizeof(dtypes[0]); k++)
		if (!strcmp(dtypes[k].name, t->dtype_name))
			break;
	if (k == sizeof(dtypes) / sizeof(dtypes[0]))
		return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\" has unknown dtype \"%s\"",
				 f->path, name, t->dtype_name);
	t->dtype = dtypes[k].dtype;
	t->elem_bytes = dtypes[k].bytes;
	if (json_array_size(sh) > CLP_ST_MAX_DIM)
		return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\" has %zu dimensions (at most %d)",
				 f->path, name, json_array_size(sh), CLP_ST_MAX_DIM);
	t->ndim = (int)json_array_size(sh);
	for (int d = 0; d < t->ndim; d++) {
		json_t *v = json_array_get(sh, (size_t)d);

		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\": shape[%d] is not a "
					 "non-negative integer", f->path, name, d);
		t->shape[d] = json_integer_value(v);
		if (t->shape[d] && numel > (UINT64_MAX >> 4) / (uint64_t)t->shape[d])
			return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\": the shape is too large",
					 f->path, name);
		numel *= (uint64_t)t->shape[d];
	}
	t->numel = numel;
	for (int j = 0; j < 2; j++) {
		json_t *v = json_array_get(off, (size_t)j);

		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\": data_offsets[%d] is not a "
					 "non-negative integer", f->path, name, j);
	}
	t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
	t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
	if (t->end < t->begin)
		return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\": data_offsets [%llu, %llu] end "
				 "before they begin", f->path, name, (unsigned long long)t->begin,
				 (unsigned long long)t->end);
	if (t->end - t->begin != numel * (uint64_t)t->elem_bytes)
		return clp_error(CLP_ERR_FORMAT, "%s: tensor \"%s\": %s x %llu elements is %llu "
				 "bytes, but data_offsets [%llu, %llu] hold %llu", f->path, name,
				 t->dtype_name, (unsigned long long)numel,
				 (unsigned long long)(numel * (uint64_t)t->elem_bytes),
				 (unsigned long long)t->begin, (unsigned long long)t->end,
				 (unsigned long long)(t->end - t->begin));
	if (t->end > f->size - f->data_off)
		return clp_error(CLP_ERR_FORMAT, "%s: truncated: tensor \"%s\" ends at data byte "
				 "%llu but the file holds %llu data bytes", f->path, name,
				 (unsigned long long)t->end,
				 (unsigned long long)(f->size - f->data_off));
	return CLP_OK;
}

static clp_status parse_header(clp_st_file *f, const char *text, size_t n)
{
	json_error_t je;
	const char *key;
	json_t *v;
	size_t count;

	if (n == 0 || text[0] != '{')
		return clp_error(CLP_ERR_FORMAT, "%s: the header does not start with '{' (not a "
				 "safetensors file?)", f->path);
	f->header = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
	if (!f->header)
		return clp_error(CLP_ERR_FORMAT, "%s: the JSON header is malformed at byte %d: %s",
				 f->path, je.position, je.text);
	if (!json_is_object(f->header))
		return clp_error(CLP_ERR_FORMAT, "%s: the JSON header is not an object", f->path);
	count = json_object_size(f->header);
	f->t = calloc(count ? count : 1, sizeof(*f->t));
	if (!f->t)
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", f->path);
	json_object_foreach(f->header, key, v) {
		if (!strcmp(key, "__metadata__"))
			CLP_TRY(parse_meta(f, v));
		else
			CLP_TRY(parse_tensor(f, key, v, &f->t[f->n++]));
	}
	qsort(f->t, (size_t)f->n, sizeof(*f->t), by_begin);
	for (int i = 1; i < f->n; i++)
		if (f->t[i].begin < f->t[i - 1].end)
			return clp_error(CLP_ERR_FORMAT, "%s: the data of tensors \"%s\" and \"%s\" "
					 "overlap", f->path, f->t[i - 1].name, f->t[i].name);
	return CLP_OK;
}

static clp_status read_at(clp_st_file *f, void *dst, size_t n, uint64_t off)
{
	char *p = dst;

	while (n > 0) {
		ssize_t got = pread(f->fd, p, n, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return clp_error(CLP_ERR_IO, "%s: read failed at byte %llu: %s", f->path,
					 (unsigned long long)off, got < 0 ? strerror(errno)
									  : "unexpected end of file");
		p += got;
		off += (uint64_t)got;
		n -= (size_t)got;
	}
	return CLP_OK;
}

clp_status clp_st_open(clp_st_file **out, const char *path)
{
	clp_st_file *f = calloc(1, sizeof(*f));
	struct stat st;
	unsigned char len8[8];
	uint64_t hlen = 0;
	char *text = NULL;
	clp_status s;

	*out = NULL;
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	}
	f->fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block */
	if (f->fd < 0) {
		s = clp_error(errno == ENOENT ? CLP_ERR_NOT_FOUND : CLP_ERR_IO,
			      "%s: cannot open: %s", path, strerror(errno));
		goto fail;
	}
	if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		s = clp_error(CLP_ERR_IO, "%s: not a regular file", path);
		goto fail;
	}
	f->size = (uint64_t)st.st_size;
	if (f->size == 0) {
		s = clp_error(CLP_ERR_FORMAT, "%s: the file is empty", path);
		goto fail;
	}
	if (f->size < 8) {
		s = clp_error(CLP_ERR_FORMAT, "%s: truncated: %llu bytes, shorter than the 8-byte "
			      "header length", path, (unsigned long long)f->size);
		goto fail;
	}
	s = read_at(f, len8, 8, 0);
	if (s != CLP_OK)
		goto fail;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | len8[i];
	if (hlen > MAX_HEADER) {
		s = clp_error(CLP_ERR_FORMAT, "%s: header length %llu is implausible (over %u "
			      "bytes; not a safetensors file?)", path, (unsigned long long)hlen,
			      MAX_HEADER);
		goto fail;
	}
	if (hlen > f->size - 8) {
		s = clp_error(CLP_ERR_FORMAT, "%s: truncated: the header length is %llu but only "
			      "%llu bytes follow it", path, (unsigned long long)hlen,
			      (unsigned long long)(f->size - 8));
		goto fail;
	}
	f->data_off = 8 + hlen;
	text = malloc(hlen + 1);
	if (!text) {
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory for the header", path);
		goto fail;
	}
	s = read_at(f, text, hlen, 8);
	if (s == CLP_OK)
		s = parse_header(f, text, hlen);
	free(text);
	if (s != CLP_OK)
		goto fail;
	*out = f;
	return CLP_OK;
fail:
	clp_st_close(f);
	return s;
}

const char *clp_st_path(const clp_st_file *f)
{
	return f->path;
}

int clp_st_count(const clp_st_file *f)
{
	return f->n;
}

const clp_st_tensor *clp_st_at(const clp_st_file *f, int i)
{
	return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const clp_st_tensor *clp_st_find(const clp_st_file *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

const char *clp_st_meta(const clp_st_file *f, const char *key)
{
	for (int i = 0; i < f->nmeta; i++)
		if (!strcmp(f->mkey[i], key))
			return f->mval[i];
	return NULL;
}

int clp_st_meta_count(const clp_st_file *f)
{
	return f->nmeta;
}

void clp_st_meta_at(const clp_st_file *f, int i, const char **key, const char **value)
{
	*key = f->mkey[i];
	*value = f->mval[i];
}

/* Read a tensor in chunks, converting each element with conv into dst (elements of out_bytes). */
typedef void (*conv_fn)(const unsigned char *src, void *dst, size_t n);

static void conv_f16(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((float *)d)[i] = clp_f16_value((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
}

static void conv_bf16(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((float *)d)[i] = clp_bf16_value((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
}

static void conv_f64(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v;

		memcpy(&v, s + 8 * i, 8);
		((float *)d)[i] = (float)v;
	}
}

static void conv_i32(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int32_t v;

		memcpy(&v, s + 4 * i, 4);
		((int64_t *)d)[i] = v;
	}
}

static void conv_i16(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((int64_t *)d)[i] = (int16_t)(uint16_t)(s[2 * i] | s[2 * i + 1] << 8);
}

static void conv_i8(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((int64_t *)d)[i] = (int8_t)s[i];
}

static void conv_u8(const unsigned char *s, void *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((int64_t *)d)[i] = s[i];
}

static clp_status read_conv(clp_st_file *f, const clp_st_tensor *t, void *dst, size_t out_bytes,
			    conv_fn conv)
{
	enum { CHUNK = 1 << 16 };
	unsigned char *buf;
	clp_status s = CLP_OK;

	if (!conv) /* same layout: straight into the caller's buffer */
		return read_at(f, dst, (size_t)(t->end - t->begin), f->data_off + t->begin);
	buf = malloc((size_t)CHUNK * (size_t)t->elem_bytes);
	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", f->path);
	for (uint64_t i = 0; s == CLP_OK && i < t->numel; i += CHUNK) {
		size_t m = t->numel - i < CHUNK ? (size_t)(t->numel - i) : CHUNK;

		s = read_at(f, buf, m * (size_t)t->elem_bytes,
			    f->data_off + t->begin + i * (uint64_t)t->elem_bytes);
		if (s == CLP_OK)
			conv(buf, (char *)dst + i * out_bytes, m);
	}
	free(buf);
	return s;
}

clp_status clp_st_read_f32(clp_st_file *f, const clp_st_tensor *t, float *dst)
{
	clp_status s;

	switch (t->dtype) {
	case CLP_ST_F32: s = read_conv(f, t, dst, 4, NULL); break;
	case CLP_ST_F16: s = read_conv(f, t, dst, 4, conv_f16); break;
	case CLP_ST_BF16: s = read_conv(f, t, dst, 4, conv_bf16); break;
	case CLP_ST_F64: s = read_conv(f, t, dst, 4, conv_f64); break;
	default:
		return clp_error(CLP_ERR_UNSUPPORTED, "%s: tensor \"%s\" has dtype %s, not a float "
				 "type (F32, F16, BF16, F64)", f->path, t->name, t->dtype_name);
	}
	if (s != CLP_OK)
		return clp_error_context(s, "tensor \"%s\": ", t->name);
	return CLP_OK;
}

clp_status clp_st_read_i64(clp_st_file *f, const clp_st_tensor *t, int64_t *dst)
{
	clp_status s;

	switch (t->dtype) {
	case CLP_ST_I64: s = read_conv(f, t, dst, 8, NULL); break;
	case CLP_ST_I32: s = read_conv(f, t, dst, 8, conv_i32); break;
	case CLP_ST_I16: s = read_conv(f, t, dst, 8, conv_i16); break;
	case CLP_ST_I8: s = read_conv(f, t, dst, 8, conv_i8); break;
	case CLP_ST_U8:
	case CLP_ST_BOOL: s = read_conv(f, t, dst, 8, conv_u8); break;
	default:
		return clp_error(CLP_ERR_UNSUPPORTED, "%s: tensor \"%s\" has dtype %s, not an "
				 "integer type (I64, I32, I16, I8, U8, BOOL)", f->path, t->name,
				 t->dtype_name);
	}
	if (s != CLP_OK)
		return clp_error_context(s, "tensor \"%s\": ", t->name);
	return CLP_OK;
}
