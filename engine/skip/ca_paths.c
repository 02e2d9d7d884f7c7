/* The path enumeration of the two path baselines (ca_internal.h): reservations of node and link
 * time, the scores of a path (in time, or as a chain estimate), the depth-first search over
 * every valid path of a micro-batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/ca_internal.h"

/* The earliest start >= t of d seconds that overlaps no interval. */
static double slot(const resv *r, double t, double d)
{
	if (!r)
		return t;
	for (int i = 0; i < r->n; i++) {
		if (r->a[2 * i + 1] <= t)
			continue;
		if (r->a[2 * i] >= t + d)
			break;
		t = r->a[2 * i + 1];
	}
	return t;
}

static int reserve(resv *r, double s, double e)
{
	int i;

	if (e <= s)
		return 1;
	if (r->n == r->cap) {
		int cap = r->cap ? 2 * r->cap : 16;
		double *a = realloc(r->a, (size_t)cap * 2 * sizeof(double));

		if (!a)
			return 0;
		r->a = a;
		r->cap = cap;
	}
	for (i = r->n; i > 0 && r->a[2 * (i - 1)] > s; i--) {
		r->a[2 * i] = r->a[2 * (i - 1)];
		r->a[2 * i + 1] = r->a[2 * (i - 1) + 1];
	}
	r->a[2 * i] = s;
	r->a[2 * i + 1] = e;
	r->n++;
	return 1;
}

static resv *link_of(ca *z, int u, int v, int make)
{
	size_t k = (size_t)u * (size_t)z->N + (size_t)v;

	if (!z->link[k] && make)
		z->link[k] = calloc(1, sizeof(resv));
	return z->link[k];
}

/* When the micro-batch on hops h ends (its last backward on the origin), starting no earlier
 * than t0; with commit, reserve its slots (0: out of memory). */
int ca_timed(ca *z, const clp_skip_hop *h, int commit, double *end)
{
	const skip_ctx *c = z->c;
	int o = z->origin, prev = o, ps = 0, H = z->H;
	double t, d, s;

#define NODE(y, at, dur)                                                                           \
	do {                                                                                       \
		s = slot(&z->node[y], at, dur);                                                    \
		if (commit && !reserve(&z->node[y], s, s + (dur)))                                 \
			return 0;                                                                  \
		t = s + (dur);                                                                     \
	} while (0)
#define LINK(u, v, st)                                                                             \
	do {                                                                                       \
		d = skip_msg(c, st, u, v);                                                         \
		s = slot(link_of(z, u, v, 0), t, d);                                               \
		if (commit) {                                                                      \
			resv *r_ = link_of(z, u, v, 1);                                            \
			if (!r_ || !reserve(r_, s, s + d))                                         \
				return 0;                                                          \
		}                                                                                  \
		t = s + d;                                                                         \
	} while (0)

	t = z->t0;
	NODE(o, t, c->fwd[o]);
	for (int i = 0; i < H; i++) {
		LINK(prev, h[i].node, ps);
		NODE(h[i].node, t, c->fwd[h[i].node]);
		prev = h[i].node;
		ps = h[i].stage;
	}
	LINK(prev, o, ps);
	NODE(o, t, c->head[o]);
	for (int i = H - 1; i >= 0; i--) {
		int from = i == H - 1 ? o : h[i + 1].node;

		LINK(from, h[i].node, h[i].stage);
		NODE(h[i].node, t, c->bwd[h[i].node]);
	}
	LINK(H > 0 ? h[0].node : o, o, 0);
	NODE(o, t, c->bwd[o]);
#undef NODE
#undef LINK
	*end = t;
	return 1;
}

/* The chain estimate: k micro-batches of the origin in rounds of M over one round trip, plus
 * the busiest resource's share within a round. */
double ca_chain_est(const ca *z, const clp_skip_hop *h)
{
	const skip_ctx *c = z->c;
	int o = z->origin, prev = o, ps = 0, k = z->per_origin, M = c->env->rules.memory;
	double rt = c->fwd[o] + c->head[o] + c->bwd[o], occ = c->fwd[o] + c->head[o] + c->bwd[o];
	int rounds = M > 0 ? (k + M - 1) / M : 1, inflight = M > 0 && M < k ? M : k;

	for (int i = 0; i < z->H; i++) {
		double m = skip_msg(c, ps, prev, h[i].node), b = skip_msg(c, ps, h[i].node, prev);

		rt += m + b + c->work[h[i].node];
		occ = fmax(occ, fmax(fmax(m, b), c->work[h[i].node]));
		prev = h[i].node;
		ps = h[i].stage;
	}
	rt += skip_msg(c, ps, prev, o) + skip_msg(c, ps, o, prev);
	occ = fmax(occ, fmax(skip_msg(c, ps, prev, o), skip_msg(c, ps, o, prev)));
	return rounds * rt + (inflight - 1) * occ;
}

/* Conflicts of chain h with the other origins' chains: nodes they use, stages they fill. */
int ca_chain_conflicts(const ca *z, const clp_skip_hop *h)
{
	int n = 0, H = z->H;

	for (int i = 0; i < H; i++) {
		int users = 0, node = 0;

		for (int a = 0; a < z->norig; a++) {
			if (a == z->self)
				continue;
			for (int j = 0; j < H; j++) {
				users += z->others[(size_t)a * H + j].stage == h[i].stage;
				node |= z->others[(size_t)a * H + j].node == h[i].node;
			}
		}
		n += node + (users >= z->units[h[i].stage]);
	}
	return n;
}

