/* Host wrappers of nn_embed.cl: per-id position index, embeddings, RoPE. The forward's tables
 * and output, and RoPE's forward x, are value tensors (one storage type per call, which picks
 * the build of nn_embed.cl: ST_TYPE); gradients and the RoPE table are fp32 (cl/nn.h). */
#include "cl/nn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EMB_FILE "nn_embed.cl"
#define EMB_COLS 64
/* Occurrences of one id a launch of clp_embed_backward sums: at most 63 columns x 513 (the
 * last strip's scalar loops) or 9 x 512 (a full strip) loop iterations a work-item, inside
 * llvmpipe's silent 65535 (docs/OPENCL.md) on every device alike; a batch whose most frequent
 * id occurs k times takes ceil(k / 512) launches, the later ones over its frequent ids only. */
#define EMB_OCC_LAUNCH 512u

struct clp_nn_index {
	clp_cl_ctx *ctx;
	cl_mem mem;        /* ids[nu], offsets[nu + 1], positions[n] */
	size_t cap;        /* ints the buffer holds */
	int32_t *host;     /* the upload's source, kept until the next build */
	size_t host_cap;
	cl_event upload;   /* pending write of host */
	size_t n, nu, V;
	size_t maxc;       /* occurrences of the most frequent id */
};

void clp_nn_index_free(clp_nn_index *idx)
{
	if (!idx)
		return;
	if (idx->upload) {
		clWaitForEvents(1, &idx->upload);
		clReleaseEvent(idx->upload);
	}
	if (idx->mem)
		clReleaseMemObject(idx->mem);
	free(idx->host);
	free(idx);
}

clp_status clp_nn_index_build(clp_cl_ctx *ctx, clp_nn_index **pidx, const int32_t *ids, size_t n,
			      size_t V, const char *what)
{
	clp_nn_index *idx = *pidx;
	size_t need, nu = 0;
	int32_t *cnt, *h;
	cl_int err;

	if (!what)
		what = "ids";
	if (V == 0 || V > 0x7fffffff || n > 0x7fffffff)
		return clp_error(CLP_ERR_INVALID, "index of %s: bad sizes n=%zu V=%zu", what, n, V);
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || (size_t)ids[i] >= V)
			return clp_error(CLP_ERR_INVALID, "%s[%zu] = %d is outside [0, %zu)", what, i,
					 (int)ids[i], V);
	if (!idx) {
		idx = calloc(1, sizeof(*idx));
		if (!idx)
			return clp_error(CLP_ERR_NOMEM, "out of host memory for the index of %s", what);
		idx->ctx = ctx;
		*pidx = idx;
	}
	if (idx->upload) { /* the previous upload still reads idx->host */
		clWaitForEvents(1, &idx->upload);
		clReleaseEvent(idx->upload);
		idx->upload = NULL;
	}
	cnt = calloc(V + 1, sizeof(*cnt));
	if (!cnt)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the index of %s", what);
	for (size_t i = 0; i < n; i++)
		cnt[ids[i]]++;
	idx->maxc = 0;
	for (size_t v = 0; v < V; v++) {
		nu += cnt[v] != 0;
		if ((size_t)cnt[v] > idx->maxc)
			idx->maxc = (size_t)cnt[v];
	}
	need = 2 * nu + 1 + n;
	if (need > idx->host_cap) {
		int32_t *nh = realloc(idx->host, need * sizeof(*nh));

		if (!nh) {
			free(cnt);
			return clp_error(CLP_ERR_NOMEM, "out of host memory for the index of %s",
					 what);
		}
		idx->host = nh;
		idx->host_cap = need;
	}
	h = idx->host;
	/* Counting sort: ids ascending, positions ascending within an id. cnt becomes the next
	 * free slot of each id. */
	{
		int32_t *ids_out = h, *off = h + nu;
		size_t u = 0, at = 0;

		for (size_t v = 0; v < V; v++) {
			int32_t c = cnt[v];

			if (!c)
				continue;
			ids_out[u] = (int32_t)v;
			off[u] = (int32_t)at;
			cnt[v] = (int32_t)at;
			at += (size_t)c;
			u++;
		}
		off[nu] = (int32_t)at;
		for (size_t i = 0; i < n; i++)
			h[2 * nu + 1 + (size_t)cnt[ids[i]]++] = (int32_t)i;
	}
	free(cnt);
	if (need > idx->cap) {
		if (idx->mem)
			clReleaseMemObject(idx->mem);
		idx->mem = NULL;
		idx->cap = 0;
		CLP_TRY(clp_cl_buffer(ctx, need * sizeof(int32_t), what, &idx->mem));
		idx->cap = need;
	}
	err = clEnqueueWriteBuffer(clp_cl_ctx_queue(ctx), idx->mem, CL_FALSE, 0,
				   need * sizeof(int32_t), h, 0, NULL, &idx->upload);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "uploading the index of %s", what);
	idx->n = n;
	idx->nu = nu;
	idx->V = V;
	return CLP_OK;
}

