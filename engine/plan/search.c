/* The search over placements (see plan.h): device subsets, data-parallel degree and depth,
 * replica groupings, schedules, PipeFisher and recomputation; the layer balance of each; the
 * simulator as the judge; refinement of the best few on the simulator. Also the naive plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/plan_internal.h"
#include "engine/sched/gen.h"

typedef struct cands {
	clp_plan *v;
	int n, cap;
} cands;

static void cands_free(cands *c)
{
	for (int i = 0; i < c->n; i++)
		clp_plan_clear(&c->v[i]);
	free(c->v);
	memset(c, 0, sizeof(*c));
}

static clp_status cands_push(cands *c, const clp_plan *p)
{
	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 64;
		clp_plan *v = realloc(c->v, (size_t)cap * sizeof(*v));

		if (!v)
			return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
		c->v = v;
		c->cap = cap;
	}
	memset(&c->v[c->n], 0, sizeof(c->v[0]));
	CLP_TRY(clp_plan_copy(&c->v[c->n], p));
	c->n++;
	return CLP_OK;
}

static int fits(const clp_plan *p)
{
	return p->over_memory == 0;
}

/* a better than b: fits first, then the faster step, then fewer ranks. */
static int better(const clp_plan *a, const clp_plan *b)
{
	if (fits(a) != fits(b))
		return fits(a);
	if (a->step_s < b->step_s * (1 - 1e-9))
		return 1;
	if (a->step_s > b->step_s * (1 + 1e-9))
		return 0;
	return a->nranks < b->nranks;
}

