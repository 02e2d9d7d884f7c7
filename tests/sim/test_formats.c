/* Schema tests of the cluster, cost table and rank layout formats (fixtures in
 * tests/sim/data): what the readers take, the defaults they fill, round trips through the
 * writers, and messages for bad files that name the file and the field. Also the PipeFisher
 * profile importer and calibration of costs from a trace. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/scenario/cluster.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/scenario/trace.h"
#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

static const char *data(const char *name)
{
	static char buf[4][1024];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", CLP_TEST_DATA, name);
	return buf[k];
}

static const char *tmp_file(const char *name, const char *text)
{
	static char buf[1024];
	FILE *f;

	snprintf(buf, sizeof(buf), "%s/%s", CLP_TEST_TMP, name);
	f = fopen(buf, "w");
	CHECK(f != NULL, "cannot write %s", buf);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return buf;
}

static void near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-12 * fabs(want) + 1e-15, "%s: got %.15g, want %.15g", what,
	      got, want);
}

static void test_cluster(void)
{
	clp_cluster *c = NULL, *c2 = NULL;
	clp_route rt;
	char path[1024];

	CHECK_OK(clp_cluster_load(data("cluster_2x2.json"), &c));
	if (!c)
		return;
	CHECK(c->nhosts == 2 && c->ndevices == 4 && c->nlinks == 2, "shape %d %d %d", c->nhosts,
	      c->ndevices, c->nlinks);
	CHECK(!strcmp(c->devices[2].id, "n1:0") && !strcmp(c->devices[3].kind, "P100") &&
	      c->devices[3].speed == 0.5 && c->devices[0].memory_bytes == 17179869184LL,
	      "device fields");
	rt = clp_cluster_route(c, 0, 1); /* explicit device link */
	near("nvlink", rt.spec.bandwidth_Bps, 1.5e11);
	rt = clp_cluster_route(c, 2, 3); /* same host, default */
	near("intra", rt.spec.latency_s, 5e-6);
	rt = clp_cluster_route(c, 1, 2); /* explicit host link */
	near("host link", rt.spec.bandwidth_Bps, 2.5e10);
	CHECK(clp_cluster_route(c, 0, 2).resource == clp_cluster_route(c, 1, 3).resource &&
	      clp_cluster_route(c, 0, 2).resource != clp_cluster_route(c, 2, 0).resource,
	      "a host link is one resource per direction");
	snprintf(path, sizeof(path), "%s/cluster_rt.json", CLP_TEST_TMP);
	CHECK_OK(clp_cluster_save(c, path));
	CHECK_OK(clp_cluster_load(path, &c2));
	if (c2) {
		CHECK(c2->ndevices == 4 && c2->nlinks == 2 && !strcmp(c2->devices[2].id, "n1:0") &&
		      c2->links[1].spec.latency_s == 1e-5 && c2->eager_bytes == 65536,
		      "round trip changed the cluster");
		near("round trip intra", clp_cluster_route(c2, 2, 3).spec.bandwidth_Bps, 2.5e10);
	}
	clp_cluster_free(c2);
	clp_cluster_free(c);
}

static void test_cluster_errors(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{"{\"format\": \"clpipe-cluster\", \"hosts\": [{\"name\": \"a\", \"devices\": [{}, "
		 "{\"memory_bytes\": \"16G\"}]}]}", "hosts[0].devices[1].memory_bytes: expected an "
		 "integer"},
		{"{\"format\": \"clpipe-cluster\", \"hosts\": [{\"name\": \"a\", \"devices\": [{}]}], "
		 "\"links\": [{\"a\": \"a:0\", \"b\": \"x\", \"latency_s\": 0, \"bandwidth_Bps\": 1}]}",
		 "links[0].b: \"x\" is neither a device id nor a host name"},
		{"{\"format\": \"clpipe-cluster\", \"hosts\": [{\"name\": \"a\", \"devices\": "
		 "[{\"id\": \"g\"}, {\"id\": \"g\"}]}]}", "hosts[0].devices[1].id: \"g\" is used twice"},
		{"{\"format\": \"clpipe-cluster\"}", "hosts: missing"},
		{"{\"format\": \"clpipe-cluster\", \"hosts\": [{\"name\": \"a\", \"devices\": [{}]}], "
		 "\"defaults\": {\"inter_host\": {\"latency_s\": -1}}}",
		 "defaults.inter_host.latency_s: -1 is out of range"},
		{"{\"format\": \"clpipe-cluster\", \"hosts\": [{\"name\": \"a\", \"devices\": "
		 "[{\"speed\": 1, \"kind\": \"V100\", \"memory\": 1}]}]}",
		 "hosts[0].devices[0].memory: unknown field"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clp_cluster *c = NULL;

		CHECK_ERR(clp_cluster_load(tmp_file("bad_cluster.json", cases[i].text), &c),
			  CLP_ERR_FORMAT, "bad_cluster.json: ", cases[i].needle);
		clp_cluster_free(c);
	}
}

