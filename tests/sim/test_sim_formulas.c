/* The simulator against closed forms (equal stage times, free links, N >= D): GPipe and 1F1B
 * (N+D-1)(Tf+Tb); interleaved N(Tf+Tb) + (D-1)(Tf+Tb)/v; Chimera with N = D D*Tf + (2D-2)*Tb and,
 * with Tf = Tb, bubble (D-2)/(2N+D-2); ZB-H1 a third of 1F1B's bubble with equal F, B, W and no
 * more activation memory than 1F1B. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/sched/gen.h"
#include "engine/pass/validate.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

/* Simulate kind on uniform stages: tf and tb per stage (tw of tb is W). */
static int sim_kind(int kind, int d, int n, int v, double tf, double tb, double tw,
		    clp_sim_result *res)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *c = NULL;
	clp_sim_opts o;
	int ok = 0;

	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = d;
	g.microbatches = n;
	g.chunks = v;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(d * v, tf, tb, tw, &c));
	clp_sim_opts_default(&o);
	o.costs = c;
	if (s && c) {
		clp_status st = clp_sim_run(s, &o, res);

		CHECK(st == CLP_OK, "%s D=%d N=%d v=%d: %s", clp_sched_kind_name(kind), d, n, v,
		      clp_last_error());
		ok = st == CLP_OK;
	}
	clp_costs_free(c);
	clp_sched_free(s);
	return ok;
}

static void check_near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-9 * fabs(want) + 1e-12, "%s: got %.12g, want %.12g", what,
	      got, want);
}

static void test_gpipe_1f1b(void)
{
	static const int dn[][2] = {{4, 8}, {2, 5}, {8, 16}, {4, 4}, {1, 3}, {3, 7}};
	static const double ft[][2] = {{1, 2}, {1.5, 2.5}, {0.25, 0.25}};

	for (int kind = CLP_SCHED_GPIPE; kind <= CLP_SCHED_1F1B; kind++)
		for (size_t i = 0; i < sizeof(dn) / sizeof(dn[0]); i++)
			for (size_t j = 0; j < sizeof(ft) / sizeof(ft[0]); j++) {
				int d = dn[i][0], n = dn[i][1];
				double tf = ft[j][0], tb = ft[j][1];
				clp_sim_result r;
				char what[96];

				if (!sim_kind(kind, d, n, 1, tf, tb, -1, &r))
					continue;
				snprintf(what, sizeof(what), "%s D=%d N=%d Tf=%g Tb=%g",
					 clp_sched_kind_name(kind), d, n, tf, tb);
				check_near(what, r.step_s, (n + d - 1) * (tf + tb));
				clp_sim_result_free(&r);
			}
}

static void test_interleaved(void)
{
	static const int dnv[][3] = {{4, 8, 2}, {4, 8, 4}, {2, 4, 3}, {4, 4, 2}, {8, 16, 2}};

	for (size_t i = 0; i < sizeof(dnv) / sizeof(dnv[0]); i++)
		for (int j = 0; j < 2; j++) {
			int d = dnv[i][0], n = dnv[i][1], v = dnv[i][2];
			double tf = 1, tb = j ? 2 : 1; /* per rank, over all its chunks */
			clp_sim_result r;
			char what[96];

			if (!sim_kind(CLP_SCHED_INTERLEAVED, d, n, v, tf / v, tb / v, -1, &r))
				continue;
			snprintf(what, sizeof(what), "interleaved D=%d N=%d v=%d Tb=%g", d, n, v, tb);
			check_near(what, r.step_s, n * (tf + tb) + (d - 1) * (tf + tb) / v);
			clp_sim_result_free(&r);
		}
}

static void test_chimera(void)
{
	for (int d = 2; d <= 8; d += 2) {
		static const double ft[][2] = {{1, 2}, {1, 1}, {2, 3}};

		for (size_t j = 0; j < sizeof(ft) / sizeof(ft[0]); j++) {
			double tf = ft[j][0], tb = ft[j][1];
			clp_sim_result r;
			char what[96];

			if (!sim_kind(CLP_SCHED_CHIMERA, d, d, 1, tf, tb, -1, &r))
				continue;
			snprintf(what, sizeof(what), "chimera D=N=%d Tf=%g Tb=%g", d, tf, tb);
			check_near(what, r.step_s, d * tf + (2 * d - 2) * tb);
			if (tf == tb) {
				snprintf(what, sizeof(what), "chimera D=N=%d bubble", d);
				check_near(what, r.bubble, (d - 2.0) / (2.0 * d + d - 2.0));
			}
			clp_sim_result_free(&r);
		}
	}
}

