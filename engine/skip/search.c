/* The path scheduler (docs/SKIPPIPE.md, "The scheduler"): a construction portfolio, then
 * simulated annealing whose every candidate is scored by the simulator on the schedule the
 * executor would run, so collisions on nodes, link contention and the memory cap are in the
 * objective exactly as the simulator models them.
 *
 * Moves keep every rule by construction (and are checked again): move a hop to another node of
 * its stage; re-plan one micro-batch's nodes and order (same stages) with the planner; exchange
 * stages between two micro-batches by re-planning both from their pooled stages (the balance is
 * kept); swap or unswap two adjacent stages. With a memory cap the hand-off graph stays acyclic.
 * Half of the moves go to the micro-batches that finish last. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"
#include "cl/clock.h"

void clp_skip_opts_default(clp_skip_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->iterations = 3000;
}

typedef struct search {
	const skip_ctx *c;
	clp_skip_paths *p;
	skip_graph g;
	int use_graph;
	skip_build_w w;
	uint64_t rng;
	double *mb_end, *load, *ncost;
	int *cap, *order;
	clp_skip_hop *old, *nw; /* [2 * H] undo and new hops of up to two micro-batches */
	int moved[2], nmoved;
	int in_graph[2]; /* the moved one's current hops are in the hand-off graph */
	int flipped;     /* a node whose priority the move flipped, or -1 */
	double iter, energy;
} search;

static double energy(const search *z, double iter, const double *end)
{
	double sum = 0;

	for (int m = 0; m < z->p->nmb; m++)
		sum += end[m];
	return iter + 0.05 * sum / (z->p->nmb > 0 ? z->p->nmb : 1);
}

static void compute_load(search *z)
{
	const clp_skip_paths *p = z->p;

	memset(z->load, 0, (size_t)z->c->nnodes * sizeof(double));
	for (int i = 0; i < p->hop_start[p->nmb]; i++)
		z->load[p->hops[i].node] += z->c->work[p->hops[i].node];
}

static clp_skip_hop *hops_of(const search *z, int m)
{
	return z->p->hops + z->p->hop_start[m];
}

/* Take micro-batches out (their hops saved for undo, their hand-offs out of the graph). */
static void take_out(search *z, const int *mbs, int n)
{
	int H = z->c->H;

	z->nmoved = n;
	for (int k = 0; k < n; k++) {
		z->moved[k] = mbs[k];
		z->in_graph[k] = 0;
		memcpy(z->old + k * H, hops_of(z, mbs[k]), (size_t)H * sizeof(clp_skip_hop));
		if (z->use_graph)
			skip_graph_remove_path(&z->g, z->p, mbs[k]);
	}
}

/* Put the saved hops back (and their hand-offs, in place of any new ones). */
static void undo(search *z)
{
	int H = z->c->H;

	if (z->flipped >= 0)
		z->p->node_prio[z->flipped] ^= 1;
	z->flipped = -1;
	for (int k = 0; k < z->nmoved; k++) {
		int m = z->moved[k];

		if (z->use_graph && z->in_graph[k])
			skip_graph_remove_path(&z->g, z->p, m);
		memcpy(hops_of(z, m), z->old + k * H, (size_t)H * sizeof(clp_skip_hop));
		if (z->use_graph)
			skip_graph_add_path(&z->g, z->p, m);
	}
	z->nmoved = 0;
}

/* New hops for the k-th moved micro-batch: the rules of one path and the hand-off graph (added
 * says the planner put them in already). */
static int install(search *z, int k, const clp_skip_hop *h, int added)
{
	int m = z->moved[k], H = z->c->H;

	memcpy(hops_of(z, m), h, (size_t)H * sizeof(*h));
	z->in_graph[k] = added;
	if (clp_skip_check_path(&z->c->env->rules, z->p, m) != CLP_OK)
		return 0;
	if (z->use_graph && !added) {
		if (skip_graph_try_path(&z->g, h, H, m, NULL) != 1)
			return 0;
		z->in_graph[k] = 1;
	}
	return 1;
}

