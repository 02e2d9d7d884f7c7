/* The path scheduler, random valid paths, the baselines, the full pipeline and the allocation: the
 * tiny case's known optimum, a small heterogeneous cluster where the scheduler must beat every
 * random valid path set, and the paper's 20-node experiment in small (robust facts only: every
 * rule holds, memory stays under the cap, the IR validates, the scheduler beats random paths
 * and the full pipeline). Search lengths are move counts, so runs are deterministic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pass/validate.h"
#include "engine/skip/skip.h"
#include "tests/harness.h"

static double sim_iter(const clp_skip_env *e, const clp_skip_paths *p)
{
	clp_skip_result r;
	double t = NAN;

	if (clp_skip_simulate(e, p, 0, NULL, &r) == CLP_OK) {
		t = r.iter_s;
		clp_skip_result_free(&r);
	} else {
		th_fail(__FILE__, __LINE__, "simulate: %s", clp_last_error());
	}
	return t;
}

static int uses_node(const clp_skip_paths *p, int node)
{
	for (int i = 0; i < p->hop_start[p->nmb]; i++)
		if (p->hops[i].node == node)
			return 1;
	return 0;
}

/* Two micro-batches from A, one to stage 1 and one to stage 2; stage 1 has a near node B1 and
 * a far one B2. The optimum (by hand, docs/SKIPPIPE.md) is 8.5 s and avoids B2. */
