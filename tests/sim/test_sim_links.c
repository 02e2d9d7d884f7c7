/* Communication in the simulator: the ring all-reduce formula 2(p-1)(alpha + S/(p beta)) alone
 * and inside a data-parallel step (slowest link of the ring, which follows the links), FCFS link contention (two sends on one
 * link serialise; a host's NIC is shared; different links are not), rendezvous against eager
 * sends and blocking sends, and the memory model against device memory. */
#include <math.h>
#include <stdio.h>

#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

static void near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-9 * fabs(want) + 1e-15, "%s: got %.12g, want %.12g", what,
	      got, want);
}

static clp_cluster *cluster_from(const char *name, const char *json)
{
	char path[1024];
	clp_cluster *c = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", CLP_TEST_TMP, name);
	f = fopen(path, "w");
	CHECK(f != NULL, "cannot write %s", path);
	if (!f)
		return NULL;
	fputs(json, f);
	fclose(f);
	CHECK_OK(clp_cluster_load(path, &c));
	return c;
}

static void test_ring_formula(void)
{
	clp_link_spec l = {1e-5, 1e9};

	near("p=4", clp_sim_allreduce_s(4, 1000000, l), 2.0 * 3 * (1e-5 + 1e6 / (4 * 1e9)));
	near("p=2", clp_sim_allreduce_s(2, 8, l), 2.0 * (1e-5 + 8 / 2e9));
	near("p=1", clp_sim_allreduce_s(1, 8, l), 0);
	near("reduce p=5", clp_sim_reduce_s(5, 100, l), 3 * (1e-5 + 100 / 1e9));
}

/* R = 4 replicas of a one-stage model with free compute: the step is the gradient all-reduce
 * over the ring of four hosts, at the speed of its slowest link. */
static void test_dp_allreduce(void)
{
	const int64_t p = 64 << 20;
	double a = 20e-6, b = 10e9, a_slow = 1e-3, b_slow = 1e9;
	clp_cluster *c = cluster_from("dp.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 2e-5, \"bandwidth_Bps\": 1e10}},"
		"\"hosts\": [{\"name\": \"a\", \"devices\": [{}]}, {\"name\": \"b\", \"devices\": [{}]},"
		"{\"name\": \"c\", \"devices\": [{}]}, {\"name\": \"d\", \"devices\": [{}]}]}");
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *costs = NULL;
	clp_sim_opts o;
	clp_sim_result r;

	clp_gen_opts_default(&g);
	g.depth = 1;
	g.microbatches = 1;
	g.replicas = 4;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(1, 0, 0, -1, &costs));
	if (!c || !s || !costs)
		goto out;
	costs->stages[0].param_bytes = p;
	clp_sim_opts_default(&o);
	o.costs = costs;
	o.cluster = c;
	CHECK_OK(clp_sim_run(s, &o, &r));
	near("dp all-reduce", r.step_s, 2.0 * 3 * (a + (double)p / (4 * b)));
	clp_sim_result_free(&r);
	/* One slow link (b - c): the ring goes around it (a b d c). */
	clp_cluster_free(c);
	c = cluster_from("dp_slow.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 2e-5, \"bandwidth_Bps\": 1e10}},"
		"\"hosts\": [{\"name\": \"a\", \"devices\": [{}]}, {\"name\": \"b\", \"devices\": [{}]},"
		"{\"name\": \"c\", \"devices\": [{}]}, {\"name\": \"d\", \"devices\": [{}]}],"
		"\"links\": [{\"a\": \"b\", \"b\": \"c\", \"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9}]}");
	o.cluster = c;
	if (c && clp_sim_run(s, &o, &r) == CLP_OK) {
		near("dp all-reduce, one slow link", r.step_s, 2.0 * 3 * (a + (double)p / (4 * b)));
		clp_sim_result_free(&r);
	}
	/* The ring follows the links: a - b and c - d are slow, so rank order (a b c d) crosses a
	 * slow link twice, while a c b d uses only fast ones. */
	clp_cluster_free(c);
	c = cluster_from("dp_ring.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 2e-5, \"bandwidth_Bps\": 1e10}},"
		"\"hosts\": [{\"name\": \"a\", \"devices\": [{}]}, {\"name\": \"b\", \"devices\": [{}]},"
		"{\"name\": \"c\", \"devices\": [{}]}, {\"name\": \"d\", \"devices\": [{}]}],"
		"\"links\": [{\"a\": \"a\", \"b\": \"b\", \"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9},"
		"{\"a\": \"c\", \"b\": \"d\", \"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9}]}");
	o.cluster = c;
	if (c && clp_sim_run(s, &o, &r) == CLP_OK) {
		near("dp all-reduce, ring around the slow links", r.step_s,
		     2.0 * 3 * (a + (double)p / (4 * b)));
		clp_sim_result_free(&r);
	}
	/* No fast ring: a - b, a - c and a - d slow; a has two slow neighbours whatever the order,
	 * and the slowest link of the ring sets the pace of the whole all-reduce. */
	clp_cluster_free(c);
	c = cluster_from("dp_ring2.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 2e-5, \"bandwidth_Bps\": 1e10}},"
		"\"hosts\": [{\"name\": \"a\", \"devices\": [{}]}, {\"name\": \"b\", \"devices\": [{}]},"
		"{\"name\": \"c\", \"devices\": [{}]}, {\"name\": \"d\", \"devices\": [{}]}],"
		"\"links\": [{\"a\": \"a\", \"b\": \"b\", \"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9},"
		"{\"a\": \"a\", \"b\": \"c\", \"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9},"
		"{\"a\": \"a\", \"b\": \"d\", \"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9}]}");
	o.cluster = c;
	if (c && clp_sim_run(s, &o, &r) == CLP_OK) {
		near("dp all-reduce, no fast ring", r.step_s,
		     2.0 * 3 * (a_slow + (double)p / (4 * b_slow)));
		clp_sim_result_free(&r);
	}
