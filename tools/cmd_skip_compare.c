/* clpipe skip compare: the full pipeline, random valid paths and the path scheduler on one
 * allocation, with and without the SkipPipe authors' constants (the table of docs/SKIPPIPE.md);
 * clpipe skip bench: the scheduler's speed on a synthetic 1,000-node cluster. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/skip_cli.h"
#include "cl/clock.h"

typedef struct row {
	double base, rnd_mean, rnd_min, rnd_max, sched, construct, run_s;
	int rnd_slow;            /* random sets that use a slow link */
	double rnd_slow_mean, rnd_fast_mean;
	int sched_slow, base_slow;
} row;

/* Whether a path set sends anything over a link slower than `slow` seconds per message. */
static int uses_slow(const clp_skip_env *e, const clp_skip_paths *p, double slow)
{
	int *dev = malloc((size_t)p->nnodes * sizeof(int)), hit = 0;
	double bytes = (double)e->costs->stages[0].out_bytes;

	if (!dev || !e->cluster || clp_skip_resolve(e, p, dev) != CLP_OK) {
		free(dev);
		return 0;
	}
	for (int m = 0; m < p->nmb && !hit; m++) {
		int prev = p->origin[m];

		for (int i = p->hop_start[m]; i <= p->hop_start[m + 1] && !hit; i++) {
			int nx = i < p->hop_start[m + 1] ? p->hops[i].node : p->origin[m];
			clp_route r = clp_cluster_route(e->cluster, dev[prev], dev[nx]);

			hit = prev != nx && r.spec.latency_s + bytes / r.spec.bandwidth_Bps > slow;
			prev = nx;
		}
	}
	free(dev);
	return hit;
}

/* Ten times the median message time between two nodes: "slow". */
static double slow_threshold(const clp_skip_env *e, const clp_skip_paths *p)
{
	int n = p->nnodes, k = 0, *dev = malloc((size_t)n * sizeof(int));
	double *t = malloc((size_t)n * (size_t)n * sizeof(double) + 1), med;
	double bytes = (double)e->costs->stages[0].out_bytes;

	if (!dev || !t || !e->cluster || clp_skip_resolve(e, p, dev) != CLP_OK) {
		free(dev);
		free(t);
		return INFINITY;
	}
	for (int u = 0; u < n; u++)
		for (int v = 0; v < n; v++)
			if (u != v) {
				clp_route r = clp_cluster_route(e->cluster, dev[u], dev[v]);

				t[k++] = r.spec.latency_s + bytes / r.spec.bandwidth_Bps;
			}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];

			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	med = k ? t[k / 2] : INFINITY;
	free(dev);
	free(t);
	return 10 * med;
}

/* One set of random valid paths on in's nodes: its iteration time and whether it uses a slow
 * link; *p is the caller's to free. */
static clp_status random_steps(const skip_inputs *in, const clp_skip_env *e, uint64_t seed,
			       double slow, clp_skip_paths **p, double *iter, int *uses)
{
	clp_skip_result r;

	CLP_TRY(clp_skip_paths_copy(in->nodes, p));
	CLP_TRY(clp_skip_random(e, *p, seed));
	CLP_TRY(clp_skip_simulate(e, *p, 0, NULL, &r));
	*iter = r.iter_s;
	*uses = uses_slow(e, *p, slow);
	return CLP_OK;
}

static clp_status one_random(const skip_inputs *in, const clp_skip_env *e, uint64_t seed,
			     double slow, double *iter, int *uses)
{
	clp_skip_paths *p = NULL;
	clp_status st = random_steps(in, e, seed, slow, &p, iter, uses);

	clp_skip_paths_free(p);
	return st;
}

