/* Planner internals shared by the evaluation (eval.c), the layer balance (balance.c) and the
 * search (search.c). */
#ifndef CLP_PLAN_INTERNAL_H
#define CLP_PLAN_INTERNAL_H

#include "engine/plan/plan.h"

/* The inputs with what every candidate needs precomputed, per cluster device. */
typedef struct plan_ctx {
	const clp_cluster *c;
	const clp_costs *blocks;
	const clp_plan_model *m;
	clp_plan_opts o;
	double *tf, *tb;        /* [ndev] one layer's forward / backward (F + B + W) time */
	double *te, *th;        /* [ndev] embedding, head: forward + backward */
	int64_t *usable;        /* [ndev] memory less the reserve; 0: unknown */
	/* stage memory as a + n b (static) and c + n d (one activation slot) for n layers, per
	 * split backward, recomputation, embedding, head: [split * 8 + rc * 4 + e * 2 + h] */
	int64_t st_a[16], st_b[16], act_c[16], act_d[16];
	int evals;
} plan_ctx;

clp_status plan_ctx_init(plan_ctx *x, const clp_cluster *c, const clp_costs *blocks,
			 const clp_plan_model *m, const clp_plan_opts *o);
void plan_ctx_free(plan_ctx *x);

/* Allocate p's arrays for the structure already set in it (kind, depth, replicas, chunks). */
clp_status plan_alloc(clp_plan *p);
/* Simulate p (plan_ctx version of clp_plan_evaluate); counts evaluations. */
clp_status plan_eval(plan_ctx *x, clp_plan *p);
/* The generated schedule of p's structure with p's layers in the stage map. */
clp_status plan_sched(const clp_plan *p, const clp_plan_model *m, clp_sched **out);

/* Which positions (ranks of replica 0) hold each stage, from a generated schedule:
 * holders[s * 2 + i] for i < nholders[s] (at most 2: Chimera). */
typedef struct plan_shape {
	int nstages, depth;
	int nholders[4096];
	int holders[8192];
	int held[1024];       /* most micro-batch activations a position holds at once */
} plan_shape;
clp_status plan_shape_of(const clp_plan *p, const clp_plan_model *m, plan_shape *sh);

/* Split the layers over p's stages so that the slowest position is as fast as it can be, every
 * position within its memory budget (budget[pos], 0: none; the least of its devices over the
 * replicas). Returns CLP_ERR_NOMEM when no split fits; *binding says whether a budget limited
 * the split. */
clp_status plan_balance(const plan_ctx *x, const plan_shape *sh, clp_plan *p,
			const int64_t *budget, int *binding);

#endif