/* Idle compute time summed over ranks. */
static double idle_s(const clp_sim_result *r)
{
	double idle = 0;

	for (int i = 0; i < r->nranks; i++)
		idle += r->cycle_s - r->ranks[i].compute_s;
	return idle;
}

static void test_zbh1_bubble(void)
{
	static const int dn[][2] = {{4, 8}, {4, 4}, {8, 16}, {3, 7}, {2, 2}};

	for (size_t i = 0; i < sizeof(dn) / sizeof(dn[0]); i++) {
		int d = dn[i][0], n = dn[i][1];
		clp_sim_result a, z;
		char what[96];

		if (!sim_kind(CLP_SCHED_1F1B, d, n, 1, 1, 2, 1, &a))
			continue;
		if (sim_kind(CLP_SCHED_ZBH1, d, n, 1, 1, 2, 1, &z)) {
			snprintf(what, sizeof(what), "zbh1 D=%d N=%d idle vs 1f1b / 3", d, n);
			check_near(what, idle_s(&z), idle_s(&a) / 3);
			CHECK(z.step_s < a.step_s, "zbh1 D=%d N=%d: %g not below 1f1b %g", d, n,
			      z.step_s, a.step_s);
			clp_sim_result_free(&z);
		}
		clp_sim_result_free(&a);
	}
}

/* Unit costs count one activation unit per micro-batch held: ZB-H1 holds no more than 1F1B's
 * busiest rank (D), GPipe holds N. */
static void test_activation_memory(void)
{
	int d = 4, n = 12;
	int64_t peak[3] = {0};
	int kinds[3] = {CLP_SCHED_1F1B, CLP_SCHED_ZBH1, CLP_SCHED_GPIPE};

	for (int k = 0; k < 3; k++) {
		clp_gen_opts g;
		clp_sched *s = NULL;
		clp_sim_result r;

		clp_gen_opts_default(&g);
		g.kind = kinds[k];
		g.depth = d;
		g.microbatches = n;
		CHECK_OK(clp_sched_generate(&s, &g));
		if (s && clp_sim_run(s, NULL, &r) == CLP_OK) {
			for (int i = 0; i < r.nranks; i++)
				if (r.ranks[i].peak_bytes > peak[k])
					peak[k] = r.ranks[i].peak_bytes;
			if (kinds[k] == CLP_SCHED_1F1B)
				for (int i = 0; i < r.nranks; i++)
					CHECK(r.ranks[i].peak_bytes == d - i, "1f1b rank %d holds %lld",
					      i, (long long)r.ranks[i].peak_bytes);
			clp_sim_result_free(&r);
		} else {
			CHECK(0, "%s: %s", clp_sched_kind_name(kinds[k]), clp_last_error());
		}
		clp_sched_free(s);
	}
	CHECK(peak[0] == d, "1f1b peak %lld, want %d", (long long)peak[0], d);
	CHECK(peak[1] <= peak[0], "zbh1 peak %lld above 1f1b's %lld", (long long)peak[1],
	      (long long)peak[0]);
	CHECK(peak[2] == n, "gpipe peak %lld, want %d", (long long)peak[2], n);
}

/* Dataflow mode: GPipe's lists, run by readiness with at most D - r micro-batches holding
 * activations on rank r, become 1F1B: its step time and its memory. Without caps the lists
 * still finish in GPipe's time. */
static void test_dataflow_gpipe_as_1f1b(void)
{
	int d = 4, n = 8;
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *c = NULL;
	clp_sim_opts o;
	clp_sim_result r;

	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_GPIPE;
	g.depth = d;
	g.microbatches = n;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(d, 1, 2, -1, &c));
	if (!s || !c)
		goto out;
	clp_sim_opts_default(&o);
	o.costs = c;
	for (int cap = 0; cap < 2; cap++) {
		for (int i = 0; i < d; i++) {
			s->ranks[i].mode = CLP_RANK_DATAFLOW;
			s->ranks[i].mem_cap = cap ? d - i : 0;
		}
		CHECK(clp_sched_validate(s, 1) == CLP_OK, "%s", clp_last_error());
		if (clp_sim_run(s, &o, &r) == CLP_OK) {
			check_near("dataflow step", r.step_s, (n + d - 1) * 3.0);
			clp_sim_result_free(&r);
		}
		o.costs = NULL; /* unit costs: peaks count micro-batches */
		if (clp_sim_run(s, &o, &r) == CLP_OK) {
			for (int i = 0; i < d; i++)
				CHECK(cap ? r.ranks[i].peak_bytes == d - i : r.ranks[i].peak_bytes <= n,
				      "cap %d rank %d holds %lld", cap, i,
				      (long long)r.ranks[i].peak_bytes);
			clp_sim_result_free(&r);
		}
		o.costs = c;
	}
