/* What the simulator gained for SkipPipe, pinned by hand-computed cases: a fixed time per hop,
 * a gap after each task, a memory cap that counts micro-batches (not stages) on a node, the
 * tiny case's iteration times with and without the authors' constants, and a cycle of nodes
 * handing forwards to each other that deadlocks under a cap, which the validator refuses. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/sched/gen.h"
#include "engine/pass/validate.h"
#include "engine/sim/sim.h"
#include "engine/skip/skip.h"
#include "tests/harness.h"

static void check_near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "%s: got %.12g, want %.12g", what, got,
	      want);
}

static double run(const clp_sched *s, const clp_costs *c, double hop, double gap)
{
	clp_sim_opts o;
	clp_sim_result r;
	double t = NAN;

	clp_sim_opts_default(&o);
	o.costs = c;
	o.hop_s = hop;
	o.task_gap_s = gap;
	if (clp_sim_run(s, &o, &r) == CLP_OK) {
		t = r.step_s;
		clp_sim_result_free(&r);
	} else {
		th_fail(__FILE__, __LINE__, "simulation: %s", clp_last_error());
	}
	return t;
}

/* GPipe, 2 ranks, 1 micro-batch, F 1 B 2 on free links: 6, plus the two hops' constant. One
 * rank, 2 micro-batches: F F B B = 6, plus three gaps (none after the last task). */
static void test_hop_and_gap(void)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *c = NULL;

	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_GPIPE;
	g.depth = 2;
	g.microbatches = 1;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(2, 1, 2, -1, &c));
	if (s && c) {
		check_near("no constants", run(s, c, 0, 0), 6);
		check_near("hop 0.5", run(s, c, 0.5, 0), 7);
		check_near("gap between F1 and B1 on rank 1 only", run(s, c, 0, 0.25), 6.25);
	}
	clp_sched_free(s);
	clp_costs_free(c);
	s = NULL;
	c = NULL;
	g.depth = 1;
	g.microbatches = 2;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(1, 1, 2, -1, &c));
	if (s && c) {
		check_near("one rank, gaps", run(s, c, 0, 0.25), 6.75);
		for (int i = 0; i < s->nranks; i++)
			s->ranks[i].mode = CLP_RANK_DATAFLOW;
		check_near("one rank, gaps, dataflow", run(s, c, 0, 0.25), 6.75);
	}
	clp_sched_free(s);
	clp_costs_free(c);
}

/* S = 1, P = 1: stage 0 and the head of each micro-batch both on the one node. With M = 1 the
 * head's forward must not wait for the micro-batch's own slot: 2 x (1 + 0.5 + 2) = 7, one
 * micro-batch at a time. */
static void test_cap_counts_microbatches(void)
{
	clp_skip_rules r;
	clp_skip_paths *p = NULL;
	clp_costs *c = NULL;
	clp_skip_env e = {0};
	clp_skip_result res;

	clp_skip_rules_default(&r, 1);
	r.path_len = 1;
	r.memory = 1;
	CHECK_OK(clp_skip_paths_create(&p, 1, 1, 0));
	CHECK_OK(clp_costs_create(2, &c));
	if (!p || !c)
		goto out;
	CHECK_OK(clp_skip_set_origins(p, 2));
	c->stages[0].t[CLP_COST_FWD] = 1;
	c->stages[0].t[CLP_COST_BWD] = 2;
	c->stages[1].t[CLP_COST_FWD] = 0.5;
	e.costs = c;
	e.rules = r;
	CHECK(clp_skip_validate(&r, p) == CLP_OK, "%s", clp_last_error());
	if (clp_skip_simulate(&e, p, 1, NULL, &res) == CLP_OK) {
		check_near("P = 1, M = 1", res.iter_s, 7);
		CHECK(res.node_peak_mb[0] == 1, "peak %d micro-batches", res.node_peak_mb[0]);
		clp_skip_result_free(&res);
	} else {
		th_fail(__FILE__, __LINE__, "%s", clp_last_error());
	}
out:
	clp_costs_free(c);
	clp_skip_paths_free(p);
}

static clp_status load_tiny(clp_cluster **cl, clp_costs **c, clp_skip_paths **p,
			    clp_skip_rules *r)
{
	CLP_TRY(clp_cluster_load(CLP_TEST_DATA "/tiny_cluster.json", cl));
	CLP_TRY(clp_costs_load(CLP_TEST_DATA "/tiny_costs.json", c));
	clp_skip_rules_default(r, 1);
	return clp_skip_load(CLP_TEST_DATA "/tiny_paths.json", p, r);
}

/* docs/SKIPPIPE.md works the tiny case out by hand: 8.5 s; through the far node B2 46.5 s;
 * with hop + 0.35 s and a 0.13 s gap, 10.03 s. */
