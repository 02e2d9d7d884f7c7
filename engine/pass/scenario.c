/* The scenario object (scenario.h): schedule + costs + cluster + layout, resolved, optionally
 * through PipeFisher, simulated. */
#include "engine/pass/scenario.h"

#include <string.h>

void clp_scenario_init(clp_scenario *sc)
{
	memset(sc, 0, sizeof(*sc));
	sc->eager_bytes = -1;
}

void clp_scenario_free(clp_scenario *sc)
{
	if (!(sc->borrowed & CLP_SCN_SCHED))
		clp_sched_free(sc->sched);
	if (!(sc->borrowed & CLP_SCN_COSTS))
		clp_costs_free(sc->costs);
	if (!(sc->borrowed & CLP_SCN_CLUSTER))
		clp_cluster_free(sc->cluster);
	if (!(sc->borrowed & CLP_SCN_LAYOUT))
		clp_layout_free(sc->layout);
	clp_scenario_init(sc);
}

clp_status clp_scenario_resolve(clp_scenario *sc, const char *layout_file)
{
	clp_layout *l = NULL;
	clp_status st;

	if (!sc->sched)
		return clp_error(CLP_ERR_INVALID, "scenario: no schedule to lay out");
	if (!layout_file || !layout_file[0]) {
		CLP_TRY(clp_layout_from_sched(sc->sched, sc->cluster, &l));
	} else {
		if (!sc->cluster)
			return clp_error(CLP_ERR_INVALID, "--layout needs --cluster (the device ids "
					 "refer to it)");
		CLP_TRY(clp_layout_load(layout_file, &l));
		st = clp_layout_check(l, sc->sched, layout_file);
		if (st == CLP_OK)
			st = clp_layout_resolve(l, sc->cluster, layout_file);
		if (st != CLP_OK) {
			clp_layout_free(l);
			return st;
		}
	}
	if (!(sc->borrowed & CLP_SCN_LAYOUT))
		clp_layout_free(sc->layout);
	sc->layout = l;
	sc->borrowed &= ~(unsigned)CLP_SCN_LAYOUT;
	return CLP_OK;
}

void clp_scenario_pf_default(clp_scenario_pf *p)
{
	memset(p, 0, sizeof(*p));
	p->mem_cap = -1;
}

void clp_scenario_kfac_keep(const clp_scenario *sc, const clp_scenario_pf *p, int64_t *keep_a,
			    int64_t *keep_b)
{
	int64_t a = 0, b = 0;

	if (p->model) {
		clp_model_kfac_layer(p->model, p->tokens, &a, &b, NULL, NULL, 0);
	} else {
		int64_t out_b = sc->costs && sc->costs->nstages ? sc->costs->stages[0].out_bytes : 0;

		/* the kept inputs and output gradients are fp32 in every precision (a 16-bit input
		 * is kept widened): the rows at 4 bytes an element */
		if (sc->costs)
			out_b = out_b / (int64_t)clp_dtype_size(sc->costs->precision) * 4;
		a = 7 * out_b;
		b = 9 * out_b;
	}
	*keep_a = p->keep_a_bytes > 0 ? p->keep_a_bytes : a;
	*keep_b = p->keep_b_bytes > 0 ? p->keep_b_bytes : b;
}

clp_status clp_scenario_pipefisher(clp_scenario *sc, const clp_scenario_pf *p,
				   clp_pf_report *rep)
{
	clp_pf_opts po;
	clp_sched *cycle = NULL;

	if (!sc->sched || !sc->costs)
		return clp_error(CLP_ERR_INVALID, "scenario: PipeFisher needs a schedule and a cost "
				 "table");
	clp_pf_opts_default(&po);
	po.costs = sc->costs;
	po.cluster = sc->cluster;
	po.layout = sc->cluster ? sc->layout : NULL;
	po.eager_bytes = sc->eager_bytes;
	po.mem_cap = p->mem_cap;
	if (p->max_steps > 0)
		po.max_steps = p->max_steps;
	po.min_steps = p->min_steps;
	po.split = p->split;
	po.work = p->work;
	po.precondition = !p->no_per_step;
	po.steady = p->steady;
	clp_scenario_kfac_keep(sc, p, &po.keep_a_bytes, &po.keep_b_bytes);
	CLP_TRY(clp_pipefisher(sc->sched, &po, &cycle, rep));
	if (!(sc->borrowed & CLP_SCN_SCHED))
		clp_sched_free(sc->sched);
	sc->sched = cycle;
	sc->borrowed &= ~(unsigned)CLP_SCN_SCHED;
	return CLP_OK;
}

void clp_scenario_sim_opts(const clp_scenario *sc, clp_sim_opts *o)
{
	clp_sim_opts_default(o);
	o->costs = sc->costs;
	o->cluster = sc->cluster;
	o->layout = sc->cluster ? sc->layout : NULL;
	o->eager_bytes = sc->eager_bytes;
}

clp_status clp_scenario_sim(const clp_scenario *sc, const clp_sim_opts *o, clp_sim_result *r)
{
	clp_sim_opts dflt;

	if (!o) {
		clp_scenario_sim_opts(sc, &dflt);
		o = &dflt;
	}
	if (!sc->sched)
		return clp_error(CLP_ERR_INVALID, "scenario: no schedule to simulate");
	return clp_sim_run(sc->sched, o, r);
}
