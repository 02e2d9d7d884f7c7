/* The simulator's event loop (see sim.h): ranks step through their lists, transfers and
 * collectives complete as events on one heap ordered by (time, sequence), so equal times resolve
 * in a fixed order and runs are deterministic. Every trace event is emitted at its start time,
 * which is what lets clp_trace_stats stream over them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sim/sim_internal.h"

typedef struct sim_event {
	double t, t2;  /* time; for EV_XFER_START the transfer's end */
	uint64_t seq;
	int32_t type, rank;
	int64_t arg;   /* global op index */
} sim_event;

enum { EV_RANK, EV_XFER_START, EV_XFER_DONE };
/* What a rank waits for: its running compute op, what the next op needs (a receive or a local
 * op), a blocking send, every outstanding request at the end of its list (drain), a collective,
 * (dataflow) any receive, or the end of the gap after its last task (task_gap_s). */
enum { W_NONE, W_RUN, W_RECV, W_SEND, W_DRAIN, W_COLL, W_ANY, W_DONE, W_GAP };

void clp_sim_opts_default(clp_sim_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->eager_bytes = -1;
	o->trace_limit = CLP_SIM_TRACE_DEFAULT;
}

static int ev_before(const sim_event *a, const sim_event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push(sim *S, int type, double t, double t2, int rank, int64_t arg)
{
	sim_event e = {t, t2, S->seq++, type, rank, arg};
	size_t i;

	if (S->nheap == S->heap_cap) {
		size_t cap = S->heap_cap ? S->heap_cap * 2 : 1024;
		sim_event *h = realloc(S->heap, cap * sizeof(*h));

		if (!h) {
			S->err = clp_error(CLP_ERR_NOMEM, "simulator: out of host memory (events)");
			return;
		}
		S->heap = h;
		S->heap_cap = cap;
	}
	for (i = S->nheap++; i > 0 && ev_before(&e, &S->heap[(i - 1) / 2]); i = (i - 1) / 2)
		S->heap[i] = S->heap[(i - 1) / 2];
	S->heap[i] = e;
}

static sim_event pop(sim *S)
{
	sim_event top = S->heap[0], last = S->heap[--S->nheap];
	size_t i = 0, n = S->nheap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && ev_before(&S->heap[c + 1], &S->heap[c]))
			c++;
		if (!ev_before(&S->heap[c], &last))
			break;
		S->heap[i] = S->heap[c];
		i = c;
	}
	if (n)
		S->heap[i] = last;
	return top;
}

static const clp_op *op_at(const sim *S, int64_t g, int *rank)
{
	int r = clp_sched_index_rank(&S->ix, g);

	if (rank)
		*rank = r;
	return &S->s->ranks[r].ops[g - S->ix.off[r]];
}

static void emit(sim *S, int rank, int queue, const clp_op *op, double t0, double t1, int peer)
{
	clp_trace_event e = {t0, t1, rank, (uint8_t)queue, op->kind, op->pipe, op->what,
			     op->stage, op->mb, peer, op->layer};

	clp_trace_stats_add(&S->stats, &e);
	S->res->nevents++;
	if (S->o->trace_limit && clp_trace_push(&S->res->trace, &e) != CLP_OK)
		S->err = CLP_ERR_NOMEM;
}

/* Op g of rank r (global index), without a search. */
static const clp_op *op_of(const sim *S, int r, int64_t g)
{
	return &S->s->ranks[r].ops[g - S->ix.off[r]];
}

/* A send's transfer on both ranks' comm queues; the receiver is the send's peer. */
static void emit_xfer(sim *S, int64_t g, int src, double t0, double t1)
{
	const clp_op *so = op_of(S, src, g), *ro = op_of(S, so->peer, S->ix.match[g]);

	emit(S, src, CLP_TQ_COMM, so, t0, t1, so->peer);
	emit(S, so->peer, CLP_TQ_COMM, ro, t0, t1, src);
}