/* Visit costs for re-planning: compute, the load of others, and noise for variety. */
static void fill_ncost(search *z)
{
	for (int y = 0; y < z->c->nnodes; y++)
		z->ncost[y] = (z->c->work[y] + z->w.load_w * z->load[y]) *
			      (0.85 + 0.3 * skip_uniform(&z->rng));
}

static int move_node(search *z, int m)
{
	const skip_ctx *c = z->c;
	int H = c->H, i = (int)(skip_rand(&z->rng) % (uint64_t)H);
	int s = hops_of(z, m)[i].stage, n = c->st_first[s + 1] - c->st_first[s], y;

	if (n < 2)
		return 0;
	y = c->st_nodes[c->st_first[s] + (int)(skip_rand(&z->rng) % (uint64_t)n)];
	if (y == hops_of(z, m)[i].node)
		return 0;
	take_out(z, &m, 1);
	memcpy(z->nw, z->old, (size_t)H * sizeof(clp_skip_hop));
	z->nw[i].node = y;
	return install(z, 0, z->nw, 0);
}

static int move_swap(search *z, int m)
{
	int H = z->c->H, at[64], n = 0, i;
	const clp_skip_hop *h = hops_of(z, m);

	for (i = 0; i + 1 < H && n < 64; i++)
		if (h[i].stage + 1 == h[i + 1].stage || h[i].stage == h[i + 1].stage + 1)
			at[n++] = i;
	if (!n)
		return 0;
	i = at[skip_rand(&z->rng) % (uint64_t)n];
	take_out(z, &m, 1);
	memcpy(z->nw, z->old, (size_t)H * sizeof(clp_skip_hop));
	z->nw[i] = z->old[i + 1];
	z->nw[i + 1] = z->old[i];
	return install(z, 0, z->nw, 0);
}

/* Re-plan mbs (one or two) from their pooled stages; the planner adds the hand-offs. */
static int move_replan(search *z, const int *mbs, int n)
{
	const skip_ctx *c = z->c;
	int H = c->H;

	memset(z->cap, 0, (size_t)c->S * sizeof(int));
	for (int k = 0; k < n; k++)
		for (int i = 0; i < H; i++) {
			const clp_skip_hop *h = &hops_of(z, mbs[k])[i];

			z->cap[h->stage]++;
			z->load[h->node] -= c->work[h->node];
		}
	take_out(z, mbs, n);
	for (int k = 0; k < n; k++) {
		int m = mbs[k];
		skip_plan_in in = {z->p->origin[m], m, z->cap, n - k, z->ncost, z->w.edge_w, 0, 8,
				   z->use_graph ? &z->g : NULL};
		int ok;

		fill_ncost(z);
		if (skip_plan_path(c, &in, z->nw + k * H) != CLP_OK)
			return 0;
		ok = install(z, k, z->nw + k * H, 1);
		for (int i = 0; i < H; i++) {
			z->cap[z->nw[k * H + i].stage]--;
			z->load[z->nw[k * H + i].node] += c->work[z->nw[k * H + i].node];
		}
		if (!ok)
			return 0;
	}
	return 1;
}

/* A micro-batch: half the time one of the last fifth to finish. */
static int pick_mb(search *z)
{
	int N = z->p->nmb, k = N / 5 > 0 ? N / 5 : 1;

	if (skip_uniform(&z->rng) < 0.5)
		return z->order[N - 1 - (int)(skip_rand(&z->rng) % (uint64_t)k)];
	return (int)(skip_rand(&z->rng) % (uint64_t)N);
}

/* order: micro-batches by end time (insertion sort: N is at most 1024). */
static void sort_by_end(search *z)
{
	for (int m = 0; m < z->p->nmb; m++)
		z->order[m] = m;
	for (int i = 1; i < z->p->nmb; i++)
		for (int j = i; j > 0 && z->mb_end[z->order[j]] < z->mb_end[z->order[j - 1]]; j--) {
			int t = z->order[j];

			z->order[j] = z->order[j - 1];
			z->order[j - 1] = t;
		}
}

