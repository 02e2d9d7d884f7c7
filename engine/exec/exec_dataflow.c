/* The executor's dataflow interpreter: how a rank in CLP_RANK_DATAFLOW mode (a SkipPipe node,
 * docs/SKIPPIPE.md "How a node runs it") runs its list for one step.
 *
 * Every receive is posted at the start. Then, repeatedly, every send whose data exists on the
 * host is posted, and, once the device has finished the last compute op, the first compute op
 * in list order whose inputs are there runs: a forward
 * needs its received activation (stage 0 on the origin needs nothing), a backward its forward and
 * its received gradient (the head's needs nothing more). A forward of a micro-batch the rank does
 * not hold yet runs only while fewer than mem_cap micro-batches are held; a micro-batch is held
 * from its first forward on the rank to its last backward there. Nothing blocks: device events
 * and transfers are polled together, and a rank with nothing to run for the transport's deadline
 * reports what it waits for. Then the collectives and optimizer steps in list order: each
 * stage's gradients are averaged over the stage's nodes (an origin's one all-reduce carries its
 * two stages, stage 0 and the head S), the gradient norm is summed over every rank, AdamW.
 *
 * The tied embedding on an origin: stage 0 and the head are two stage objects, each with its own
 * copy of the token embedding. The head's gradient is added to the embedding's before the
 * all-reduce (which carries the embedding's only), and the result copied back to the head's
 * copy, so both copies take the same AdamW step and stay equal. */
#include "engine/exec/exec_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl/ops.h"

#define LOCAL(e, g) ((int)((g) - (e)->ix.off[(e)->rank]))

/* One step's bookkeeping. */
typedef struct df {
	clp_exec *e;
	const clp_rank_prog *p;
	const clp_exec_data *d;
	unsigned char *ran; /* per op: compute enqueued, send or receive posted */
	int *held;          /* per micro-batch: its stages holding activations on this rank */
	int inflight;       /* micro-batches held */
	int todo;           /* compute ops and sends not run yet */
	int first;          /* no op before this one is left to run */
	int barrier;        /* the first collective or optimizer step: the end of the dataflow */
	int busy;           /* the device was seen working during the last scan */
	cl_event last;      /* marker after the last compute op enqueued, until it completes */
} df;

static int is_barrier(int kind)
{
	return clp_op_is_collective(kind) || kind == CLP_OP_OPT_STEP;
}

static int holds_stage(const clp_rank_prog *p, int stage)
{
	for (int i = 0; i < p->nops; i++)
		if ((p->ops[i].kind == CLP_OP_FWD || p->ops[i].kind == CLP_OP_BWD ||
		     p->ops[i].kind == CLP_OP_OPT_STEP) && p->ops[i].stage == stage)
			return 1;
	return 0;
}

clp_status exec_dataflow_setup(clp_exec *e)
{
	const clp_sched *s = e->s;
	const clp_rank_prog *p = &s->ranks[e->rank];
	int seen_barrier = 0;

	e->norm_world = 1;
	for (int i = 0; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];
		char what[160];

		clp_op_describe(op, what, sizeof(what));
		if (is_barrier(op->kind)) {
			seen_barrier = 1;
			if (op->kind == CLP_OP_ALLREDUCE && op->what != CLP_RED_GRADS)
				return clp_error(CLP_ERR_UNSUPPORTED, "dataflow rank %d: op %d (%s): only "
						 "gradient all-reduces are run on dataflow ranks",
						 e->rank, i, what);
			if (op->kind != CLP_OP_ALLREDUCE && op->kind != CLP_OP_OPT_STEP)
				return clp_error(CLP_ERR_UNSUPPORTED, "dataflow rank %d: op %d (%s) is not "
						 "run on dataflow ranks", e->rank, i, what);
			continue;
		}
		if (op->kind != CLP_OP_FWD && op->kind != CLP_OP_BWD && !clp_op_is_p2p(op->kind))
			return clp_error(CLP_ERR_UNSUPPORTED, "dataflow rank %d: op %d (%s) is not run "
					 "on dataflow ranks (forwards, full backwards, transfers, "
					 "gradient all-reduces and optimizer steps are)", e->rank, i, what);
		if (seen_barrier)
			return clp_error(CLP_ERR_INVALID, "dataflow rank %d: op %d (%s) comes after a "
					 "collective; the collectives and optimizer steps end the list",
					 e->rank, i, what);
		if (op->mb < 0 || op->mb >= s->nmb)
			return clp_error(CLP_ERR_INVALID, "dataflow rank %d: op %d (%s): micro-batch "
					 "outside 0 .. %d", e->rank, i, what, s->nmb - 1);
	}
	/* a stage's tensors are saved and counted in the norm by the lowest rank holding it */
	for (int i = 0; i < e->nls; i++) {
		struct lstage *l = &e->ls[i];
		const clp_param_table *t = clp_stage_table(l->st);
		int first = e->rank;

		for (int r = 0; r < e->rank && first == e->rank; r++)
			if (holds_stage(&s->ranks[r], l->stage))
				first = r;
		l->owner = first == e->rank;
		for (int k = 0; k < t->ntensors; k++)
			l->owns[k] = l->owner && !exec_tied_copy(&t->tensors[k]);
	}
	e->df_origins = 0;
	for (int r = 0; r < s->nranks; r++)
		e->df_origins += holds_stage(&s->ranks[r], 0);
	return CLP_OK;
}