/* Reserve the link FCFS from t: bytes / bandwidth occupy it, latency follows. */
static void start_xfer(sim *S, int64_t g, int src, double t)
{
	const clp_op *so = op_of(S, src, g), *ro = op_of(S, so->peer, S->ix.match[g]);
	int dst = so->peer;
	int64_t bytes = sim_msg_bytes(S, so, ro);
	double occ, start = t, done;
	sim_route rt;

	S->fl[g] |= F_STARTED;
	if (sim_route_of(S, src, dst, &rt) != CLP_OK) {
		S->err = CLP_ERR_NOMEM;
		return;
	}
	S->res->msg_bytes = clp_bytes_add(S->res->msg_bytes, bytes);
	occ = isinf(rt.spec.bandwidth_Bps) ? 0 : (double)bytes / rt.spec.bandwidth_Bps;
	if (rt.slot >= 0) {
		if (S->res_free[rt.slot] > start)
			start = S->res_free[rt.slot];
		S->res_free[rt.slot] = start + occ;
	}
	done = start + occ + rt.spec.latency_s + S->o->hop_s;
	if (done > start) {
		if (start > t)
			push(S, EV_XFER_START, start, done, src, g);
		else
			emit_xfer(S, g, src, start, done);
	}
	push(S, EV_XFER_DONE, done, 0, src, g);
}

/* Optional per-op times (clp_sim_opts.op_t0 / op_t1). */
static void op_time(sim *S, int64_t g, double t0, double t1)
{
	if (S->o->op_t0)
		S->o->op_t0[g] = t0;
	if (S->o->op_t1 && t1 >= 0)
		S->o->op_t1[g] = t1;
}

static void post(sim *S, int r, int64_t g, const clp_op *op, double t)
{
	int64_t m = S->ix.match[g];

	S->fl[g] |= F_POSTED;
	op_time(S, g, t, -1);
	if (clp_op_is_send(op->kind)) {
		S->rs[r].open_reqs++;
		if (m < 0)
			return; /* never completes: reported as a deadlock */
		if (sim_msg_bytes(S, op, op_of(S, op->peer, m)) < S->eager) {
			S->fl[g] |= F_EAGER | F_DONE;
			op_time(S, g, t, t);
			S->rs[r].open_reqs--;
			start_xfer(S, g, r, t);
		} else if (S->fl[m] & F_POSTED) {
			start_xfer(S, g, r, t);
		}
		return;
	}
	if (S->fl[g] & F_ARRIVED) {
		S->fl[g] |= F_DONE;
		op_time(S, g, t, t);
		return;
	}
	S->rs[r].open_reqs++;
	if (m >= 0 && (S->fl[m] & F_POSTED) && !(S->fl[m] & F_STARTED))
		start_xfer(S, m, op->peer, t);
}

/* F, B and W: the tasks that task_gap_s separates. */
static int is_task(int kind)
{
	return kind == CLP_OP_FWD || kind == CLP_OP_BWD || kind == CLP_OP_BWD_B ||
	       kind == CLP_OP_BWD_W;
}

/* The per-(step, mb) slot of an op in sim_rank.held. */
static size_t held_slot(const sim *S, const clp_op *op)
{
	return (size_t)op->step * (size_t)S->s->nmb + (size_t)op->mb;
}

/* Whether the rank already holds activations of op's micro-batch (then a forward of another of
 * its stages here does not count against the memory cap). */
static int holds_mb(const sim *S, const sim_rank *R, const clp_op *op)
{
	return R->held && R->held[held_slot(S, op)] > 0;
}

/* A task may not start yet: wait for the end of the gap after the last one (one that takes no
 * time, SkipPipe's folded head backward, is no task). */
static int in_gap(sim *S, int r, const clp_op *op, double t)
{
	sim_rank *R = &S->rs[r];

	if (!is_task(op->kind) || t >= R->gap_until || sim_op_time(S, r, op) <= 0)
		return 0;
	R->wait = W_GAP;
	push(S, EV_RANK, R->gap_until, 0, r, 0);
	return 1;
}

static void run_compute(sim *S, int r, int64_t g, const clp_op *op, double t)
{
	sim_rank *R = &S->rs[r];
	double d = sim_op_time(S, r, op) * (S->scale ? S->scale[g] : 1);
	int64_t act = sim_act_bytes(S, op->stage), act_w = sim_act_w_bytes(S, op->stage);

	if (is_task(op->kind) && d > 0)
		R->gap_until = t + d + S->o->task_gap_s;
	switch (op->kind) {
	case CLP_OP_FWD:
		R->mem = clp_bytes_add(R->mem, act);
		if (R->mem > R->peak)
			R->peak = R->mem;
		if (!R->held || R->held[held_slot(S, op)]++ == 0)
			R->inflight++;
		break;
	case CLP_OP_BWD: R->pending_free = act; break;
	case CLP_OP_BWD_B: R->pending_free = act - act_w; break;
	case CLP_OP_BWD_W: R->pending_free = act_w; break;
	}
	emit(S, r, CLP_TQ_COMPUTE, op, t, t + d, -1);
	op_time(S, g, t, t + d);
	R->wait = W_RUN;
	R->running = g;
	push(S, EV_RANK, t + d, 0, r, 0);
}

