/* The executor's services to an optimizer (exec_env.h): accessors of its state, the group
 * communicator choice, and the sums over a group of host values and of device buffers. */
#include "engine/exec/exec_env.h"

#include <stdlib.h>

#include "engine/exec/exec_internal.h"

const clp_sched *clp_exec_sched(const clp_exec *e)
{
	return e->s;
}

int clp_exec_rank(const clp_exec *e)
{
	return e->rank;
}

clp_cl_ctx *clp_exec_ctx(const clp_exec *e)
{
	return e->ctx;
}

int clp_exec_find_stage(const clp_exec *e, int stage, int pipe)
{
	for (int i = 0; i < e->nls; i++)
		if (e->ls[i].stage == stage && (pipe < 0 || e->ls[i].pipe == pipe))
			return i;
	return -1;
}

int clp_exec_slot(const clp_exec *e, int i, int mb)
{
	return i >= 0 && i < e->nls ? exec_slot(&e->ls[i], mb) : -1;
}

void clp_exec_step_counts(const clp_exec *e, clp_exec_counts *c)
{
	c->rows = e->N;
	c->nmb = e->s->nmb;
	c->nreplicas = e->s->nreplicas;
	c->nsteps = e->s->nsteps;
	c->recompute = e->recompute;
	c->loss_scale = e->loss_scale;
	c->max_norm = e->max_norm;
}

int clp_exec_step_clip(const clp_exec *e, float *scale, int *nonfinite)
{
	*scale = e->clip;
	*nonfinite = e->nonfinite;
	return e->norm_done;
}

clp_status clp_exec_group_comm(clp_exec *e, int g, clp_comm **out, const char *what)
{
	*out = NULL;
	if (g < 0 || g >= e->s->ngroups)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: group %d of %d", e->rank, what, g,
				 e->s->ngroups);
	if (e->s->groups[g].n == 1)
		return CLP_OK;
	if (e->s->groups[g].n == clp_comm_size(e->comm)) {
		*out = e->comm;
		return CLP_OK;
	}
	if (!e->gcomm[g])
		return clp_error(CLP_ERR_STATE, "rank %d: %s: a collective of group %d, which it is "
				 "not in", e->rank, what, g);
	*out = e->gcomm[g];
	return CLP_OK;
}

clp_status clp_exec_group_sum(clp_exec *e, int g, clp_comm_type t, void *buf, size_t n,
			      const char *what)
{
	clp_comm *c = e->comm;

	if (g < 0)
		return clp_comm_size(e->comm) > 1
			       ? clp_comm_allreduce_sum(e->comm, t, buf, n, e->det, what) : CLP_OK;
	CLP_TRY(clp_exec_group_comm(e, g, &c, what));
	return c ? clp_comm_allreduce_sum(c, t, buf, n, e->det, what) : CLP_OK;
}

/* Read (to_device 0) or write the buffers from / to h, in order. */
static clp_status copy_bufs(clp_exec *e, const clp_buf *b, const size_t *n, int nb, float *h,
			    int to_device)
{
	size_t off = 0;

	for (int i = 0; i < nb; off += n[i], i++)
		CLP_TRY(to_device ? clp_cl_write(e->ctx, b[i].mem, b[i].off * 4, n[i] * 4, h + off)
				  : clp_cl_read(e->ctx, b[i].mem, b[i].off * 4, n[i] * 4, h + off));
	return CLP_OK;
}

clp_status clp_exec_sum_bufs(clp_exec *e, int g, const clp_buf *b, const size_t *n, int nb,
			     float scale, const char *what)
{
	size_t total = 0;
	float *h;
	clp_status s;

	for (int i = 0; i < nb; i++) {
		if (b[i].dt != CLP_F32)
			return clp_error(CLP_ERR_INVALID, "rank %d: %s: buffer %d is %s; sums over a "
					 "group are of fp32 buffers", e->rank, what, i,
					 clp_dtype_name(b[i].dt));
		total += n[i];
	}
	if (!(h = malloc((total ? total : 1) * sizeof(float))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory for %s", what);
	s = copy_bufs(e, b, n, nb, h, 0);
	if (s == CLP_OK)
		s = clp_exec_group_sum(e, g, CLP_COMM_F32, h, total, what);
	if (s == CLP_OK && scale != 1.0f)
		for (size_t j = 0; j < total; j++)
			h[j] *= scale;
	if (s == CLP_OK)
		s = copy_bufs(e, b, n, nb, h, 1);
	free(h);
	return s;
}

clp_status clp_exec_drain(clp_exec *e)
{
	return exec_drain(e);
}
