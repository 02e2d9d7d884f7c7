/* Regression tests for the faults a seeded mutation run found in the readers (issue 14), each
 * holding the input that found it: cost-table byte fields near INT64_MAX, configs and tables that
 * are directories, FIFOs or /dev/zero, an hwloc XML file whose importer crashes, and a model of
 * 10,000 layers whose construction used to be quadratic. Every one must end in a message that
 * names the file and, where there is one, the field. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/io/checkpoint.h"
#include "engine/io/config.h"
#include "engine/scenario/costs.h"
#include "engine/model/model.h"
#include "engine/plan/plan.h"
#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "engine/skip/skip.h"
#include "engine/sim/sim.h"
#include "topology/discover.h"
#include "tests/harness.h"

static const char *tmp_path(const char *name)
{
	static char buf[4][1024];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", CLP_TEST_TMP, name);
	return buf[k];
}

static const char *write_tmp(const char *name, const char *text)
{
	const char *p = tmp_path(name);
	FILE *f = fopen(p, "w");

	CHECK(f != NULL, "cannot write %s", p);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return p;
}

/* A FIFO with no writer: a reader that opened it blocking would wait here for ever (ctest's
 * timeout would then fail the test). */
static const char *make_fifo(const char *name)
{
	const char *p = tmp_path(name);

	unlink(p);
	CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
	return p;
}

static const char *costs_with(const char *name, const char *param_bytes)
{
	static char text[1024];

	snprintf(text, sizeof(text),
		 "{\"format\": \"clpipe-costs\", \"version\": 1, \"stages\": ["
		 "{\"fwd_s\": 1, \"bwd_s\": 2, \"act_bytes\": 10, \"param_bytes\": %s},"
		 "{\"fwd_s\": 1, \"bwd_s\": 2, \"act_bytes\": 10, \"param_bytes\": %s}]}",
		 param_bytes, param_bytes);
	return write_tmp(name, text);
}

/* param_bytes 2^63-1 overflowed in sim_model.c (2 x param_bytes), 2^62 in costs.c (the default
 * opt_bytes = 2 x param_bytes); the release build went on with negative memory. */
static void test_costs_byte_fields(void)
{
	clp_costs *c = NULL;
	const char *p;

	p = costs_with("max.json", "9223372036854775807");
	CHECK_ERR(clp_costs_load(p, &c), CLP_ERR_FORMAT, p, "stages[0].param_bytes",
		  "out of range");
	p = costs_with("2e62.json", "4611686018427387904");
	CHECK_ERR(clp_costs_load(p, &c), CLP_ERR_FORMAT, p, "stages[0].param_bytes");
	CHECK(c == NULL, "no table on failure");

	/* the largest accepted value on every stage of a long pipeline: the simulator's totals
	 * stay exact or saturate, never wrap (UBSan would stop here) */
	{
		char big[64];
		clp_gen_opts g;
		clp_sched *s = NULL;
		clp_sim_opts o;
		clp_sim_result r;

		snprintf(big, sizeof(big), "%lld", (long long)CLP_COST_MAX_BYTES);
		p = costs_with("pib.json", big);
		CHECK_OK(clp_costs_load(p, &c));
		if (!c)
			return;
		CHECK(c->stages[1].opt_bytes == 2 * CLP_COST_MAX_BYTES, "opt_bytes default");
		clp_gen_opts_default(&g);
		g.kind = CLP_SCHED_GPIPE;
		g.depth = 2;
		g.microbatches = 64;
		CHECK_OK(clp_sched_generate(&s, &g));
		clp_sim_opts_default(&o);
		o.costs = c;
		if (s && clp_sim_run(s, &o, &r) == CLP_OK) {
			CHECK(r.ranks[0].static_bytes == 4 * CLP_COST_MAX_BYTES, "static %lld",
			      (long long)r.ranks[0].static_bytes);
			CHECK(r.ranks[0].peak_bytes > r.ranks[0].static_bytes, "peak %lld",
			      (long long)r.ranks[0].peak_bytes);
			clp_sim_result_free(&r);
		} else {
			CHECK(0, "sim: %s", clp_last_error());
		}
		clp_sched_free(s);
		clp_costs_free(c);
	}
}