static int by_step(const void *pa, const void *pb)
{
	const clp_plan *a = pa, *b = pb;

	return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

/* Each position's budget: the least usable memory among its devices over the replicas. */
static void budgets(const plan_ctx *x, const clp_plan *p, int64_t *budget)
{
	for (int d = 0; d < p->depth; d++) {
		budget[d] = 0;
		for (int q = 0; q < p->replicas; q++) {
			int64_t u = x->usable[p->device[q * p->depth + d]];

			if (u > 0 && (budget[d] == 0 || u < budget[d]))
				budget[d] = u;
		}
	}
}

/* Balance p's layers and simulate; where a rank's simulated peak is over its device, cut that
 * position's budget by the excess and balance again. CLP_ERR_NOMEM: nothing fits. */
static clp_status balance_and_eval(plan_ctx *x, const plan_shape *sh, clp_plan *p, int *binding)
{
	int64_t budget[1024];
	clp_status st = CLP_OK;

	budgets(x, p, budget);
	*binding = 0;
	for (int tries = 0; tries < 5; tries++) {
		int bind = 0;

		CLP_TRY(plan_balance(x, sh, p, budget, &bind));
		*binding |= bind;
		CLP_TRY(plan_eval(x, p));
		if (fits(p))
			return CLP_OK;
		*binding = 1;
		for (int r = 0; r < p->nranks; r++)
			if (p->usable_bytes[r] > 0 && p->peak_bytes[r] > p->usable_bytes[r]) {
				int d = r % p->depth;
				int64_t over = p->peak_bytes[r] - p->usable_bytes[r];

				budget[d] = budget[d] > over ? budget[d] - over - over / 64 : 1;
			}
	}
	st = clp_error(CLP_ERR_NOMEM, "plan: %s, %d x %d ranks: the simulated peak stays over a "
		       "device's memory", clp_sched_kind_name(p->kind), p->depth, p->replicas);
	return st;
}

/* Devices in a chain of cheap hops: from the subset's first device, always on to the unvisited
 * device the stage output reaches soonest (latency + bytes / bandwidth). Cluster files list
 * devices in any order; a geo-distributed one may alternate regions. */
static void chain(const plan_ctx *x, int *ord, int n)
{
	double bytes = (double)x->m->batch * (double)x->m->seq * x->m->cfg.d_model * 4;

	for (int i = 1; i < n; i++) {
		int best = i;
		double bc = INFINITY;

		for (int j = i; j < n; j++) {
			clp_route rt = clp_cluster_route(x->c, ord[i - 1], ord[j]);
			double cost = rt.spec.latency_s + bytes / rt.spec.bandwidth_Bps;

			if (cost < bc * (1 - 1e-9))
				bc = cost, best = j;
		}
		{
			int t = ord[i];

			ord[i] = ord[best], ord[best] = t;
		}
	}
}

/* Devices of each (replica, position) from a subset in cluster order. Groupings: 0 contiguous
 * pipelines; 1 strided (the devices of a position are neighbours in the cluster; alone: most
 * memory first); 2 speed classes (position p gets the p-th fastest group of R devices);
 * 3 and 4 as 0 and 1 on the chain of cheapest hops. */
#define NGROUPINGS 5
static const char *const grouping_names[NGROUPINGS] = {
	"contiguous pipelines", "strided replicas", "speed classes",
	"contiguous on the cheapest chain", "strided on the cheapest chain"};

static int group(const plan_ctx *x, const int *sub, int n, int R, int g, int *dev)
{
	int D = n / R, *ord = malloc((size_t)n * sizeof(int)), strided;

	if (!ord)
		return 0;
	memcpy(ord, sub, (size_t)n * sizeof(int));
	if (g >= 3)
		chain(x, ord, n);
	if ((g == 1 && R == 1) || g == 2)
		for (int i = 1; i < n; i++) /* stable insertion sort */
			for (int j = i; j > 0; j--) {
				int a = ord[j - 1], b = ord[j], swap;

				if (g == 1)
					swap = x->usable[b] > x->usable[a];
				else
					swap = x->tf[b] + x->tb[b] < (x->tf[a] + x->tb[a]) * (1 - 1e-9);
				if (!swap)
					break;
				ord[j - 1] = b, ord[j] = a;
			}
	strided = (g == 1 && R > 1) || g == 2 || g == 4;
	for (int q = 0; q < R; q++)
		for (int p = 0; p < D; p++)
			dev[q * D + p] = strided ? ord[p * R + q] : ord[q * D + p];
	free(ord);
	return 1;
}

static int same_devices(const clp_plan *a, const int *dev, int n, int R)
{
	return a->nranks == n && a->replicas == R &&
	       !memcmp(a->device, dev, (size_t)n * sizeof(int));
}

/* One structure (kind, D, R, devices): without recomputation, then with it where memory binds. */
static clp_status try_structure(plan_ctx *x, clp_plan *p, cands *out, clp_status *last)
{
	plan_shape *sh = malloc(sizeof(*sh));
	int rcs[2], nrc = 0;
	clp_status st;

	if (!sh)
		return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	st = plan_shape_of(p, x->m, sh);
	if (st == CLP_ERR_INVALID) { /* the generator refuses this combination */
		free(sh);
		return CLP_OK;
	}
	if (x->o.recompute >= 0)
		rcs[nrc++] = x->o.recompute;
	else
		rcs[nrc++] = 0, rcs[nrc++] = 1;
	for (int i = 0; st == CLP_OK && i < nrc; i++) {
		int binding = 0;
		clp_status e;

		p->recompute = rcs[i];
		e = balance_and_eval(x, sh, p, &binding);
		if (x->o.verbose && e == CLP_OK)
			fprintf(stderr, "plan: %-11s D %d R %d%s%s: %.6g s%s\n",
				clp_sched_kind_name(p->kind), p->depth, p->replicas,
				p->recompute ? " recompute" : "",
				p->pipefisher ? p->pf_split ? " pipefisher split" : " pipefisher" : "",
				p->step_s, fits(p) ? "" : " (over memory)");
		if (e == CLP_OK)
			st = cands_push(out, p);
		else if (e == CLP_ERR_NOMEM || e == CLP_ERR_INVALID)
			*last = e;
		else
			st = e;
		/* recomputation only buys memory: skip it when nothing was short of it */
		if (x->o.recompute < 0 && i == 0 && e == CLP_OK && !binding)
			break;
	}
	free(sh);
	return st;
}

/* Hill-climb p on the simulator: single layers moved between stages, devices of two positions
 * exchanged (then balanced again). */
static clp_status refine(plan_ctx *x, clp_plan *p)
{
	/* PipeFisher's pass simulates many steps per evaluation: a quarter of the budget */
	int budget = p->pipefisher ? x->o.refine_evals / 4 : x->o.refine_evals, improved = 1;
	clp_plan t = {0};
	plan_shape *sh = malloc(sizeof(*sh));
	clp_status st = CLP_OK;

	if (!sh)
		return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	st = plan_shape_of(p, x->m, sh);
	while (st == CLP_OK && improved && budget > 0) {
		improved = 0;
		for (int dist = 1; dist < p->nstages && budget > 0 && st == CLP_OK; dist++)
			for (int i = 0; i < p->nstages && budget > 0 && st == CLP_OK; i++)
				for (int dir = -1; dir <= 1 && budget > 0 && st == CLP_OK; dir += 2) {
					int j = i + dir * dist;

					if (j < 0 || j >= p->nstages || p->layers[i] < 2)
						continue;
					st = clp_plan_copy(&t, p);
					if (st != CLP_OK)
						break;
					t.layers[i]--, t.layers[j]++;
					st = plan_eval(x, &t);
					budget--;
					if (st == CLP_OK && better(&t, p)) {
						st = clp_plan_copy(p, &t);
						improved = 1;
					}
				}
		for (int a = 0; a < p->depth && budget > 0 && st == CLP_OK; a++)
			for (int b = a + 1; b < p->depth && budget > 0 && st == CLP_OK; b++) {
				int bind;
				clp_status e;

				st = clp_plan_copy(&t, p);
				for (int q = 0; st == CLP_OK && q < p->replicas; q++) {
					int *v = &t.device[q * p->depth];
					int k = v[a];

					v[a] = v[b], v[b] = k;
				}
				if (st != CLP_OK)
					break;
				e = balance_and_eval(x, sh, &t, &bind);
				budget--;
				if (e == CLP_OK && better(&t, p)) {
					st = clp_plan_copy(p, &t);
					improved = 1;
				} else if (e != CLP_OK && e != CLP_ERR_NOMEM) {
					st = e;
				}
			}
	}
	clp_plan_clear(&t);
	free(sh);
	return st;
}

/* Shampoo: the best x->o.phases_top PipeFisher candidates of the sorted list (scored with
 * whole roots) scored again with the roots in phases, as clpipe train runs them, each kept
 * where it fits and is not slower (the phases pack what whole roots cannot; where they would be
 * slower, train would still run them, but the whole-root figure stands as the bound the search
 * used); the list sorted again. */
static clp_status rescore_phases(plan_ctx *x, cands *all)
{
	clp_plan t = {0};
	clp_status st = CLP_OK;

	for (int i = 0, n = 0; st == CLP_OK && i < all->n && n < x->o.phases_top; i++) {
		if (!all->v[i].pipefisher || all->v[i].pf_phases || !fits(&all->v[i]))
			continue;
		n++;
		st = clp_plan_copy(&t, &all->v[i]);
		if (st != CLP_OK)
			break;
		t.pf_phases = 1;
		st = plan_eval(x, &t);
		if (st == CLP_ERR_INVALID) { /* the phases need too many steps: train places them
					      * whole, as scored */
			clp_error_clear();
			st = CLP_OK;
			continue;
		}
		if (st == CLP_OK && fits(&t) && t.step_s <= all->v[i].step_s)
			st = clp_plan_copy(&all->v[i], &t);
	}
	clp_plan_clear(&t);
	if (st == CLP_OK)
		qsort(all->v, (size_t)all->n, sizeof(all->v[0]), by_step);
	return st;
}

/* Device subsets: all devices, then without the slowest kinds, one speed class at a time. */
static int subset(const plan_ctx *x, int drop, int *sub)
{
	int n = x->c->ndevices, classes = 0, k = 0;
	double *t = malloc((size_t)n * sizeof(double)), cut = INFINITY;

	if (!t)
		return 0;
	for (int i = 0; i < n; i++)
		t[i] = x->tf[i] + x->tb[i];
	for (int c = 0; c < drop; c++) {
		double worst = -1;

		for (int i = 0; i < n; i++)
			if (t[i] < cut * (1 - 1e-6) && t[i] > worst)
				worst = t[i];
		if (worst < 0)
			break;
		cut = worst;
		classes++;
	}
	for (int i = 0; i < n; i++)
		if (drop == 0 || (classes == drop && t[i] < cut * (1 - 1e-6)))
			sub[k++] = i;
	free(t);
	return k;
}

clp_status clp_plan_search(const clp_cluster *c, const clp_costs *blocks,
			   const clp_plan_model *m, const clp_plan_opts *o, clp_plan *best)
{
	plan_ctx x;
	cands all = {0};
	int nd = c->ndevices, *sub = NULL, *dev = NULL, L = m->cfg.n_layer;
	clp_status st, last = CLP_OK;
	char lastmsg[512] = "";

	memset(best, 0, sizeof(*best));
	CLP_TRY(plan_ctx_init(&x, c, blocks, m, o));
	sub = malloc((size_t)nd * sizeof(int));
	dev = malloc((size_t)nd * sizeof(int));
	st = sub && dev ? CLP_OK : clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	for (int drop = 0; st == CLP_OK && drop < (x.o.drop_slow ? nd : 1); drop++) {
		int n = subset(&x, drop, sub);

		if (n == 0)
			break;
		for (int R = 1; st == CLP_OK && R <= n; R++) {
			int D = n / R;

			if (n % R || m->micro_batches % R || D > L || D > 1024 ||
			    (x.o.max_replicas && R > x.o.max_replicas) ||
			    (x.o.fixed_replicas && R != x.o.fixed_replicas) ||
			    (x.o.fixed_depth && D != x.o.fixed_depth))
				continue;
			for (int g = 0; st == CLP_OK && g < NGROUPINGS; g++) {
				int dup = 0;

				if (!group(&x, sub, n, R, g, dev)) {
					st = clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
					break;
				}
				for (int i = 0; i < all.n; i++)
					dup |= same_devices(&all.v[i], dev, n, R);
				if (dup)
					continue;
				for (int k = 0; st == CLP_OK && k < CLP_SCHED_KIND_COUNT; k++) {
					int pfs[3], npf = 0;
					int pfok = m->kfac || m->shampoo || m->soap || m->muon_delay;

					/* LoRA runs no split backward (the stage refuses zbh1) */
					if (!(x.o.kinds & (1u << k)) ||
					    (k == CLP_SCHED_INTERLEAVED && (D < 2 || x.o.chunks < 2)) ||
					    (k == CLP_SCHED_ZBH1 && m->cfg.lora_r > 0))
						continue;
					if (pfok && x.o.pipefisher < 0)
						pfs[npf++] = 0, pfs[npf++] = 1;
					else
						pfs[npf++] = pfok && x.o.pipefisher > 0;
					/* 2: PipeFisher with its work split between a stage's
					 * holders, where a stage has several (K-FAC's only) */
					if (pfs[npf - 1] == 1 && m->kfac && (R > 1 || k == CLP_SCHED_CHIMERA))
						pfs[npf++] = 2;
					for (int f = 0; st == CLP_OK && f < npf; f++) {
						clp_plan p = {0};

						p.kind = k, p.depth = D, p.replicas = R;
						p.chunks = k == CLP_SCHED_INTERLEAVED ? x.o.chunks : 1;
						p.pipefisher = pfs[f] > 0;
						p.pf_split = pfs[f] == 2;
						p.microbatches = m->micro_batches / R;
						st = plan_alloc(&p);
						if (st == CLP_OK) {
							memcpy(p.device, dev, (size_t)n * sizeof(int));
							snprintf(p.note, sizeof(p.note), "%s",
								 g == 1 && R == 1 ? "most memory first"
										  : grouping_names[g]);
							st = try_structure(&x, &p, &all, &last);
							if (last != CLP_OK && !lastmsg[0])
								snprintf(lastmsg, sizeof(lastmsg), "%s",
									 clp_last_error());
						}
						clp_plan_clear(&p);
					}
				}
			}
		}
	}
	/* the naive split is a candidate too: the plan is never worse than it */
	if (st == CLP_OK && (x.o.kinds & (1u << CLP_SCHED_1F1B)) && !x.o.fixed_replicas &&
	    (!x.o.fixed_depth || x.o.fixed_depth == (nd < L ? nd : L))) {
		clp_plan nv = {0};

		st = clp_plan_naive(c, blocks, m, &x.o, &nv);
		x.evals += nv.evaluations;
		if (st == CLP_OK && fits(&nv))
			st = cands_push(&all, &nv);
		clp_plan_clear(&nv);
	}
	if (st == CLP_OK && all.n == 0)
		st = clp_error(CLP_ERR_NOMEM, "plan: no placement fits the devices' memory%s%s",
			       lastmsg[0] ? "; e.g. " : "", lastmsg);
	if (st == CLP_OK) {
		/* refine the best few, and the best of every schedule kind (a kind's best start
		 * may climb further than another kind's) */
		int seen[CLP_SCHED_KIND_COUNT] = {0}, nref = 0;

		qsort(all.v, (size_t)all.n, sizeof(all.v[0]), by_step);
		for (int i = 0; st == CLP_OK && i < all.n; i++) {
			if (nref >= x.o.refine_top && seen[all.v[i].kind])
				continue;
			seen[all.v[i].kind] = 1;
			st = refine(&x, &all.v[i]);
			nref++;
		}
		if (st == CLP_OK)
			qsort(all.v, (size_t)all.n, sizeof(all.v[0]), by_step);
		if (st == CLP_OK && m->shampoo)
			st = rescore_phases(&x, &all);
		if (st == CLP_OK) {
			st = clp_plan_copy(best, &all.v[0]);
			best->evaluations = x.evals;
		}
	}
	if (st == CLP_OK && !fits(best))
		st = clp_error(CLP_ERR_NOMEM, "plan: no placement fits the devices' memory");
	cands_free(&all);
	free(sub);
	free(dev);
	plan_ctx_free(&x);
	return st;
}

clp_status clp_plan_naive(const clp_cluster *c, const clp_costs *blocks, const clp_plan_model *m,
			  const clp_plan_opts *o, clp_plan *out)
{
	plan_ctx x;
	int L = m->cfg.n_layer, D = c->ndevices < L ? c->ndevices : L;
	clp_status st;

	memset(out, 0, sizeof(*out));
	CLP_TRY(plan_ctx_init(&x, c, blocks, m, o));
	out->kind = CLP_SCHED_1F1B, out->depth = D, out->replicas = 1, out->chunks = 1;
	out->microbatches = m->micro_batches;
	out->pipefisher = 0;
	st = plan_alloc(out);
	for (int i = 0; st == CLP_OK && i < D; i++) {
		out->layers[i] = clp_even_layers(L, D, i);
		out->device[i] = i;
	}
	snprintf(out->note, sizeof(out->note), "naive: every device in cluster order, equal split");
	for (int rc = 0; st == CLP_OK && rc < 2; rc++) {
		out->recompute = rc;
		st = plan_eval(&x, out);
		if (st != CLP_OK || fits(out))
			break;
	}
	out->evaluations = x.evals;
	plan_ctx_free(&x);
	if (st != CLP_OK)
		clp_plan_clear(out);
	return st;
}