static void run_collective(sim *S, int r, int64_t g, const clp_op *op, double t)
{
	int64_t inst = S->ix.coll[g];
	const clp_group *grp;
	double d;

	S->rs[r].wait = W_COLL;
	S->rs[r].wait_op = g;
	if (inst < 0 || ++S->inst_arrived[inst] != S->s->groups[op->group].n)
		return;
	grp = &S->s->groups[op->group];
	d = sim_coll_time(S, op, sim_coll_bytes(S, op));
	for (int i = 0; i < grp->n; i++) {
		op_time(S, S->rs[grp->ranks[i]].wait_op, t, t + d);
		if (d > 0)
			emit(S, grp->ranks[i], CLP_TQ_COMM, op, t, t + d, -1);
		push(S, EV_RANK, t + d, 0, grp->ranks[i], 0);
	}
}

/* The op g needs first, if that is not done yet: its input (a receive, or a local op) or the
 * local op it follows; -1 when g may run. */
static int64_t blocker(const sim *S, int64_t g)
{
	int64_t in = S->ix.input[g], dep = S->ix.dep[g];

	if (in >= 0 && !(S->fl[in] & F_DONE))
		return in;
	if (dep >= 0 && !(S->fl[dep] & F_DONE))
		return dep;
	return -1;
}

/* All ops issued: wait for outstanding requests, then the rank is done. */
static void rank_end(sim *S, sim_rank *R, double t)
{
	if (R->open_reqs > 0) {
		R->wait = W_DRAIN;
		return;
	}
	R->wait = W_DONE;
	R->finish = t;
	S->ndone++;
}

/* Ordered mode: the ops in list order. */
static void ordered_step(sim *S, int r, double t)
{
	sim_rank *R = &S->rs[r];
	const clp_rank_prog *p = &S->s->ranks[r];
	int64_t base = S->ix.off[r];

	for (;;) {
		const clp_op *op;
		int64_t g, b;

		/* An exchange is posted whole; then its blocking sends are waited for. */
		for (; R->run_lo < R->run_hi; R->run_lo++) {
			g = base + R->run_lo;
			op = &p->ops[R->run_lo];
			if (clp_op_is_send(op->kind) && (op->flags & CLP_OPF_WAIT) &&
			    !(S->fl[g] & F_DONE)) {
				R->wait = W_SEND;
				R->wait_op = g;
				return;
			}
		}
		if (R->pc >= p->nops) {
			rank_end(S, R, t);
			return;
		}
		op = &p->ops[R->pc];
		g = base + R->pc;
		if (clp_op_is_p2p(op->kind)) {
			R->run_lo = R->pc;
			for (; R->pc < p->nops && clp_op_is_p2p(p->ops[R->pc].kind); R->pc++)
				post(S, r, base + R->pc, &p->ops[R->pc], t);
			R->run_hi = R->pc;
		} else if (clp_op_is_compute(op->kind)) {
			if ((b = blocker(S, g)) >= 0) {
				R->wait = W_RECV;
				R->wait_op = b;
				return;
			}
			if (in_gap(S, r, op, t))
				return;
			R->pc++;
			run_compute(S, r, g, op, t);
			return;
		} else if (clp_op_is_collective(op->kind)) {
			R->pc++;
			run_collective(S, r, g, op, t);
			return;
		} else {
			R->pc++;
		}
	}
}

/* Ops no later op may overtake in dataflow mode: collectives, the optimizer step and the
 * per-step K-FAC work run only once everything before them has. */
static int is_barrier(int kind)
{
	return clp_op_is_collective(kind) || kind == CLP_OP_OPT_STEP || kind == CLP_OP_KFAC_INV ||
	       kind == CLP_OP_KFAC_PRECOND;
}

