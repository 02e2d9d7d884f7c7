/* Host wrapper of the fused, vocabulary-chunked softmax cross-entropy (nn_xent.cl + GEMM).
 * Scratch (slot NN_SCRATCH_XENT): one logits chunk (N, vc), the row state (N, 3) and, for a
 * 16-bit bias, its chunk in fp32 (vc).
 * Storage (cl/nn.h): h, w and bias are values (one type); the GEMMs read them as they are stored
 * (cl/gemm.h), the logits chunk stays fp32, and a 16-bit bias chunk is widened into scratch
 * before it is added; losses, lse and the gradients are fp32. The kernels read only fp32.
 * Kept logits (issue 30): where N x V floats fit CLPIPE_XENT_KEEP_MB (default on a CPU device:
 * 256, or a sixteenth of its memory if less; 0 elsewhere; the session's memory check counts
 * it, clp_nn_xent_kept_bytes, the stage memory model does not), the
 * forward also copies every chunk into slot NN_SCRATCH_XKEEP (chunk c0 at float N c0, row
 * stride cw) and the next backward of the same operands copies them back instead of
 * recomputing each chunk's product: the same GEMM on the same operands, so the same bits. A
 * backward takes them once; any other forward replaces them; the engine never writes h, w or
 * the bias between a micro-batch's loss forward and backward. */
#include "cl/nn_internal.h"

#include <stdlib.h>
#include <string.h>

#include "cl/convert.h"
#include "cl/gemm.h"
#include "cl/ops.h"
#include "cl/runtime_internal.h"

#define XENT_FILE "nn_xent.cl"

/* One work-item per row: groups of NN_ROWS_WG in the GPU shape (llvmpipe runs a group's
 * work-items as SIMD lanes; one-work-item groups leave seven of eight idle), the same rows. */
static clp_status run_rows(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	return clp_nn_gpu_shape(ctx) ? clp_nn_run_rows_gpu(ctx, k, label, n)
				     : clp_nn_run_rows(ctx, k, label, n);
}

/* Columns per chunk: about 4M logits in scratch, a multiple of 64, at most V, and at most
 * XENT_MAX_VC in either shape: llvmpipe silently ends a work-item's loops after 65535 in all,
 * which a chunk of 262144 columns or more passed in clp_xent_stats (GPU shape: a row's loops
 * then stay near 16k iterations; CPU shape: float8 loops, two passes of 8192). Only N < 64 rows
 * of a vocabulary over 65536 chunk differently; the CPU shape did not cap them until a forced
 * CPU shape on llvmpipe (CLPIPE_SHAPE=cpu) got N = 3, V = 300000's loss 12.83 for 13.12. */
#define XENT_MAX_VC 65536
static size_t chunk_cols(size_t N, size_t V, size_t vchunk)
{
	size_t vc = vchunk ? vchunk : (4u << 20) / (N ? N : 1) / 64 * 64;

	if (vc < 64 && !vchunk)
		vc = 64;
	if (vc > XENT_MAX_VC)
		vc = XENT_MAX_VC;
	return vc < V ? vc : V;
}

static clp_status check(const char *what, size_t N, size_t C, size_t V)
{
	if (!C || !V || N > 0x7fffffff || V > 0x7fffffff || C > 0x7fffffff)
		return clp_error(CLP_ERR_INVALID, "%s: bad shape N=%zu C=%zu V=%zu", what, N, C, V);
	return CLP_OK;
}

/* logits (N, cw) in scratch += the bias columns c0 .. c0 + cw; a 16-bit bias through an fp32
 * copy at scratch float bo. */
/* The logits chunk scr[0 .. N cw) = h wc' (+ the bias chunk c0 .. c0 + cw), the bias in the GEMM's
 * store where the backend can (clp_cl_gemm_bias: bitwise the product then clp_nn_bias_forward),
 * a 16-bit bias widened into scratch at bo first. */
static clp_status chunk_logits(clp_cl_ctx *ctx, cl_mem scr, size_t bo, clp_buf h, clp_buf w,
			       clp_buf bias, size_t c0, size_t N, size_t C, size_t cw)
{
	clp_buf b = bias.mem ? clp_buf_plus(bias, c0) : bias, l = clp_buf_at(scr, 0);
	int fused = 0;

	if (b.mem && b.dt != CLP_F32) {
		CLP_TRY(clp_cl_convert(ctx, clp_buf_at(scr, bo), CLP_F32, b, b.dt, cw));
		b = clp_buf_at(scr, bo);
	}
	CLP_TRY(clp_cl_gemm_bias(ctx, CLP_N, CLP_T, N, cw, C, 1.0f, h, C, clp_buf_plus(w, c0 * C),
				 C, 0.0f, l, cw, b, &fused));
	if (b.mem && !fused)
		CLP_TRY(clp_nn_bias_forward(ctx, l, b, N, cw));
	return CLP_OK;
}

/* Scratch floats: logits chunk, row state, a 16-bit bias chunk. */
static size_t scratch_floats(size_t N, size_t vc, clp_buf bias)
{
	return N * vc + 3 * N + (bias.mem && bias.dt != CLP_F32 ? vc : 0);
}