static void test_tiny_optimum(void)
{
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *p = NULL, *q = NULL;
	clp_skip_env e = {0};
	clp_skip_opts o;
	clp_skip_report rep;
	int far = 0;

	clp_skip_rules_default(&e.rules, 1);
	CHECK_OK(clp_cluster_load(CLP_TEST_DATA "/tiny_cluster.json", &cl));
	CHECK_OK(clp_costs_load(CLP_TEST_DATA "/tiny_costs.json", &c));
	CHECK_OK(clp_skip_load(CLP_TEST_DATA "/tiny_paths.json", &p, &e.rules));
	if (!cl || !c || !p)
		goto out;
	e.cluster = cl;
	e.costs = c;
	clp_skip_opts_default(&o);
	o.iterations = 100;
	CHECK_OK(clp_skip_schedule(&e, p, &o, &rep));
	CHECK(fabs(rep.iter_s - 8.5) < 1e-9, "scheduler: %.12g s, the optimum is 8.5", rep.iter_s);
	CHECK(fabs(sim_iter(&e, p) - rep.iter_s) < 1e-12, "report and simulation agree");
	CHECK(!uses_node(p, 2), "the scheduler avoids the far node");
	CHECK(clp_skip_validate(&e.rules, p) == CLP_OK, "%s", clp_last_error());
	for (int seed = 1; seed <= 16; seed++) {
		double t;

		clp_skip_paths_free(q);
		q = NULL;
		CHECK_OK(clp_skip_paths_copy(p, &q));
		if (!q)
			break;
		CHECK_OK(clp_skip_random(&e, q, (uint64_t)seed));
		CHECK(clp_skip_validate(&e.rules, q) == CLP_OK, "random %d: %s", seed,
		      clp_last_error());
		t = sim_iter(&e, q);
		CHECK(t >= 8.5 - 1e-9, "random %d beats the optimum: %g", seed, t);
		far += uses_node(q, 2);
	}
	CHECK(far > 0 && far < 16, "random paths use the far node sometimes (%d of 16)", far);
out:
	clp_skip_paths_free(q);
	clp_skip_paths_free(p);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

/* 8 nodes of speeds 0.5 to 1.6, latencies 10-300 ms, bandwidths 0.1-1 GB/s and one link 100
 * times slower; S = 4, two nodes per stage, P = 3, W = 1, M = 2, 3 micro-batches per origin. */
static clp_status hetero(clp_cluster **out, clp_costs **costs)
{
	static const double speed[8] = {1.0, 0.6, 1.4, 0.8, 1.2, 0.5, 1.0, 1.6};
	clp_cluster *c = calloc(1, sizeof(*c));
	uint64_t x = 42;
	int k = 0;

	*out = NULL;
	if (!c || !(c->hosts = calloc(8, sizeof(*c->hosts))) ||
	    !(c->devices = calloc(8, sizeof(*c->devices))) || !(c->links = calloc(28, sizeof(*c->links)))) {
		clp_cluster_free(c);
		return CLP_ERR_NOMEM;
	}
	c->nhosts = c->ndevices = 8;
	for (int i = 0; i < 8; i++) {
		snprintf(c->hosts[i].name, CLP_NAME_MAX, "h%d", i);
		snprintf(c->devices[i].id, CLP_NAME_MAX, "h%d", i);
		snprintf(c->devices[i].kind, CLP_NAME_MAX, "default");
		c->hosts[i].first_device = i;
		c->hosts[i].ndevices = 1;
		c->devices[i].host = i;
		c->devices[i].speed = speed[i];
	}
	for (int a = 0; a < 8; a++)
		for (int b = a + 1; b < 8; b++) {
			double u, v;

			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			u = (double)(x >> 11) / 9007199254740992.0;
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			v = (double)(x >> 11) / 9007199254740992.0;
			c->links[k++] = (clp_link){a, -1, b, -1, 0,
						   {0.01 + 0.29 * u, (a == 2 && b == 5 ? 1e6 : 1e8 + 9e8 * v)}};
		}
	c->nlinks = k;
	c->inter = c->intra = (clp_link_spec){0, INFINITY};
	CLP_TRY(clp_cluster_index(c));
	*out = c;
	CLP_TRY(clp_costs_create(5, costs));
	for (int s = 0; s < 5; s++) {
		(*costs)->stages[s].t[CLP_COST_FWD] = s < 4 ? 0.4 : 0.1;
		(*costs)->stages[s].t[CLP_COST_BWD] = s < 4 ? 0.6 : 0;
		(*costs)->stages[s].out_bytes = s < 4 ? 50000000 : 0;
	}
	return CLP_OK;
}

static void test_beats_random(void)
{
	static const int stage[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *p = NULL, *q = NULL;
	clp_skip_env e = {0};
	clp_skip_opts o;
	clp_skip_report rep;
	double best = INFINITY, mean = 0;

	CHECK_OK(hetero(&cl, &c));
	CHECK_OK(clp_skip_paths_create(&p, 4, 8, 0));
	if (!cl || !c || !p)
		goto out;
	memcpy(p->node_stage, stage, sizeof(stage));
	CHECK_OK(clp_skip_set_origins(p, 3));
	clp_skip_rules_default(&e.rules, 4);
	e.rules.path_len = 3;
	e.rules.max_swaps = 1;
	e.rules.memory = 2;
	e.cluster = cl;
	e.costs = c;
	for (int seed = 1; seed <= 10; seed++) {
		double t;

		clp_skip_paths_free(q);
		q = NULL;
		CHECK_OK(clp_skip_paths_copy(p, &q));
		if (!q)
			break;
		CHECK_OK(clp_skip_random(&e, q, (uint64_t)seed));
		CHECK(clp_skip_validate(&e.rules, q) == CLP_OK, "random %d: %s", seed,
		      clp_last_error());
		t = sim_iter(&e, q);
		mean += t / 10;
		best = t < best ? t : best;
	}
	clp_skip_opts_default(&o);
	o.iterations = 400;
	CHECK_OK(clp_skip_schedule(&e, p, &o, &rep));
	CHECK(clp_skip_validate(&e.rules, p) == CLP_OK, "%s", clp_last_error());
	CHECK(rep.iter_s <= rep.construct_iter_s, "the search never loses: %g > %g", rep.iter_s,
	      rep.construct_iter_s);
	CHECK(rep.iter_s < best && rep.iter_s < mean, "scheduler %g s, random best %g mean %g",
	      rep.iter_s, best, mean);
out:
	clp_skip_paths_free(q);
	clp_skip_paths_free(p);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

/* The paper's geo-distributed experiment (tests/skip/data/paper.toml) with short searches. */
static void test_paper_small(void)
{
	static const int count[6] = {5, 3, 3, 3, 3, 3};
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *p = NULL, *q = NULL;
	clp_skip_env e = {0};
	clp_skip_opts o;
	clp_skip_report rep;
	clp_skip_result res = {0};
	clp_sched *s = NULL;
	double rnd = INFINITY, base = 0;

	CHECK_OK(clp_cluster_load(CLP_TEST_DATA "/gcp20.json", &cl));
	CHECK_OK(clp_costs_load(CLP_TEST_DATA "/llama2048_6x4.json", &c));
	CHECK_OK(clp_skip_paths_create(&p, 6, 20, 0));
	if (!cl || !c || !p)
		goto out;
	clp_skip_rules_default(&e.rules, 6);
	e.rules.path_len = 4;
	e.rules.memory = 3;
	e.cluster = cl;
	e.costs = c;
	clp_skip_opts_default(&o);
	o.iterations = 60;
	CHECK_OK(clp_skip_allocate(&e, p, count, 6, &o));
	for (int k = 0; k < 6; k++) {
		int n = 0;

		for (int i = 0; i < 20; i++)
			n += p->node_stage[i] == k;
		CHECK(n == count[k], "stage %d has %d nodes", k, n);
	}
	CHECK(p->nmb == 30, "30 micro-batches");
	for (int seed = 1; seed <= 3; seed++) {
		double t;

		clp_skip_paths_free(q);
		q = NULL;
		CHECK_OK(clp_skip_paths_copy(p, &q));
		if (!q)
			break;
		CHECK_OK(clp_skip_random(&e, q, (uint64_t)seed));
		CHECK(clp_skip_validate(&e.rules, q) == CLP_OK, "random: %s", clp_last_error());
		t = sim_iter(&e, q);
		rnd = t < rnd ? t : rnd;
	}
	clp_skip_paths_free(q);
	q = NULL;
	CHECK_OK(clp_skip_paths_copy(p, &q));
	if (q)
		CHECK_OK(clp_skip_full_pipeline(&e, q, 3, 30, &o, &base));
	o.iterations = 300;
	CHECK_OK(clp_skip_schedule(&e, p, &o, &rep));
	CHECK(clp_skip_validate(&e.rules, p) == CLP_OK, "%s", clp_last_error());
	CHECK(rep.iter_s < rnd, "scheduler %g s, best of 3 random %g s", rep.iter_s, rnd);
	CHECK(rep.iter_s < base, "scheduler %g s, full pipeline %g s", rep.iter_s, base);
	if (clp_skip_simulate(&e, p, 1, NULL, &res) == CLP_OK) {
		for (int n = 0; n < 20; n++)
			CHECK(res.node_peak_mb[n] <= 3, "node %d holds %d micro-batches", n,
			      res.node_peak_mb[n]);
		for (int m = 0; m < 30; m++)
			CHECK(res.mb_end_s[m] > 0 && res.mb_end_s[m] <= res.iter_s, "mb %d ends at %g",
			      m, res.mb_end_s[m]);
	}
	CHECK_OK(clp_skip_to_sched(p, &e.rules, 4, &s));
	if (s)
		CHECK(clp_sched_validate(s, 1) == CLP_OK, "IR: %s", clp_last_error());
out:
	clp_sched_free(s);
	clp_skip_result_free(&res);
	clp_skip_paths_free(q);
	clp_skip_paths_free(p);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

/* The SkipPipe authors' collision-aware paths on their own allocation (authors_paths.json,
 * 28.52 s): the chain starts alone reach them (one short chain of three nodes per origin, which
 * one-micro-batch moves did not reach: the scheduler used to end 2.6 s later); started from them
 * (--init) the result is never worse than the start; a start on another allocation is refused. */
static void test_init_and_chains(void)
{
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *init = NULL, *p = NULL;
	clp_skip_env e = {0};
	clp_skip_opts o;
	clp_skip_report rep;
	double t_init;

	CHECK_OK(clp_cluster_load(CLP_TEST_DATA "/gcp20.json", &cl));
	CHECK_OK(clp_costs_load(CLP_TEST_DATA "/llama2048_6x4.json", &c));
	clp_skip_rules_default(&e.rules, 6);
	CHECK_OK(clp_skip_load(CLP_TEST_DATA "/authors_paths.json", &init, &e.rules));
	if (!cl || !c || !init)
		goto out;
	e.cluster = cl;
	e.costs = c;
	t_init = sim_iter(&e, init);
	CHECK(fabs(t_init - 28.52) < 0.01, "the authors' paths: %g s", t_init);
	CHECK_OK(clp_skip_paths_copy(init, &p));
	clp_skip_opts_default(&o);
	o.iterations = 0;
	CHECK_OK(clp_skip_schedule(&e, p, &o, &rep));
	CHECK(rep.iter_s <= t_init + 1e-9, "the starts alone: %g s, the authors' %g s", rep.iter_s,
	      t_init);
	o.iterations = 300;
	o.seed = 5;
	o.init = init;
	CHECK_OK(clp_skip_schedule(&e, p, &o, &rep));
	CHECK(rep.iter_s <= t_init + 1e-9, "from the authors' paths: %g s > %g s", rep.iter_s, t_init);
	CHECK(fabs(sim_iter(&e, p) - rep.iter_s) < 1e-12, "report and simulation agree");
	CHECK(clp_skip_validate(&e.rules, p) == CLP_OK, "%s", clp_last_error());
	init->node_stage[1] = 3; /* another allocation */
	init->node_stage[16] = 2;
	CHECK(clp_skip_schedule(&e, p, &o, &rep) == CLP_ERR_INVALID &&
		      strstr(clp_last_error(), "the start puts node 1 on stage 3"),
	      "a start on another allocation: %s", clp_last_error());
out:
	clp_skip_paths_free(p);
	clp_skip_paths_free(init);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

/* The baselines from the paper's description on the authors' allocation: each keeps every rule
 * and its reported time is the simulator's; the conflict-based search over chains finds paths as
 * good as the authors' own (their collision-aware scheduler's); the scheduler's starts alone are
 * no worse than the best baseline. */
static void test_baselines(void)
{
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *init = NULL, *p = NULL;
	clp_skip_env e = {0};
	clp_skip_opts o;
	clp_skip_report rep;
	double t[CLP_SKIP_NBASE], best = INFINITY;

	CHECK_OK(clp_cluster_load(CLP_TEST_DATA "/gcp20.json", &cl));
	CHECK_OK(clp_costs_load(CLP_TEST_DATA "/llama2048_6x4.json", &c));
	clp_skip_rules_default(&e.rules, 6);
	CHECK_OK(clp_skip_load(CLP_TEST_DATA "/authors_paths.json", &init, &e.rules));
	if (!cl || !c || !init)
		goto out;
	e.cluster = cl;
	e.costs = c;
	for (int k = 0; k < CLP_SKIP_NBASE; k++) {
		clp_skip_paths_free(p);
		p = NULL;
		CHECK_OK(clp_skip_paths_copy(init, &p));
		if (!p)
			goto out;
		CHECK_OK(clp_skip_baseline(&e, p, k, &t[k]));
		CHECK(clp_skip_validate(&e.rules, p) == CLP_OK, "baseline %d: %s", k, clp_last_error());
		CHECK(fabs(sim_iter(&e, p) - t[k]) < 1e-12, "baseline %d: report and simulation", k);
		best = t[k] < best ? t[k] : best;
	}
	CHECK(t[CLP_SKIP_BASE_CBS] <= sim_iter(&e, init) + 1e-9,
	      "conflict-based chains: %g s, the authors' paths %g s", t[CLP_SKIP_BASE_CBS],
	      sim_iter(&e, init));
	clp_skip_opts_default(&o);
	o.iterations = 0;
	CHECK_OK(clp_skip_schedule(&e, p, &o, &rep));
	CHECK(rep.iter_s <= best + 1e-9, "the scheduler's starts: %g s, best baseline %g s",
	      rep.iter_s, best);
out:
	clp_skip_paths_free(p);
	clp_skip_paths_free(init);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

TH_MAIN(TH_TEST(test_tiny_optimum), TH_TEST(test_beats_random), TH_TEST(test_paper_small),
	TH_TEST(test_init_and_chains), TH_TEST(test_baselines))
