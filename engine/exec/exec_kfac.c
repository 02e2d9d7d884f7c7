/* K-FAC in the executor (optim.name = "kfac"; docs/KFAC.md).
 *
 * Without K-FAC items in the schedule, the cycle rule of engine/optim/kfac.h runs serially, per
 * stage, at fixed points of the step: the factors of a collecting step come through the stages'
 * output-gradient taps during the backwards (A and B together, so recomputation and split
 * backwards see the right inputs); at the first optimizer step of the rank the factors of stages
 * with several holders are summed over the stage's group, then inverted (step 0: activated at
 * once), every stage is preconditioned and the KL sum is added over all ranks; each OPT_STEP
 * then updates its stage.
 *
 * A PipeFisher schedule (a K-step cycle whose K-FAC items the pass spread over the bubbles) runs
 * its items where they sit, following the contract of docs/KFAC.md: in the first cycle the
 * factor, all-reduce and inversion items are skipped (step 0's serial refresh, at the rank's
 * first KFAC_PRECOND, did that work); from the second cycle on the collecting step keeps the
 * inputs and output gradients of its micro-batches (clp_kfac_opt_defer) and the items
 * accumulate them, micro-batch by micro-batch in list order, all-reduce them (KFAC_SYNC) and
 * invert them factor by factor into the next inverse set. */
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

/* A schedule with K-FAC items: their cycle is the refresh interval. */
static clp_status pf_setup(clp_exec *e, const clp_kfac_opts *o)
{
	int any = 0;

	for (int r = 0; r < e->s->nranks && !any; r++)
		for (int i = 0; i < e->s->ranks[r].nops && !any; i++)
			any = e->s->ranks[r].ops[i].kind >= CLP_OP_KFAC_CURV_A &&
			      e->s->ranks[r].ops[i].kind <= CLP_OP_KFAC_PRECOND;
	if (!any)
		return CLP_OK;
	if (o->interval != e->s->nsteps)
		return clp_error(CLP_ERR_INVALID, "kfac.interval = %d, but the PipeFisher schedule's "
				 "cycle has K = %d steps (they must agree)", o->interval,
				 e->s->nsteps);
	e->kfac_pf = 1;
	e->kfac_bwd = calloc((size_t)e->nls * (size_t)e->s->nmb + 1, 1);
	e->kfac_pre = calloc((size_t)e->nls + 1, 1);
	if (!e->kfac_bwd || !e->kfac_pre)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	return CLP_OK;
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
	CLP_TRY(pf_setup(e, o));
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
	free(e->kfac_bwd);
	free(e->kfac_pre);
	free(e->kfac_pend);
	e->kfac = NULL;
	e->kfac_group = NULL;
	e->kfac_bwd = e->kfac_pre = NULL;
	e->kfac_pend = NULL;
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
	if (!e->kfac_pf)
		return CLP_OK;
	e->kfac_cycle0 = (long)d->step < e->s->nsteps;
	e->kfac_refreshed = e->kfac_inverted = 0;
	memset(e->kfac_pre, 0, (size_t)e->nls);
	if (e->kfac_collect) {
		memset(e->kfac_bwd, 0, (size_t)e->nls * (size_t)e->s->nmb);
		e->kfac_npend = 0;
	}
	/* the first cycle collects through the taps (serial refresh); later ones keep the data
	 * for the items wherever they sit */
	for (int i = 0; i < e->nls; i++)
		clp_kfac_opt_defer(e->kfac[i], e->kfac_collect && !e->kfac_cycle0);
	return CLP_OK;
}

/* Factors summed over a stage's holders (host staging, as the gradient all-reduce): factors
 * f0 .. f1 - 1 of the given layers of local stage i, in one message. */
