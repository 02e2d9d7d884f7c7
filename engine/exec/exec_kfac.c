/* K-FAC in the executor (optim.name = "kfac"; docs/KFAC.md): the cycle rule of
 * engine/optim/kfac.h run serially, per stage, at fixed points of the step: the factors of a
 * collecting step come through the stages' output-gradient taps during the backwards (A and B
 * together, so recomputation and split backwards see the right inputs); at the first optimizer
 * step of the rank the factors of stages with several holders are summed over the stage's group,
 * then inverted (step 0: activated at once), every stage is preconditioned and the KL sum is
 * added over all ranks; each OPT_STEP then updates its stage. The K-FAC ops of a PipeFisher
 * schedule (work spread over the bubbles) are not run here yet. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/exec/exec_internal.h"

/* The group of the stage's gradient all-reduce on this rank (-1: a single holder). */
static int stage_group(const clp_exec *e, int stage)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];

	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].kind == CLP_OP_ALLREDUCE && p->ops[i].what == CLP_RED_GRADS &&
		    p->ops[i].stage == stage)
			return p->ops[i].group;
	return -1;
}

clp_status clp_exec_kfac(clp_exec *e, const clp_kfac_opts *o, float lr_ratio)
{
	if (e->kfac)
		return clp_error(CLP_ERR_STATE, "the executor already runs K-FAC");
	e->kfac = calloc((size_t)e->nls + 1, sizeof(*e->kfac));
	e->kfac_group = calloc((size_t)e->nls + 1, sizeof(int));
	if (!e->kfac || !e->kfac_group)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	e->kfac_lr_ratio = lr_ratio;
	for (int i = 0; i < e->nls; i++) {
		CLP_TRY(clp_kfac_opt_create(&e->kfac[i], e->ls[i].st, o));
		/* with several holders only one carries the moving average's old value */
		clp_kfac_opt_set_ema_owner(e->kfac[i], e->ls[i].owner);
		e->kfac_group[i] = stage_group(e, e->ls[i].stage);
	}
	return CLP_OK;
}

clp_kfac_opt *clp_exec_kfac_opt(const clp_exec *e, int i)
{
	return e->kfac && i >= 0 && i < e->nls ? e->kfac[i] : NULL;
}

void exec_kfac_free(clp_exec *e)
{
	for (int i = 0; e->kfac && i < e->nls; i++)
		clp_kfac_opt_free(e->kfac[i]);
	free(e->kfac);
	free(e->kfac_group);
	e->kfac = NULL;
	e->kfac_group = NULL;
}

clp_status exec_kfac_step_begin(clp_exec *e, const clp_exec_data *d)
{
	/* the loss's divisor: 1 / inv_count is within 2^-24 of the integer count */
	double count = d->inv_count > 0 ? (double)llround(1.0 / (double)d->inv_count) : 0;
	double rows = (double)e->N * e->s->nmb * e->s->nreplicas;

	e->kfac_prepared = 0;
	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_kfac_opt_step_begin(e->kfac[i], (long)d->step, count, rows,
						&e->kfac_collect));
	e->kfac_step = (long)d->step;
	return CLP_OK;
}

/* A factor summed over the stage's holders (host staging, as the gradient all-reduce). */
static clp_status sync_factor(clp_exec *e, int g, clp_buf f, size_t n)
{
	float *h = malloc(n * sizeof(float));
	clp_comm *c = e->s->groups[g].n == clp_comm_size(e->comm) ? e->comm : e->gcomm[g];
	clp_status s;

	if (!h)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for a K-FAC factor");
	if (!c) {
		free(h);
		return clp_error(CLP_ERR_STATE, "rank %d: K-FAC factors of group %d, which it is not "
				 "in", e->rank, g);
	}
	s = clp_cl_read(e->ctx, f.mem, f.off * 4, n * 4, h);
	if (s == CLP_OK)
		s = clp_comm_allreduce_sum(c, CLP_COMM_F32, h, n, e->det, "K-FAC factor");
	if (s == CLP_OK)
		s = clp_cl_write(e->ctx, f.mem, f.off * 4, n * 4, h);
	free(h);
	return s;
}

/* Once per step, at the rank's first optimizer step: factors, inverses, preconditioning and
 * the global KL sum for every local stage. */
static clp_status prepare(clp_exec *e)
{
	double vg = 0;
	float v;

	for (int i = 0; i < e->nls; i++) {
		clp_kfac_opt *k = e->kfac[i];
		int first = clp_stage_first_layer(e->ls[i].st);

		if (e->kfac_collect && e->kfac_group[i] >= 0 &&
		    e->s->groups[e->kfac_group[i]].n > 1)
			for (int l = first; l < first + clp_stage_nlayers(e->ls[i].st); l++)
				for (int f = 0; f < clp_kfac_opt_nfactors(k); f++) {
					size_t d = clp_kfac_opt_factor_dim(k, f);

					CLP_TRY(sync_factor(e, e->kfac_group[i],
							    clp_kfac_opt_factor(k, l, f), d * d));
				}
		if (e->kfac_collect) {
			CLP_TRY(clp_kfac_opt_invert(k, -1, -1));
			if (e->kfac_step == 0)
				CLP_TRY(clp_kfac_opt_activate(k));
		}
		CLP_TRY(clp_kfac_opt_precondition(k));
	}
	/* KL clipping is global: every stage counted once (its owner) over all ranks */
	for (int i = 0; i < e->nls; i++) {
		clp_buf b = clp_kfac_opt_kl_sum(e->kfac[i]);

		CLP_TRY(clp_cl_read(e->ctx, b.mem, b.off * 4, sizeof(float), &v));
		vg += e->ls[i].owner ? v : 0;
	}
	if (clp_comm_size(e->comm) > 1)
		CLP_TRY(clp_comm_allreduce_sum(e->comm, CLP_COMM_F64, &vg, 1, e->det, "K-FAC KL sum"));
	v = (float)vg;
	for (int i = 0; i < e->nls; i++) {
		clp_buf b = clp_kfac_opt_kl_sum(e->kfac[i]);

		CLP_TRY(clp_cl_write(e->ctx, b.mem, b.off * 4, sizeof(float), &v));
	}
	e->kfac_prepared = 1;
	return CLP_OK;
}

clp_status exec_kfac_opt_step(clp_exec *e, int stage, const clp_nn_adamw_hp *hp)
{
	if (!e->kfac_prepared)
		CLP_TRY(prepare(e));
	for (int i = 0; i < e->nls; i++)
		if (e->ls[i].stage == stage)
			CLP_TRY(clp_kfac_opt_update(e->kfac[i], hp, hp->lr * e->kfac_lr_ratio,
						    clp_stage_stats(e->ls[i].st)));
	return CLP_OK;
}

clp_status exec_kfac_step_end(clp_exec *e)
{
	for (int i = 0; e->kfac_collect && i < e->nls; i++)
		CLP_TRY(clp_kfac_opt_check(e->kfac[i]));
	return CLP_OK;
}
