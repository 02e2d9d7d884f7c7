/* Host side of the GPU-shaped attention (nn_attn_gpu.cl); chosen by clp_nn_attention_* when
 * clp_nn_gpu_shape() says so. Scratch (slot NN_SCRATCH_ATTN): the D and lse rows (fp32). One
 * program per head-dim class and storage type of the values (q.dt). */
#include "cl/nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ATG_FILE "nn_attn_gpu.cl"
#define ATG_TK 16

/* Rows per work-group: 64 on a GPU; ATG_TK on a device of CPU type that takes the GPU shape
 * (llvmpipe: its work-groups are SIMD lanes of a few cores, where a wide group buys no
 * occupancy). A causal group stops at its last row's tile, so smaller groups skip the masked
 * tiles a 64-row group computes as zeros: for T = 64, 10 tiles of 16 rows instead of 16
 * (llvmpipe, a stand-alone forward: 16 ms against 27, the same output; docs/OPENCL.md). Each row
 * adds the same visible terms in the same order either way. */
static size_t atg_wg(const clp_cl_ctx *ctx)
{
	return strcmp(clp_cl_ctx_device(ctx)->type, "cpu") == 0 ? ATG_TK : 64;
}


/* The private arrays hold ATG_HD >= hd values: one program per power of two. */
static clp_status gpu_defines(const clp_cl_ctx *ctx, const clp_nn_attn *a, clp_dtype dt,
			      char *buf, size_t n)
{
	size_t cap = 16;

	while (cap < a->hd)
		cap *= 2;
	if (cap > 256)
		return clp_error(CLP_ERR_UNSUPPORTED, "attention (GPU shape): head dim %zu over 256",
				 a->hd);
	snprintf(buf, n, "#define ATG_WG %zu\n#define ATG_TK %d\n#define ATG_HD %zu\n%s",
		 atg_wg(ctx), ATG_TK, cap, clp_dtype_st_define(dt));
	return CLP_OK;
}

static float scale_of(const clp_nn_attn *a)
{
	return a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->hd));
}

clp_status clp_nn_attn_gpu_ready(clp_cl_ctx *ctx, const clp_nn_attn *a, clp_dtype dt)
{
	static const char *const names[] = {"clp_attng_forward", "clp_attng_bwd_dq",
					     "clp_attng_bwd_dkv"};
	char defs[128];
	cl_kernel k;

	CLP_TRY(gpu_defines(ctx, a, dt, defs, sizeof(defs)));
	for (int i = 0; i < 3; i++)
		CLP_TRY(clp_cl_kernel(ctx, ATG_FILE, defs, names[i], &k));
	return clp_cl_kernel(ctx, "nn_attn_bwd.cl", clp_nn_attn_defines(dt), "clp_attn_bwd_pre", &k);
}

clp_status clp_nn_attn_gpu_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf lse, clp_buf q,
				   clp_buf k, clp_buf v, const clp_nn_attn *a)
{
	char defs[128];
	cl_kernel kr;
	const size_t wg = atg_wg(ctx);
	size_t g[3] = {nn_cdiv(a->T, wg) * wg, a->H, a->B}, lo[3] = {wg, 1, 1};
	cl_ulong oo = out.off, ldo = a->ldo, lso = lse.off, qo = q.off, ldq = a->ldq, ko = k.off,
		 ldk = a->ldk, vo = v.off, ldv = a->ldv, klo = a->kv_len.off;
	cl_int has = a->kv_len.mem != NULL, causal = a->causal != 0;
	cl_uint T = (cl_uint)a->T, H = (cl_uint)a->H, KVH = (cl_uint)a->KVH, hd = (cl_uint)a->hd;
	float scale = scale_of(a);

	CLP_TRY(gpu_defines(ctx, a, q.dt, defs, sizeof(defs)));
	CLP_TRY(clp_cl_kernel(ctx, ATG_FILE, defs, "clp_attng_forward", &kr));
	CLP_TRY(clp_cl_args(ctx, kr, 23, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(ldo),
			    CLP_ARG(lse.mem), CLP_ARG(lso), CLP_ARG(q.mem), CLP_ARG(qo), CLP_ARG(ldq),
			    CLP_ARG(k.mem), CLP_ARG(ko), CLP_ARG(ldk), CLP_ARG(v.mem), CLP_ARG(vo),
			    CLP_ARG(ldv), CLP_ARG(a->kv_len.mem), CLP_ARG(klo), CLP_ARG(has),
			    CLP_ARG(T), CLP_ARG(H), CLP_ARG(KVH), CLP_ARG(hd), CLP_ARG(causal),
			    CLP_ARG(scale)));
	return clp_cl_run(ctx, kr, "attn_fwd_gpu", 3, g, lo);
}

