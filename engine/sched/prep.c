/* Placing the early part of the optimizer's step (sched.h, clp_sched_place_prep): an OPT_PREP
 * of a stage goes where its gradients are final, so that a rank whose backwards end before the
 * others' (the last stages of a pipeline, in the cool-down) runs it in the bubble instead of
 * after the norm. docs/OPTIMIZERS.md, "Where Muon's work runs". The one-step-delayed Muon's
 * OPT_PREP needs nothing of its step: clp_sched_place_prep_delayed puts it where the rank first
 * waits for another rank. */
#include "engine/sched/sched.h"

#include <stdlib.h>

#include "engine/sched/index.h"

#define PREP_NEW 0x80 /* op.flags while this pass runs: an OPT_PREP it inserted */

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

/* Insert before op at[i] of p (at[i] in 0..nops, -1: none; n of them set) an OPT_PREP of
 * OPT_STEP i's stage, pipe, chunk and step with `flags`; where several land before one op, in
 * the order of their OPT_STEPs. Frees at; adds the count to *added. */
static clp_status insert_preps(clp_rank_prog *p, int *at, int n, uint8_t flags, int *added)
{
	const int nops = p->nops;
	clp_op *ops;

	if (!n) {
		free(at);
		return CLP_OK;
	}
	ops = malloc(((size_t)nops + (size_t)n) * sizeof(*ops));
	if (!ops) {
		free(at);
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	}
	n = 0;
	for (int j = 0; j <= nops; j++) {
		for (int i = 0; i < nops; i++)
			if (at[i] == j) {
				clp_op q = clp_op_make(CLP_OP_OPT_PREP, p->ops[i].stage, p->ops[i].pipe,
						       p->ops[i].chunk, -1);

				q.step = p->ops[i].step;
				q.flags = flags;
				ops[n++] = q;
			}
		if (j < nops)
			ops[n++] = p->ops[j];
	}
	free(at);
	free(p->ops);
	*added += n - nops;
	p->ops = ops;
	p->nops = p->cap = n;
	return CLP_OK;
}

static clp_status place_rank(const clp_sched *s, clp_rank_prog *p, int *added, int *had)
{
	int *at, n = 0, nops = p->nops;

	for (int i = 0; i < nops; i++)
		if (p->ops[i].kind == CLP_OP_OPT_PREP) {
			*had = 1;
			return CLP_OK;
		}
	at = malloc(((size_t)nops + 1) * sizeof(*at));
	if (!at)
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	for (int i = 0; i < nops; i++) {
		at[i] = -1;
		if (p->ops[i].kind == CLP_OP_OPT_STEP && (at[i] = prep_point(s, p, i)) >= 0)
			n++;
	}
	return insert_preps(p, at, n, PREP_NEW, added);
}

/* The ops each rank runs before op `at` of rank r can start, as need[q] = that many of rank q's
 * first ops: its own list before it, a receive's send, every member's arrival at a collective
 * (closed over those edges). inst_off/inst_ops: the ops of each collective instance. */
static void needed(const clp_sched *s, const clp_sched_index *ix, const int64_t *inst_off,
		   const int64_t *inst_ops, int r, int at, int *need, int *done)
{
	int more = 1;

	for (int q = 0; q < s->nranks; q++)
		need[q] = done[q] = 0;
	need[r] = at;
	while (more) {
		more = 0;
		for (int q = 0; q < s->nranks; q++)
			for (; done[q] < need[q]; done[q]++) {
				int64_t g = ix->off[q] + done[q], c = ix->coll[g];

				more = 1;
				if (clp_op_is_recv(s->ranks[q].ops[done[q]].kind) && ix->match[g] >= 0) {
					int pr = clp_sched_index_rank(ix, ix->match[g]);
					int pi = (int)(ix->match[g] - ix->off[pr]) + 1;

					need[pr] = need[pr] > pi ? need[pr] : pi;
				}
				for (int64_t k = c >= 0 ? inst_off[c] : 0; c >= 0 && k < inst_off[c + 1];
				     k++) {
					int hr = clp_sched_index_rank(ix, inst_ops[k]);
					int hi = (int)(inst_ops[k] - ix->off[hr]) + 1;

					need[hr] = need[hr] > hi ? need[hr] : hi;
				}
			}
	}
}

/* Mark the OPT_PREPs that wait for no other rank's last backward of the step (CLP_OPF_BUBBLE). */
static clp_status mark_bubbles(clp_sched *s)
{
	clp_sched_index ix;
	int64_t *inst_off = NULL, *inst_ops = NULL, *fill = NULL;
	int *need = NULL, *done = NULL;
	clp_status st = clp_sched_index_build(s, &ix);

	if (st != CLP_OK)
		return st;
	inst_off = calloc((size_t)ix.ninst + 2, sizeof(*inst_off));
	fill = calloc((size_t)ix.ninst + 1, sizeof(*fill));
	inst_ops = malloc(((size_t)ix.nops + 1) * sizeof(*inst_ops));
	need = malloc(((size_t)s->nranks + 1) * sizeof(*need));
	done = malloc(((size_t)s->nranks + 1) * sizeof(*done));
	if (!inst_off || !fill || !inst_ops || !need || !done) {
		st = clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
		goto out;
	}
	for (int64_t g = 0; g < ix.nops; g++)
		if (ix.coll[g] >= 0)
			inst_off[ix.coll[g] + 1]++;
	for (int64_t c = 0; c < ix.ninst; c++)
		inst_off[c + 1] += inst_off[c];
	for (int64_t g = 0; g < ix.nops; g++)
		if (ix.coll[g] >= 0)
			inst_ops[inst_off[ix.coll[g]] + fill[ix.coll[g]]++] = g;
	for (int r = 0; r < s->nranks; r++)
		for (int i = 0; i < s->ranks[r].nops; i++) {
			clp_op *o = &s->ranks[r].ops[i];
			int bubble = 0;

			if (o->kind != CLP_OP_OPT_PREP)
				continue;
			needed(s, &ix, inst_off, inst_ops, r, i, need, done);
			for (int q = 0; q < s->nranks && !bubble; q++)
				for (int j = need[q]; q != r && j < s->ranks[q].nops && !bubble; j++) {
					const clp_op *x = &s->ranks[q].ops[j];

					bubble = x->step == o->step && (x->kind == CLP_OP_BWD ||
									x->kind == CLP_OP_BWD_B ||
									x->kind == CLP_OP_BWD_W);
				}
			if (bubble)
				o->flags |= CLP_OPF_BUBBLE;
		}
out:
	free(inst_off);
	free(fill);
	free(inst_ops);
	free(need);
	free(done);
	clp_sched_index_free(&ix);
	return st;
}

