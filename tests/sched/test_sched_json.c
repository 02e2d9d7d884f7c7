/* Schedules as JSON: golden op lists for D = 4 (tests/sched/data, written by
 * `clpipe sim --schedule K --stages 4 --microbatches 8 [--chunks 2] --write-schedule F`), save and
 * load round trips, and messages for broken files that name the file and the field. */
#include <stdio.h>
#include <string.h>

#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "tests/harness.h"

static clp_sched *gen(int kind, int d, int n, int v, int r)
{
	clp_gen_opts g;
	clp_sched *s = NULL;

	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = d;
	g.microbatches = n;
	g.chunks = v;
	g.replicas = r;
	CHECK_OK(clp_sched_generate(&s, &g));
	return s;
}

static void test_golden_d4(void)
{
	for (int k = 0; k < CLP_SCHED_KIND_COUNT; k++) {
		char path[1024];
		clp_sched *want = NULL, *got = gen(k, 4, 8, k == CLP_SCHED_INTERLEAVED ? 2 : 1, 1);

		snprintf(path, sizeof(path), "%s/golden_%s_d4.json", CLP_TEST_DATA,
			 clp_sched_kind_name(k));
		CHECK_OK(clp_sched_load(path, &want));
		if (want && got) {
			CHECK(clp_sched_compare(got, want) == CLP_OK, "%s: %s", path, clp_last_error());
			CHECK(clp_sched_validate(want, 1) == CLP_OK, "%s: %s", path, clp_last_error());
		}
		clp_sched_free(want);
		clp_sched_free(got);
	}
}

static void test_round_trip(void)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/round_trip.json", CLP_TEST_TMP);
	for (int k = 0; k < CLP_SCHED_KIND_COUNT; k++) {
		clp_sched *a = gen(k, 4, 16, k == CLP_SCHED_INTERLEAVED ? 3 : 1, 2), *b = NULL;

		if (!a)
			continue;
		CHECK_OK(clp_sched_repeat(a, 2));
		CHECK_OK(clp_sched_save(a, path));
		CHECK_OK(clp_sched_load(path, &b));
		if (b) {
			CHECK(clp_sched_compare(a, b) == CLP_OK, "%s: %s", clp_sched_kind_name(k),
			      clp_last_error());
			CHECK(b->nsteps == 2 && b->nreplicas == 2 && !strcmp(a->name, b->name),
			      "%s: header not kept", clp_sched_kind_name(k));
			CHECK(clp_sched_validate(b, 1) == CLP_OK, "%s: %s", clp_sched_kind_name(k),
			      clp_last_error());
		}
		clp_sched_free(a);
		clp_sched_free(b);
	}
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL, "cannot write %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_broken_files(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{"{\"format\":\"clpipe-schedule\",\"ranks\":1,\"stages\":1,\"microbatches\":1,"
		 "\"programs\":[{\"ops\":[{\"op\":\"FWD\",\"stage\":\"0\"}]}]}",
		 "programs[0].ops[0].stage: expected an integer"},
		{"{\"format\":\"clpipe-schedule\",\"ranks\":1,\"stages\":1,\"microbatches\":1,"
		 "\"programs\":[{\"ops\":[{\"op\":\"FWDX\"}]}]}",
		 "programs[0].ops[0].op: unknown op \"FWDX\""},
		{"{\"format\":\"clpipe-schedule\",\"ranks\":2,\"stages\":1,\"microbatches\":1,"
		 "\"programs\":[{\"ops\":[]}]}", "programs: 1 entries for 2 ranks"},
		{"{\"format\":\"clpipe-schedule\",\"stages\":1,\"microbatches\":1,\"programs\":[]}",
		 "ranks: missing"},
		{"{\"format\":\"clpipe-costs\"}", "format: expected \"clpipe-schedule\""},
		{"{\"format\":\"clpipe-schedule\",\"ranks\":1,\"stages\":1,\"microbatches\":1,"
		 "\"programs\":[{\"ops\":[{\"op\":\"SEND_ACT\",\"stage\":0,\"mb\":0}]}]}",
		 "programs[0].ops[0].peer: missing"},
		{"{\"format\":\"clpipe-schedule\",\"ranks\":1,\"stages\":1,\"microbatches\":1,"
		 "\"programs\":[{\"ops\":[{\"op\":\"FWD\",\"stage\":0,\"mbs\":0}]}]}",
		 "programs[0].ops[0].mbs: unknown field"},
		{"{\"format\":\"clpipe-schedule\",\"ranks\":1,", "line 1"},
	};
	char path[1024];

	snprintf(path, sizeof(path), "%s/broken.json", CLP_TEST_TMP);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clp_sched *s = NULL;

		write_file(path, cases[i].text);
		CHECK_ERR(clp_sched_load(path, &s), CLP_ERR_FORMAT, "broken.json", cases[i].needle);
		CHECK(s == NULL, "case %zu: a schedule came back", i);
	}
	CHECK_ERR(clp_sched_load("/nonexistent/s.json", &(clp_sched *){NULL}), CLP_ERR_IO,
		  "/nonexistent/s.json");
}

/* A hand-written schedule (tags left out: they default from the op) validates and runs. */
static void test_hand_written(void)
{
	char path[1024];
	clp_sched *s = NULL;

	snprintf(path, sizeof(path), "%s/hand.json", CLP_TEST_TMP);
	write_file(path, "{\"format\": \"clpipe-schedule\", \"ranks\": 2, \"stages\": 2, "
			 "\"microbatches\": 1, \"programs\": ["
			 "{\"ops\": [{\"op\": \"FWD\", \"stage\": 0, \"mb\": 0},"
			 "{\"op\": \"SEND_ACT\", \"stage\": 0, \"mb\": 0, \"peer\": 1},"
			 "{\"op\": \"RECV_GRAD\", \"stage\": 0, \"mb\": 0, \"peer\": 1},"
			 "{\"op\": \"BWD\", \"stage\": 0, \"mb\": 0}]},"
			 "{\"ops\": [{\"op\": \"RECV_ACT\", \"stage\": 1, \"mb\": 0, \"peer\": 0},"
			 "{\"op\": \"FWD\", \"stage\": 1, \"mb\": 0},"
			 "{\"op\": \"BWD\", \"stage\": 1, \"mb\": 0},"
			 "{\"op\": \"SEND_GRAD\", \"stage\": 1, \"mb\": 0, \"peer\": 0}]}]}\n");
	CHECK_OK(clp_sched_load(path, &s));
	if (s)
		CHECK(clp_sched_validate(s, 1) == CLP_OK, "%s", clp_last_error());
	clp_sched_free(s);
}

TH_MAIN(TH_TEST(test_golden_d4), TH_TEST(test_round_trip), TH_TEST(test_broken_files),
	TH_TEST(test_hand_written))