/* Dataflow mode: every receive is posted at the start; then the first compute op in list order
 * whose inputs are ready runs (a forward only while fewer than mem_cap micro-batches hold
 * activations, or if its micro-batch already holds some here), and every send goes as soon as
 * what it sends exists. */
static void dataflow_step(sim *S, int r, double t)
{
	sim_rank *R = &S->rs[r];
	const clp_rank_prog *p = &S->s->ranks[r];
	int64_t base = S->ix.off[r], chosen = -1;

	if (!R->started) {
		R->started = 1;
		for (int i = 0; i < p->nops; i++)
			if (clp_op_is_recv(p->ops[i].kind)) {
				S->fl[base + i] |= F_EXEC;
				post(S, r, base + i, &p->ops[i], t);
			}
	}
	for (int i = R->pc, prefix = 1; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];
		int64_t g = base + i;

		if (S->fl[g] & F_EXEC)
			continue;
		if (is_barrier(op->kind)) {
			if (!prefix || chosen >= 0)
				break;
			S->fl[g] |= F_EXEC;
			R->pc = i + 1;
			if (clp_op_is_collective(op->kind))
				run_collective(S, r, g, op, t);
			else
				run_compute(S, r, g, op, t);
			return;
		}
		if (blocker(S, g) >= 0 ||
		    (op->kind == CLP_OP_FWD && p->mem_cap > 0 && R->inflight >= p->mem_cap &&
		     !holds_mb(S, R, op))) {
			prefix = 0;
			continue;
		}
		if (clp_op_is_send(op->kind)) {
			S->fl[g] |= F_EXEC;
			post(S, r, g, op, t);
		} else {
			if (chosen < 0 && clp_op_is_compute(op->kind))
				chosen = g;
			prefix = 0;
		}
	}
	if (chosen >= 0 && in_gap(S, r, op_of(S, r, chosen), t))
		chosen = -2; /* chosen again, or another, when the gap ends */
	if (chosen >= 0)
		S->fl[chosen] |= F_EXEC;
	while (R->pc < p->nops && (S->fl[base + R->pc] & F_EXEC))
		R->pc++;
	if (chosen == -2)
		return;
	if (chosen >= 0)
		run_compute(S, r, chosen, op_of(S, r, chosen), t);
	else if (R->pc >= p->nops)
		rank_end(S, R, t);
	else
		R->wait = W_ANY;
}

/* Advance rank r at time t until it has to wait: first retire the compute op that just ended. */
static void rank_step(sim *S, int r, double t)
{
	sim_rank *R = &S->rs[r];

	if (R->running >= 0) {
		const clp_op *op = op_of(S, r, R->running);
		int k = op->kind;

		S->fl[R->running] |= F_DONE;
		R->running = -1;
		R->mem -= R->pending_free;
		R->pending_free = 0;
		if ((k == CLP_OP_BWD || k == CLP_OP_BWD_W) &&
		    (!R->held || --R->held[held_slot(S, op)] == 0))
			R->inflight--;
	}
	R->wait = W_NONE;
	if (S->s->ranks[r].mode == CLP_RANK_DATAFLOW)
		dataflow_step(S, r, t);
	else
		ordered_step(S, r, t);
}

static void xfer_done(sim *S, int64_t g, int src, double t)
{
	int dst = op_of(S, src, g)->peer;
	int64_t m = S->ix.match[g];
	sim_rank *R;

	if (!(S->fl[g] & F_EAGER)) {
		S->fl[g] |= F_DONE;
		if (S->o->op_t1)
			S->o->op_t1[g] = t;
		R = &S->rs[src];
		R->open_reqs--;
		if ((R->wait == W_SEND && R->wait_op == g) || (R->wait == W_DRAIN && !R->open_reqs))
			rank_step(S, src, t);
	}
	if (!(S->fl[m] & F_POSTED)) {
		S->fl[m] |= F_ARRIVED;
		return;
	}
	S->fl[m] |= F_DONE;
	if (S->o->op_t1)
		S->o->op_t1[m] = t;
	R = &S->rs[dst];
	R->open_reqs--;
	if ((R->wait == W_RECV && R->wait_op == m) || (R->wait == W_DRAIN && !R->open_reqs) ||
	    R->wait == W_ANY)
		rank_step(S, dst, t);
}

