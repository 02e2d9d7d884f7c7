/* clpipe skip: the [skip] config every subcommand reads (the schema, --config, the short
 * options, paths relative to the config file) and the inputs they share: cluster, costs and
 * rules (skip_load_env), the nodes from a path file, a layout or an allocation
 * (skip_load_nodes). The subcommands are in cmd_skip.c, cmd_skip_compare.c and
 * cmd_skip_fixed.c. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"
#include "tools/skip_cli.h"
#include "cl/base/clock.h"

#define F(member, key, type, dflt, help, lo, hi, choices)                                          \
	CLP_CFG_FIELD(skip_cfg, member, "skip." key, type, dflt, help, lo, hi, choices)
static const clp_cfg_field fields[] = {
	F(cluster, "cluster", CLP_CFG_STRING, "\"\"", "cluster JSON (nodes, speeds, links)", 0, 0,
	  NULL),
	F(costs, "costs", CLP_CFG_STRING, "\"\"", "cost table JSON: stages 0..S-1, then the head and "
	  "loss of stage 0", 0, 0, NULL),
	F(precision, "precision", CLP_CFG_STRING, "\"table\"", "storage precision of the "
	  "messages on the paths: the cost table's, or its sizes converted to fp32 (4 bytes an "
	  "element), bf16 or fp16 (2); times stay the table's", 0, 0, "table|fp32|bf16|fp16"),
	F(layout, "layout", CLP_CFG_STRING, "\"\"", "fixed node-to-stage layout (rank i: device, "
	  "stage); none: allocate with stage_nodes", 0, 0, NULL),
	F(paths, "paths", CLP_CFG_STRING, "\"\"", "path set JSON (simulate, validate)", 0, 0, NULL),
	F(stage_nodes, "stage_nodes", CLP_CFG_INTS, "[]", "nodes per stage for the allocation, e.g. "
	  "[5, 3, 3, 3, 3, 3]", 0, 1e6, NULL),
	F(stages, "stages", CLP_CFG_INT, "0", "model stages S (0: from stage_nodes or the layout)",
	  0, 256, NULL),
	F(microbatches, "microbatches", CLP_CFG_INT, "6", "micro-batches per stage-0 node", 1,
	  1024, NULL),
	F(path_len, "path_len", CLP_CFG_INT, "0", "P: stages on a path, stage 0 counted once (0: "
	  "S, no skipping)", 0, 256, NULL),
	F(max_jump, "max_jump", CLP_CFG_INT, "4", "J: most stages a hop goes past the furthest "
	  "reached", 1, 256, NULL),
	F(max_swaps, "max_swaps", CLP_CFG_INT, "2", "W: swaps of adjacent stages per path (0: "
	  "none)", 0, 128, NULL),
	F(memory, "memory", CLP_CFG_INT, "3", "M: micro-batches a node holds at once (0: no cap)",
	  0, 1 << 20, NULL),
	F(balance, "balance", CLP_CFG_BOOL, "true", "every stage after 0 visited equally often", 0,
	  0, NULL),
	F(deadlock_free, "deadlock_free", CLP_CFG_BOOL, "true", "with a cap: no cycle of nodes "
	  "handing forwards to each other", 0, 0, NULL),
	F(authors, "authors", CLP_CFG_BOOL, "false", "the SkipPipe authors' constants: hop_s = "
	  "0.35, gap_s = 0.13", 0, 0, NULL),
	F(hop_s, "hop_s", CLP_CFG_FLOAT, "0", "seconds added to every hop", 0, 1e6, NULL),
	F(gap_s, "gap_s", CLP_CFG_FLOAT, "0", "idle seconds after each task on a node", 0, 1e6,
	  NULL),
	F(shared_cores, "shared_cores", CLP_CFG_INT, "0", "the nodes' compute shares this many "
	  "cores of one machine (a network lab of namespaces; processor sharing, docs/PIPELINE.md); "
	  "0: a device each", 0, 1 << 20, NULL),
	F(seed, "seed", CLP_CFG_INT, "1", "random seed (search, random paths)", 0, 1e15, NULL),
	F(iterations, "iterations", CLP_CFG_INT, "3000", "scheduler: local-search moves", 0, 1e9,
	  NULL),
	F(restarts, "restarts", CLP_CFG_INT, "1", "scheduler: anneal the starts this many times "
	  "(each with --iterations moves), keep the best", 1, 1000, NULL),
	F(alloc_iterations, "alloc_iterations", CLP_CFG_INT, "400", "allocation: swaps tried", 0,
	  1e9, NULL),
	F(baseline_iterations, "baseline_iterations", CLP_CFG_INT, "3000", "full pipeline: "
	  "exchanges of nodes tried", 0, 1e9, NULL),
	F(time_limit, "time_limit", CLP_CFG_FLOAT, "0", "scheduler: stop the search after this "
	  "many seconds (0: none)", 0, 1e9, NULL),
	F(random, "random", CLP_CFG_INT, "0", "also score this many random valid path sets", 0,
	  1e6, NULL),
	F(pipelines, "pipelines", CLP_CFG_INT, "0", "also score the full pipeline as this many "
	  "complete pipelines (same global batch)", 0, 1e6, NULL),
	F(paths_out, "paths_out", CLP_CFG_STRING, "\"\"", "write the scheduler's paths (JSON)", 0,
	  0, NULL),
	F(schedule_out, "schedule_out", CLP_CFG_STRING, "\"\"", "write the schedule IR (JSON, for "
	  "clpipe sim and the executor)", 0, 0, NULL),
	F(layout_out, "layout_out", CLP_CFG_STRING, "\"\"", "write the schedule's rank layout", 0, 0,
	  NULL),
	F(costs_out, "costs_out", CLP_CFG_STRING, "\"\"", "write the schedule's cost table (S + 1 "
	  "stages)", 0, 0, NULL),
	F(baseline_out, "baseline_out", CLP_CFG_STRING, "\"\"", "write the full pipeline's paths "
	  "(JSON; with --pipelines)", 0, 0, NULL),
	F(trace, "trace", CLP_CFG_STRING, "\"\"", "write the simulated timeline (Chrome trace)", 0,
	  0, NULL),
	F(json, "json", CLP_CFG_BOOL, "false", "print the results as JSON", 0, 0, NULL),
	F(init, "init", CLP_CFG_STRING, "\"\"", "schedule: start from this path set (its nodes, "
	  "stages and origins fix the allocation); the result is never worse", 0, 0, NULL),
	F(alloc_from, "alloc_from", CLP_CFG_STRING, "\"\"", "schedule: take the allocation (nodes, "
	  "stages, origins) from this path file, not its paths", 0, 0, NULL),
	F(alloc_random, "alloc_random", CLP_CFG_INT, "0", "schedule: a random valid allocation "
	  "drawn with this seed (0: clpipe's allocation)", 0, 1e15, NULL),
	F(verbose, "verbose", CLP_CFG_BOOL, "false", "progress on stderr", 0, 0, NULL),
	F(table, "table", CLP_CFG_STRING, "\"\"", "cluster: network table (.tsv)", 0, 0, NULL),
	F(regions, "regions", CLP_CFG_STRING, "\"Belgium,Canada,Germany,Iowa,Japan,LA,NL,Oregon,"
	  "Singapore,Taiwan,London,Australia\"", "cluster: regions in order (node i in region i mod "
	  "count)", 0, 0, NULL),
	F(nodes, "nodes", CLP_CFG_INT, "20", "cluster / bench: nodes", 1, 1e6, NULL),
	F(intra_latency_s, "intra_latency_s", CLP_CFG_FLOAT, "0.001", "cluster: latency inside one "
	  "region", 0, 1e6, NULL),
	F(intra_bandwidth_Bps, "intra_bandwidth_Bps", CLP_CFG_FLOAT, "2147483648", "cluster: "
	  "bandwidth inside one region (bytes/s)", 1, 1e15, NULL),
	F(out, "out", CLP_CFG_STRING, "\"\"", "cluster: output file", 0, 0, NULL),
};
#undef F
const clp_cfg_schema skip_schema = {"skip", fields, (int)(sizeof(fields) / sizeof(fields[0])), 0};

/* A relative input that is not there from here, but is next to the config file. */
static void near_config(char *path, size_t cap, const char *config)
{
	char dir[SKIP_PATH], alt[2 * SKIP_PATH + 2];

	if (!path[0] || path[0] == '/' || !config || access(path, R_OK) == 0)
		return;
	snprintf(dir, sizeof(dir), "%s", config);
	snprintf(alt, sizeof(alt), "%s/%s", dirname(dir), path);
	if (access(alt, R_OK) == 0 && strlen(alt) < cap)
		snprintf(path, cap, "%s", alt);
}

