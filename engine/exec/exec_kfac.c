/* K-FAC in the executor (optim.name = "kfac"; docs/KFAC.md), an optimizer of the executor's
 * interface (exec_optim.h) written on its services alone (exec_env.h): local stages, the
 * schedule's groups and sums over them, the step's counts.
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

#include "cl/ops.h"
#include "engine/exec/exec_env.h"
#include "engine/exec/exec_kfac.h"

/* The K-FAC optimizer's state in an executor. */
typedef struct kst {
	const clp_sched *s; /* the executor's schedule, and this rank */
	int rank;
	clp_cl_ctx *ctx;
	clp_exec_counts c;  /* the step's counts (not the loss scale, which K-FAC does not read) */
	int n;              /* local stages (clp_exec_stage), and per local stage: */
	clp_stage **st;
	int *stage;         /* its IR stage */
	int *owner;         /* this rank saves it */
	clp_kfac_opt **opt; /* its optimizer */
	int *group;         /* its factor group (-1: a single holder) */
	float lr_ratio;
	int collect, prepared;
	long step;
	/* PipeFisher (the schedule has K-FAC items) */
	int pf;           /* run the schedule's K-FAC items */
	int cycle0;       /* this step is in the first cycle: items skipped */
	int refreshed;    /* step 0's serial refresh is done */
	int inverted;     /* an inversion ran this step (checked at its end) */
	uint8_t *bwd;     /* [nls * nmb]: the collecting step's backward of mb ran */
	uint8_t *pre;     /* [nls]: preconditioned this step */
	int *pend;        /* recomputation: factor A items waiting for their backward,
			   * (local stage, stage layer, mb) triples in list order */
	int npend, cpend;
} kst;

extern const clp_exec_optim exec_kfac_optim;

/* The group of the stage's gradient all-reduce on this rank (-1: a single holder). */
static int stage_group(const kst *k, int stage)
{
	const clp_rank_prog *p = &k->s->ranks[k->rank];

	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].kind == CLP_OP_ALLREDUCE && p->ops[i].what == CLP_RED_GRADS &&
		    p->ops[i].stage == stage)
			return p->ops[i].group;
	return -1;
}

/* A schedule with K-FAC items: their cycle is the refresh interval. */
static clp_status pf_setup(kst *k, const clp_kfac_opts *o)
{
	const clp_sched *s = k->s;
	int any = 0;

	for (int r = 0; r < s->nranks && !any; r++)
		for (int i = 0; i < s->ranks[r].nops && !any; i++)
			any = clp_op_is_kfac(s->ranks[r].ops[i].kind);
	if (!any)
		return CLP_OK;
	if (o->interval != s->nsteps)
		return clp_error(CLP_ERR_INVALID, "kfac.interval = %d, but the PipeFisher schedule's "
				 "cycle has K = %d steps (they must agree)", o->interval,
				 s->nsteps);
	k->pf = 1;
	k->bwd = calloc((size_t)k->n * (size_t)s->nmb + 1, 1);
	k->pre = calloc((size_t)k->n + 1, 1);
	if (!k->bwd || !k->pre)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	return CLP_OK;
}

static void kfac_free(clp_exec *e, void *state)
{
	kst *k = state;

	(void)e;
	if (!k)
		return;
	for (int i = 0; k->opt && i < k->n; i++)
		clp_kfac_opt_free(k->opt[i]);
	free(k->st);
	free(k->stage);
	free(k->owner);
	free(k->opt);
	free(k->group);
	free(k->bwd);
	free(k->pre);
	free(k->pend);
	free(k);
}

