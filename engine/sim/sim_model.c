/* The simulator's cost and memory model: op durations from the cost table (or unit costs),
 * message and collective sizes, collective algorithms, link routes with their FCFS resources,
 * and the static memory of each rank. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sim/sim_internal.h"

double clp_sim_allreduce_s(int p, int64_t bytes, clp_link_spec l)
{
	if (p < 2)
		return 0;
	return 2.0 * (p - 1) * (l.latency_s + (double)bytes / ((double)p * l.bandwidth_Bps));
}

double clp_sim_reduce_s(int p, int64_t bytes, clp_link_spec l)
{
	int rounds = 0;

	while ((1 << rounds) < p)
		rounds++;
	return rounds * (l.latency_s + (double)bytes / l.bandwidth_Bps);
}

static double stage_time(const sim *S, int rank, int stage, int t)
{
	const sim_rank *R = &S->rs[rank];

	return clp_costs_time(S->o->costs, stage, t, R->kind_idx, R->speed);
}

/* Whether rank's list holds, before op (one of its ops) in op's step, an OPT_PREP of op's
 * stage: then that OPT_PREP ran the early part of op's optimizer step. */
static int prepped(const sim *S, int rank, const clp_op *op)
{
	const clp_rank_prog *p = &S->s->ranks[rank];

	if (op < p->ops || op >= p->ops + p->nops)
		return 0;
	for (const clp_op *q = op; q > p->ops && q[-1].step == op->step; q--)
		if (q[-1].kind == CLP_OP_OPT_PREP && q[-1].stage == op->stage)
			return 1;
	return 0;
}

/* The part of stage st's optimizer step an OPT_PREP runs (clp_stage_cost.prep_s). */
static double prep_share(const clp_costs *c, int st)
{
	const clp_stage_cost *sc = &c->stages[st];

	return sc->prep_s > 0 && sc->t[CLP_COST_OPT] > 0 ? sc->prep_s / sc->t[CLP_COST_OPT] : 0;
}

double sim_op_time(const sim *S, int rank, const clp_op *op)
{
	const clp_costs *c = S->o->costs;
	int st = op->stage, rc = S->o->recompute;
	double per_layer = 1;

	if (!c) {
		static const double unit[CLP_OP_KIND_COUNT] = {
			[CLP_OP_FWD] = 1,         [CLP_OP_BWD] = 2,         [CLP_OP_BWD_B] = 1,
			[CLP_OP_BWD_W] = 1,       [CLP_OP_KFAC_CURV_A] = 1, [CLP_OP_KFAC_CURV_B] = 1,
			[CLP_OP_KFAC_INV] = 1,    [CLP_OP_KFAC_PRECOND] = 1,
		};
		return unit[op->kind] + (rc && clp_op_is_bwd_input(op->kind) ? 1 : 0);
	}
	if (st < 0 || st >= c->nstages)
		return 0;
	if (op->layer >= 0 && c->stages[st].nlayers > 0)
		per_layer = 1.0 / c->stages[st].nlayers;
	switch (op->kind) {
	case CLP_OP_FWD: return stage_time(S, rank, st, CLP_COST_FWD);
	case CLP_OP_BWD:
		return stage_time(S, rank, st, CLP_COST_BWD) +
		       (rc ? stage_time(S, rank, st, CLP_COST_FWD) : 0);
	case CLP_OP_BWD_B:
		return stage_time(S, rank, st, CLP_COST_BWD_B) +
		       (rc ? stage_time(S, rank, st, CLP_COST_FWD) : 0);
	case CLP_OP_BWD_W: return stage_time(S, rank, st, CLP_COST_BWD_W);
	case CLP_OP_OPT_STEP:
		return (prepped(S, rank, op) ? 1 - prep_share(c, st) : 1) *
		       stage_time(S, rank, st, CLP_COST_OPT);
	case CLP_OP_OPT_PREP: return prep_share(c, st) * stage_time(S, rank, st, CLP_COST_OPT);
	case CLP_OP_KFAC_CURV_A: return per_layer * stage_time(S, rank, st, CLP_COST_KFAC_CURV_A);
	case CLP_OP_KFAC_CURV_B: return per_layer * stage_time(S, rank, st, CLP_COST_KFAC_CURV_B);
	case CLP_OP_KFAC_INV:
		if (op->factor && op->factor <= c->kfac_nfactors)
			per_layer *= c->kfac_share[op->factor - 1];
		if (op->mb >= 0) /* one of the phases (K-FAC: three, about a third each) */
			per_layer /= c->inv_phases > 0 ? c->inv_phases : 3;
		return per_layer * stage_time(S, rank, st, CLP_COST_KFAC_INV);
	case CLP_OP_KFAC_PRECOND: return per_layer * stage_time(S, rank, st, CLP_COST_KFAC_PRECOND);
	}
	return 0;
}

