/* Host wrappers of the K-FAC kernels (kfac.cl) except the inverses (kfac_inv.c): factors,
 * damping, damped copies, preconditioning by GEMM, the dot product and the KL-clipped SGD. */
#include "cl/kfac_internal.h"

#include <math.h>
#include <stdio.h>

#include "cl/gemm.h"
#include "cl/ops.h"
#include "cl/nn_internal.h"

/* CPU shape: one work-item per block, row or chunk (a plain loop through PoCL); GPU shape:
 * work-groups of 64. The numbers reach the kernels as defines, so the two cannot disagree. */
static size_t group_size(const clp_cl_ctx *ctx)
{
	return clp_nn_gpu_shape(ctx) ? 64 : 1;
}

static size_t chunk_size(const clp_cl_ctx *ctx)
{
	return clp_nn_gpu_shape(ctx) ? 16 : 8192;
}

size_t clp_kfac_block(const clp_cl_ctx *ctx)
{
	return clp_nn_gpu_shape(ctx) ? 64 : 32;
}

clp_status kfac_kernel(clp_cl_ctx *ctx, const char *name, cl_kernel *k)
{
	char defs[96];

	snprintf(defs, sizeof(defs), "#define KFAC_LS %zu\n#define KFAC_CHUNK %zu\n",
		 group_size(ctx), chunk_size(ctx));
	return clp_cl_kernel(ctx, "kfac.cl", defs, name, k);
}

clp_status kfac_run_rows(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	size_t local = group_size(ctx), global = n ? n : 1;

	return clp_cl_run(ctx, k, label, 1, &global, &local);
}

clp_status kfac_run_group(clp_cl_ctx *ctx, cl_kernel k, const char *label)
{
	size_t local = group_size(ctx);

	return clp_cl_run(ctx, k, label, 1, &local, &local);
}

static clp_status run_one(clp_cl_ctx *ctx, cl_kernel k, const char *label)
{
	size_t one = 1;

	return clp_cl_run(ctx, k, label, 1, &one, &one);
}

clp_status kfac_copy2d(clp_cl_ctx *ctx, clp_buf dst, size_t ldd, clp_buf src, size_t lds,
		       size_t rows, size_t cols, float alpha)
{
	cl_kernel k;
	cl_ulong dof = dst.off, dl = ldd, sof = src.off, sl = lds, r = rows, c = cols;

	if (!rows || !cols)
		return CLP_OK;
	CLP_TRY(kfac_kernel(ctx, "kfac_copy2d", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(dst.mem), CLP_ARG(dof), CLP_ARG(dl),
			    CLP_ARG(src.mem), CLP_ARG(sof), CLP_ARG(sl), CLP_ARG(r), CLP_ARG(c),
			    CLP_ARG(alpha)));
	return kfac_run_rows(ctx, k, "kfac_copy2d", rows);
}

clp_status clp_kfac_factor(clp_cl_ctx *ctx, clp_buf F, clp_buf x, size_t ldx, size_t rows,
			   size_t d, float alpha, float beta)
{
	CLP_TRY(clp_nn_require_f32("kfac factor", 1, "F", F));
	if (!d)
		return CLP_OK;
	if (ldx < d)
		return clp_error(CLP_ERR_INVALID, "kfac factor: row stride %zu < dimension %zu", ldx,
				 d);
	if (!rows) /* an empty batch contributes nothing; beta still applies */
		return beta == 1.0f ? CLP_OK
		       : beta == 0.0f ? clp_cl_fill(ctx, F, 0.0f, d * d)
				      : clp_cl_scale(ctx, F, beta, d * d);
	return clp_cl_gemm(ctx, CLP_T, CLP_N, d, d, rows, alpha, x, ldx, x, ldx, beta, F, d);
}

static clp_status trace(clp_cl_ctx *ctx, clp_buf stats, int slot, clp_buf F, size_t d, int acc)
{
	cl_kernel k;
	cl_ulong so = stats.off + (size_t)slot, fo = F.off, dd = d;
	cl_int a = acc;

	CLP_TRY(kfac_kernel(ctx, "kfac_trace", &k));
	CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(stats.mem), CLP_ARG(so), CLP_ARG(F.mem), CLP_ARG(fo),
			    CLP_ARG(dd), CLP_ARG(a)));
	return run_one(ctx, k, "kfac_trace");
}

clp_status clp_kfac_damping(clp_cl_ctx *ctx, clp_buf stats, clp_buf A, size_t dA,
			    const clp_buf *B, const size_t *dB, int nb, float lambda)
{
	cl_kernel k;
	cl_ulong so = stats.off;
	float fa = (float)dA, fb = 0, sl;
	size_t total = 0;

	if (nb < 1 || !dA || !(lambda >= 0))
		return clp_error(CLP_ERR_INVALID, "kfac damping: %d B blocks, dim A %zu, lambda %g",
				 nb, dA, (double)lambda);
	sl = sqrtf(lambda);
	CLP_TRY(trace(ctx, stats, CLP_KFAC_S_TRA, A, dA, 0));
	for (int i = 0; i < nb; i++) {
		CLP_TRY(trace(ctx, stats, CLP_KFAC_S_TRB, B[i], dB[i], i > 0));
		total += dB[i];
	}
	fb = (float)total;
	CLP_TRY(kfac_kernel(ctx, "kfac_damping", &k));
	CLP_TRY(clp_cl_args(ctx, k, 5, CLP_ARG(stats.mem), CLP_ARG(so), CLP_ARG(fa), CLP_ARG(fb),
			    CLP_ARG(sl)));
	return run_one(ctx, k, "kfac_damping");
}