static void test_costs(void)
{
	clp_costs *c = NULL, *c2 = NULL;
	char path[1024];
	int p100;

	CHECK_OK(clp_costs_load(data("costs_4.json"), &c));
	if (!c)
		return;
	CHECK(c->nstages == 4 && c->micro_batch_size == 4 && !strcmp(c->device_kind, "V100"),
	      "header");
	near("bwd split in halves", c->stages[0].t[CLP_COST_BWD_B], 0.010);
	near("bwd from halves", c->stages[1].t[CLP_COST_BWD], 0.020);
	CHECK(c->stages[0].opt_bytes == 8000000 && c->stages[1].opt_bytes == 4000000,
	      "opt_bytes default 2 x params, or as given");
	CHECK(c->stages[0].act_w_bytes == 1000000 && c->stages[1].act_w_bytes == 400000,
	      "act_w_bytes default act_bytes, or as given");
	CHECK(c->stages[0].nlayers == 2 && c->stages[1].nlayers == 1, "layers");
	p100 = clp_costs_kind_index(c, "P100");
	CHECK(p100 >= 0, "P100 override missing");
	near("P100 measured", clp_costs_time(c, 0, CLP_COST_FWD, p100, 0.5), 0.025);
	near("P100 by speed", clp_costs_time(c, 0, CLP_COST_BWD, p100, 0.5), 0.040);
	near("V100", clp_costs_time(c, 0, CLP_COST_FWD, -1, 1), 0.010);
	snprintf(path, sizeof(path), "%s/costs_rt.json", CLP_TEST_TMP);
	CHECK_OK(clp_costs_save(c, path));
	CHECK_OK(clp_costs_load(path, &c2));
	if (c2) {
		for (int s = 0; s < 4; s++)
			CHECK(!memcmp(c->stages[s].t, c2->stages[s].t, sizeof(c->stages[s].t)) &&
			      c->stages[s].act_bytes == c2->stages[s].act_bytes &&
			      c->stages[s].kfac_bytes == c2->stages[s].kfac_bytes,
			      "round trip changed stage %d", s);
		near("round trip override",
		     clp_costs_time(c2, 0, CLP_COST_FWD, clp_costs_kind_index(c2, "P100"), 0.5), 0.025);
	}
	clp_costs_free(c2);
	clp_costs_free(c);
	/* frozen_bytes: gradients and the default optimizer state are the trained share's; saved
	 * and read back */
	CHECK_OK(clp_costs_load(tmp_file("frozen.json", "{\"format\": \"clpipe-costs\", "
					 "\"stages\": [{\"fwd_s\": 1, \"bwd_s\": 2, \"param_bytes\": "
					 "1000, \"frozen_bytes\": 900}]}"), &c));
	if (c) {
		CHECK(c->stages[0].frozen_bytes == 900 && clp_cost_grad_bytes(&c->stages[0]) == 100 &&
		      c->stages[0].opt_bytes == 200, "frozen_bytes %lld, opt_bytes %lld",
		      (long long)c->stages[0].frozen_bytes, (long long)c->stages[0].opt_bytes);
		CHECK_OK(clp_costs_save(c, path));
		CHECK_OK(clp_costs_load(path, &c2));
		CHECK(c2 && c2->stages[0].frozen_bytes == 900, "frozen_bytes round trip");
		clp_costs_free(c2);
	}
	clp_costs_free(c);
}

