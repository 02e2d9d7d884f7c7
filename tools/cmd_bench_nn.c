/* clpipe bench nn: device time of every transformer kernel (cl/nn.h) and the layer's forward
 * GEMMs on one layer of a model shape (default GPT-2 small: B*T = 16*256 tokens, C = 768, 12
 * heads), from the queue's per-kernel timings, with the achieved bandwidth and throughput.
 * --json F writes them with flops and bytes per call for the roofline of
 * clpipe bench --compare --svg (docs/DEVICE_PROFILE.md). --precision fp32,bf16 times the
 * kernels with their value tensors (activations, weights) in each storage type in one run and
 * prints each kernel's time relative to the first precision's. Not a test: no thresholds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cl/clock.h"
#include "cl/convert.h"
#include "cl/durable.h"
#include "cl/gemm.h"
#include "cl/nn.h"
#include "cl/ops.h"
#include "tools/cli.h"

/* Bytes one call of each kernel label moves at least (each operand read or written once) and
 * the flops it does (elementwise: an estimate per element, documented in
 * docs/DEVICE_PROFILE.md). Kernels without a row (helpers such as nn_colsum) get neither. */
struct bench_row {
	const char *label;
	double bytes, flops;
};

#define MAXROWS 40

struct bench {
	clp_cl_ctx *ctx;
	struct bench_row rows[MAXROWS];
	int nrows;
	cl_mem bufs[32];
	int nbufs;
	double gemm_flops, gemm_bytes; /* the forward GEMMs of one iteration, all together */
	int gemm_calls;
	double gemm_host_ms; /* host clock per iteration, when the GEMMs are not in the timings */
};

static void row(struct bench *b, const char *label, double bytes, double flops)
{
	for (int i = 0; i < b->nrows; i++)
		if (!strcmp(b->rows[i].label, label))
			return;
	if (b->nrows < MAXROWS)
		b->rows[b->nrows++] = (struct bench_row){label, bytes, flops};
}

/* n elements of type dt, uniform in [-1, 1) (drawn in fp32, then rounded to dt). */
static clp_status buf_typed(struct bench *b, size_t n, clp_dtype dt, clp_buf *out)
{
	cl_mem m, tmp = NULL;
	clp_rng_stream s;
	clp_status st;

	if (b->nbufs == (int)(sizeof(b->bufs) / sizeof(b->bufs[0])))
		return clp_error(CLP_ERR_NOMEM, "bench: too many buffers");
	CLP_TRY(clp_cl_buffer(b->ctx, n * clp_dtype_size(dt), "bench", &m));
	b->bufs[b->nbufs++] = m;
	*out = clp_buf_typed(m, 0, dt);
	CLP_TRY(clp_rng_stream_init(&s, 5, (uint32_t)b->nbufs, 0, 0, CLP_RNG_USER));
	if (dt == CLP_F32)
		return clp_nn_rng_uniform(b->ctx, *out, n, &s, 0, -1.0f, 1.0f);
	CLP_TRY(clp_cl_buffer(b->ctx, n * 4, "bench fp32 source", &tmp));
	st = clp_nn_rng_uniform(b->ctx, clp_buf_at(tmp, 0), n, &s, 0, -1.0f, 1.0f);
	if (st == CLP_OK)
		st = clp_cl_convert(b->ctx, *out, dt, clp_buf_at(tmp, 0), CLP_F32, n);
	if (st == CLP_OK)
		st = clp_cl_finish(b->ctx);
	clReleaseMemObject(tmp);
	return st;
}

static clp_status buf(struct bench *b, size_t n, clp_buf *out)
{
	return buf_typed(b, n, CLP_F32, out);
}

static int is_gemm(const clp_cl_timing *t)
{
	return !strncmp(t->label, "gemm", 4);
}

/* The GEMMs' device ms per iteration (labels gemm*), or their host-clock time when a backend's
 * own kernels (CLBlast) bypass the queue's timings. */
static double gemm_ms(const struct bench *b, const clp_cl_timing *t, int nt, int iters)
{
	double ms = 0;

	for (int i = 0; i < nt; i++)
		if (is_gemm(&t[i]))
			ms += t[i].total_ms / iters;
	return ms > 0 ? ms : b->gemm_host_ms;
}