/* Why rank r cannot go on, for the deadlock message. */
static int blocked_reason(const sim *S, int r, char *buf, size_t n)
{
	const sim_rank *R = &S->rs[r];
	const clp_rank_prog *p = &S->s->ranks[r];
	char a[160], b[160];
	int64_t w = R->wait_op, m;
	int q;

	switch (R->wait) {
	case W_RECV:
		clp_op_describe(&p->ops[R->pc], a, sizeof(a));
		clp_op_describe(op_at(S, w, NULL), b, sizeof(b));
		m = S->ix.match[w];
		if (!clp_op_is_recv(op_at(S, w, NULL)->kind))
			return snprintf(buf, n, "rank %d at op %d (%s) needs op %lld (%s) of its own "
					"list, which has not run", r, R->pc, a,
					(long long)(w - S->ix.off[r]), b);
		if (m < 0)
			return snprintf(buf, n, "rank %d at op %d (%s) waits for op %lld (%s), which "
					"no send matches", r, R->pc, a, (long long)(w - S->ix.off[r]), b);
		op_at(S, m, &q);
		return snprintf(buf, n, "rank %d at op %d (%s) waits for op %lld (%s), sent by rank "
				"%d at its op %lld, not reached", r, R->pc, a,
				(long long)(w - S->ix.off[r]), b, q, (long long)(m - S->ix.off[q]));
	case W_SEND:
	case W_DRAIN:
		if (R->wait == W_DRAIN)
			for (w = S->ix.off[r]; w < S->ix.off[r + 1]; w++)
				if ((S->fl[w] & (F_POSTED | F_DONE)) == F_POSTED)
					break;
		clp_op_describe(op_at(S, w, NULL), a, sizeof(a));
		m = S->ix.match[w];
		if (m < 0)
			return snprintf(buf, n, "rank %d at op %lld (%s) waits for a matching %s; "
					"there is none", r, (long long)(w - S->ix.off[r]), a,
					clp_op_is_send(op_at(S, w, NULL)->kind) ? "receive" : "send");
		op_at(S, m, &q);
		return snprintf(buf, n, "rank %d at op %lld (%s) waits for rank %d to post op %lld",
				r, (long long)(w - S->ix.off[r]), a, q, (long long)(m - S->ix.off[q]));
	case W_COLL:
		clp_op_describe(op_at(S, w, NULL), a, sizeof(a));
		return snprintf(buf, n, "rank %d at op %lld (%s) waits for the rest of its group",
				r, (long long)(w - S->ix.off[r]), a);
	case W_ANY:
		clp_op_describe(&p->ops[R->pc], a, sizeof(a));
		return snprintf(buf, n, "rank %d (dataflow) has no op ready; the first not run is "
				"op %d (%s)", r, R->pc, a);
	default:
		return snprintf(buf, n, "rank %d stopped at op %d", r, R->pc);
	}
}

static clp_status deadlock(const sim *S, double t)
{
	char msg[2048], line[512];
	int len, shown = 0, stuck = S->s->nranks - S->ndone;

	len = snprintf(msg, sizeof(msg), "deadlock at t = %g: %d of %d ranks cannot go on", t,
		       stuck, S->s->nranks);
	for (int r = 0; r < S->s->nranks && shown < 6; r++) {
		if (S->rs[r].wait == W_DONE)
			continue;
		blocked_reason(S, r, line, sizeof(line));
		if (len < (int)sizeof(msg))
			len += snprintf(msg + len, sizeof(msg) - (size_t)len, "; %s", line);
		shown++;
	}
	if (stuck > shown && len < (int)sizeof(msg))
		snprintf(msg + len, sizeof(msg) - (size_t)len, "; and %d more", stuck - shown);
	return clp_error(CLP_ERR_STATE, "%s", msg);
}

/* What messages call an input: its file, or what made it. */
static const char *src(const char *file, const char *made)
{
	return file[0] ? file : made;
}

