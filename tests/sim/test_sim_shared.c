/* Processor sharing (clp_sim_opts.shared_cores, engine/scenario/shared_cores.h): the work each
 * interval gets on c shared cores against hand-computed values; a simulation with at least as
 * many cores as ranks equals the unshared one; on one core a pipeline with free links never
 * leaves the core idle, so its step is the sum of all its compute; runs repeat bitwise; a trace's
 * compute events shrink to their solo times and nothing else moves. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/scenario/shared_cores.h"
#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

static void near(const char *what, double got, double want, double rel)
{
	CHECK(fabs(got - want) <= rel * fabs(want) + 1e-12, "%s: got %.12g, want %.12g", what, got,
	      want);
}

static void test_work(void)
{
	/* four ops [0, 2) on 2 cores: half speed each, 1 s of work */
	double a[] = {0, 0, 0, 0}, b[] = {2, 2, 2, 2}, w[4];

	CHECK_OK(clp_shared_cores_work(4, a, b, 2, w));
	for (int i = 0; i < 4; i++)
		near("4 ops on 2 cores", w[i], 1, 1e-12);
	/* [0, 1) and [0, 3) on one core: 0.5 each while both run, then 2 alone; an op that never
	 * ran (-1) and an empty one count for nobody */
	{
		double a2[] = {0, 0, -1, 1}, b2[] = {1, 3, -1, 1}, w2[4];

		CHECK_OK(clp_shared_cores_work(4, a2, b2, 1, w2));
		near("short op", w2[0], 0.5, 1e-12);
		near("long op", w2[1], 2.5, 1e-12);
		CHECK(w2[2] == 0 && w2[3] == 0, "ops that did not run got %g and %g", w2[2], w2[3]);
	}
	/* an op ending when another starts: no overlap, no slow-down */
	{
		double a3[] = {0, 1}, b3[] = {1, 2}, w3[2];

		CHECK_OK(clp_shared_cores_work(2, a3, b3, 1, w3));
		near("back to back", w3[0] + w3[1], 2, 1e-12);
	}
	CHECK_ERR(clp_shared_cores_work(4, a, b, 0, w), CLP_ERR_INVALID, "0 cores");
}

static int run(int kind, int d, int n, int cores, clp_sim_result *r)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *c = NULL;
	clp_sim_opts o;
	clp_status st = CLP_ERR_INVALID;

	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = d;
	g.microbatches = n;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(d, 1.0, 2.5, -1, &c));
	clp_sim_opts_default(&o);
	o.costs = c;
	o.shared_cores = cores;
	if (s && c) {
		st = clp_sim_run(s, &o, r);
		CHECK(st == CLP_OK, "%s D=%d N=%d on %d cores: %s", clp_sched_kind_name(kind), d, n,
		      cores, clp_last_error());
	}
	clp_costs_free(c);
	clp_sched_free(s);
	return st == CLP_OK;
}

static void test_sim(void)
{
	static const int dn[][2] = {{2, 4}, {4, 8}, {3, 7}};

	for (int kind = CLP_SCHED_GPIPE; kind <= CLP_SCHED_1F1B; kind++)
		for (size_t i = 0; i < sizeof(dn) / sizeof(dn[0]); i++) {
			int d = dn[i][0], n = dn[i][1];
			double total = (double)d * n * (1.0 + 2.5);
			clp_sim_result own, many, one, again;
			char what[96];

			if (!run(kind, d, n, 0, &own))
				continue;
			snprintf(what, sizeof(what), "%s D=%d N=%d", clp_sched_kind_name(kind), d, n);
			if (run(kind, d, n, d, &many)) { /* never more ops than cores */
				near(what, many.step_s, own.step_s, 1e-12);
				clp_sim_result_free(&many);
			}
			if (run(kind, d, n, 1, &one)) {
				near(what, one.step_s, total, 1e-4);
				CHECK(one.step_s > own.step_s * 1.2, "%s: one core %g s, own devices %g s",
				      what, one.step_s, own.step_s);
				if (run(kind, d, n, 1, &again)) {
					CHECK(again.step_s == one.step_s, "%s: %.17g then %.17g", what,
					      one.step_s, again.step_s);
					clp_sim_result_free(&again);
				}
				clp_sim_result_free(&one);
			}
			clp_sim_result_free(&own);
		}
}

static void test_trace_solo(void)
{
	clp_trace t;
	clp_trace_event e = {0};

	clp_trace_init(&t, 2, 0);
	e.queue = CLP_TQ_COMPUTE;
	e.t0 = 0, e.t1 = 2, e.rank = 0;
	CHECK_OK(clp_trace_push(&t, &e));
	e.t0 = 1, e.t1 = 3, e.rank = 1;
	CHECK_OK(clp_trace_push(&t, &e));
	e.queue = CLP_TQ_COMM;
	e.t0 = 0, e.t1 = 3, e.rank = 1;
	CHECK_OK(clp_trace_push(&t, &e));
	CHECK_OK(clp_trace_solo(&t, 1));
	/* [0,1) alone, [1,2) shared: 1.5 s of work; the second: 0.5 then [2,3) alone: 1.5 s */
	near("first", t.ev[0].t1, 1.5, 1e-12);
	near("second", t.ev[1].t1, 2.5, 1e-12);
	CHECK(t.ev[0].t0 == 0 && t.ev[1].t0 == 1, "starts moved: %g %g", t.ev[0].t0, t.ev[1].t0);
	CHECK(t.ev[2].t0 == 0 && t.ev[2].t1 == 3, "a transfer changed: %g .. %g", t.ev[2].t0,
	      t.ev[2].t1);
	clp_trace_free(&t);
}

TH_MAIN(TH_TEST(test_work), TH_TEST(test_sim), TH_TEST(test_trace_solo))
