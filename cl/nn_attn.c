/* Host wrappers of the fused attention kernels (CPU shape: nn_attn.cl transpose and forward,
 * nn_attn_bwd.cl backward; GPU shape: nn_attn_gpu.cl). Scratch (slot NN_SCRATCH_ATTN):
 * transposed K (forward), transposed K, V, Q, dO and the D and lse rows (backward), all fp32
 * whatever the values' storage; with 16-bit values the forward also keeps its output rows there
 * in fp32 until they are rounded once (and, for fp16, a transposed Q). */
#include "cl/nn_internal.h"

#include <math.h>
#include <string.h>

#define ATT_FILE "nn_attn.cl"
#define ATT_BWD_FILE "nn_attn_bwd.cl"
/* The programs of one storage type of the values (cl/nn.h "Storage"); fp32 builds as it always
 * has. Rows per work-item: 4 (ATT_QB query rows in the forward and dQ, ATT_KB key rows in dK/dV;
 * this function's programs, the GPU shape's D / lse pre-pass among them). */
const char *clp_nn_attn_defines(clp_dtype t)
{
	static const char *const defs[CLP_DTYPE_COUNT] = {
		"#define ATT_QB 4\n#define ATT_KB 4\n",
		"#define ATT_QB 4\n#define ATT_KB 4\n#define ST_TYPE 1\n",
		"#define ATT_QB 4\n#define ATT_KB 4\n#define ST_TYPE 2\n"};

	return defs[(unsigned)t < CLP_DTYPE_COUNT ? t : CLP_F32];
}

/* Rows per work-item of the CPU shape on this device: 8 on a CPU device of a host with AVX-512
 * (32 vector registers hold dQ's and dK/dV's 2 x 8 float8 accumulators and their operands; a
 * CPU OpenCL device compiles for its host's ISA), else 4 (16 registers). The results do not
 * depend on it, bit for bit: keys go in aligned blocks of 8, so a query row visits the key
 * blocks up to the one holding its own index whether its block has 4 or 8 rows, and a key row
 * starts at the query block of 8 that holds it either way. */
static int att_rows(clp_cl_ctx *ctx)
{
#if defined(__x86_64__) || defined(__i386__)
	if (strcmp(clp_cl_ctx_device(ctx)->type, "cpu") == 0 && __builtin_cpu_supports("avx512f"))
		return 8;
#else
	(void)ctx;
#endif
	return 4;
}

static const char *cpu_defines(clp_cl_ctx *ctx, clp_dtype t)
{
	static const char *const defs8[CLP_DTYPE_COUNT] = {
		"#define ATT_QB 8\n#define ATT_KB 8\n",
		"#define ATT_QB 8\n#define ATT_KB 8\n#define ST_TYPE 1\n",
		"#define ATT_QB 8\n#define ATT_KB 8\n#define ST_TYPE 2\n"};

	if (att_rows(ctx) == 4)
		return clp_nn_attn_defines(t);
	return defs8[(unsigned)t < CLP_DTYPE_COUNT ? t : CLP_F32];
}

/* The storage type of a call's values; gradients, lse and kv_len must be 4-byte. */
static clp_status att_types(const char *fn, const clp_nn_attn *a, clp_dtype *dt, clp_buf out,
			    clp_buf q, clp_buf k, clp_buf v)
{
	CLP_TRY(clp_nn_value_type(fn, dt, 4, "q", q, "k", k, "v", v, "out", out));
	if (a->kv_len.mem && a->kv_len.dt != CLP_F32)
		return clp_error(CLP_ERR_INVALID, "%s: kv_len is %s; it holds int32 lengths", fn,
				 clp_dtype_name(a->kv_len.dt));
	return CLP_OK;
}

static clp_status check(const clp_nn_attn *a, const char *what)
{
	if (!a->B || !a->T || !a->H || !a->KVH || !a->hd || a->H % a->KVH)
		return clp_error(CLP_ERR_INVALID, "%s: bad shape B=%zu T=%zu H=%zu KVH=%zu hd=%zu "
				 "(KVH must divide H)", what, a->B, a->T, a->H, a->KVH, a->hd);
	if (a->ldq < a->H * a->hd || a->ldk < a->KVH * a->hd || a->ldv < a->KVH * a->hd ||
	    a->ldo < a->H * a->hd)
		return clp_error(CLP_ERR_INVALID, "%s: row strides ldq=%zu ldk=%zu ldv=%zu ldo=%zu "
				 "smaller than the heads they hold", what, a->ldq, a->ldk, a->ldv,
				 a->ldo);
	if (a->T > 0x7fffffff || a->B * a->H > 0xffffffffu)
		return clp_error(CLP_ERR_INVALID, "%s: T=%zu too long", what, a->T);
	return CLP_OK;
}

