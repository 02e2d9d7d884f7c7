/* Placing the early part of the optimizer's step (sched.h, clp_sched_place_prep): an OPT_PREP
 * of a stage goes where its gradients are final, so that a rank whose backwards end before the
 * others' (the last stages of a pipeline, in the cool-down) runs it in the bubble instead of
 * after the norm. docs/OPTIMIZERS.md, "Where Muon's work runs". */
#include "engine/sched/sched.h"

#include <stdlib.h>

/* 1 when o (on a rank holding `stage`) writes the gradients of the stage's layers: a backward
 * of it, its K-FAC preconditioning, its all-reduce (the tied embedding's all-reduce writes the
 * embedding's and the head's only, which an OPT_PREP does not read). */
static int writes_grads(const clp_op *o, int stage)
{
	switch (o->kind) {
	case CLP_OP_BWD:
	case CLP_OP_BWD_B:
	case CLP_OP_BWD_W:
	case CLP_OP_KFAC_PRECOND:
	case CLP_OP_KFAC_PREC_SYNC:
		return o->stage == stage;
	case CLP_OP_ALLREDUCE:
		return o->what == CLP_RED_GRADS && o->stage == stage;
	default:
		return 0;
	}
}

/* Where the OPT_PREP of the OPT_STEP at index i of p goes (before the op at the index
 * returned), or -1 when the stage has no backward in the step. */
static int prep_point(const clp_sched *s, const clp_rank_prog *p, int i)
{
	const clp_op *opt = &p->ops[i];
	int last = -1, grads = -1;

	for (int j = 0; j < i; j++) {
		const clp_op *o = &p->ops[j];

		if (o->step != opt->step)
			continue;
		if (writes_grads(o, opt->stage))
			grads = j;
		if (clp_op_is_send(o->kind))
			last = j;
	}
	if (grads < 0)
		return -1;
	if (grads > last)
		last = grads;
	/* the transfers posted with the last one: an exchange is posted before any wait */
	while (last + 1 < i && clp_op_is_p2p(p->ops[last + 1].kind) &&
	       p->ops[last + 1].step == opt->step)
		last++;
	return last + 1;
}

static clp_status place_rank(clp_sched *s, clp_rank_prog *p, int *added)
{
	int *at, n = 0, nops = p->nops;
	clp_op *ops;

	for (int i = 0; i < nops; i++)
		if (p->ops[i].kind == CLP_OP_OPT_PREP)
			return CLP_OK;
	at = malloc(((size_t)nops + 1) * sizeof(*at));
	if (!at)
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	for (int i = 0; i < nops; i++) {
		at[i] = -1;
		if (p->ops[i].kind == CLP_OP_OPT_STEP && (at[i] = prep_point(s, p, i)) >= 0)
			n++;
	}
	if (!n) {
		free(at);
		return CLP_OK;
	}
	ops = malloc(((size_t)nops + (size_t)n) * sizeof(*ops));
	if (!ops) {
		free(at);
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	}
	/* before op j: the preps placed there, in the order of their OPT_STEPs */
	n = 0;
	for (int j = 0; j <= nops; j++) {
		for (int i = 0; i < nops; i++)
			if (at[i] == j) {
				clp_op q = clp_op_make(CLP_OP_OPT_PREP, p->ops[i].stage, p->ops[i].pipe,
						       p->ops[i].chunk, -1);

				q.step = p->ops[i].step;
				ops[n++] = q;
			}
		if (j < nops)
			ops[n++] = p->ops[j];
	}
	free(at);
	free(p->ops);
	if (added)
		*added += n - nops;
	p->ops = ops;
	p->nops = p->cap = n;
	return CLP_OK;
}

clp_status clp_sched_place_prep(clp_sched *s, int *added)
{
	if (added)
		*added = 0;
	for (int r = 0; r < s->nranks; r++)
		if (s->ranks[r].mode == CLP_RANK_ORDERED)
			CLP_TRY(place_rank(s, &s->ranks[r], added));
	return CLP_OK;
}
