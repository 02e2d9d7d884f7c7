/* Lowering compute orders into full schedules: point-to-point messages around each compute item,
 * then the end-of-step collectives and optimizer steps (see gen.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/sched/gen.h"

typedef struct lower_ctx {
	clp_sched *s;
	const clp_placement *pl;
	int rank, replica;
} lower_ctx;

static int rank_of(const lower_ctx *c, int pipe, int stage)
{
	return c->pl->rank_of[((size_t)c->replica * (size_t)c->s->npipes + (size_t)pipe) *
				      (size_t)c->s->nstages + (size_t)stage];
}

static int chunk_of(const lower_ctx *c, int pipe, int stage)
{
	return c->pl->chunk_of[(size_t)pipe * (size_t)c->s->nstages + (size_t)stage];
}

/* The receive that must precede item w on this rank, if its input comes from another rank. */
static int recv_for(const lower_ctx *c, const clp_work *w, clp_op *op)
{
	int prev, next, from, kind;

	clp_sched_neighbours(c->s, w->mb, w->stage, &prev, &next);
	if (w->kind == CLP_OP_FWD && prev >= 0) {
		from = rank_of(c, w->pipe, prev);
		kind = CLP_OP_RECV_ACT;
	} else if (clp_op_is_bwd_input(w->kind) && next >= 0) {
		from = rank_of(c, w->pipe, next);
		kind = CLP_OP_RECV_GRAD;
	} else {
		return 0;
	}
	if (from == c->rank)
		return 0;
	*op = clp_op_make(kind, w->stage, w->pipe, w->chunk, w->mb);
	op->peer = from;
	op->tag = clp_sched_tag(kind == CLP_OP_RECV_ACT ? CLP_TAG_ACT : CLP_TAG_GRAD, w->pipe,
				w->chunk, w->mb);
	return 1;
}

static int send_for(const lower_ctx *c, const clp_work *w, clp_op *op)
{
	int prev, next, to, kind, to_stage;

	clp_sched_neighbours(c->s, w->mb, w->stage, &prev, &next);
	if (w->kind == CLP_OP_FWD && next >= 0) {
		kind = CLP_OP_SEND_ACT;
		to_stage = next;
	} else if (clp_op_is_bwd_input(w->kind) && prev >= 0) {
		kind = CLP_OP_SEND_GRAD;
		to_stage = prev;
	} else {
		return 0;
	}
	to = rank_of(c, w->pipe, to_stage);
	if (to == c->rank)
		return 0;
	*op = clp_op_make(kind, w->stage, w->pipe, w->chunk, w->mb);
	op->peer = to;
	op->tag = clp_sched_tag(kind == CLP_OP_SEND_ACT ? CLP_TAG_ACT : CLP_TAG_GRAD, w->pipe,
				chunk_of(c, w->pipe, to_stage), w->mb);
	return 1;
}

static clp_status lower_compute(lower_ctx *c, const clp_work *items, int n, int prefetch)
{
	clp_op op;

	for (int j = 0; j < n; j++) {
		int first = j == 0 ? 0 : j + prefetch, last = j + prefetch;

		for (int k = first; k <= last && k < n; k++)
			if (recv_for(c, &items[k], &op))
				CLP_TRY(clp_sched_push(c->s, c->rank, &op));
		op = clp_op_make(items[j].kind, items[j].stage, items[j].pipe, items[j].chunk,
				 items[j].mb);
		CLP_TRY(clp_sched_push(c->s, c->rank, &op));
		if (send_for(c, &items[j], &op))
			CLP_TRY(clp_sched_push(c->s, c->rank, &op));
	}
	return CLP_OK;
}

static int int_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Ranks holding any of the stages in want[0..nwant) within the given replicas, ascending (so a
 * set of ranks is one group, whichever stage it reduces), without repeats. */
static int holders(const clp_sched *s, const clp_placement *pl, const int *want, int nwant,
		   int rep0, int rep1, int *out)
{
	int n = 0;

	for (int rep = rep0; rep < rep1; rep++)
		for (int p = 0; p < s->npipes; p++)
			for (int i = 0; i < nwant; i++) {
				int r = pl->rank_of[((size_t)rep * (size_t)s->npipes + (size_t)p) *
							    (size_t)s->nstages + (size_t)want[i]];
				int seen = 0;

				for (int k = 0; k < n; k++)
					seen |= out[k] == r;
				if (!seen)
					out[n++] = r;
			}
	qsort(out, (size_t)n, sizeof(int), int_cmp);
	return n;
}