/* The rule an argument sets ("--path-len", "--skip.path_len=3", ...), as a SKIP_RULE_* bit. */
static unsigned rule_bit(const char *a)
{
	static const char *const names[] = {"path_len", "max_jump", "max_swaps", "memory", "balance",
					    "deadlock_free"};
	char name[64];
	size_t n;

	if (strncmp(a, "--", 2))
		return 0;
	a += 2;
	if (!strncmp(a, "skip.", 5))
		a += 5;
	if (!strncmp(a, "no-", 3) || !strncmp(a, "no_", 3))
		a += 3;
	n = strcspn(a, "=");
	if (n >= sizeof(name))
		return 0;
	for (size_t i = 0; i < n; i++)
		name[i] = a[i] == '-' ? '_' : a[i];
	name[n] = '\0';
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return 1u << i;
	return 0;
}

void skip_report_overridden(const char *cmd, const skip_cfg *c, const clp_skip_rules *cli,
			    const clp_skip_rules *file)
{
	const struct {
		unsigned bit;
		const char *flag;
		int a, b;
	} r[] = {
		{SKIP_RULE_PATH_LEN, "path-len", cli->path_len, file->path_len},
		{SKIP_RULE_MAX_JUMP, "max-jump", cli->max_jump, file->max_jump},
		{SKIP_RULE_MAX_SWAPS, "max-swaps", cli->max_swaps, file->max_swaps},
		{SKIP_RULE_MEMORY, "memory", cli->memory, file->memory},
		{SKIP_RULE_BALANCE, "balance", cli->balance, file->balance},
		{SKIP_RULE_DEADLOCK_FREE, "deadlock-free", cli->deadlock_free, file->deadlock_free},
	};

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if ((c->given_rules & r[i].bit) && r[i].a != r[i].b)
			fprintf(stderr, "clpipe %s: warning: --%s %d from the command line is not used: "
				"%s's \"rules\" set it to %d\n", cmd, r[i].flag, r[i].a,
				c->paths[0] ? c->paths : c->init, r[i].b);
}

