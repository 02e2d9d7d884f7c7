/* Node-to-stage allocation (docs/SKIPPIPE.md).
 *
 * Allocation: order the nodes so that well-connected ones are neighbours (a nearest-neighbour
 * chain over round-trip message times), deal the stage labels along that order so that every
 * stretch of the chain holds about one node of each stage (so paths can stay among close
 * nodes), then improve by swapping the stages of two nodes while the simulated iteration time
 * of the constructed paths falls. Also the two simple allocations: stage labels dealt in node
 * order, and shuffled at random until the rules hold. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"
#include "cl/clock.h"

/* Round-trip time of a message of `bytes` between two devices (hop_s included). */
double skip_rtt(const clp_skip_env *e, int a, int b, double bytes)
{
	clp_route r;
	double t = 0;

	if (a == b || !e->cluster)
		return 0;
	r = clp_cluster_route(e->cluster, a, b);
	t += r.spec.latency_s + e->hop_s + (isinf(r.spec.bandwidth_Bps) ? 0 : bytes / r.spec.bandwidth_Bps);
	r = clp_cluster_route(e->cluster, b, a);
	t += r.spec.latency_s + e->hop_s + (isinf(r.spec.bandwidth_Bps) ? 0 : bytes / r.spec.bandwidth_Bps);
	return t;
}

double skip_max_out_bytes(const clp_costs *c)
{
	double b = 0;

	for (int s = 0; s < c->nstages; s++)
		if (c->stages[s].out_bytes > b)
			b = (double)c->stages[s].out_bytes;
	return b;
}

/* A nearest-neighbour chain: start at the node closest to its nearest neighbours. */
void skip_chain(const double *d, int n, int *order)
{
	char *used = calloc((size_t)n, 1);
	int start = 0;
	double best = INFINITY;

	for (int i = 0; i < n; i++)
		order[i] = i; /* without memory: the given order */
	if (!used || n < 1) {
		free(used);
		return;
	}
	for (int u = 0; u < n; u++) {
		double s = 0;

		for (int v = 0; v < n; v++)
			s += d[(size_t)u * n + v] < 1e300 ? log1p(d[(size_t)u * n + v]) : 0;
		if (s < best) {
			best = s;
			start = u;
		}
	}
	order[0] = start;
	used[start] = 1;
	for (int i = 1; i < n; i++) {
		int last = order[i - 1], pick = -1;

		for (int v = 0; v < n; v++)
			if (!used[v] && (pick < 0 || d[(size_t)last * n + v] < d[(size_t)last * n + pick]))
				pick = v;
		if (pick < 0)
			break;
		order[i] = pick;
		used[pick] = 1;
	}
	free(used);
}

/* Stage labels spread along the chain: the j-th of stage s's count[s] labels goes at
 * (j + 1/2) / count[s] of its length. */
static void deal(const int *count, int S, int n, int *label, double *key)
{
	int k = 0;

	for (int s = 0; s < S; s++)
		for (int j = 0; j < count[s]; j++, k++) {
			label[k] = s;
			key[k] = (j + 0.5) / count[s] + 1e-9 * s;
		}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && key[j] < key[j - 1]; j--) {
			double t = key[j];
			int l = label[j];

			key[j] = key[j - 1];
			key[j - 1] = t;
			label[j] = label[j - 1];
			label[j - 1] = l;
		}
}

/* The simulated iteration time of the constructed paths for an allocation (the better of
 * backwards first and forwards first on every node). */
static clp_status score(const clp_skip_env *e, clp_skip_paths *p, int per_origin, double *iter)
{
	static const skip_build_w w[] = {{0.5, 1.0, 1.0}, {1.0, 2.0, 0.5}};
	skip_ctx c;
	clp_status st;

	*iter = INFINITY;
	CLP_TRY(clp_skip_set_origins(p, per_origin));
	CLP_TRY(skip_ctx_init(&c, e, p));
	st = CLP_OK;
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]) && st == CLP_OK; i++) {
		st = skip_build(&c, p, &w[i], 0);
		for (int pol = 0; pol < 2 && st == CLP_OK; pol++) {
			double it;

			memset(p->node_prio, pol, (size_t)p->nnodes);
			st = skip_eval(&c, p, &it, NULL);
			if (st == CLP_OK && it < *iter)
				*iter = it;
		}
	}
	memset(p->node_prio, 0, (size_t)p->nnodes);
	skip_ctx_free(&c);
	if (st == CLP_ERR_NOT_FOUND) { /* no balanced path set on this allocation */
		*iter = INFINITY;
		st = CLP_OK;
	}
	return st;
}

