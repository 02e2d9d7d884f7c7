/* Host wrappers of nn_optim.cl: gradient statistics over many tensors, AdamW. Scratch (slot
 * NN_SCRATCH_OPT): the partial triples of clp_nn_grad_stats. */
#include "cl/nn_internal.h"

#include <math.h>
#include <stdlib.h>

#define OPT_FILE "nn_optim.cl"
#define GS_CHUNK 16384

clp_status clp_nn_grad_stats(clp_cl_ctx *ctx, clp_buf stats, const clp_buf *grads,
			     const size_t *n, int count, float max_norm)
{
	size_t ng = 0, one = 1;
	cl_kernel kp, kf;
	cl_mem part;
	cl_ulong so = stats.off, total;

	if (count < 0)
		return clp_error(CLP_ERR_INVALID, "grad_stats: %d tensors", count);
	for (int i = 0; i < count; i++)
		ng += nn_cdiv(n[i], GS_CHUNK);
	CLP_TRY(clp_cl_scratch(ctx, NN_SCRATCH_OPT, (3 * ng + 3) * sizeof(float), &part));
	CLP_TRY(clp_cl_kernel(ctx, OPT_FILE, clp_nn_ew_defines(ctx), "clp_gstat_partial", &kp));
	ng = 0;
	for (int i = 0; i < count; i++) {
		cl_ulong base = ng, xo = grads[i].off, nn = n[i];
		size_t groups = nn_cdiv(n[i], GS_CHUNK);

		if (!groups)
			continue;
		CLP_TRY(clp_cl_args(ctx, kp, 5, CLP_ARG(part), CLP_ARG(base), CLP_ARG(grads[i].mem),
				    CLP_ARG(xo), CLP_ARG(nn)));
		CLP_TRY(clp_cl_run(ctx, kp, "gstat_partial", 1, &groups, &one));
		ng += groups;
	}
	total = ng;
	CLP_TRY(clp_cl_kernel(ctx, OPT_FILE, clp_nn_ew_defines(ctx), "clp_gstat_final", &kf));
	CLP_TRY(clp_cl_args(ctx, kf, 5, CLP_ARG(stats.mem), CLP_ARG(so), CLP_ARG(part),
			    CLP_ARG(total), CLP_ARG(max_norm)));
	return clp_cl_run(ctx, kf, "gstat_final", 1, &one, &one);
}

clp_status clp_nn_adamw_update(clp_cl_ctx *ctx, clp_buf param, clp_buf m, clp_buf v, clp_buf grad,
			       size_t n, const clp_nn_adamw_hp *hp, int decay, clp_buf stats,
			       float gscale)
{
	cl_kernel k;
	size_t chunk, local, global;
	cl_ulong po = param.off, mo = m.off, vo = v.off, go = grad.off, nn = n, so = stats.off;
	cl_int has = stats.mem != NULL;
	float decay_mul, step_size, bc2_sqrt;
	double bc1, bc2;

	if (hp->step < 1 || !(hp->beta1 >= 0 && hp->beta1 < 1) || !(hp->beta2 >= 0 && hp->beta2 < 1))
		return clp_error(CLP_ERR_INVALID, "adamw: step %ld must be >= 1 and betas (%g, %g) in "
				 "[0, 1)", hp->step, hp->beta1, hp->beta2);
	bc1 = 1.0 - pow((double)hp->beta1, (double)hp->step);
	bc2 = 1.0 - pow((double)hp->beta2, (double)hp->step);
	decay_mul = decay ? (float)(1.0 - (double)hp->lr * hp->weight_decay) : 1.0f;
	step_size = (float)(hp->lr / bc1);
	bc2_sqrt = (float)sqrt(bc2);
	CLP_TRY(clp_cl_kernel(ctx, OPT_FILE, clp_nn_ew_defines(ctx), "clp_adamw", &k));
	CLP_TRY(clp_cl_args(ctx, k, 19, CLP_ARG(param.mem), CLP_ARG(po), CLP_ARG(m.mem), CLP_ARG(mo),
			    CLP_ARG(v.mem), CLP_ARG(vo), CLP_ARG(grad.mem), CLP_ARG(go), CLP_ARG(nn),
			    CLP_ARG(decay_mul), CLP_ARG(hp->beta1), CLP_ARG(hp->beta2),
			    CLP_ARG(hp->eps), CLP_ARG(step_size), CLP_ARG(bc2_sqrt), CLP_ARG(gscale),
			    CLP_ARG(stats.mem), CLP_ARG(so), CLP_ARG(has)));
	clp_nn_ew_geometry(ctx, &chunk, &local);
	global = nn_cdiv(n, chunk);
	return clp_cl_run(ctx, k, "adamw", 1, &global, &local);
}

