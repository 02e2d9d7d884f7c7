/* clpipe skip: SkipPipe path schedules (docs/SKIPPIPE.md).
 *
 *   clpipe skip schedule  allocate nodes to stages (or take a layout), run the path scheduler,
 *                         score random valid paths and the full pipeline, write the paths, the
 *                         schedule IR, its layout and cost table, a trace;
 *   clpipe skip simulate  check and simulate a path set given as JSON;
 *   clpipe skip validate  check a path set against the rules;
 *   clpipe skip cluster   a cluster file from a network table (../shared/networks);
 *   clpipe skip compare   the table of docs/SKIPPIPE.md: baseline, random, scheduler, with and
 *                         without the authors' constants;
 *   clpipe skip bench     the scheduler on a synthetic 1,000-node cluster;
 *   clpipe skip fixed     the scheduler against baselines from the paper's description on one
 *                         fixed allocation (cmd_skip_fixed.c).
 * Every option is a field of the [skip] config section (--skip.KEY=VALUE, or --KEY VALUE),
 * read by skip_cli.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "tools/cli.h"
#include "tools/skip_cli.h"

/* The path set's schedule IR (validated), its layout, its cost table: written to their files. */
static clp_status write_schedule(const skip_cfg *c, const skip_inputs *in, const clp_skip_paths *p)
{
	clp_sched *s = NULL;
	clp_status st = clp_skip_to_sched(p, &in->env.rules, 0, &s);

	if (st == CLP_OK && (st = clp_sched_validate(s, 1)) == CLP_OK)
		st = clp_sched_save(s, c->schedule_out);
	clp_sched_free(s);
	return st;
}

static clp_status write_layout(const skip_cfg *c, const skip_inputs *in, const clp_skip_paths *p)
{
	clp_layout *l = NULL;
	clp_status st = clp_skip_layout(p, in->cluster, &l);

	if (st == CLP_OK)
		st = clp_layout_save(l, c->layout_out);
	clp_layout_free(l);
	return st;
}

static clp_status write_costs(const skip_cfg *c, const skip_inputs *in, const clp_skip_paths *p)
{
	clp_costs *k = NULL;
	clp_status st = clp_skip_costs(in->costs, p->nstages, &k);

	if (st == CLP_OK)
		st = clp_costs_save(k, c->costs_out);
	clp_costs_free(k);
	return st;
}

/* Schedule, layout, costs and trace of a path set, as asked. */
static clp_status write_outputs(const skip_cfg *c, const skip_inputs *in, const clp_skip_paths *p,
				double iter_s)
{
	if (c->paths_out[0])
		CLP_TRY(clp_skip_save(p, &in->env.rules, iter_s, c->paths_out));
	if (c->schedule_out[0])
		CLP_TRY(write_schedule(c, in, p));
	if (c->layout_out[0])
		CLP_TRY(write_layout(c, in, p));
	if (c->costs_out[0])
		CLP_TRY(write_costs(c, in, p));
	if (c->trace[0]) {
		clp_skip_result r;
		clp_status st = clp_skip_simulate(&in->env, p, 0, c->trace, &r);

		clp_skip_result_free(&r);
		return st;
	}
	return CLP_OK;
}