static void leaf(ca *z)
{
	double v;
	int i;

	z->leaves++;
	if (z->chain_mode && z->focal) {
		int k;

		v = ca_chain_est(z, z->cur);
		if (v > z->bound)
			return;
		k = ca_chain_conflicts(z, z->cur);
		if (z->ntop && (k > z->focal_best_k || (k == z->focal_best_k && v >= z->focal_best_v)))
			return;
		z->ntop = 1;
		z->focal_best_k = k;
		z->focal_best_v = v;
		z->topv[0] = v;
		memcpy(z->top, z->cur, (size_t)z->H * sizeof(clp_skip_hop));
		return;
	}
	if (z->chain_mode)
		v = ca_chain_est(z, z->cur);
	else if (!ca_timed(z, z->cur, 0, &v))
		return;
	if (z->ntop == TOPK && v >= z->topv[TOPK - 1])
		return;
	i = z->ntop < TOPK ? z->ntop++ : TOPK - 1;
	for (; i > 0 && z->topv[i - 1] > v; i--) {
		z->topv[i] = z->topv[i - 1];
		memcpy(z->top + (size_t)i * z->H, z->top + (size_t)(i - 1) * z->H,
		       (size_t)z->H * sizeof(clp_skip_hop));
	}
	z->topv[i] = v;
	memcpy(z->top + (size_t)i * z->H, z->cur, (size_t)z->H * sizeof(clp_skip_hop));
}

static int forced(const ca *z, int s)
{
	return !z->chain_mode && z->cap[s] >= z->remaining;
}

static int skips_ok(const ca *z, int a, int b)
{
	for (int s = a + 1; s < b; s++)
		if (forced(z, s))
			return 0;
	return 1;
}

static int stage_ok(const ca *z, int s)
{
	return z->chain_mode ? !z->ban_stage[s] : z->cap[s] > 0;
}

/* Every node of stage s for hop k, then the rest of the path (swap: the pair t + 1, t). */
static void place(ca *z, int k, int s, int far, int w, int second)
{
	const skip_ctx *c = z->c;

	for (int i = c->st_first[s]; i < c->st_first[s + 1]; i++) {
		int y = c->st_nodes[i];

		if (z->chain_mode && z->ban_node[y])
			continue;
		z->cur[k] = (clp_skip_hop){s, y};
		if (second >= 0)
			place(z, k + 1, second, far, w, -1);
		else
			ca_dfs(z, k + 1, far, w);
		if (z->leaves >= z->max_leaves)
			return;
	}
}

void ca_dfs(ca *z, int k, int far, int w)
{
	if (z->leaves >= z->max_leaves)
		return;
	if (k == z->H) {
		if (skips_ok(z, far, z->S))
			leaf(z);
		return;
	}
	for (int t = far + 1; t < z->S && t - far <= z->J; t++) {
		if (!skips_ok(z, far, t))
			break;
		if (stage_ok(z, t))
			place(z, k, t, t, w, -1);
		if (t + 1 < z->S && t + 1 - far <= z->J && w < z->W && k + 2 <= z->H &&
		    stage_ok(z, t) && stage_ok(z, t + 1))
			place(z, k, t + 1, t + 1, w + 1, t);
	}
}

clp_status ca_init(ca *z, const skip_ctx *c, clp_skip_paths *p)
{
	const clp_skip_rules *r = &c->env->rules;

	memset(z, 0, sizeof(*z));
	z->c = c;
	z->p = p;
	z->S = c->S;
	z->H = c->H;
	z->J = r->max_jump;
	z->W = r->max_swaps < c->H / 2 ? r->max_swaps : c->H / 2;
	z->N = c->nnodes;
	z->max_leaves = 200000;
	z->node = calloc((size_t)z->N, sizeof(resv));
	z->link = calloc((size_t)z->N * (size_t)z->N, sizeof(resv *));
	z->cap = calloc((size_t)z->S + 1, sizeof(int));
	z->cur = malloc(((size_t)z->H + 1) * sizeof(clp_skip_hop));
	z->top = malloc(((size_t)TOPK * z->H + 1) * sizeof(clp_skip_hop));
	if (!z->node || !z->link || !z->cap || !z->cur || !z->top)
		return clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
	for (int s = 1; s < z->S; s++)
		z->cap[s] = r->balance && z->S > 1 ? (int)((int64_t)p->nmb * z->H / (z->S - 1))
						   : p->nmb;
	return CLP_OK;
}

void ca_free(ca *z)
{
	for (int i = 0; z->node && i < z->N; i++)
		free(z->node[i].a);
	for (size_t k = 0; z->link && k < (size_t)z->N * (size_t)z->N; k++)
		if (z->link[k]) {
			free(z->link[k]->a);
			free(z->link[k]);
		}
	free(z->node);
	free(z->link);
	free(z->cap);
	free(z->cur);
	free(z->top);
}

/* Every node backwards first, then forwards first: the better stays; *iter its time. */
clp_status ca_best_prio(const skip_ctx *c, clp_skip_paths *p, double *iter)
{
	double t[2];

	for (int pol = 0; pol < 2; pol++) {
		memset(p->node_prio, pol, (size_t)p->nnodes);
		CLP_TRY(skip_eval(c, p, &t[pol], NULL));
	}
	memset(p->node_prio, t[1] < t[0], (size_t)p->nnodes);
	*iter = fmin(t[0], t[1]);
	return CLP_OK;
}