clp_status clp_nn_embed_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf tokens, clp_buf types,
				clp_buf wte, clp_buf wpe, clp_buf wtt, size_t B, size_t T,
				size_t C, size_t V, size_t ntypes)
{
	cl_kernel k;
	cl_ulong oo = out.off, to = tokens.off, yo = types.off, weo = wte.off, wpo = wpe.off,
		 wto = wtt.off;
	cl_uint n = (cl_uint)(B * T), t = (cl_uint)T, c = (cl_uint)C, v = (cl_uint)V,
		nt = (cl_uint)ntypes;
	cl_int has_pos = wpe.mem != NULL, has_types = types.mem != NULL;
	clp_dtype dt;

	if (T == 0 || C == 0 || V == 0 || B * T > 0xffffffffu || (has_types && !wtt.mem))
		return clp_error(CLP_ERR_INVALID, "embed_forward: bad arguments (B=%zu T=%zu C=%zu "
				 "V=%zu%s)", B, T, C, V, has_types && !wtt.mem ? ", types without "
				 "a type table" : "");
	CLP_TRY(clp_nn_value_type("embed_forward", &dt, 4, "out", out, "wte", wte, "wpe", wpe,
				  "wtt", has_types ? wtt : CLP_BUF_NONE));
	CLP_TRY(clp_cl_kernel(ctx, EMB_FILE, clp_dtype_st_define(dt), "clp_embed_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 19, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(tokens.mem),
			    CLP_ARG(to), CLP_ARG(types.mem), CLP_ARG(yo), CLP_ARG(wte.mem),
			    CLP_ARG(weo), CLP_ARG(wpe.mem), CLP_ARG(wpo), CLP_ARG(wtt.mem),
			    CLP_ARG(wto), CLP_ARG(n), CLP_ARG(t), CLP_ARG(c), CLP_ARG(v), CLP_ARG(nt),
			    CLP_ARG(has_pos), CLP_ARG(has_types)));
	return clp_nn_gpu_shape(ctx) ? clp_nn_run_rows_gpu(ctx, k, "embed_fwd", B * T)
				     : clp_nn_run_rows(ctx, k, "embed_fwd", B * T);
}

static clp_status table_backward(clp_cl_ctx *ctx, clp_buf dw, clp_buf dout,
				 const clp_nn_index *idx, size_t n, size_t C, const char *label)
{
	cl_kernel k;
	cl_ulong dwo = dw.off, doo = dout.off;
	cl_uint nu = (cl_uint)idx->nu, c = (cl_uint)C;
	size_t g[2], l[2] = {1, 1};
	cl_mem carry;

	if (idx->n != n)
		return clp_error(CLP_ERR_INVALID, "embed_backward: the index holds %zu positions, the "
				 "batch has %zu", idx->n, n);
	if (!idx->nu)
		return CLP_OK;
	CLP_TRY(clp_cl_kernel(ctx, EMB_FILE, NULL, "clp_embed_backward", &k));
	if (idx->maxc > EMB_OCC_LAUNCH) /* running sums of the ids that take several launches */
		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_PART, idx->nu * C * sizeof(float), &carry));
	else
		carry = dw.mem; /* not read or written: every list ends in the first launch */
	g[0] = nn_cdiv(C, EMB_COLS);
	g[1] = idx->nu;
	for (size_t w0 = 0; w0 == 0 || w0 < idx->maxc; w0 += EMB_OCC_LAUNCH) {
		const cl_uint a = (cl_uint)w0, b = (cl_uint)(w0 + EMB_OCC_LAUNCH);

		CLP_TRY(clp_cl_args(ctx, k, 10, CLP_ARG(dw.mem), CLP_ARG(dwo), CLP_ARG(dout.mem),
				    CLP_ARG(doo), CLP_ARG(idx->mem), CLP_ARG(nu), CLP_ARG(c),
				    CLP_ARG(carry), CLP_ARG(a), CLP_ARG(b)));
		CLP_TRY(clp_cl_run(ctx, k, label, 2, g, l));
	}
	return CLP_OK;
}