/* The steps of one_model; *p (the path set of the step running) is the caller's to free. */
static clp_status model_steps(const skip_cfg *c, const skip_inputs *in, const clp_skip_env *e,
			      row *rw, double slow, clp_skip_paths **p)
{
	clp_skip_opts o;
	clp_skip_report rep;
	clp_status st;
	double t0;
	int fast = 0;

	clp_skip_opts_default(&o);
	o.seed = (uint64_t)c->seed;
	o.iterations = (int)c->baseline_iterations;
	CLP_TRY(clp_skip_paths_copy(in->nodes, p));
	CLP_TRY(clp_skip_full_pipeline(e, *p, (int)c->pipelines, in->nodes->nmb, &o, &rw->base));
	rw->base_slow = uses_slow(e, *p, slow);
	for (int i = 0; i < c->random; i++) {
		double it;
		int su;

		CLP_TRY(one_random(in, e, (uint64_t)(c->seed * 1000 + i), slow, &it, &su));
		rw->rnd_mean += it / c->random;
		rw->rnd_min = i == 0 || it < rw->rnd_min ? it : rw->rnd_min;
		rw->rnd_max = i == 0 || it > rw->rnd_max ? it : rw->rnd_max;
		if (su) {
			rw->rnd_slow++;
			rw->rnd_slow_mean += it;
		} else {
			fast++;
			rw->rnd_fast_mean += it;
		}
	}
	rw->rnd_slow_mean = rw->rnd_slow ? rw->rnd_slow_mean / rw->rnd_slow : NAN;
	rw->rnd_fast_mean = fast ? rw->rnd_fast_mean / fast : NAN;
	clp_skip_paths_free(*p);
	*p = NULL;
	CLP_TRY(clp_skip_paths_copy(in->nodes, p));
	o.iterations = (int)c->iterations;
	o.restarts = (int)c->restarts;
	o.time_limit_s = c->time_limit;
	o.verbose = c->verbose;
	t0 = clp_now();
	st = clp_skip_schedule(e, *p, &o, &rep);
	rw->run_s = clp_now() - t0;
	CLP_TRY(st);
	rw->sched = rep.iter_s;
	rw->construct = rep.construct_iter_s;
	rw->sched_slow = uses_slow(e, *p, slow);
	if (c->paths_out[0] && e->hop_s == 0)
		CLP_TRY(clp_skip_save(*p, &e->rules, rep.iter_s, c->paths_out));
	return CLP_OK;
}

static clp_status one_model(const skip_cfg *c, const skip_inputs *in, const clp_skip_env *e,
			    row *rw, double slow)
{
	clp_skip_paths *p = NULL;
	clp_status st;

	memset(rw, 0, sizeof(*rw));
	st = model_steps(c, in, e, rw, slow, &p);
	clp_skip_paths_free(p);
	return st;
}

