/* Traces: storage and the statistics every utilisation figure comes from (see trace.h). */
#include "engine/scenario/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/sched.h"

void clp_trace_init(clp_trace *t, int nranks, size_t limit)
{
	memset(t, 0, sizeof(*t));
	t->nranks = nranks;
	t->limit = limit;
}

void clp_trace_free(clp_trace *t)
{
	free(t->ev);
	memset(t, 0, sizeof(*t));
}

clp_status clp_trace_push(clp_trace *t, const clp_trace_event *e)
{
	if (t->limit && t->n >= t->limit) {
		t->dropped++;
		return CLP_OK;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		clp_trace_event *ev = realloc(t->ev, cap * sizeof(*ev));

		if (!ev)
			return clp_error(CLP_ERR_NOMEM, "trace: out of host memory (%zu events)", t->n);
		t->ev = ev;
		t->cap = cap;
	}
	t->ev[t->n++] = *e;
	if (e->rank >= t->nranks)
		t->nranks = e->rank + 1;
	return CLP_OK;
}

clp_status clp_trace_stats_init(clp_trace_stats *st, int nranks, double t_begin)
{
	memset(st, 0, sizeof(*st));
	st->rank = calloc((size_t)(nranks > 0 ? nranks : 1), sizeof(*st->rank));
	if (!st->rank)
		return clp_error(CLP_ERR_NOMEM, "trace stats: out of host memory");
	st->nranks = nranks;
	st->have_begin = t_begin >= 0;
	st->t_begin = st->have_begin ? t_begin : 0;
	st->t_end = st->t_begin;
	for (int r = 0; r < nranks; r++) {
		clp_trace_rank_stats *rs = &st->rank[r];

		rs->comm_a = rs->comm_b = rs->busy_a = rs->busy_b = NAN;
	}
	return CLP_OK;
}

void clp_trace_stats_free(clp_trace_stats *st)
{
	free(st->rank);
	memset(st, 0, sizeof(*st));
}

/* Grow the open interval [*a, *b] by [t0, t1] if they touch, else close it into *total. Callers
 * give intervals in nondecreasing t0, so a closed interval never needs reopening. */
static void merge(double *a, double *b, double *total, double t0, double t1)
{
	if (isnan(*a)) {
		*a = t0;
		*b = t1;
	} else if (t0 <= *b) {
		if (t1 > *b)
			*b = t1;
	} else {
		*total += *b - *a;
		*a = t0;
		*b = t1;
	}
}

void clp_trace_stats_add(clp_trace_stats *st, const clp_trace_event *e)
{
	clp_trace_rank_stats *rs;

	if (e->rank < 0 || e->rank >= st->nranks || !(e->t1 >= e->t0))
		return;
	if (!st->have_begin) {
		st->t_begin = st->t_end = e->t0;
		st->have_begin = 1;
	}
	if (e->t1 > st->t_end)
		st->t_end = e->t1;
	rs = &st->rank[e->rank];
	if (e->queue == CLP_TQ_COMPUTE)
		rs->compute_s += e->t1 - e->t0;
	else
		merge(&rs->comm_a, &rs->comm_b, &rs->comm_s, e->t0, e->t1);
	merge(&rs->busy_a, &rs->busy_b, &rs->busy_s, e->t0, e->t1);
}

void clp_trace_stats_finish(clp_trace_stats *st)
{
	double util = 0, busy = 0;

	st->span_s = st->t_end - st->t_begin;
	for (int r = 0; r < st->nranks; r++) {
		clp_trace_rank_stats *rs = &st->rank[r];

		if (!isnan(rs->comm_a))
			rs->comm_s += rs->comm_b - rs->comm_a;
		if (!isnan(rs->busy_a))
			rs->busy_s += rs->busy_b - rs->busy_a;
		rs->comm_a = rs->comm_b = rs->busy_a = rs->busy_b = NAN;
		if (st->span_s > 0) {
			util += rs->compute_s / st->span_s;
			busy += rs->busy_s / st->span_s;
		}
	}
	st->util_mean = st->nranks ? util / st->nranks : 0;
	st->busy_mean = st->nranks ? busy / st->nranks : 0;
	st->bubble = 1 - st->util_mean;
}

static int by_start(const void *a, const void *b)
{
	const clp_trace_event *x = a, *y = b;

	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

clp_status clp_trace_stats_compute(const clp_trace *t, double t_begin, clp_trace_stats *st)
{
	clp_trace_event *ev = malloc((t->n ? t->n : 1) * sizeof(*ev));

	if (!ev)
		return clp_error(CLP_ERR_NOMEM, "trace stats: out of host memory");
	if (clp_trace_stats_init(st, t->nranks, t_begin) != CLP_OK) {
		free(ev);
		return CLP_ERR_NOMEM;
	}
	memcpy(ev, t->ev, t->n * sizeof(*ev));
	qsort(ev, t->n, sizeof(*ev), by_start);
	for (size_t i = 0; i < t->n; i++)
		clp_trace_stats_add(st, &ev[i]);
	clp_trace_stats_finish(st);
	free(ev);
	return CLP_OK;
}

void clp_trace_event_label(const clp_trace_event *e, char *buf, size_t n)
{
	switch (e->kind) {
	case CLP_OP_FWD: snprintf(buf, n, "F%d", e->mb); break;
	case CLP_OP_BWD: snprintf(buf, n, "B%d", e->mb); break;
	case CLP_OP_BWD_B: snprintf(buf, n, "B%d", e->mb); break;
	case CLP_OP_BWD_W: snprintf(buf, n, "W%d", e->mb); break;
	case CLP_OP_OPT_STEP: snprintf(buf, n, "opt"); break;
	case CLP_OP_ALLREDUCE: snprintf(buf, n, "AR"); break;
	case CLP_OP_REDUCE: snprintf(buf, n, "R"); break;
	case CLP_OP_KFAC_CURV_A: snprintf(buf, n, "A%d", e->mb); break;
	case CLP_OP_KFAC_CURV_B: snprintf(buf, n, "G%d", e->mb); break;
	case CLP_OP_KFAC_SYNC: snprintf(buf, n, "sync"); break;
	case CLP_OP_KFAC_INV: snprintf(buf, n, "inv"); break;
	case CLP_OP_KFAC_PRECOND: snprintf(buf, n, "prec"); break;
	case CLP_OP_KFAC_INV_SYNC: snprintf(buf, n, "isync"); break;
	case CLP_OP_KFAC_PREC_SYNC: snprintf(buf, n, "psync"); break;
	case CLP_OP_OPT_PREP: snprintf(buf, n, "prep"); break;
	default: snprintf(buf, n, "%d", e->mb); break;
	}
}