/* Devices of the ranks, the kind index in the cost table and the device memory. */
static clp_status place_ranks(sim *S)
{
	const clp_layout *l = S->o->layout;
	const clp_costs *c = S->o->costs;
	double ref = 1;

	if (l && l->nranks != S->s->nranks)
		return clp_error(CLP_ERR_INVALID, "simulator: the layout (%s) has %d ranks, the "
				 "schedule (%s) %d", src(l->file, "given"), l->nranks,
				 src(S->s->file, S->s->name), S->s->nranks);
	if (!l && S->cl->ndevices < S->s->nranks)
		return clp_error(CLP_ERR_INVALID, "simulator: the cluster (%s) has %d devices, the "
				 "schedule (%s) needs %d ranks (give a layout)",
				 src(S->cl->file, "given"), S->cl->ndevices,
				 src(S->s->file, S->s->name), S->s->nranks);
	/* The table's times hold on its own device kind: speeds count relative to that kind's. */
	for (int i = 0; c && i < S->cl->ndevices; i++)
		if (!strcmp(S->cl->devices[i].kind, c->device_kind)) {
			ref = S->cl->devices[i].speed;
			break;
		}
	for (int r = 0; r < S->s->nranks; r++) {
		int d = l ? l->ranks[r].device : r;
		const clp_device *dev;

		if (l && d < 0)
			d = clp_cluster_find_device(S->cl, l->ranks[r].device_id);
		if (d < 0 || d >= S->cl->ndevices)
			return clp_error(CLP_ERR_NOT_FOUND, "simulator: layout (%s) rank %d: device "
					 "\"%s\" is not in the cluster (%s)", l ? src(l->file, "given")
					 : "none", r, l ? l->ranks[r].device_id : "?",
					 src(S->cl->file, "given"));
		dev = &S->cl->devices[d];
		S->rs[r].dev = d;
		S->rs[r].speed = dev->speed / ref;
		S->rs[r].kind_idx = c ? clp_costs_kind_index(c, dev->kind) : -1;
		S->res->ranks[r].device = d;
		S->res->ranks[r].kind = S->rs[r].kind_idx;
		S->res->ranks[r].speed = S->rs[r].speed;
		S->res->ranks[r].memory_bytes = dev->memory_bytes;
	}
	return CLP_OK;
}

static clp_status setup(sim *S, const clp_sched *s, const clp_sim_opts *o, clp_sim_result *res)
{
	S->s = s;
	S->o = o;
	S->res = res;
	if (o->layout && !o->cluster)
		return clp_error(CLP_ERR_INVALID, "simulator: a layout names devices of a cluster; "
				 "give the cluster too");
	if (o->costs && o->costs->nstages != s->nstages)
		return clp_error(CLP_ERR_INVALID, "simulator: the cost table (%s) has %d stages, the "
				 "schedule (%s) %d", src(o->costs->file, "given"), o->costs->nstages,
				 src(s->file, s->name), s->nstages);
	CLP_TRY(clp_sched_index_build(s, &S->ix));
	if (!o->cluster)
		CLP_TRY(clp_cluster_ideal(s->nranks, &S->own_cluster));
	S->cl = o->cluster ? o->cluster : S->own_cluster;
	S->eager = o->eager_bytes >= 0 ? o->eager_bytes : (o->cluster ? S->cl->eager_bytes : 0);
	res->nranks = s->nranks;
	res->ranks = calloc((size_t)s->nranks, sizeof(*res->ranks));
	S->rs = calloc((size_t)s->nranks, sizeof(*S->rs));
	S->fl = calloc((size_t)S->ix.nops + 1, 1);
	S->inst_arrived = calloc((size_t)S->ix.ninst + 1, sizeof(int32_t));
	S->gspec = malloc(((size_t)s->ngroups + 1) * sizeof(*S->gspec));
	if (!res->ranks || !S->rs || !S->fl || !S->inst_arrived || !S->gspec)
		return clp_error(CLP_ERR_NOMEM, "simulator: out of host memory (%lld ops)",
				 (long long)S->ix.nops);
	for (int g = 0; g < s->ngroups; g++)
		S->gspec[g].latency_s = -1;
	for (int r = 0; r < s->nranks; r++) {
		S->rs[r].running = -1;
		if (s->ranks[r].mode == CLP_RANK_DATAFLOW && s->ranks[r].mem_cap > 0 &&
		    !(S->rs[r].held = calloc((size_t)s->nmb * (size_t)s->nsteps, sizeof(uint16_t))))
			return clp_error(CLP_ERR_NOMEM, "simulator: out of host memory");
	}
	for (int64_t g = 0; g < S->ix.nops; g++) {
		if (o->op_t0)
			o->op_t0[g] = -1;
		if (o->op_t1)
			o->op_t1[g] = -1;
	}
	clp_trace_init(&res->trace, s->nranks, o->trace_limit == SIZE_MAX ? 0 : o->trace_limit);
	snprintf(res->trace.title, sizeof(res->trace.title), "%s: %d ranks, %d micro-batches "
		 "(simulated)", s->name, s->nranks, s->nmb);
	CLP_TRY(clp_trace_stats_init(&S->stats, s->nranks, 0));
	CLP_TRY(place_ranks(S));
	return sim_static_memory(S);
}

