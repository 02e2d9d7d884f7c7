/* Traces: utilisation, communication and busy time computed from events (the only place those
 * numbers come from), the simulator's streamed figures equal to the stored trace's, Chrome JSON
 * round trips, SVG output, and the event cap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scenario/trace.h"
#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

static void near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-9 * fabs(want) + 1e-12, "%s: got %.15g, want %.15g", what,
	      got, want);
}

static void test_stats_by_hand(void)
{
	/* rank 0: compute [0,1] [2,3], comm [0.5,2.5] [2.6,2.7]; rank 1: compute [1,4] */
	static const clp_trace_event ev[] = {
		{2, 3, 0, CLP_TQ_COMPUTE, 0, 0, 0, 0, 1, -1, -1},
		{0.5, 2.5, 0, CLP_TQ_COMM, 4, 0, 0, 0, 0, 1, -1},
		{0, 1, 0, CLP_TQ_COMPUTE, 0, 0, 0, 0, 0, -1, -1},
		{2.6, 2.7, 0, CLP_TQ_COMM, 4, 0, 0, 0, 1, 1, -1},
		{1, 4, 1, CLP_TQ_COMPUTE, 0, 0, 0, 1, 0, -1, -1},
	};
	clp_trace t;
	clp_trace_stats st;

	clp_trace_init(&t, 2, 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_OK(clp_trace_push(&t, &ev[i]));
	CHECK_OK(clp_trace_stats_compute(&t, -1, &st));
	near("span", st.span_s, 4);
	near("rank 0 compute", st.rank[0].compute_s, 2);
	near("rank 0 comm (union)", st.rank[0].comm_s, 2.1);
	near("rank 0 busy (union)", st.rank[0].busy_s, 3);
	near("rank 1 busy", st.rank[1].busy_s, 3);
	near("utilisation", st.util_mean, (2.0 / 4 + 3.0 / 4) / 2);
	near("bubble", st.bubble, 1 - (2.0 / 4 + 3.0 / 4) / 2);
	clp_trace_stats_free(&st);
	clp_trace_free(&t);
}

static clp_status run_1f1b(size_t limit, clp_sim_result *r)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *c = NULL;
	clp_cluster *cl = NULL;
	clp_sim_opts o;
	clp_status st;

	clp_gen_opts_default(&g);
	g.depth = 4;
	g.microbatches = 8;
	g.replicas = 2;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(4, 1e-3, 2e-3, -1, &c));
	CHECK_OK(clp_cluster_ideal(8, &cl));
	if (!s || !c || !cl) {
		st = CLP_ERR_INVALID;
		goto out;
	}
	for (int i = 0; i < 4; i++) {
		c->stages[i].out_bytes = 1 << 20;
		c->stages[i].param_bytes = 1 << 24;
	}
	/* slow links, so that there is communication to see */
	cl->intra = (clp_link_spec){1e-4, 2e9};
	clp_sim_opts_default(&o);
	o.costs = c;
	o.cluster = cl;
	o.trace_limit = limit;
	st = clp_sim_run(s, &o, r);
out:
	clp_cluster_free(cl);
	clp_costs_free(c);
	clp_sched_free(s);
	return st;
}

static void test_sim_stats_from_trace(void)
{
	clp_sim_result r, capped;
	clp_trace_stats st;

	if (run_1f1b(SIZE_MAX, &r) != CLP_OK) {
		CHECK(0, "%s", clp_last_error());
		return;
	}
	CHECK(r.trace.n == (size_t)r.nevents && r.trace.dropped == 0, "full trace kept");
	CHECK_OK(clp_trace_stats_compute(&r.trace, 0, &st));
	near("span", st.span_s, r.cycle_s);
	near("utilisation", st.util_mean, r.util_mean);
	near("busy", st.busy_mean, r.busy_mean);
	for (int i = 0; i < r.nranks; i++) {
		near("rank compute", st.rank[i].compute_s, r.ranks[i].compute_s);
		near("rank comm", st.rank[i].comm_s, r.ranks[i].comm_s);
		CHECK(r.ranks[i].comm_s > 0 && r.ranks[i].busy_s > r.ranks[i].compute_s,
		      "rank %d: no communication seen", i);
	}
	clp_trace_stats_free(&st);
	if (run_1f1b(10, &capped) == CLP_OK) {
		CHECK(capped.trace.n == 10 && capped.trace.dropped == (size_t)capped.nevents - 10,
		      "cap: kept %zu dropped %zu of %lld", capped.trace.n, capped.trace.dropped,
		      (long long)capped.nevents);
		near("capped run, same utilisation", capped.util_mean, r.util_mean);
		clp_sim_result_free(&capped);
	}
	clp_sim_result_free(&r);
}

