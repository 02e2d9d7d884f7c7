/* The scenario object (engine/pass/scenario.h), host only: the kept bytes are computed one way
 * (given bytes win; with a model exactly clp_model_kfac_layer; without, 7x / 9x of stage 0's
 * out_bytes, which is what the model gives for a GPT-2 block); PipeFisher through the scenario
 * gives the cycle clp_pipefisher gives with the same options; a borrowed schedule is left to its
 * owner and the cycle is the scenario's; the simulation sees the scenario's costs; a layout
 * file without a cluster is refused by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/model.h"
#include "engine/pass/scenario.h"
#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
#include "tests/harness.h"

#define NF 4

static clp_costs *costs(int nstages)
{
	clp_costs *c = NULL;
	static const int dims[NF] = {8, 8, 16, 4};

	CHECK_OK(clp_costs_uniform(nstages, 1.0, 2.0, -1, &c));
	if (!c)
		return NULL;
	for (int s = 0; s < nstages; s++) {
		c->stages[s].nlayers = 2;
		c->stages[s].out_bytes = 1000;
		c->stages[s].t[CLP_COST_KFAC_CURV_A] = 0.3;
		c->stages[s].t[CLP_COST_KFAC_CURV_B] = 0.3;
		c->stages[s].t[CLP_COST_KFAC_INV] = 1.5;
		c->stages[s].t[CLP_COST_KFAC_PRECOND] = 0.1;
		c->stages[s].kfac_bytes = 1000;
	}
	CHECK_OK(clp_costs_set_kfac_factors(c, dims, NF));
	return c;
}

static clp_sched *generate(int depth, int mb)
{
	clp_gen_opts g;
	clp_sched *s = NULL;

	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_1F1B;
	g.depth = depth;
	g.microbatches = mb;
	g.layers = 2 * depth;
	CHECK_OK(clp_sched_generate(&s, &g));
	return s;
}

static void test_keep(void)
{
	clp_scenario sc;
	clp_scenario_pf pf;
	clp_model_config m = {.preset = CLP_PRESET_GPT2, .n_layer = 2, .d_model = 64, .n_head = 4,
			      .vocab = 100, .ctx = 32};
	int64_t a, b, ma, mb;

	CHECK_OK(clp_model_config_resolve(&m));
	clp_scenario_init(&sc);
	sc.costs = costs(2);
	clp_scenario_pf_default(&pf);
	clp_scenario_kfac_keep(&sc, &pf, &a, &b);
	CHECK(a == 7000 && b == 9000, "a == 7000 && b == 9000");
	/* a bf16 table's messages are half the bytes; K-FAC still keeps fp32 rows */
	clp_costs_set_precision(sc.costs, CLP_BF16);
	clp_scenario_kfac_keep(&sc, &pf, &a, &b);
	CHECK(sc.costs->stages[0].out_bytes == 500 && a == 7000 && b == 9000,
	      "bf16 table: out %lld, keep %lld and %lld", (long long)sc.costs->stages[0].out_bytes,
	      (long long)a, (long long)b);
	clp_costs_set_precision(sc.costs, CLP_F32);
	pf.keep_b_bytes = 5;
	clp_scenario_kfac_keep(&sc, &pf, &a, &b);
	CHECK(a == 7000 && b == 5, "a == 7000 && b == 5");
	/* with a model: the stages' own count; for GPT-2 the guess's 7x / 9x of B*T*d floats */
	pf.keep_b_bytes = 0;
	pf.model = &m;
	pf.tokens = 4 * 32;
	clp_model_kfac_layer(&m, pf.tokens, &ma, &mb, NULL, NULL, 0);
	clp_scenario_kfac_keep(&sc, &pf, &a, &b);
	CHECK(a == ma && b == mb, "a == ma && b == mb");
	CHECK(a == 7 * (int64_t)(4 * 32 * 64 * sizeof(float)), "A kept: 7 x B*T*d floats");
	CHECK(b == 9 * (int64_t)(4 * 32 * 64 * sizeof(float)), "B kept: 9 x B*T*d floats");
	clp_scenario_free(&sc);
	CHECK(sc.costs == NULL && sc.eager_bytes == -1, "sc.costs == NULL && sc.eager_bytes == -1");
}

static void test_pass_and_sim(void)
{
	clp_scenario sc;
	clp_scenario_pf pf;
	clp_pf_opts po;
	clp_pf_report rep, rep2;
	clp_sched *base = generate(4, 8), *direct = NULL;
	clp_sim_result r = {0};
	char *t1 = NULL, *t2 = NULL;

	clp_scenario_init(&sc);
	sc.sched = base;
	sc.borrowed = CLP_SCN_SCHED;
	sc.costs = costs(4);
	CHECK_OK(clp_scenario_resolve(&sc, NULL));
	CHECK(sc.layout && sc.layout->nranks == 4, "sc.layout && sc.layout->nranks == 4");
	clp_scenario_pf_default(&pf);
	pf.mem_cap = 20000;
	CHECK_OK(clp_scenario_pipefisher(&sc, &pf, &rep));
	CHECK(sc.sched != base && sc.sched->nsteps == rep.K && rep.K >= 1,
	      "the cycle replaces the base");
	CHECK(!(sc.borrowed & CLP_SCN_SCHED), "!(sc.borrowed & CLP_SCN_SCHED)");
	CHECK(base->nsteps == 1, "base->nsteps == 1"); /* the borrowed base is untouched */

	/* the same cycle as the pass called by hand with the same data */
	clp_pf_opts_default(&po);
	po.costs = sc.costs;
	po.mem_cap = 20000;
	po.keep_a_bytes = 7000;
	po.keep_b_bytes = 9000;
	CHECK_OK(clp_pipefisher(base, &po, &direct, &rep2));
	t1 = clp_sched_to_json(sc.sched);
	t2 = direct ? clp_sched_to_json(direct) : NULL;
	CHECK(t1 && t2 && !strcmp(t1, t2), "t1 && t2 && !strcmp(t1, t2)");
	CHECK(rep.K == rep2.K && rep.immediate == rep2.immediate && rep.peak_kept == rep2.peak_kept,
	      "the same report");

	/* the simulation of the scenario is the cycle's, with its costs */
	CHECK_OK(clp_scenario_sim(&sc, NULL, &r));
	CHECK(r.nranks == 4 && r.step_s > 0, "r.nranks == 4 && r.step_s > 0");
	CHECK(fabs(r.step_s - rep.step_s) < 1e-9 * rep.step_s, "the simulated step is the pass's");
	clp_sim_result_free(&r);
	free(t1);
	free(t2);
	clp_sched_free(direct);
	clp_scenario_free(&sc);
	clp_sched_free(base);
}

static void test_refused(void)
{
	clp_scenario sc;
	clp_scenario_pf pf;

	clp_scenario_init(&sc);
	clp_scenario_pf_default(&pf);
	CHECK_ERR(clp_scenario_pipefisher(&sc, &pf, NULL), CLP_ERR_INVALID, "schedule");
	sc.sched = generate(2, 4);
	CHECK_ERR(clp_scenario_resolve(&sc, "layout.json"), CLP_ERR_INVALID, "--cluster");
	CHECK(sc.layout == NULL, "sc.layout == NULL");
	clp_scenario_free(&sc);
}

TH_MAIN(TH_TEST(test_keep), TH_TEST(test_pass_and_sim), TH_TEST(test_refused))