static clp_status sync_factors(clp_exec *e, int i, int g, int l0, int l1, const char *label)
{
	clp_kfac_opt *k = e->kfac[i];
	int nf = clp_kfac_opt_nfactors(k);
	clp_comm *c = e->s->groups[g].n == clp_comm_size(e->comm) ? e->comm : e->gcomm[g];
	size_t total = 0, off = 0;
	float *h;
	clp_status s = CLP_OK;

	if (!c)
		return clp_error(CLP_ERR_STATE, "rank %d: K-FAC factors of group %d, which it is not "
				 "in", e->rank, g);
	for (int l = l0; l < l1; l++)
		for (int f = 0; f < nf; f++)
			total += clp_kfac_opt_factor_dim(k, f) * clp_kfac_opt_factor_dim(k, f);
	if (!(h = malloc((total ? total : 1) * sizeof(float))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC factors");
	for (int l = l0; s == CLP_OK && l < l1; l++)
		for (int f = 0; s == CLP_OK && f < nf; f++) {
			clp_buf b = clp_kfac_opt_factor(k, l, f);
			size_t n = clp_kfac_opt_factor_dim(k, f) * clp_kfac_opt_factor_dim(k, f);

			s = clp_cl_read(e->ctx, b.mem, b.off * 4, n * 4, h + off);
			off += n;
		}
	if (s == CLP_OK)
		s = clp_comm_allreduce_sum(c, CLP_COMM_F32, h, total, e->det, label);
	off = 0;
	for (int l = l0; s == CLP_OK && l < l1; l++)
		for (int f = 0; s == CLP_OK && f < nf; f++) {
			clp_buf b = clp_kfac_opt_factor(k, l, f);
			size_t n = clp_kfac_opt_factor_dim(k, f) * clp_kfac_opt_factor_dim(k, f);

			s = clp_cl_write(e->ctx, b.mem, b.off * 4, n * 4, h + off);
			off += n;
		}
	free(h);
	return s;
}

static int multi_holder(const clp_exec *e, int i)
{
	return e->kfac_group[i] >= 0 && e->s->groups[e->kfac_group[i]].n > 1;
}

/* The local stages in global stage order (every holder of a stage all-reduces in this order). */
static void stage_order(const clp_exec *e, int *ord)
{
	for (int i = 0; i < e->nls; i++)
		ord[i] = i;
	for (int i = 1; i < e->nls; i++)
		for (int j = i; j > 0 && e->ls[ord[j]].stage < e->ls[ord[j - 1]].stage; j--) {
			int t = ord[j];

			ord[j] = ord[j - 1];
			ord[j - 1] = t;
		}
}

/* The collecting step's factors of every local stage summed over its holders, inverted; at
 * step 0 activated at once (the serial refresh). */
static clp_status refresh(clp_exec *e)
{
	int *ord = malloc(((size_t)e->nls + 1) * sizeof(int));
	clp_status s = CLP_OK;

	if (!ord)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	stage_order(e, ord);
	s = e->nls ? exec_drain(e) : CLP_OK;
	for (int o = 0; s == CLP_OK && o < e->nls; o++) {
		int i = ord[o], first = clp_stage_first_layer(e->ls[i].st);

		if (multi_holder(e, i))
			s = sync_factors(e, i, e->kfac_group[i], first,
					 first + clp_stage_nlayers(e->ls[i].st), "K-FAC factors");
	}
	for (int i = 0; s == CLP_OK && i < e->nls; i++) {
		s = clp_kfac_opt_invert(e->kfac[i], -1, -1);
		if (s == CLP_OK && e->kfac_step == 0)
			s = clp_kfac_opt_activate(e->kfac[i]);
	}
	free(ord);
	e->kfac_inverted = 1;
	return s;
}

/* KL clipping is global: each stage's p . g (its owner's) added over all ranks. */
static clp_status kl_sum(clp_exec *e)
{
	double vg = 0;
	float v;

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
	return CLP_OK;
}

/* Local stage i preconditioned (once a step); step 0 first does the serial refresh. */
static clp_status precondition(clp_exec *e, int i)
{
	if (e->kfac_step == 0 && !e->kfac_refreshed) {
		e->kfac_refreshed = 1;
		CLP_TRY(refresh(e));
	}
	if (e->kfac_pre[i])
		return CLP_OK;
	e->kfac_pre[i] = 1;
	return clp_kfac_opt_precondition(e->kfac[i]);
}

/* Once per step, at the rank's first optimizer step: without K-FAC items the factors,
 * inverses and preconditioning of every local stage; with them, the preconditioning of stages
 * whose KFAC_PRECOND comes later in the list (the KL sum needs every stage); then the KL sum. */
static clp_status prepare(clp_exec *e)
{
	if (e->kfac_pf) {
		for (int i = 0; i < e->nls; i++)
			CLP_TRY(precondition(e, i));
	} else {
		if (e->kfac_collect)
			CLP_TRY(refresh(e));
		for (int i = 0; i < e->nls; i++)
			CLP_TRY(clp_kfac_opt_precondition(e->kfac[i]));
	}
	CLP_TRY(kl_sum(e));
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

/* Factor A items waiting for their backward (recomputation keeps the inputs there): run from
 * the front while their backward is done, keeping the list's order. */
static clp_status flush_pending(clp_exec *e)
{
	int n = 0;

	while (n < e->kfac_npend) {
		const int *q = &e->kfac_pend[3 * n];

		if (!e->kfac_bwd[(size_t)q[0] * (size_t)e->s->nmb + (size_t)q[2]])
			break;
		CLP_TRY(clp_kfac_opt_curv_a_kept(e->kfac[q[0]], q[1], q[2]));
		n++;
	}
	if (n && n < e->kfac_npend)
		memmove(e->kfac_pend, e->kfac_pend + 3 * n,
			3 * (size_t)(e->kfac_npend - n) * sizeof(int));
	e->kfac_npend -= n;
	return CLP_OK;
}

static clp_status pend_a(clp_exec *e, int i, int li, int mb)
{
	if (e->kfac_npend == e->kfac_cpend) {
		int c = e->kfac_cpend ? 2 * e->kfac_cpend : 64;
		int *q = realloc(e->kfac_pend, 3 * (size_t)c * sizeof(int));

		if (!q)
			return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
		e->kfac_pend = q;
		e->kfac_cpend = c;
	}
	e->kfac_pend[3 * e->kfac_npend] = i;
	e->kfac_pend[3 * e->kfac_npend + 1] = li;
	e->kfac_pend[3 * e->kfac_npend + 2] = mb;
	e->kfac_npend++;
	return flush_pending(e);
}

clp_status exec_kfac_after_bwd(clp_exec *e, const clp_op *op)
{
	struct lstage *l;

	if (!e->kfac_pf || e->kfac_cycle0 || !e->kfac_collect)
		return CLP_OK;
	l = exec_find(e, op->stage, op->pipe);
	if (!l || op->mb < 0 || op->mb >= e->s->nmb)
		return CLP_OK;
	e->kfac_bwd[(size_t)(l - e->ls) * (size_t)e->s->nmb + (size_t)op->mb] = 1;
	return flush_pending(e);
}

/* The local stage of a K-FAC item, its index and the item's layer within the stage. */
static clp_status item_stage(clp_exec *e, const clp_op *op, int any_pipe, int *i, int *li)
{
	char what[160];
	struct lstage *l = exec_find(e, op->stage, op->pipe);

	for (int k = 0; !l && any_pipe && k < e->nls; k++)
		if (e->ls[k].stage == op->stage)
			l = &e->ls[k];
	clp_op_describe(op, what, sizeof(what));
	if (!l)
		return clp_error(CLP_ERR_STATE, "rank %d: %s: the rank does not hold the stage",
				 e->rank, what);
	if (!e->kfac)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: the schedule has K-FAC items; train "
				 "it with optim.name = \"kfac\"", e->rank, what);
	*i = (int)(l - e->ls);
	*li = op->layer - clp_stage_first_layer(l->st);
	if (op->kind != CLP_OP_KFAC_PRECOND &&
	    (*li < 0 || *li >= clp_stage_nlayers(l->st)))
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: layer %d is not on the stage "
				 "(layers %d..%d)", e->rank, what, op->layer,
				 clp_stage_first_layer(l->st),
				 clp_stage_first_layer(l->st) + clp_stage_nlayers(l->st) - 1);
	if ((op->kind == CLP_OP_KFAC_CURV_A || op->kind == CLP_OP_KFAC_CURV_B) &&
	    (op->mb < 0 || op->mb >= e->s->nmb))
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: micro-batch out of range", e->rank,
				 what);
	if (op->kind == CLP_OP_KFAC_INV && op->factor > clp_kfac_opt_nfactors(e->kfac[*i]))
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: factor %d, but the layers have %d "
				 "factors", e->rank, what, op->factor - 1,
				 clp_kfac_opt_nfactors(e->kfac[*i]));
	return CLP_OK;
}

