/* The conflict-based baseline (CLP_SKIP_BASE_CBS, docs/SKIPPIPE.md "Fixed-allocation
 * benchmark"): one path (chain) per origin. Each origin takes its best chain alone, then a
 * constraint tree resolves the conflicts (two origins on one node; a stage taken by more chains
 * than its balance allows) by forbidding the node or stage to one of them, best first on the
 * estimated iteration (rounds of M round trips), with focal widths for ECBS; the best few
 * conflict-free sets are simulated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/ca_internal.h"

/* Focal widths tried by the conflict-based search: 1 is plain CBS on the estimate (optimal for
 * it, slow to settle node conflicts), wider ones settle them sooner (ECBS). */
static const double focal_ws[] = {1.0, 1.1, 1.25, 1.5};

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
	ca_dfs(z, 0, 0, 0);
	if (!z->ntop)
		return 0;
	z->bound = z->focal_w * z->topv[0];
	z->focal = 1;
	z->self = a;
	z->others = n->chain;
	z->ntop = 0;
	z->leaves = 0;
	ca_dfs(z, 0, 0, 0);
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
		n->nconf += ca_chain_conflicts(z, n->chain + (size_t)a * z->H);
	}
	for (int a = 0; a < norig; a++) {
		double v;

		z->origin = orig[a];
		v = ca_chain_est(z, n->chain + (size_t)a * z->H);
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

clp_status skip_cbs_paths(const skip_ctx *c, clp_skip_paths *p, double *iter)
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
			st = ca_best_prio(c, p, &it);
		if (st == CLP_OK && it < *iter) {
			*iter = it;
			memcpy(keep, p->hops, (size_t)N * H * sizeof(clp_skip_hop));
		}
	}
	if (st == CLP_OK && nsol) {
		memcpy(p->hops, keep, (size_t)N * H * sizeof(clp_skip_hop));
		st = ca_best_prio(c, p, iter);
	}
	free(sol);
	free(keep);
	free(orig);
	return st;
}