static int64_t out_bytes(const sim *S, int stage)
{
	const clp_costs *c = S->o->costs;

	if (!c)
		return 1;
	return stage >= 0 && stage < c->nstages ? c->stages[stage].out_bytes : 0;
}

/* An activation is the sender stage's output; a gradient is that of the receiver's output. */
int64_t sim_msg_bytes(const sim *S, const clp_op *send, const clp_op *recv)
{
	if (send->bytes > 0)
		return send->bytes;
	return out_bytes(S, send->kind == CLP_OP_SEND_ACT ? send->stage : recv->stage);
}

int64_t sim_coll_bytes(const sim *S, const clp_op *op)
{
	const clp_costs *c = S->o->costs;
	int st = op->stage;

	if (op->bytes > 0)
		return op->bytes;
	if (!c)
		return 1;
	if (op->what == CLP_RED_NORM || op->what == CLP_RED_LOSS)
		return 8;
	if (st < 0 || st >= c->nstages)
		return 0;
	if (op->kind == CLP_OP_KFAC_PREC_SYNC) /* the stage's K-FAC layers: most of its weights */
		return c->stages[st].param_bytes;
	if (op->kind == CLP_OP_KFAC_SYNC || op->kind == CLP_OP_KFAC_INV_SYNC)
		return c->stages[st].kfac_bytes / (c->stages[st].nlayers > 0 ? c->stages[st].nlayers : 1);
	return op->what == CLP_RED_GRADS ? clp_cost_grad_bytes(&c->stages[st]) : 0;
}

int64_t sim_act_bytes(const sim *S, int stage)
{
	const clp_costs *c = S->o->costs;

	if (!c)
		return 1;
	if (stage < 0 || stage >= c->nstages)
		return 0;
	return S->o->recompute ? c->stages[stage].out_bytes : c->stages[stage].act_bytes;
}

