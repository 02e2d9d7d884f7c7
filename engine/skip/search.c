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
 * The moves are in search_moves.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/search_internal.h"
#include "cl/clock.h"

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
		offer(z, st, it, search_energy(z, it, z->mb_end));
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
		search_load(z);
		total = search_gather(z, ks, z->norig, mbs, cnt);
		z->noise = r < 4 ? 0.3 : 1.0;
		z->nmoved = 0;
		z->flipped = -1;
		/* a chain start only: replan falls back to one by one when the stages do not
		 * divide, which the construction already covers */
		if (search_replan(z, mbs, total, cnt, z->norig, 1, spread[r % 4]) == 2)
			s = offer_both(z, st);
		search_undo(z);
	}
	z->noise = 0.3;
	search_load(z);
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
	z->energy = search_energy(z, z->iter, z->mb_end);
	temp0 = TEMP_FRAC * z->iter;
	end2 = malloc(((size_t)z->p->nmb + 1) * sizeof(double));
	if (!end2)
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	sort_by_end(z);
	search_load(z);
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
		if (!search_try_move(z)) {
			search_undo(z);
			search_load(z);
			continue;
		}
		rep->evaluations++;
		if (skip_eval(z->c, z->p, &iter, end2) != CLP_OK) {
			free(end2);
			return CLP_ERR_STATE; /* the message is set */
		}
		e = search_energy(z, iter, end2);
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
			search_undo(z);
		}
		search_load(z);
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

/* The search's buffers for p (N micro-batches, paths of H hops) and the NSTARTS starts, the
 * origins indexed; search_free releases them (after a failure too). */
static clp_status search_init(search *z, start *st, const skip_ctx *c, clp_skip_paths *p,
			      uint64_t seed, int use_graph)
{
	size_t N = (size_t)p->nmb, H = (size_t)c->env->rules.path_len - 1;

	memset(z, 0, sizeof(*z));
	memset(st, 0, NSTARTS * sizeof(*st));
	z->c = c;
	z->p = p;
	z->rng = seed * 0x9e3779b97f4a7c15ULL + 12345;
	z->flipped = -1;
	z->noise = 0.3;
	z->best_iter = z->best_e = INFINITY;
	z->use_graph = use_graph;
	z->mb_end = malloc((N + 1) * sizeof(double));
	z->load = malloc((size_t)c->nnodes * sizeof(double));
	z->ncost = malloc((size_t)c->nnodes * sizeof(double));
	z->cap = malloc((size_t)c->S * sizeof(int));
	z->order = malloc((3 * N + 1) * sizeof(int));
	z->old = malloc((N * H + 1) * sizeof(clp_skip_hop));
	z->nw = malloc((N * H + 1) * sizeof(clp_skip_hop));
	z->moved = malloc((N + 1) * sizeof(int));
	z->in_graph = malloc(N + 1);
	if (!z->mb_end || !z->load || !z->ncost || !z->cap || !z->order || !z->old || !z->nw ||
	    !z->moved || !z->in_graph)
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	for (int i = 0; i < NSTARTS; i++) {
		st[i].hops = malloc((N * H + 1) * sizeof(clp_skip_hop));
		st[i].prio = malloc((size_t)c->nnodes);
		st[i].iter = st[i].e = INFINITY;
		if (!st[i].hops || !st[i].prio)
			return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	}
	return index_origins(z);
}

static void search_free(search *z, start *st)
{
	if (z->use_graph)
		skip_graph_free(&z->g);
	for (int i = 0; i < NSTARTS; i++) {
		free(st[i].hops);
		free(st[i].prio);
	}
	free(z->mb_end);
	free(z->load);
	free(z->ncost);
	free(z->cap);
	free(z->order);
	free(z->old);
	free(z->nw);
	free(z->moved);
	free(z->in_graph);
	free(z->orig);
	free(z->ofirst);
	free(z->omb);
	free(z->mb_orig);
	clp_skip_paths_free(z->best);
}

