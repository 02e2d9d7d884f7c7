/* safetensors files: a validating reader that reads one tensor at a time, and a writer.
 *
 * Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N,
 * N bytes of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"key": "value", ...}}, then the data, offsets relative to its start.
 *
 * The reader checks everything before any tensor is read: header length against the file size,
 * well-formed JSON, known dtypes, shapes, offsets inside the file and not overlapping, and
 * dtype size x element count == byte size; errors name the file and the tensor. Tensors are
 * read with pread into the caller's buffer (F16/BF16/F64 converted to float, I32/U8 widened to
 * int64 on the way), so a file is never held in memory. The writer writes F32 tensors, and BF16
 * or F16 ones (16-bit words, e.g. from cl/base/half.h's clp_dtype_pack), from the caller's buffers,
 * durably (temporary name, fsync, rename), header padded to 8 bytes as the
 * Hugging Face library does. Hosts are assumed little-endian. */
#ifndef CLP_IO_SAFETENSORS_H
#define CLP_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "cl/base/status.h"

#define CLP_ST_MAX_DIM 8

typedef enum clp_st_dtype {
	CLP_ST_F32,
	CLP_ST_F16,
	CLP_ST_BF16,
	CLP_ST_F64,
	CLP_ST_I64,
	CLP_ST_I32,
	CLP_ST_I16,
	CLP_ST_I8,
	CLP_ST_U8,
	CLP_ST_BOOL,
	CLP_ST_OTHER, /* a valid safetensors dtype clpipe cannot convert (U16, F8_E4M3, ...) */
} clp_st_dtype;

typedef struct clp_st_tensor {
	const char *name;
	const char *dtype_name; /* as in the file: "F32", "BF16", ... */
	clp_st_dtype dtype;
	int elem_bytes;
	int ndim;
	int64_t shape[CLP_ST_MAX_DIM];
	uint64_t numel;
	uint64_t begin, end; /* byte range in the data section */
} clp_st_tensor;

typedef struct clp_st_file clp_st_file;

/* Open and validate; the file stays open until clp_st_close. */
clp_status clp_st_open(clp_st_file **f, const char *path);
void clp_st_close(clp_st_file *f);

const char *clp_st_path(const clp_st_file *f);
int clp_st_count(const clp_st_file *f);
/* Tensors in file order (by data offset). */
const clp_st_tensor *clp_st_at(const clp_st_file *f, int i);
/* A tensor by name, or NULL. */
const clp_st_tensor *clp_st_find(const clp_st_file *f, const char *name);
/* Metadata value by key, or NULL; and by index (0 <= i < clp_st_meta_count). */
const char *clp_st_meta(const clp_st_file *f, const char *key);
int clp_st_meta_count(const clp_st_file *f);
void clp_st_meta_at(const clp_st_file *f, int i, const char **key, const char **value);

/* Read a float tensor (F32, F16, BF16, F64) into dst (numel floats). */
clp_status clp_st_read_f32(clp_st_file *f, const clp_st_tensor *t, float *dst);
/* Read an integer tensor (I64, I32, I16, I8, U8, BOOL) into dst (numel int64). */
clp_status clp_st_read_i64(clp_st_file *f, const clp_st_tensor *t, int64_t *dst);

/* Writer: tensors are recorded by pointer and written by clp_st_writer_finish, so the data must
 * stay valid until then. Names are unique and not "__metadata__". */
typedef struct clp_st_writer clp_st_writer;

clp_status clp_st_writer_create(clp_st_writer **w, const char *path);
clp_status clp_st_writer_add(clp_st_writer *w, const char *name, const float *data, int ndim,
			     const int64_t *shape);
/* A 16-bit tensor: dt is CLP_ST_BF16 or CLP_ST_F16, data its numel words (host order). */
clp_status clp_st_writer_add16(clp_st_writer *w, const char *name, clp_st_dtype dt,
			       const uint16_t *data, int ndim, const int64_t *shape);
clp_status clp_st_writer_meta(clp_st_writer *w, const char *key, const char *value);
/* Write the file durably; size and crc (CRC-32 of the whole file) may be NULL. The directory
 * is not fsynced (see durable.h). */
clp_status clp_st_writer_finish(clp_st_writer *w, uint64_t *size, uint32_t *crc);
void clp_st_writer_free(clp_st_writer *w);

#endif
