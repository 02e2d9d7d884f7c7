/* SkipPipe as a placement choice for slow wide-area links (docs/SKIPPIPE.md): the model in S
 * stages (stage 0 with the embedding and, as entry S, the head and loss on the origin), every
 * device a node, nodes spread evenly over the stages (stage 0 takes the remainder: more
 * origins), the global batch spread over the origins, nodes allocated to stages and paths
 * scheduled by engine/skip, the iteration simulated on the same cluster and block costs as the
 * full-pipeline plans. A path visits P of the S stages: SkipPipe trains differently (each
 * micro-batch skips S - P stages), which is why the planner reports it and never picks it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/plan.h"

void clp_plan_skip_clear(clp_plan_skip *s)
{
	clp_skip_paths_free(s->paths);
	memset(s, 0, sizeof(*s));
}

/* The cost table of S stages (+ the head as entry S) with layers split evenly. */
static clp_status skip_costs(const clp_costs *blocks, const clp_plan_model *m, int S,
			     clp_costs **out)
{
	int L = m->cfg.n_layer;
	clp_sched *s = NULL;
	clp_status st;

	CLP_TRY(clp_sched_create(&s, 1, S + 1, 1, L >= S + 1 ? L : S + 1));
	for (int i = 0, first = 0; i < S; i++) {
		int n = L / S + (i < L % S);

		s->stages[i] = (clp_stage_info){first, n, (uint8_t)(i == 0), 0};
		first += n;
	}
	s->stages[S] = (clp_stage_info){L, 0, 0, 1};
	s->nlayers = L;
	st = clp_plan_stage_costs(blocks, m, s, 0, 0, 0, out);
	clp_sched_free(s);
	return st;
}

/* The stage-0 nodes first (count[s] nodes of stage s, in device order), the allocation, the
 * path schedule into out (the caller clears it after a failure). */
static clp_status skip_steps(const clp_skip_env *e, const clp_cluster *c, const int *count,
			     int iterations, clp_plan_skip *out)
{
	int S = out->nstages, n = c->ndevices, k = 0, s = 0;
	clp_skip_opts o;
	clp_skip_report rep;

	CLP_TRY(clp_skip_paths_create(&out->paths, S, n, 0));
	for (int d = 0; d < n; d++) {
		while (s < S - 1 && k >= count[s])
			s++, k = 0;
		out->paths->node_stage[d] = s;
		snprintf(out->paths->node_device[d], CLP_NAME_MAX, "%s", c->devices[d].id);
		k++;
	}
	CLP_TRY(clp_skip_set_origins(out->paths, out->per_origin));
	CLP_TRY(clp_skip_check_config(&out->rules, out->paths));
	clp_skip_opts_default(&o);
	o.iterations = iterations / 4;
	CLP_TRY(clp_skip_allocate(e, out->paths, count, out->per_origin, &o));
	o.iterations = iterations;
	CLP_TRY(clp_skip_schedule(e, out->paths, &o, &rep));
	out->iter_s = rep.iter_s;
	return CLP_OK;
}

clp_status clp_plan_skippipe(const clp_cluster *c, const clp_costs *blocks,
			     const clp_plan_model *m, int S, int P, int iterations,
			     clp_plan_skip *out)
{
	int n = c->ndevices, count[4096];
	clp_skip_env e;
	clp_costs *costs = NULL;
	clp_status st;

	memset(out, 0, sizeof(*out));
	if (S < 2 || S > n || S > 4096 || P < 2 || P > S)
		return clp_error(CLP_ERR_INVALID, "SkipPipe: %d stages on %d devices with paths of "
				 "%d stages (needs 2 <= P <= S <= devices)", S, n, P);
	if (m->cfg.n_layer < S)
		return clp_error(CLP_ERR_INVALID, "SkipPipe: %d layers cannot fill %d stages",
				 m->cfg.n_layer, S);
	for (int i = 0; i < S; i++)
		count[i] = n / S + (i == 0 ? n % S : 0);
	if (m->micro_batches % count[0])
		return clp_error(CLP_ERR_INVALID, "SkipPipe: %d micro-batches do not spread evenly "
				 "over %d origins (stage-0 nodes)", m->micro_batches, count[0]);
	out->nstages = S, out->per_origin = m->micro_batches / count[0];
	clp_skip_rules_default(&out->rules, S);
	out->rules.path_len = P;
	out->rules.memory = 3; /* the SkipPipe authors' configuration */
	CLP_TRY(skip_costs(blocks, m, S, &costs));
	memset(&e, 0, sizeof(e));
	e.cluster = c, e.costs = costs, e.rules = out->rules;
	st = skip_steps(&e, c, count, iterations, out);
	clp_costs_free(costs);
	if (st != CLP_OK)
		clp_plan_skip_clear(out);
	return st;
}