clp_status clp_nn_embed_backward(clp_cl_ctx *ctx, clp_buf dwte, clp_buf dwpe, clp_buf dwtt,
				 clp_buf dout, const clp_nn_index *tok,
				 const clp_nn_index *type_idx, size_t B, size_t T, size_t C)
{
	if (!tok)
		return clp_error(CLP_ERR_INVALID, "embed_backward: no token index");
	CLP_TRY(clp_nn_require_f32("embed_backward", 4, "dwte", dwte, "dwpe", dwpe, "dwtt",
				   type_idx ? dwtt : CLP_BUF_NONE, "dout", dout));
	if (tok->n != B * T) /* also when a frozen table (mem NULL) adds nothing */
		return clp_error(CLP_ERR_INVALID, "embed_backward: the index holds %zu positions, "
				 "the batch has %zu", tok->n, B * T);
	if (dwte.mem) /* mem NULL: a frozen table, nothing to add */
		CLP_TRY(table_backward(ctx, dwte, dout, tok, B * T, C, "embed_bwd"));
	if (type_idx && dwtt.mem)
		CLP_TRY(table_backward(ctx, dwtt, dout, type_idx, B * T, C, "embed_type_bwd"));
	if (dwpe.mem) {
		cl_kernel k;
		cl_ulong dwo = dwpe.off, doo = dout.off;
		cl_uint b = (cl_uint)B, t = (cl_uint)T, c = (cl_uint)C;
		size_t g[2] = {nn_cdiv(C, EMB_COLS), T}, l[2] = {1, 1};

		CLP_TRY(clp_cl_kernel(ctx, EMB_FILE, NULL, "clp_embed_pos_backward", &k));
		CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(dwpe.mem), CLP_ARG(dwo), CLP_ARG(dout.mem),
				    CLP_ARG(doo), CLP_ARG(b), CLP_ARG(t), CLP_ARG(c)));
		CLP_TRY(clp_cl_run(ctx, k, "embed_pos_bwd", 2, g, l));
	}
	return CLP_OK;
}

void clp_nn_rope_table(float *tab, size_t T_max, size_t hd, float theta)
{
	/* PyTorch (HF LLaMA) in fp32: inv_freq = 1 / theta ** (arange(0, hd, 2) / hd);
	 * angle = t * inv_freq; cos, sin of the fp32 angle. */
	for (size_t j = 0; j < hd / 2; j++) {
		float e = (float)(2 * j) / (float)hd;
		float inv = 1.0f / (float)pow((double)theta, (double)e);

		for (size_t t = 0; t < T_max; t++) {
			float ang = (float)t * inv;

			tab[t * hd + 2 * j] = (float)cos((double)ang);
			tab[t * hd + 2 * j + 1] = (float)sin((double)ang);
		}
	}
}

static clp_status rope(clp_cl_ctx *ctx, clp_buf x, size_t ld, clp_buf tab, size_t B, size_t T,
		       size_t nh, size_t hd, float sign, const char *label)
{
	const char *fn = sign > 0 ? "rope_forward" : "rope_backward";
	clp_dtype dt = CLP_F32;
	cl_kernel k;
	cl_ulong xo = x.off, l = ld, to = tab.off;
	cl_uint n = (cl_uint)(B * T), t = (cl_uint)T, h = (cl_uint)nh, d = (cl_uint)hd;

	if (hd % 2 || ld < nh * hd || B * T > 0xffffffffu)
		return clp_error(CLP_ERR_INVALID, "rope: head dim %zu must be even and the row "
				 "stride %zu at least %zu", hd, ld, nh * hd);
	CLP_TRY(clp_nn_require_f32(fn, 1, "tab", tab));
	if (sign > 0)
		CLP_TRY(clp_nn_value_type(fn, &dt, 1, "x", x));
	else
		CLP_TRY(clp_nn_require_f32(fn, 1, "dx", x));
	CLP_TRY(clp_cl_kernel(ctx, EMB_FILE, clp_dtype_st_define(dt), "clp_rope", &k));
	CLP_TRY(clp_cl_args(ctx, k, 10, CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(l), CLP_ARG(tab.mem),
			    CLP_ARG(to), CLP_ARG(n), CLP_ARG(t), CLP_ARG(h), CLP_ARG(d),
			    CLP_ARG(sign)));
	return clp_nn_gpu_shape(ctx) ? clp_nn_run_rows_gpu(ctx, k, label, B * T)
				     : clp_nn_run_rows(ctx, k, label, B * T);
}

clp_status clp_nn_rope_forward(clp_cl_ctx *ctx, clp_buf x, size_t ld, clp_buf tab, size_t B,
			       size_t T, size_t nh, size_t hd)
{
	return rope(ctx, x, ld, tab, B, T, nh, hd, 1.0f, "rope_fwd");
}

clp_status clp_nn_rope_backward(clp_cl_ctx *ctx, clp_buf dx, size_t ld, clp_buf tab, size_t B,
				size_t T, size_t nh, size_t hd)
{
	return rope(ctx, dx, ld, tab, B, T, nh, hd, -1.0f, "rope_bwd");
}