out:
	clp_cluster_free(c);
	clp_costs_free(costs);
	clp_sched_free(s);
}

static void add(clp_sched *s, int r, int kind, int stage, int mb, int peer, int64_t bytes,
		int flags)
{
	clp_op op = clp_op_make((clp_op_kind)kind, stage, 0, 0, mb);

	op.peer = peer;
	op.bytes = bytes;
	op.flags = (uint8_t)flags;
	if (clp_op_is_p2p(kind))
		op.tag = clp_sched_tag(kind == CLP_OP_SEND_ACT || kind == CLP_OP_RECV_ACT ? 0 : 1, 0, 0,
				       mb);
	CHECK_OK(clp_sched_push(s, r, &op));
}

/* Each of senders[0..n) sends per_sender messages of 1 MB to rank `to`, whose receives are all
 * posted at 0; the time until all are delivered. */
static double run_sends(const clp_cluster *c, const int *senders, int n, int to, int per_sender)
{
	clp_sched *s = NULL;
	clp_costs *costs = NULL;
	clp_sim_opts o;
	clp_sim_result r;
	double t = -1;

	CHECK_OK(clp_sched_create(&s, 4, 2, 8, 0));
	CHECK_OK(clp_costs_uniform(2, 0, 0, -1, &costs));
	if (!s || !costs)
		goto out;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < per_sender; k++) {
			int mb = i * per_sender + k;

			add(s, senders[i], CLP_OP_SEND_ACT, 0, mb, to, 1000000, 0);
			add(s, to, CLP_OP_RECV_ACT, 1, mb, senders[i], 0, 0);
		}
	clp_sim_opts_default(&o);
	o.costs = costs;
	o.cluster = c;
	if (clp_sim_run(s, &o, &r) == CLP_OK) {
		t = r.cycle_s;
		clp_sim_result_free(&r);
	} else {
		CHECK(0, "%s", clp_last_error());
	}
out:
	clp_costs_free(costs);
	clp_sched_free(s);
	return t;
}

static void test_contention(void)
{
	/* hosts a (devices 0, 1), b (2), c (3); host links 1 GB/s, 1 ms */
	clp_cluster *c = cluster_from("links.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 1e-3, \"bandwidth_Bps\": 1e9}, \"intra_host\": {\"latency_s\": 0,"
		"\"bandwidth_Bps\": \"inf\"}}, \"hosts\": [{\"name\": \"a\", \"devices\": [{}, {}]},"
		"{\"name\": \"b\", \"devices\": [{}]}, {\"name\": \"c\", \"devices\": [{}]}]}");
	const double one = 1e6 / 1e9, lat = 1e-3;

	if (!c)
		return;
	near("one message", run_sends(c, (int[]){0}, 1, 2, 1), one + lat);
	near("two on one link serialise", run_sends(c, (int[]){0}, 1, 2, 2), 2 * one + lat);
	near("two devices share their host's link", run_sends(c, (int[]){0, 1}, 2, 2, 1),
	     2 * one + lat);
	near("different links do not", run_sends(c, (int[]){2, 3}, 2, 0, 1), one + lat);
	near("free intra-host link", run_sends(c, (int[]){0}, 1, 1, 2), 0);
	clp_cluster_free(c);
}

/* Rank 1 computes for 1 s before it posts the receive of rank 0's message. A rendezvous
 * transfer starts then; an eager one at once. A blocking send holds rank 0 until it is done. */
