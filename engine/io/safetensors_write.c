/* safetensors writer (see safetensors.h): F32, BF16 and F16 tensors from caller buffers, string
 * metadata, written durably through clp_afile. */
#include "engine/io/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"

typedef struct wtensor {
	char *name;
	const void *data;
	int bf16, f16; /* else F32 */
	int ndim;
	int64_t shape[CLP_ST_MAX_DIM];
	uint64_t numel;
} wtensor;

struct clp_st_writer {
	char *path;
	wtensor *t;
	int n, cap;
	json_t *meta;
};

clp_status clp_st_writer_create(clp_st_writer **out, const char *path)
{
	clp_st_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || !(w->path = strdup(path)) || !(w->meta = json_object())) {
		clp_st_writer_free(w);
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	}
	*out = w;
	return CLP_OK;
}

void clp_st_writer_free(clp_st_writer *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n; i++)
		free(w->t[i].name);
	free(w->t);
	json_decref(w->meta);
	free(w->path);
	free(w);
}

static size_t elem_bytes(const wtensor *t)
{
	return t->bf16 || t->f16 ? 2 : 4;
}

static clp_status add(clp_st_writer *w, const char *name, const void *data, clp_st_dtype dt,
		      int ndim, const int64_t *shape)
{
	wtensor *t;
	uint64_t numel = 1;

	if (!name || !name[0] || !strcmp(name, "__metadata__"))
		return clp_error(CLP_ERR_INVALID, "%s: invalid tensor name \"%s\"", w->path,
				 name ? name : "(null)");
	if (ndim < 0 || ndim > CLP_ST_MAX_DIM)
		return clp_error(CLP_ERR_INVALID, "%s: tensor \"%s\" has %d dimensions (0..%d)",
				 w->path, name, ndim, CLP_ST_MAX_DIM);
	for (int d = 0; d < ndim; d++) {
		if (shape[d] < 0)
			return clp_error(CLP_ERR_INVALID, "%s: tensor \"%s\": shape[%d] = %lld", w->path,
					 name, d, (long long)shape[d]);
		numel *= (uint64_t)shape[d];
	}
	if (numel && !data)
		return clp_error(CLP_ERR_INVALID, "%s: tensor \"%s\" has no data", w->path, name);
	for (int i = 0; i < w->n; i++)
		if (!strcmp(w->t[i].name, name))
			return clp_error(CLP_ERR_INVALID, "%s: tensor \"%s\" added twice", w->path,
					 name);
	if (w->n == w->cap) {
		int ncap = w->cap ? 2 * w->cap : 32;
		wtensor *nt = realloc(w->t, (size_t)ncap * sizeof(*nt));

		if (!nt)
			return clp_error(CLP_ERR_NOMEM, "out of memory");
		w->t = nt;
		w->cap = ncap;
	}
	t = &w->t[w->n];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	t->data = data;
	t->bf16 = dt == CLP_ST_BF16;
	t->f16 = dt == CLP_ST_F16;
	t->ndim = ndim;
	if (ndim)
		memcpy(t->shape, shape, (size_t)ndim * sizeof(*shape));
	t->numel = numel;
	w->n++;
	return CLP_OK;
}

clp_status clp_st_writer_add(clp_st_writer *w, const char *name, const float *data, int ndim,
			     const int64_t *shape)
{
	return add(w, name, data, CLP_ST_F32, ndim, shape);
}

clp_status clp_st_writer_add16(clp_st_writer *w, const char *name, clp_st_dtype dt,
			       const uint16_t *data, int ndim, const int64_t *shape)
{
	if (dt != CLP_ST_BF16 && dt != CLP_ST_F16)
		return clp_error(CLP_ERR_INVALID, "%s: tensor \"%s\": 16-bit tensors are BF16 or "
				 "F16", w->path, name ? name : "(null)");
	return add(w, name, data, dt, ndim, shape);
}

clp_status clp_st_writer_meta(clp_st_writer *w, const char *key, const char *value)
{
	if (!key || !value || json_object_set_new(w->meta, key, json_string(value)) != 0)
		return clp_error(CLP_ERR_INVALID, "%s: metadata \"%s\" is not valid (keys and values "
				 "are UTF-8 strings)", w->path, key ? key : "(null)");
	return CLP_OK;
}

static char *header_json(clp_st_writer *w, size_t *len)
{
	json_t *h = json_object();
	uint64_t off = 0;
	char *text = NULL;

	if (!h)
		return NULL;
	if (json_object_size(w->meta) && json_object_set(h, "__metadata__", w->meta) != 0)
		goto done;
	for (int i = 0; i < w->n; i++) {
		wtensor *t = &w->t[i];
		json_t *shape = json_array(), *offs = json_array();

		for (int d = 0; d < t->ndim; d++)
			json_array_append_new(shape, json_integer(t->shape[d]));
		json_array_append_new(offs, json_integer((json_int_t)off));
		json_array_append_new(offs, json_integer((json_int_t)(off + elem_bytes(t) * t->numel)));
		off += elem_bytes(t) * t->numel;
		if (json_object_set_new(h, t->name,
					json_pack("{s:s, s:o, s:o}", "dtype",
						  t->bf16 ? "BF16" : t->f16 ? "F16" : "F32", "shape",
						  shape, "data_offsets", offs)) != 0)
			goto done;
	}
	text = json_dumps(h, JSON_COMPACT);
	if (text)
		*len = strlen(text);
done:
	json_decref(h);
	return text;
}

clp_status clp_st_writer_finish(clp_st_writer *w, uint64_t *size, uint32_t *crc)
{
	static const char spaces[8] = "        ";
	size_t hlen = 0, pad;
	char *text = header_json(w, &hlen);
	unsigned char len8[8];
	clp_afile a;
	clp_status s;

	if (!text)
		return clp_error(CLP_ERR_NOMEM, "%s: cannot build the header", w->path);
	pad = (8 - hlen % 8) % 8;
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
	s = clp_afile_open(&a, w->path);
	if (s != CLP_OK) {
		free(text);
		return s;
	}
	s = clp_afile_write(&a, len8, 8);
	if (s == CLP_OK)
		s = clp_afile_write(&a, text, hlen);
	if (s == CLP_OK)
		s = clp_afile_write(&a, spaces, pad);
	free(text);
	for (int i = 0; s == CLP_OK && i < w->n; i++)
		s = clp_afile_write(&a, w->t[i].data, elem_bytes(&w->t[i]) * (size_t)w->t[i].numel);
	if (s != CLP_OK) {
		clp_afile_abort(&a);
		return s;
	}
	if (size)
		*size = a.size;
	if (crc)
		*crc = a.crc;
	return clp_afile_commit(&a);
}
