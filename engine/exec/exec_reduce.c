/* The executor's reductions: a set of gradients summed over a schedule group (through
 * clp_exec_sum_bufs, exec_env.c), the global gradient norm with the clipping scale, the loss. */
#include "engine/exec/exec_env.h"
#include "engine/exec/exec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/ops.h"

clp_status exec_reduce_grads(clp_exec *e, const clp_op *op, clp_stage *const *st, int nst,
			     int skip_tied, float scale, const char *label)
{
	clp_buf *b;
	size_t *n;
	int nb = 0, cap = 1;
	clp_status s;

	for (int i = 0; i < nst; i++)
		cap += clp_stage_table(st[i])->ntensors;
	b = malloc((size_t)cap * sizeof(*b));
	n = malloc((size_t)cap * sizeof(*n));
	if (!b || !n) {
		free(b);
		free(n);
		return clp_error(CLP_ERR_NOMEM, "out of host memory for %s", label);
	}
	/* the head's share of a tied embedding held with it joins it first: summed over the
	 * replicas with the rest (a one-stage pipeline's replicas left it out) */
	for (int i = 0; i < nst; i++) {
		s = clp_stage_fold_tied(st[i]);
		if (s != CLP_OK) {
			free(b);
			free(n);
			return s;
		}
	}
	/* the gradients of the stages in order, the head's copy of a tied embedding left out */
	for (int i = 0; i < nst; i++) {
		const clp_param_table *t = clp_stage_table(st[i]);

		for (int k = 0; k < t->ntensors; k++) {
			if (skip_tied && exec_tied_copy(&t->tensors[k]))
				continue;
			b[nb] = clp_stage_tensor(st[i], CLP_ST_GRAD, k);
			if (!b[nb].mem) /* frozen: no gradient (alike in every member) */
				continue;
			n[nb++] = t->tensors[k].numel;
		}
	}
	s = clp_exec_sum_bufs(e, op ? op->group : -1, b, n, nb, scale, label);
	free(b);
	free(n);
	return s;
}

/* Per-tensor sums of squares and non-finite flags of the owned gradients of local stage l, into
 * e->tsum (the whole model's order), through the host buffer h (4 floats per tensor). */
static clp_status stage_sumsq(clp_exec *e, struct lstage *l, float *h)
{
	const clp_param_table *t = clp_stage_table(l->st);
	int nt = e->full.ntensors;

	clp_buf *g = malloc((size_t)t->ntensors * sizeof(*g) + 1);
	size_t *n = malloc((size_t)t->ntensors * 2 * sizeof(*n) + 1);
	int no = 0;
	clp_status s;

	if (!g || !n) {
		free(g);
		free(n);
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	}
	/* the owned ones, in two launches (issue 30); a frozen one's: left out */
	for (int k = 0; k < t->ntensors; k++)
		if (l->owns[k] && !clp_stage_frozen(l->st, k) && clp_stage_trained(l->st, k)) {
			g[no] = clp_stage_tensor(l->st, CLP_ST_GRAD, k);
			n[no] = t->tensors[k].numel;
			n[t->ntensors + no++] = l->stats.off + 4 * (size_t)k;
		}
	s = clp_nn_grad_stats_each(e->ctx, l->stats.mem, n + t->ntensors, g, n, no, 0.0f);
	free(g);
	free(n);
	CLP_TRY(s);
	CLP_TRY(clp_cl_read(e->ctx, l->stats.mem, l->stats.off * 4,
			    (size_t)t->ntensors * 4 * sizeof(float), h));
	for (int k = 0; k < t->ntensors; k++)
		if (l->owns[k] && !clp_stage_frozen(l->st, k) && l->gindex[k] >= 0) {
			e->tsum[l->gindex[k]] = h[4 * k + CLP_NN_GSTAT_SUMSQ];
			e->tsum[nt + l->gindex[k]] = h[4 * k + CLP_NN_GSTAT_NONFINITE];
		}
	return CLP_OK;
}

/* Per-tensor sums of squares of the owned gradients into e->tsum (whole-model order) and the
 * non-finite flags after them; reduced over all ranks when group_op is given. */
clp_status exec_grad_norm(clp_exec *e, const clp_op *group_op, float max_norm)
{
	int nt = e->full.ntensors;
	double sum = 0;
	float stats[4];

	memset(e->tsum, 0, 2 * (size_t)nt * sizeof(double));
	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_stage_fold_tied(e->ls[i].st));
	for (int i = 0; i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);
		float *h = malloc((size_t)t->ntensors * 4 * sizeof(float) + 1);
		clp_status st;

		if (!h)
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		st = stage_sumsq(e, &e->ls[i], h);
		free(h);
		CLP_TRY(st);
	}
	if (group_op || e->norm_world)
		CLP_TRY(clp_exec_group_sum(e, group_op ? group_op->group : -1, CLP_COMM_F64,
					   e->tsum, 2 * (size_t)nt, "gradient norm"));
	e->nonfinite = 0;
	for (int k = 0; k < nt; k++) {
		sum += e->tsum[k];
		e->nonfinite |= e->tsum[nt + k] != 0;
	}
	/* the gradients carry the loss scale (1 unless fp16 scales it): the norm and the clip
	 * are those of the unscaled ones; the optimizer divides the scale out (gscale) */
	e->norm = sqrt(sum) / e->loss_scale;
	e->nonfinite |= !isfinite(e->norm);
	stats[CLP_NN_GSTAT_SUMSQ] = (float)sum;
	stats[CLP_NN_GSTAT_NONFINITE] = e->nonfinite ? 1.0f : 0.0f;
	stats[CLP_NN_GSTAT_NORM] = (float)e->norm;
	stats[CLP_NN_GSTAT_SCALE] = e->nonfinite ? 0.0f
			   : max_norm > 0 && e->norm > 0 ? (float)fmin(1.0, max_norm / (e->norm + 1e-6))
							 : 1.0f;
	e->clip = stats[CLP_NN_GSTAT_SCALE];
	for (int i = 0; i < e->nls; i++) {
		clp_buf s = clp_stage_stats(e->ls[i].st);

		CLP_TRY(clp_cl_write(e->ctx, s.mem, s.off * 4, sizeof(stats), stats));
	}
	e->norm_done = 1;
	return CLP_OK;
}

clp_status exec_loss_total(clp_exec *e, double *loss)
{
	float l = 0;

	CLP_TRY(clp_cl_read(e->ctx, e->acc, 0, sizeof(float), &l));
	*loss = l;
	if (clp_comm_size(e->comm) > 1)
		CLP_TRY(clp_comm_allreduce_sum(e->comm, CLP_COMM_F64, loss, 1, 1, "loss"));
	return CLP_OK;
}