static size_t keep_limit(clp_cl_ctx *ctx)
{
	const char *e = getenv("CLPIPE_XENT_KEEP_MB");

	if (e && *e)
		return (size_t)strtoull(e, NULL, 10) << 20;
	const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
	uint64_t cap = d->global_mem / 16; /* a small share of a small device (llvmpipe: 2 GiB) */

	if (strcmp(d->type, "cpu") != 0)
		return 0;
	return cap < ((uint64_t)256 << 20) ? (size_t)cap : (size_t)256 << 20;
}

size_t clp_nn_xent_kept_bytes(clp_cl_ctx *ctx, size_t N, size_t V)
{
	return N * V * sizeof(float) <= keep_limit(ctx) ? N * V * sizeof(float) : 0;
}

/* Whether the kept logits are the forward's of these operands (keep: compare; else record). */
static int keep_match(clp_cl_ctx *ctx, clp_buf h, clp_buf w, clp_buf b, size_t N, size_t C,
		      size_t V, size_t vc)
{
	const struct clp_xent_keep *k = &ctx->xent_keep;

	return k->valid && k->h == h.mem && k->ho == h.off && k->w == w.mem && k->wo == w.off &&
	       k->b == b.mem && k->bo == (b.mem ? b.off : 0) && k->N == N && k->C == C &&
	       k->V == V && k->vc == vc;
}

static void keep_record(clp_cl_ctx *ctx, clp_buf h, clp_buf w, clp_buf b, size_t N, size_t C,
			size_t V, size_t vc)
{
	ctx->xent_keep.h = h.mem, ctx->xent_keep.ho = h.off;
	ctx->xent_keep.w = w.mem, ctx->xent_keep.wo = w.off;
	ctx->xent_keep.b = b.mem, ctx->xent_keep.bo = b.mem ? b.off : 0;
	ctx->xent_keep.N = N, ctx->xent_keep.C = C, ctx->xent_keep.V = V, ctx->xent_keep.vc = vc;
	ctx->xent_keep.valid = 1;
}

clp_status clp_nn_xent_forward(clp_cl_ctx *ctx, clp_buf losses, clp_buf lse, clp_buf h, clp_buf w,
			       clp_buf bias, clp_buf targets, size_t N, size_t C, size_t V,
			       size_t vchunk)
{
	const size_t vc = chunk_cols(N, V, vchunk);
	cl_kernel ks, kf;
	cl_mem scr, keep = NULL;
	cl_ulong tgo = targets.off, lo = losses.off, lso = lse.off;
	cl_uint n = (cl_uint)N, v = (cl_uint)V;
	clp_dtype vt;

	CLP_TRY(check("xent_forward", N, C, V));
	CLP_TRY(clp_nn_value_type("xent_forward", &vt, 3, "h", h, "w", w, "bias", bias));
	CLP_TRY(clp_nn_require_f32("xent_forward", 2, "losses", losses, "lse", lse));
	if (!N)
		return CLP_OK;
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_XENT, scratch_floats(N, vc, bias) * sizeof(float),
			       &scr));
	ctx->xent_keep.valid = 0;
	if (clp_nn_xent_kept_bytes(ctx, N, V) > 0)
		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_XKEEP, N * V * sizeof(float), &keep));
	{
		cl_ulong so = N * vc; /* the row state lives after the logits */
		clp_status s = CLP_OK;

		CLP_TRY(clp_cl_kernel(ctx, XENT_FILE, NULL, "clp_xent_stats", &ks));
		for (size_t c0 = 0; c0 < V && s == CLP_OK; c0 += vc) {
			size_t cw = V - c0 < vc ? V - c0 : vc;
			cl_uint cwu = (cl_uint)cw, c0u = (cl_uint)c0;
			cl_int first = c0 == 0;

			s = chunk_logits(ctx, scr, so + 3 * N, h, w, bias, c0, N, C, cw);
			if (s == CLP_OK && keep)
				s = clp_cl_copy(ctx, clp_buf_at(keep, N * c0), clp_buf_at(scr, 0),
						N * cw);
			if (s == CLP_OK)
				s = clp_cl_args(ctx, ks, 9, CLP_ARG(scr), CLP_ARG(so), CLP_ARG(scr),
						CLP_ARG(targets.mem), CLP_ARG(tgo), CLP_ARG(n),
						CLP_ARG(cwu), CLP_ARG(c0u), CLP_ARG(first));
			if (s == CLP_OK)
				s = run_rows(ctx, ks, "xent_stats", N);
		}
		if (s == CLP_OK)
			s = clp_cl_kernel(ctx, XENT_FILE, NULL, "clp_xent_final", &kf);
		if (s == CLP_OK)
			s = clp_cl_args(ctx, kf, 10, CLP_ARG(losses.mem), CLP_ARG(lo),
					CLP_ARG(lse.mem), CLP_ARG(lso), CLP_ARG(scr), CLP_ARG(so),
					CLP_ARG(targets.mem), CLP_ARG(tgo), CLP_ARG(n), CLP_ARG(v));
		if (s == CLP_OK)
			s = run_rows(ctx, kf, "xent_final", N);
		if (s == CLP_OK && keep)
			keep_record(ctx, h, w, bias, N, C, V, vc);
		return s;
	}
}