static float att_scale(const clp_nn_attn *a)
{
	return a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->hd));
}

static size_t padded(size_t T)
{
	return (T + 7) / 8 * 8;
}

/* dst (scratch + dso) = transpose of nh heads of src rows. */
static clp_status transpose(clp_cl_ctx *ctx, cl_mem dst, size_t dso, clp_buf src, size_t ld,
			    size_t nh, const clp_nn_attn *a)
{
	const char *defs = cpu_defines(ctx, src.dt);
	cl_kernel k;
	cl_ulong d0 = dso, so = src.off, l = ld;
	cl_uint T = (cl_uint)a->T, Tp = (cl_uint)padded(a->T), n = (cl_uint)nh,
		hd = (cl_uint)a->hd;
	size_t g[3] = {Tp / 8, nh, a->B}, lo[3] = {1, 1, 1};

	CLP_TRY(clp_cl_kernel(ctx, ATT_FILE, defs, "clp_attn_transpose", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(dst), CLP_ARG(d0), CLP_ARG(src.mem), CLP_ARG(so),
			    CLP_ARG(l), CLP_ARG(T), CLP_ARG(Tp), CLP_ARG(n), CLP_ARG(hd)));
	return clp_cl_run(ctx, k, "attn_transpose", 3, g, lo);
}


static clp_status cpu_ready(clp_cl_ctx *ctx, clp_dtype dt)
{
	static const char *const names[] = {"clp_attn_transpose", "clp_attn_forward",
					     "clp_attn_bwd_pre", "clp_attn_bwd_dq",
					     "clp_attn_bwd_dkv"};
	cl_kernel k;

	for (int i = 0; i < 5; i++)
		CLP_TRY(clp_cl_kernel(ctx, i < 2 ? ATT_FILE : ATT_BWD_FILE, cpu_defines(ctx, dt),
				      names[i], &k));
	/* the backward transposes dO (fp32) with the fp32 program */
	return dt == CLP_F32 ? CLP_OK
			     : clp_cl_kernel(ctx, ATT_FILE, cpu_defines(ctx, CLP_F32), names[0], &k);
}

/* The shape that runs: the device's, unless its programs do not build there; then the other
 * one, with one warning line (clp_cl_fallback). Decided before anything is enqueued. */
static clp_status use_gpu_shape(clp_cl_ctx *ctx, const clp_nn_attn *a, clp_dtype dt, int *gpu)
{
	int want = clp_nn_gpu_shape(ctx);
	clp_status s;

	*gpu = want;
	if (clp_cl_fell_back(ctx, "attention")) {
		*gpu = !want;
		return CLP_OK;
	}
	s = want ? clp_nn_attn_gpu_ready(ctx, a, dt) : cpu_ready(ctx, dt);
	if (s != CLP_ERR_BUILD)
		return s;
	*gpu = !want;
	return clp_cl_fallback(ctx, s, "attention",
			       want ? "the GPU shape (nn_attn_gpu.cl)"
				    : "the CPU shape (nn_attn.cl, nn_attn_bwd.cl)",
			       want ? "the CPU shape" : "the GPU shape");
}