static clp_status kfac_create(clp_exec *e, const clp_kfac_opts *o, float lr_ratio, kst *k)
{
	size_t n1;

	k->s = clp_exec_sched(e);
	k->rank = clp_exec_rank(e);
	k->ctx = clp_exec_ctx(e);
	clp_exec_step_counts(e, &k->c);
	k->n = clp_exec_nstages(e);
	n1 = (size_t)k->n + 1;
	k->st = calloc(n1, sizeof(*k->st));
	k->stage = calloc(n1, sizeof(int));
	k->owner = calloc(n1, sizeof(int));
	k->opt = calloc(n1, sizeof(*k->opt));
	k->group = calloc(n1, sizeof(int));
	if (!k->st || !k->stage || !k->owner || !k->opt || !k->group)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	k->lr_ratio = lr_ratio;
	CLP_TRY(pf_setup(k, o));
	for (int i = 0; i < k->n; i++) {
		k->st[i] = clp_exec_stage(e, i, &k->owner[i]);
		k->stage[i] = clp_exec_stage_id(e, i);
		CLP_TRY(clp_kfac_opt_create(&k->opt[i], k->st[i], o));
		/* with several holders only one carries the moving average's old value */
		clp_kfac_opt_set_ema_owner(k->opt[i], k->owner[i]);
		k->group[i] = stage_group(k, k->stage[i]);
	}
	return CLP_OK;
}