static void usage_schedule(void)
{
	printf("usage: clpipe skip schedule --cluster F --costs F (--stage-nodes [..] | --layout F)\n"
	       "                            [--microbatches n] [--path-len P] [--max-jump J]\n"
	       "                            [--max-swaps W] [--memory M] [--authors]\n"
	       "                            [--iterations N] [--time-limit S] [--random R]\n"
	       "                            [--pipelines K] [--paths-out F] [--schedule-out F]\n"
	       "                            [--layout-out F] [--costs-out F] [--trace F] [--json]\n\n"
	       "Allocates the cluster's nodes to stages (unless a layout fixes them), runs the\n"
	       "SkipPipe path scheduler and prints the simulated iteration time; --random R also\n"
	       "scores R random valid path sets, --pipelines K the full pipeline on the same\n"
	       "nodes. Options are fields of the [skip] config section.\n\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

/* What `skip schedule` found: the scheduler's paths and report, the random sets' iteration
 * times, the full pipeline's (q: the last baseline's path set). */
typedef struct sched_out {
	clp_skip_paths *p, *q;
	clp_skip_report rep;
	double rnd_sum, rnd_min, rnd_max, base;
} sched_out;

/* --random sets of random valid paths on the same nodes, simulated. */
static clp_status score_random(const skip_cfg *c, const skip_inputs *in, sched_out *r)
{
	for (int i = 0; i < c->random; i++) {
		clp_skip_result res;

		clp_skip_paths_free(r->q);
		r->q = NULL;
		CLP_TRY(clp_skip_paths_copy(in->nodes, &r->q));
		CLP_TRY(clp_skip_random(&in->env, r->q, (uint64_t)(c->seed * 1000 + i)));
		CLP_TRY(clp_skip_simulate(&in->env, r->q, 0, NULL, &res));
		r->rnd_sum += res.iter_s;
		r->rnd_min = i == 0 || res.iter_s < r->rnd_min ? res.iter_s : r->rnd_min;
		r->rnd_max = i == 0 || res.iter_s > r->rnd_max ? res.iter_s : r->rnd_max;
	}
	return CLP_OK;
}

/* --pipelines complete pipelines on the same nodes (--baseline-iterations moves), saved to
 * --baseline-out when given. */
static clp_status score_full_pipeline(const skip_cfg *c, const skip_inputs *in, clp_skip_opts *o,
				      sched_out *r)
{
	clp_skip_paths_free(r->q);
	r->q = NULL;
	CLP_TRY(clp_skip_paths_copy(in->nodes, &r->q));
	o->iterations = (int)c->baseline_iterations;
	CLP_TRY(clp_skip_full_pipeline(&in->env, r->q, (int)c->pipelines, r->p->nmb, o, &r->base));
	if (c->baseline_out[0]) {
		clp_skip_rules br = in->env.rules;

		br.path_len = br.nstages;
		CLP_TRY(clp_skip_save(r->q, &br, r->base, c->baseline_out));
	}
	return CLP_OK;
}

static clp_status schedule_steps(const skip_cfg *c, skip_inputs *in, sched_out *r)
{
	clp_skip_opts o;

	CLP_TRY(skip_load_env(c, skip_nstages(c), in));
	CLP_TRY(skip_load_nodes(c, in, c->verbose));
	CLP_TRY(clp_skip_paths_copy(in->nodes, &r->p));
	clp_skip_opts_default(&o);
	o.seed = (uint64_t)c->seed;
	o.iterations = (int)c->iterations;
	o.restarts = (int)c->restarts;
	o.time_limit_s = c->time_limit;
	o.verbose = c->verbose;
	o.init = in->init;
	CLP_TRY(clp_skip_schedule(&in->env, r->p, &o, &r->rep));
	CLP_TRY(score_random(c, in, r));
	if (c->pipelines > 0)
		CLP_TRY(score_full_pipeline(c, in, &o, r));
	return write_outputs(c, in, r->p, r->rep.iter_s);
}

static void print_schedule_json(const skip_cfg *c, const sched_out *r)
{
	const clp_skip_report *rep = &r->rep;
	json_t *j = json_pack("{s:f, s:f, s:f, s:f, s:i, s:i}", "iteration_s", rep->iter_s,
			      "construction_iteration_s", rep->construct_iter_s, "construct_s",
			      rep->construct_s, "search_s", rep->search_s, "evaluations",
			      rep->evaluations, "microbatches", r->p->nmb);
	char *txt;

	if (c->random > 0)
		json_object_set_new(j, "random", json_pack("{s:i, s:f, s:f, s:f}", "sets",
							   (int)c->random, "mean_s",
							   r->rnd_sum / c->random, "min_s", r->rnd_min,
							   "max_s", r->rnd_max));
	if (c->pipelines > 0)
		json_object_set_new(j, "full_pipeline_s", json_real(r->base));
	txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (txt)
		printf("%s\n", txt);
	free(txt);
	json_decref(j);
}

static void print_schedule(const skip_cfg *c, const skip_inputs *in, const sched_out *r)
{
	const clp_skip_paths *p = r->p;
	const clp_skip_report *rep = &r->rep;

	skip_print_nodes(p);
	printf("\nmicro-batches  %d (%ld per stage-0 node), P = %d of S = %d stages, J = %d, "
	       "W = %d, M = %d\n", p->nmb, c->microbatches, in->env.rules.path_len,
	       in->env.rules.nstages, in->env.rules.max_jump, in->env.rules.max_swaps,
	       in->env.rules.memory);
	printf("cost model     hop + %.3g s, gap %.3g s after each task\n", in->env.hop_s,
	       in->env.gap_s);
	printf("scheduler      iteration %.4g s (best start %.4g s); ran %.2f s "
	       "(starts %.2f s, search %.2f s, %d simulations)\n", rep->iter_s,
	       rep->construct_iter_s, rep->construct_s + rep->search_s, rep->construct_s,
	       rep->search_s, rep->evaluations);
	if (c->random > 0)
		printf("random paths   iteration %.4g s mean of %ld (min %.4g, max %.4g)\n",
		       r->rnd_sum / c->random, c->random, r->rnd_min, r->rnd_max);
	if (c->pipelines > 0)
		printf("full pipeline  iteration %.4g s (%ld pipelines)\n", r->base, c->pipelines);
}

static int cmd_schedule(int argc, char **argv)
{
	skip_cfg c;
	skip_inputs in = {0};
	sched_out r = {0};
	clp_status st;
	int rc = skip_parse("skip schedule", argc, argv, &c, usage_schedule);

	if (rc >= 0)
		return rc;
	st = schedule_steps(&c, &in, &r);
	if (st == CLP_OK && c.json)
		print_schedule_json(&c, &r);
	else if (st == CLP_OK)
		print_schedule(&c, &in, &r);
	rc = st == CLP_OK ? 0 : cli_fail("skip schedule", st);
	clp_skip_paths_free(r.p);
	clp_skip_paths_free(r.q);
	skip_inputs_free(&in);
	return rc;
}

static void usage_simulate(void)
{
	printf("usage: clpipe skip simulate --paths F --costs F [--cluster F] [--authors]\n"
	       "                            [--trace F] [--schedule-out F] [--json]\n\n"
	       "Checks a path set (JSON, docs/SKIPPIPE.md) against its rules (the file's, else\n"
	       "the options') and simulates it: iteration time, when each micro-batch ends and\n"
	       "the most micro-batches each node holds.\n\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

static void usage_validate(void)
{
	printf("usage: clpipe skip validate --paths F [--path-len P] [--max-jump J] ...\n\n"
	       "Checks a path set against the rules: the file's \"rules\", else the options'.\n"
	       "\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

/* The path set of --paths and its rules (the file's where it has them). */
static clp_status load_paths(const char *cmd, const skip_cfg *c, clp_skip_rules *r,
			     clp_skip_paths **p)
{
	clp_skip_rules cli;

	if (!c->paths[0])
		return clp_error(CLP_ERR_INVALID, "--paths is required");
	clp_skip_rules_default(r, 1);
	r->max_jump = (int)c->max_jump;
	r->max_swaps = (int)c->max_swaps;
	r->memory = (int)c->memory;
	r->balance = c->balance;
	r->deadlock_free = c->deadlock_free;
	r->path_len = (int)c->path_len;
	CLP_TRY(clp_skip_load(c->paths, p, r));
	cli = *r;
	cli.path_len = (int)c->path_len;
	cli.max_jump = (int)c->max_jump;
	cli.max_swaps = (int)c->max_swaps;
	cli.memory = (int)c->memory;
	cli.balance = c->balance;
	cli.deadlock_free = c->deadlock_free;
	skip_report_overridden(cmd, c, &cli, r);
	if (r->path_len <= 0)
		r->path_len = r->nstages;
	return CLP_OK;
}

static int cmd_validate(int argc, char **argv)
{
	skip_cfg c;
	clp_skip_rules r;
	clp_skip_paths *p = NULL;
	clp_status st;
	int rc = skip_parse("skip validate", argc, argv, &c, usage_validate);

	if (rc >= 0)
		return rc;
	st = load_paths("skip validate", &c, &r, &p);
	if (st == CLP_OK)
		st = clp_skip_validate(&r, p);
	if (st == CLP_OK)
		printf("%s: valid: %d micro-batches on %d nodes, P = %d of S = %d, J = %d, W = %d, "
		       "M = %d\n", c.paths, p->nmb, p->nnodes, r.path_len, r.nstages, r.max_jump,
		       r.max_swaps, r.memory);
	clp_skip_paths_free(p);
	return st == CLP_OK ? 0 : cli_fail("skip validate", st);
}

static clp_status simulate_steps(const skip_cfg *c, skip_inputs *in, clp_skip_paths **p,
				 clp_skip_result *r)
{
	clp_skip_rules keep;
	clp_status st;

	CLP_TRY(load_paths("skip simulate", c, &in->env.rules, p));
	keep = in->env.rules;
	st = skip_load_env(c, (*p)->nstages, in);
	in->env.rules = keep;
	CLP_TRY(st);
	CLP_TRY(clp_skip_validate(&in->env.rules, *p));
	CLP_TRY(clp_skip_simulate(&in->env, *p, 1, c->trace[0] ? c->trace : NULL, r));
	if (c->schedule_out[0]) {
		clp_sched *s = NULL;

		st = clp_skip_to_sched(*p, &in->env.rules, 0, &s);
		if (st == CLP_OK)
			st = clp_sched_save(s, c->schedule_out);
		clp_sched_free(s);
	}
	return st;
}

static void print_simulate_json(const clp_skip_paths *p, const clp_skip_result *r)
{
	json_t *j = json_pack("{s:f, s:o, s:o}", "iteration_s", r->iter_s, "mb_end_s",
			      json_array(), "node_peak_microbatches", json_array());
	char *txt;

	for (int m = 0; m < p->nmb; m++)
		json_array_append_new(json_object_get(j, "mb_end_s"), json_real(r->mb_end_s[m]));
	for (int n = 0; n < p->nnodes; n++)
		json_array_append_new(json_object_get(j, "node_peak_microbatches"),
				      json_integer(r->node_peak_mb[n]));
	txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (txt)
		printf("%s\n", txt);
	free(txt);
	json_decref(j);
}

static void print_simulate(const skip_cfg *c, const skip_inputs *in, const clp_skip_paths *p,
			   const clp_skip_result *r)
{
	int peak = 0;

	for (int n = 0; n < p->nnodes; n++)
		peak = r->node_peak_mb[n] > peak ? r->node_peak_mb[n] : peak;
	printf("%s: %d micro-batches on %d nodes, rules hold\n", c->paths, p->nmb, p->nnodes);
	printf("iteration      %.4g s (hop + %.3g s, gap %.3g s)\n", r->iter_s, in->env.hop_s,
	       in->env.gap_s);
	printf("memory         at most %d micro-batches on a node (M = %d)\n", peak,
	       in->env.rules.memory);
}

static int cmd_simulate(int argc, char **argv)
{
	skip_cfg c;
	skip_inputs in = {0};
	clp_skip_paths *p = NULL;
	clp_skip_result r = {0};
	clp_status st;
	int rc = skip_parse("skip simulate", argc, argv, &c, usage_simulate);

	if (rc >= 0)
		return rc;
	st = simulate_steps(&c, &in, &p, &r);
	if (st == CLP_OK && c.json)
		print_simulate_json(p, &r);
	else if (st == CLP_OK)
		print_simulate(&c, &in, p, &r);
	rc = st == CLP_OK ? 0 : cli_fail("skip simulate", st);
	clp_skip_result_free(&r);
	clp_skip_paths_free(p);
	skip_inputs_free(&in);
	return rc;
}

static void usage_cluster(void)
{
	printf("usage: clpipe skip cluster --table TSV --nodes N [--regions A,B,...]\n"
	       "                           [--intra-latency-s S] [--intra-bandwidth-Bps B] --out F\n\n"
	       "Writes a cluster file: node i in region i mod (number of regions), links between\n"
	       "regions from the table (../shared/networks/*.tsv), inside a region the intra\n"
	       "values (default 1 ms, 2 GiB/s, the SkipPipe authors' figure).\n\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

static int cmd_cluster(int argc, char **argv)
{
	skip_cfg c;
	char *names[64], buf[sizeof(c.regions)], *save = NULL;
	int nr = 0, rc = skip_parse("skip cluster", argc, argv, &c, usage_cluster);
	clp_cluster *cl = NULL;
	clp_status st;

	if (rc >= 0)
		return rc;
	if (!c.table[0] || !c.out[0])
		return cli_usage_error("skip cluster", "--table and --out are required");
	snprintf(buf, sizeof(buf), "%s", c.regions);
	for (char *t = strtok_r(buf, ",", &save); t && nr < 64; t = strtok_r(NULL, ",", &save))
		names[nr++] = t;
	st = clp_skip_cluster_from_table(c.table, (const char *const *)names, nr, (int)c.nodes,
					 (clp_link_spec){c.intra_latency_s, c.intra_bandwidth_Bps},
					 &cl);
	if (st == CLP_OK)
		st = clp_cluster_save(cl, c.out);
	if (st == CLP_OK)
		printf("%s: %d nodes over %d regions, %d links\n", c.out, cl->ndevices, nr,
		       cl->nlinks);
	clp_cluster_free(cl);
	return st == CLP_OK ? 0 : cli_fail("skip cluster", st);
}

static const struct {
	const char *name;
	int (*run)(int, char **);
	const char *summary;
} subs[] = {
	{"schedule", cmd_schedule, "allocate, schedule paths, score them (and baselines)"},
	{"simulate", cmd_simulate, "check and simulate a path set (JSON)"},
	{"validate", cmd_validate, "check a path set against the rules"},
	{"cluster", cmd_cluster, "a cluster file from a network table"},
	{"compare", cmd_skip_compare, "full pipeline vs random paths vs the scheduler (the "
	 "docs table)"},
	{"bench", cmd_skip_bench, "scheduler speed on a synthetic cluster"},
	{"fixed", cmd_skip_fixed, "the scheduler against the paper's baselines on one fixed "
	 "allocation"},
};

int cmd_skip(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		printf("usage: clpipe skip <command> [options]   (clpipe skip <command> --help)\n\n"
		       "SkipPipe: per-micro-batch paths that skip and swap stages "
		       "(docs/SKIPPIPE.md).\n\ncommands:\n");
		for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
			printf("  %-9s %s\n", subs[i].name, subs[i].summary);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (!strcmp(argv[1], subs[i].name))
			return subs[i].run(argc - 1, argv + 1);
	return cli_usage_error("skip", "unknown command '%s'", argv[1]);
}