static clp_status chunks_backward(clp_cl_ctx *ctx, cl_kernel kg, cl_mem scr, cl_mem kept,
				  size_t vc, clp_buf dh, clp_buf dw, clp_buf dbias, clp_buf h,
				  clp_buf w, clp_buf bias, clp_buf targets, clp_buf lse, float scale,
				  size_t N, size_t C, size_t V);

clp_status clp_nn_xent_backward(clp_cl_ctx *ctx, clp_buf dh, clp_buf dw, clp_buf dbias,
				clp_buf h, clp_buf w, clp_buf bias, clp_buf targets, clp_buf lse,
				float scale, size_t N, size_t C, size_t V, size_t vchunk)
{
	const size_t vc = chunk_cols(N, V, vchunk);
	cl_kernel kg;
	cl_mem scr, kept = NULL;
	clp_dtype vt;
	clp_status s;
	int keep;

	CLP_TRY(check("xent_backward", N, C, V));
	CLP_TRY(clp_nn_value_type("xent_backward", &vt, 3, "h", h, "w", w, "bias", bias));
	CLP_TRY(clp_nn_require_f32("xent_backward", 4, "dh", dh, "dw", dw, "dbias", dbias, "lse",
				   lse));
	if (!N)
		return CLP_OK;
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_XENT, scratch_floats(N, vc, bias) * sizeof(float),
			       &scr));
	CLP_TRY(clp_cl_kernel(ctx, XENT_FILE, NULL, "clp_xent_grad", &kg));
	if (keep_match(ctx, h, w, bias, N, C, V, vc))
		CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_XKEEP, N * V * sizeof(float), &kept));
	ctx->xent_keep.valid = 0; /* taken once */
	/* h is B of every chunk's dW product and nothing writes it here: packed once (issue 30) */
	keep = !clp_cl_gemm_held(ctx, h.mem);
	if (keep)
		CLP_TRY(clp_cl_gemm_hold(ctx, h.mem));
	s = chunks_backward(ctx, kg, scr, kept, vc, dh, dw, dbias, h, w, bias, targets, lse, scale,
			    N, C, V);
	if (keep)
		clp_cl_gemm_release(ctx, h.mem);
	return s;
}

static clp_status chunks_backward(clp_cl_ctx *ctx, cl_kernel kg, cl_mem scr, cl_mem kept,
				  size_t vc, clp_buf dh, clp_buf dw, clp_buf dbias, clp_buf h,
				  clp_buf w, clp_buf bias, clp_buf targets, clp_buf lse, float scale,
				  size_t N, size_t C, size_t V)
{
	cl_ulong tgo = targets.off, lso = lse.off;
	cl_uint n = (cl_uint)N;

	for (size_t c0 = 0; c0 < V; c0 += vc) {
		size_t cw = V - c0 < vc ? V - c0 : vc;
		cl_uint cwu = (cl_uint)cw, c0u = (cl_uint)c0;
		clp_buf wc = clp_buf_plus(w, c0 * C), dl = clp_buf_at(scr, 0);

		if (kept) /* the forward's chunk, bit for bit what the product would give */
			CLP_TRY(clp_cl_copy(ctx, clp_buf_at(scr, 0), clp_buf_at(kept, N * c0), N * cw));
		else
			CLP_TRY(chunk_logits(ctx, scr, N * vc + 3 * N, h, w, bias, c0, N, C, cw));
		CLP_TRY(clp_cl_args(ctx, kg, 9, CLP_ARG(scr), CLP_ARG(targets.mem), CLP_ARG(tgo),
				    CLP_ARG(lse.mem), CLP_ARG(lso), CLP_ARG(n), CLP_ARG(cwu),
				    CLP_ARG(c0u), CLP_ARG(scale)));
		CLP_TRY(run_rows(ctx, kg, "xent_grad", N));
		if (dbias.mem)
			CLP_TRY(clp_nn_bias_backward(ctx, clp_buf_plus(dbias, c0), dl, N, cw));
		if (dw.mem) /* mem NULL: a frozen head, no weight gradient */
			CLP_TRY(clp_cl_gemm(ctx, CLP_T, CLP_N, cw, C, N, 1.0f, dl, cw, h, C, 1.0f,
					    clp_buf_plus(dw, c0 * C), C));
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, N, C, cw, 1.0f, dl, cw, wc, C, 1.0f, dh, C));
	}
	return CLP_OK;
}

clp_status clp_nn_xent_mean(clp_cl_ctx *ctx, clp_buf loss, clp_buf losses, size_t N,
			    float inv_count)
{
	CLP_TRY(clp_cl_sum(ctx, loss, losses, N));
	return clp_cl_scale(ctx, loss, inv_count, 1);
}
