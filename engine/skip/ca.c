/* Baselines for the path scheduler, from the SkipPipe paper's description (docs/SKIPPIPE.md,
 * "Fixed-allocation benchmark"), independent of the scheduler's search; every one is scored by
 * the simulator like the scheduler. clp_skip_baseline runs one of them:
 *
 *   CLP_SKIP_BASE_CA_TIME  collision-aware search over a time-expanded graph (here):
 *                          micro-batches in priority order (round-robin over the origins), each
 *                          taking the valid path whose backward ends first given the
 *                          reservations of those before (node time slots and directed link
 *                          slots), every valid path searched (ca_paths.c); an origin starts its
 *                          (k + M)-th micro-batch when its k-th has ended;
 *   CLP_SKIP_BASE_CBS      conflict-based search over one path (chain) per origin (cbs.c);
 *   CLP_SKIP_BASE_GREEDY   each micro-batch in turn takes the cheapest path by compute + message
 *                          time + the work already placed on its nodes (no timing; plan.c's
 *                          construction with those weights).
 * Each is tried with every node backwards first and forwards first; the better is kept. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/ca_internal.h"

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
		ca_dfs(&z, 0, 0, 0);
		for (int j = 0; j < z.ntop && !done; j++) {
			clp_skip_hop *h = z.top + (size_t)j * H;
			int ok = use_graph ? skip_graph_try_path(&g, h, H, m, NULL) : 1;

			if (ok < 0)
				st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
			if (ok != 1)
				continue;
			if (!ca_timed(&z, h, 1, &end[m]))
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
		st = skip_cbs_paths(&c, p, iter_s);
	else if (st == CLP_OK)
		st = ca_best_prio(&c, p, iter_s);
	if (st == CLP_OK)
		st = clp_skip_validate(&e->rules, p);
	skip_ctx_free(&c);
	return st;
}
