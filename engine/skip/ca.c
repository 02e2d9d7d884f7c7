/* Baselines for the path scheduler, from the SkipPipe paper's description (docs/SKIPPIPE.md,
 * "Fixed-allocation benchmark"), independent of the scheduler's search; every one is scored by
 * the simulator like the scheduler:
 *
 *   CLP_SKIP_BASE_CA_TIME  collision-aware search over a time-expanded graph: micro-batches in
 *                          priority order (round-robin over the origins), each taking the valid
 *                          path whose backward ends first given the reservations of those before
 *                          (node time slots and directed link slots), every valid path searched;
 *                          an origin starts its (k + M)-th micro-batch when its k-th has ended;
 *   CLP_SKIP_BASE_CBS      conflict-based search over one path (chain) per origin: each origin
 *                          takes its best chain alone, then a constraint tree resolves the
 *                          conflicts (two origins on one node; a stage taken by more chains than
 *                          its balance allows) by forbidding the node or stage to one of them,
 *                          best first on the estimated iteration (rounds of M round trips); the
 *                          best few conflict-free sets are simulated;
 *   CLP_SKIP_BASE_GREEDY   each micro-batch in turn takes the cheapest path by compute + message
 *                          time + the work already placed on its nodes (no timing).
 * Each is tried with every node backwards first and forwards first; the better is kept. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"

/* Busy intervals of one resource (a node or a directed link), sorted by start. */
typedef struct resv {
	double *a; /* [2 n]: start, end */
	int n, cap;
} resv;

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

#define TOPK 32

typedef struct ca {
	const skip_ctx *c;
	clp_skip_paths *p;
	int S, H, J, W, N;
	resv *node, **link; /* [N], [N * N] (allocated on first use) */
	int *cap, remaining;
	double t0;
	/* the search for one micro-batch */
	int origin;
	clp_skip_hop *cur, *top; /* [H], [TOPK * H] */
	double topv[TOPK];
	int ntop;
	long leaves, max_leaves;
	/* chain estimate mode (CBS): costs are static, constraints per origin */
	int chain_mode, per_origin;
	const unsigned char *ban_node, *ban_stage;
	/* focal pass (ECBS): among chains within FOCAL_W of the best estimate, the fewest
	 * conflicts with the other origins' chains (others[norig * H], self excluded) */
	int focal, self, norig;
	double bound, focal_best_v, focal_w;
	int focal_best_k;
	const clp_skip_hop *others;
	const int *units;
} ca;

/* Focal widths tried by the conflict-based search: 1 is plain CBS on the estimate (optimal for
 * it, slow to settle node conflicts), wider ones settle them sooner (ECBS). */
static const double focal_ws[] = {1.0, 1.1, 1.25, 1.5};

static resv *link_of(ca *z, int u, int v, int make)
{
	size_t k = (size_t)u * (size_t)z->N + (size_t)v;

	if (!z->link[k] && make)
		z->link[k] = calloc(1, sizeof(resv));
	return z->link[k];
}

/* When the micro-batch on hops h ends (its last backward on the origin), starting no earlier
 * than t0; with commit, reserve its slots (0: out of memory). */
static int timed(ca *z, const clp_skip_hop *h, int commit, double *end)
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
static double chain_est(const ca *z, const clp_skip_hop *h)
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
static int chain_conflicts(const ca *z, const clp_skip_hop *h)
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

		v = chain_est(z, z->cur);
		if (v > z->bound)
			return;
		k = chain_conflicts(z, z->cur);
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
		v = chain_est(z, z->cur);
	else if (!timed(z, z->cur, 0, &v))
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
static void dfs(ca *z, int k, int far, int w);

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
			dfs(z, k + 1, far, w);
		if (z->leaves >= z->max_leaves)
			return;
	}
}

static void dfs(ca *z, int k, int far, int w)
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

static clp_status ca_init(ca *z, const skip_ctx *c, clp_skip_paths *p)
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

