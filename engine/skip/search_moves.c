/* The path scheduler's moves (search.c runs the search; docs/SKIPPIPE.md, "The scheduler").
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
#include <stdlib.h>
#include <string.h>

#include "engine/skip/search_internal.h"

double search_energy(const search *z, double iter, const double *end)
{
	double sum = 0;

	for (int m = 0; m < z->p->nmb; m++)
		sum += end[m];
	return iter + 0.05 * sum / (z->p->nmb > 0 ? z->p->nmb : 1);
}

void search_load(search *z)
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
void search_undo(search *z)
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
int search_replan(search *z, const int *mbs, int n, const int *cnt, int ngroups, int chain,
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
int search_gather(search *z, int *ks, int n, int *mbs, int *cnt)
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
	total = search_gather(z, ks, n, z->order + z->p->nmb, cnt);
	return search_replan(z, z->order + z->p->nmb, total, cnt, n, skip_uniform(&z->rng) < 0.5,
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

int search_try_move(search *z)
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
		return search_replan(z, mbs, 1, cnt, 1, 0, z->w.load_w);
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
		return search_replan(z, mbs, 2, cnt, 2, 0, z->w.load_w);
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