clp_status clp_exec_kfac(clp_exec *e, const clp_kfac_opts *o, float lr_ratio)
{
	kst *k;
	clp_status st;

	if (clp_exec_optim_ops(e) == &exec_kfac_optim)
		return clp_error(CLP_ERR_STATE, "the executor already runs K-FAC");
	if (!(k = calloc(1, sizeof(*k))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	st = kfac_create(e, o, lr_ratio, k);
	if (st != CLP_OK) {
		kfac_free(e, k);
		return st;
	}
	return clp_exec_set_optim(e, &exec_kfac_optim, k);
}

clp_kfac_opt *clp_exec_kfac_opt(const clp_exec *e, int i)
{
	kst *k = clp_exec_optim_ops(e) == &exec_kfac_optim ? clp_exec_optim_state(e) : NULL;

	return k && i >= 0 && i < k->n ? k->opt[i] : NULL;
}

static clp_status kfac_step_begin(clp_exec *e, void *state, const clp_exec_data *d)
{
	kst *k = state;
	/* the loss's divisor: 1 / inv_count is within 2^-24 of the integer count */
	double count = d->inv_count > 0 ? (double)llround(1.0 / (double)d->inv_count) : 0;
	double rows = (double)k->c.rows * k->c.nmb * k->c.nreplicas;

	(void)e;
	k->prepared = 0;
	for (int i = 0; i < k->n; i++)
		CLP_TRY(clp_kfac_opt_step_begin(k->opt[i], (long)d->step, count, rows,
						&k->collect));
	k->step = (long)d->step;
	if (!k->pf)
		return CLP_OK;
	k->cycle0 = (long)d->step < k->c.nsteps;
	k->refreshed = k->inverted = 0;
	memset(k->pre, 0, (size_t)k->n);
	if (k->collect) {
		memset(k->bwd, 0, (size_t)k->n * (size_t)k->c.nmb);
		k->npend = 0;
	}
	/* the first cycle collects through the taps (serial refresh); later ones keep the data
	 * for the items wherever they sit */
	for (int i = 0; i < k->n; i++)
		clp_kfac_opt_defer(k->opt[i], k->collect && !k->cycle0);
	return CLP_OK;
}

/* Factor f of layer l (inv 0), or its next inverse (inv 1). */
static clp_buf sync_buf(const clp_kfac_opt *ko, int inv, int l, int f)
{
	return inv ? clp_kfac_opt_inverse(ko, l, f, 1) : clp_kfac_opt_factor(ko, l, f);
}

/* Factors (or next inverses) summed over a stage's holders (host staging, as the gradient
 * all-reduce): every factor of layers l0 .. l1 - 1 of local stage i, in one message. */
static clp_status sync_bufs(clp_exec *e, kst *k, int i, int g, int l0, int l1, int inv,
			    const char *label)
{
	clp_kfac_opt *ko = k->opt[i];
	int nf = clp_kfac_opt_nfactors(ko), nb = 0;
	size_t cap = (size_t)(l1 > l0 ? l1 - l0 : 0) * (size_t)nf + 1;
	clp_buf *b = malloc(cap * sizeof(*b));
	size_t *n = malloc(cap * sizeof(*n));
	clp_status s;

	if (!b || !n) {
		free(b);
		free(n);
		return clp_error(CLP_ERR_NOMEM, "out of host memory for %s", label);
	}
	for (int l = l0; l < l1; l++)
		for (int f = 0; f < nf; f++, nb++) {
			b[nb] = sync_buf(ko, inv, l, f);
			n[nb] = clp_kfac_opt_factor_dim(ko, f) * clp_kfac_opt_factor_dim(ko, f);
		}
	s = clp_exec_sum_bufs(e, g, b, n, nb, 1.0f, label);
	free(b);
	free(n);
	return s;
}

static clp_status sync_factors(clp_exec *e, kst *k, int i, int g, int l0, int l1, const char *label)
{
	return sync_bufs(e, k, i, g, l0, l1, 0, label);
}

/* KFAC_INV_SYNC (a split cycle, docs/KFAC.md): the layer's owner (the rank whose list inverts
 * it) contributes its next inverses, the others zeros, so every holder ends with the owner's
 * bitwise. The damping statistics need not travel: preconditioning reads only the inverses
 * (a flagged factor's inverse is the identity). */
static clp_status sync_inverses(clp_exec *e, kst *k, int i, const clp_op *op)
{
	const clp_rank_prog *p = &k->s->ranks[k->rank];
	clp_kfac_opt *ko = k->opt[i];
	int owner = 0;

	if (op->group < 0 || op->group >= k->s->ngroups)
		return clp_error(CLP_ERR_INVALID, "rank %d: KFAC_INV_SYNC of layer %d: group %d of %d",
				 k->rank, op->layer, op->group, k->s->ngroups);
	if (k->s->groups[op->group].n < 2)
		return CLP_OK;
	for (int j = 0; j < p->nops && !owner; j++)
		owner = p->ops[j].kind == CLP_OP_KFAC_INV && p->ops[j].layer == op->layer;
	for (int f = 0; !owner && f < clp_kfac_opt_nfactors(ko); f++) {
		size_t d = clp_kfac_opt_factor_dim(ko, f);

		CLP_TRY(clp_cl_fill(k->ctx, sync_buf(ko, 1, op->layer, f), 0.0f, d * d));
	}
	return sync_bufs(e, k, i, op->group, op->layer, op->layer + 1, 1, "K-FAC inverses");
}

static int multi_holder(const kst *k, int i)
{
	return k->group[i] >= 0 && k->s->groups[k->group[i]].n > 1;
}

/* The local stages in global stage order (every holder of a stage all-reduces in this order). */
static void stage_order(const kst *k, int *ord)
{
	for (int i = 0; i < k->n; i++)
		ord[i] = i;
	for (int i = 1; i < k->n; i++)
		for (int j = i; j > 0 && k->stage[ord[j]] < k->stage[ord[j - 1]]; j--) {
			int t = ord[j];

			ord[j] = ord[j - 1];
			ord[j - 1] = t;
		}
}

/* The collecting step's factors of every local stage summed over its holders, inverted; at
 * step 0 activated at once (the serial refresh). */
static clp_status refresh(clp_exec *e, kst *k)
{
	int *ord = malloc(((size_t)k->n + 1) * sizeof(int));
	clp_status s = CLP_OK;

	if (!ord)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	stage_order(k, ord);
	s = k->n ? clp_exec_drain(e) : CLP_OK;
	for (int o = 0; s == CLP_OK && o < k->n; o++) {
		int i = ord[o], first = clp_stage_first_layer(k->st[i]);

		if (multi_holder(k, i))
			s = sync_factors(e, k, i, k->group[i], first,
					 first + clp_stage_nlayers(k->st[i]), "K-FAC factors");
	}
	for (int i = 0; s == CLP_OK && i < k->n; i++) {
		s = clp_kfac_opt_invert(k->opt[i], -1, -1);
		if (s == CLP_OK && k->step == 0)
			s = clp_kfac_opt_activate(k->opt[i]);
	}
	free(ord);
	k->inverted = 1;
	return s;
}

/* KL clipping is global: each stage's p . g (its owner's) added over all ranks. */
static clp_status kl_sum(clp_exec *e, kst *k)
{
	double vg = 0;
	float v;

	for (int i = 0; i < k->n; i++) {
		clp_buf b = clp_kfac_opt_kl_sum(k->opt[i]);

		CLP_TRY(clp_cl_read(k->ctx, b.mem, b.off * 4, sizeof(float), &v));
		vg += k->owner[i] ? v : 0;
	}
	CLP_TRY(clp_exec_group_sum(e, -1, CLP_COMM_F64, &vg, 1, "K-FAC KL sum"));
	v = (float)vg;
	for (int i = 0; i < k->n; i++) {
		clp_buf b = clp_kfac_opt_kl_sum(k->opt[i]);

		CLP_TRY(clp_cl_write(k->ctx, b.mem, b.off * 4, sizeof(float), &v));
	}
	return CLP_OK;
}

/* Local stage i preconditioned (once a step); step 0 first does the serial refresh. */
static clp_status precondition(clp_exec *e, kst *k, int i)
{
	if (k->step == 0 && !k->refreshed) {
		k->refreshed = 1;
		CLP_TRY(refresh(e, k));
	}
	if (k->pre[i])
		return CLP_OK;
	k->pre[i] = 1;
	return clp_kfac_opt_precondition(k->opt[i]);
}

/* Whether this rank preconditions local stage i layer by layer (a split cycle); mine[] (may be
 * NULL) gets the layers it owns. */
static int split_layers(const kst *k, int i, uint8_t *mine)
{
	const clp_rank_prog *p = &k->s->ranks[k->rank];
	int f = clp_stage_first_layer(k->st[i]), n = clp_stage_nlayers(k->st[i]), any = 0;

	for (int j = 0; j < p->nops; j++) {
		const clp_op *o = &p->ops[j];

		if (o->kind != CLP_OP_KFAC_PRECOND || o->stage != k->stage[i] || o->layer < f ||
		    o->layer >= f + n)
			continue;
		any = 1;
		if (mine)
			mine[o->layer - f] = 1;
	}
	return any;
}

/* KFAC_PRECOND(stage, layer) of a split cycle: the first of the step preconditions every layer
 * the rank owns and zeroes the others' gradients (the exchange, KFAC_PREC_SYNC, follows). */
static clp_status precondition_split(clp_exec *e, kst *k, int i)
{
	uint8_t *mine;
	clp_status st;

	if (k->step == 0 && !k->refreshed) {
		k->refreshed = 1;
		CLP_TRY(refresh(e, k));
	}
	if (k->pre[i])
		return CLP_OK;
	k->pre[i] = 1;
	mine = calloc((size_t)clp_stage_nlayers(k->st[i]) + 1, 1);
	if (!mine)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
	split_layers(k, i, mine);
	st = clp_kfac_opt_precondition_mine(k->opt[i], mine);
	free(mine);
	return st;
}

/* KFAC_PREC_SYNC: the preconditioned gradients of the stage's K-FAC layers (each from its
 * owner, zeros from the others) and then the KL sum's parts, summed over the group. */
static clp_status sync_grads(clp_exec *e, kst *k, int i, const clp_op *op)
{
	clp_kfac_opt *ko = k->opt[i];
	int f = clp_stage_first_layer(k->st[i]), nl = clp_stage_nlayers(k->st[i]), g = op->group;
	int nb = 0;
	clp_buf *b;
	size_t *n, cap = 8 * (size_t)(nl > 0 ? nl : 0) + 1;
	clp_status s;

	if (g < 0 || g >= k->s->ngroups)
		return clp_error(CLP_ERR_INVALID, "rank %d: KFAC_PREC_SYNC of stage %d: group %d of %d",
				 k->rank, op->stage, g, k->s->ngroups);
	if (!k->pre[i])
		return clp_error(CLP_ERR_STATE, "rank %d: KFAC_PREC_SYNC of stage %d before its "
				 "preconditioning", k->rank, op->stage);
	if (k->s->groups[g].n < 2)
		return CLP_OK;
	b = malloc(cap * sizeof(*b));
	n = malloc(cap * sizeof(*n));
	if (!b || !n) {
		free(b);
		free(n);
		return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC gradients");
	}
	for (int l = f; l < f + nl; l++)
		nb += clp_kfac_opt_layer_grads(ko, l, b + nb, n + nb, 8);
	b[nb] = clp_kfac_opt_kl_sum(ko);
	n[nb++] = 1;
	s = clp_exec_sum_bufs(e, g, b, n, nb, 1.0f, "K-FAC preconditioned gradients");
	free(b);
	free(n);
	return s;
}

/* Once per step, at the rank's first optimizer step: without K-FAC items the factors,
 * inverses and preconditioning of every local stage; with them, the preconditioning of stages
 * whose KFAC_PRECOND comes later in the list (the KL sum needs every stage); then the KL sum. */
static clp_status prepare(clp_exec *e, kst *k)
{
	if (k->pf) {
		for (int i = 0; i < k->n; i++) {
			if (!k->pre[i] && split_layers(k, i, NULL))
				return clp_error(CLP_ERR_INVALID, "rank %d: the split preconditioning "
						 "of stage %d comes after the rank's first OPT_STEP",
						 k->rank, k->stage[i]);
			CLP_TRY(precondition(e, k, i));
		}
	} else {
		if (k->collect)
			CLP_TRY(refresh(e, k));
		for (int i = 0; i < k->n; i++)
			CLP_TRY(clp_kfac_opt_precondition(k->opt[i]));
	}
	CLP_TRY(kl_sum(e, k));
	k->prepared = 1;
	return CLP_OK;
}

static clp_status kfac_stage_step(clp_exec *e, void *state, int stage, const void *settings)
{
	kst *k = state;
	const clp_nn_adamw_hp *hp = settings;

	if (!k->prepared)
		CLP_TRY(prepare(e, k));
	for (int i = 0; i < k->n; i++)
		if (k->stage[i] == stage)
			CLP_TRY(clp_kfac_opt_update(k->opt[i], hp, hp->lr * k->lr_ratio,
						    clp_stage_stats(k->st[i])));
	return CLP_OK;
}

/* Factor A items waiting for their backward (recomputation keeps the inputs there): run from
 * the front while their backward is done, keeping the list's order. */
static clp_status flush_pending(kst *k)
{
	int n = 0;

	while (n < k->npend) {
		const int *q = &k->pend[3 * n];

		if (!k->bwd[(size_t)q[0] * (size_t)k->c.nmb + (size_t)q[2]])
			break;
		CLP_TRY(clp_kfac_opt_curv_a_kept(k->opt[q[0]], q[1], q[2]));
		n++;
	}
	if (n && n < k->npend)
		memmove(k->pend, k->pend + 3 * n,
			3 * (size_t)(k->npend - n) * sizeof(int));
	k->npend -= n;
	return CLP_OK;
}

static clp_status pend_a(kst *k, int i, int li, int mb)
{
	if (k->npend == k->cpend) {
		int c = k->cpend ? 2 * k->cpend : 64;
		int *q = realloc(k->pend, 3 * (size_t)c * sizeof(int));

		if (!q)
			return clp_error(CLP_ERR_NOMEM, "out of host memory for K-FAC");
		k->pend = q;
		k->cpend = c;
	}
	k->pend[3 * k->npend] = i;
	k->pend[3 * k->npend + 1] = li;
	k->pend[3 * k->npend + 2] = mb;
	k->npend++;
	return flush_pending(k);
}

static clp_status kfac_after_bwd(clp_exec *e, void *state, const clp_op *op)
{
	kst *k = state;
	int i;

	if (!k->pf || k->cycle0 || !k->collect)
		return CLP_OK;
	i = clp_exec_find_stage(e, op->stage, op->pipe);
	if (i < 0 || op->mb < 0 || op->mb >= k->c.nmb)
		return CLP_OK;
	k->bwd[(size_t)i * (size_t)k->c.nmb + (size_t)op->mb] = 1;
	return flush_pending(k);
}

/* The local stage of a K-FAC item, its index and the item's layer within the stage. */
static clp_status item_stage(clp_exec *e, kst *k, const clp_op *op, int any_pipe, int *i,
			     int *li)
{
	char what[160];
	int l = clp_exec_find_stage(e, op->stage, op->pipe);
	clp_stage *st;

	if (l < 0 && any_pipe)
		l = clp_exec_find_stage(e, op->stage, -1);
	clp_op_describe(op, what, sizeof(what));
	if (l < 0)
		return clp_error(CLP_ERR_STATE, "rank %d: %s: the rank does not hold the stage",
				 k->rank, what);
	st = k->st[l];
	*i = l;
	*li = op->layer - clp_stage_first_layer(st);
	if (op->kind != CLP_OP_KFAC_PRECOND && op->kind != CLP_OP_KFAC_PREC_SYNC &&
	    (*li < 0 || *li >= clp_stage_nlayers(st)))
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: layer %d is not on the stage "
				 "(layers %d..%d)", k->rank, what, op->layer,
				 clp_stage_first_layer(st),
				 clp_stage_first_layer(st) + clp_stage_nlayers(st) - 1);
	if ((op->kind == CLP_OP_KFAC_CURV_A || op->kind == CLP_OP_KFAC_CURV_B) &&
	    (op->mb < 0 || op->mb >= k->c.nmb))
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: micro-batch out of range", k->rank,
				 what);
	if (op->kind == CLP_OP_KFAC_INV && op->factor > clp_kfac_opt_nfactors(k->opt[*i]))
		return clp_error(CLP_ERR_INVALID, "rank %d: %s: factor %d, but the layers have %d "
				 "factors", k->rank, what, op->factor - 1,
				 clp_kfac_opt_nfactors(k->opt[*i]));
	return CLP_OK;
}

