/* clpipe skip fixed: the path scheduler against baselines built from the SkipPipe paper's
 * description (collision-aware search over a time-expanded graph, conflict-based search over
 * chains, greedy) on one fixed allocation, plain and with the authors' constants; each row of
 * the fixed-allocation benchmark of docs/SKIPPIPE.md (tools/skip_fixed_alloc.sh runs them). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/clock.h"
#include "tools/cli.h"
#include "tools/skip_cli.h"

static const char *const base_name[CLP_SKIP_NBASE] = {"ca_time_expanded", "conflict_based_chains",
						       "greedy"};

typedef struct fixed_row {
	double base[CLP_SKIP_NBASE], best_base, given, sched, run_s, base_run_s;
	char why[CLP_SKIP_NBASE][160]; /* a baseline without an answer: why */
} fixed_row;

static clp_status one_model(const skip_cfg *c, const skip_inputs *in, const clp_skip_env *e,
			    const clp_skip_paths *given, fixed_row *rw)
{
	clp_skip_paths *p = NULL;
	clp_skip_opts o;
	clp_skip_report rep;
	clp_status st = CLP_OK;
	double t0 = clp_now();

	rw->best_base = INFINITY;
	rw->given = NAN;
	for (int k = 0; k < CLP_SKIP_NBASE && st == CLP_OK; k++) {
		clp_status bs;

		st = clp_skip_paths_copy(in->nodes, &p);
		if (st != CLP_OK)
			break;
		bs = clp_skip_baseline(e, p, k, &rw->base[k]);
		if (bs == CLP_ERR_NOT_FOUND || bs == CLP_ERR_INVALID) {
			rw->base[k] = NAN;
			snprintf(rw->why[k], sizeof(rw->why[k]), "%s", clp_last_error());
		} else if (bs != CLP_OK) {
			st = bs;
		} else if (rw->base[k] < rw->best_base) {
			rw->best_base = rw->base[k];
		}
		clp_skip_paths_free(p);
		p = NULL;
	}
	rw->base_run_s = clp_now() - t0;
	if (st == CLP_OK && given) {
		clp_skip_result r;

		st = clp_skip_simulate(e, given, 0, NULL, &r);
		rw->given = r.iter_s;
	}
	clp_skip_opts_default(&o);
	o.seed = (uint64_t)c->seed;
	o.iterations = (int)c->iterations;
	o.restarts = (int)c->restarts;
	o.time_limit_s = c->time_limit;
	o.verbose = c->verbose;
	o.init = in->init;
	if (st == CLP_OK)
		st = clp_skip_paths_copy(in->nodes, &p);
	t0 = clp_now();
	if (st == CLP_OK)
		st = clp_skip_schedule(e, p, &o, &rep);
	rw->run_s = clp_now() - t0;
	rw->sched = rep.iter_s;
	if (st == CLP_OK && c->paths_out[0] && e->hop_s == 0)
		st = clp_skip_save(p, &e->rules, rep.iter_s, c->paths_out);
	clp_skip_paths_free(p);
	return st;
}

static void usage_fixed(void)
{
	printf("usage: clpipe skip fixed --config tests/skip/data/paper.toml\n"
	       "                         [--alloc-from P.json | --alloc-random SEED | --layout L]\n"
	       "                         [--paths P.json] [--init P.json] [--json]\n\n"
	       "On one fixed allocation (clpipe's when none is given), for the plain cost model\n"
	       "and the SkipPipe authors' (hop + 0.35 s, 0.13 s gap after each task): the\n"
	       "iteration time of three baselines from the paper's description (collision-aware\n"
	       "search over a time-expanded graph, conflict-based search over one chain per\n"
	       "origin, greedy), of --paths (given paths, e.g. the authors') and of the path\n"
	       "scheduler, all scored by the same simulator.\n\noptions:\n");
	clp_cfg_help(&skip_schema, stdout);
}

