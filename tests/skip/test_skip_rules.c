/* SkipPipe rules, JSON and lowering: every rule of the validator with a failing case and the
 * message naming the micro-batch and the rule; configurations that cannot be balanced; the JSON
 * form round trip and its error messages; a path set as the IR, accepted by the IR validator
 * (with its dry run), written and read back, with a layout that matches it. */
#include <stdio.h>
#include <string.h>

#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "engine/skip/skip.h"
#include "tests/harness.h"

/* S = 4 (stages 0..3); nodes 0, 1 on stage 0, node 2 on 1, 3 on 2, 4 on 3; P = 3; three
 * micro-batches: each later stage visited twice. */
static const int base_stage[5] = {0, 0, 1, 2, 3};
static const int base_origin[3] = {0, 1, 0};
static const clp_skip_hop base_hops[3][2] = {{{1, 2}, {2, 3}}, {{2, 3}, {3, 4}}, {{1, 2}, {3, 4}}};

static clp_skip_paths *base(clp_skip_rules *r)
{
	clp_skip_paths *p = NULL;

	clp_skip_rules_default(r, 4);
	r->path_len = 3;
	r->max_swaps = 1;
	r->memory = 2;
	CHECK_OK(clp_skip_paths_create(&p, 4, 5, 3));
	if (!p)
		return NULL;
	memcpy(p->node_stage, base_stage, sizeof(base_stage));
	for (int m = 0; m < 3; m++) {
		p->origin[m] = base_origin[m];
		CHECK_OK(clp_skip_set_hops(p, m, base_hops[m], 2));
	}
	return p;
}

static void set(clp_skip_paths *p, int mb, int s0, int n0, int s1, int n1)
{
	clp_skip_hop h[2] = {{s0, n0}, {s1, n1}};

	CHECK_OK(clp_skip_set_hops(p, mb, h, 2));
}

static void test_valid(void)
{
	clp_skip_rules r;
	clp_skip_paths *p = base(&r);

	if (!p)
		return;
	CHECK(clp_skip_validate(&r, p) == CLP_OK, "%s", clp_last_error());
	CHECK(clp_skip_mb_of_origin(p, 0) == 2 && clp_skip_mb_of_origin(p, 1) == 1,
	      "micro-batches per origin");
	/* A swap of two adjacent stages within W = 1 is fine, and so is the reverse order. */
	set(p, 0, 2, 3, 1, 2);
	CHECK(clp_skip_validate(&r, p) == CLP_OK, "%s", clp_last_error());
	clp_skip_paths_free(p);
}

static void test_each_rule(void)
{
	clp_skip_rules r;
	clp_skip_paths *p;

	p = base(&r);
	p->origin[1] = 2;
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 1 (origin node 2)", "rule origin");
	clp_skip_paths_free(p);

	p = base(&r);
	set(p, 2, 0, 0, 3, 4);
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 2", "rule origin: hop 0 visits "
		  "stage 0");
	clp_skip_paths_free(p);

	p = base(&r);
	CHECK_OK(clp_skip_set_hops(p, 1, base_hops[1], 1));
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 1", "rule path_len (P = 3)",
		  "visits 1 stages");
	clp_skip_paths_free(p);

	p = base(&r);
	set(p, 0, 1, 2, 1, 2);
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 0", "rule no_repeat");
	clp_skip_paths_free(p);

	p = base(&r);
	set(p, 0, 1, 3, 2, 3);
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 0", "node 3 serves stage 2, not 1");
	clp_skip_paths_free(p);

	p = base(&r);
	r.max_jump = 1;
	r.balance = 0; /* else the configuration is refused first (stage 3 out of reach) */
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 1 (origin node 1)",
		  "rule max_jump (J = 1): hop 0 goes to stage 2");
	clp_skip_paths_free(p);

	p = base(&r);
	set(p, 2, 3, 4, 1, 2);
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 2", "rule reorder");
	clp_skip_paths_free(p);

	p = base(&r);
	r.max_swaps = 0;
	set(p, 0, 2, 3, 1, 2);
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "mb 0", "rule max_swaps (W = 0)");
	clp_skip_paths_free(p);

	p = base(&r);
	set(p, 2, 1, 2, 2, 3);
	CHECK_ERR(clp_skip_validate(&r, p), CLP_ERR_INVALID, "rule balance: stage 2 is visited by 3",
		  "needs 2");
	r.balance = 0;
	CHECK(clp_skip_validate(&r, p) == CLP_OK, "balance off: %s", clp_last_error());
	clp_skip_paths_free(p);
}