int clp_exec_peak_held(const clp_exec *e)
{
	return e->df_peak;
}

/* Whether the data op i consumes is here: its receive completed, or the local op making it has
 * run and its output reached the host. */
static clp_status input_ready(df *f, int i, int *ready)
{
	clp_exec *e = f->e;
	int64_t in = e->ix.input[e->ix.off[e->rank] + i];
	int j;

	*ready = 0;
	if (in < 0) {
		char what[160];

		clp_op_describe(&f->p->ops[i], what, sizeof(what));
		return clp_error(CLP_ERR_INVALID, "dataflow rank %d: %s has no input in the list",
				 e->rank, what);
	}
	j = LOCAL(e, in);
	if (clp_op_is_recv(f->p->ops[j].kind)) {
		*ready = f->ran[j] && !e->os[j].req;
		return CLP_OK;
	}
	if (!f->ran[j] || !e->os[j].ev)
		return CLP_OK;
	CLP_TRY(exec_event_done(e, e->os[j].ev, ready));
	f->busy |= !*ready;
	return CLP_OK;
}

static clp_status compute_ready(df *f, int i, int *ready)
{
	clp_exec *e = f->e;
	const clp_op *op = &f->p->ops[i];
	struct lstage *l = exec_find(e, op->stage, op->pipe);

	*ready = 0;
	if (!l)
		return clp_error(CLP_ERR_STATE, "dataflow rank %d: stage %d is not held", e->rank,
				 op->stage);
	if (op->kind == CLP_OP_FWD) {
		if (!f->held[op->mb] && f->p->mem_cap > 0 && f->inflight >= f->p->mem_cap)
			return CLP_OK;
		if (clp_stage_has_embedding(l->st)) {
			*ready = 1;
			return CLP_OK;
		}
		return input_ready(f, i, ready);
	}
	{
		int64_t dep = e->ix.dep[e->ix.off[e->rank] + i];

		if (dep < 0)
			return clp_error(CLP_ERR_INVALID, "dataflow rank %d: BWD stage %d mb %d has no "
					 "forward in the list", e->rank, op->stage, op->mb);
		if (!f->ran[LOCAL(e, dep)])
			return CLP_OK;
	}
	if (clp_stage_has_head(l->st)) {
		*ready = 1;
		return CLP_OK;
	}
	return input_ready(f, i, ready);
}

static clp_status run_compute(df *f, int i)
{
	clp_exec *e = f->e;
	const clp_op *op = &f->p->ops[i];
	cl_int err;

	e->cur_ev0 = NULL;
	if (op->kind == CLP_OP_FWD) {
		CLP_TRY(exec_run_fwd(e, i, op, f->d, 0));
		if (f->held[op->mb]++ == 0 && ++f->inflight > e->df_peak)
			e->df_peak = f->inflight;
	} else {
		CLP_TRY(exec_run_bwd(e, i, op, f->d));
		if (--f->held[op->mb] == 0)
			f->inflight--;
	}
	if (e->tracing && e->cur_ev0)
		CLP_TRY(exec_trace_compute(e, op));
	f->ran[i] = 1;
	f->todo--;
	err = clEnqueueMarkerWithWaitList(clp_cl_ctx_queue(e->ctx), 0, NULL, &f->last);
	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: marker after a compute op", e->rank);
	clFlush(clp_cl_ctx_queue(e->ctx)); /* the device starts on it while we poll */
	return CLP_OK;
}

/* Whether the device still runs the last compute op. The next one is chosen only once it has
 * finished, among the ops ready then (the simulator's rule, and what the path-set search
 * optimised): queued behind a running op, a forward that was ready first would run before a
 * backward whose gradient arrived meanwhile, whatever the node's priority says. */