clp_status clp_kfac_damped_copy(clp_cl_ctx *ctx, clp_buf W, clp_buf F, size_t d, clp_buf stats,
				int which)
{
	cl_kernel k;
	cl_ulong wo = W.off, fo = F.off, dd = d, so = stats.off;
	cl_int w = which != 0;

	CLP_TRY(kfac_kernel(ctx, "kfac_damped_copy", &k));
	CLP_TRY(clp_cl_args(ctx, k, 8, CLP_ARG(W.mem), CLP_ARG(wo), CLP_ARG(F.mem), CLP_ARG(fo),
			    CLP_ARG(dd), CLP_ARG(stats.mem), CLP_ARG(so), CLP_ARG(w)));
	return kfac_run_rows(ctx, k, "kfac_damped_copy", d);
}

clp_status clp_kfac_precondition(clp_cl_ctx *ctx, clp_buf P, size_t ldp, clp_buf G, size_t ldg,
				 clp_buf Binv, clp_buf Ainv, size_t O, size_t I, int in_out,
				 clp_buf tmp)
{
	if (!O || !I)
		return CLP_OK;
	if (in_out) { /* P^T = Ainv G^T Binv with G^T stored (I, O) */
		CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, I, O, I, 1.0f, Ainv, I, G, ldg, 0.0f, tmp,
				    O));
		return clp_cl_gemm(ctx, CLP_N, CLP_N, I, O, O, 1.0f, tmp, O, Binv, O, 0.0f, P, ldp);
	}
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, O, I, O, 1.0f, Binv, O, G, ldg, 0.0f, tmp, I));
	return clp_cl_gemm(ctx, CLP_N, CLP_N, O, I, I, 1.0f, tmp, I, Ainv, I, 0.0f, P, ldp);
}

clp_status clp_kfac_dot(clp_cl_ctx *ctx, clp_buf acc, clp_buf x, clp_buf y, size_t n)
{
	size_t chunk = chunk_size(ctx), local = group_size(ctx), groups, global;
	cl_kernel k1, k2;
	cl_mem part;
	cl_ulong xo = x.off, yo = y.off, nn = n, ao = acc.off;
	cl_uint np;

	groups = n ? (n + chunk - 1) / chunk : 1;
	global = (groups + local - 1) / local * local;
	np = (cl_uint)groups;
	CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_REDUCE, global * sizeof(float), &part));
	CLP_TRY(kfac_kernel(ctx, "kfac_dot_part", &k1));
	CLP_TRY(kfac_kernel(ctx, "kfac_dot_final", &k2));
	CLP_TRY(clp_cl_args(ctx, k1, 6, CLP_ARG(part), CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(y.mem),
			    CLP_ARG(yo), CLP_ARG(nn)));
	CLP_TRY(clp_cl_run(ctx, k1, "kfac_dot_part", 1, &global, &local));
	CLP_TRY(clp_cl_args(ctx, k2, 4, CLP_ARG(acc.mem), CLP_ARG(ao), CLP_ARG(part), CLP_ARG(np)));
	return run_one(ctx, k2, "kfac_dot_final");
}

clp_status clp_kfac_kl_clip(clp_cl_ctx *ctx, clp_buf nu, clp_buf vg, clp_buf gstats, float lr,
			    float kl_clip)
{
	cl_kernel k;
	cl_ulong no = nu.off, vo = vg.off, go = gstats.off;
	cl_int has = gstats.mem != NULL;
	cl_mem gm = has ? gstats.mem : nu.mem;

	CLP_TRY(kfac_kernel(ctx, "kfac_kl_nu", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(nu.mem), CLP_ARG(no), CLP_ARG(vg.mem), CLP_ARG(vo),
			    CLP_ARG(gm), CLP_ARG(go), CLP_ARG(has), CLP_ARG(lr), CLP_ARG(kl_clip)));
	return run_one(ctx, k, "kfac_kl_nu");
}

clp_status clp_kfac_sgd(clp_cl_ctx *ctx, clp_buf p, clp_buf m, clp_buf g, size_t n, float lr,
			float momentum, float wd, clp_buf gstats, clp_buf nu)
{
	size_t chunk = chunk_size(ctx), local = group_size(ctx), global;
	cl_kernel k;
	cl_ulong po = p.off, mo = m.off, go = g.off, nn = n, gso = gstats.off, nuo = nu.off;
	cl_int has = gstats.mem != NULL;
	cl_mem gm = has ? gstats.mem : nu.mem;

	if (!n)
		return CLP_OK;
	global = ((n + chunk - 1) / chunk + local - 1) / local * local;
	CLP_TRY(kfac_kernel(ctx, "kfac_sgd", &k));
	CLP_TRY(clp_cl_args(ctx, k, 15, CLP_ARG(p.mem), CLP_ARG(po), CLP_ARG(m.mem), CLP_ARG(mo),
			    CLP_ARG(g.mem), CLP_ARG(go), CLP_ARG(nn), CLP_ARG(lr),
			    CLP_ARG(momentum), CLP_ARG(wd), CLP_ARG(gm), CLP_ARG(gso), CLP_ARG(has),
			    CLP_ARG(nu.mem), CLP_ARG(nuo)));
	return clp_cl_run(ctx, k, "kfac_sgd", 1, &global, &local);
}