static void test_chrome_round_trip(void)
{
	clp_sim_result r;
	clp_trace back;
	char path[1024];

	snprintf(path, sizeof(path), "%s/trace.json", CLP_TEST_TMP);
	if (run_1f1b(SIZE_MAX, &r) != CLP_OK)
		return;
	CHECK_OK(clp_trace_write_chrome(&r.trace, path));
	if (clp_trace_read_chrome(path, &back) == CLP_OK) {
		CHECK(back.n == r.trace.n && back.nranks == r.trace.nranks, "read %zu events, %d "
		      "ranks", back.n, back.nranks);
		for (size_t i = 0; i < back.n && i < r.trace.n; i++) {
			const clp_trace_event *a = &r.trace.ev[i], *b = &back.ev[i];

			if (a->rank != b->rank || a->kind != b->kind || a->queue != b->queue ||
			    a->stage != b->stage || a->mb != b->mb || a->peer != b->peer ||
			    fabs(a->t0 - b->t0) > 1e-9 || fabs(a->t1 - b->t1) > 1e-9) {
				CHECK(0, "event %zu differs after the round trip", i);
				break;
			}
		}
		CHECK(strstr(back.title, "1f1b") != NULL, "title '%s'", back.title);
		clp_trace_free(&back);
	} else {
		CHECK(0, "%s", clp_last_error());
	}
	clp_sim_result_free(&r);
	snprintf(path, sizeof(path), "%s/bad_trace.json", CLP_TEST_TMP);
	{
		FILE *f = fopen(path, "w");

		if (f) {
			fputs("{\"traceEvents\": [{\"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": 0, "
			      "\"dur\": 1, \"args\": {\"kind\": \"FOO\"}}]}", f);
			fclose(f);
		}
		CHECK_ERR(clp_trace_read_chrome(path, &back), CLP_ERR_FORMAT,
			  "traceEvents[0].args.kind: unknown op kind \"FOO\"");
	}
}

static void test_svg(void)
{
	clp_sim_result r;
	char path[1024], buf[4096] = "";
	const clp_trace *tr[2];
	const char *labels[2] = {"measured", "simulated"};
	FILE *f;

	snprintf(path, sizeof(path), "%s/timeline.svg", CLP_TEST_TMP);
	if (run_1f1b(SIZE_MAX, &r) != CLP_OK)
		return;
	tr[0] = tr[1] = &r.trace;
	CHECK_OK(clp_trace_write_svg(path, tr, labels, 2));
	f = fopen(path, "r");
	CHECK(f != NULL, "no SVG written");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);

		buf[n] = '\0';
		fclose(f);
	}
	CHECK(!strncmp(buf, "<svg", 4) && strstr(buf, "measured: ") &&
	      strstr(buf, "compute utilisation"), "SVG header/title missing");
	CHECK(strstr(buf, "class=\"axis\"") && strstr(buf, "class=\"tick\""), "no time axis");
	CHECK(!strstr(buf, "class=\"step\""), "step boundaries drawn for a trace without steps");
	/* a trace of two training steps: two boundaries, the per-step time in the header */
	{
		clp_trace two = r.trace;
		clp_trace_event *ev = malloc(2 * r.trace.n * sizeof(*ev) + 1);
		double span = 0;
		static char big[1 << 20];
		size_t n = 0;

		CHECK(ev != NULL, "out of memory");
		if (!ev)
			goto done;
		for (size_t i = 0; i < r.trace.n; i++)
			span = r.trace.ev[i].t1 > span ? r.trace.ev[i].t1 : span;
		for (size_t i = 0; i < r.trace.n; i++) {
			ev[i] = ev[r.trace.n + i] = r.trace.ev[i];
			ev[r.trace.n + i].t0 += span, ev[r.trace.n + i].t1 += span;
		}
		two.ev = ev, two.n = two.cap = 2 * r.trace.n, two.steps = 2;
		tr[0] = &two;
		CHECK_OK(clp_trace_write_svg(path, tr, labels, 1));
		f = fopen(path, "r");
		if (f) {
			n = fread(big, 1, sizeof(big) - 1, f);
			fclose(f);
		}
		big[n] = '\0';
		{
			const char *p = big;
			int steps = 0;

			while ((p = strstr(p, "class=\"step\""))) p++, steps++;
			CHECK(steps == 2, "%d step boundaries drawn, want 2", steps);
		}
		{
			char want[64];

			snprintf(want, sizeof(want), "(2 steps, %.1f ms per step)", span * 1e3);
			CHECK(strstr(big, want), "header without \"%s\"", want);
		}
		free(ev);
	}
done:
	clp_sim_result_free(&r);
}

TH_MAIN(TH_TEST(test_stats_by_hand), TH_TEST(test_sim_stats_from_trace),
	TH_TEST(test_chrome_round_trip), TH_TEST(test_svg))