static int try_move(search *z)
{
	double u = skip_uniform(&z->rng);
	int a = pick_mb(z), mbs[2];

	z->nmoved = 0;
	z->flipped = -1;
	if (u < 0.08 || z->c->H == 0) { /* a node's priority: forwards or backwards first */
		z->flipped = (int)(skip_rand(&z->rng) % (uint64_t)z->c->nnodes);
		z->p->node_prio[z->flipped] ^= 1;
		return 1;
	}
	if (u < 0.38)
		return move_node(z, a);
	if (u < 0.62) {
		mbs[0] = a;
		return move_replan(z, mbs, 1);
	}
	if (u < 0.92 || z->c->env->rules.max_swaps == 0) {
		mbs[0] = a;
		mbs[1] = (int)(skip_rand(&z->rng) % (uint64_t)z->p->nmb);
		if (mbs[1] == a)
			return 0;
		if (skip_uniform(&z->rng) < 0.5) { /* the later one plans first */
			mbs[0] = mbs[1];
			mbs[1] = a;
		}
		return move_replan(z, mbs, 2);
	}
	return move_swap(z, a);
}

/* The construction portfolio: a few trade-offs between locality and load, each with every node
 * running backwards first and with every node running forwards first; the best wins. */
static const skip_build_w portfolio[] = {
	{0.5, 1.0, 1.0}, {1.0, 1.0, 1.0}, {0.25, 0.5, 1.0}, {1.0, 2.0, 0.5},
	{2.0, 2.0, 1.0}, {0.0, 1.0, 1.0}, {0.5, 0.0, 2.0}, {0.1, 3.0, 1.0},
	{0.05, 0.2, 1.0}, {0.0, 0.3, 1.0}, {0.02, 0.05, 1.0}, {0.0, 0.0, 1.0},
};

static void keep(clp_skip_paths *dst, const clp_skip_paths *src)
{
	if (src->hop_start[src->nmb])
		memcpy(dst->hops, src->hops, (size_t)src->hop_start[src->nmb] * sizeof(clp_skip_hop));
	memcpy(dst->node_prio, src->node_prio, (size_t)src->nnodes);
}

static clp_status construct(search *z, clp_skip_paths *best)
{
	double best_e = INFINITY;

	for (size_t i = 0; i < sizeof(portfolio) / sizeof(portfolio[0]); i++) {
		CLP_TRY(skip_build(z->c, z->p, &portfolio[i], 0));
		for (int pol = 0; pol < 2; pol++) {
			double it, e;

			memset(z->p->node_prio, pol, (size_t)z->p->nnodes);
			CLP_TRY(skip_eval(z->c, z->p, &it, z->mb_end));
			e = energy(z, it, z->mb_end);
			if (it < z->iter || (it == z->iter && e < best_e)) {
				z->iter = it;
				best_e = e;
				z->w = portfolio[i];
				keep(best, z->p);
			}
		}
	}
	keep(z->p, best);
	return CLP_OK;
}

static clp_status anneal(search *z, const clp_skip_opts *o, clp_skip_paths *best,
			 clp_skip_report *rep)
{
	double t0 = clp_now(), temp0, best_iter, best_e, *end2;

	CLP_TRY(skip_eval(z->c, z->p, &z->iter, z->mb_end));
	z->energy = energy(z, z->iter, z->mb_end);
	best_iter = z->iter;
	best_e = z->energy;
	temp0 = 0.003 * z->iter;
	end2 = malloc(((size_t)z->p->nmb + 1) * sizeof(double));
	if (!end2)
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	sort_by_end(z);
	compute_load(z);
	for (int it = 0; it < o->iterations; it++) {
		double el = clp_now() - t0, prog = (double)it / o->iterations, iter, e, temp;

		if (o->time_limit_s > 0 && el > o->time_limit_s)
			break;
		if (o->time_limit_s > 0 && el / o->time_limit_s > prog)
			prog = el / o->time_limit_s;
		temp = temp0 * (1 - prog) * (1 - prog);
		if (!try_move(z)) {
			undo(z);
			compute_load(z);
			continue;
		}
		rep->evaluations++;
		if (skip_eval(z->c, z->p, &iter, end2) != CLP_OK) {
			free(end2);
			return CLP_ERR_STATE; /* the message is set */
		}
		e = energy(z, iter, end2);
		if (e <= z->energy || (temp > 0 && skip_uniform(&z->rng) < exp((z->energy - e) / temp))) {
			z->energy = e;
			z->iter = iter;
			memcpy(z->mb_end, end2, (size_t)z->p->nmb * sizeof(double));
			sort_by_end(z);
			rep->accepted++;
			z->nmoved = 0;
			z->flipped = -1;
			if (iter < best_iter || (iter == best_iter && e < best_e)) {
				best_iter = iter;
				best_e = e;
				keep(best, z->p);
			}
		} else {
			undo(z);
		}
		compute_load(z);
		if (o->verbose && (it + 1) % 500 == 0)
			fprintf(stderr, "skip search: %d moves, %d accepted, now %.4g s, best %.4g s\n",
				it + 1, rep->accepted, z->iter, best_iter);
	}
	free(end2);
	keep(z->p, best);
	z->iter = best_iter;
	return CLP_OK;
}