static clp_status device_busy(df *f, int *busy)
{
	int done;

	*busy = 0;
	if (!f->last)
		return CLP_OK;
	CLP_TRY(exec_event_done(f->e, f->last, &done));
	if (!done) {
		*busy = 1;
		return CLP_OK;
	}
	clReleaseEvent(f->last);
	f->last = NULL;
	return CLP_OK;
}

static int pending(const clp_exec *e)
{
	int n = 0;

	for (int i = 0; i < e->nops; i++)
		n += e->os[i].req != NULL;
	return n;
}

/* Nothing has been runnable for the transport's deadline: name the first op left and what it
 * waits for. */
static clp_status stuck(df *f)
{
	clp_exec *e = f->e;
	char what[160], input[160];
	unsigned step = (unsigned)f->d->step + 1;
	double s = clp_comm_timeout(e->comm);

	for (int i = f->first; i < f->barrier; i++) {
		const clp_op *op = &f->p->ops[i];
		int64_t in = e->ix.input[e->ix.off[e->rank] + i];
		const clp_op *rc = in >= 0 ? &f->p->ops[LOCAL(e, in)] : NULL;

		if (f->ran[i] || clp_op_is_recv(op->kind))
			continue;
		clp_op_describe(op, what, sizeof(what));
		if (rc && clp_op_is_recv(rc->kind) && e->os[LOCAL(e, in)].req) {
			clp_op_describe(rc, input, sizeof(input));
			return clp_error(CLP_ERR_TIMEOUT, "rank %d, step %u: dataflow stalled for %.1f s: "
					 "%s waits for %s (peer rank %d); %d micro-batches held, cap "
					 "%d", e->rank, step, s, what, input, rc->peer, f->inflight,
					 f->p->mem_cap);
		}
		return clp_error(CLP_ERR_TIMEOUT, "rank %d, step %u: dataflow stalled for %.1f s: %s "
				 "waits (%d micro-batches held, cap %d)", e->rank, step, s, what,
				 f->inflight, f->p->mem_cap);
	}
	return clp_error(CLP_ERR_TIMEOUT, "rank %d, step %u: dataflow stalled for %.1f s", e->rank,
			 step, s);
}

/* Forwards, backwards and transfers, in whatever order their data arrives. */
static clp_status flow(df *f)
{
	clp_exec *e = f->e;
	double idle_since = clp_comm_now();
	int idle = 0;

	for (int i = 0; i < f->barrier; i++)
		if (clp_op_is_recv(f->p->ops[i].kind)) {
			CLP_TRY(exec_post_recv(e, i, &f->p->ops[i], f->d->step));
			f->ran[i] = 1;
		} else {
			f->todo++;
		}
	while (f->todo > 0) {
		int before = pending(e), moved, chosen = -1, running;

		CLP_TRY(exec_progress(e));
		moved = pending(e) != before;
		CLP_TRY(device_busy(f, &running));
		f->busy = running;
		for (int i = f->first; i < f->barrier; i++) {
			const clp_op *op = &f->p->ops[i];
			int ready = 0;

			if (f->ran[i])
				continue;
			if (clp_op_is_send(op->kind)) {
				CLP_TRY(input_ready(f, i, &ready));
				if (ready) {
					CLP_TRY(exec_post_send(e, i, op, f->d->step));
					f->ran[i] = 1;
					f->todo--;
					moved = 1;
				}
			} else if (chosen < 0 && !running) {
				CLP_TRY(compute_ready(f, i, &ready));
				if (ready)
					chosen = i;
			}
		}
		if (chosen >= 0) {
			CLP_TRY(run_compute(f, chosen));
			moved = 1;
		}
		while (f->first < f->barrier && f->ran[f->first])
			f->first++;
		if (moved) {
			idle = 0;
			idle_since = clp_comm_now();
			continue;
		}
		if (f->busy) /* the deadline is for waits on other ranks */
			idle_since = clp_comm_now();
		else if (clp_comm_now() - idle_since > clp_comm_timeout(e->comm))
			return stuck(f);
		exec_back_off(idle++);
	}
	return CLP_OK;
}

/* The embedding's gradient and the head's copy of it, when this rank holds both as two stages. */
static int tied_pair(clp_exec *e, clp_buf *emb, clp_buf *copy, size_t *n)
{
	int have = 0;

	for (int i = 0; i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);

		for (int k = 0; k < t->ntensors; k++)
			if (t->tensors[k].role == CLP_R_TOK_EMB && clp_stage_trained(e->ls[i].st, k)) {
				*(exec_tied_copy(&t->tensors[k]) ? copy : emb) =
					clp_stage_tensor(e->ls[i].st, CLP_ST_GRAD, k);
				*n = t->tensors[k].numel;
				have |= exec_tied_copy(&t->tensors[k]) ? 2 : 1;
			}
	}
	return have == 3;
}