static void ca_free(ca *z)
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

/* Prioritised collision-aware planning over the time-expanded reservations: the micro-batches
 * in rounds (an origin's k-th in round k), the origins of a round in order rotated by rot. */
static clp_status base_ca_time(const skip_ctx *c, clp_skip_paths *p, int rot)
{
	const clp_skip_rules *r = &c->env->rules;
	int N = p->nmb, H = c->H, M = r->memory, use_graph = M > 0 && r->deadlock_free;
	double *end = malloc(((size_t)N + 1) * sizeof(double));
	int *round = calloc((size_t)c->nnodes, sizeof(int));
	int **hist = calloc((size_t)c->nnodes, sizeof(int *)); /* each origin's mbs in order */
	int *order = malloc(((size_t)N + 1) * sizeof(int)), *key = malloc(((size_t)N + 1) * sizeof(int));
	int *oidx = calloc((size_t)c->nnodes, sizeof(int)), no = 0;
	skip_graph g = {0};
	clp_status st = CLP_OK;
	ca z;

	st = ca_init(&z, c, p);
	if (st == CLP_OK && (!end || !round || !hist || !order || !key || !oidx))
		st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
	for (int n = 0; n < c->nnodes && st == CLP_OK; n++)
		oidx[n] = -1;
	for (int m = 0; m < N && st == CLP_OK; m++) {
		int o = p->origin[m];

		if (oidx[o] < 0)
			oidx[o] = no++;
		key[m] = round[o]++ * N + oidx[o];
		order[m] = m;
	}
	for (int m = 0; m < N && st == CLP_OK; m++) /* rotate, now that the origins are counted */
		key[m] = key[m] / N * N + (key[m] % N + rot) % no;
	for (int i = 1; i < N && st == CLP_OK; i++)
		for (int j = i; j > 0 && key[order[j]] < key[order[j - 1]]; j--) {
			int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	if (round)
		memset(round, 0, (size_t)c->nnodes * sizeof(int));
	for (int n = 0; n < c->nnodes && st == CLP_OK; n++)
		if (!(hist[n] = malloc(((size_t)N + 1) * sizeof(int))))
			st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
	if (st == CLP_OK && use_graph)
		st = skip_graph_init(&g, c->nnodes);
	for (int i = 0; i < N && st == CLP_OK; i++) {
		int m = order[i], o = p->origin[m], k = round[o], done = 0;

		z.origin = o;
		z.remaining = r->balance ? N - i : N + 1;
		z.t0 = M > 0 && k >= M ? end[hist[o][k - M]] : 0;
		z.ntop = 0;
		z.leaves = 0;
		dfs(&z, 0, 0, 0);
		for (int j = 0; j < z.ntop && !done; j++) {
			clp_skip_hop *h = z.top + (size_t)j * H;
			int ok = use_graph ? skip_graph_try_path(&g, h, H, m, NULL) : 1;

			if (ok < 0)
				st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
			if (ok != 1)
				continue;
			if (!timed(&z, h, 1, &end[m]))
				st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
			if (st == CLP_OK)
				st = clp_skip_set_hops(p, m, h, H);
			for (int q = 0; q < H; q++)
				z.cap[h[q].stage]--;
			done = 1;
		}
		if (st == CLP_OK && !done)
			st = clp_error(CLP_ERR_NOT_FOUND, "skip baseline (collision-aware): no valid path "
				       "for mb %d (origin node %d)", m, o);
		hist[o][k] = m;
		round[o]++;
	}
	if (use_graph)
		skip_graph_free(&g);
	for (int n = 0; hist && n < c->nnodes; n++)
		free(hist[n]);
	free(hist);
	free(round);
	free(end);
	free(order);
	free(key);
	free(oidx);
	ca_free(&z);
	return st;
}

/* A node of the constraint tree: per origin its bans and chain, the estimated iteration. */
typedef struct ct_node {
	unsigned char *ban;   /* [norig * (N + S)]: nodes, then stages */
	clp_skip_hop *chain;  /* [norig * H] */
	double cost, sum;
	int open, nconf;
} ct_node;

/* The best chain of origin index a under its bans; 0 if none. */
static int low_level(ca *z, const int *orig, int a, ct_node *n, double *v)
{
	int N = z->N, S = z->S, H = z->H;

	z->origin = orig[a];
	z->ban_node = n->ban + (size_t)a * (N + S);
	z->ban_stage = z->ban_node + N;
	z->ntop = 0;
	z->leaves = 0;
	z->focal = 0;
	dfs(z, 0, 0, 0);
	if (!z->ntop)
		return 0;
	z->bound = z->focal_w * z->topv[0];
	z->focal = 1;
	z->self = a;
	z->others = n->chain;
	z->ntop = 0;
	z->leaves = 0;
	dfs(z, 0, 0, 0);
	z->focal = 0;
	memcpy(n->chain + (size_t)a * H, z->top, (size_t)H * sizeof(clp_skip_hop));
	*v = z->topv[0];
	return 1;
}

static void ct_cost(ca *z, ct_node *n, const int *orig, int norig)
{
	n->cost = 0;
	n->sum = 0;
	n->nconf = 0;
	z->others = n->chain;
	for (int a = 0; a < norig; a++) {
		z->self = a;
		n->nconf += chain_conflicts(z, n->chain + (size_t)a * z->H);
	}
	for (int a = 0; a < norig; a++) {
		double v;

		z->origin = orig[a];
		v = chain_est(z, n->chain + (size_t)a * z->H);
		n->cost = fmax(n->cost, v);
		n->sum += v;
	}
}

/* The first conflict: a stage over its chains' share (*kind 1, *what the stage), else a node on
 * two chains (*kind 2); 0 if none. users gets the origins involved. */
static int conflict(const ca *z, const ct_node *n, int norig, const int *units, int *kind,
		    int *what, int *users)
{
	int H = z->H, nu = 0;

	for (int s = 1; s < z->S; s++) {
		nu = 0;
		for (int a = 0; a < norig; a++)
			for (int i = 0; i < H; i++)
				if (n->chain[(size_t)a * H + i].stage == s)
					users[nu++] = a;
		if (nu > units[s]) {
			*kind = 1;
			*what = s;
			return nu;
		}
	}
	for (int y = 0; y < z->N; y++) {
		nu = 0;
		for (int a = 0; a < norig; a++)
			for (int i = 0; i < H; i++)
				if (n->chain[(size_t)a * H + i].node == y)
					users[nu++] = a;
		if (nu > 1) {
			*kind = 2;
			*what = y;
			return nu;
		}
	}
	return 0;
}

#define CT_MAX 4000
#define CT_SOLUTIONS 4

/* Conflict-based search over chains; sol gets up to CT_SOLUTIONS chain sets (norig * H each). */
static clp_status base_cbs(const skip_ctx *c, clp_skip_paths *p, clp_skip_hop *sol, int *nsol,
			   const int *orig, int norig, int per_origin, double focal_w)
{
	int N = c->nnodes, S = c->S, H = c->H, units[CLP_SKIP_MAX_STAGES], nn = 0, users[1024];
	size_t bsz = (size_t)norig * (N + S);
	ct_node *t = calloc(CT_MAX, sizeof(ct_node));
	clp_status st;
	ca z;

	*nsol = 0;
	st = ca_init(&z, c, p);
	if (st == CLP_OK && !t)
		st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
	z.chain_mode = 1;
	z.focal_w = focal_w;
	z.per_origin = per_origin;
	z.norig = norig;
	z.units = units;
	units[0] = norig;
	for (int s = 1; s < S && st == CLP_OK; s++)
		units[s] = z.cap[s] / per_origin;
	if (st == CLP_OK) {
		t[0].ban = calloc(bsz + 1, 1);
		t[0].chain = malloc(((size_t)norig * H + 1) * sizeof(clp_skip_hop));
		if (!t[0].ban || !t[0].chain)
			st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
		for (size_t i = 0; st == CLP_OK && i < (size_t)norig * H; i++)
			t[0].chain[i] = (clp_skip_hop){-1, -1}; /* not planned yet */
		nn = 1;
	}
	for (int a = 0; a < norig && st == CLP_OK; a++) {
		double v;

		if (!low_level(&z, orig, a, &t[0], &v))
			st = CLP_ERR_NOT_FOUND;
	}
	if (st == CLP_OK) {
		ct_cost(&z, &t[0], orig, norig);
		t[0].open = 1;
	}
	while (st == CLP_OK && *nsol < CT_SOLUTIONS) {
		int b = -1, kind, what, nu;
		double lo = INFINITY;

		for (int i = 0; i < nn; i++)
			if (t[i].open && t[i].cost < lo)
				lo = t[i].cost;
		for (int i = 0; i < nn; i++) /* focal: within focal_w of the best, fewest conflicts */
			if (t[i].open && t[i].cost <= z.focal_w * lo &&
			    (b < 0 || t[i].nconf < t[b].nconf ||
			     (t[i].nconf == t[b].nconf && t[i].cost < t[b].cost)))
				b = i;
		if (b < 0)
			break;
		t[b].open = 0;
		nu = conflict(&z, &t[b], norig, units, &kind, &what, users);
		if (!nu) {
			memcpy(sol + (size_t)*nsol * norig * H, t[b].chain,
			       (size_t)norig * H * sizeof(clp_skip_hop));
			(*nsol)++;
			continue;
		}
		for (int u = 0; u < nu && nn < CT_MAX; u++) {
			ct_node *ch = &t[nn];
			int a = users[u];
			double v;

			if (u > 0 && users[u] == users[u - 1])
				continue;
			ch->ban = malloc(bsz + 1);
			ch->chain = malloc(((size_t)norig * H + 1) * sizeof(clp_skip_hop));
			if (!ch->ban || !ch->chain) {
				free(ch->ban);
				free(ch->chain);
				ch->ban = NULL;
				ch->chain = NULL;
				st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
				break;
			}
			nn++;
			memcpy(ch->ban, t[b].ban, bsz);
			memcpy(ch->chain, t[b].chain, (size_t)norig * H * sizeof(clp_skip_hop));
			ch->ban[(size_t)a * (N + S) + (kind == 1 ? N + what : what)] = 1;
			if (low_level(&z, orig, a, ch, &v)) {
				ct_cost(&z, ch, orig, norig);
				ch->open = 1;
			}
		}
		/* the tree is full: no more children; what is open is still searched */
	}
	for (int i = 0; i < nn; i++) {
		free(t[i].ban);
		free(t[i].chain);
	}
	free(t);
	ca_free(&z);
	if (st == CLP_OK && !*nsol)
		st = CLP_ERR_NOT_FOUND;
	return st;
}

/* Every node backwards first, then forwards first: the better stays; *iter its time. */
static clp_status best_prio(const skip_ctx *c, clp_skip_paths *p, double *iter)
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

static clp_status cbs_paths(const skip_ctx *c, clp_skip_paths *p, double *iter)
{
	int N = p->nmb, H = c->H, *orig = malloc(((size_t)N + 1) * sizeof(int)), norig = 0, nsol = 0;
	int per = 0;
	clp_skip_hop *sol = NULL, *keep = NULL;
	clp_status st = CLP_OK;

	if (!orig)
		return clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
	for (int m = 0; m < N; m++) {
		int k = 0;

		while (k < norig && orig[k] != p->origin[m])
			k++;
		if (k == norig)
			orig[norig++] = p->origin[m];
	}
	per = norig ? clp_skip_mb_of_origin(p, orig[0]) : 0;
	for (int k = 0; k < norig; k++)
		if (clp_skip_mb_of_origin(p, orig[k]) != per)
			st = clp_error(CLP_ERR_INVALID, "skip baseline (conflict-based): the origins "
				       "have different numbers of micro-batches");
	for (int s = 1; s < c->S && st == CLP_OK; s++)
		if (c->env->rules.balance && ((int64_t)N * H / (c->S - 1)) % per)
			st = clp_error(CLP_ERR_INVALID, "skip baseline (conflict-based): the stage "
				       "visits do not divide into chains of %d micro-batches", per);
	if (st == CLP_OK) {
		sol = malloc(((size_t)4 * CT_SOLUTIONS * norig * H + 1) * sizeof(clp_skip_hop));
		keep = malloc(((size_t)N * H + 1) * sizeof(clp_skip_hop));
		if (!sol || !keep)
			st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
	}
	for (size_t w = 0; st == CLP_OK && w < sizeof(focal_ws) / sizeof(focal_ws[0]); w++) {
		int got = 0;

		st = base_cbs(c, p, sol + (size_t)nsol * norig * H, &got, orig, norig, per,
			      focal_ws[w]);
		nsol += got;
		if (st == CLP_ERR_NOT_FOUND)
			st = CLP_OK;
	}
	if (st == CLP_OK && !nsol)
		st = clp_error(CLP_ERR_NOT_FOUND, "skip baseline (conflict-based): no conflict-free "
			       "set of chains found");
	*iter = INFINITY;
	for (int i = 0; i < nsol && st == CLP_OK; i++) {
		double it;

		for (int m = 0; m < N && st == CLP_OK; m++) {
			int k = 0;

			while (orig[k] != p->origin[m])
				k++;
			st = clp_skip_set_hops(p, m, sol + ((size_t)i * norig + k) * H, H);
		}
		if (st == CLP_OK)
			st = clp_skip_validate(&c->env->rules, p);
		if (st == CLP_OK)
			st = best_prio(c, p, &it);
		if (st == CLP_OK && it < *iter) {
			*iter = it;
			memcpy(keep, p->hops, (size_t)N * H * sizeof(clp_skip_hop));
		}
	}
	if (st == CLP_OK && nsol) {
		memcpy(p->hops, keep, (size_t)N * H * sizeof(clp_skip_hop));
		st = best_prio(c, p, iter);
	}
	free(sol);
	free(keep);
	free(orig);
	return st;
}

clp_status clp_skip_baseline(const clp_skip_env *e, clp_skip_paths *p, int kind, double *iter_s)
{
	skip_ctx c;
	clp_status st;

	*iter_s = INFINITY;
	CLP_TRY(clp_skip_check_config(&e->rules, p));
	CLP_TRY(skip_ctx_init(&c, e, p));
	st = skip_build(&c, p, &(skip_build_w){0, 0, 1}, 0); /* sizes the hops */
	/* The greedy in time can leave stages no single path may take (two more than J apart)
	 * or close every way in the hand-off graph: then again with the origins in another
	 * order. */
	for (int rot = 0; st == CLP_OK && kind == CLP_SKIP_BASE_CA_TIME; rot++) {
		st = base_ca_time(&c, p, rot);
		if (st != CLP_ERR_NOT_FOUND || rot + 1 >= p->nnodes)
			break;
		st = CLP_OK;
	}
	if (st == CLP_OK && kind == CLP_SKIP_BASE_GREEDY)
		st = skip_build(&c, p, &(skip_build_w){1, 0, 1}, 0);
	if (st == CLP_OK && kind == CLP_SKIP_BASE_CBS)
		st = cbs_paths(&c, p, iter_s);
	else if (st == CLP_OK)
		st = best_prio(&c, p, iter_s);
	if (st == CLP_OK)
		st = clp_skip_validate(&e->rules, p);
	skip_ctx_free(&c);
	return st;
}