clp_status clp_nn_grad_stats_each(clp_cl_ctx *ctx, cl_mem stats, const size_t *stats_off,
				  const clp_buf *grads, const size_t *n, int count, float max_norm)
{
	size_t ng = 0, one = 1, tabn, global;
	cl_ulong *tab, tab_at, nc, nt = (cl_ulong)count;
	cl_kernel kp, kf;
	cl_mem part;
	clp_status s;
	int same = 1;

	if (count < 0)
		return clp_error(CLP_ERR_INVALID, "grad_stats_each: %d tensors", count);
	for (int i = 0; i < count; i++) {
		ng += nn_cdiv(n[i], GS_CHUNK);
		same &= grads[i].mem == grads[0].mem;
	}
	if (!same || ng == 0) { /* tensors in several buffers: one call each */
		for (int i = 0; i < count; i++)
			CLP_TRY(clp_nn_grad_stats(ctx, clp_buf_at(stats, stats_off[i]), &grads[i],
						  &n[i], 1, max_norm));
		return CLP_OK;
	}
	tab_at = (3 * ng + 1) / 2 * 2; /* floats before the table, 8-byte aligned */
	tabn = 2 * ng + 3 * (size_t)count;
	if (!(tab = malloc(tabn * sizeof(*tab))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	nc = 0;
	for (int i = 0; i < count; i++) {
		size_t groups = nn_cdiv(n[i], GS_CHUNK);

		tab[2 * ng + 3 * i] = nc, tab[2 * ng + 3 * i + 1] = groups;
		tab[2 * ng + 3 * i + 2] = stats_off[i];
		for (size_t g = 0; g < groups; g++, nc++) {
			size_t c0 = g * GS_CHUNK;

			tab[2 * nc] = grads[i].off + c0;
			tab[2 * nc + 1] = n[i] - c0 < GS_CHUNK ? n[i] - c0 : GS_CHUNK;
		}
	}
	s = clp_cl_scratch(ctx, NN_SCRATCH_OPT, tab_at * sizeof(float) + tabn * sizeof(*tab), &part);
	if (s == CLP_OK)
		s = clp_cl_write(ctx, part, tab_at * sizeof(float), tabn * sizeof(*tab), tab);
	free(tab);
	CLP_TRY(s);
	CLP_TRY(clp_cl_kernel(ctx, OPT_FILE, clp_nn_ew_defines(ctx), "clp_gstat_partial_each", &kp));
	CLP_TRY(clp_cl_args(ctx, kp, 3, CLP_ARG(part), CLP_ARG(tab_at), CLP_ARG(grads[0].mem)));
	CLP_TRY(clp_cl_run(ctx, kp, "gstat_partial", 1, &ng, &one));
	CLP_TRY(clp_cl_kernel(ctx, OPT_FILE, clp_nn_ew_defines(ctx), "clp_gstat_final_each", &kf));
	CLP_TRY(clp_cl_args(ctx, kf, 6, CLP_ARG(stats), CLP_ARG(part), CLP_ARG(tab_at), CLP_ARG(nc),
			    CLP_ARG(nt), CLP_ARG(max_norm)));
	global = (size_t)count;
	return clp_cl_run(ctx, kf, "gstat_final", 1, &global, &one);
}

clp_status clp_nn_adamw_update_each(clp_cl_ctx *ctx, const clp_buf *const t[4], const size_t *n,
				    const int *decay, int count, const clp_nn_adamw_hp *hp,
				    clp_buf stats, float gscale)
{
	size_t chunk, local, rows = 0, global;
	cl_ulong *tab, r, so = stats.off;
	cl_int has = stats.mem != NULL;
	float decay_mul, step_size, bc2_sqrt;
	double bc1, bc2;
	cl_mem tm;
	cl_kernel k;
	clp_status s;
	int same = 1;

	for (int i = 0; i < count; i++)
		for (int j = 0; j < 4; j++)
			same &= t[j][i].mem == t[j][0].mem;
	if (!same || count < 2) { /* one launch per tensor */
		for (int i = 0; i < count; i++)
			CLP_TRY(clp_nn_adamw_update(ctx, t[0][i], t[1][i], t[2][i], t[3][i], n[i], hp,
						    decay[i], stats, gscale));
		return CLP_OK;
	}
	if (hp->step < 1 || !(hp->beta1 >= 0 && hp->beta1 < 1) || !(hp->beta2 >= 0 && hp->beta2 < 1))
		return clp_error(CLP_ERR_INVALID, "adamw: step %ld must be >= 1 and betas (%g, %g) in "
				 "[0, 1)", hp->step, hp->beta1, hp->beta2);
	/* the scalars exactly as clp_nn_adamw_update computes them */
	bc1 = 1.0 - pow((double)hp->beta1, (double)hp->step);
	bc2 = 1.0 - pow((double)hp->beta2, (double)hp->step);
	decay_mul = (float)(1.0 - (double)hp->lr * hp->weight_decay);
	step_size = (float)(hp->lr / bc1);
	bc2_sqrt = (float)sqrt(bc2);
	clp_nn_ew_geometry(ctx, &chunk, &local);
	for (int i = 0; i < count; i++)
		rows += nn_cdiv(n[i], chunk);
	if (rows == 0)
		return CLP_OK;
	if (!(tab = malloc(rows * 6 * sizeof(*tab))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	r = 0;
	for (int i = 0; i < count; i++)
		for (size_t c0 = 0; c0 < n[i]; c0 += chunk, r++) {
			for (int j = 0; j < 4; j++)
				tab[6 * r + j] = t[j][i].off + c0;
			tab[6 * r + 4] = n[i] - c0 < chunk ? n[i] - c0 : chunk;
			tab[6 * r + 5] = decay[i] != 0;
		}
	s = clp_cl_scratch(ctx, NN_SCRATCH_OPT, rows * 6 * sizeof(*tab), &tm);
	if (s == CLP_OK)
		s = clp_cl_write(ctx, tm, 0, rows * 6 * sizeof(*tab), tab);
	free(tab);
	CLP_TRY(s);
	r = rows;
	CLP_TRY(clp_cl_kernel(ctx, OPT_FILE, clp_nn_ew_defines(ctx), "clp_adamw_each", &k));
	CLP_TRY(clp_cl_args(ctx, k, 16, CLP_ARG(t[0][0].mem), CLP_ARG(t[1][0].mem),
			    CLP_ARG(t[2][0].mem), CLP_ARG(t[3][0].mem), CLP_ARG(tm), CLP_ARG(r),
			    CLP_ARG(decay_mul), CLP_ARG(hp->beta1), CLP_ARG(hp->beta2),
			    CLP_ARG(hp->eps), CLP_ARG(step_size), CLP_ARG(bc2_sqrt), CLP_ARG(gscale),
			    CLP_ARG(stats.mem), CLP_ARG(so), CLP_ARG(has)));
	global = rows;
	return clp_cl_run(ctx, k, "adamw", 1, &global, &local);
}
