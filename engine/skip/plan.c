/* The path planner and the construction (docs/SKIPPIPE.md, "The scheduler").
 *
 * A valid path is a sequence of blocks in increasing stage order: a stage t, or two adjacent
 * stages visited as t + 1 then t (a swap). The planner finds the cheapest one for a micro-batch
 * by dynamic programming over states (stages visited, furthest stage reached, swaps used, the
 * node it is on), where a hop costs the round-trip message time between the two nodes and a
 * visit the node's cost (its compute plus a load term). Stage capacities keep the balance rule:
 * a stage whose remaining capacity equals the micro-batches still to plan must be visited. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"

typedef struct dp {
	const skip_ctx *c;
	const skip_plan_in *in;
	int S, H, J, W, C;
	int *cand, *ncand;     /* [S * C] candidate nodes per stage */
	int *best2;            /* [S * C] for a swap entering stage t + 1 at cand y1: the node of t */
	double *best2c;
	double *D;             /* [states] */
	int *prev, *via;       /* back-pointers: previous state, first node of a swapped pair */
	const int *ban;        /* banned hand-offs (u, v) pairs */
	int nban;
} dp;

static double edge_cost(const dp *d, int s, int x, int y)
{
	const skip_plan_in *in = d->in;
	int banned = 0;

	for (int i = 0; i < d->nban; i++)
		banned |= d->ban[2 * i] == x && d->ban[2 * i + 1] == y;
	if (banned)
		return INFINITY;
	if (in->noise_seed) {
		uint64_t h = in->noise_seed ^ ((uint64_t)x * 0x9e3779b97f4a7c15ULL) ^
			     ((uint64_t)y * 0xc2b2ae3d27d4eb4fULL);

		return skip_uniform(&h);
	}
	return in->edge_w * 2 * skip_msg(d->c, s, x, y);
}

static size_t sidx(const dp *d, int k, int far, int w, int pe, int xi)
{
	return ((((size_t)k * d->S + far) * (size_t)(d->W + 1) + w) * 2 + pe) * d->C + xi;
}

/* The nodes worth considering on each stage: the cheapest by visit cost plus distance from the
 * origin (all of them when there are few). Random paths take one node per stage drawn
 * uniformly (draw: which draw), so that the planner only picks the stages. */
static void candidates(dp *d, int draw)
{
	const skip_ctx *c = d->c;
	int o = d->in->origin;
	uint64_t h = d->in->noise_seed + 0x632be59bd9b4e019ULL * (uint64_t)(draw + 1);

	for (int s = 0; s < d->S; s++) {
		int n = 0;

		if (s == 0) {
			d->cand[0] = o;
			d->ncand[0] = 1;
			continue;
		}
		if (d->in->noise_seed) {
			int k = c->st_first[s + 1] - c->st_first[s];

			d->cand[s * d->C] = k ? c->st_nodes[c->st_first[s] +
							    (int)(skip_rand(&h) % (uint64_t)k)] : -1;
			d->ncand[s] = k > 0;
			continue;
		}
		for (int i = c->st_first[s]; i < c->st_first[s + 1]; i++) {
			int y = c->st_nodes[i];
			double key = d->in->ncost[y] + d->in->edge_w * skip_msg(c, 0, o, y);
			int j = n < d->C ? n++ : d->C;

			if (j == d->C) { /* full: replace the worst if better */
				double wk = -1;
				int wj = -1;

				for (int q = 0; q < d->C; q++) {
					int z = d->cand[s * d->C + q];
					double zk = d->in->ncost[z] + d->in->edge_w * skip_msg(c, 0, o, z);

					if (zk > wk) {
						wk = zk;
						wj = q;
					}
				}
				if (key >= wk)
					continue;
				j = wj;
			}
			d->cand[s * d->C + j] = y;
		}
		d->ncand[s] = n;
	}
}

/* For a swap (t + 1, t): after node y1 of t + 1, the best node of t. */
static void pair_table(dp *d)
{
	for (int t = 1; t + 1 < d->S; t++)
		for (int a = 0; a < d->ncand[t + 1]; a++) {
			int y1 = d->cand[(t + 1) * d->C + a];
			double best = INFINITY;
			int bj = -1;

			for (int b = 0; b < d->ncand[t]; b++) {
				int y2 = d->cand[t * d->C + b];
				double v = edge_cost(d, t + 1, y1, y2) + d->in->ncost[y2];

				if (v < best) {
					best = v;
					bj = b;
				}
			}
			d->best2[(t + 1) * d->C + a] = bj;
			d->best2c[(t + 1) * d->C + a] = best;
		}
}