/* The population: the construction portfolio, the chain starts and the caller's start. */
static clp_status make_starts(search *z, start *st, const clp_skip_opts *o)
{
	CLP_TRY(skip_build(z->c, z->p, &(skip_build_w){0.5, 1, 1}, 0)); /* sizes the hops */
	CLP_TRY(clp_skip_paths_copy(z->p, &z->best));
	CLP_TRY(construct(z, st));
	if (z->use_graph)
		CLP_TRY(skip_graph_init(&z->g, z->c->nnodes));
	CLP_TRY(graph_rebuild(z));
	z->w = (skip_build_w){0.5, 1, 1};
	CLP_TRY(chain_starts(z, st));
	if (o->init) {
		double it;

		keep(z->p, o->init);
		CLP_TRY(skip_eval(z->c, z->p, &it, z->mb_end));
		offer(z, st, it, search_energy(z, it, z->mb_end));
	}
	return CLP_OK;
}

/* rank[0 .. NSTARTS-1]: the starts by energy, best first (stable: equal energies keep their
 * order). */
static void rank_starts(const start *st, int *rank)
{
	for (int i = 0; i < NSTARTS; i++)
		rank[i] = i;
	for (int i = 1; i < NSTARTS; i++)
		for (int j = i; j > 0 && st[rank[j]].e < st[rank[j - 1]].e; j--) {
			int t = rank[j];

			rank[j] = rank[j - 1];
			rank[j - 1] = t;
		}
}

/* Anneal the starts, best first, each for its share of the moves and of the time from t0; with
 * restarts, all of that again (the random stream goes on), each round with the full moves. */
static clp_status anneal_starts(search *z, const start *st, const clp_skip_opts *o, double t0,
				clp_skip_report *rep)
{
	int N = z->p->nmb, H = z->c->env->rules.path_len - 1, nstart = 0, rank[NSTARTS];
	int nround = o->restarts > 1 ? o->restarts : 1;
	double t_end;

	for (int i = 0; i < NSTARTS; i++)
		nstart += st[i].e < INFINITY;
	rank_starts(st, rank);
	for (int q = 0; q < nround * nstart && o->iterations > 0; q++) {
		int b = rank[q % nstart];

		memcpy(z->p->hops, st[b].hops, (size_t)N * H * sizeof(clp_skip_hop));
		memcpy(z->p->node_prio, st[b].prio, (size_t)z->c->nnodes);
		z->w = st[b].w;
		t_end = t0 + o->time_limit_s * (q + 1) / (nround * nstart);
		CLP_TRY(graph_rebuild(z));
		CLP_TRY(anneal(z, o, o->iterations / nstart + (q % nstart < o->iterations % nstart),
			       t_end, rep));
	}
	return CLP_OK;
}

/* The steps of clp_skip_schedule after the checks: starts, annealing, the best kept in p. */
static clp_status schedule_steps(search *z, start *st, const clp_skip_opts *o,
				 clp_skip_report *rep)
{
	double t0 = clp_now();
	clp_status s = make_starts(z, st, o);

	rep->construct_iter_s = z->best_iter;
	rep->construct_s = clp_now() - t0;
	t0 = clp_now();
	if (s == CLP_OK)
		s = anneal_starts(z, st, o, t0, rep);
	rep->search_s = clp_now() - t0;
	rep->iter_s = z->best_iter;
	CLP_TRY(s);
	keep(z->p, z->best);
	return clp_skip_validate(&z->c->env->rules, z->p);
}

clp_status clp_skip_schedule(const clp_skip_env *e, clp_skip_paths *p, const clp_skip_opts *o,
			     clp_skip_report *rep)
{
	clp_skip_opts dflt;
	clp_skip_report rdummy;
	skip_ctx c;
	search z;
	start st[NSTARTS];
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
	s = search_init(&z, st, &c, p, o->seed, e->rules.memory > 0 && e->rules.deadlock_free);
	if (s == CLP_OK)
		s = schedule_steps(&z, st, o, rep);
	search_free(&z, st);
	skip_ctx_free(&c);
	return s;
}