static void test_tiny_by_hand(void)
{
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *p = NULL;
	clp_skip_env e = {0};
	clp_skip_result res;

	CHECK_OK(load_tiny(&cl, &c, &p, &e.rules));
	if (!cl || !c || !p)
		goto out;
	e.cluster = cl;
	e.costs = c;
	CHECK(clp_skip_validate(&e.rules, p) == CLP_OK, "%s", clp_last_error());
	if (clp_skip_simulate(&e, p, 1, NULL, &res) == CLP_OK) {
		check_near("tiny", res.iter_s, 8.5);
		check_near("tiny mb 0 ends", res.mb_end_s[0], 6.5);
		check_near("tiny mb 1 ends", res.mb_end_s[1], 8.5);
		clp_skip_result_free(&res);
	}
	e.hop_s = 0.35;
	e.gap_s = 0.13;
	if (clp_skip_simulate(&e, p, 0, NULL, &res) == CLP_OK) {
		check_near("tiny, authors' constants", res.iter_s, 10.03);
		clp_skip_result_free(&res);
	}
	e.hop_s = e.gap_s = 0;
	p->hops[0].node = 2; /* mb 0 to B2, 10 s away each way */
	if (clp_skip_simulate(&e, p, 0, NULL, &res) == CLP_OK) {
		check_near("tiny via B2", res.iter_s, 46.5);
		clp_skip_result_free(&res);
	}
out:
	clp_skip_paths_free(p);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

/* Two origins; mb 0 goes X (stage 1) then Y (stage 2), mb 1 swaps them: Y then X. With M = 1
 * both X and Y fill up with the one that reached them first and wait for the other for ever. */
static void test_cycle_deadlocks(void)
{
	clp_skip_rules r;
	clp_skip_paths *p = NULL;
	clp_costs *c = NULL;
	clp_skip_env e = {0};
	clp_skip_result res;
	clp_skip_hop a[2] = {{1, 2}, {2, 3}}, b[2] = {{2, 3}, {1, 2}};
	clp_sched *s = NULL;

	clp_skip_rules_default(&r, 3);
	r.memory = 1;
	CHECK_OK(clp_skip_paths_create(&p, 3, 4, 2));
	CHECK_OK(clp_costs_uniform(4, 1, 2, -1, &c));
	if (!p || !c)
		goto out;
	p->node_stage[2] = 1;
	p->node_stage[3] = 2;
	p->origin[0] = 0;
	p->origin[1] = 1;
	CHECK_OK(clp_skip_set_hops(p, 0, a, 2));
	CHECK_OK(clp_skip_set_hops(p, 1, b, 2));
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "rule deadlock_free (M = 1)",
		  "nodes 2 -> 3 -> 2");
	e.costs = c;
	e.rules = r;
	CHECK_ERR(clp_skip_simulate(&e, p, 0, NULL, &res), CLP_ERR_STATE, "deadlock");
	/* The IR validator's dry run finds it too. */
	CHECK_OK(clp_skip_to_sched(p, &r, 1, &s));
	if (s)
		CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "dry run");
	clp_sched_free(s);
	/* Without a cap there is no deadlock and the rule does not apply. */
	r.memory = 0;
	e.rules = r;
	CHECK(clp_skip_validate(&r, p) == CLP_OK, "%s", clp_last_error());
	if (clp_skip_simulate(&e, p, 0, NULL, &res) == CLP_OK)
		clp_skip_result_free(&res);
	else
		th_fail(__FILE__, __LINE__, "%s", clp_last_error());
out:
	clp_costs_free(c);
	clp_skip_paths_free(p);
}

/* The link index gives the routes a scan of the links gives. */
static void test_cluster_index(void)
{
	clp_cluster *c = NULL;
	const char *regions[3] = {"Belgium", "Canada", "Japan"};

	CHECK_OK(clp_skip_cluster_from_table(CLP_TEST_DATA "/gcp-12-regions.tsv", regions, 3, 7,
					     (clp_link_spec){1e-3, 2e9}, &c));
	if (!c)
		return;
	CHECK(c->ndevices == 7 && c->nlinks == 21 - 3 - 1 - 1, "7 nodes, %d links", c->nlinks);
	for (int a = 0; a < 7; a++)
		for (int b = 0; b < 7; b++) {
			clp_route x, y;
			int64_t *keys = c->ix_keys;
			size_t cap = c->ix_cap;

			if (a == b)
				continue;
			x = clp_cluster_route(c, a, b);
			c->ix_cap = 0; /* the scan */
			y = clp_cluster_route(c, a, b);
			c->ix_cap = cap;
			c->ix_keys = keys;
			CHECK(x.resource == y.resource && x.spec.latency_s == y.spec.latency_s &&
			      x.spec.bandwidth_Bps == y.spec.bandwidth_Bps, "route %d -> %d", a, b);
		}
	/* Belgium-0 to Canada-1: 41 ms, 0.0198974609375 GiB/s; Belgium-0 to Belgium-3: intra. */
	check_near("latency", clp_cluster_route(c, 0, 1).spec.latency_s, 0.041);
	check_near("bandwidth", clp_cluster_route(c, 1, 0).spec.bandwidth_Bps,
		   0.0198974609375 * 1073741824.0);
	check_near("intra", clp_cluster_route(c, 0, 3).spec.latency_s, 1e-3);
	clp_cluster_free(c);
}

TH_MAIN(TH_TEST(test_hop_and_gap), TH_TEST(test_cap_counts_microbatches),
	TH_TEST(test_tiny_by_hand), TH_TEST(test_cycle_deadlocks), TH_TEST(test_cluster_index))