static int forced(const dp *d, int s)
{
	return d->in->cap[s] >= d->in->remaining;
}

/* No forced stage strictly between a and b. */
static int skips_ok(const dp *d, int a, int b)
{
	for (int s = a + 1; s < b; s++)
		if (forced(d, s))
			return 0;
	return 1;
}

static void relax(dp *d, size_t from, size_t to, double v, int via)
{
	if (v < d->D[to]) {
		d->D[to] = v;
		d->prev[to] = (int)from;
		d->via[to] = via;
	}
}

static void expand(dp *d, int k, int far, int w, int pe, int xi)
{
	size_t from = sidx(d, k, far, w, pe, xi);
	int xs = pe ? far - 1 : far, x = d->cand[xs * d->C + xi];
	double D = d->D[from];

	for (int t = far + 1; t < d->S && t - far <= d->J; t++) {
		if (!skips_ok(d, far, t))
			break;
		if (d->in->cap[t] > 0 && k + 1 <= d->H)
			for (int a = 0; a < d->ncand[t]; a++) {
				int y = d->cand[t * d->C + a];

				relax(d, from, sidx(d, k + 1, t, w, 0, a),
				      D + edge_cost(d, xs, x, y) + d->in->ncost[y], -1);
			}
		if (t + 1 < d->S && t + 1 - far <= d->J && w < d->W && k + 2 <= d->H &&
		    d->in->cap[t] > 0 && d->in->cap[t + 1] > 0)
			for (int a = 0; a < d->ncand[t + 1]; a++) {
				int y1 = d->cand[(t + 1) * d->C + a], b = d->best2[(t + 1) * d->C + a];

				if (b < 0)
					continue;
				relax(d, from, sidx(d, k + 2, t + 1, w + 1, 1, b),
				      D + edge_cost(d, xs, x, y1) + d->in->ncost[y1] +
					      d->best2c[(t + 1) * d->C + a], y1);
			}
	}
}

/* Walk the back-pointers from the final state into h[0 .. H-1]. */
static void trace_back(const dp *d, size_t st, clp_skip_hop *h)
{
	int k = d->H;

	while (k > 0) {
		size_t r = st;
		int xi = (int)(r % (size_t)d->C), pe, far;

		r /= (size_t)d->C;
		pe = (int)(r % 2);
		r /= 2;
		r /= (size_t)(d->W + 1);
		far = (int)(r % (size_t)d->S);
		if (pe) {
			h[k - 1] = (clp_skip_hop){far - 1, d->cand[(far - 1) * d->C + xi]};
			h[k - 2] = (clp_skip_hop){far, d->via[st]};
			k -= 2;
		} else {
			h[k - 1] = (clp_skip_hop){far, d->cand[far * d->C + xi]};
			k -= 1;
		}
		st = (size_t)d->prev[st];
	}
}

static clp_status plan_once(dp *d, clp_skip_hop *h)
{
	size_t nst = sidx(d, d->H + 1, 0, 0, 0, 0), best_st = 0;
	double best = INFINITY;
	int o = d->in->origin;

	for (size_t i = 0; i < nst; i++)
		d->D[i] = INFINITY;
	pair_table(d);
	d->D[sidx(d, 0, 0, 0, 0, 0)] = 0;
	for (int k = 0; k < d->H; k++)
		for (int far = 0; far < d->S; far++)
			for (int w = 0; w <= d->W; w++)
				for (int pe = 0; pe < 2; pe++)
					for (int xi = 0; xi < d->C; xi++)
						if (d->D[sidx(d, k, far, w, pe, xi)] < INFINITY)
							expand(d, k, far, w, pe, xi);
	for (int far = 0; far < d->S; far++) {
		if (!skips_ok(d, far, d->S))
			continue;
		for (int w = 0; w <= d->W; w++)
			for (int pe = 0; pe < 2; pe++)
				for (int xi = 0; xi < d->C; xi++) {
					size_t st = sidx(d, d->H, far, w, pe, xi);
					int xs = pe ? far - 1 : far;
					double v;

					if (d->D[st] == INFINITY || xi >= d->ncand[xs < 0 ? 0 : xs])
						continue;
					v = d->D[st] + edge_cost(d, xs, d->cand[xs * d->C + xi], o);
					if (v < best) {
						best = v;
						best_st = st;
					}
				}
	}
	if (best == INFINITY)
		return CLP_ERR_NOT_FOUND;
	trace_back(d, best_st, h);
	return CLP_OK;
}