/* The local stages in IR stage order: the members of a group lay their gradients out alike,
 * whatever order their lists made the stages in. */
static void by_stage(const clp_exec *e, int *order)
{
	for (int i = 0; i < e->nls; i++) {
		int j = i;

		for (; j > 0 && e->ls[order[j - 1]].stage > e->ls[i].stage; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
}

/* Every gradient this rank holds (but the tied copy) summed over the op's group, then divided by
 * the group's size: the stage's mean over its nodes. */
static clp_status average(clp_exec *e, const clp_op *op)
{
	const clp_group *g = &e->s->groups[op->group];
	int *order = malloc(((size_t)e->nls + 1) * sizeof(int));
	clp_stage **st = malloc(((size_t)e->nls + 1) * sizeof(*st));
	clp_status s = CLP_OK;

	if (!order || !st)
		s = clp_error(CLP_ERR_NOMEM, "out of host memory for the gradient all-reduce");
	if (s == CLP_OK) {
		by_stage(e, order);
		for (int i = 0; i < e->nls; i++)
			st[i] = e->ls[order[i]].st;
		s = exec_reduce_grads(e, op, st, e->nls, 1, 1.0f / (float)g->n, "stage gradients");
	}
	free(st);
	free(order);
	return s;
}

/* After the forwards and backwards: the collectives and optimizer steps in list order. */
static clp_status finish(df *f, const void *set, float max_norm)
{
	clp_exec *e = f->e;
	clp_buf emb, copy;
	size_t n = 0;
	int tied = tied_pair(e, &emb, &copy, &n);

	CLP_TRY(exec_finish_step(e, f->d->step));
	if (tied)
		CLP_TRY(clp_cl_axpy(e->ctx, emb, copy, 1.0f, n));
	for (int i = f->barrier; i < f->p->nops; i++) {
		const clp_op *op = &f->p->ops[i];
		double h0 = clp_comm_now();

		if (op->kind == CLP_OP_ALLREDUCE) {
			CLP_TRY(average(e, op));
			if (e->tracing)
				CLP_TRY(exec_trace_host(e, op, h0, clp_comm_now()));
			continue;
		}
		if (!e->norm_done) {
			if (tied)
				CLP_TRY(clp_cl_copy(e->ctx, copy, emb, n));
			CLP_TRY(exec_grad_norm(e, NULL, max_norm));
		}
		CLP_TRY(exec_optim_stage_step(e, op->stage, set));
	}
	if (!e->norm_done) /* a list without optimizer steps */
		CLP_TRY(exec_grad_norm(e, NULL, max_norm));
	return exec_drain(e);
}

/* The step on the dataflow state f: gradients zeroed, the flow, the step's end, the loss (the
 * mean over the origins). */
static clp_status dataflow_steps(df *f, const void *set, float max_norm,
				 clp_exec_result *r)
{
	clp_exec *e = f->e;

	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_stage_zero_grads(e->ls[i].st));
	CLP_TRY(clp_cl_fill(e->ctx, clp_buf_at(e->acc, 0), 0.0f, 1));
	CLP_TRY(flow(f));
	CLP_TRY(finish(f, set, max_norm));
	CLP_TRY(exec_loss_total(e, &r->loss));
	if (e->df_origins > 1)
		r->loss /= e->df_origins;
	return CLP_OK;
}

clp_status exec_dataflow_step(clp_exec *e, const clp_exec_data *d, const void *set,
			      float max_norm, clp_exec_result *r)
{
	df f = {.e = e, .p = &e->s->ranks[e->rank], .d = d};
	clp_status st = CLP_OK;

	if (!e->opt->dataflow)
		return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: %s is not run on dataflow "
				 "(SkipPipe) schedules yet", e->rank, e->opt->name);
	f.barrier = f.p->nops;
	for (int i = 0; i < f.p->nops && f.barrier == f.p->nops; i++)
		if (is_barrier(f.p->ops[i].kind))
			f.barrier = i;
	f.ran = calloc((size_t)f.p->nops + 1, 1);
	f.held = calloc((size_t)e->s->nmb + 1, sizeof(int));
	if (!f.ran || !f.held)
		st = clp_error(CLP_ERR_NOMEM, "out of host memory for the dataflow step");
	e->norm_done = 0;
	e->max_norm = max_norm;
	e->df_peak = 0;
	if (st == CLP_OK)
		st = dataflow_steps(&f, set, max_norm, r);
	r->grad_norm = e->norm;
	r->skipped = e->nonfinite;
	exec_update_loss_scale(e, r);
	if (f.last)
		clReleaseEvent(f.last);
	free(f.ran);
	free(f.held);
	return st;
}