/* The profile importer turned any number into bytes with an unchecked cast. */
static void test_profile_numbers(void)
{
	clp_profile_opts o = {2, 4, 8, 128, 768};
	clp_costs *c = NULL;
	const char *p = write_tmp("prof.csv", "bs,time_f,time_b,mem_param,mem_act\n"
					      "8,1,2,1e300,3\n");

	CHECK_ERR(clp_costs_from_profile(p, &o, &c), CLP_ERR_FORMAT, p, "line 2", "1e+300");
}

typedef struct {
	int n;
} cfg_t;

/* A directory as a config asked for 2^63 bytes (ftell of a directory); /dev/zero read as an
 * empty config; a FIFO blocked. */
static void test_special_files(void)
{
	static const clp_cfg_field fields[] = {
		{"a.n", CLP_CFG_INT, offsetof(cfg_t, n), sizeof(int), "1", "a number", 0, 10, NULL},
	};
	const clp_cfg_schema schema = {"test", fields, 1, 0};
	cfg_t d = {0};
	clp_costs *c = NULL;
	clp_topo_host h;
	const char *fifo = make_fifo("fifo");

	CHECK_ERR(clp_cfg_load_file(&schema, &d, CLP_TEST_TMP), CLP_ERR_IO, CLP_TEST_TMP,
		  "not a regular file (a directory)");
	CHECK_ERR(clp_cfg_load_file(&schema, &d, "/dev/zero"), CLP_ERR_IO, "/dev/zero",
		  "character device");
	CHECK_ERR(clp_cfg_load_file(&schema, &d, fifo), CLP_ERR_IO, fifo, "a FIFO");
	CHECK_ERR(clp_costs_load(fifo, &c), CLP_ERR_IO, fifo, "a FIFO");
	CHECK_ERR(clp_costs_load("/dev/zero", &c), CLP_ERR_IO, "/dev/zero");
	CHECK_ERR(clp_topo_discover("/dev/zero", NULL, 0, &h), CLP_ERR_IO, "/dev/zero",
		  "not a regular file");
	CHECK_ERR(clp_topo_discover(fifo, NULL, 0, &h), CLP_ERR_IO, fifo, "a FIFO");
	CHECK_ERR(clp_topo_discover(CLP_TEST_TMP, NULL, 0, &h), CLP_ERR_IO, "a directory");
	unlink(fifo);
	{
		/* a FIFO named manifest.json in a step directory: skipped as no manifest, never
		 * opened (opening a FIFO blocks until a writer comes) */
		const char *root = tmp_path("fifo_ckpt"), *step = tmp_path("fifo_ckpt/step-00000001");
		char man[1024];
		clp_ckpt *ck = NULL;

		mkdir(root, 0700);
		mkdir(step, 0700);
		snprintf(man, sizeof(man), "%s/manifest.json", step);
		unlink(man);
		CHECK(mkfifo(man, 0600) == 0, "mkfifo %s", man);
		CHECK_ERR(clp_ckpt_open_latest(&ck, root), CLP_ERR_NOT_FOUND, "step-00000001",
			  "no manifest.json");
		clp_ckpt_close(ck);
		unlink(man);
	}
}

/* A PU whose complete_cpuset is ",0x00001000": hwloc 2.9's importer aborts on it
 * (hwloc_bitmap_sscanf: Assertion `count > 0'), and took clpipe with it. The good original loads. */
