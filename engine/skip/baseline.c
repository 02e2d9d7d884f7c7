/* The full-pipeline baseline (docs/SKIPPIPE.md): K complete pipelines on the same nodes, each
 * micro-batch through every stage of its pipeline in order, the global batch round-robin over
 * the pipelines; nodes in no pipeline idle. The baseline gets its own best arrangement of the
 * nodes, not the allocation made for paths: two starts (pipelines built greedily on the given
 * allocation; consecutive stretches of a nearest-neighbour chain over all nodes, so that each
 * pipeline sits among close nodes; each with every node running backwards first and forwards
 * first), then simulated annealing over exchanges of two nodes' places (pipeline and stage, or
 * an idle node taking one's place) and flips of a node's priority, every candidate scored by
 * the simulator like the path scheduler's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"

typedef struct base {
	const clp_skip_env *e;
	clp_skip_env e2; /* P = S */
	clp_skip_paths *p;
	int K, S, n, total;
	int *pipe;       /* [K * S] node of stage s in pipeline k */
	unsigned char *prio; /* [n] each node's priority (backwards or forwards first) */
	const int *dev;
	double *end;     /* [total] */
} base;

/* Nodes in no pipeline serve stage 0 and stay idle. */
static clp_status apply(base *b)
{
	clp_skip_paths *p = b->p;
	clp_skip_hop h[CLP_SKIP_MAX_STAGES];

	for (int n = 0; n < b->n; n++) {
		p->node_stage[n] = 0;
		p->node_prio[n] = b->prio[n];
	}
	for (int k = 0; k < b->K; k++)
		for (int s = 0; s < b->S; s++)
			p->node_stage[b->pipe[k * b->S + s]] = s;
	for (int m = 0; m < b->total; m++) {
		int k = m % b->K;

		p->origin[m] = b->pipe[k * b->S];
		for (int s = 1; s < b->S; s++)
			h[s - 1] = (clp_skip_hop){s, b->pipe[k * b->S + s]};
		CLP_TRY(clp_skip_set_hops(p, m, h, b->S - 1));
	}
	return CLP_OK;
}

/* Iteration time, and the energy the annealing lowers: iteration plus a fifth of the mean end
 * of the micro-batches (so that pipelines off the critical one improve too). */
static clp_status eval(base *b, double *iter, double *energy)
{
	skip_ctx c;
	double mean = 0;
	clp_status st;

	CLP_TRY(apply(b));
	CLP_TRY(skip_ctx_init(&c, &b->e2, b->p));
	st = skip_eval(&c, b->p, iter, b->end);
	skip_ctx_free(&c);
	for (int m = 0; m < b->total; m++)
		mean += b->end[m] / b->total;
	*energy = *iter + 0.2 * mean;
	return st;
}

/* Greedy on the given allocation: for each pipeline, the origin and chain of closest unused
 * nodes with the cheapest round trip. */
static void greedy(base *b, char *used, int *cur, int *best)
{
	const clp_skip_paths *p = b->p;
	double bytes = skip_max_out_bytes(b->e->costs);

	for (int k = 0; k < b->K; k++) {
		double best_c = INFINITY;

		for (int o = 0; o < b->n; o++) {
			double cost = 0;

			if (used[o] || p->node_stage[o] != 0)
				continue;
			cur[0] = o;
			for (int s = 1; s < b->S; s++) {
				int pick = -1;
				double pc = INFINITY;

				for (int y = 0; y < b->n; y++) {
					double v;

					if (used[y] || p->node_stage[y] != s || y == o)
						continue;
					v = skip_rtt(b->e, b->dev[cur[s - 1]], b->dev[y], bytes);
					if (pick < 0 || v < pc) {
						pc = v;
						pick = y;
					}
				}
				cur[s] = pick;
				cost += pc;
			}
			cost += skip_rtt(b->e, b->dev[cur[b->S - 1]], b->dev[o], bytes);
			if (cost < best_c) {
				best_c = cost;
				memcpy(best, cur, (size_t)b->S * sizeof(int));
			}
		}
		for (int s = 0; s < b->S; s++) {
			b->pipe[k * b->S + s] = best[s];
			used[best[s]] = 1;
		}
	}
}

/* Stretches of the chain: pipeline k takes order[off + k S ..], its stages in chain order. */
static void stretch(base *b, const int *order, int off)
{
	for (int i = 0; i < b->K * b->S; i++)
		b->pipe[i] = order[off + i];
}

static clp_status starts(base *b, int *best_pipe, unsigned char *best_prio, double *best_it,
		       double *best_e)
{
	double bytes = skip_max_out_bytes(b->e->costs), it, en;
	int n = b->n, KS = b->K * b->S;
	double *d = calloc((size_t)n * (size_t)n, sizeof(double));
	int *order = malloc((size_t)n * sizeof(int)), *cur = malloc((size_t)n * sizeof(int));
	int *tmp = malloc((size_t)n * sizeof(int));
	char *used = calloc((size_t)n, 1);
	clp_status st = CLP_OK;

	*best_it = *best_e = INFINITY;
	if (!d || !order || !cur || !tmp || !used) {
		st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
		goto out;
	}
	greedy(b, used, cur, tmp);
	for (int off = -1; off <= n - KS && st == CLP_OK; off++) {
		if (off == 0) {
			for (int u = 0; u < n; u++)
				for (int v = 0; v < n; v++)
					d[(size_t)u * n + v] = skip_rtt(b->e, b->dev[u], b->dev[v], bytes);
			skip_chain(d, n, order);
		}
		if (off >= 0)
			stretch(b, order, off);
		for (int pol = 0; pol < 2 && st == CLP_OK; pol++) {
			memset(b->prio, pol, (size_t)n);
			if ((st = eval(b, &it, &en)) == CLP_OK &&
			    (it < *best_it || (it == *best_it && en < *best_e))) {
				*best_it = it;
				*best_e = en;
				memcpy(best_pipe, b->pipe, (size_t)KS * sizeof(int));
				memcpy(best_prio, b->prio, (size_t)n);
			}
		}
	}
out:
	free(d);
	free(order);
	free(cur);
	free(tmp);
	free(used);
	return st;
}

