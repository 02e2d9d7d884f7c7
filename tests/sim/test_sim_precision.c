/* The storage precision in the cost table and the simulator (issue 18): a 16-bit table's messages
 * between stages are half an fp32 table's bytes, so on a link-bound pipeline the step shortens by
 * exactly the halved transfer times; the 16-bit weight copy adds to each rank's static memory;
 * the table's `precision` survives a save and load, a file without it is fp32, and a bad value
 * names the file and the field. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

static void near(const char *what, double got, double want)
{
	CHECK(fabs(got - want) <= 1e-9 * fabs(want) + 1e-12, "%s: got %.12g, want %.12g", what,
	      got, want);
}

static const char *tmp_file(const char *name, const char *text)
{
	static char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", CLP_TEST_TMP, name);
	f = fopen(path, "w");
	CHECK(f != NULL, "cannot write %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

/* Sizes convert by the element size: fp32 -> bf16 halves, back doubles, bf16 <-> fp16 keeps. */
static void test_convert(void)
{
	clp_costs *c = NULL;

	CHECK_OK(clp_costs_uniform(2, 1, 2, -1, &c));
	if (!c)
		return;
	CHECK(c->precision == CLP_F32, "a new table is fp32");
	c->stages[0].out_bytes = 4 * 1000003;
	c->stages[0].act_bytes = 4 * 777;
	c->stages[0].act_w_bytes = 4 * 333;
	c->stages[0].param_bytes = 4000;
	CHECK(clp_costs_wcopy_bytes(c, 0) == 0, "fp32: no 16-bit weight copy");
	clp_costs_set_precision(c, CLP_BF16);
	CHECK(c->precision == CLP_BF16 && c->stages[0].out_bytes == 2 * 1000003 &&
	      c->stages[0].act_bytes == 2 * 777 && c->stages[0].act_w_bytes == 2 * 333,
	      "fp32 -> bf16: out %lld act %lld act_w %lld", (long long)c->stages[0].out_bytes,
	      (long long)c->stages[0].act_bytes, (long long)c->stages[0].act_w_bytes);
	CHECK(c->stages[0].param_bytes == 4000 && c->stages[0].opt_bytes == 0,
	      "masters and optimizer state stay fp32");
	CHECK(clp_costs_wcopy_bytes(c, 0) == 2000 && clp_costs_wcopy_bytes(c, 1) == 0 &&
	      clp_costs_wcopy_bytes(c, 2) == 0, "16-bit copy: half the fp32 parameters");
	clp_costs_set_precision(c, CLP_F16);
	CHECK(c->stages[0].out_bytes == 2 * 1000003, "bf16 -> fp16 keeps the size");
	clp_costs_set_precision(c, CLP_F32);
	CHECK(c->precision == CLP_F32 && c->stages[0].out_bytes == 4 * 1000003 &&
	      c->stages[0].act_bytes == 4 * 777, "fp16 -> fp32 doubles");
	clp_costs_free(c);
}

/* Two ranks on two hosts joined by a slow link, one micro-batch: the activation and its gradient
 * each cross the link once on the critical path, so the step is compute + 2 (latency +
 * bytes / bandwidth), and a bf16 table saves exactly bytes / bandwidth. */