static void test_rendezvous(void)
{
	clp_cluster *c = cluster_from("two.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 0.01, \"bandwidth_Bps\": 1e8}}, \"hosts\": [{\"name\": \"a\", "
		"\"devices\": [{}]}, {\"name\": \"b\", \"devices\": [{}]}]}");
	const double xfer = 1e6 / 1e8 + 0.01;
	clp_costs *costs = NULL;

	CHECK_OK(clp_costs_uniform(2, 1, 0, -1, &costs));
	for (int mode = 0; c && costs && mode < 3; mode++) {
		clp_sched *s = NULL;
		clp_sim_opts o;
		clp_sim_result r;

		CHECK_OK(clp_sched_create(&s, 2, 2, 2, 0));
		if (!s)
			break;
		add(s, 0, CLP_OP_SEND_ACT, 0, 0, 1, 1000000, mode == 2 ? CLP_OPF_WAIT : 0);
		add(s, 0, CLP_OP_FWD, 0, 1, -1, 0, 0);
		add(s, 1, CLP_OP_FWD, 1, 1, -1, 0, 0);
		add(s, 1, CLP_OP_RECV_ACT, 1, 0, 0, 0, 0);
		add(s, 1, CLP_OP_FWD, 1, 0, -1, 0, 0);
		clp_sim_opts_default(&o);
		o.costs = costs;
		o.cluster = c;
		o.eager_bytes = mode == 1 ? 2000000 : 0;
		if (clp_sim_run(s, &o, &r) == CLP_OK) {
			if (mode == 0)
				near("rendezvous", r.cycle_s, 1 + xfer + 1);
			if (mode == 1)
				near("eager", r.cycle_s, 2);
			if (mode == 2) /* rank 0's forward waits for the blocking send */
				near("blocking send", r.ranks[0].finish_s, 1 + xfer + 1);
			clp_sim_result_free(&r);
		} else {
			CHECK(0, "mode %d: %s", mode, clp_last_error());
		}
		clp_sched_free(s);
	}
	clp_costs_free(costs);
	clp_cluster_free(c);
}

/* 1F1B, D = 2: rank 0 holds two micro-batches of activations, rank 1 one; parameters, gradients
 * and AdamW state on top. A device of 150 bytes is too small for rank 0 only. */
static void test_memory(void)
{
	clp_cluster *c = cluster_from("mem.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"intra_host\": {\"latency_s\": 0, "
		"\"bandwidth_Bps\": \"inf\"}}, \"hosts\": [{\"name\": \"a\", \"devices\": "
		"[{\"memory_bytes\": 150}, {\"memory_bytes\": 150}]}]}");
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *costs = NULL;
	clp_sim_opts o;
	clp_sim_result r;

	clp_gen_opts_default(&g);
	g.depth = 2;
	g.microbatches = 4;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_costs_uniform(2, 1, 2, -1, &costs));
	if (!c || !s || !costs)
		goto out;
	for (int i = 0; i < 2; i++) {
		costs->stages[i].act_bytes = costs->stages[i].act_w_bytes = 100;
		costs->stages[i].param_bytes = 10;
		costs->stages[i].opt_bytes = 20;
	}
	clp_sim_opts_default(&o);
	o.costs = costs;
	o.cluster = c;
	CHECK_OK(clp_sim_run(s, &o, &r));
	CHECK(r.ranks && r.ranks[0].peak_bytes == 40 + 200 && r.ranks[1].peak_bytes == 40 + 100,
	      "peaks %lld %lld", r.ranks ? (long long)r.ranks[0].peak_bytes : -1,
	      r.ranks ? (long long)r.ranks[1].peak_bytes : -1);
	CHECK(r.over_memory == 1, "%d ranks over memory, want 1", r.over_memory);
	clp_sim_result_free(&r);
	/* recomputation keeps only the stage inputs (out_bytes) and pays a forward in backward */
	costs->stages[0].out_bytes = costs->stages[1].out_bytes = 5;
	o.recompute = 1;
	CHECK_OK(clp_sim_run(s, &o, &r));
	CHECK(r.ranks && r.ranks[0].peak_bytes == 40 + 10, "recompute peak %lld",
	      r.ranks ? (long long)r.ranks[0].peak_bytes : -1);
	near("recompute step", r.step_s, (4 + 2 - 1) * (1 + 2 + 1));
	CHECK(r.over_memory == 0, "%d ranks over memory with recomputation", r.over_memory);
	clp_sim_result_free(&r);
out:
	clp_cluster_free(c);
	clp_costs_free(costs);
	clp_sched_free(s);
}

TH_MAIN(TH_TEST(test_ring_formula), TH_TEST(test_dp_allreduce), TH_TEST(test_contention),
	TH_TEST(test_rendezvous), TH_TEST(test_memory))