static void test_costs_errors(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1, \"bwd_s\": 1}, {\"fwd_s\": 1, "
		 "\"bwd_s\": 1}, {\"fwd_s\": 1, \"bwd_s\": 1}, {\"fwd_s\": \"1ms\", \"bwd_s\": 1}]}",
		 "stages[3].fwd_s: expected a number"},
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"bwd_s\": 1}]}",
		 "stages[0].fwd_s: missing"},
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1}]}",
		 "stages[0].bwd_s: missing"},
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1, \"bwd_s\": 2, "
		 "\"bwd_b_s\": 1.5, \"bwd_w_s\": 1}]}", "stages[0]: bwd_b_s + bwd_w_s"},
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1, \"bwd_s\": 2, "
		 "\"devices\": {\"V100\": {\"fwd\": 1}}}]}", "stages[0].devices.V100.fwd: unknown field"},
		{"{\"format\": \"clpipe-costs\", \"stages\": []}", "stages: needs at least one stage"},
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1, \"bwd_s\": 2, "
		 "\"act_bytes\": 1.5}]}", "stages[0].act_bytes: expected an integer"},
		{"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1, \"bwd_s\": 2, "
		 "\"param_bytes\": 10, \"frozen_bytes\": 11}]}",
		 "stages[0].frozen_bytes (11) exceeds param_bytes (10)"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clp_costs *c = NULL;

		CHECK_ERR(clp_costs_load(tmp_file("costs.json", cases[i].text), &c), CLP_ERR_FORMAT,
			  "costs.json: ", cases[i].needle);
		clp_costs_free(c);
	}
}

static void test_layout(void)
{
	clp_cluster *c = NULL;
	clp_layout *l = NULL, *bad = NULL;
	clp_sched *s = NULL;
	clp_gen_opts g;

	clp_gen_opts_default(&g);
	g.depth = 4;
	g.microbatches = 4;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_cluster_load(data("cluster_2x2.json"), &c));
	CHECK_OK(clp_layout_load(data("layout_4.json"), &l));
	if (!s || !c || !l)
		goto out;
	CHECK(l->nranks == 4 && l->ranks[1].nstages == 1 && l->ranks[1].stages[0].stage == 1,
	      "layout fields");
	CHECK_OK(clp_layout_check(l, s, "layout_4.json"));
	CHECK_OK(clp_layout_resolve(l, c, "layout_4.json"));
	CHECK(l->ranks[0].device == 3 && l->ranks[3].device == 0, "devices %d %d",
	      l->ranks[0].device, l->ranks[3].device);
	/* The same schedule with stages swapped: the layout no longer fits. */
	l->ranks[2].stages[0].stage = 1;
	CHECK_ERR(clp_layout_check(l, s, "layout_4.json"), CLP_ERR_INVALID, "layout_4.json: ",
		  "ranks[2]", "stage 2");
	CHECK_OK(clp_layout_load(tmp_file("layout.json",
		"{\"format\": \"clpipe-layout\", \"ranks\": [{\"device\": \"n9:0\", \"stages\": "
		"[{\"stage\": 0}]}]}"), &bad));
	if (bad)
		CHECK_ERR(clp_layout_resolve(bad, c, "layout.json"), CLP_ERR_NOT_FOUND,
			  "layout.json: ranks[0].device: \"n9:0\"");
	clp_layout_free(bad);
	bad = NULL;
	CHECK_ERR(clp_layout_load(tmp_file("layout.json",
		"{\"format\": \"clpipe-layout\", \"ranks\": [{\"device\": \"x\", \"stages\": "
		"[{\"stage\": 0}, {\"stage\": 0}]}]}"), &bad), CLP_ERR_FORMAT,
		  "layout.json: ranks[0].stages[1]: stage 0 pipeline 0 listed twice");
	CHECK_ERR(clp_layout_load(tmp_file("layout.json",
		"{\"format\": \"clpipe-layout\", \"ranks\": [{\"stages\": []}]}"), &bad),
		  CLP_ERR_FORMAT, "layout.json: ranks[0].device: missing");
out:
	clp_layout_free(bad);
	clp_layout_free(l);
	clp_cluster_free(c);
	clp_sched_free(s);
}

/* The layout puts the pipeline's first stages on the slower P100s (speed 0.5): with the cost
 * table's V100 times for the others, the run on the cluster is slower than on free V100s. */