clp_status skip_plan_path(const skip_ctx *c, const skip_plan_in *in, clp_skip_hop *h)
{
	const clp_skip_rules *r = &c->env->rules;
	dp d = {0};
	int ban[2 * 64];
	clp_status st = CLP_OK;
	size_t nst;

	if (c->H == 0)
		return CLP_OK;
	d.c = c;
	d.in = in;
	d.S = c->S;
	d.H = c->H;
	d.J = r->max_jump;
	d.W = r->max_swaps < c->H / 2 ? r->max_swaps : c->H / 2;
	d.C = 1;
	for (int s = 1; s < c->S; s++) {
		int n = c->st_first[s + 1] - c->st_first[s];

		if (n > d.C)
			d.C = n;
	}
	if (in->max_cand > 0 && d.C > in->max_cand)
		d.C = in->max_cand;
	if (in->noise_seed)
		d.C = 1;
	d.ban = ban;
	nst = sidx(&d, d.H + 1, 0, 0, 0, 0);
	d.cand = malloc((size_t)d.S * d.C * sizeof(int));
	d.ncand = malloc((size_t)d.S * sizeof(int));
	d.best2 = malloc((size_t)d.S * d.C * sizeof(int));
	d.best2c = malloc((size_t)d.S * d.C * sizeof(double));
	d.D = malloc(nst * sizeof(double));
	d.prev = malloc(nst * sizeof(int));
	d.via = malloc(nst * sizeof(int));
	if (!d.cand || !d.ncand || !d.best2 || !d.best2c || !d.D || !d.prev || !d.via) {
		st = clp_error(CLP_ERR_NOMEM, "skip planner: out of host memory");
		goto out;
	}
	candidates(&d, 0);
	for (int draw = 0;;) {
		int bad[2], ok;

		if (plan_once(&d, h) != CLP_OK) {
			/* Random paths: the drawn nodes may be what closes every way; draw again. */
			if (in->noise_seed && d.nban > 0 && draw < 16) {
				candidates(&d, ++draw);
				d.nban = 0;
				continue;
			}
			st = CLP_ERR_NOT_FOUND;
			break;
		}
		if (!in->graph)
			break;
		ok = skip_graph_try_path(in->graph, h, d.H, in->mb, bad);
		if (ok < 0)
			st = clp_error(CLP_ERR_NOMEM, "skip planner: out of host memory");
		if (ok)
			break;
		if (d.nban == 64) {
			st = CLP_ERR_NOT_FOUND;
			break;
		}
		ban[2 * d.nban] = bad[0];
		ban[2 * d.nban + 1] = bad[1];
		d.nban++;
	}
out:
	free(d.cand);
	free(d.ncand);
	free(d.best2);
	free(d.best2c);
	free(d.D);
	free(d.prev);
	free(d.via);
	return st;
}

/* The building state: capacities, loads and the hand-off graph. */
typedef struct build {
	const skip_ctx *c;
	clp_skip_paths *p;
	int *cap;
	double *load;
	skip_graph *g;
	uint64_t rng;
} build;

static void take(build *b, const clp_skip_hop *h, int sign)
{
	for (int i = 0; i < b->c->H; i++) {
		b->cap[h[i].stage] -= sign;
		b->load[h[i].node] += sign * b->c->work[h[i].node];
	}
}

/* Plan mb m (in: its inputs, remaining counting it); when no path fits what is left (the greedy
 * can leave stages no single path may take, e.g. two with more than J between them), re-plan
 * it together with an earlier one: their stages pooled, m first, then the other. */
static clp_status plan_or_repair(build *b, skip_plan_in *in, int m, clp_skip_hop *h,
				 clp_skip_hop *h2)
{
	const skip_ctx *c = b->c;
	clp_skip_paths *p = b->p;
	clp_status st = skip_plan_path(c, in, h);

	if (st != CLP_ERR_NOT_FOUND)
		return st;
	for (int tries = 0; tries < 64 && m > 0; tries++) {
		int j = (int)(skip_rand(&b->rng) % (uint64_t)m);
		clp_skip_hop *old = p->hops + p->hop_start[j];
		skip_plan_in in2 = *in;

		take(b, old, -1);
		if (b->g)
			skip_graph_remove_path(b->g, p, j);
		in2.remaining = in->remaining + 1;
		if (in->noise_seed)
			in2.noise_seed = skip_rand(&b->rng) | 1;
		st = skip_plan_path(c, &in2, h);
		if (st == CLP_OK) {
			take(b, h, 1);
			in2.origin = p->origin[j];
			in2.mb = j;
			in2.remaining = in->remaining;
			st = skip_plan_path(c, &in2, h2);
			if (st == CLP_OK) {
				take(b, h2, 1);
				take(b, h, -1); /* the caller takes m's */
				memcpy(old, h2, (size_t)c->H * sizeof(*h2));
				return CLP_OK;
			}
			take(b, h, -1);
			for (int i = 0; b->g && i + 1 < c->H; i++)
				skip_graph_remove(b->g, h[i].node, h[i + 1].node);
		}
		take(b, old, 1);
		if (b->g)
			skip_graph_add_path(b->g, p, j);
		if (st != CLP_ERR_NOT_FOUND)
			return st;
	}
	return CLP_ERR_NOT_FOUND;
}