int skip_parse(const char *cmd, int argc, char **argv, skip_cfg *c, void (*usage)(void))
{
	const char *config = NULL;
	unsigned given = 0;
	clp_status st;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage();
			return 0;
		}
		given |= rule_bit(argv[i]);
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			config = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			config = argv[i] + 9;
	}
	clp_cfg_defaults(&skip_schema, c);
	if ((st = clp_cfg_args(&skip_schema, c, &argc, argv)) != CLP_OK)
		return cli_fail(cmd, st);
	if ((rc = cli_parse_short(cmd, &skip_schema, "skip", c, argc, argv)) != 0)
		return rc;
	c->given_rules = given;
	near_config(c->init, sizeof(c->init), config);
	near_config(c->alloc_from, sizeof(c->alloc_from), config);
	near_config(c->cluster, sizeof(c->cluster), config);
	near_config(c->costs, sizeof(c->costs), config);
	near_config(c->layout, sizeof(c->layout), config);
	near_config(c->paths, sizeof(c->paths), config);
	near_config(c->table, sizeof(c->table), config);
	return -1;
}

int skip_nstages(const skip_cfg *c)
{
	clp_layout *l = NULL;
	int S = 0;

	if (c->stages > 0)
		return (int)c->stages;
	if (c->init[0] || c->alloc_from[0]) {
		clp_skip_paths *p = NULL;

		if (clp_skip_load(c->init[0] ? c->init : c->alloc_from, &p, NULL) == CLP_OK)
			S = p->nstages;
		clp_skip_paths_free(p);
		if (S > 0)
			return S;
	}
	if (c->stage_nodes.n > 0)
		return c->stage_nodes.n;
	if (c->layout[0] && clp_layout_load(c->layout, &l) == CLP_OK) {
		for (int r = 0; r < l->nranks; r++)
			if (l->ranks[r].nstages > 0 && l->ranks[r].stages[0].stage + 1 > S)
				S = l->ranks[r].stages[0].stage + 1;
		clp_layout_free(l);
	}
	return S;
}

clp_status skip_load_env(const skip_cfg *c, int S, skip_inputs *in)
{
	clp_skip_rules *r = &in->env.rules;

	memset(in, 0, sizeof(*in));
	if (S < 1)
		return clp_error(CLP_ERR_INVALID, "the number of stages is unknown: give "
				 "--stage-nodes, --layout or --stages");
	if (!c->costs[0])
		return clp_error(CLP_ERR_INVALID, "a cost table is required (--costs)");
	CLP_TRY(clp_costs_load(c->costs, &in->costs));
	if (strcmp(c->precision, "table")) {
		clp_dtype p = CLP_F32;

		CLP_TRY(clp_costs_precision_parse(c->precision, "skip.precision", &p));
		clp_costs_set_precision(in->costs, p);
	}
	if (c->cluster[0])
		CLP_TRY(clp_cluster_load(c->cluster, &in->cluster));
	clp_skip_rules_default(r, S);
	r->path_len = c->path_len > 0 ? (int)c->path_len : S;
	r->max_jump = (int)c->max_jump;
	r->max_swaps = (int)c->max_swaps;
	r->memory = (int)c->memory;
	r->balance = c->balance;
	r->deadlock_free = c->deadlock_free;
	in->env.cluster = in->cluster;
	in->env.costs = in->costs;
	in->env.hop_s = c->authors ? 0.35 : c->hop_s;
	in->env.gap_s = c->authors ? 0.13 : c->gap_s;
	in->env.shared_cores = (int)c->shared_cores;
	return CLP_OK;
}