/* The OPT_PREPs this pass inserted that fill no bubble go again (they would only move work
 * from after the norm to before it); *kept counts the others. */
static void drop_unmarked(clp_sched *s, int *kept)
{
	for (int r = 0; r < s->nranks; r++) {
		clp_rank_prog *p = &s->ranks[r];
		int n = 0;

		for (int i = 0; i < p->nops; i++) {
			clp_op o = p->ops[i];

			if (o.kind == CLP_OP_OPT_PREP && (o.flags & PREP_NEW)) {
				if (!(o.flags & CLP_OPF_BUBBLE))
					continue;
				o.flags &= (uint8_t)~PREP_NEW;
				(*kept)++;
			}
			p->ops[n++] = o;
		}
		p->nops = n;
	}
}

clp_status clp_sched_place_prep(clp_sched *s, int *added)
{
	int n = 0, had = 0;

	if (added)
		*added = 0;
	for (int r = 0; r < s->nranks; r++)
		if (s->ranks[r].mode == CLP_RANK_ORDERED)
			CLP_TRY(place_rank(s, &s->ranks[r], &n, &had));
	if (!n && !had)
		return CLP_OK;
	CLP_TRY(mark_bubbles(s)); /* also a loaded schedule's (JSON keeps no CLP_OPF_BUBBLE) */
	n = 0;
	drop_unmarked(s, &n);
	if (added)
		*added = n;
	return CLP_OK;
}

/* 1 when compute op o consumes what receive r brings (the FWD or backward of its stage and
 * micro-batch). */
static int consumes(const clp_op *r, const clp_op *o)
{
	int kind = r->kind == CLP_OP_RECV_ACT ? o->kind == CLP_OP_FWD
					       : clp_op_is_bwd_input(o->kind);

	return kind && o->stage == r->stage && o->mb == r->mb && o->pipe == r->pipe &&
	       o->chunk == r->chunk && o->step == r->step;
}

/* The rank's waits in step `step` among ops lo..hi-1, in list order, into w (at most max): each
 * compute op that consumes a receive posted before it, and each collective but the loss's
 * REDUCE. Returns how many. */
static int waits(const clp_rank_prog *p, int step, int lo, int hi, int *w, int max)
{
	int n = 0;

	for (int j = lo; j < hi && n < max; j++) {
		const clp_op *o = &p->ops[j];
		int wait = o->step == step && clp_op_is_collective(o->kind) &&
			   o->kind != CLP_OP_REDUCE; /* the loss: summed at the step's end */

		for (int r = lo; r < j && !wait && o->step == step && clp_op_is_compute(o->kind); r++)
			wait = clp_op_is_recv(p->ops[r].kind) && consumes(&p->ops[r], o);
		if (wait)
			w[n++] = j;
	}
	return n;
}

static clp_status place_rank_delayed(clp_rank_prog *p, int *added)
{
	int *at, *w, n = 0, nops = p->nops;

	for (int i = 0; i < nops; i++)
		if (p->ops[i].kind == CLP_OP_OPT_PREP)
			return CLP_OK;
	at = malloc(((size_t)nops + 1) * sizeof(*at));
	w = malloc(((size_t)nops + 1) * sizeof(*w));
	if (!at || !w) {
		free(at);
		free(w);
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	}
	/* a step's waits come after the previous step's updates (the ops of a cycle are in step
	 * order), so the step field alone tells them apart */
	for (int i = 0, k = 0, step = -1; i < nops; i++) {
		const clp_op *o = &p->ops[i];
		int nw;

		at[i] = -1;
		if (o->kind != CLP_OP_OPT_STEP)
			continue;
		if (o->step != step)
			k = 0, step = o->step;
		nw = waits(p, step, 0, i, w, nops);
		if (nw > 0) {
			at[i] = w[k < nw ? k : nw - 1];
			n++;
		}
		k++;
	}
	free(w);
	return insert_preps(p, at, n, CLP_OPF_BUBBLE, added);
}

clp_status clp_sched_place_prep_delayed(clp_sched *s, int *added)
{
	int n = 0;

	for (int r = 0; r < s->nranks; r++)
		if (s->ranks[r].mode == CLP_RANK_ORDERED)
			CLP_TRY(place_rank_delayed(&s->ranks[r], &n));
	if (added)
		*added = n;
	return CLP_OK;
}