static void test_link_bound(void)
{
	const double bw = 1e8, lat = 1e-3, tf = 0.01, tb = 0.02;
	const int64_t out = 64 << 20, params = 1 << 20;
	clp_cluster *cl = NULL;
	clp_gen_opts g;
	clp_sched *s = NULL;
	clp_costs *c = NULL;
	clp_sim_opts o;
	clp_sim_result r[3];
	const clp_dtype prec[3] = {CLP_F32, CLP_BF16, CLP_F16};

	memset(r, 0, sizeof(r));
	CHECK_OK(clp_cluster_load(tmp_file("prec_cluster.json",
		"{\"format\": \"clpipe-cluster\", \"defaults\": {\"inter_host\": "
		"{\"latency_s\": 1e-3, \"bandwidth_Bps\": 1e8}, \"eager_bytes\": 0},"
		"\"hosts\": [{\"name\": \"a\", \"devices\": [{\"memory_bytes\": 17179869184}]},"
		"{\"name\": \"b\", \"devices\": [{\"memory_bytes\": 17179869184}]}]}"), &cl));
	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_GPIPE;
	g.depth = 2;
	g.microbatches = 1;
	CHECK_OK(clp_sched_generate(&s, &g));
	if (!cl || !s)
		goto out;
	for (int k = 0; k < 3; k++) {
		CHECK_OK(clp_costs_uniform(2, tf, tb, -1, &c));
		if (!c)
			goto out;
		for (int st = 0; st < 2; st++) {
			c->stages[st].out_bytes = out;
			c->stages[st].act_bytes = c->stages[st].act_w_bytes = out;
			c->stages[st].param_bytes = params;
			c->stages[st].opt_bytes = 2 * params;
		}
		clp_costs_set_precision(c, prec[k]);
		clp_sim_opts_default(&o);
		o.costs = c;
		o.cluster = cl;
		CHECK_OK(clp_sim_run(s, &o, &r[k]));
		clp_costs_free(c);
		c = NULL;
	}
	near("fp32 step", r[0].step_s, 2 * (tf + tb) + 2 * (lat + (double)out / bw));
	for (int k = 1; k < 3; k++) {
		const char *n = clp_dtype_name(prec[k]);

		CHECK(r[k].msg_bytes * 2 == r[0].msg_bytes && r[0].msg_bytes == 2 * out,
		      "%s: message bytes %lld, fp32 %lld", n, (long long)r[k].msg_bytes,
		      (long long)r[0].msg_bytes);
		near(n, r[k].step_s, 2 * (tf + tb) + 2 * (lat + (double)out / 2 / bw));
		near("saving", r[0].step_s - r[k].step_s, (double)out / bw);
		if (r[k].nranks == 2 && r[0].nranks == 2)
			for (int i = 0; i < 2; i++)
				CHECK(r[k].ranks[i].static_bytes ==
					      r[0].ranks[i].static_bytes + params / 2,
				      "%s rank %d: static %lld, fp32 %lld + a 16-bit copy of %lld", n,
				      i, (long long)r[k].ranks[i].static_bytes,
				      (long long)r[0].ranks[i].static_bytes, (long long)params / 2);
	}
out:
	for (int k = 0; k < 3; k++)
		clp_sim_result_free(&r[k]);
	clp_costs_free(c);
	clp_sched_free(s);
	clp_cluster_free(cl);
}

static void test_table_field(void)
{
	clp_costs *c = NULL, *c2 = NULL;
	char path[1024];

	CHECK_OK(clp_costs_load(tmp_file("prec_old.json",
		"{\"format\": \"clpipe-costs\", \"stages\": [{\"fwd_s\": 1, \"bwd_s\": 2, "
		"\"out_bytes\": 4096}]}"), &c));
	CHECK(c && c->precision == CLP_F32, "a table without precision reads as fp32");
	if (!c)
		return;
	c->precision = CLP_BF16;
	snprintf(path, sizeof(path), "%s/prec_rt.json", CLP_TEST_TMP);
	CHECK_OK(clp_costs_save(c, path));
	CHECK_OK(clp_costs_load(path, &c2));
	CHECK(c2 && c2->precision == CLP_BF16 && c2->stages[0].out_bytes == 4096,
	      "round trip keeps bf16 and the sizes as written");
	clp_costs_free(c2);
	c2 = NULL;
	c->precision = CLP_F16;
	CHECK_OK(clp_costs_save(c, path));
	CHECK_OK(clp_costs_load(path, &c2));
	CHECK(c2 && c2->precision == CLP_F16, "round trip keeps fp16");
	clp_costs_free(c2);
	c2 = NULL;
	CHECK_ERR(clp_costs_load(tmp_file("prec_bad.json",
		"{\"format\": \"clpipe-costs\", \"precision\": \"fp8\", \"stages\": [{\"fwd_s\": 1, "
		"\"bwd_s\": 2}]}"), &c2), CLP_ERR_FORMAT, "prec_bad.json", "precision", "fp8");
	clp_costs_free(c2);
	CHECK_ERR(clp_costs_precision_parse("half", "--precision", &c->precision), CLP_ERR_INVALID,
		  "--precision", "half", "fp32, bf16 or fp16");
	clp_costs_free(c);
}

TH_MAIN(TH_TEST(test_convert), TH_TEST(test_link_bound), TH_TEST(test_table_field))