void skip_inputs_free(skip_inputs *in)
{
	clp_cluster_free(in->cluster);
	clp_costs_free(in->costs);
	clp_skip_paths_free(in->nodes);
	clp_skip_paths_free(in->init);
	memset(in, 0, sizeof(*in));
}

static clp_status nodes_from_layout(const skip_cfg *c, skip_inputs *in)
{
	clp_layout *l = NULL;
	clp_status st;

	CLP_TRY(clp_layout_load(c->layout, &l));
	st = clp_skip_from_layout(l, in->env.rules.nstages, c->layout, &in->nodes);
	clp_layout_free(l);
	return st;
}

/* The nodes and origins of a path file (--init, --alloc-from); with --init the path set too. */
static clp_status nodes_from_paths(const skip_cfg *c, skip_inputs *in)
{
	const char *f = c->init[0] ? c->init : c->alloc_from;
	clp_skip_rules r = in->env.rules;
	clp_skip_paths *p = NULL;
	clp_status st;

	CLP_TRY(clp_skip_load(f, &p, &r));
	if (p->nstages != in->env.rules.nstages) {
		st = clp_error(CLP_ERR_INVALID, "%s: %d stages, the configuration has %d", f,
			       p->nstages, in->env.rules.nstages);
		clp_skip_paths_free(p);
		return st;
	}
	st = clp_skip_paths_copy(p, &in->nodes);
	if (st == CLP_OK && c->init[0])
		in->init = p;
	else
		clp_skip_paths_free(p);
	return st;
}

clp_status skip_load_nodes(const skip_cfg *c, skip_inputs *in, int verbose)
{
	int S = in->env.rules.nstages, count[CLP_CFG_MAX_INTS];
	clp_skip_env plain = in->env;
	clp_skip_opts o;
	double t0;

	if (c->init[0] || c->alloc_from[0])
		return nodes_from_paths(c, in);
	if (c->layout[0]) {
		CLP_TRY(nodes_from_layout(c, in));
		return clp_skip_set_origins(in->nodes, (int)c->microbatches);
	}
	if (!in->cluster)
		return clp_error(CLP_ERR_INVALID, "without a layout, the nodes are the cluster's "
				 "devices: give --cluster (and --stage-nodes)");
	if (c->stage_nodes.n != S)
		return clp_error(CLP_ERR_INVALID, "stage_nodes lists %d stages, the model has %d",
				 c->stage_nodes.n, S);
	for (int s = 0; s < S; s++)
		count[s] = (int)c->stage_nodes.v[s];
	CLP_TRY(clp_skip_paths_create(&in->nodes, S, in->cluster->ndevices, 0));
	for (int n = 0; n < in->cluster->ndevices; n++)
		snprintf(in->nodes->node_device[n], CLP_NAME_MAX, "%s", in->cluster->devices[n].id);
	clp_skip_alloc_in_order(in->nodes, count); /* in order, to check the rules first */
	if (clp_skip_set_origins(in->nodes, (int)c->microbatches) == CLP_OK)
		CLP_TRY(clp_skip_check_config(&in->env.rules, in->nodes));
	if (c->alloc_random > 0)
		return clp_skip_alloc_random(in->nodes, count, (int)c->microbatches,
					     (uint64_t)c->alloc_random, &in->env.rules);
	clp_skip_opts_default(&o);
	o.seed = (uint64_t)c->seed;
	o.iterations = (int)c->alloc_iterations;
	t0 = clp_now();
	/* Always with the plain cost model, so that `schedule --authors` schedules on the same
	 * allocation as `compare` (which allocates once for both models); allocating under the
	 * authors' constants also did worse for them (33.95 s against 25.28 s on paper.toml). */
	plain.hop_s = 0;
	plain.gap_s = 0;
	CLP_TRY(clp_skip_allocate(&plain, in->nodes, count, (int)c->microbatches, &o));
	if (verbose)
		fprintf(stderr, "allocation: %.2f s\n", clp_now() - t0);
	return CLP_OK;
}

void skip_print_nodes(const clp_skip_paths *p)
{
	int paths = p->hop_start[p->nmb] > 0;

	printf("node  device                   stage  %s\n", paths ? "visits  priority" : "");
	for (int n = 0; n < p->nnodes; n++) {
		int v = 0;

		for (int i = 0; i < p->hop_start[p->nmb]; i++)
			v += p->hops[i].node == n;
		if (p->node_stage[n] == 0)
			v = clp_skip_mb_of_origin(p, n);
		printf("%4d  %-24s %5d", n, p->node_device[n][0] ? p->node_device[n] : "-",
		       p->node_stage[n]);
		if (paths)
			printf("  %6d  %s", v, p->node_prio[n] == CLP_SKIP_FORWARD_FIRST ? "forward"
											: "backward");
		printf("%s\n", p->node_stage[n] == 0 ? "  (origin)" : "");
	}
}