clp_status skip_build(const skip_ctx *c, clp_skip_paths *p, const skip_build_w *w,
		      uint64_t noise_seed)
{
	const clp_skip_rules *r = &c->env->rules;
	int N = p->nmb, H = c->H, *cap = NULL, *round = NULL;
	double *load = NULL, *wload = NULL, *ncost = NULL;
	clp_skip_hop *h = NULL;
	skip_graph g = {0};
	int use_graph = r->memory > 0 && r->deadlock_free, wave = -1;
	uint64_t rng = noise_seed;
	clp_status st = CLP_OK;
	build b;

	cap = malloc((size_t)c->S * sizeof(int));
	round = calloc((size_t)c->nnodes, sizeof(int));
	load = calloc((size_t)c->nnodes, sizeof(double));
	wload = calloc((size_t)c->nnodes, sizeof(double));
	ncost = malloc((size_t)c->nnodes * sizeof(double));
	h = malloc((2 * (size_t)H + 1) * sizeof(*h));
	if (!cap || !round || !load || !wload || !ncost || !h) {
		st = clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
		goto out;
	}
	if (use_graph && (st = skip_graph_init(&g, c->nnodes)) != CLP_OK)
		goto out;
	for (int s = 0; s < c->S; s++)
		cap[s] = s == 0 ? 0 : r->balance && c->S > 1 ? (int)((int64_t)N * H / (c->S - 1)) : N;
	b = (build){c, p, cap, load, use_graph ? &g : NULL, noise_seed ^ 0x5851f42d4c957f2dULL};
	for (int m = 0; m < N && st == CLP_OK; m++) {
		int o = p->origin[m], wv = r->memory > 0 ? round[o] / r->memory : round[o];
		skip_plan_in in = {o, m, cap, r->balance ? N - m : N + 1, ncost, w->edge_w, 0, 8,
				   use_graph ? &g : NULL};

		round[o]++;
		if (wv != wave) {
			wave = wv;
			memset(wload, 0, (size_t)c->nnodes * sizeof(double));
		}
		for (int y = 0; y < c->nnodes; y++)
			ncost[y] = noise_seed ? skip_uniform(&rng)
					      : c->work[y] + w->load_w * load[y] + w->wave_w * wload[y];
		if (noise_seed) {
			in.noise_seed = skip_rand(&rng) | 1;
			in.max_cand = 0;
		}
		st = plan_or_repair(&b, &in, m, h, h + H);
		if (st == CLP_ERR_NOT_FOUND)
			st = clp_error(CLP_ERR_NOT_FOUND, "skip: no valid path left for mb %d (origin "
				       "node %d) under the rules (P = %d, J = %d, W = %d) and the "
				       "stage capacities", m, o, r->path_len, r->max_jump,
				       r->max_swaps);
		if (st == CLP_OK)
			st = clp_skip_set_hops(p, m, h, H);
		if (st == CLP_OK)
			take(&b, h, 1);
		for (int i = 0; i < H && st == CLP_OK; i++)
			wload[h[i].node] += c->work[h[i].node];
	}
out:
	if (use_graph)
		skip_graph_free(&g);
	free(cap);
	free(round);
	free(load);
	free(wload);
	free(ncost);
	free(h);
	return st;
}

clp_status clp_skip_random(const clp_skip_env *e, clp_skip_paths *p, uint64_t seed)
{
	skip_ctx c;
	skip_build_w w = {0, 0, 1};
	clp_status st;

	double t[2] = {0, 0};

	CLP_TRY(clp_skip_check_config(&e->rules, p));
	CLP_TRY(skip_ctx_init(&c, e, p));
	st = skip_build(&c, p, &w, seed * 0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL);
	/* The better of every node backwards first and every node forwards first: random paths,
	 * not a handicap in priorities. */
	for (int pol = 0; pol < 2 && st == CLP_OK; pol++) {
		memset(p->node_prio, pol, (size_t)p->nnodes);
		st = skip_eval(&c, p, &t[pol], NULL);
	}
	if (st == CLP_OK)
		memset(p->node_prio, t[1] < t[0], (size_t)p->nnodes);
	skip_ctx_free(&c);
	return st;
}