out:
	clp_costs_free(c);
	clp_sched_free(s);
}

/* A K-step cycle (PipeFisher's unit) of a schedule: K times the step. */
static void test_cycle(void)
{
	for (int k = CLP_SCHED_GPIPE; k <= CLP_SCHED_ZBH1; k++) {
		clp_gen_opts g;
		clp_sched *s = NULL;
		clp_sim_result one, three;

		clp_gen_opts_default(&g);
		g.kind = k;
		g.depth = 4;
		g.microbatches = k == CLP_SCHED_CHIMERA_FD ? 16 : 8;
		g.chunks = k == CLP_SCHED_INTERLEAVED ? 2 : 1;
		CHECK_OK(clp_sched_generate(&s, &g));
		if (s && clp_sim_run(s, NULL, &one) == CLP_OK) {
			CHECK_OK(clp_sched_repeat(s, 3));
			CHECK(clp_sched_validate(s, 1) == CLP_OK, "%s", clp_last_error());
			if (clp_sim_run(s, NULL, &three) == CLP_OK) {
				check_near(clp_sched_kind_name(k), three.cycle_s, 3 * one.cycle_s);
				check_near(clp_sched_kind_name(k), three.step_s, one.step_s);
				clp_sim_result_free(&three);
			}
			clp_sim_result_free(&one);
		}
		clp_sched_free(s);
	}
}

/* K-FAC work items (as the PipeFisher pass will insert them) run on the compute stream; a
 * factor placed before the pass it records is caught by the dry run. */
static void test_kfac_items(void)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_sim_result base, r;
	int last = 1;

	clp_gen_opts_default(&g);
	g.depth = 2;
	g.microbatches = 4;
	CHECK_OK(clp_sched_generate(&s, &g));
	if (!s || clp_sim_run(s, NULL, &base) != CLP_OK)
		goto out;
	/* On the last rank: A factors after each FWD, B factors after each BWD, then one inverse
	 * and the preconditioning before the optimizer step (unit cost 1 each). */
	{
		clp_rank_prog *p = &s->ranks[last];
		clp_op *old = p->ops;
		int n = p->nops;

		p->ops = NULL;
		p->nops = p->cap = 0;
		for (int i = 0; i < n; i++) {
			clp_op k;

			if (old[i].kind == CLP_OP_OPT_STEP) {
				k = clp_op_make(CLP_OP_KFAC_INV, 1, 0, 0, -1);
				k.layer = 1;
				CHECK_OK(clp_sched_push(s, last, &k));
				k = clp_op_make(CLP_OP_KFAC_PRECOND, 1, 0, 0, -1);
				CHECK_OK(clp_sched_push(s, last, &k));
			}
			CHECK_OK(clp_sched_push(s, last, &old[i]));
			if (old[i].kind == CLP_OP_FWD || old[i].kind == CLP_OP_BWD) {
				k = clp_op_make(old[i].kind == CLP_OP_FWD ? CLP_OP_KFAC_CURV_A
									  : CLP_OP_KFAC_CURV_B,
						1, 0, 0, old[i].mb);
				k.layer = 1;
				CHECK_OK(clp_sched_push(s, last, &k));
			}
		}
		free(old);
	}
	CHECK(clp_sched_validate(s, 1) == CLP_OK, "%s", clp_last_error());
	if (clp_sim_run(s, NULL, &r) == CLP_OK) {
		check_near("K-FAC compute", r.ranks[last].compute_s,
			   base.ranks[last].compute_s + 4 + 4 + 2);
		clp_sim_result_free(&r);
	}
	/* the first B factor moved before the backward it needs */
	for (int i = 0; i < s->ranks[last].nops; i++)
		if (s->ranks[last].ops[i].kind == CLP_OP_KFAC_CURV_B) {
			clp_op k = s->ranks[last].ops[i];

			s->ranks[last].ops[i] = s->ranks[last].ops[i - 1];
			s->ranks[last].ops[i - 1] = k;
			break;
		}
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "deadlock", "KFAC_CURV_B stage 1 "
		  "layer 1 mb 0", "which has not run");
	clp_sim_result_free(&base);
out:
	clp_sched_free(s);
}

TH_MAIN(TH_TEST(test_gpipe_1f1b), TH_TEST(test_interleaved), TH_TEST(test_chimera),
	TH_TEST(test_zbh1_bubble), TH_TEST(test_activation_memory),
	TH_TEST(test_dataflow_gpipe_as_1f1b), TH_TEST(test_cycle), TH_TEST(test_kfac_items))