clp_status clp_nn_attention_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf lse, clp_buf q,
				    clp_buf k, clp_buf v, const clp_nn_attn *a)
{
	cl_kernel kr;
	cl_mem scr;
	size_t Tp = padded(a->T);
	size_t g[3] = {nn_cdiv(a->T, (size_t)att_rows(ctx)), a->H, a->B}, lo[3] = {1, 1, 1};
	const size_t ktsz = a->B * a->KVH * a->hd * Tp, qtsz = a->B * a->H * a->hd * Tp;
	cl_ulong oo = out.off, ldo = a->ldo, lso = lse.off, qo = q.off, ldq = a->ldq, kto = 0,
		 vo = v.off, ldv = a->ldv, klo = a->kv_len.off, ao = oo, lda = ldo, qto = 0;
	cl_int has = a->kv_len.mem != NULL, causal = a->causal != 0;
	cl_uint T = (cl_uint)a->T, tp = (cl_uint)Tp, H = (cl_uint)a->H, KVH = (cl_uint)a->KVH,
		hd = (cl_uint)a->hd;
	float scale = att_scale(a);
	cl_mem acc = out.mem;
	clp_dtype dt;
	int gpu;

	CLP_TRY(check(a, "attention_forward"));
	CLP_TRY(att_types("attention_forward", a, &dt, out, q, k, v));
	CLP_TRY(clp_nn_require_f32("attention_forward", 1, "lse", lse));
	CLP_TRY(use_gpu_shape(ctx, a, dt, &gpu));
	if (gpu)
		return clp_nn_attn_gpu_forward(ctx, out, lse, q, k, v, a);
	/* 16-bit values: scratch Kt | Qt (fp16 only) | the output rows accumulating in fp32 */
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_ATTN,
			       (ktsz + (dt == CLP_F32 ? 0 : qtsz + a->B * a->T * a->H * a->hd)) *
				       sizeof(float),
			       &scr));
	CLP_TRY(transpose(ctx, scr, 0, k, a->ldk, a->KVH, a));
	if (dt != CLP_F32) {
		qto = ktsz, acc = scr, ao = ktsz + qtsz, lda = a->H * a->hd;
		if (dt == CLP_F16) /* the score loop reads q from Qt (nn_attn.clh ATT_TREAD) */
			CLP_TRY(transpose(ctx, scr, qto, q, a->ldq, a->H, a));
	}
	CLP_TRY(clp_cl_kernel(ctx, ATT_FILE, cpu_defines(ctx, dt), "clp_attn_forward", &kr));
	CLP_TRY(clp_cl_args(ctx, kr, 28, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(ldo), CLP_ARG(acc),
			    CLP_ARG(ao), CLP_ARG(lda), CLP_ARG(lse.mem), CLP_ARG(lso),
			    CLP_ARG(q.mem), CLP_ARG(qo), CLP_ARG(ldq), CLP_ARG(scr), CLP_ARG(qto),
			    CLP_ARG(scr), CLP_ARG(kto), CLP_ARG(v.mem), CLP_ARG(vo), CLP_ARG(ldv),
			    CLP_ARG(a->kv_len.mem), CLP_ARG(klo), CLP_ARG(has), CLP_ARG(T),
			    CLP_ARG(tp), CLP_ARG(H), CLP_ARG(KVH), CLP_ARG(hd), CLP_ARG(causal),
			    CLP_ARG(scale)));
	return clp_cl_run(ctx, kr, "attn_fwd", 3, g, lo);
}