static void alloc_name(const skip_cfg *c, char *buf, size_t cap)
{
	if (c->init[0] || c->alloc_from[0])
		snprintf(buf, cap, "from %s", c->init[0] ? c->init : c->alloc_from);
	else if (c->layout[0])
		snprintf(buf, cap, "layout %s", c->layout);
	else if (c->alloc_random > 0)
		snprintf(buf, cap, "random, seed %ld", c->alloc_random);
	else
		snprintf(buf, cap, "clpipe's");
}

/* The inputs (the plain cost model: --authors is the second row), --paths checked, and both
 * rows; *given is the caller's to free. */
static clp_status fixed_steps(skip_cfg *c, skip_inputs *in, clp_skip_paths **given,
			      fixed_row *rows)
{
	CLP_TRY(skip_load_env(c, skip_nstages(c), in));
	in->env.hop_s = c->hop_s;
	in->env.gap_s = c->gap_s;
	CLP_TRY(skip_load_nodes(c, in, c->verbose));
	if (c->paths[0]) {
		clp_skip_rules r = in->env.rules;

		CLP_TRY(clp_skip_load(c->paths, given, &r));
		CLP_TRY(clp_skip_validate(&in->env.rules, *given));
	}
	for (int k = 0; k < 2; k++) {
		clp_skip_env e = in->env;

		if (k) {
			e.hop_s = 0.35;
			e.gap_s = 0.13;
		}
		CLP_TRY(one_model(c, in, &e, *given, &rows[k]));
	}
	return CLP_OK;
}

int cmd_skip_fixed(int argc, char **argv)
{
	skip_cfg c;
	skip_inputs in = {0};
	clp_skip_paths *given = NULL;
	fixed_row rows[2];
	clp_status st;
	char name[SKIP_PATH + 32];
	int rc = skip_parse("skip fixed", argc, argv, &c, usage_fixed);

	if (rc >= 0)
		return rc;
	memset(rows, 0, sizeof(rows));
	c.authors = 0;
	st = fixed_steps(&c, &in, &given, rows);
	alloc_name(&c, name, sizeof(name));
	if (st == CLP_OK && c.json) {
		json_t *j = json_array();
		char *txt;

		for (int k = 0; k < 2; k++) {
			json_t *o = json_pack("{s:s, s:s, s:f, s:f, s:f, s:f}", "allocation", name,
					      "model", k ? "authors" : "plain", "scheduler_s",
					      rows[k].sched, "best_baseline_s", rows[k].best_base,
					      "scheduler_run_s", rows[k].run_s, "baselines_run_s",
					      rows[k].base_run_s);

			for (int b = 0; b < CLP_SKIP_NBASE; b++)
				json_object_set_new(o, base_name[b], isnan(rows[k].base[b])
						    ? json_null() : json_real(rows[k].base[b]));
			if (given)
				json_object_set_new(o, "given_paths_s", json_real(rows[k].given));
			json_array_append_new(j, o);
		}
		txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (txt)
			printf("%s\n", txt);
		free(txt);
		json_decref(j);
	} else if (st == CLP_OK) {
		for (int k = 0; k < 2; k++) {
			printf("| %s | %s |", name, k ? "authors'" : "plain");
			for (int b = 0; b < CLP_SKIP_NBASE; b++)
				if (isnan(rows[k].base[b]))
					printf(" - |");
				else
					printf(" %.2f |", rows[k].base[b]);
			if (given)
				printf(" %.2f |", rows[k].given);
			else
				printf(" - |");
			printf(" **%.2f** | %+.1f %% | %.1f s |\n", rows[k].sched,
			       100 * (rows[k].sched / rows[k].best_base - 1), rows[k].run_s);
		}
		for (int b = 0; b < CLP_SKIP_NBASE; b++)
			if (rows[0].why[b][0] || rows[1].why[b][0])
				printf("(%s: %s)\n", base_name[b], rows[0].why[b][0] ? rows[0].why[b]
										    : rows[1].why[b]);
	}
	rc = st == CLP_OK ? 0 : cli_fail("skip fixed", st);
	clp_skip_paths_free(given);
	skip_inputs_free(&in);
	return rc;
}