static void test_config(void)
{
	clp_skip_rules r;
	clp_skip_paths *p = base(&r);

	if (!p)
		return;
	/* Two micro-batches x 2 stages over 3 stages is not an integer. */
	p->nmb = 2;
	CHECK_ERR(clp_skip_check_config(&r, p), CLP_ERR_INVALID, "balance", "not an integer");
	p->nmb = 3;
	r.max_jump = 1;
	CHECK_ERR(clp_skip_check_config(&r, p), CLP_ERR_INVALID, "stage 3 cannot be reached");
	r.max_jump = 4;
	r.path_len = 5;
	CHECK_ERR(clp_skip_check_config(&r, p), CLP_ERR_INVALID, "P = 5");
	r.path_len = 3;
	p->node_stage[4] = 2; /* no node left on stage 3 */
	CHECK_ERR(clp_skip_check_config(&r, p), CLP_ERR_INVALID, "no node serves stage 3");
	clp_skip_paths_free(p);
}

static void test_json_round_trip(void)
{
	char path[512];
	clp_skip_rules r, r2;
	clp_skip_paths *p = base(&r), *q = NULL;

	if (!p)
		return;
	snprintf(p->node_device[3], sizeof(p->node_device[3]), "n3:gpu0");
	r.max_jump = 3;
	snprintf(path, sizeof(path), "%s/rt_paths.json", CLP_TEST_TMP);
	CHECK_OK(clp_skip_save(p, &r, 12.5, path));
	clp_skip_rules_default(&r2, 1);
	CHECK_OK(clp_skip_load(path, &q, &r2));
	if (q) {
		CHECK(q->nstages == 4 && q->nnodes == 5 && q->nmb == 3, "sizes");
		CHECK(!memcmp(q->node_stage, p->node_stage, 5 * sizeof(int)), "stages");
		CHECK(!strcmp(q->node_device[3], "n3:gpu0") && !q->node_device[2][0], "devices");
		CHECK(!memcmp(q->origin, p->origin, 3 * sizeof(int)), "origins");
		CHECK(!memcmp(q->hop_start, p->hop_start, 4 * sizeof(int)), "hop starts");
		CHECK(!memcmp(q->hops, p->hops, 6 * sizeof(clp_skip_hop)), "hops");
		CHECK(r2.nstages == 4 && r2.path_len == 3 && r2.max_jump == 3 && r2.max_swaps == 1 &&
		      r2.memory == 2 && r2.balance && r2.deadlock_free, "rules");
		CHECK(clp_skip_validate(&r2, q) == CLP_OK, "%s", clp_last_error());
	}
	clp_skip_paths_free(q);
	clp_skip_paths_free(p);
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

static void test_json_errors(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
		{"{\"format\": \"clpipe-costs\", \"stages\": 2, \"nodes\": [], \"microbatches\": []}",
		 "format"},
		{"{\"stages\": 2, \"nodes\": [{\"stage\": 0}], \"microbatches\": [], \"hop\": 1}",
		 "hop"},
		{"{\"stages\": 2, \"nodes\": [{\"stage\": 0}, {\"stage\": 1}], \"microbatches\": "
		 "[{\"mb\": 0, \"origin\": 0, \"hops\": [[1, 1], [2]]}]}",
		 "microbatches[0].hops[1]: expected [stage, node]"},
		{"{\"stages\": 2, \"nodes\": [{\"stage\": 0}, {\"stage\": 1}], \"microbatches\": "
		 "[{\"mb\": 0, \"origin\": 0, \"hops\": []}, {\"mb\": 0, \"origin\": 0, \"hops\": []}]}",
		 "micro-batch 0 is listed twice"},
		{"{\"stages\": 2, \"nodes\": [{\"stage\": 5}], \"microbatches\": []}", "nodes[0].stage"},
		{"{\"stages\": 2, \"nodes\": [{\"stage\": 0}], \"microbatches\": [{\"mb\": 0, "
		 "\"hops\": []}]}", "microbatches[0]"},
		{"{\"stages\": 2, \"rules\": {\"max_jmp\": 2}, \"nodes\": [{\"stage\": 0}], "
		 "\"microbatches\": []}", "max_jmp"},
		{"{\"stages\": 2, \"nodes\": [{\"stage\": 0}], ", "line"},
	};
	char path[512];

	snprintf(path, sizeof(path), "%s/bad_paths.json", CLP_TEST_TMP);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clp_skip_paths *p = NULL;
		clp_skip_rules r;

		clp_skip_rules_default(&r, 1);
		write_file(path, cases[i].text);
		CHECK_ERR(clp_skip_load(path, &p, &r), CLP_ERR_FORMAT, "bad_paths.json",
			  cases[i].needle);
		CHECK(p == NULL, "case %zu: no result on error", i);
		clp_skip_paths_free(p);
	}
}