static void test_hwloc_importer_crash(void)
{
	clp_topo_host h;
	const char *bad = CLP_TEST_DATA "/hwloc_pu_bad_cpuset.xml";

	CHECK_ERR(clp_topo_discover(bad, NULL, 0, &h), CLP_ERR_FORMAT, bad,
		  "hwloc's XML importer", "the file is damaged");
	CHECK_OK(clp_topo_discover(CLP_TEST_DATA "/../../topology/data/"
				   "32em64t-2n8c2t-pci-normalio.xml", NULL, 0, &h));
	clp_topo_host_clear(&h);
}

/* --model.n_layer=10000 spent minutes in clp_param_find (a linear search per tensor); its
 * 120,000 tensors must each be found where they are. */
static void test_many_layers(void)
{
	clp_model_config m;
	clp_param_table t;
	int bad = 0;

	memset(&m, 0, sizeof(m));
	m.preset = CLP_PRESET_GPT2;
	m.ctx = 8;
	m.n_layer = 10000;
	m.d_model = 8;
	m.n_head = 2;
	m.vocab = 16;
	CHECK_OK(clp_model_config_resolve(&m));
	CHECK_OK(clp_param_table_build(&m, 0, m.n_layer + 1, &t));
	CHECK(t.ntensors > 65536, "%d tensors", t.ntensors);
	for (int i = 0; i < t.ntensors; i++)
		bad += clp_param_find(&t, t.tensors[i].name) != i;
	CHECK(bad == 0, "%d tensors not found at their index", bad);
	CHECK(clp_param_find(&t, "h.10000.ln_1.weight") == -1, "absent name");
	clp_param_table_free(&t);
}

/* The largest sizes the flags allow (d_ff 2^22, batch x seq 2^40 tokens, 10,000 layers) would
 * wrap the memory model's sums; it refuses them instead (UBSan holds it to that). */
static void test_memory_model_bounds(void)
{
	clp_model_config m;
	clp_model_mem pm;

	memset(&m, 0, sizeof(m));
	m.preset = CLP_PRESET_LLAMA;
	m.n_layer = 10000;
	m.d_model = 1 << 12;
	m.n_head = 1 << 10;
	m.d_ff = 1 << 22;
	m.vocab = 1 << 20;
	m.ctx = 1 << 20;
	CHECK_ERR(clp_model_stage_mem(&m, 0, m.n_layer + 1, (size_t)1 << 20, (size_t)1 << 20, 1, 0,
				     &pm),
		  CLP_ERR_NOMEM, "model.d_ff = 4194304", "more than 2^57 bytes");
	m.n_layer = 4; /* a small model still gets its exact figures */
	m.d_model = 64;
	m.n_head = 4;
	m.d_ff = 0;
	m.vocab = 256;
	m.ctx = 32;
	CHECK_OK(clp_model_stage_mem(&m, 0, 5, 2, 32, 0, 0, &pm));
	CHECK(pm.param_bytes > 0 && pm.opt_bytes == 2 * pm.param_bytes, "param %lld",
	      (long long)pm.param_bytes);
}

/* Checks made after parsing name the file the value came from: the cost table against the
 * schedule in the simulator, a schedule file's validation, SkipPipe path rules, and a model
 * setting checked against another (which config file line or flag set each). */
