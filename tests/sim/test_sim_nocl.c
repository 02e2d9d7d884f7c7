/* The OpenCL-free part on its own: this executable links clp_engine_core, clp_base and the
 * host half of the harness only (no OpenCL, no CLBlast; ctest checks that with ldd) and runs
 * with OCL_ICD_VENDORS pointed at an empty folder. It simulates a generated schedule against its
 * closed form, a cost table from a file on a cluster with a layout through the scenario object,
 * the SkipPipe tiny case worked out by hand in docs/SKIPPIPE.md, and sizes K-FAC's kept inputs
 * from a model config (the device-free model files). */
#include <math.h>
#include <stdio.h>

#include "engine/model/linear.h"
#include "engine/pass/scenario.h"
#include "engine/pass/validate.h"
#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "engine/skip/skip.h"
#include "tests/harness.h"

static void check_near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-9 * fabs(want) + 1e-12, "%s: got %.12g, want %.12g", what,
	      got, want);
}

/* 1F1B on D uniform stages, N micro-batches: (N + D - 1) (tf + tb). */
static void test_1f1b_formula(void)
{
	static const int dn[][2] = {{4, 8}, {3, 7}, {1, 1}};

	for (size_t i = 0; i < sizeof(dn) / sizeof(dn[0]); i++) {
		int d = dn[i][0], n = dn[i][1];
		clp_gen_opts g;
		clp_sched *s = NULL;
		clp_costs *c = NULL;
		clp_sim_opts o;
		clp_sim_result r;

		clp_gen_opts_default(&g);
		g.kind = CLP_SCHED_1F1B;
		g.depth = d;
		g.microbatches = n;
		CHECK_OK(clp_sched_generate(&s, &g));
		CHECK_OK(clp_costs_uniform(d, 1.0, 2.0, -1, &c));
		if (s && c) {
			CHECK_OK(clp_sched_validate(s, 1));
			clp_sim_opts_default(&o);
			o.costs = c;
			if (clp_sim_run(s, &o, &r) == CLP_OK) {
				check_near("1f1b step", r.step_s, (n + d - 1) * 3.0);
				CHECK(r.nranks == d, "%d ranks, want %d", r.nranks, d);
				clp_sim_result_free(&r);
			} else {
				th_fail(__FILE__, __LINE__, "D=%d N=%d: %s", d, n,
					clp_last_error());
			}
		}
		clp_costs_free(c);
		clp_sched_free(s);
	}
}

/* tests/sim/data: the 4-stage table on the 2x2 cluster with its layout; 3 links x 2 directions
 * x 8 micro-batches x 65536 bytes of messages (sim.cli_precision's figure, fp32). */
static void test_scenario_files(void)
{
	clp_scenario sc;
	clp_gen_opts g;
	clp_sim_result r;

	clp_scenario_init(&sc);
	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_1F1B;
	g.depth = 4;
	g.microbatches = 8;
	CHECK_OK(clp_sched_generate(&sc.sched, &g));
	CHECK_OK(clp_costs_load(CLP_TEST_DATA "/costs_4.json", &sc.costs));
	CHECK_OK(clp_cluster_load(CLP_TEST_DATA "/cluster_2x2.json", &sc.cluster));
	if (sc.sched && sc.costs && sc.cluster &&
	    clp_scenario_resolve(&sc, CLP_TEST_DATA "/layout_4.json") == CLP_OK) {
		if (clp_scenario_sim(&sc, NULL, &r) == CLP_OK) {
			CHECK(r.msg_bytes == 3145728, "message bytes %lld, want 3145728",
			      (long long)r.msg_bytes);
			CHECK(isfinite(r.step_s) && r.step_s > 0, "step %g s", r.step_s);
			CHECK(r.nranks == 4, "%d ranks", r.nranks);
			clp_sim_result_free(&r);
		} else {
			th_fail(__FILE__, __LINE__, "sim: %s", clp_last_error());
		}
	} else {
		th_fail(__FILE__, __LINE__, "scenario: %s", clp_last_error());
	}
	clp_scenario_free(&sc);
}

/* docs/SKIPPIPE.md's tiny case: 8.5 s, micro-batch 0 done at 6.5 s. */
static void test_skip_tiny(void)
{
	clp_cluster *cl = NULL;
	clp_costs *c = NULL;
	clp_skip_paths *p = NULL;
	clp_skip_env e = {0};
	clp_skip_result res;

	clp_skip_rules_default(&e.rules, 1);
	CHECK_OK(clp_cluster_load(CLP_SKIP_DATA "/tiny_cluster.json", &cl));
	CHECK_OK(clp_costs_load(CLP_SKIP_DATA "/tiny_costs.json", &c));
	CHECK_OK(clp_skip_load(CLP_SKIP_DATA "/tiny_paths.json", &p, &e.rules));
	if (cl && c && p) {
		e.cluster = cl;
		e.costs = c;
		CHECK_OK(clp_skip_validate(&e.rules, p));
		if (clp_skip_simulate(&e, p, 1, NULL, &res) == CLP_OK) {
			check_near("tiny", res.iter_s, 8.5);
			check_near("tiny mb 0 ends", res.mb_end_s[0], 6.5);
			clp_skip_result_free(&res);
		} else {
			th_fail(__FILE__, __LINE__, "skip: %s", clp_last_error());
		}
	}
	clp_skip_paths_free(p);
	clp_costs_free(c);
	clp_cluster_free(cl);
}

/* A GPT-2 block with a 4x MLP keeps 7d floats of inputs and 9d of output gradients per token
 * (engine/pass/scenario.h's rule). */
static void test_kfac_keep(void)
{
	clp_model_config m = {.preset = CLP_PRESET_GPT2, .n_layer = 2, .d_model = 64, .n_head = 4,
			      .vocab = 256, .ctx = 32};
	int64_t a = 0, b = 0;
	int dims[16], nf = 0;

	CHECK_OK(clp_model_config_resolve(&m));
	clp_model_kfac_layer(&m, 10, &a, &b, dims, &nf, 16);
	CHECK(a == 10 * 7 * 64 * 4, "keep a %lld", (long long)a);
	CHECK(b == 10 * 9 * 64 * 4, "keep b %lld", (long long)b);
	CHECK(nf == 8 && dims[0] == 64 && dims[1] == 192 && dims[6] == 256 && dims[7] == 64,
	      "%d factors", nf);
}

TH_MAIN(TH_TEST(test_1f1b_formula), TH_TEST(test_scenario_files), TH_TEST(test_skip_tiny),
	TH_TEST(test_kfac_keep))