static int count_ops(const clp_sched *s, int rank, int kind)
{
	int n = 0;

	for (int i = 0; i < s->ranks[rank].nops; i++)
		n += s->ranks[rank].ops[i].kind == kind;
	return n;
}

static void test_to_sched(void)
{
	char path[512];
	clp_skip_rules r;
	clp_skip_paths *p = base(&r);
	clp_sched *s = NULL, *t = NULL;
	clp_layout *l = NULL;
	const int *stages;
	int n;

	if (!p)
		return;
	set(p, 0, 2, 3, 1, 2); /* with a swap */
	CHECK_OK(clp_skip_to_sched(p, &r, 4, &s));
	if (!s)
		goto out;
	CHECK(clp_sched_validate(s, 1) == CLP_OK, "IR validator: %s", clp_last_error());
	CHECK(s->nranks == 5 && s->nstages == 5 && s->nmb == 3, "sizes");
	CHECK(s->stages[0].embed && !s->stages[0].head && s->stages[4].head &&
	      !s->stages[4].embed && s->stages[4].nlayers == 0 && s->stages[3].nlayers == 4,
	      "stage map: embedding on 0, head on the extra stage 4");
	n = clp_sched_path(s, 0, &stages);
	CHECK(n == 4 && stages && stages[0] == 0 && stages[1] == 2 && stages[2] == 1 &&
	      stages[3] == 4, "IR path of mb 0: 0 2 1 4");
	for (int k = 0; k < 5; k++)
		CHECK(s->ranks[k].mode == CLP_RANK_DATAFLOW && s->ranks[k].mem_cap == 2,
		      "rank %d: dataflow, cap M", k);
	/* Node 0 starts mb 0 and 2: forwards of stage 0 and of the head, for each. */
	CHECK(count_ops(s, 0, CLP_OP_FWD) == 4 && count_ops(s, 0, CLP_OP_BWD) == 4, "origin ops");
	CHECK(count_ops(s, 0, CLP_OP_ALLREDUCE) == 1 && count_ops(s, 2, CLP_OP_ALLREDUCE) == 0,
	      "one all-reduce for stage 0's two nodes, none for single nodes");
	CHECK(count_ops(s, 0, CLP_OP_OPT_STEP) == 2, "stage 0 and the head are stepped");
	/* The head's forward comes first in an origin's list: the loss has priority. */
	for (int i = 0; i < s->ranks[0].nops; i++)
		if (clp_op_is_compute(s->ranks[0].ops[i].kind)) {
			CHECK(s->ranks[0].ops[i].kind == CLP_OP_FWD && s->ranks[0].ops[i].stage == 4,
			      "first compute op is the head's forward");
			break;
		}
	snprintf(path, sizeof(path), "%s/skip_sched.json", CLP_TEST_TMP);
	CHECK_OK(clp_sched_save(s, path));
	CHECK_OK(clp_sched_load(path, &t));
	if (t) {
		CHECK(clp_sched_compare(s, t) == CLP_OK, "%s", clp_last_error());
		CHECK(t->nlayers == 16, "layers read back: %d", t->nlayers);
		CHECK(clp_sched_validate(t, 1) == CLP_OK, "%s", clp_last_error());
	}
	CHECK_OK(clp_skip_layout(p, NULL, &l));
	if (l) {
		CHECK(l->ranks[0].nstages == 2 && l->ranks[2].nstages == 1, "layout stages");
		CHECK(clp_layout_check(l, s, "layout") == CLP_OK, "%s", clp_last_error());
	}
out:
	clp_layout_free(l);
	clp_sched_free(t);
	clp_sched_free(s);
	clp_skip_paths_free(p);
}

static void test_too_many_mb(void)
{
	clp_skip_rules r;
	clp_skip_paths *p = NULL;
	clp_sched *s = NULL;

	clp_skip_rules_default(&r, 1);
	CHECK_OK(clp_skip_paths_create(&p, 1, 1, CLP_SKIP_MAX_MB + 1));
	if (!p)
		return;
	for (int m = 0; m < p->nmb; m++)
		p->origin[m] = 0;
	CHECK_ERR(clp_skip_to_sched(p, &r, 1, &s), CLP_ERR_INVALID, "1025 micro-batches");
	clp_sched_free(s);
	clp_skip_paths_free(p);
}

TH_MAIN(TH_TEST(test_valid), TH_TEST(test_each_rule), TH_TEST(test_config),
	TH_TEST(test_json_round_trip), TH_TEST(test_json_errors), TH_TEST(test_to_sched),
	TH_TEST(test_too_many_mb))