/* N token ids (i * 2654435761 mod V) into id, and their index for the embedding backward; the
 * host copy lives only here. */
static clp_status bench_tokens(struct bench *b, clp_buf id, size_t N, size_t V,
			       clp_nn_index **idx)
{
	int32_t *tok = malloc(N * sizeof(*tok));
	clp_status s;

	if (!tok)
		return clp_error(CLP_ERR_NOMEM, "bench: out of host memory");
	for (size_t i = 0; i < N; i++)
		tok[i] = (int32_t)((i * 2654435761u) % V);
	s = clp_cl_write(b->ctx, id.mem, 0, N * 4, tok);
	if (s == CLP_OK)
		s = clp_nn_index_build(b->ctx, idx, tok, N, V, "bench tokens");
	free(tok);
	return s;
}

/* One iteration of every kernel, value tensors (activations, weights, the embedding tables) of
 * type dt, gradients and statistics fp32. Attention and the forward GEMMs read fp32 tensors of
 * their own (qkv, att, x32, y32, h32, wte32): their 16-bit variants are not timed here. */
static clp_status run(struct bench *b, size_t B, size_t T, size_t C, size_t H, int iters,
		      int gpu_attn, const char *only, clp_dtype dt, clp_cl_timing **t, int *nt)
{
	const size_t N = B * T, F = 4 * C, hd = C / H, V = 50257;
	const double f4 = 4.0, es = (double)clp_dtype_size(dt);
	clp_buf x, y, v3, w, bb, h4, h4o, wte; /* values */
	clp_buf z, dy, dx, gw, gb, dh4, dh4b, dwte; /* gradients */
	clp_buf x32, y32, h32, wte32, m, rs, qkv, dqkv, att, lse, id;
	clp_nn_index *idx = NULL;
	clp_rng_stream rng;
	clp_nn_attn a = {B, T, H, H, hd, 3 * C, 3 * C, 3 * C, C, 1, 0.0f, CLP_BUF_NONE};
	clp_nn_adamw_hp hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
			      .weight_decay = 0.1f, .step = 1};
	const size_t np = 12 * C * C + 13 * C; /* parameters of one GPT-2 layer */
	clp_buf pp, pm, pv, pg;
	double causal_pairs = (double)B * H * (double)T * (T + 1) / 2;
	clp_status s = CLP_OK;

	CLP_TRY(clp_rng_stream_init(&rng, 1, 0, 0, 0, CLP_RNG_DROPOUT));
	CLP_TRY(buf_typed(b, N * C, dt, &x));
	CLP_TRY(buf_typed(b, N * C, dt, &y));
	CLP_TRY(buf_typed(b, N * C, dt, &v3));
	CLP_TRY(buf_typed(b, C, dt, &w));
	CLP_TRY(buf_typed(b, C, dt, &bb));
	CLP_TRY(buf_typed(b, N * F, dt, &h4));
	CLP_TRY(buf_typed(b, N * F, dt, &h4o));
	CLP_TRY(buf_typed(b, V * C, dt, &wte));
	CLP_TRY(buf(b, N * C, &z));
	CLP_TRY(buf(b, N * C, &dy));
	CLP_TRY(buf(b, N * C, &dx));
	CLP_TRY(buf(b, C, &gw));
	CLP_TRY(buf(b, C, &gb));
	CLP_TRY(buf(b, N * F, &dh4));
	CLP_TRY(buf(b, N * F, &dh4b));
	if (dt == CLP_F32) { /* attention and the GEMMs share the value tensors */
		x32 = x, y32 = y, h32 = h4, wte32 = wte, dwte = wte;
	} else {
		CLP_TRY(buf(b, N * C, &x32));
		CLP_TRY(buf(b, N * C, &y32));
		CLP_TRY(buf(b, N * F, &h32));
		CLP_TRY(buf(b, V * C, &wte32));
		dwte = wte32;
	}
	CLP_TRY(buf(b, N, &m));
	CLP_TRY(buf(b, N, &rs));
	CLP_TRY(buf(b, N * 3 * C, &qkv));
	CLP_TRY(buf(b, N * 3 * C, &dqkv));
	CLP_TRY(buf(b, N * C, &att));
	CLP_TRY(buf(b, B * H * T, &lse));
	CLP_TRY(buf(b, np, &pp));
	CLP_TRY(buf(b, 3 * np, &pm)); /* m, v, g in one */
	pv = clp_buf_at(pm.mem, np);
	pg = clp_buf_at(pm.mem, 2 * np);
	CLP_TRY(buf(b, N, &id));
	CLP_TRY(bench_tokens(b, id, N, V, &idx));
	clp_nn_set_shape(gpu_attn ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_AUTO);

	/* flops per element: add, bias, dropout, residual, embeddings 1; layernorm 8 forward,
	 * 14 backward; rmsnorm 5 / 9; GELU (tanh) 14 / 22; SwiGLU 6 / 12 per output; AdamW 14 per
	 * parameter; gradient statistics 2 (square and add). Attention: the causal pairs' 4 hd
	 * flops forward (QK and PV), 6 / 8 hd backward; bytes Q, K, V, out (and dout, dQ / dK dV)
	 * once each. Value tensors count es bytes an element, gradients 4. */
	const double NC = (double)N * C, NF = (double)N * F;

	b->nrows = 0;
	row(b, "add", 3 * es * NC, NC);
	row(b, "residual_fwd", 3 * es * NC, NC);
	row(b, "layernorm_fwd", 2 * es * NC, 8 * NC);
	row(b, "layernorm_bwd", (es + 3 * f4) * NC, 14 * NC);
	row(b, "rmsnorm_fwd", 2 * es * NC, 5 * NC);
	row(b, "rmsnorm_bwd", (es + 3 * f4) * NC, 9 * NC);
	row(b, "gelu_fwd", 2 * es * NF, 14 * NF);
	row(b, "gelu_bwd", (es + 3 * f4) * NF, 22 * NF);
	row(b, "swiglu_fwd", 3 * es * NF / 2, 6 * NF / 2);
	row(b, "swiglu_bwd", (2 * es + 5 * f4) * NF / 2, 12 * NF / 2);
	row(b, "bias_fwd", 2 * es * NC, NC);
	row(b, "bias_bwd", f4 * NC, NC);
	row(b, "residual_bwd", 5 * f4 * NC, 2 * NC);
	row(b, "dropout_fwd", 2 * es * NC, NC);
	row(b, "dropout_bwd", 3 * f4 * NC, NC);
	row(b, "embed_fwd", 3 * es * NC, NC);
	row(b, "embed_bwd", 3 * f4 * NC, NC);
	row(b, "embed_pos_bwd", 2 * f4 * NC, NC);
	row(b, "adamw", 7 * f4 * np, 14.0 * np);
	row(b, "gstat_partial", f4 * np, 2.0 * np);
	row(b, "attn_fwd", 4 * f4 * NC, 4 * causal_pairs * hd);
	row(b, "attn_fwd_gpu", 4 * f4 * NC, 4 * causal_pairs * hd);
	row(b, "attn_bwd_dq", 6 * f4 * NC, 6 * causal_pairs * hd);
	row(b, "attn_bwd_dkv", 7 * f4 * NC, 8 * causal_pairs * hd);
	row(b, "attn_bwd_dq_gpu", 6 * f4 * NC, 6 * causal_pairs * hd);
	row(b, "attn_bwd_dkv_gpu", 7 * f4 * NC, 8 * causal_pairs * hd);
	row(b, "attn_transpose", 2 * f4 * NC, 0);
	/* the forward GEMMs: QKV (C -> 3C), attention projection (C -> C), MLP (C -> 4C -> C);
	 * weights from the embedding table's buffer */
	{
		const double g[4][3] = {{(double)N, 3.0 * C, (double)C}, {(double)N, (double)C, (double)C},
					{(double)N, (double)F, (double)C}, {(double)N, (double)C, (double)F}};

		b->gemm_flops = b->gemm_bytes = 0;
		for (int i = 0; i < 4; i++) {
			b->gemm_flops += 2 * g[i][0] * g[i][1] * g[i][2];
			b->gemm_bytes += f4 * (g[i][0] * g[i][2] + g[i][2] * g[i][1] + g[i][0] * g[i][1]);
		}
		b->gemm_calls = 4;
	}

	for (int it = 0; it <= iters && s == CLP_OK; it++) {
		if (it == 1)
			clp_cl_profile_start(b->ctx);
#define T_(call)                                                                                   \
	if (s == CLP_OK && (!only || strstr(#call, only)))                                         \
	s = (call)
		T_(clp_nn_residual_forward(b->ctx, v3, x, y, N * C));
		T_(clp_nn_layernorm_forward(b->ctx, y, m, rs, x, w, bb, N, C, 1e-5f));
		T_(clp_nn_layernorm_backward(b->ctx, z, gw, gb, dy, x, w, m, rs, N, C));
		T_(clp_nn_rmsnorm_forward(b->ctx, y, rs, x, w, N, C, 1e-5f));
		T_(clp_nn_rmsnorm_backward(b->ctx, z, gw, dy, x, w, rs, N, C));
		T_(clp_nn_gelu_forward(b->ctx, h4o, h4, N * F, CLP_NN_GELU_TANH));
		T_(clp_nn_gelu_backward(b->ctx, dh4, dh4b, h4, N * F, CLP_NN_GELU_TANH));
		T_(clp_nn_swiglu_forward(b->ctx, h4o, h4, clp_buf_plus(h4, F / 2), F, N, F / 2));
		T_(clp_nn_swiglu_backward(b->ctx, dh4, clp_buf_plus(dh4, F / 2), dh4b, h4,
					  clp_buf_plus(h4, F / 2), F, N, F / 2));
		T_(clp_nn_bias_forward(b->ctx, y, bb, N, C));
		T_(clp_nn_bias_backward(b->ctx, gb, dy, N, C));
		T_(clp_nn_residual_backward(b->ctx, dx, z, dy, N * C));
		T_(clp_nn_dropout_forward(b->ctx, y, x, N * C, 0.1f, &rng));
		T_(clp_nn_dropout_backward(b->ctx, z, dy, N * C, 0.1f, &rng));
		T_(clp_nn_embed_forward(b->ctx, x, id, clp_buf_at(NULL, 0),
					wte, v3, clp_buf_at(NULL, 0), B, T, C, V, 0));
		T_(clp_nn_embed_backward(b->ctx, dwte, z, clp_buf_at(NULL, 0), dy,
					 idx, NULL, B, T, C));
		T_(clp_nn_attention_forward(b->ctx, att, lse, qkv, clp_buf_at(qkv.mem, C),
					    clp_buf_at(qkv.mem, 2 * C), &a));
		T_(clp_nn_attention_backward(b->ctx, dqkv, clp_buf_at(dqkv.mem, C),
					     clp_buf_at(dqkv.mem, 2 * C), dx, qkv,
					     clp_buf_at(qkv.mem, C), clp_buf_at(qkv.mem, 2 * C), att,
					     lse, &a));
		T_(clp_nn_grad_stats(b->ctx, m, &pg, &np, 1, 1.0f));
		T_(clp_nn_adamw_update(b->ctx, pp, pm, pv, pg, np, &hp, 1, m, 1.0f));
#define GEMMS_()                                                                                    \
	T_(clp_cl_gemm(b->ctx, CLP_N, CLP_N, N, 3 * C, C, 1, x32, C, wte32, 3 * C, 0, qkv, 3 * C)); \
	T_(clp_cl_gemm(b->ctx, CLP_N, CLP_N, N, C, C, 1, att, C, wte32, C, 0, y32, C));            \
	T_(clp_cl_gemm(b->ctx, CLP_N, CLP_N, N, F, C, 1, y32, C, wte32, F, 0, h32, F));            \
	T_(clp_cl_gemm(b->ctx, CLP_N, CLP_N, N, C, F, 1, h32, F, wte32, C, 0, z, C))
		GEMMS_();
		if (s == CLP_OK && it == 0)
			s = clp_cl_finish(b->ctx);
	}
	if (s == CLP_OK)
		s = clp_cl_profile_stop(b->ctx, t, nt);
	/* CLBlast enqueues its own kernels, which the queue's timings do not see: time the GEMMs
	 * alone on the host clock (queue finished before and after) */
	if (s == CLP_OK && gemm_ms(b, *t, *nt, iters) == 0 && (!only || strstr("clp_cl_gemm", only))) {
		double t0 = clp_now();

		for (int it = 0; it < iters && s == CLP_OK; it++) {
			GEMMS_();
		}
		if (s == CLP_OK && (s = clp_cl_finish(b->ctx)) == CLP_OK)
			b->gemm_host_ms = (clp_now() - t0) * 1e3 / iters;
	}
#undef GEMMS_
#undef T_
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	clp_nn_index_free(idx);
	return s;
}

/* One iteration's figures of a timing label: calls, device ms, flops and bytes (0 when not
 * known: no row, or a label called more than once an iteration). Labels gemm* are the GEMMs'
 * (the product and its packing kernels) and are summed in gemm_figures instead. */
static int figures(const struct bench *b, const clp_cl_timing *t, int iters, double *ms,
		   double *flops, double *bytes)
{
	int per = (int)(t->count / (uint64_t)iters);

	*ms = t->total_ms / iters;
	*flops = *bytes = 0;
	for (int j = 0; j < b->nrows; j++)
		if (!strcmp(b->rows[j].label, t->label) && per == 1) {
			*flops = b->rows[j].flops;
			*bytes = b->rows[j].bytes;
		}
	return per;
}

static void print_table(const struct bench *b, const clp_cl_timing *t, int nt, int iters)
{
	double gms = gemm_ms(b, t, nt, iters);

	printf("%-18s %6s %10s %10s %12s\n", "kernel", "calls", "ms/call", "GB/s", "GFLOP/s");
	for (int i = 0; i < nt; i++) {
		double ms, fl, by;
		int per = figures(b, &t[i], iters, &ms, &fl, &by);

		printf("%-18s %6d %10.3f", t[i].label, per, ms / (per > 0 ? per : 1));
		if (by > 0)
			printf(" %10.1f", by / (ms * 1e-3) / 1e9);
		else
			printf(" %10s", "");
		if (fl > 0)
			printf(" %12.1f", fl / (ms * 1e-3) / 1e9);
		printf("\n");
	}
	if (gms > 0)
		printf("%-18s %6d %10.3f %10.1f %12.1f   (the %d forward GEMMs%s)\n",
		       "gemm (all)", b->gemm_calls, gms / b->gemm_calls,
		       b->gemm_bytes / (gms * 1e-3) / 1e9, b->gemm_flops / (gms * 1e-3) / 1e9,
		       b->gemm_calls, b->gemm_host_ms > 0 ? ", host clock: the backend's kernels "
		       "are not in the queue's timings" : " with their packing");
}

/* The kernel profile (docs/DEVICE_PROFILE.md): per kernel and iteration, calls, device ms,
 * flops and bytes. */
static clp_status write_json(const char *path, const struct bench *b, const char *device,
			     const long shape[4], const clp_cl_timing *t, int nt, int iters)
{
	json_t *root = json_pack("{s:s, s:i, s:s, s:{s:I, s:I, s:I, s:I}, s:i, s:[]}", "format",
				 "clpipe-kernel-profile", "version", 1, "device", device, "shape",
				 "B", (json_int_t)shape[0], "T", (json_int_t)shape[1], "C",
				 (json_int_t)shape[2], "H", (json_int_t)shape[3], "iters", iters,
				 "kernels");
	json_t *ks = root ? json_object_get(root, "kernels") : NULL;
	double gms = gemm_ms(b, t, nt, iters);
	clp_status s;

	if (!ks) {
		json_decref(root);
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
	}
	for (int i = 0; i < nt; i++) {
		double ms, fl, by;
		int per = figures(b, &t[i], iters, &ms, &fl, &by);

		if (!is_gemm(&t[i]))
			json_array_append_new(ks, json_pack("{s:s, s:i, s:f, s:f, s:f}", "label",
							    t[i].label, "calls", per, "ms", ms,
							    "flops", fl, "bytes", by));
	}
	if (gms > 0)
		json_array_append_new(ks, json_pack("{s:s, s:i, s:f, s:f, s:f, s:s}", "label", "gemm",
						    "calls", b->gemm_calls, "ms", gms, "flops",
						    b->gemm_flops, "bytes", b->gemm_bytes, "clock",
						    b->gemm_host_ms > 0 ? "host" : "device"));
	s = clp_io_write_json(path, root, JSON_INDENT(1), 1, 0);
	json_decref(root);
	return s;
}

/* The same kernel's label under another storage type: an fp32 residual is clp_cl_add's "add". */
static int same_kernel(const char *a, const char *b)
{
	if (!strcmp(a, "add"))
		a = "residual_fwd";
	if (!strcmp(b, "add"))
		b = "residual_fwd";
	return !strcmp(a, b);
}

/* Each kernel's device ms per iteration under every precision after the first, relative to the
 * first's (kernels of the first run only). */
static void print_ratios(clp_cl_timing *const *t, const int *nt, const clp_dtype *dts, int np,
			 int iters)
{
	printf("\n%-18s %10s", "kernel", "ms/iter");
	for (int p = 1; p < np; p++)
		printf(" %5s/%-4s", clp_dtype_name(dts[p]), clp_dtype_name(dts[0]));
	printf("\n");
	for (int i = 0; i < nt[0]; i++) {
		printf("%-18s %10.3f", t[0][i].label, t[0][i].total_ms / iters);
		for (int p = 1; p < np; p++) {
			double ms = -1;

			for (int j = 0; j < nt[p]; j++)
				if (same_kernel(t[p][j].label, t[0][i].label))
					ms = t[p][j].total_ms / iters;
			if (ms >= 0 && t[0][i].total_ms > 0)
				printf(" %10.3f", ms / (t[0][i].total_ms / iters));
			else
				printf(" %10s", "-");
		}
		printf("\n");
	}
}

/* best[i].total_ms = min(best[i], the same label's in t): the round least disturbed by other
 * load on the machine. */
static void keep_min(clp_cl_timing *best, int nbest, const clp_cl_timing *t, int nt)
{
	for (int i = 0; i < nbest; i++)
		for (int j = 0; j < nt; j++)
			if (!strcmp(best[i].label, t[j].label) && t[j].total_ms < best[i].total_ms)
				best[i].total_ms = t[j].total_ms;
}

/* "fp32,bf16" -> dts (at most 3, no repeats). */
static int parse_precisions(const char *list, clp_dtype *dts)
{
	int n = 0;

	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		clp_dtype d = CLP_DTYPE_COUNT;

		for (int k = 0; k < CLP_DTYPE_COUNT; k++)
			if (strlen(clp_dtype_name((clp_dtype)k)) == len &&
			    !strncmp(p, clp_dtype_name((clp_dtype)k), len))
				d = (clp_dtype)k;
		if (d == CLP_DTYPE_COUNT || n == CLP_DTYPE_COUNT)
			return -1;
		for (int k = 0; k < n; k++)
			if (dts[k] == d)
				return -1;
		dts[n++] = d;
		p += len;
		if (*p == ',')
			p++;
	}
	return n;
}

int cmd_bench_nn(int argc, char **argv)
{
	const char *device = NULL, *v, *only = NULL, *json = NULL, *prec = "fp32";
	long B = 16, T = 256, C = 768, H = 12, iters = 5, rounds = 1;
	int gpu = 0, r, np;
	struct bench b;
	clp_cl_timing *tp[CLP_DTYPE_COUNT] = {NULL}, *t = NULL;
	int ntp[CLP_DTYPE_COUNT] = {0}, nt = 0;
	clp_dtype dts[CLP_DTYPE_COUNT];
	clp_status s = CLP_OK;

	memset(&b, 0, sizeof(b));
	for (int i = 1; i < argc; i++) {
		long *dst = NULL;

		if (cli_is_help(argv[i])) {
			printf("usage: clpipe bench nn [--device SPEC] [--B N] [--T N] [--C N] [--H N]\n"
			       "                       [--iters N] [--gpu-shape] [--only NAME] [--json F]\n"
			       "                       [--precision fp32,bf16,fp16] [--rounds N]\n\n"
			       "Times every transformer kernel on one layer of a model shape (default\n"
			       "GPT-2 small: B=16 T=256 C=768 H=12) with the queue's per-kernel timings;\n"
			       "prints ms per call, GB/s of the memory-bound kernels and GFLOP/s of\n"
			       "attention. --gpu-shape forces the GPU-shaped attention kernels;\n"
			       "--only runs the calls whose wrapper name contains NAME (attention,\n"
			       "layernorm, gelu, ...). --json F writes every kernel's device time, flops\n"
			       "and bytes per iteration, for the roofline of clpipe bench --compare\n"
			       "--svg (docs/DEVICE_PROFILE.md). --precision LIST (default fp32) runs\n"
			       "once per storage type of the value tensors (activations, weights) of\n"
			       "the norm, activation, elementwise and embedding kernels (attention and\n"
			       "the GEMMs stay fp32) and then prints each kernel's time relative to the\n"
			       "first type's. --rounds N runs the precisions N times in turn and keeps\n"
			       "each kernel's fastest round (a machine shared with other jobs).\n");
			return 0;
		}
		if (!strcmp(argv[i], "--gpu-shape")) {
			gpu = 1;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--only", &only)) != 0) {
			if (r < 0)
				return cli_usage_error("bench nn", "--only needs a value");
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--precision", &prec)) != 0) {
			if (r < 0)
				return cli_usage_error("bench nn", "--precision needs a value");
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--json", &json)) != 0) {
			if (r < 0)
				return cli_usage_error("bench nn", "--json needs a file name");
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &device)) != 0) {
			if (r < 0)
				return cli_usage_error("bench nn", "--device needs a value");
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--B", &v)) > 0)
			dst = &B;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--T", &v)) > 0)
			dst = &T;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--C", &v)) > 0)
			dst = &C;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--H", &v)) > 0)
			dst = &H;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--iters", &v)) > 0)
			dst = &iters;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--rounds", &v)) > 0)
			dst = &rounds;
		if (r < 0)
			return cli_usage_error("bench nn", "%s needs a value", argv[i]);
		if (!dst)
			return cli_usage_error("bench nn", "unknown option '%s'", argv[i]);
		*dst = strtol(v, NULL, 10);
		if (*dst <= 0)
			return cli_usage_error("bench nn", "%s must be a positive integer", argv[i - 1]);
	}
	if (C % H)
		return cli_usage_error("bench nn", "--C %ld is not a multiple of --H %ld", C, H);
	np = parse_precisions(prec, dts);
	if (np <= 0)
		return cli_usage_error("bench nn", "--precision '%s': a comma-separated list of "
				       "distinct fp32, bf16, fp16", prec);
	if (json && np > 1)
		return cli_usage_error("bench nn", "--json writes one profile: give one --precision");
	s = clp_cl_ctx_create(&b.ctx, device);
	if (s != CLP_OK)
		return cli_fail("bench nn", s);
	printf("device %s: B=%ld T=%ld C=%ld H=%ld, %ld iterations\n", clp_cl_ctx_device(b.ctx)->name,
	       B, T, C, H, iters);
	for (long rd = 0; rd < rounds && s == CLP_OK; rd++)
		for (int p = 0; p < np && s == CLP_OK; p++) {
			clp_cl_timing *tr = NULL;
			int ntr = 0;

			if (np > 1 && rd == rounds - 1)
				printf("%svalue tensors %s%s\n", p ? "\n" : "",
				       clp_dtype_name(dts[p]), rounds > 1 ? ", fastest round" : "");
			s = run(&b, (size_t)B, (size_t)T, (size_t)C, (size_t)H, (int)iters, gpu,
				only, dts[p], &tr, &ntr);
			if (s == CLP_OK && !tp[p]) {
				tp[p] = tr, ntp[p] = ntr;
			} else {
				if (s == CLP_OK)
					keep_min(tp[p], ntp[p], tr, ntr);
				free(tr);
			}
			if (s == CLP_OK && rd == rounds - 1)
				print_table(&b, tp[p], ntp[p], (int)iters);
			for (int i = 0; i < b.nbufs; i++)
				clReleaseMemObject(b.bufs[i]);
			b.nbufs = 0;
		}
	if (s == CLP_OK && np > 1)
		print_ratios(tp, ntp, dts, np, (int)iters);
	t = tp[0], nt = ntp[0];
	if (s == CLP_OK && json) {
		const long shape[4] = {B, T, C, H};

		s = write_json(json, &b, clp_cl_ctx_device(b.ctx)->name, shape, t, nt, (int)iters);
		if (s == CLP_OK)
			printf("wrote %s\n", json);
	}
	for (int p = 0; p < np; p++)
		free(tp[p]);
	for (int i = 0; i < b.nbufs; i++)
		clReleaseMemObject(b.bufs[i]);
	clp_cl_ctx_free(b.ctx);
	return s == CLP_OK ? 0 : cli_fail("bench nn", s);
}