static void usage_compare(void)
{
	printf("usage: clpipe skip compare --config tests/skip/data/paper.toml [--skip.KEY=V ...]\n\n"
	       "Allocates the nodes once, then for the plain cost model and the SkipPipe authors'\n"
	       "(hop + 0.35 s, 0.13 s gap after each task) prints the iteration time of the full\n"
	       "pipeline (--pipelines K complete pipelines, same global batch), of --random R\n"
	       "random valid path sets and of the path scheduler, and the scheduler's run time.\n"
	       "\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

int cmd_skip_compare(int argc, char **argv)
{
	skip_cfg c;
	skip_inputs in = {0};
	row rows[2];
	clp_status st;
	double slow, t_alloc = 0;
	int rc = skip_parse("skip compare", argc, argv, &c, usage_compare);

	if (rc >= 0)
		return rc;
	if (c.pipelines < 1 || c.random < 1)
		return cli_usage_error("skip compare", "--pipelines and --random must be >= 1");
	c.authors = 0;
	st = skip_load_env(&c, skip_nstages(&c), &in);
	if (st == CLP_OK) {
		in.env.hop_s = c.hop_s;
		in.env.gap_s = c.gap_s;
		t_alloc = clp_now();
		st = skip_load_nodes(&c, &in, c.verbose);
		t_alloc = clp_now() - t_alloc;
	}
	slow = st == CLP_OK ? slow_threshold(&in.env, in.nodes) : 0;
	for (int k = 0; k < 2 && st == CLP_OK; k++) {
		clp_skip_env e = in.env;

		if (k) {
			e.hop_s = 0.35;
			e.gap_s = 0.13;
		}
		st = one_model(&c, &in, &e, &rows[k], slow);
	}
	if (st == CLP_OK && c.json) {
		json_t *j = json_array();
		char *txt;

		for (int k = 0; k < 2; k++)
			json_array_append_new(j, json_pack(
				"{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:i}", "model",
				k ? "authors" : "plain", "full_pipeline_s", rows[k].base,
				"random_mean_s", rows[k].rnd_mean, "random_min_s", rows[k].rnd_min,
				"random_max_s", rows[k].rnd_max, "scheduler_s", rows[k].sched,
				"construction_s", rows[k].construct, "scheduler_run_s", rows[k].run_s,
				"random_sets_using_slow_link", rows[k].rnd_slow, "scheduler_uses_slow_link",
				rows[k].sched_slow, "full_pipeline_uses_slow_link", rows[k].base_slow));
		txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (txt)
			printf("%s\n", txt);
		free(txt);
		json_decref(j);
	} else if (st == CLP_OK) {
		skip_print_nodes(in.nodes);
		printf("\n%d micro-batches (%ld per stage-0 node), P = %d of S = %d, J = %d, W = %d, "
		       "M = %d; full pipeline: %ld pipelines of %ld\n\n", in.nodes->nmb,
		       c.microbatches, in.env.rules.path_len, in.env.rules.nstages,
		       in.env.rules.max_jump, in.env.rules.max_swaps, in.env.rules.memory,
		       c.pipelines, in.nodes->nmb / c.pipelines);
		printf("| cost model | full pipeline | random valid paths (mean of %ld; min-max) | "
		       "scheduler (best start) | vs full | vs random | scheduler run time |\n",
		       c.random);
		printf("|---|---|---|---|---|---|---|\n");
		for (int k = 0; k < 2; k++)
			printf("| %s | %.2f s | %.2f s (%.2f-%.2f) | %.2f s (%.2f s) | %+.0f %% | %+.0f %% | "
			       "%.1f s |\n", k ? "authors' (hop + 0.35 s, gap 0.13 s)" : "plain",
			       rows[k].base, rows[k].rnd_mean, rows[k].rnd_min, rows[k].rnd_max,
			       rows[k].sched, rows[k].construct,
			       100 * (rows[k].sched / rows[k].base - 1),
			       100 * (rows[k].sched / rows[k].rnd_mean - 1), rows[k].run_s);
		printf("\nallocation %.1f s (%s); scheduler run time: construction and search, "
		       "%ld moves\n", t_alloc, c.layout[0] ? "the layout's" : "allocated once, plain "
		       "model", c.iterations);
		printf("\nslow links (message > 10 x the median, %.3g s):\n", slow);
		for (int k = 0; k < 2; k++)
			printf("  %s: random sets using one: %d of %ld (mean %.2f s; the others %.2f "
			       "s); scheduler %s; full pipeline %s\n", k ? "authors'" : "plain",
			       rows[k].rnd_slow, c.random, rows[k].rnd_slow_mean, rows[k].rnd_fast_mean,
			       rows[k].sched_slow ? "uses one" : "avoids them",
			       rows[k].base_slow ? "uses one" : "avoids them");
	}
	rc = st == CLP_OK ? 0 : cli_fail("skip compare", st);
	skip_inputs_free(&in);
	return rc;
}

/* ---- bench ---- */

static void usage_bench(void)
{
	printf("usage: clpipe skip bench [--nodes 1000] [--iterations N] [--time-limit S]\n"
	       "                         [--table ../shared/networks/gcp-12-regions.tsv]\n\n"
	       "The path scheduler on a synthetic cluster: nodes in the table's regions (node i in\n"
	       "region i mod 12), speeds drawn in [0.7, 1.3], S = 19 stages (a tenth of the nodes\n"
	       "on stage 0, the rest spread evenly), P = 13 (a third skipped), 6 micro-batches\n"
	       "per stage-0 node, M = 3; the per-layer costs of the paper's experiment.\n"
	       "\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

/* The paper's per-stage costs: 4 layers, 2 sequences, 0.055 s per sequence and layer. */
static clp_status paper_costs(int S, clp_costs **out)
{
	clp_costs *k;

	CLP_TRY(clp_costs_create(S + 1, &k));
	for (int s = 0; s <= S; s++) {
		clp_stage_cost *x = &k->stages[s];

		x->t[CLP_COST_FWD] = s < S ? 0.44 : 0.11;
		x->t[CLP_COST_BWD] = s < S ? 0.66 : 0;
		x->t[CLP_COST_BWD_B] = x->t[CLP_COST_BWD] / 2;
		x->t[CLP_COST_BWD_W] = x->t[CLP_COST_BWD] / 2;
		x->out_bytes = s < S ? 33554432 : 0;
		x->nlayers = 1;
	}
	snprintf(k->source, sizeof(k->source), "synthetic: the SkipPipe paper's per-layer costs");
	k->precision = CLP_F16; /* the paper's fp16 activations: 32 MiB a message */
	*out = k;
	return CLP_OK;
}

/* The synthetic cluster of `skip bench` and what was measured on it. */
#define BENCH_S 19
typedef struct bench_run {
	clp_cluster *cl;
	clp_costs *costs;
	clp_skip_paths *p, *q; /* the scheduled path set, the random one */
	clp_skip_env e;
	clp_skip_report rep;
	clp_skip_result r;     /* the random set's */
	int n, count[BENCH_S];
	double t_alloc, last;
} bench_run;

/* n nodes over the table's 12 regions at random speeds (a fixed generator), the paper's costs
 * in the configured precision, the rules of the benchmark. */
static clp_status bench_cluster(const skip_cfg *c, bench_run *b)
{
	const char *regions[12] = {"Belgium", "Canada", "Germany", "Iowa", "Japan", "LA",
				   "NL", "Oregon", "Singapore", "Taiwan", "London", "Australia"};
	int S = BENCH_S, n = b->n;
	uint64_t rng = 7;

	CLP_TRY(clp_skip_cluster_from_table(c->table, regions, 12, n,
					    (clp_link_spec){1e-3, 2147483648.0}, &b->cl));
	for (int d = 0; d < n; d++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		b->cl->devices[d].speed = 0.7 + 0.6 * (double)(rng >> 11) / 9007199254740992.0;
	}
	CLP_TRY(paper_costs(S, &b->costs));
	if (strcmp(c->precision, "table")) {
		clp_dtype prec = CLP_F16;

		CLP_TRY(clp_costs_precision_parse(c->precision, "skip.precision", &prec));
		clp_costs_set_precision(b->costs, prec);
	}
	clp_skip_rules_default(&b->e.rules, S);
	b->e.rules.path_len = 13;
	b->e.rules.memory = 3;
	b->e.cluster = b->cl;
	b->e.costs = b->costs;
	return CLP_OK;
}

/* Allocate, score one random path set, schedule, and find the last backward. */
static clp_status bench_steps(const skip_cfg *c, bench_run *b)
{
	clp_skip_opts o;
	clp_skip_result d;
	clp_status st;
	double t0;

	CLP_TRY(bench_cluster(c, b));
	CLP_TRY(clp_skip_paths_create(&b->p, BENCH_S, b->n, 0));
	for (int i = 0; i < b->n; i++)
		snprintf(b->p->node_device[i], CLP_NAME_MAX, "%s", b->cl->devices[i].id);
	clp_skip_opts_default(&o);
	o.seed = (uint64_t)c->seed;
	o.iterations = (int)c->alloc_iterations;
	t0 = clp_now();
	st = clp_skip_allocate(&b->e, b->p, b->count, 6, &o);
	b->t_alloc = clp_now() - t0;
	CLP_TRY(st);
	CLP_TRY(clp_skip_paths_copy(b->p, &b->q));
	CLP_TRY(clp_skip_random(&b->e, b->q, 1));
	CLP_TRY(clp_skip_simulate(&b->e, b->q, 0, NULL, &b->r));
	o.iterations = (int)c->iterations;
	o.restarts = (int)c->restarts;
	o.time_limit_s = c->time_limit;
	o.verbose = c->verbose;
	CLP_TRY(clp_skip_schedule(&b->e, b->p, &o, &b->rep));
	if (c->paths_out[0])
		CLP_TRY(clp_skip_save(b->p, &b->e.rules, b->rep.iter_s, c->paths_out));
	/* the last backward: the rest is the stages' gradient all-reduces */
	CLP_TRY(clp_skip_simulate(&b->e, b->p, 1, c->trace[0] ? c->trace : NULL, &d));
	for (int m = 0; m < b->p->nmb; m++)
		b->last = d.mb_end_s[m] > b->last ? d.mb_end_s[m] : b->last;
	clp_skip_result_free(&d);
	return CLP_OK;
}

static void print_bench(const skip_cfg *c, const bench_run *b)
{
	const clp_skip_report *rep = &b->rep;

	printf("bench skip: %d nodes (%d on stage 0, %d stages), %d micro-batches, P = %d\n",
	       b->n, b->count[0], BENCH_S, b->p->nmb, b->e.rules.path_len);
	printf("  allocation    %8.2f s (%ld swaps tried)\n", b->t_alloc, c->alloc_iterations);
	printf("  starts        %8.2f s -> iteration %.4g s\n", rep->construct_s,
	       rep->construct_iter_s);
	printf("  search        %8.2f s, %d simulations (%.1f / s), %d accepted -> "
	       "iteration %.4g s\n", rep->search_s, rep->evaluations,
	       rep->search_s > 0 ? rep->evaluations / rep->search_s : 0, rep->accepted,
	       rep->iter_s);
	printf("                last backward at %.4g s (then the gradient all-reduces, "
	       "rings of up to %d nodes)\n", b->last, b->count[0]);
	printf("  random paths  iteration %.4g s (one set)\n", b->r.iter_s);
}

int cmd_skip_bench(int argc, char **argv)
{
	skip_cfg c;
	bench_run b = {0};
	int S = BENCH_S, n, rc = skip_parse("skip bench", argc, argv, &c, usage_bench);
	clp_status st;

	if (rc >= 0)
		return rc;
	n = b.n = (int)c.nodes;
	if (n < 2 * S)
		return cli_usage_error("skip bench", "--nodes must be at least %d", 2 * S);
	if (!c.table[0])
		return cli_usage_error("skip bench", "--table (a network table, e.g. "
				       "../shared/networks/gcp-12-regions.tsv) is required");
	b.count[0] = n / 10;
	for (int s = 1; s < S; s++)
		b.count[s] = (n - n / 10) / (S - 1);
	for (int s = 1, left = n - b.count[0] - (S - 1) * b.count[1]; left > 0; s++, left--)
		b.count[s]++; /* any remainder: one more on the first stages */
	st = bench_steps(&c, &b);
	if (st == CLP_OK)
		print_bench(&c, &b);
	rc = st == CLP_OK ? 0 : cli_fail("skip bench", st);
	clp_skip_result_free(&b.r);
	clp_skip_paths_free(b.p);
	clp_skip_paths_free(b.q);
	clp_costs_free(b.costs);
	clp_cluster_free(b.cl);
	return rc;
}
