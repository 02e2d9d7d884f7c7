/* The path scheduler (docs/SKIPPIPE.md, "The scheduler"): a population of starts, then
 * simulated annealing whose every candidate is scored by the simulator on the schedule the
 * executor would run, so collisions on nodes, link contention and the memory cap are in the
 * objective exactly as the simulator models them.
 *
 * Starts: the construction portfolio (plan.c), chain starts (every origin's micro-batches on one
 * path, the origins' paths on disjoint nodes where the nodes allow) and, when given, the
 * caller's path set. The best few are annealed in turn; the best iteration time seen is kept,
 * so the result is never worse than any start.
 *
 * Moves keep every rule by construction (and are checked again). On one micro-batch: move a hop
 * to another node of its stage; re-plan its nodes and order (same stages) with the planner;
 * exchange stages between two micro-batches by re-planning both from their pooled stages (the
 * balance is kept); swap or unswap two adjacent stages. On whole origins (structures that
 * one-micro-batch moves reach only through worse states): re-plan all micro-batches of one or
 * two origins together from their pooled stages, as one path per origin (a chain) when the
 * stages divide; exchange the paths of two origins; move all of an origin's visits of a node to
 * another node of the stage; exchange two nodes of a stage in every path. And flip a node's
 * priority. With a memory cap the hand-off graph stays acyclic. Half of the moves go to the
 * micro-batches (or their origins) that finish last. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"
#include "cl/base/clock.h"

void clp_skip_opts_default(clp_skip_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->iterations = 3000;
}

/* The starting temperature as a fraction of the iteration time: a move that costs 1 % of the
 * iteration is accepted with probability 1/e at the start, so the search can climb out of the
 * basin of its start; it falls quadratically to 0 (0.3 % never left the start's basin on the
 * authors' allocation; 5 % wandered off and ended worse). */
#define TEMP_FRAC 0.01
/* Starts annealed (the best by energy among the population). */
#define NSTARTS 3
/* Chain starts built (different origin orders, spreads and noise; each costs a re-plan of every
 * origin and two simulations). 12 found the best chain start on the authors' allocation for
 * some seeds only, 48 for every seed tried. */
#define NCHAIN 48