clp_status clp_nn_attn_gpu_backward(clp_cl_ctx *ctx, clp_buf dq, clp_buf dk, clp_buf dv,
				    clp_buf dout, clp_buf q, clp_buf k, clp_buf v, clp_buf out,
				    clp_buf lse, const clp_nn_attn *a)
{
	char defs[128];
	cl_kernel kp, kq, kkv;
	cl_mem scr;
	const size_t Tp = (a->T + 7) / 8 * 8, rsz = a->B * a->H * Tp;
	cl_ulong ddo = 0, l2o = rsz, doo = dout.off, oo = out.off, ldo = a->ldo, lso = lse.off,
		 dqo = dq.off, ldq = a->ldq, qo = q.off, ko = k.off, ldk = a->ldk, dko = dk.off,
		 dvo = dv.off, ldv = a->ldv, vo = v.off, klo = a->kv_len.off;
	cl_int has = a->kv_len.mem != NULL, causal = a->causal != 0;
	cl_uint T = (cl_uint)a->T, tp = (cl_uint)Tp, H = (cl_uint)a->H, KVH = (cl_uint)a->KVH,
		hd = (cl_uint)a->hd;
	float scale = scale_of(a);
	const size_t wg = atg_wg(ctx);
	size_t one[3] = {1, 1, 1}, lo[3] = {wg, 1, 1};

	CLP_TRY(gpu_defines(ctx, a, q.dt, defs, sizeof(defs)));
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_ATTN, 2 * rsz * sizeof(float), &scr));
	{
		size_t g[3] = {Tp / 8, a->H, a->B};

		CLP_TRY(clp_cl_kernel(ctx, "nn_attn_bwd.cl", clp_nn_attn_defines(q.dt),
				      "clp_attn_bwd_pre", &kp));
		CLP_TRY(clp_cl_args(ctx, kp, 15, CLP_ARG(scr), CLP_ARG(ddo), CLP_ARG(scr),
				    CLP_ARG(l2o), CLP_ARG(dout.mem), CLP_ARG(doo), CLP_ARG(out.mem),
				    CLP_ARG(oo), CLP_ARG(ldo), CLP_ARG(lse.mem), CLP_ARG(lso),
				    CLP_ARG(T), CLP_ARG(tp), CLP_ARG(H), CLP_ARG(hd)));
		CLP_TRY(clp_cl_run(ctx, kp, "attn_bwd_pre", 3, g, one));
	}
	{
		size_t g[3] = {nn_cdiv(a->T, wg) * wg, a->H, a->B};

		CLP_TRY(clp_cl_kernel(ctx, ATG_FILE, defs, "clp_attng_bwd_dq", &kq));
		CLP_TRY(clp_cl_args(ctx, kq, 28, CLP_ARG(dq.mem), CLP_ARG(dqo), CLP_ARG(ldq),
				    CLP_ARG(q.mem), CLP_ARG(qo), CLP_ARG(k.mem), CLP_ARG(ko),
				    CLP_ARG(ldk), CLP_ARG(v.mem), CLP_ARG(vo), CLP_ARG(ldv),
				    CLP_ARG(dout.mem), CLP_ARG(doo), CLP_ARG(ldo), CLP_ARG(scr),
				    CLP_ARG(ddo), CLP_ARG(scr), CLP_ARG(l2o), CLP_ARG(a->kv_len.mem),
				    CLP_ARG(klo), CLP_ARG(has), CLP_ARG(T), CLP_ARG(tp), CLP_ARG(H),
				    CLP_ARG(KVH), CLP_ARG(hd), CLP_ARG(causal), CLP_ARG(scale)));
		CLP_TRY(clp_cl_run(ctx, kq, "attn_bwd_dq_gpu", 3, g, lo));
	}
	{
		size_t g[3] = {nn_cdiv(a->T, wg) * wg, a->KVH, a->B};

		CLP_TRY(clp_cl_kernel(ctx, ATG_FILE, defs, "clp_attng_bwd_dkv", &kkv));
		CLP_TRY(clp_cl_args(ctx, kkv, 30, CLP_ARG(dk.mem), CLP_ARG(dko), CLP_ARG(ldk),
				    CLP_ARG(dv.mem), CLP_ARG(dvo), CLP_ARG(ldv), CLP_ARG(q.mem),
				    CLP_ARG(qo), CLP_ARG(ldq), CLP_ARG(k.mem), CLP_ARG(ko),
				    CLP_ARG(v.mem), CLP_ARG(vo), CLP_ARG(dout.mem), CLP_ARG(doo),
				    CLP_ARG(ldo), CLP_ARG(scr), CLP_ARG(ddo), CLP_ARG(scr), CLP_ARG(l2o),
				    CLP_ARG(a->kv_len.mem), CLP_ARG(klo), CLP_ARG(has), CLP_ARG(T),
				    CLP_ARG(tp), CLP_ARG(H), CLP_ARG(KVH), CLP_ARG(hd), CLP_ARG(causal),
				    CLP_ARG(scale)));
		return clp_cl_run(ctx, kkv, "attn_bwd_dkv_gpu", 3, g, lo);
	}
}