clp_status clp_skip_schedule(const clp_skip_env *e, clp_skip_paths *p, const clp_skip_opts *o,
			     clp_skip_report *rep)
{
	clp_skip_opts dflt;
	clp_skip_report rdummy;
	skip_ctx c;
	search z;
	clp_skip_paths *best = NULL;
	double t0 = clp_now();
	int N = p->nmb, H = e->rules.path_len - 1;
	clp_status st;

	if (!o) {
		clp_skip_opts_default(&dflt);
		o = &dflt;
	}
	if (!rep)
		rep = &rdummy;
	memset(rep, 0, sizeof(*rep));
	CLP_TRY(clp_skip_check_config(&e->rules, p));
	CLP_TRY(skip_ctx_init(&c, e, p));
	memset(&z, 0, sizeof(z));
	z.c = &c;
	z.p = p;
	z.rng = o->seed * 0x9e3779b97f4a7c15ULL + 12345;
	z.iter = INFINITY;
	z.flipped = -1;
	z.use_graph = e->rules.memory > 0 && e->rules.deadlock_free;
	z.mb_end = malloc(((size_t)N + 1) * sizeof(double));
	z.load = malloc((size_t)c.nnodes * sizeof(double));
	z.ncost = malloc((size_t)c.nnodes * sizeof(double));
	z.cap = malloc((size_t)c.S * sizeof(int));
	z.order = malloc(((size_t)N + 1) * sizeof(int));
	z.old = malloc((2 * (size_t)H + 1) * sizeof(clp_skip_hop));
	z.nw = malloc((2 * (size_t)H + 1) * sizeof(clp_skip_hop));
	st = !z.mb_end || !z.load || !z.ncost || !z.cap || !z.order || !z.old || !z.nw
		     ? clp_error(CLP_ERR_NOMEM, "skip: out of host memory")
		     : CLP_OK;
	if (st == CLP_OK)
		st = skip_build(&c, p, &(skip_build_w){0.5, 1, 1}, 0); /* sizes the hops */
	if (st == CLP_OK)
		st = clp_skip_paths_copy(p, &best);
	if (st == CLP_OK)
		st = construct(&z, best);
	rep->construct_iter_s = z.iter;
	rep->construct_s = clp_now() - t0;
	if (st == CLP_OK && z.use_graph) {
		st = skip_graph_init(&z.g, c.nnodes);
		for (int m = 0; m < N && st == CLP_OK; m++)
			st = skip_graph_add_path(&z.g, p, m);
	}
	t0 = clp_now();
	if (st == CLP_OK && o->iterations > 0)
		st = anneal(&z, o, best, rep);
	rep->search_s = clp_now() - t0;
	rep->iter_s = z.iter;
	if (st == CLP_OK)
		st = clp_skip_validate(&e->rules, p);
	if (z.use_graph)
		skip_graph_free(&z.g);
	free(z.mb_end);
	free(z.load);
	free(z.ncost);
	free(z.cap);
	free(z.order);
	free(z.old);
	free(z.nw);
	clp_skip_paths_free(best);
	skip_ctx_free(&c);
	return st;
}