clp_status clp_skip_allocate(const clp_skip_env *e, clp_skip_paths *p, const int *count,
			     int per_origin, const clp_skip_opts *o)
{
	int n = p->nnodes, S = p->nstages, sum = 0, *dev = NULL, *order = NULL, *label = NULL;
	double *d = NULL, cur, bytes, t0 = clp_now();
	uint64_t rng = o ? o->seed * 7919 + 1 : 1;
	int iters = o ? o->iterations : 0, evals = 0;
	clp_status st = CLP_OK;

	for (int s = 0; s < S; s++) {
		if (count[s] < (s == 0 ? 1 : 0))
			return clp_error(CLP_ERR_INVALID, "skip allocation: stage %d needs at least one "
					 "node (got %d)", s, count[s]);
		sum += count[s];
	}
	if (sum != n)
		return clp_error(CLP_ERR_INVALID, "skip allocation: the stages take %d nodes, there "
				 "are %d", sum, n);
	dev = malloc((size_t)n * sizeof(int));
	order = malloc((size_t)n * sizeof(int));
	label = malloc((size_t)n * sizeof(int));
	d = calloc((size_t)n * (size_t)n, sizeof(double));
	if (!dev || !order || !label || !d) {
		st = clp_error(CLP_ERR_NOMEM, "skip allocation: out of host memory");
		goto out;
	}
	if ((st = clp_skip_resolve(e, p, dev)) != CLP_OK)
		goto out;
	bytes = e->costs ? skip_max_out_bytes(e->costs) : 0;
	for (int u = 0; u < n; u++)
		for (int v = 0; v < n; v++)
			d[(size_t)u * n + v] = skip_rtt(e, dev[u], dev[v], bytes);
	skip_chain(d, n, order);
	deal(count, S, n, label, d); /* d is not needed after the chain: it holds the keys */
	for (int i = 0; i < n; i++)
		p->node_stage[order[i]] = label[i];
	if ((st = score(e, p, per_origin, &cur)) != CLP_OK)
		goto out;
	/* Swaps of two nodes' stages, first improvement; all pairs in turn on small clusters,
	 * random pairs on large ones. */
	for (int improved = 1; improved && evals < iters;) {
		improved = 0;
		for (int64_t k = 0; k < (int64_t)n * n && evals < iters; k++) {
			int u, v, su;
			double it;

			if (o && o->time_limit_s > 0 && clp_now() - t0 > o->time_limit_s)
				goto done;
			if (n <= 64) {
				u = (int)(k / n);
				v = (int)(k % n);
				if (v <= u)
					continue;
			} else {
				u = (int)(skip_rand(&rng) % (uint64_t)n);
				v = (int)(skip_rand(&rng) % (uint64_t)n);
			}
			su = p->node_stage[u];
			if (su == p->node_stage[v])
				continue;
			p->node_stage[u] = p->node_stage[v];
			p->node_stage[v] = su;
			evals++;
			if ((st = score(e, p, per_origin, &it)) != CLP_OK)
				goto out;
			if (it < cur - 1e-9) {
				cur = it;
				improved = 1;
			} else {
				p->node_stage[v] = p->node_stage[u];
				p->node_stage[u] = su;
			}
		}
	}
done:
	st = clp_skip_set_origins(p, per_origin);
	if (st == CLP_OK && cur == INFINITY)
		st = clp_error(CLP_ERR_NOT_FOUND, "skip allocation: no allocation found on which a "
			       "balanced path set exists");
out:
	free(dev);
	free(order);
	free(label);
	free(d);
	return st;
}

void clp_skip_alloc_in_order(clp_skip_paths *p, const int *count)
{
	for (int n = 0, s = 0, k = 0; n < p->nnodes; n++) {
		while (s < p->nstages - 1 && k >= count[s]) {
			s++;
			k = 0;
		}
		p->node_stage[n] = s;
		k++;
	}
}

clp_status clp_skip_alloc_random(clp_skip_paths *p, const int *count, int per_origin,
				 uint64_t seed, const clp_skip_rules *r)
{
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL + 77;
	clp_status st = CLP_OK;

	for (int draw = 0; draw < 100; draw++) {
		clp_skip_alloc_in_order(p, count);
		for (int i = p->nnodes - 1; i > 0; i--) {
			int j = (int)(skip_rand(&rng) % (uint64_t)(i + 1)), t = p->node_stage[i];

			p->node_stage[i] = p->node_stage[j];
			p->node_stage[j] = t;
		}
		st = clp_skip_set_origins(p, per_origin);
		if (st == CLP_OK && (st = clp_skip_check_config(r, p)) == CLP_OK)
			return CLP_OK;
	}
	return st;
}