static void test_messages_name_files(void)
{
	clp_gen_opts g;
	clp_sched *s = NULL, *t = NULL;
	clp_costs *c = NULL;
	clp_sim_opts o;
	clp_sim_result r;
	const char *sp = tmp_path("sched_2.json"), *cp;

	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_1F1B;
	g.depth = 2;
	g.microbatches = 4;
	CHECK_OK(clp_sched_generate(&s, &g));
	if (!s)
		return;
	CHECK_OK(clp_sched_save(s, sp));
	CHECK_OK(clp_sched_load(sp, &t));
	cp = costs_with("costs_2of3.json", "1");
	CHECK_OK(clp_costs_load(cp, &c));
	if (t && c) {
		c->nstages = 3; /* as if the table had three stages */
		clp_sim_opts_default(&o);
		o.costs = c;
		CHECK_ERR(clp_sim_run(t, &o, &r), CLP_ERR_INVALID, "the cost table (", cp,
			  "has 3 stages, the schedule (", sp);
		c->nstages = 2;
		/* a send whose micro-batch no receive expects */
		for (int i = 0; i < t->ranks[0].nops; i++)
			if (t->ranks[0].ops[i].kind == CLP_OP_SEND_ACT) {
				t->ranks[0].ops[i].mb = 3 - t->ranks[0].ops[i].mb;
				break;
			}
		CHECK_ERR(clp_sched_validate(t, 1), CLP_ERR_INVALID, sp, "(1f1b)");
	}
	clp_costs_free(c);
	clp_sched_free(t);
	clp_sched_free(s);
	{
		clp_skip_paths *p = NULL;
		clp_skip_rules rules;
		const char *bad = CLP_TEST_DATA "/../../skip/data/bad_jump_paths.json";

		CHECK_OK(clp_skip_load(bad, &p, &rules));
		if (p)
			CHECK_ERR(clp_skip_validate(&rules, p), CLP_ERR_INVALID, "skip paths",
				  "bad_jump_paths.json", "mb 1");
		clp_skip_paths_free(p);
		p = NULL;
		/* the fuzzing run's skip_paths-00560: a rule out of range in the file */
		bad = write_tmp("p65536.json",
				"{\"format\": \"clpipe-skip-paths\", \"version\": 1, \"stages\": 3,"
				"\"rules\": {\"path_len\": 65536, \"max_jump\": 4},"
				"\"nodes\": [{\"node\": 0, \"stage\": 0}, {\"node\": 1, \"stage\": 1},"
				"{\"node\": 2, \"stage\": 2}],"
				"\"microbatches\": [{\"mb\": 0, \"origin\": 0, \"hops\": [[1, 1]]}]}");
		CHECK_OK(clp_skip_load(bad, &p, &rules));
		if (p)
			CHECK_ERR(clp_skip_validate(&rules, p), CLP_ERR_INVALID, bad,
				  "path length P = 65536");
		clp_skip_paths_free(p);
	}
	{
		typedef struct {
			long a, b;
			clp_cfg_origin origin[2];
		} two;
		static const clp_cfg_field f2[] = {
			{"m.a", CLP_CFG_INT, offsetof(two, a), sizeof(long), "1", "", 0, 100, NULL},
			{"m.b", CLP_CFG_INT, offsetof(two, b), sizeof(long), "1", "", 0, 100, NULL},
		};
		const clp_cfg_schema sch = {"two", f2, 2, offsetof(two, origin)};
		two v;
		const char *cf = write_tmp("two.toml", "[m]\n\na = 64\n");
		char arg0[] = "x", arg1[] = "--m.b=3", arg2[] = "--config", *arg3 = (char *)cf;
		char *argv[] = {arg0, arg1, arg2, arg3, NULL};
		int argc = 4;

		CHECK_OK(clp_cfg_defaults(&sch, &v));
		CHECK_OK(clp_cfg_args(&sch, &v, &argc, argv));
		CHECK(v.a == 64 && v.b == 3, "a %ld b %ld", v.a, v.b);
		CHECK_ERR(clp_cfg_name_origins(&sch, &v, clp_error(CLP_ERR_INVALID, "m.a = 64 is not a "
							   "multiple of m.b = 3")),
			  CLP_ERR_INVALID, "m.a from ", "two.toml:3", "m.b from command line --m.b");
		CHECK(strstr(clp_cfg_origin_of(&sch, &v, "m.a"), "two.toml") &&
		      !clp_cfg_origin_of(&sch, &v, "m.c")[0], "origin");
	}
}

TH_MAIN(TH_TEST(test_messages_name_files), TH_TEST(test_memory_model_bounds), TH_TEST(test_costs_byte_fields), TH_TEST(test_profile_numbers),
	TH_TEST(test_special_files), TH_TEST(test_hwloc_importer_crash),
	TH_TEST(test_many_layers))
