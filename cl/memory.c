/* Device memory: buffers that fail loudly at creation, and blocks of named views spread over as
 * many buffers as the device's largest single allocation requires. */
#include "cl/runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct clp_cl_block {
	clp_cl_ctx *ctx;
	int nviews;
	clp_cl_view *views;
	int nbuf;
	cl_mem *bufs;
	size_t *buf_bytes;
};

static const char *human(double bytes, char *buf, size_t n)
{
	const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;

	while (bytes >= 1024 && i < 4) {
		bytes /= 1024;
		i++;
	}
	snprintf(buf, n, "%.1f %s", bytes, u[i]);
	return buf;
}

int64_t clp_cl_buffer_bytes(cl_mem m)
{
	size_t sz = 0;

	return clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof(sz), &sz, NULL) == CL_SUCCESS
		       ? (int64_t)sz
		       : -1;
}

clp_status clp_cl_buffer(clp_cl_ctx *ctx, size_t bytes, const char *what, cl_mem *out)
{
	char h1[32], h2[32];
	cl_int err;
	cl_mem m;
	const float zero = 0.0f;

	*out = NULL;
	if (!what)
		what = "buffer";
	if (bytes == 0)
		bytes = 4; /* OpenCL forbids empty buffers; a 0-element tensor still needs a handle */
	if (bytes > ctx->max_alloc)
		return clp_error(CLP_ERR_NOMEM,
				 "%s: %zu bytes (%s) is over the largest single allocation of device "
				 "'%s' (%llu bytes, %s)", what, bytes, human((double)bytes, h1, 32),
				 ctx->info.name, (unsigned long long)ctx->max_alloc,
				 human((double)ctx->max_alloc, h2, 32));
	m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "allocating %s: %zu bytes (%s)", what, bytes,
				   human((double)bytes, h1, 32));
	/* Drivers allocate lazily; touch the buffer now so failure shows here, named. */
	err = clEnqueueFillBuffer(ctx->queue, m, &zero, sizeof(zero), 0, bytes & ~(size_t)3, 0,
				  NULL, NULL);
	if (err == CL_SUCCESS)
		err = clFinish(ctx->queue);
	if (err != CL_SUCCESS) {
		clReleaseMemObject(m);
		return clp_cl_fail(ctx, err, "allocating %s: %zu bytes (%s)", what, bytes,
				   human((double)bytes, h1, 32));
	}
	*out = m;
	return CLP_OK;
}

clp_status clp_cl_write(clp_cl_ctx *ctx, cl_mem m, size_t offset, size_t bytes, const void *src)
{
	cl_int err;

	if (!bytes)
		return CLP_OK;
	err = clEnqueueWriteBuffer(ctx->queue, m, CL_TRUE, offset, bytes, src, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "writing %zu bytes at offset %zu", bytes, offset);
	return CLP_OK;
}

clp_status clp_cl_read(clp_cl_ctx *ctx, cl_mem m, size_t offset, size_t bytes, void *dst)
{
	cl_int err;

	if (!bytes)
		return CLP_OK;
	err = clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, offset, bytes, dst, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "reading %zu bytes at offset %zu", bytes, offset);
	return CLP_OK;
}

/* Views start on this boundary: enough for any vector load and for sub-buffer rules. */
static size_t view_align(const clp_cl_ctx *ctx)
{
	size_t a = ctx->info.mem_align > 256 ? ctx->info.mem_align : 256;

	return a;
}

clp_status clp_cl_block_create(clp_cl_ctx *ctx, const char *name, int nviews,
			       const char *const *names, const size_t *bytes, clp_cl_block **out)
{
	size_t align = view_align(ctx);
	size_t limit = (size_t)ctx->max_alloc / align * align;
	clp_cl_block *b;
	int *bufof;
	size_t cur = 0;
	clp_status s = CLP_OK;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	bufof = calloc((size_t)nviews + 1, sizeof(*bufof));
	if (b) {
		b->views = calloc((size_t)nviews + 1, sizeof(*b->views));
		b->bufs = calloc((size_t)nviews + 1, sizeof(*b->bufs));
		b->buf_bytes = calloc((size_t)nviews + 1, sizeof(*b->buf_bytes));
	}
	if (!b || !bufof || !b->views || !b->bufs || !b->buf_bytes) {
		free(bufof);
		clp_cl_block_free(b);
		return clp_error(CLP_ERR_NOMEM, "out of host memory planning block %s", name);
	}
	b->ctx = ctx;
	b->nviews = nviews;
	/* Plan: views in order, a new buffer whenever the next view would cross the limit. */
	for (int i = 0; i < nviews; i++) {
		size_t sz = (bytes[i] + align - 1) / align * align;

		if (sz == 0)
			sz = align;
		if (sz > limit) {
			char h1[32], h2[32];

			s = clp_error(CLP_ERR_NOMEM,
				      "block %s: view '%s' needs %zu bytes (%s), over the largest "
				      "single allocation of device '%s' (%s)", name,
				      names ? names[i] : "?", bytes[i], human((double)bytes[i], h1, 32),
				      ctx->info.name, human((double)limit, h2, 32));
			goto fail;
		}
		if (b->nbuf == 0 || cur + sz > limit) {
			b->nbuf++;
			cur = 0;
		}
		bufof[i] = b->nbuf - 1;
		b->views[i].offset = cur;
		b->views[i].bytes = bytes[i];
		cur += sz;
		b->buf_bytes[b->nbuf - 1] = cur;
	}
	for (int j = 0; j < b->nbuf; j++) {
		char what[256];

		snprintf(what, sizeof(what), "block %s (buffer %d of %d)", name, j + 1, b->nbuf);
		s = clp_cl_buffer(ctx, b->buf_bytes[j], what, &b->bufs[j]);
		if (s != CLP_OK)
			goto fail;
	}
	for (int i = 0; i < nviews; i++)
		b->views[i].mem = b->bufs[bufof[i]];
	free(bufof);
	*out = b;
	return CLP_OK;
fail:
	free(bufof);
	clp_cl_block_free(b);
	return s;
}

void clp_cl_block_free(clp_cl_block *b)
{
	if (!b)
		return;
	for (int j = 0; b->bufs && j < b->nbuf; j++)
		if (b->bufs[j])
			clReleaseMemObject(b->bufs[j]);
	free(b->bufs);
	free(b->buf_bytes);
	free(b->views);
	free(b);
}

int clp_cl_block_nviews(const clp_cl_block *b)
{
	return b->nviews;
}

const clp_cl_view *clp_cl_block_view(const clp_cl_block *b, int i)
{
	return (i >= 0 && i < b->nviews) ? &b->views[i] : NULL;
}

int clp_cl_block_nbuffers(const clp_cl_block *b)
{
	return b->nbuf;
}

size_t clp_cl_block_bytes(const clp_cl_block *b)
{
	size_t t = 0;

	for (int j = 0; j < b->nbuf; j++)
		t += b->buf_bytes[j];
	return t;
}