clp_status clp_nn_attention_backward(clp_cl_ctx *ctx, clp_buf dq, clp_buf dk, clp_buf dv,
				     clp_buf dout, clp_buf q, clp_buf k, clp_buf v, clp_buf out,
				     clp_buf lse, const clp_nn_attn *a)
{
	cl_kernel kp, kq, kkv;
	cl_mem scr;
	const size_t Tp = padded(a->T), kvsz = a->B * a->KVH * a->hd * Tp,
		     qsz = a->B * a->H * a->hd * Tp, rsz = a->B * a->H * Tp;
	/* scratch layout: Kt, Vt, Qt, dOt, D, L2 */
	const cl_ulong kto = 0, vto = kvsz, qto = 2 * kvsz, gto = 2 * kvsz + qsz,
		       ddo = 2 * kvsz + 2 * qsz, l2o = ddo + rsz;
	cl_ulong doo = dout.off, oo = out.off, ldo = a->ldo, lso = lse.off, dqo = dq.off,
		 ldq = a->ldq, qo = q.off, ko = k.off, ldk = a->ldk, dko = dk.off, dvo = dv.off,
		 ldv = a->ldv, vo = v.off, klo = a->kv_len.off;
	cl_int has = a->kv_len.mem != NULL, causal = a->causal != 0;
	cl_uint T = (cl_uint)a->T, tp = (cl_uint)Tp, H = (cl_uint)a->H, KVH = (cl_uint)a->KVH,
		hd = (cl_uint)a->hd;
	float scale = att_scale(a);
	size_t lo[3] = {1, 1, 1};
	clp_dtype dt;
	int gpu;

	CLP_TRY(check(a, "attention_backward"));
	CLP_TRY(att_types("attention_backward", a, &dt, out, q, k, v));
	CLP_TRY(clp_nn_require_f32("attention_backward", 5, "dq", dq, "dk", dk, "dv", dv, "dout",
				   dout, "lse", lse));
	CLP_TRY(use_gpu_shape(ctx, a, dt, &gpu));
	if (gpu)
		return clp_nn_attn_gpu_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, a);
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_ATTN, (l2o + rsz) * sizeof(float), &scr));
	CLP_TRY(transpose(ctx, scr, kto, k, a->ldk, a->KVH, a));
	CLP_TRY(transpose(ctx, scr, vto, v, a->ldv, a->KVH, a));
	CLP_TRY(transpose(ctx, scr, qto, q, a->ldq, a->H, a));
	CLP_TRY(transpose(ctx, scr, gto, dout, a->ldo, a->H, a));
	{
		size_t g[3] = {Tp / 8, a->H, a->B};

		CLP_TRY(clp_cl_kernel(ctx, ATT_BWD_FILE, cpu_defines(ctx, dt), "clp_attn_bwd_pre",
				      &kp));
		CLP_TRY(clp_cl_args(ctx, kp, 15, CLP_ARG(scr), CLP_ARG(ddo), CLP_ARG(scr),
				    CLP_ARG(l2o), CLP_ARG(dout.mem), CLP_ARG(doo), CLP_ARG(out.mem),
				    CLP_ARG(oo), CLP_ARG(ldo), CLP_ARG(lse.mem), CLP_ARG(lso),
				    CLP_ARG(T), CLP_ARG(tp), CLP_ARG(H), CLP_ARG(hd)));
		CLP_TRY(clp_cl_run(ctx, kp, "attn_bwd_pre", 3, g, lo));
	}
	{
		size_t g[3] = {nn_cdiv(a->T, (size_t)att_rows(ctx)), a->H, a->B};

		CLP_TRY(clp_cl_kernel(ctx, ATT_BWD_FILE, cpu_defines(ctx, dt), "clp_attn_bwd_dq",
				      &kq));
		CLP_TRY(clp_cl_args(ctx, kq, 31, CLP_ARG(dq.mem), CLP_ARG(dqo), CLP_ARG(ldq),
				    CLP_ARG(q.mem), CLP_ARG(qo), CLP_ARG(k.mem), CLP_ARG(ko),
				    CLP_ARG(ldk), CLP_ARG(scr), CLP_ARG(qto), CLP_ARG(scr),
				    CLP_ARG(kto), CLP_ARG(scr), CLP_ARG(vto), CLP_ARG(dout.mem),
				    CLP_ARG(doo), CLP_ARG(ldo),
				    CLP_ARG(scr), CLP_ARG(ddo), CLP_ARG(scr), CLP_ARG(l2o),
				    CLP_ARG(a->kv_len.mem), CLP_ARG(klo), CLP_ARG(has), CLP_ARG(T),
				    CLP_ARG(tp), CLP_ARG(H), CLP_ARG(KVH), CLP_ARG(hd), CLP_ARG(causal),
				    CLP_ARG(scale)));
		CLP_TRY(clp_cl_run(ctx, kq, "attn_bwd_dq", 3, g, lo));
	}
	{
		size_t g[3] = {nn_cdiv(a->T, (size_t)att_rows(ctx)), a->KVH, a->B};

		CLP_TRY(clp_cl_kernel(ctx, ATT_BWD_FILE, cpu_defines(ctx, dt), "clp_attn_bwd_dkv",
				      &kkv));
		CLP_TRY(clp_cl_args(ctx, kkv, 38, CLP_ARG(dk.mem), CLP_ARG(dko), CLP_ARG(ldk),
				    CLP_ARG(dv.mem), CLP_ARG(dvo), CLP_ARG(ldv), CLP_ARG(q.mem),
				    CLP_ARG(qo), CLP_ARG(ldq), CLP_ARG(k.mem), CLP_ARG(ko),
				    CLP_ARG(v.mem), CLP_ARG(vo), CLP_ARG(scr), CLP_ARG(kto),
				    CLP_ARG(scr), CLP_ARG(vto), CLP_ARG(scr), CLP_ARG(qto),
				    CLP_ARG(scr), CLP_ARG(gto), CLP_ARG(dout.mem), CLP_ARG(doo),
				    CLP_ARG(ldo), CLP_ARG(scr), CLP_ARG(ddo), CLP_ARG(scr),
				    CLP_ARG(l2o), CLP_ARG(a->kv_len.mem), CLP_ARG(klo), CLP_ARG(has),
				    CLP_ARG(T), CLP_ARG(tp), CLP_ARG(H), CLP_ARG(KVH), CLP_ARG(hd),
				    CLP_ARG(causal), CLP_ARG(scale)));
		return clp_cl_run(ctx, kkv, "attn_bwd_dkv", 3, g, lo);
	}
}