static clp_status push_collective(clp_sched *s, int rank, int kind, int what, int stage,
				  const int *members, int n, int64_t bytes)
{
	clp_op op = clp_op_make((clp_op_kind)kind, stage, 0, 0, -1);

	op.what = (uint8_t)what;
	op.bytes = bytes;
	if (kind == CLP_OP_REDUCE)
		op.peer = members[0];
	CLP_TRY(clp_sched_group(s, members, n, &op.group));
	return clp_sched_push(s, rank, &op);
}

/* Gradient all-reduces in ascending stage order on every rank: one global order, so groups that
 * share ranks cannot wait on each other in a cycle. Then tied embedding, norm, optimizer, loss. */
static clp_status lower_step_end(clp_sched *s, const clp_placement *pl, const clp_gen_opts *o,
				 int *stages, int *members)
{
	int all_n = s->nranks, last = s->nstages - 1;

	for (int r = 0; r < s->nranks; r++) {
		int rep = s->ranks[r].replica, nst = 0;

		for (int p = 0; p < s->npipes; p++)
			for (int st = 0; st < s->nstages; st++)
				if (pl->rank_of[((size_t)rep * (size_t)s->npipes + (size_t)p) *
							(size_t)s->nstages + (size_t)st] == r)
					stages[nst++] = st;
		qsort(stages, (size_t)nst, sizeof(int), int_cmp);
		for (int i = 0; i < nst; i++) {
			int n;

			if (i > 0 && stages[i] == stages[i - 1])
				continue;
			n = holders(s, pl, &stages[i], 1, 0, s->nreplicas, members);
			if (n > 1)
				CLP_TRY(push_collective(s, r, CLP_OP_ALLREDUCE, CLP_RED_GRADS,
							stages[i], members, n, 0));
		}
		if (o->tied_embedding && last > 0) {
			int ends[2] = {0, last};
			int n = holders(s, pl, ends, 2, rep, rep + 1, members), mine = 0;

			for (int k = 0; k < n; k++)
				mine |= members[k] == r;
			if (mine && n > 1)
				CLP_TRY(push_collective(s, r, CLP_OP_ALLREDUCE, CLP_RED_TIED, 0,
							members, n, 0));
		}
		for (int k = 0; k < all_n; k++)
			members[k] = k;
		if (o->grad_norm && all_n > 1)
			CLP_TRY(push_collective(s, r, CLP_OP_ALLREDUCE, CLP_RED_NORM, -1, members,
						all_n, 8));
		for (int i = 0; o->opt_step && i < nst; i++) {
			clp_op op;

			if (i > 0 && stages[i] == stages[i - 1])
				continue;
			op = clp_op_make(CLP_OP_OPT_STEP, stages[i], 0, 0, -1);
			CLP_TRY(clp_sched_push(s, r, &op));
		}
		if (o->loss_reduce && all_n > 1)
			CLP_TRY(push_collective(s, r, CLP_OP_REDUCE, CLP_RED_LOSS, -1, members, all_n,
						8));
	}
	return CLP_OK;
}

clp_status clp_sched_lower(clp_sched *s, clp_work *const *orders, const int *lens,
			   const clp_placement *pl, const clp_gen_opts *o)
{
	size_t nst = (size_t)s->nstages * (size_t)s->npipes * (size_t)s->nreplicas;
	int *stages = malloc(nst * sizeof(int));
	int *members = malloc((nst + (size_t)s->nranks) * sizeof(int));
	clp_status st = CLP_OK;

	if (!stages || !members) {
		st = clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
		goto out_free;
	}
	for (int r = 0; r < s->nranks && st == CLP_OK; r++) {
		lower_ctx c = {s, pl, r, s->ranks[r].replica};

		st = lower_compute(&c, orders[r], lens[r], o->prefetch);
	}
	if (st == CLP_OK)
		st = lower_step_end(s, pl, o, stages, members);
out_free:
	free(members);
	free(stages);
	return st;
}