static clp_status kfac_item(clp_exec *e, void *state, const clp_op *op)
{
	kst *k = state;
	int i = 0, li = 0, done;
	clp_kfac_opt *ko;

	/* items made from a stage's all-reduce or optimizer step name it without its pipeline */
	CLP_TRY(item_stage(e, k, op, op->kind != CLP_OP_KFAC_CURV_A && op->kind != CLP_OP_KFAC_CURV_B,
			   &i, &li));
	ko = k->opt[i];
	done = k->bwd[(size_t)i * (size_t)k->c.nmb + (size_t)(op->mb > 0 ? op->mb : 0)];
	switch (op->kind) {
	case CLP_OP_KFAC_CURV_A: /* before the backward from the slot, else from the kept copy */
		if (k->npend || (!done && k->c.recompute))
			return pend_a(k, i, li, op->mb);
		if (!done) {
			int slot = clp_exec_slot(e, i, op->mb);

			if (slot < 0)
				return clp_error(CLP_ERR_STATE, "rank %d: KFAC_CURV_A of layer %d mb %d "
						 "before the forward of its micro-batch", k->rank,
						 op->layer, op->mb);
			return clp_kfac_opt_curv_a(ko, li, slot, op->mb);
		}
		return clp_kfac_opt_curv_a_kept(ko, li, op->mb);
	case CLP_OP_KFAC_CURV_B:
		if (!done)
			return clp_error(CLP_ERR_STATE, "rank %d: KFAC_CURV_B of layer %d mb %d before "
					 "the backward of its micro-batch", k->rank, op->layer, op->mb);
		return clp_kfac_opt_curv_b_kept(ko, li, op->mb);
	case CLP_OP_KFAC_SYNC:
		if (op->group < 0 || op->group >= k->s->ngroups)
			return clp_error(CLP_ERR_INVALID, "rank %d: KFAC_SYNC of layer %d: group %d of "
					 "%d", k->rank, op->layer, op->group, k->s->ngroups);
		if (k->s->groups[op->group].n < 2)
			return CLP_OK;
		return sync_factors(e, k, i, op->group, op->layer, op->layer + 1, "K-FAC factors");
	case CLP_OP_KFAC_INV_SYNC:
		return sync_inverses(e, k, i, op);
	case CLP_OP_KFAC_INV:
		k->inverted = 1;
		if (op->mb >= 0) /* one phase of a split cycle's inversion */
			return clp_kfac_opt_invert_phase(ko, op->layer, op->factor - 1, op->mb);
		return clp_kfac_opt_invert(ko, op->layer, op->factor - 1);
	case CLP_OP_KFAC_PRECOND:
		return op->layer >= 0 ? precondition_split(e, k, i) : precondition(e, k, i);
	case CLP_OP_KFAC_PREC_SYNC:
		return sync_grads(e, k, i, op);
	}
	return clp_error(CLP_ERR_STATE, "rank %d: op %s is not a K-FAC item", k->rank,
			 clp_op_kind_name(op->kind));
}