static void test_layout_sim(void)
{
	clp_cluster *c = NULL;
	clp_layout *l = NULL;
	clp_costs *costs = NULL;
	clp_sched *s = NULL;
	clp_gen_opts g;
	clp_sim_opts o;
	clp_sim_result r;

	clp_gen_opts_default(&g);
	g.depth = 4;
	g.microbatches = 8;
	CHECK_OK(clp_sched_generate(&s, &g));
	CHECK_OK(clp_cluster_load(data("cluster_2x2.json"), &c));
	CHECK_OK(clp_layout_load(data("layout_4.json"), &l));
	CHECK_OK(clp_costs_load(data("costs_4.json"), &costs));
	if (!s || !c || !l || !costs)
		goto out;
	CHECK_OK(clp_layout_resolve(l, c, "layout_4.json"));
	clp_sim_opts_default(&o);
	o.costs = costs;
	o.cluster = c;
	o.layout = l;
	if (clp_sim_run(s, &o, &r) == CLP_OK) {
		/* rank 0 runs stage 0 on a P100: forward 0.025 s measured, backward 0.020 / 0.5 */
		near("rank 0 compute", r.ranks[0].compute_s, 8 * (0.025 + 0.040));
		near("rank 1 compute", r.ranks[1].compute_s, 8 * (0.020 + 0.040));
		CHECK(r.ranks[0].device == 3 && r.over_memory == 0, "placement or memory");
		CHECK(r.ranks[0].static_bytes == 2 * 4000000 + 8000000, "static bytes %lld",
		      (long long)r.ranks[0].static_bytes);
		clp_sim_result_free(&r);
	} else {
		CHECK(0, "%s", clp_last_error());
	}
out:
	clp_costs_free(costs);
	clp_layout_free(l);
	clp_cluster_free(c);
	clp_sched_free(s);
}

static void test_profile(void)
{
	clp_profile_opts po = {4, 0, 8, 0, 0};
	clp_costs *c = NULL;
	const double mib = 1024.0 * 1024.0;

	CHECK_OK(clp_costs_from_profile(data("bert-base_time_memory_p100.csv"), &po, &c));
	if (c) {
		/* 12 layers over 4 stages; bs 8 row: time_f 2.734088897705078 ms ... */
		CHECK(c->nstages == 4 && c->stages[0].nlayers == 3 && !strcmp(c->device_kind, "P100"),
		      "shape");
		near("fwd", c->stages[1].t[CLP_COST_FWD], 3 * 2.734088897705078e-3);
		near("bwd", c->stages[1].t[CLP_COST_BWD], 3 * 4.651045799255371e-3);
		near("kfac inv", c->stages[2].t[CLP_COST_KFAC_INV], 3 * 71.64356708526611e-3);
		near("curv a", c->stages[2].t[CLP_COST_KFAC_CURV_A], 3 * 6.80391788482666e-3 / 2);
		CHECK(c->stages[3].act_bytes == (int64_t)(3 * 66.515625 * mib), "act_bytes %lld",
		      (long long)c->stages[3].act_bytes);
		CHECK(c->stages[0].out_bytes == 8LL * 128 * 768 * 4, "out_bytes %lld",
		      (long long)c->stages[0].out_bytes);
		CHECK(c->stages[0].kfac_bytes == (int64_t)(3 * 94.5 * mib), "kfac_bytes");
	}
	clp_costs_free(c);
	c = NULL;
	po.nstages = 5; /* 12 layers: 3, 3, 2, 2, 2 */
	CHECK_OK(clp_costs_from_profile(data("bert-base_time_memory_p100.csv"), &po, &c));
	if (c)
		CHECK(c->stages[1].nlayers == 3 && c->stages[2].nlayers == 2, "uneven split");
	clp_costs_free(c);
	c = NULL;
	po.batch = 3;
	CHECK_ERR(clp_costs_from_profile(data("bert-base_time_memory_p100.csv"), &po, &c),
		  CLP_ERR_NOT_FOUND, "no row for micro-batch size 3", "1, 2, 4, 8, 16, 32, 64");
	po.batch = 8;
	CHECK_ERR(clp_costs_from_profile(tmp_file("mystery_time_memory_x.csv",
		"bs,time_f,time_b,mem_param,mem_act\n8,1,2,3,4\n"), &po, &c), CLP_ERR_INVALID,
		  "unknown model");
	po.nlayers = 8;
	po.seq = 16;
	po.hidden = 32;
	CHECK_OK(clp_costs_from_profile(tmp_file("mystery_time_memory_x.csv",
		"bs,time_f,time_b,mem_param,mem_act\n8,1,2,3,4\n"), &po, &c));
	clp_costs_free(c);
	c = NULL;
	CHECK_ERR(clp_costs_from_profile(tmp_file("mystery_time_memory_x.csv",
		"bs,time_f,time_b,mem_param,mem_act\n8,1,2\n"), &po, &c), CLP_ERR_FORMAT,
		  "line 2: only 3 columns");
	CHECK_ERR(clp_costs_from_profile(tmp_file("mystery_time_memory_x.csv", "bs,time_f\n"),
					 &po, &c), CLP_ERR_FORMAT, "missing column 'time_b'");
}

