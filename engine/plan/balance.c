/* Layers per stage on heterogeneous devices: minimise the slowest position's time per
 * micro-batch, within each position's memory budget.
 *
 * A position's time is the sum over the stages it holds (one, or two for Chimera, v for
 * interleaved) of embedding + n layers + head on its slowest device over the replicas; each
 * position's memory is its stages' parameters, gradients, optimizer state and workspace plus, per
 * micro-batch it holds at once (from the schedule), the activations of its largest stage. Start
 * from one layer per stage and give each further layer to the stage whose slowest holder ends
 * fastest with it; for one holder per stage this greedy is exact for the bottleneck (each step
 * keeps the smallest achievable maximum, the classic argument for min-max allocation of
 * increasing separable costs), and budgets only remove choices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/plan_internal.h"
#include "engine/sched/gen.h"

typedef struct bal {
	const plan_ctx *x;
	const plan_shape *sh;
	const clp_plan *p;
	double *lt, *et, *ht; /* per position */
	int *n;
} bal;

static int mem_index(const bal *b, int s)
{
	int S = b->p->nstages;

	return (b->p->kind == CLP_SCHED_ZBH1) * 8 + (b->p->recompute != 0) * 4 + (s == 0) * 2 +
	       (s == S - 1);
}

static int holds(const plan_shape *sh, int s, int d)
{
	for (int j = 0; j < sh->nholders[s]; j++)
		if (sh->holders[2 * s + j] == d)
			return 1;
	return 0;
}

static int64_t pos_mem(const bal *b, int d)
{
	int64_t stat = 0, act = 0;

	for (int s = 0; s < b->p->nstages; s++) {
		int i;
		int64_t a;

		if (!holds(b->sh, s, d))
			continue;
		i = mem_index(b, s);
		stat += b->x->st_a[i] + b->n[s] * b->x->st_b[i];
		a = b->x->act_c[i] + b->n[s] * b->x->act_d[i];
		act = a > act ? a : act;
	}
	return stat + (int64_t)b->sh->held[d] * act;
}

static double pos_time(const bal *b, int d)
{
	double t = 0;

	for (int s = 0; s < b->p->nstages; s++)
		if (holds(b->sh, s, d))
			t += (s == 0) * b->et[d] + (s == b->p->nstages - 1) * b->ht[d] +
			     b->n[s] * b->lt[d];
	return t;
}

/* The slowest holder of stage s if it had one more layer; *fits whether every holder's memory
 * stays within its budget. */
static double try_add(bal *b, int s, const int64_t *budget, int *fits)
{
	double worst = 0;

	b->n[s]++;
	*fits = 1;
	for (int j = 0; j < b->sh->nholders[s]; j++) {
		int d = b->sh->holders[2 * s + j];
		double t = pos_time(b, d);

		worst = t > worst ? t : worst;
		if (budget[d] > 0 && pos_mem(b, d) > budget[d])
			*fits = 0;
	}
	b->n[s]--;
	return worst;
}

clp_status plan_balance(const plan_ctx *x, const plan_shape *sh, clp_plan *p,
			const int64_t *budget, int *binding)
{
	int S = p->nstages, D = p->depth, L = x->m->cfg.n_layer;
	bal b = {x, sh, p, NULL, NULL, NULL, p->layers};
	double *buf = calloc((size_t)D * 3, sizeof(double));
	clp_status st = CLP_OK;

	*binding = 0;
	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	if (L < S) {
		free(buf);
		return clp_error(CLP_ERR_INVALID, "plan: %d layers cannot fill %d stages", L, S);
	}
	b.lt = buf, b.et = buf + D, b.ht = buf + 2 * D;
	for (int d = 0; d < D; d++)
		for (int q = 0; q < p->replicas; q++) {
			int dev = p->device[q * D + d];
			double l = x->tf[dev] + x->tb[dev] + (p->recompute ? x->tf[dev] : 0);

			b.lt[d] = l > b.lt[d] ? l : b.lt[d];
			b.et[d] = x->te[dev] > b.et[d] ? x->te[dev] : b.et[d];
			b.ht[d] = x->th[dev] > b.ht[d] ? x->th[dev] : b.ht[d];
		}
	for (int s = 0; s < S; s++)
		p->layers[s] = 1;
	for (int d = 0; d < D && st == CLP_OK; d++)
		if (budget[d] > 0 && pos_mem(&b, d) > budget[d]) {
			*binding = 1;
			st = clp_error(CLP_ERR_NOMEM, "plan: %s over %d ranks per pipeline%s: position "
				       "%d (device %s) needs %lld bytes with one layer per stage, has "
				       "%lld", clp_sched_kind_name(p->kind), D,
				       p->recompute ? " with recomputation" : "", d,
				       x->c->devices[p->device[d]].id, (long long)pos_mem(&b, d),
				       (long long)budget[d]);
		}
	for (int k = S; k < L && st == CLP_OK; k++) {
		int best = -1, free_best = -1;
		double bt = 0, ft = 0;

		for (int s = 0; s < S; s++) {
			int fits;
			double t = try_add(&b, s, budget, &fits);

			if (free_best < 0 || t < ft - 1e-15)
				free_best = s, ft = t;
			if (fits && (best < 0 || t < bt - 1e-15))
				best = s, bt = t;
		}
		if (best < 0 || bt > ft * (1 + 1e-12))
			*binding = 1;
		if (best < 0) {
			st = clp_error(CLP_ERR_NOMEM, "plan: %s over %d ranks per pipeline%s: %d of %d "
				       "layers fit the devices' memory", clp_sched_kind_name(p->kind),
				       D, p->recompute ? " with recomputation" : "", k, L);
			break;
		}
		p->layers[best]++;
	}
	free(buf);
	return st;
}
