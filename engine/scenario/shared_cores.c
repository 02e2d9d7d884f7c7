/* Processor sharing of a machine's cores among compute ops (see shared_cores.h). */
#include "engine/scenario/shared_cores.h"

#include <stdlib.h>

typedef struct edge {
	double t;
	int up; /* +1 start, -1 end */
	size_t op;
} edge;

static int edge_cmp(const void *a, const void *b)
{
	const edge *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->up != y->up)
		return x->up - y->up; /* ends before starts at the same time */
	return x->op < y->op ? -1 : x->op > y->op;
}

clp_status clp_shared_cores_work(size_t n, const double *t0, const double *t1, int cores,
				 double *work)
{
	edge *e;
	double *at0;
	size_t ne = 0;
	double f = 0, last = 0;
	long running = 0;

	if (cores < 1)
		return clp_error(CLP_ERR_INVALID, "shared cores: %d cores (expected at least 1)", cores);
	e = malloc((2 * n + 1) * sizeof(*e));
	at0 = malloc((n + 1) * sizeof(*at0));
	if (!e || !at0) {
		free(e);
		free(at0);
		return clp_error(CLP_ERR_NOMEM, "shared cores: out of host memory (%zu ops)", n);
	}
	for (size_t i = 0; i < n; i++) {
		work[i] = 0;
		if (t0[i] < 0 || !(t1[i] > t0[i]))
			continue;
		e[ne++] = (edge){t0[i], 1, i};
		e[ne++] = (edge){t1[i], -1, i};
	}
	qsort(e, ne, sizeof(*e), edge_cmp);
	/* f = the integral of min(1, cores / running) from the first edge: an op's work is f at its
	 * end minus f at its start */
	for (size_t k = 0; k < ne; k++) {
		if (k > 0 && running > 0)
			f += (e[k].t - last) * (running > cores ? (double)cores / running : 1.0);
		last = e[k].t;
		if (e[k].up > 0) {
			at0[e[k].op] = f;
			running++;
		} else {
			work[e[k].op] = f - at0[e[k].op];
			running--;
		}
	}
	free(e);
	free(at0);
	return CLP_OK;
}

clp_status clp_trace_solo(clp_trace *t, int cores)
{
	double *a, *b, *w;
	size_t *idx, m = 0;
	clp_status st = CLP_OK;

	a = calloc(t->n + 1, sizeof(*a));
	b = calloc(t->n + 1, sizeof(*b));
	w = malloc((t->n + 1) * sizeof(*w));
	idx = malloc((t->n + 1) * sizeof(*idx));
	if (!a || !b || !w || !idx)
		st = clp_error(CLP_ERR_NOMEM, "shared cores: out of host memory (%zu events)", t->n);
	for (size_t i = 0; st == CLP_OK && i < t->n; i++)
		if (t->ev[i].queue == CLP_TQ_COMPUTE) {
			a[m] = t->ev[i].t0;
			b[m] = t->ev[i].t1;
			idx[m++] = i;
		}
	if (st == CLP_OK)
		st = clp_shared_cores_work(m, a, b, cores, w);
	for (size_t k = 0; st == CLP_OK && k < m; k++)
		if (b[k] > a[k])
			t->ev[idx[k]].t1 = a[k] + w[k];
	free(a);
	free(b);
	free(w);
	free(idx);
	return st;
}