static void test_calibrate(void)
{
	clp_trace t;
	clp_costs *c = NULL;
	int nset = 0;
	static const clp_trace_event ev[] = {
		{0, 1, 0, CLP_TQ_COMPUTE, 0 /* FWD */, 0, 0, 1, 0, -1, -1},
		{1, 4, 0, CLP_TQ_COMPUTE, 0, 0, 0, 1, 1, -1, -1},
		{4, 6, 0, CLP_TQ_COMPUTE, 2 /* BWD_B */, 0, 0, 1, 0, -1, -1},
		{6, 7, 0, CLP_TQ_COMPUTE, 3 /* BWD_W */, 0, 0, 1, 0, -1, -1},
		{2, 9, 0, CLP_TQ_COMM, 4 /* SEND_ACT */, 0, 0, 1, 0, 1, -1},
	};

	clp_trace_init(&t, 1, 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_OK(clp_trace_push(&t, &ev[i]));
	CHECK_OK(clp_costs_uniform(2, 9, 9, -1, &c));
	if (c) {
		CHECK_OK(clp_costs_calibrate(c, &t, &nset));
		CHECK(nset == 3, "%d times set", nset);
		near("fwd mean", c->stages[1].t[CLP_COST_FWD], 2);
		near("bwd = B + W", c->stages[1].t[CLP_COST_BWD], 3);
		near("stage 0 untouched", c->stages[0].t[CLP_COST_FWD], 9);
	}
	clp_costs_free(c);
	clp_trace_free(&t);
}

/* K-FAC items of a PipeFisher trace: factors per layer and micro-batch, inversions per layer and
 * factor (two holders), events without a layer; they survive the Chrome JSON and add up. */
static void test_calibrate_kfac(void)
{
	enum { A = CLP_OP_KFAC_CURV_A, B = CLP_OP_KFAC_CURV_B, I = CLP_OP_KFAC_INV };
	static const clp_trace_event ev[] = {
		{0, 1, 0, CLP_TQ_COMPUTE, A, 0, 0, 0, 0, -1, 0},  /* layer 0: mean 2 */
		{1, 4, 0, CLP_TQ_COMPUTE, A, 0, 0, 0, 1, -1, 0},
		{4, 8, 0, CLP_TQ_COMPUTE, A, 0, 0, 0, 0, -1, 1},  /* layer 1: 4 -> A = 6 */
		{8, 10, 0, CLP_TQ_COMPUTE, B, 0, 0, 0, 0, -1, -1}, /* no layer: 2 x 2 layers */
		{10, 11, 0, CLP_TQ_COMPUTE, I, 0, 1, 0, -1, -1, 0}, /* factor 1 of layer 0 */
		{10, 11, 1, CLP_TQ_COMPUTE, I, 1, 1, 0, -1, -1, 0}, /* ... on its twin */
		{11, 14, 0, CLP_TQ_COMPUTE, I, 0, 2, 0, -1, -1, 0},
		{14, 15, 0, CLP_TQ_COMPUTE, I, 0, 1, 0, -1, -1, 1},
		{15, 18, 0, CLP_TQ_COMPUTE, I, 0, 2, 0, -1, -1, 1}, /* inversion 8, shares 1:3 */
		{18, 18.5, 0, CLP_TQ_COMPUTE, CLP_OP_KFAC_PRECOND, 0, 0, 0, -1, -1, -1},
	};
	clp_trace t, back;
	clp_costs *c = NULL;
	int nset = 0;
	char path[1024];

	snprintf(path, sizeof(path), "%s/kfac-trace.json", CLP_TEST_TMP);
	clp_trace_init(&t, 2, 0);
	memset(&back, 0, sizeof(back));
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_OK(clp_trace_push(&t, &ev[i]));
	CHECK_OK(clp_trace_write_chrome(&t, path));
	CHECK_OK(clp_trace_read_chrome(path, &back));
	CHECK_OK(clp_costs_uniform(1, 9, 9, -1, &c));
	if (c && back.n == t.n) {
		c->stages[0].nlayers = 2;
		CHECK_OK(clp_costs_calibrate(c, &back, &nset));
		CHECK(nset == 4, "%d times set", nset);
		near("factors A: sum of the layers' means", c->stages[0].t[CLP_COST_KFAC_CURV_A], 6);
		near("factors B: mean x layers", c->stages[0].t[CLP_COST_KFAC_CURV_B], 4);
		near("inversion: sum over layers and factors", c->stages[0].t[CLP_COST_KFAC_INV], 8);
		near("preconditioning: per step", c->stages[0].t[CLP_COST_KFAC_PRECOND], 0.5);
		CHECK(c->kfac_nfactors == 2, "%d factors", c->kfac_nfactors);
		near("share of factor 1", c->kfac_share[0], 0.25);
		near("share of factor 2", c->kfac_share[1], 0.75);
	} else {
		CHECK(0, "read %zu of %zu events back", back.n, t.n);
	}
	clp_costs_free(c);
	clp_trace_free(&t);
	clp_trace_free(&back);
}

/* A split cycle's trace: an inversion in three phases counts once (their sum), preconditioning
 * per layer on its owner adds up to the stage's, through the Chrome JSON. */
static void test_calibrate_split(void)
{
	enum { I = CLP_OP_KFAC_INV, P = CLP_OP_KFAC_PRECOND };
	static const clp_trace_event ev[] = {
		{0, 1, 0, CLP_TQ_COMPUTE, I, 0, 1, 0, 0, -1, 0},   /* layer 0, factor 1, phase 0 */
		{1, 2, 0, CLP_TQ_COMPUTE, I, 0, 1, 0, 1, -1, 0},   /* phase 1 */
		{2, 4, 0, CLP_TQ_COMPUTE, I, 0, 1, 0, 2, -1, 0},   /* phase 2: 4 in all */
		{0, 4, 1, CLP_TQ_COMPUTE, I, 1, 1, 0, -1, -1, 1},  /* layer 1 whole, on the twin */
		{4, 4.2, 0, CLP_TQ_COMPUTE, P, 0, 0, 0, -1, -1, 0}, /* layer 0: mean 0.25 */
		{5, 5.3, 0, CLP_TQ_COMPUTE, P, 0, 0, 0, -1, -1, 0},
		{4, 4.5, 1, CLP_TQ_COMPUTE, P, 1, 0, 0, -1, -1, 1}, /* layer 1: 0.5 */
	};
	clp_trace t, back;
	clp_costs *c = NULL;
	int nset = 0;
	char path[1024];

	snprintf(path, sizeof(path), "%s/kfac-split-trace.json", CLP_TEST_TMP);
	clp_trace_init(&t, 2, 0);
	memset(&back, 0, sizeof(back));
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_OK(clp_trace_push(&t, &ev[i]));
	CHECK_OK(clp_trace_write_chrome(&t, path));
	CHECK_OK(clp_trace_read_chrome(path, &back));
	CHECK_OK(clp_costs_uniform(1, 9, 9, -1, &c));
	if (c && back.n == t.n) {
		c->stages[0].nlayers = 2;
		CHECK_OK(clp_costs_calibrate(c, &back, &nset));
		CHECK(nset == 2, "%d times set", nset);
		near("inversion: phases add up", c->stages[0].t[CLP_COST_KFAC_INV], 8);
		near("preconditioning: the layers add up", c->stages[0].t[CLP_COST_KFAC_PRECOND],
		     0.75);
	} else {
		CHECK(0, "read %zu of %zu events back", back.n, t.n);
	}
	clp_costs_free(c);
	clp_trace_free(&t);
	clp_trace_free(&back);
}

TH_MAIN(TH_TEST(test_cluster), TH_TEST(test_cluster_errors), TH_TEST(test_costs),
	TH_TEST(test_costs_errors), TH_TEST(test_layout), TH_TEST(test_layout_sim),
	TH_TEST(test_profile), TH_TEST(test_calibrate), TH_TEST(test_calibrate_kfac),
	TH_TEST(test_calibrate_split))