int64_t sim_act_w_bytes(const sim *S, int stage)
{
	const clp_costs *c = S->o->costs;

	if (!c)
		return 1;
	if (stage < 0 || stage >= c->nstages || S->o->recompute)
		return 0;
	return c->stages[stage].act_w_bytes;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

void sim_map_free(sim_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* The value stored under key, or -1 (slot returned in *at for an insert). */
static int64_t map_get(const sim_map *m, int64_t key, size_t *at)
{
	size_t mask = m->cap - 1, h;

	for (h = mix((uint64_t)key) & mask; m->vals[h] >= 0; h = (h + 1) & mask)
		if (m->keys[h] == key)
			return m->vals[h];
	*at = h;
	return -1;
}

static clp_status map_grow(sim_map *m)
{
	sim_map n = {0};

	n.cap = m->cap ? m->cap * 2 : 64;
	n.keys = malloc(n.cap * sizeof(int64_t));
	n.vals = malloc(n.cap * sizeof(int64_t));
	if (!n.keys || !n.vals) {
		sim_map_free(&n);
		return clp_error(CLP_ERR_NOMEM, "simulator: out of host memory");
	}
	for (size_t i = 0; i < n.cap; i++)
		n.vals[i] = -1;
	for (size_t i = 0; i < m->cap; i++)
		if (m->vals[i] >= 0) {
			size_t at = 0;

			map_get(&n, m->keys[i], &at);
			n.keys[at] = m->keys[i];
			n.vals[at] = m->vals[i];
		}
	n.n = m->n;
	sim_map_free(m);
	*m = n;
	return CLP_OK;
}

static clp_status map_put(sim_map *m, int64_t key, int64_t val)
{
	size_t at = 0;

	if (2 * (m->n + 1) > m->cap)
		CLP_TRY(map_grow(m));
	map_get(m, key, &at);
	m->keys[at] = key;
	m->vals[at] = val;
	m->n++;
	return CLP_OK;
}

static clp_status grow(void **p, int64_t *cap, int64_t need, size_t size)
{
	int64_t c = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return CLP_OK;
	while (c < need)
		c *= 2;
	q = realloc(*p, (size_t)c * size);
	if (!q)
		return clp_error(CLP_ERR_NOMEM, "simulator: out of host memory");
	*p = q;
	*cap = c;
	return CLP_OK;
}

/* Routes are resolved once per device pair; resources get dense slots in res_free. */
clp_status sim_route_of(sim *S, int src_rank, int dst_rank, sim_route *out)
{
	int a = S->rs[src_rank].dev, b = S->rs[dst_rank].dev;
	int64_t key = (int64_t)a * S->cl->ndevices + b, idx, slot = -1;
	size_t at;
	clp_route rt;

	if (S->routes.cap && (idx = map_get(&S->routes, key, &at)) >= 0) {
		*out = S->route_tab[idx];
		return CLP_OK;
	}
	rt = clp_cluster_route(S->cl, a, b);
	if (rt.resource >= 0 && !isinf(rt.spec.bandwidth_Bps)) {
		if (!S->res_slots.cap || (slot = map_get(&S->res_slots, rt.resource, &at)) < 0) {
			CLP_TRY(grow((void **)&S->res_free, &S->res_cap, S->nres + 1, sizeof(double)));
			slot = S->nres++;
			S->res_free[slot] = 0;
			CLP_TRY(map_put(&S->res_slots, rt.resource, slot));
		}
	}
	CLP_TRY(grow((void **)&S->route_tab, &S->route_cap, S->nroute + 1, sizeof(sim_route)));
	S->route_tab[S->nroute] = (sim_route){rt.spec, slot};
	CLP_TRY(map_put(&S->routes, key, S->nroute));
	*out = S->route_tab[S->nroute++];
	return CLP_OK;
}

/* A ring order's cost: its slowest hop (w: a hop's time), then the sum of its hops. */
static void ring_cost(const double *w, int n, const int *ord, double *mx, double *sum)
{
	*mx = 0;
	*sum = 0;
	for (int i = 0; i < n; i++) {
		double h = w[ord[i] * n + ord[(i + 1) % n]];

		*mx = h > *mx ? h : *mx;
		*sum += h;
	}
}

static int ring_better(const double *w, int n, const int *a, const int *b)
{
	double ma, sa, mb, sb;

	ring_cost(w, n, a, &ma, &sa);
	ring_cost(w, n, b, &mb, &sb);
	return ma < mb || (ma == mb && sa < sb - 1e-15);
}

/* Every order of ord[k .. n) after ord[0 .. k) (member 0 stays first); the best into best. */
static void ring_permute(const double *w, int n, int *ord, int k, int *best)
{
	if (k == n) {
		if (ring_better(w, n, ord, best))
			memcpy(best, ord, (size_t)n * sizeof(int));
		return;
	}
	for (int i = k; i < n; i++) {
		int t = ord[k];

		ord[k] = ord[i];
		ord[i] = t;
		ring_permute(w, n, ord, k + 1, best);
		ord[i] = ord[k];
		ord[k] = t;
	}
}

/* The ring follows the links: the order of the group's members (indices into ord) that
 * minimises the slowest hop, ties broken by the total (w[i * n + j]: hop i -> j). Every order up
 * to 8 members; beyond, the better of rank order and a nearest-neighbour ring, improved by
 * reversals (2-opt) up to 24 members (a pass costs n^3: every simulation of a 1,000-node
 * SkipPipe schedule orders rings of 50-100). Never worse than rank order. 0: out of memory. */
static int ring_order(const double *w, int n, int *ord)
{
	int *cur = malloc((size_t)n * sizeof(int)), *used = calloc((size_t)n, sizeof(int));

	for (int i = 0; i < n; i++)
		ord[i] = i;
	if (!cur || !used) {
		free(cur);
		free(used);
		return 0;
	}
	memcpy(cur, ord, (size_t)n * sizeof(int));
	if (n <= 8) {
		ring_permute(w, n, cur, 1, ord);
		free(cur);
		free(used);
		return 1;
	}
	used[0] = 1;
	for (int i = 1; i < n; i++) {
		int b = -1;

		for (int v = 0; v < n; v++)
			if (!used[v] && (b < 0 || w[cur[i - 1] * n + v] < w[cur[i - 1] * n + b]))
				b = v;
		cur[i] = b;
		used[b] = 1;
	}
	if (ring_better(w, n, cur, ord))
		memcpy(ord, cur, (size_t)n * sizeof(int));
	memcpy(cur, ord, (size_t)n * sizeof(int));
	for (int pass = 0, again = n <= 24; again && pass < 8; pass++) {
		again = 0;
		for (int i = 1; i + 1 < n; i++)
			for (int j = i + 1; j < n; j++) {
				for (int a = i, b = j; a < b; a++, b--) {
					int t = cur[a];

					cur[a] = cur[b];
					cur[b] = t;
				}
				if (ring_better(w, n, cur, ord)) {
					memcpy(ord, cur, (size_t)n * sizeof(int));
					again = 1;
				} else {
					memcpy(cur, ord, (size_t)n * sizeof(int));
				}
			}
	}
	free(cur);
	free(used);
	return 1;
}

/* The slowest link between ring neighbours of the op's group (highest latency, least
 * bandwidth), the ring ordered by ring_order, a hop's time being its latency plus a 1/p chunk
 * of the op's bytes (before: rank order, so a ring could cross an ocean several times). */
static clp_link_spec group_spec(sim *S, int g, int64_t bytes)
{
	const clp_group *grp = &S->s->groups[g];
	clp_link_spec w = {0, INFINITY}, *sp = NULL;
	int n = grp->n, *ord = NULL;
	double *wt = NULL;

	if (S->gspec[g].latency_s >= 0)
		return S->gspec[g];
	if (n < 2) {
		S->gspec[g] = w;
		return w;
	}
	ord = malloc((size_t)n * sizeof(int));
	sp = malloc((size_t)n * (size_t)n * sizeof(*sp));
	wt = malloc((size_t)n * (size_t)n * sizeof(double));
	if (!ord || !sp || !wt)
		S->err = CLP_ERR_NOMEM;
	for (int i = 0; i < n && !S->err; i++)
		for (int j = 0; j < n && !S->err; j++) {
			sim_route rt;

			wt[i * n + j] = 0;
			if (i == j)
				continue;
			if (sim_route_of(S, grp->ranks[i], grp->ranks[j], &rt) != CLP_OK) {
				S->err = CLP_ERR_NOMEM;
				break;
			}
			sp[i * n + j] = rt.spec;
			wt[i * n + j] = rt.spec.latency_s + (double)bytes / n / rt.spec.bandwidth_Bps;
		}
	if (!S->err && !ring_order(wt, n, ord))
		S->err = CLP_ERR_NOMEM;
	for (int i = 0; i < n && !S->err; i++) {
		clp_link_spec l = sp[ord[i] * n + ord[(i + 1) % n]];

		if (l.latency_s > w.latency_s)
			w.latency_s = l.latency_s;
		if (l.bandwidth_Bps < w.bandwidth_Bps)
			w.bandwidth_Bps = l.bandwidth_Bps;
	}
	free(ord);
	free(sp);
	free(wt);
	S->gspec[g] = w;
	return w;
}

double sim_coll_time(sim *S, const clp_op *op, int64_t bytes)
{
	int p = S->s->groups[op->group].n;
	clp_link_spec l = group_spec(S, op->group, bytes);

	return op->kind == CLP_OP_REDUCE ? clp_sim_reduce_s(p, bytes, l)
					 : clp_sim_allreduce_s(p, bytes, l);
}

/* Parameters + gradients + optimizer state (+ workspace, + the 16-bit weight copy of a 16-bit
 * table) of every stage a rank runs, plus K-FAC factors where it runs K-FAC items. */
clp_status sim_static_memory(sim *S)
{
	const clp_costs *c = S->o->costs;
	int n = c ? c->nstages : 0;
	uint8_t *held = calloc((size_t)(n > 0 ? n : 1), 2);

	if (!held)
		return clp_error(CLP_ERR_NOMEM, "simulator: out of host memory");
	for (int r = 0; r < S->s->nranks; r++) {
		int64_t bytes = 0;

		memset(held, 0, (size_t)(n > 0 ? n : 1) * 2);
		for (int i = 0; c && i < S->s->ranks[r].nops; i++) {
			const clp_op *op = &S->s->ranks[r].ops[i];
			int st = op->stage;

			if (st < 0 || st >= n)
				continue;
			if (op->kind == CLP_OP_FWD && !held[2 * st]) {
				held[2 * st] = 1;
				/* each field is at most CLP_COST_MAX_BYTES: the sum of one
				 * stage fits, the total over stages saturates */
				bytes = clp_bytes_add(bytes, c->stages[st].param_bytes +
							     clp_cost_grad_bytes(&c->stages[st]) +
							     c->stages[st].opt_bytes +
							     c->stages[st].work_bytes +
							     clp_costs_wcopy_bytes(c, st));
			}
			if (clp_op_is_kfac(op->kind) &&
			    !held[2 * st + 1]) {
				held[2 * st + 1] = 1;
				bytes = clp_bytes_add(bytes, c->stages[st].kfac_bytes);
			}
		}
		S->res->ranks[r].static_bytes = bytes;
		S->rs[r].mem = S->rs[r].peak = bytes;
	}
	free(held);
	return CLP_OK;
}