typedef struct search {
	const skip_ctx *c;
	clp_skip_paths *p;
	skip_graph g;
	int use_graph;
	skip_build_w w;
	uint64_t rng;
	double *mb_end, *load, *ncost;
	int *cap, *order;
	int norig, *orig, *ofirst, *omb; /* origins; their mbs: omb[ofirst[k] .. ofirst[k + 1]) */
	int *mb_orig;                    /* [N] index of mb's origin in orig */
	clp_skip_hop *old, *nw;          /* [N * H] undo and new hops of the moved micro-batches */
	int *moved, nmoved;
	unsigned char *in_graph; /* the moved one's current hops are in the hand-off graph */
	int flipped;             /* a node whose priority the move flipped, or -1 */
	double iter, energy;
	double noise;
	/* the best seen over all starts */
	clp_skip_paths *best;
	double best_iter, best_e;
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

static int rnd(search *z, int n)
{
	return n > 0 ? (int)(skip_rand(&z->rng) % (uint64_t)n) : 0;
}

/* Take micro-batches out (their hops saved for undo, their hand-offs out of the graph). */
static void take_out(search *z, const int *mbs, int n)
{
	int H = z->c->H;

	z->nmoved = n;
	for (int k = 0; k < n; k++) {
		z->moved[k] = mbs[k];
		z->in_graph[k] = 0;
		memcpy(z->old + (size_t)k * H, hops_of(z, mbs[k]), (size_t)H * sizeof(clp_skip_hop));
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
		memcpy(hops_of(z, m), z->old + (size_t)k * H, (size_t)H * sizeof(clp_skip_hop));
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

/* Install every moved micro-batch's new hops (z->nw[k * H ..]). */
static int install_all(search *z)
{
	for (int k = 0; k < z->nmoved; k++)
		if (!install(z, k, z->nw + (size_t)k * z->c->H, 0))
			return 0;
	return 1;
}

/* Visit costs for re-planning: compute, the load of others, and noise for variety (z->noise:
 * the relative width, 0.3 in the search). */
static void fill_ncost(search *z, double load_w)
{
	for (int y = 0; y < z->c->nnodes; y++)
		z->ncost[y] = (z->c->work[y] + load_w * z->load[y]) *
			      (1 - z->noise / 2 + z->noise * skip_uniform(&z->rng));
}

static int move_node(search *z, int m)
{
	const skip_ctx *c = z->c;
	int H = c->H, i = rnd(z, H);
	int s = hops_of(z, m)[i].stage, n = c->st_first[s + 1] - c->st_first[s], y;

	if (n < 2)
		return 0;
	y = c->st_nodes[c->st_first[s] + rnd(z, n)];
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
	i = at[rnd(z, n)];
	take_out(z, &m, 1);
	memcpy(z->nw, z->old, (size_t)H * sizeof(clp_skip_hop));
	z->nw[i] = z->old[i + 1];
	z->nw[i + 1] = z->old[i];
	return install(z, 0, z->nw, 0);
}

/* Plan the k-th moved micro-batch, or (unit > 1) one path for the `unit` moved micro-batches
 * k .. k + unit - 1 together (a chain: they share it), against z->cap counted in units. The
 * planner adds the first one's hand-offs; the others' are the same edges. */
static int plan_moved(search *z, int k, int unit, int remaining, double load_w)
{
	const skip_ctx *c = z->c;
	int H = c->H, m = z->moved[k];
	skip_plan_in in = {z->p->origin[m], m, z->cap, remaining, z->ncost, z->w.edge_w, 0, 8,
			   z->use_graph ? &z->g : NULL};
	clp_skip_hop *h = z->nw + (size_t)k * H;

	fill_ncost(z, load_w);
	if (skip_plan_path(c, &in, h) != CLP_OK)
		return 0;
	for (int j = 0; j < unit; j++) {
		if (j > 0)
			memcpy(z->nw + (size_t)(k + j) * H, h, (size_t)H * sizeof(*h));
		if (!install(z, k + j, h, j == 0))
			return 0;
	}
	for (int i = 0; i < H; i++) {
		z->cap[h[i].stage]--;
		z->load[h[i].node] += unit * c->work[h[i].node];
	}
	return 1;
}

/* Re-plan micro-batches mbs (n of them, grouped by origin when chain) from their pooled stages.
 * chain: the micro-batches of each origin (given consecutively, counts in cnt[]) share one
 * path, when every pooled stage count divides by the group sizes (all equal); else one by one.
 * Returns 0 when no valid re-plan was found, 1 when one was, 2 when one was as chains. */
static int replan(search *z, const int *mbs, int n, const int *cnt, int ngroups, int chain,
		  double load_w)
{
	const skip_ctx *c = z->c;
	int H = c->H, unit = chain ? cnt[0] : 1;

	memset(z->cap, 0, (size_t)c->S * sizeof(int));
	for (int k = 0; k < n; k++)
		for (int i = 0; i < H; i++) {
			const clp_skip_hop *h = &hops_of(z, mbs[k])[i];

			z->cap[h->stage]++;
			z->load[h->node] -= c->work[h->node];
		}
	for (int g = 0; chain && g < ngroups; g++)
		unit = cnt[g] == unit ? unit : 0;
	for (int s = 0; chain && unit > 0 && s < c->S; s++)
		unit = z->cap[s] % unit ? 0 : unit;
	take_out(z, mbs, n);
	if (chain && unit > 1) {
		for (int s = 0; s < c->S; s++)
			z->cap[s] /= unit;
		for (int g = 0; g < ngroups; g++)
			if (!plan_moved(z, g * unit, unit, ngroups - g, load_w))
				return 0;
		return 2;
	}
	for (int k = 0; k < n; k++)
		if (!plan_moved(z, k, 1, n - k, load_w))
			return 0;
	return 1;
}

/* A micro-batch: half the time one of the last fifth to finish. */
static int pick_mb(search *z)
{
	int N = z->p->nmb, k = N / 5 > 0 ? N / 5 : 1;

	if (skip_uniform(&z->rng) < 0.5)
		return z->order[N - 1 - rnd(z, k)];
	return rnd(z, N);
}

/* Gather the micro-batches of origins ks[0 .. n-1] (by index in z->orig) into mbs, origin by
 * origin in a random order; cnt gets their counts. Returns the number of micro-batches. */
static int gather(search *z, int *ks, int n, int *mbs, int *cnt)
{
	int total = 0;

	for (int i = n - 1; i > 0; i--) {
		int j = rnd(z, i + 1), t = ks[i];

		ks[i] = ks[j];
		ks[j] = t;
	}
	for (int i = 0; i < n; i++) {
		cnt[i] = z->ofirst[ks[i] + 1] - z->ofirst[ks[i]];
		memcpy(mbs + total, z->omb + z->ofirst[ks[i]], (size_t)cnt[i] * sizeof(int));
		total += cnt[i];
	}
	return total;
}

/* Re-plan the micro-batches of one or two origins together (as chains half the time). */
static int move_origins(search *z, int a)
{
	int ks[2] = {z->mb_orig[a], rnd(z, z->norig)}, n = 1 + (skip_uniform(&z->rng) < 0.5);
	int cnt[2], total;

	if (n == 2 && ks[1] == ks[0])
		n = 1;
	total = gather(z, ks, n, z->order + z->p->nmb, cnt);
	return replan(z, z->order + z->p->nmb, total, cnt, n, skip_uniform(&z->rng) < 0.5,
		      z->w.load_w);
}

/* Exchange the paths of two origins (their i-th micro-batches trade hops). */
static int move_exchange(search *z, int a)
{
	int ka = z->mb_orig[a], kb = rnd(z, z->norig), H = z->c->H, na, nb, n, *mbs;

	if (ka == kb)
		return 0;
	na = z->ofirst[ka + 1] - z->ofirst[ka];
	nb = z->ofirst[kb + 1] - z->ofirst[kb];
	n = na < nb ? na : nb;
	mbs = z->order + z->p->nmb;
	memcpy(mbs, z->omb + z->ofirst[ka], (size_t)n * sizeof(int));
	memcpy(mbs + n, z->omb + z->ofirst[kb], (size_t)n * sizeof(int));
	take_out(z, mbs, 2 * n);
	for (int i = 0; i < n; i++) {
		memcpy(z->nw + (size_t)i * H, z->old + (size_t)(n + i) * H, (size_t)H * sizeof(clp_skip_hop));
		memcpy(z->nw + (size_t)(n + i) * H, z->old + (size_t)i * H, (size_t)H * sizeof(clp_skip_hop));
	}
	return install_all(z);
}

/* Move node x to node y (same stage) in the paths of the micro-batches mbs (n), or exchange x
 * and y there when both. */
static int relabel(search *z, const int *mbs, int n, int x, int y, int both)
{
	int H = z->c->H, *sel = z->order + z->p->nmb, ns = 0;

	for (int k = 0; k < n; k++)
		for (int i = 0; i < H; i++)
			if (hops_of(z, mbs[k])[i].node == x || (both && hops_of(z, mbs[k])[i].node == y)) {
				sel[ns++] = mbs[k];
				break;
			}
	if (!ns)
		return 0;
	take_out(z, sel, ns);
	for (int k = 0; k < ns; k++)
		for (int i = 0; i < H; i++) {
			clp_skip_hop h = z->old[(size_t)k * H + i];

			if (h.node == x)
				h.node = y;
			else if (both && h.node == y)
				h.node = x;
			z->nw[(size_t)k * H + i] = h;
		}
	return install_all(z);
}

/* All of an origin's visits of one node go to another node of the stage; or (global) two nodes
 * of a stage exchange places in every path. */
static int move_origin_node(search *z, int a, int global)
{
	const skip_ctx *c = z->c;
	const clp_skip_hop *h = &hops_of(z, a)[rnd(z, c->H)];
	int s = h->stage, n = c->st_first[s + 1] - c->st_first[s], x = h->node, y, k;

	if (n < 2)
		return 0;
	y = c->st_nodes[c->st_first[s] + rnd(z, n)];
	if (y == x)
		return 0;
	if (global) {
		int *all = z->order + 2 * z->p->nmb;

		for (int m = 0; m < z->p->nmb; m++)
			all[m] = m;
		return relabel(z, all, z->p->nmb, x, y, 1);
	}
	k = z->mb_orig[a];
	return relabel(z, z->omb + z->ofirst[k], z->ofirst[k + 1] - z->ofirst[k], x, y, 0);
}

static int try_move(search *z)
{
	double u = skip_uniform(&z->rng);
	int a = pick_mb(z), mbs[2], cnt[2] = {1, 1};

	z->nmoved = 0;
	z->flipped = -1;
	if (u < 0.06 || z->c->H == 0) { /* a node's priority: forwards or backwards first */
		z->flipped = rnd(z, z->c->nnodes);
		z->p->node_prio[z->flipped] ^= 1;
		return 1;
	}
	if (u < 0.26)
		return move_node(z, a);
	if (u < 0.40) {
		mbs[0] = a;
		return replan(z, mbs, 1, cnt, 1, 0, z->w.load_w);
	}
	if (u < 0.58) {
		mbs[0] = a;
		mbs[1] = rnd(z, z->p->nmb);
		if (mbs[1] == a)
			return 0;
		if (skip_uniform(&z->rng) < 0.5) { /* the later one plans first */
			mbs[0] = mbs[1];
			mbs[1] = a;
		}
		return replan(z, mbs, 2, cnt, 2, 0, z->w.load_w);
	}
	if (u < 0.70)
		return move_origins(z, a);
	if (u < 0.78)
		return move_exchange(z, a);
	if (u < 0.86)
		return move_origin_node(z, a, 0);
	if (u < 0.93 || z->c->env->rules.max_swaps == 0)
		return move_origin_node(z, a, 1);
	return move_swap(z, a);
}

/* The construction portfolio: a few trade-offs between locality and load, each with every node
 * running backwards first and with every node running forwards first; the best wins. */
static const skip_build_w portfolio[] = {
	{0.5, 1.0, 1.0}, {1.0, 1.0, 1.0}, {0.25, 0.5, 1.0}, {1.0, 2.0, 0.5},
	{2.0, 2.0, 1.0}, {0.0, 1.0, 1.0}, {0.5, 0.0, 2.0}, {0.1, 3.0, 1.0},
	{0.05, 0.2, 1.0}, {0.0, 0.3, 1.0}, {0.02, 0.05, 1.0}, {0.0, 0.0, 1.0},
};

/* A start of the population: hops and priorities, its iteration time and energy. */
typedef struct start {
	clp_skip_hop *hops;
	unsigned char *prio;
	double iter, e;
	skip_build_w w;
} start;

static void keep(clp_skip_paths *dst, const clp_skip_paths *src)
{
	if (src->hop_start[src->nmb])
		memcpy(dst->hops, src->hops, (size_t)src->hop_start[src->nmb] * sizeof(clp_skip_hop));
	memcpy(dst->node_prio, src->node_prio, (size_t)src->nnodes);
}

/* Note the current path set as a start (kept when among the NSTARTS best), and as the best. */
static void offer(search *z, start *st, double it, double e)
{
	const clp_skip_paths *p = z->p;
	int worst = 0;

	if (it < z->best_iter || (it == z->best_iter && e < z->best_e)) {
		z->best_iter = it;
		z->best_e = e;
		keep(z->best, p);
	}
	for (int i = 0; i < NSTARTS; i++) {
		if (st[i].e == e && st[i].iter == it)
			return; /* the same start again (both priorities alike) */
		if (st[i].e > st[worst].e)
			worst = i;
	}
	if (e >= st[worst].e)
		return;
	st[worst].iter = it;
	st[worst].e = e;
	st[worst].w = z->w;
	memcpy(st[worst].hops, p->hops, (size_t)p->hop_start[p->nmb] * sizeof(clp_skip_hop));
	memcpy(st[worst].prio, p->node_prio, (size_t)p->nnodes);
}

/* Score the current hops with every node backwards first and forwards first. */
static clp_status offer_both(search *z, start *st)
{
	for (int pol = 0; pol < 2; pol++) {
		double it;

		memset(z->p->node_prio, pol, (size_t)z->p->nnodes);
		CLP_TRY(skip_eval(z->c, z->p, &it, z->mb_end));
		offer(z, st, it, energy(z, it, z->mb_end));
	}
	return CLP_OK;
}

static clp_status graph_rebuild(search *z)
{
	if (!z->use_graph)
		return CLP_OK;
	skip_graph_free(&z->g);
	CLP_TRY(skip_graph_init(&z->g, z->c->nnodes));
	for (int m = 0; m < z->p->nmb; m++)
		CLP_TRY(skip_graph_add_path(&z->g, z->p, m));
	return CLP_OK;
}

/* Chain starts: every origin's micro-batches on one path, the origins planned one after the
 * other (random order) with the nodes earlier chains took made dear, so chains are disjoint
 * where the nodes allow. Needs every origin to have the same number of micro-batches and the
 * stage visits to divide by it; otherwise nothing is offered. */
static clp_status chain_starts(search *z, start *st)
{
	int *ks = malloc(((size_t)z->norig + 1) * sizeof(int)), *cnt, *mbs = z->order + z->p->nmb;
	int per = z->norig > 0 ? z->ofirst[1] - z->ofirst[0] : 0, ok = per > 1;
	int nchain = z->norig > 16 ? 8 : NCHAIN;
	const clp_skip_rules *ru = &z->c->env->rules;
	clp_status s = CLP_OK;

	cnt = malloc(((size_t)z->norig + 1) * sizeof(int));
	if (!ks || !cnt) {
		free(ks);
		free(cnt);
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	}
	/* Chains only when every origin has the same number k > 1 of micro-batches and every stage's
	 * visits divide by k (else a start would be the construction again, at a full re-plan
	 * each); fewer starts when there are many origins (each costs a plan per origin). */
	for (int k = 0; k < z->norig && ok; k++)
		ok = z->ofirst[k + 1] - z->ofirst[k] == per;
	if (ok && ru->balance && z->c->S > 1)
		ok = (int)((int64_t)z->p->nmb * z->c->H / (z->c->S - 1)) % per == 0;
	for (int r = 0; r < (ok ? nchain : 0) && s == CLP_OK; r++) {
		static const double spread[] = {1.0, 0.5, 2.0, 0.25};
		int total;

		for (int k = 0; k < z->norig; k++)
			ks[k] = k;
		compute_load(z);
		total = gather(z, ks, z->norig, mbs, cnt);
		z->noise = r < 4 ? 0.3 : 1.0;
		z->nmoved = 0;
		z->flipped = -1;
		/* a chain start only: replan falls back to one by one when the stages do not
		 * divide, which the construction already covers */
		if (replan(z, mbs, total, cnt, z->norig, 1, spread[r % 4]) == 2)
			s = offer_both(z, st);
		undo(z);
	}
	z->noise = 0.3;
	compute_load(z);
	free(ks);
	free(cnt);
	return s;
}

static clp_status construct(search *z, start *st)
{
	for (size_t i = 0; i < sizeof(portfolio) / sizeof(portfolio[0]); i++) {
		z->w = portfolio[i];
		CLP_TRY(skip_build(z->c, z->p, &portfolio[i], 0));
		CLP_TRY(offer_both(z, st));
	}
	return CLP_OK;
}

/* order[0 .. N-1]: micro-batches by end time (insertion sort: N is at most 1024). */
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

/* Anneal from the current path set for iters moves (or until t_end with a time limit). */
static clp_status anneal(search *z, const clp_skip_opts *o, int iters, double t_end,
			 clp_skip_report *rep)
{
	double t0 = clp_now(), temp0, *end2;

	CLP_TRY(skip_eval(z->c, z->p, &z->iter, z->mb_end));
	z->energy = energy(z, z->iter, z->mb_end);
	temp0 = TEMP_FRAC * z->iter;
	end2 = malloc(((size_t)z->p->nmb + 1) * sizeof(double));
	if (!end2)
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	sort_by_end(z);
	compute_load(z);
	for (int it = 0; it < iters; it++) {
		double prog = (double)it / iters, iter, e, temp;

		if (o->time_limit_s > 0) {
			double now = clp_now();

			if (now > t_end)
				break;
			if ((now - t0) / (t_end - t0) > prog)
				prog = (now - t0) / (t_end - t0);
		}
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
			if (iter < z->best_iter || (iter == z->best_iter && e < z->best_e)) {
				z->best_iter = iter;
				z->best_e = e;
				keep(z->best, z->p);
			}
		} else {
			undo(z);
		}
		compute_load(z);
		if (o->verbose && (it + 1) % 2000 == 0)
			fprintf(stderr, "skip search: %d moves, %d accepted, now %.4g s, best %.4g s\n",
				it + 1, rep->accepted, z->iter, z->best_iter);
	}
	free(end2);
	return CLP_OK;
}

/* The origins and their micro-batches. */
static clp_status index_origins(search *z)
{
	const clp_skip_paths *p = z->p;
	int n = 0, N = p->nmb;

	z->orig = malloc(((size_t)N + 1) * sizeof(int));
	z->ofirst = malloc(((size_t)N + 2) * sizeof(int));
	z->omb = malloc(((size_t)N + 1) * sizeof(int));
	z->mb_orig = malloc(((size_t)N + 1) * sizeof(int));
	if (!z->orig || !z->ofirst || !z->omb || !z->mb_orig)
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	for (int m = 0; m < N; m++) {
		int k = 0;

		while (k < n && z->orig[k] != p->origin[m])
			k++;
		if (k == n)
			z->orig[n++] = p->origin[m];
		z->mb_orig[m] = k;
	}
	z->norig = n;
	z->ofirst[0] = 0;
	for (int k = 0, t = 0; k < n; k++) {
		for (int m = 0; m < N; m++)
			if (z->mb_orig[m] == k)
				z->omb[t++] = m;
		z->ofirst[k + 1] = t;
	}
	return CLP_OK;
}

/* The caller's start: the same nodes, stages and origins, and the rules kept. */
static clp_status check_init(const clp_skip_env *e, const clp_skip_paths *p,
			     const clp_skip_paths *q)
{
	if (q->nnodes != p->nnodes || q->nmb != p->nmb || q->nstages != p->nstages)
		return clp_error(CLP_ERR_INVALID, "skip scheduler: the start has %d nodes, %d "
				 "micro-batches, %d stages; the problem %d, %d, %d", q->nnodes,
				 q->nmb, q->nstages, p->nnodes, p->nmb, p->nstages);
	for (int n = 0; n < p->nnodes; n++)
		if (q->node_stage[n] != p->node_stage[n])
			return clp_error(CLP_ERR_INVALID, "skip scheduler: the start puts node %d on "
					 "stage %d, the allocation on %d", n, q->node_stage[n],
					 p->node_stage[n]);
	for (int m = 0; m < p->nmb; m++)
		if (q->origin[m] != p->origin[m])
			return clp_error(CLP_ERR_INVALID, "skip scheduler: the start's mb %d starts at "
					 "node %d, the problem's at node %d", m, q->origin[m],
					 p->origin[m]);
	return clp_skip_validate(&e->rules, q);
}

clp_status clp_skip_schedule(const clp_skip_env *e, clp_skip_paths *p, const clp_skip_opts *o,
			     clp_skip_report *rep)
{
	clp_skip_opts dflt;
	clp_skip_report rdummy;
	skip_ctx c;
	search z;
	start st[NSTARTS];
	double t0 = clp_now(), t_end;
	int N = p->nmb, H = e->rules.path_len - 1, nstart = 0, rank[NSTARTS];
	int nround = o && o->restarts > 1 ? o->restarts : 1;
	clp_status s;

	if (!o) {
		clp_skip_opts_default(&dflt);
		o = &dflt;
	}
	if (!rep)
		rep = &rdummy;
	memset(rep, 0, sizeof(*rep));
	CLP_TRY(clp_skip_check_config(&e->rules, p));
	if (o->init)
		CLP_TRY(check_init(e, p, o->init));
	CLP_TRY(skip_ctx_init(&c, e, p));
	memset(&z, 0, sizeof(z));
	memset(st, 0, sizeof(st));
	z.c = &c;
	z.p = p;
	z.rng = o->seed * 0x9e3779b97f4a7c15ULL + 12345;
	z.flipped = -1;
	z.noise = 0.3;
	z.best_iter = z.best_e = INFINITY;
	z.use_graph = e->rules.memory > 0 && e->rules.deadlock_free;
	z.mb_end = malloc(((size_t)N + 1) * sizeof(double));
	z.load = malloc((size_t)c.nnodes * sizeof(double));
	z.ncost = malloc((size_t)c.nnodes * sizeof(double));
	z.cap = malloc((size_t)c.S * sizeof(int));
	z.order = malloc((3 * (size_t)N + 1) * sizeof(int));
	z.old = malloc(((size_t)N * H + 1) * sizeof(clp_skip_hop));
	z.nw = malloc(((size_t)N * H + 1) * sizeof(clp_skip_hop));
	z.moved = malloc(((size_t)N + 1) * sizeof(int));
	z.in_graph = malloc((size_t)N + 1);
	for (int i = 0; i < NSTARTS; i++) {
		st[i].hops = malloc(((size_t)N * H + 1) * sizeof(clp_skip_hop));
		st[i].prio = malloc((size_t)c.nnodes);
		st[i].iter = st[i].e = INFINITY;
	}
	s = !z.mb_end || !z.load || !z.ncost || !z.cap || !z.order || !z.old || !z.nw ||
			    !z.moved || !z.in_graph || !st[NSTARTS - 1].hops || !st[NSTARTS - 1].prio
		    ? clp_error(CLP_ERR_NOMEM, "skip: out of host memory")
		    : CLP_OK;
	for (int i = 0; i < NSTARTS && s == CLP_OK; i++)
		if (!st[i].hops || !st[i].prio)
			s = clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	if (s == CLP_OK)
		s = index_origins(&z);
	if (s == CLP_OK)
		s = skip_build(&c, p, &(skip_build_w){0.5, 1, 1}, 0); /* sizes the hops */
	if (s == CLP_OK)
		s = clp_skip_paths_copy(p, &z.best);
	if (s == CLP_OK)
		s = construct(&z, st);
	if (s == CLP_OK && z.use_graph)
		s = skip_graph_init(&z.g, c.nnodes);
	if (s == CLP_OK)
		s = graph_rebuild(&z);
	z.w = (skip_build_w){0.5, 1, 1};
	if (s == CLP_OK)
		s = chain_starts(&z, st);
	if (s == CLP_OK && o->init) {
		double it;

		keep(p, o->init);
		s = skip_eval(&c, p, &it, z.mb_end);
		if (s == CLP_OK)
			offer(&z, st, it, energy(&z, it, z.mb_end));
	}
	rep->construct_iter_s = z.best_iter;
	rep->construct_s = clp_now() - t0;
	t0 = clp_now();
	for (int i = 0; i < NSTARTS; i++)
		nstart += st[i].e < INFINITY;
	/* Anneal the starts, best first, each for its share of the moves and time; with restarts,
	 * all of that again (the random stream goes on), each round with the full moves. */
	for (int i = 0; i < NSTARTS; i++)
		rank[i] = i;
	for (int i = 1; i < NSTARTS; i++)
		for (int j = i; j > 0 && st[rank[j]].e < st[rank[j - 1]].e; j--) {
			int t = rank[j];

			rank[j] = rank[j - 1];
			rank[j - 1] = t;
		}
	for (int q = 0; q < nround * nstart && s == CLP_OK && o->iterations > 0; q++) {
		int b = rank[q % nstart];

		memcpy(p->hops, st[b].hops, (size_t)N * H * sizeof(clp_skip_hop));
		memcpy(p->node_prio, st[b].prio, (size_t)c.nnodes);
		z.w = st[b].w;
		t_end = t0 + o->time_limit_s * (q + 1) / (nround * nstart);
		s = graph_rebuild(&z);
		if (s == CLP_OK)
			s = anneal(&z, o, o->iterations / nstart + (q % nstart < o->iterations % nstart),
				   t_end, rep);
	}
	rep->search_s = clp_now() - t0;
	rep->iter_s = z.best_iter;
	if (s == CLP_OK)
		keep(p, z.best);
	if (s == CLP_OK)
		s = clp_skip_validate(&e->rules, p);
	if (z.use_graph)
		skip_graph_free(&z.g);
	for (int i = 0; i < NSTARTS; i++) {
		free(st[i].hops);
		free(st[i].prio);
	}
	free(z.mb_end);
	free(z.load);
	free(z.ncost);
	free(z.cap);
	free(z.order);
	free(z.old);
	free(z.nw);
	free(z.moved);
	free(z.in_graph);
	free(z.orig);
	free(z.ofirst);
	free(z.omb);
	free(z.mb_orig);
	clp_skip_paths_free(z.best);
	skip_ctx_free(&c);
	return s;
}