static clp_status kfac_step_end(clp_exec *e, void *state)
{
	kst *k = state;

	(void)e;
	if (k->pf && k->npend)
		return clp_error(CLP_ERR_STATE, "rank %d, step %ld: %d factor A items wait for a "
				 "backward that did not run", k->rank, k->step + 1, k->npend);
	for (int i = 0; i < k->n; i++)
		if (k->pf ? k->inverted : k->collect)
			CLP_TRY(clp_kfac_opt_check(k->opt[i]));
	return CLP_OK;
}

/* The first cycle's serial refresh did the work of its factor, all-reduce and inversion
 * items. */
static int kfac_skip_item(void *state, const clp_op *op)
{
	const kst *k = state;

	return k->cycle0 && ((op->kind >= CLP_OP_KFAC_CURV_A && op->kind <= CLP_OP_KFAC_INV) ||
			     op->kind == CLP_OP_KFAC_INV_SYNC);
}

/* Factors and inverses of the stages this rank saves. */
static clp_status kfac_save(clp_exec *e, void *state, clp_ckpt_writer *w)
{
	kst *k = state;

	(void)e;
	for (int i = 0; i < k->n; i++)
		if (k->owner[i])
			CLP_TRY(clp_kfac_opt_save(k->opt[i], w));
	return CLP_OK;
}

static clp_status kfac_load(clp_exec *e, void *state, clp_ckpt *c)
{
	kst *k = state;

	(void)e;
	for (int i = 0; i < k->n; i++)
		CLP_TRY(clp_kfac_opt_load(k->opt[i], c));
	return CLP_OK;
}

const clp_exec_optim exec_kfac_optim = {
	.name = "K-FAC",
	.dataflow = 0,
	.step_begin = kfac_step_begin,
	.after_bwd = kfac_after_bwd,
	.skip_item = kfac_skip_item,
	.item = kfac_item,
	.stage_step = kfac_stage_step,
	.step_end = kfac_step_end,
	.save = kfac_save,
	.load = kfac_load,
	.free = kfac_free,
};
