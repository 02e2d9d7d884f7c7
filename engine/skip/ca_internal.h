/* The path enumeration shared by the two path baselines of docs/SKIPPIPE.md ("Fixed-allocation
 * benchmark"): the collision-aware search in time (ca.c) and the conflict-based search over
 * chains (cbs.c). Every valid path of one micro-batch is enumerated depth first; a path is
 * scored either in time against the reservations of the micro-batches before it (node time
 * slots, directed link slots) or, in chain mode, by a static estimate of one chain per origin
 * under the constraint tree's bans; the best TOPK are kept. */
#ifndef CLP_SKIP_CA_INTERNAL_H
#define CLP_SKIP_CA_INTERNAL_H

#include "engine/skip/skip_internal.h"

/* Busy intervals of one resource (a node or a directed link), sorted by start. */
typedef struct resv {
	double *a; /* [2 n]: start, end */
	int n, cap;
} resv;

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

/* The enumeration's state for p (ca_free releases it, after a failure too). */
clp_status ca_init(ca *z, const skip_ctx *c, clp_skip_paths *p);
void ca_free(ca *z);
/* Enumerate the rest of the path from hop k (far: the furthest stage reached, w: swaps so far)
 * into z->top / z->topv (z->ntop of them, best first). */
void ca_dfs(ca *z, int k, int far, int w);
/* When the micro-batch on hops h ends (its last backward on the origin), starting no earlier
 * than z->t0; with commit, reserve its slots (0: out of memory). */
int ca_timed(ca *z, const clp_skip_hop *h, int commit, double *end);
/* The chain estimate of chain h for origin z->origin, and its conflicts with the other
 * origins' chains (z->others, z->self excluded). */
double ca_chain_est(const ca *z, const clp_skip_hop *h);
int ca_chain_conflicts(const ca *z, const clp_skip_hop *h);
/* Every node backwards first, then forwards first: the better stays; *iter its time. */
clp_status ca_best_prio(const skip_ctx *c, clp_skip_paths *p, double *iter);
/* cbs.c: the conflict-based baseline's paths on p, *iter their simulated time. */
clp_status skip_cbs_paths(const skip_ctx *c, clp_skip_paths *p, double *iter);

#endif