clp_status exec_kfac_item(clp_exec *e, const clp_op *op)
{
	int i = 0, li = 0, done;
	clp_kfac_opt *k;

	/* items made from a stage's all-reduce or optimizer step name it without its pipeline */
	CLP_TRY(item_stage(e, op, op->kind != CLP_OP_KFAC_CURV_A && op->kind != CLP_OP_KFAC_CURV_B,
			   &i, &li));
	k = e->kfac[i];
	done = e->kfac_bwd[(size_t)i * (size_t)e->s->nmb + (size_t)(op->mb > 0 ? op->mb : 0)];
	switch (op->kind) {
	case CLP_OP_KFAC_CURV_A: /* before the backward from the slot, else from the kept copy */
		if (e->kfac_npend || (!done && e->recompute))
			return pend_a(e, i, li, op->mb);
		if (!done) {
			int slot = exec_slot(&e->ls[i], op->mb);

			if (slot < 0)
				return clp_error(CLP_ERR_STATE, "rank %d: KFAC_CURV_A of layer %d mb %d "
						 "before the forward of its micro-batch", e->rank,
						 op->layer, op->mb);
			return clp_kfac_opt_curv_a(k, li, slot, op->mb);
		}
		return clp_kfac_opt_curv_a_kept(k, li, op->mb);
	case CLP_OP_KFAC_CURV_B:
		if (!done)
			return clp_error(CLP_ERR_STATE, "rank %d: KFAC_CURV_B of layer %d mb %d before "
					 "the backward of its micro-batch", e->rank, op->layer, op->mb);
		return clp_kfac_opt_curv_b_kept(k, li, op->mb);
	case CLP_OP_KFAC_SYNC:
		if (op->group < 0 || op->group >= e->s->ngroups)
			return clp_error(CLP_ERR_INVALID, "rank %d: KFAC_SYNC of layer %d: group %d of "
					 "%d", e->rank, op->layer, op->group, e->s->ngroups);
		if (e->s->groups[op->group].n < 2)
			return CLP_OK;
		return sync_factors(e, i, op->group, op->layer, op->layer + 1, "K-FAC factors");
	case CLP_OP_KFAC_INV:
		e->kfac_inverted = 1;
		return clp_kfac_opt_invert(k, op->layer, op->factor - 1);
	case CLP_OP_KFAC_PRECOND:
		return precondition(e, i);
	}
	return clp_error(CLP_ERR_STATE, "rank %d: op %s is not a K-FAC item", e->rank,
			 clp_op_kind_name(op->kind));
}

clp_status exec_kfac_step_end(clp_exec *e)
{
	if (e->kfac_pf && e->kfac_npend)
		return clp_error(CLP_ERR_STATE, "rank %d, step %ld: %d factor A items wait for a "
				 "backward that did not run", e->rank, e->kfac_step + 1, e->kfac_npend);
	for (int i = 0; i < e->nls; i++)
		if (e->kfac_pf ? e->kfac_inverted : e->kfac_collect)
			CLP_TRY(clp_kfac_opt_check(e->kfac[i]));
	return CLP_OK;
}