/* Moves: two nodes exchange places (or an idle one takes a place), or a node's priority flips. */
static clp_status anneal(base *b, int iters, uint64_t seed, int *best_pipe,
			 unsigned char *best_prio, double *best_it)
{
	int KS = b->K * b->S;
	double cur_e, cur_it, best_e, t0;
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL + 77;

	memcpy(b->pipe, best_pipe, (size_t)KS * sizeof(int));
	memcpy(b->prio, best_prio, (size_t)b->n);
	CLP_TRY(eval(b, &cur_it, &cur_e));
	best_e = cur_e;
	*best_it = cur_it;
	t0 = 0.02 * cur_it;
	for (int i = 0; i < iters; i++) {
		int a = (int)(skip_rand(&rng) % (uint64_t)KS), y = (int)(skip_rand(&rng) % (uint64_t)b->n);
		int x = b->pipe[a], other = -1;
		double it, en, temp = t0 * (1 - (double)i / iters) * (1 - (double)i / iters);

		int flip = skip_uniform(&rng) < 0.1;

		if (flip) {
			b->prio[y] ^= 1;
		} else {
			if (y == x)
				continue;
			for (int q = 0; q < KS; q++)
				if (b->pipe[q] == y)
					other = q;
			b->pipe[a] = y;
			if (other >= 0)
				b->pipe[other] = x;
		}
		CLP_TRY(eval(b, &it, &en));
		if (en <= cur_e || (temp > 0 && skip_uniform(&rng) < exp((cur_e - en) / temp))) {
			cur_e = en;
			cur_it = it;
			if (it < *best_it || (it == *best_it && en < best_e)) {
				*best_it = it;
				best_e = en;
				memcpy(best_pipe, b->pipe, (size_t)KS * sizeof(int));
				memcpy(best_prio, b->prio, (size_t)b->n);
			}
		} else if (flip) {
			b->prio[y] ^= 1;
		} else {
			b->pipe[a] = x;
			if (other >= 0)
				b->pipe[other] = y;
		}
	}
	return CLP_OK;
}

clp_status clp_skip_full_pipeline(const clp_skip_env *e, clp_skip_paths *p, int K, int total,
				  const clp_skip_opts *o, double *iter_s)
{
	base b = {0};
	int n = p->nnodes, S = p->nstages, *dev = NULL, *best = NULL;
	unsigned char *best_prio = NULL;
	double it = 0, en;
	clp_status st = CLP_OK;

	if (K < 1 || total < K || total > CLP_SKIP_MAX_MB || S > CLP_SKIP_MAX_STAGES)
		return clp_error(CLP_ERR_INVALID, "skip baseline: %d pipelines for %d micro-batches "
				 "(1 to %d, at most %d stages)", K, total, CLP_SKIP_MAX_MB,
				 CLP_SKIP_MAX_STAGES);
	if (K * S > n)
		return clp_error(CLP_ERR_INVALID, "skip baseline: %d pipelines of %d stages need %d "
				 "nodes, there are %d", K, S, K * S, n);
	for (int s = 0; s < S; s++) {
		int c = 0;

		for (int i = 0; i < n; i++)
			c += p->node_stage[i] == s;
		if (c < K)
			return clp_error(CLP_ERR_INVALID, "skip baseline: %d pipelines need %d nodes on "
					 "stage %d of the allocation, it has %d", K, K, s, c);
	}
	b.e = e;
	b.e2 = *e;
	b.e2.rules.path_len = S;
	b.p = p;
	b.K = K;
	b.S = S;
	b.n = n;
	b.total = total;
	b.pipe = malloc((size_t)K * S * sizeof(int));
	best = malloc((size_t)K * S * sizeof(int));
	dev = malloc((size_t)n * sizeof(int));
	b.end = malloc(((size_t)total + 1) * sizeof(double));
	b.prio = calloc((size_t)n, 1);
	best_prio = calloc((size_t)n, 1);
	if (!b.pipe || !best || !dev || !b.end || !b.prio || !best_prio) {
		st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
		goto out;
	}
	b.dev = dev;
	if ((st = clp_skip_resolve(e, p, dev)) != CLP_OK)
		goto out;
	{ /* total micro-batches, round-robin over the pipelines */
		int *orig = realloc(p->origin, ((size_t)total + 1) * sizeof(int));
		int *hs = calloc((size_t)total + 1, sizeof(int));

		if (orig)
			p->origin = orig;
		if (!orig || !hs) {
			free(hs);
			st = clp_error(CLP_ERR_NOMEM, "skip baseline: out of host memory");
			goto out;
		}
		free(p->hop_start);
		p->hop_start = hs;
		p->nmb = total;
	}
	st = starts(&b, best, best_prio, &it, &en);
	if (st == CLP_OK && o && o->iterations > 0)
		st = anneal(&b, o->iterations, o->seed, best, best_prio, &it);
	if (st == CLP_OK) {
		memcpy(b.pipe, best, (size_t)K * S * sizeof(int));
		memcpy(b.prio, best_prio, (size_t)n);
		st = eval(&b, &it, &en);
	}
	*iter_s = it;
out:
	free(b.pipe);
	free(best);
	free(dev);
	free(b.end);
	free(b.prio);
	free(best_prio);
	return st;
}