static void finish(sim *S, clp_sim_result *res)
{
	double end = 0;

	for (int r = 0; r < S->s->nranks; r++)
		if (S->rs[r].finish > end)
			end = S->rs[r].finish;
	if (S->stats.t_end < end)
		S->stats.t_end = end;
	clp_trace_stats_finish(&S->stats);
	res->cycle_s = S->stats.span_s;
	res->step_s = res->cycle_s / (S->s->nsteps > 0 ? S->s->nsteps : 1);
	res->util_mean = S->stats.util_mean;
	res->busy_mean = S->stats.busy_mean;
	res->bubble = S->stats.bubble;
	for (int r = 0; r < S->s->nranks; r++) {
		clp_sim_rank *rr = &res->ranks[r];

		rr->compute_s = S->stats.rank[r].compute_s;
		rr->comm_s = S->stats.rank[r].comm_s;
		rr->busy_s = S->stats.rank[r].busy_s;
		rr->finish_s = S->rs[r].finish;
		rr->peak_bytes = S->rs[r].peak;
		if (rr->memory_bytes > 0 && rr->peak_bytes > rr->memory_bytes)
			res->over_memory++;
	}
}

static void teardown(sim *S)
{
	clp_sched_index_free(&S->ix);
	clp_cluster_free(S->own_cluster);
	clp_trace_stats_free(&S->stats);
	sim_map_free(&S->routes);
	sim_map_free(&S->res_slots);
	free(S->res_free);
	free(S->route_tab);
	free(S->heap);
	for (int r = 0; S->rs && r < S->s->nranks; r++)
		free(S->rs[r].held);
	free(S->rs);
	free(S->fl);
	free(S->inst_arrived);
	free(S->gspec);
}

clp_status clp_sim_run(const clp_sched *s, const clp_sim_opts *o, clp_sim_result *res)
{
	clp_sim_opts dflt;

	if (!o) {
		clp_sim_opts_default(&dflt);
		o = &dflt;
	}
	if (o->shared_cores > 0)
		return sim_shared_run(s, o, res);
	return sim_run_scaled(s, o, NULL, res);
}

clp_status sim_run_scaled(const clp_sched *s, const clp_sim_opts *o, const double *scale,
			  clp_sim_result *res)
{
	sim S = {0};
	clp_status st;
	double t = 0;

	memset(res, 0, sizeof(*res));
	S.scale = scale;
	st = setup(&S, s, o, res);
	for (int r = 0; st == CLP_OK && r < s->nranks && S.err == CLP_OK; r++)
		rank_step(&S, r, 0);
	while (st == CLP_OK && S.nheap && S.err == CLP_OK) {
		sim_event e = pop(&S);

		t = e.t;
		if (e.type == EV_RANK) {
			if (S.rs[e.rank].wait == W_RUN || S.rs[e.rank].wait == W_COLL ||
			    S.rs[e.rank].wait == W_GAP)
				rank_step(&S, e.rank, t);
		} else if (e.type == EV_XFER_START) {
			emit_xfer(&S, e.arg, e.rank, t, e.t2);
		} else {
			xfer_done(&S, e.arg, e.rank, t);
		}
	}
	if (st == CLP_OK && S.err != CLP_OK)
		st = S.err; /* the failing call recorded its message */
	if (st == CLP_OK && S.ndone < s->nranks)
		st = deadlock(&S, t);
	if (st == CLP_OK)
		finish(&S, res);
	teardown(&S);
	if (st != CLP_OK)
		clp_sim_result_free(res);
	return st;
}

void clp_sim_result_free(clp_sim_result *r)
{
	free(r->ranks);
	clp_trace_free(&r->trace);
	memset(r, 0, sizeof(*r));
}
