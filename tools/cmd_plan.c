/* clpipe plan: placement and schedule for a cluster of mixed devices (docs/PLACEMENT.md). Reads a
 * cluster (a cluster file, hwloc files, an inventory, or the running job under mpirun), a block
 * cost table (clpipe bench --model, or PipeFisher profiles) and a training config; prints the
 * chosen plan next to the naive equal split and writes the plan, its layout, its schedule and
 * cost table (for clpipe sim) and the training config that runs it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "engine/io/config.h"
#include "engine/plan/plan.h"
#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "tools/cli.h"
#include "topology/discover.h"
#include "topology/gather.h"

static void help(void)
{
	printf("usage: clpipe plan --model CONFIG [--section.key=VALUE ...]\n"
	       "                   (--cluster F | --topology XML --devices F [--hosts N] |\n"
	       "                    --inventory F | --live)\n"
	       "                   (--blocks F | --profile CSV[,CSV..] [--batch B])\n"
	       "                   [--out PREFIX] [--schedules LIST] [--stages D] [--replicas R]\n"
	       "                   [--max-replicas R] [--chunks v] [--recompute auto|on|off]\n"
	       "                   [--pipefisher auto|on|off] [--reserve F] [--no-drop]\n"
	       "                   [--include-cpu] [--skip P [--skip-stages S]] [--verbose]\n"
	       "                   [--precision fp32|bf16|fp16]\n\n"
	       "Chooses which devices serve which pipeline stages, the layers of each stage, the\n"
	       "data-parallel degree, the schedule (with or without PipeFisher for K-FAC) and\n"
	       "recomputation where memory needs it; every candidate is simulated with its memory\n"
	       "checked against each device. Prints the plan and the naive equal split (every\n"
	       "device, 1F1B, layers split evenly) with their predicted step times.\n\n"
	       "  --model CONFIG      the training config (model, train.batch, train.seq,\n"
	       "                      train.micro_batches x pipeline.replicas = the global batch,\n"
	       "                      optim.name); --section.key=VALUE overrides its fields\n"
	       "  --cluster F         a cluster file (docs/FORMATS.md)\n"
	       "  --topology XML --devices F   one host from hwloc files; --hosts N repeats it\n"
	       "  --inventory F       a cluster inventory (clpipe devices --json under mpirun)\n"
	       "  --live              under mpirun: this job's hosts and devices (rank 0 plans)\n"
	       "  --precision P       train.precision: activations, messages and the weight copy\n"
	       "                      in 16 bits for bf16 / fp16 (memory from the model, times\n"
	       "                      from the block table)\n"
	       "  --blocks F          block cost table from clpipe bench --model\n"
	       "  --profile CSV,..    block table from PipeFisher profiles, one per device kind, at\n"
	       "                      micro-batch size --batch (default train.batch)\n"
	       "  --out PREFIX        write PREFIX.plan.json, .layout.json, .toml (the config that\n"
	       "                      runs the plan), .schedule.json, .costs.json (and\n"
	       "                      .cluster.json when the cluster was derived)\n"
	       "  --schedules LIST    comma list of %s (default all)\n"
	       "  --stages D, --replicas R, --max-replicas R   restrict the search\n"
	       "  --chunks v          chunks per rank of interleaved 1F1B (default 2)\n"
	       "  --recompute MODE    auto (where memory needs it), on, off\n"
	       "  --pipefisher MODE   K-FAC, Shampoo, Muon with muon.delay: auto (try both), on,\n"
	       "                      off\n"
	       "  --reserve F         fraction of device memory left free (default 0.1)\n"
	       "  --no-drop           always use every device (default: also try without the\n"
	       "                      slowest kinds)\n"
	       "  --include-cpu       place stages on CPU devices of hosts with accelerators too\n"
	       "  --skip P            also report SkipPipe (docs/SKIPPIPE.md) on the same devices:\n"
	       "                      paths of P of --skip-stages S stages (default: the plan's\n"
	       "                      depth); it trains differently and is never chosen; --out\n"
	       "                      writes its paths to PREFIX.paths.json\n",
	       clp_sched_kind_list());
}

typedef struct plan_args {
	const char *model, *cluster, *topology, *devices, *inventory, *blocks, *profile, *out;
	const char *precision;
	int live, hosts, batch, include_cpu, skip, skip_stages;
	clp_plan_opts o;
} plan_args;

static int parse_mode(const char *v, int *out)
{
	if (!strcmp(v, "auto"))
		*out = -1;
	else if (!strcmp(v, "on"))
		*out = 1;
	else if (!strcmp(v, "off"))
		*out = 0;
	else
		return -1;
	return 0;
}

static int parse_args(int argc, char **argv, plan_args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		const char *str[] = {"--model", "--cluster", "--topology", "--devices", "--inventory",
				     "--blocks", "--profile", "--out", "--precision"};
		const char **dst[] = {&a->model, &a->cluster, &a->topology, &a->devices,
				      &a->inventory, &a->blocks, &a->profile, &a->out,
				      &a->precision};
		int got = 0, k;

		if (!strcmp(argv[i], "--live")) {
			a->live = 1;
			continue;
		} else if (!strcmp(argv[i], "--no-drop")) {
			a->o.drop_slow = 0;
			continue;
		} else if (!strcmp(argv[i], "--include-cpu")) {
			a->include_cpu = 1;
			continue;
		} else if (!strcmp(argv[i], "--verbose")) {
			a->o.verbose = 1;
			continue;
		}
		for (k = 0; k < 9 && !got; k++)
			if ((got = cli_value(argc, argv, &i, str[k], &v)) != 0)
				*dst[k] = v;
		if (got < 0)
			return cli_usage_error("plan", "%s needs a value", argv[i]);
		if (got)
			continue;
		if ((got = cli_value(argc, argv, &i, "--schedules", &v)) > 0) {
			char buf[256], *save = NULL;

			a->o.kinds = 0;
			snprintf(buf, sizeof(buf), "%s", v);
			for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				int kd = clp_sched_kind_parse(t);

				if (kd < 0)
					return cli_usage_error("plan", "--schedules: '%s' is not one of "
							       "%s", t, clp_sched_kind_list());
				a->o.kinds |= 1u << kd;
			}
		} else if (got == 0 && (got = cli_value(argc, argv, &i, "--recompute", &v)) > 0) {
			if (parse_mode(v, &a->o.recompute))
				return cli_usage_error("plan", "--recompute: expected auto, on or off");
		} else if (got == 0 && (got = cli_value(argc, argv, &i, "--pipefisher", &v)) > 0) {
			if (parse_mode(v, &a->o.pipefisher))
				return cli_usage_error("plan", "--pipefisher: expected auto, on or off");
		} else if (got == 0 && (got = cli_value(argc, argv, &i, "--reserve", &v)) > 0) {
			char *end;

			a->o.mem_reserve = strtod(v, &end);
			if (*end || !(a->o.mem_reserve >= 0 && a->o.mem_reserve < 1))
				return cli_usage_error("plan", "--reserve: expected a fraction in "
						       "[0, 1)");
		} else if (got == 0) {
			const char *num[] = {"--stages", "--replicas", "--max-replicas", "--chunks",
					     "--hosts", "--batch", "--skip", "--skip-stages"};
			int *nd[] = {&a->o.fixed_depth, &a->o.fixed_replicas, &a->o.max_replicas,
				     &a->o.chunks, &a->hosts, &a->batch, &a->skip, &a->skip_stages};
			char *end;
			long n;

			for (k = 0; k < 8; k++)
				if ((got = cli_value(argc, argv, &i, num[k], &v)) != 0)
					break;
			if (k == 8)
				return cli_usage_error("plan", "unknown option '%s'", argv[i]);
			n = got > 0 ? strtol(v, &end, 10) : -1;
			if (got < 0 || *end || n < 1 || n > 1 << 20)
				return cli_usage_error("plan", "%s needs a number >= 1", num[k]);
			*nd[k] = (int)n;
		}
		if (got < 0)
			return cli_usage_error("plan", "%s needs a value", argv[i]);
	}
	return 0;
}

/* --topology with --devices: the described machine; --hosts N: N copies of it, named
 * <host>-<i>. */
static clp_status described_hosts(const plan_args *a, clp_topo_host *host, clp_topo_cluster *inv)
{
	clp_topo_cldev *devs = NULL;
	int n = 0, nh = a->hosts > 0 ? a->hosts : 1;
	clp_status st = clp_topo_cldevs_read(a->devices, &devs, &n);

	if (st == CLP_OK)
		st = clp_topo_discover(a->topology, devs, n, host);
	free(devs);
	CLP_TRY(st);
	inv->hosts = calloc((size_t)nh, sizeof(*inv->hosts));
	if (!inv->hosts)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int h = 0; h < nh; h++) {
		CLP_TRY(clp_topo_host_copy(&inv->hosts[h], host));
		inv->nhosts++;
		if (nh > 1) {
			char name[256];

			snprintf(name, sizeof(name), "%.40s-%d", host->name, h);
			snprintf(inv->hosts[h].name, sizeof(inv->hosts[h].name), "%s", name);
		}
	}
	return CLP_OK;
}

/* The hosts: an inventory file, this job's ranks (--live), or a described machine. */
static clp_status read_inventory(const plan_args *a, clp_comm *world, clp_topo_host *host,
				 clp_topo_cluster *inv)
{
	if (a->inventory)
		return clp_topo_cluster_read(a->inventory, inv);
	if (a->live) {
		CLP_TRY(clp_topo_discover_live(host));
		return clp_topo_gather(world, host, 0, inv);
	}
	return described_hosts(a, host, inv);
}

/* The cluster the plan places on; *derived when it did not come from a cluster file. */
static clp_status load_cluster(const plan_args *a, clp_comm *world, const clp_costs *blocks,
			       clp_cluster **out, int *derived)
{
	clp_topo_cluster inv = {0};
	clp_topo_host host = {0};
	clp_status st;

	*derived = 1;
	if (a->cluster) {
		*derived = 0;
		return clp_cluster_load(a->cluster, out);
	}
	st = read_inventory(a, world, &host, &inv);
	if (st == CLP_OK)
		st = clp_plan_cluster_from_inventory(&inv, blocks, NULL, a->include_cpu, out);
	clp_topo_cluster_clear(&inv);
	clp_topo_host_clear(&host);
	return st;
}

static clp_status load_blocks(const plan_args *a, const clp_plan_model *m, clp_costs **out)
{
	if (a->blocks) {
		CLP_TRY(clp_costs_load(a->blocks, out));
		return clp_plan_blocks_check(*out, a->blocks);
	}
	{
		char buf[2048], *save = NULL;
		const char *files[16];
		int n = 0;

		snprintf(buf, sizeof(buf), "%s", a->profile);
		for (char *t = strtok_r(buf, ",", &save); t && n < 16; t = strtok_r(NULL, ",", &save))
			files[n++] = t;
		return clp_plan_blocks_from_profiles(files, n, a->batch ? a->batch : (int)m->batch,
						     out);
	}
}

static void gib(int64_t b, char *out, size_t n)
{
	snprintf(out, n, "%.2f GiB", (double)b / 1073741824.0);
}

static void print_plan(const char *title, const clp_plan *p, const clp_cluster *c, int ranks)
{
	printf("%-6s %s, %d stage%s x %d replica%s", title, clp_sched_kind_name(p->kind),
	       p->depth, p->depth > 1 ? "s" : "", p->replicas, p->replicas > 1 ? "s" : "");
	if (p->kind == CLP_SCHED_INTERLEAVED)
		printf(" (%d chunks per rank)", p->chunks);
	printf(", %d micro-batches per replica%s%s: step %.6g ms, bubble %.1f %%%s\n",
	       p->microbatches, p->recompute ? ", recomputation" : "",
	       p->pipefisher ? p->pf_split ? ", PipeFisher (split)" : ", PipeFisher" : "",
	       p->step_s * 1e3, 100 * p->bubble,
	       p->over_memory ? "  OVER MEMORY" : "");
	if (p->pipefisher) /* the steady step ranks; a run pays the cold cycle once */
		printf("       step: steady state (two cycles less one, what the plan ranks by); "
		       "first cycle from idle ranks %.6g ms%s\n", p->first_step_s * 1e3,
		       p->pf_phases ? "; Shampoo's roots in phases" : "");
	printf("       layers per stage [");
	for (int s = 0; s < p->nstages; s++)
		printf("%s%d", s ? ", " : "", p->layers[s]);
	printf("]%s%s\n", p->note[0] ? "; " : "", p->note);
	for (int r = 0; ranks && r < p->nranks; r++) {
		const clp_device *d = &c->devices[p->device[r]];
		char pk[32], us[32];

		gib(p->peak_bytes[r], pk, sizeof(pk));
		if (p->usable_bytes[r] > 0)
			gib(p->usable_bytes[r], us, sizeof(us));
		else
			snprintf(us, sizeof(us), "unknown");
		printf("       rank %3d  %-28s %-12s peak %10s of %10s%s\n", r, d->id, d->kind, pk, us,
		       p->usable_bytes[r] > 0 && p->peak_bytes[r] > p->usable_bytes[r] ? "  OVER"
										: "");
	}
}

/* The files of write_outputs, each step returning at the first failure; *s, *costs and *l are
 * the caller's to free. */
static clp_status write_files(const plan_args *a, const clp_plan *p, const clp_plan *naive,
			      const clp_cluster *c, const clp_costs *blocks, const clp_plan_model *m,
			      clp_train_config *cfg, int derived, const char *lay, clp_sched **s,
			      clp_costs **costs, clp_layout **l)
{
	char path[1100];
	clp_afile toml;
	FILE *f;

	snprintf(path, sizeof(path), "%s.plan.json", a->out);
	CLP_TRY(clp_plan_save(p, c, m, naive, path));
	CLP_TRY(clp_plan_schedule(p, m, s));
	CLP_TRY(clp_plan_costs(blocks, m, p, *s, costs));
	CLP_TRY(clp_plan_layout(p, c, *s, l));
	CLP_TRY(clp_layout_save(*l, lay));
	snprintf(path, sizeof(path), "%s.schedule.json", a->out);
	CLP_TRY(clp_sched_save(*s, path));
	snprintf(path, sizeof(path), "%s.costs.json", a->out);
	CLP_TRY(clp_costs_save(*costs, path));
	snprintf(path, sizeof(path), "%s.cluster.json", a->out);
	if (derived)
		CLP_TRY(clp_cluster_save(c, path));
	CLP_TRY(clp_plan_apply_config(p, lay, cfg));
	snprintf(path, sizeof(path), "%s.costs.json", a->out);
	/* Shampoo's, SOAP's and the delayed Muon's costs would be measured at start-up without
	 * the file; with it train runs the pass on the table the plan scored */
	if ((m->shampoo || m->soap || m->muon_delay) && p->pipefisher > 0) {
		if (strlen(path) >= sizeof(cfg->pipeline.pipefisher_costs))
			return clp_error(CLP_ERR_INVALID, "plan: %s: path too long for "
					 "pipeline.pipefisher_costs", path);
		memcpy(cfg->pipeline.pipefisher_costs, path, strlen(path) + 1);
	}
	snprintf(path, sizeof(path), "%s.toml", a->out);
	CLP_TRY(clp_afile_open(&toml, path));
	f = toml.f;
	fprintf(f, "# clpipe plan: %s, %d x %d ranks, predicted step %.6g ms\n"
		   "# run: mpirun -np %d clpipe train --config %s\n",
		clp_sched_kind_name(p->kind), p->depth, p->replicas, p->step_s * 1e3, p->nranks,
		path);
	clp_cfg_write(&clp_train_schema, cfg, f, 0);
	return clp_afile_commit(&toml);
}

/* PREFIX.plan.json, .layout.json, .schedule.json, .costs.json, .toml (and .cluster.json). */
static clp_status write_outputs(const plan_args *a, const clp_plan *p, const clp_plan *naive,
				const clp_cluster *c, const clp_costs *blocks,
				const clp_plan_model *m, clp_train_config *cfg, int derived)
{
	char path[1100], lay[1100], pf[160] = "";
	clp_sched *s = NULL;
	clp_costs *costs = NULL;
	clp_layout *l = NULL;
	clp_status st;

	/* the schedule written is the base: the simulator's pass places Shampoo's or the delayed
	 * Muon's items as the plan did, from the same shapes (their times: --hidden, a 4x MLP) */
	if (p->pipefisher > 0 && (m->shampoo || m->soap || m->muon_delay))
		snprintf(pf, sizeof(pf), " --pipefisher --pf-optim %s --pf-%s %d --hidden %d "
			 "--batch %zu --seq %zu",
			 m->shampoo ? "shampoo" : m->soap ? "soap" : "muon-delay",
			 m->shampoo ? "iters" : "ns-steps",
			 m->shampoo ? m->shampoo_iters : m->muon_ns_steps, m->cfg.d_model, m->batch,
			 m->seq);
	if (p->pipefisher > 0 && m->shampoo && p->pf_phases) /* the roots in phases */
		strcat(pf, " --kfac-split-bits 4");
	snprintf(lay, sizeof(lay), "%s.layout.json", a->out);
	st = write_files(a, p, naive, c, blocks, m, cfg, derived, lay, &s, &costs, &l);
	if (st == CLP_OK)
		printf("\nwrote %s.{plan.json,layout.json,schedule.json,costs.json,toml%s}\n"
		       "check: clpipe sim --schedule-file %s.schedule.json --costs %s.costs.json "
		       "--cluster %s --layout %s%s\n"
		       "train: mpirun -np %d clpipe train --config %s.toml\n", a->out,
		       derived ? ",cluster.json" : "", a->out, a->out,
		       derived ? strcat(strcpy(path, a->out), ".cluster.json") : a->cluster, lay, pf,
		       p->nranks, a->out);
	clp_layout_free(l);
	clp_costs_free(costs);
	clp_sched_free(s);
	return st;
}

/* SkipPipe on the same devices, next to the plan (it trains differently: never chosen). */
static clp_status skippipe(const plan_args *a, const clp_plan *best, const clp_cluster *c,
			   const clp_costs *blocks, const clp_plan_model *m)
{
	clp_plan_skip sk;
	int S = a->skip_stages ? a->skip_stages : best->depth;
	char path[1100];
	clp_status st;

	st = clp_plan_skippipe(c, blocks, m, S, a->skip, 2000, &sk);
	if (st != CLP_OK) {
		printf("\nskippipe  not applicable: %s\n", clp_last_error());
		return CLP_OK;
	}
	printf("\nskippipe  paths of %d of %d stages, %d micro-batches from each of %d origins: "
	       "iteration %.6g ms (the plan's step / %.2f); %s; clpipe train does not run path "
	       "schedules yet\n", a->skip, S, sk.per_origin, m->micro_batches / sk.per_origin,
	       sk.iter_s * 1e3, sk.iter_s > 0 ? best->step_s / sk.iter_s : 0,
	       a->skip < S ? "each micro-batch skips stages, so it trains differently"
			   : "every micro-batch visits every stage, on nodes of its own path");
	snprintf(path, sizeof(path), "%s.paths.json", a->out ? a->out : "");
	if (a->out) {
		st = clp_skip_save(sk.paths, &sk.rules, sk.iter_s, path);
		if (st == CLP_OK)
			printf("wrote %s (clpipe skip simulate --paths %s --cluster ... --costs ...)\n",
			       path, path);
	}
	clp_plan_skip_clear(&sk);
	return st;
}

/* The cluster line, the plan, the naive split beside it, and the notes. */
static void print_summary(const clp_cluster *c, const clp_costs *blocks, const clp_plan_model *m,
			  const clp_plan *best, const clp_plan *naive, int naive_ok)
{
	printf("cluster  %d device%s on %d host%s; model %s, %d layers, micro-batch %zu x %zu, "
	       "%d micro-batches per step, %s; %d simulations\n", c->ndevices,
	       c->ndevices > 1 ? "s" : "", c->nhosts, c->nhosts > 1 ? "s" : "",
	       clp_preset_name(m->cfg.preset), m->cfg.n_layer, m->batch, m->seq,
	       m->micro_batches, clp_dtype_name(m->precision), best->evaluations);
	if (blocks->precision != m->precision)
		printf("note: the block table was measured in %s: its times are used as "
		       "they are; memory and messages are %s's\n",
		       clp_dtype_name(blocks->precision), clp_dtype_name(m->precision));
	printf("\n");
	print_plan("plan", best, c, 1);
	if (naive_ok) {
		printf("\n");
		print_plan("naive", naive, c, 0);
		printf("\nplan vs naive: %.6g ms vs %.6g ms%s (%.2fx)\n", best->step_s * 1e3,
		       naive->step_s * 1e3, naive->over_memory ? " (naive over memory)" : "",
		       best->step_s > 0 ? naive->step_s / best->step_s : 0);
	}
	if (best->pipefisher > 0)
		printf("note: the written config sets pipeline.pipefisher = true: clpipe train runs "
		       "%s in the schedule's bubbles (docs/%s)\n",
		       m->shampoo      ? "Shampoo's root refreshes (stale roots)"
		       : m->soap       ? "SOAP's eigenbasis refreshes (stale bases)"
		       : m->muon_delay ? "the delayed Muon's Newton-Schulz (muon.delay)"
				       : "K-FAC's work",
		       m->shampoo || m->soap || m->muon_delay ? "OPTIMIZERS.md" : "KFAC.md");
}

/* The model, its block table and the cluster (every rank: --live gathers the inventory). */
static clp_status plan_inputs(const plan_args *a, clp_comm *world, const clp_train_config *cfg,
			      clp_plan_model *m, clp_costs **blocks, clp_cluster **c, int *derived)
{
	CLP_TRY(clp_plan_model_from_config(cfg, m));
	CLP_TRY(load_blocks(a, m, blocks));
	return load_cluster(a, world, *blocks, c, derived);
}

/* Rank 0: search, print, write the files, SkipPipe beside the plan. */
static clp_status plan_steps(const plan_args *a, clp_train_config *cfg, const clp_plan_model *m,
			     const clp_costs *blocks, const clp_cluster *c, int derived,
			     clp_plan *best, clp_plan *naive)
{
	int naive_ok;

	CLP_TRY(clp_plan_search(c, blocks, m, &a->o, best));
	naive_ok = clp_plan_naive(c, blocks, m, &a->o, naive) == CLP_OK;
	print_summary(c, blocks, m, best, naive, naive_ok);
	if (a->out)
		CLP_TRY(write_outputs(a, best, naive_ok ? naive : NULL, c, blocks, m, cfg, derived));
	if (a->skip)
		CLP_TRY(skippipe(a, best, c, blocks, m));
	return CLP_OK;
}

int cmd_plan(int argc, char **argv)
{
	plan_args a;
	clp_train_config cfg;
	clp_plan_model m;
	clp_costs *blocks = NULL;
	clp_cluster *c = NULL;
	clp_plan best = {0}, naive = {0};
	clp_comm *world = NULL;
	clp_status st;
	int rc = 0, derived = 0;

	memset(&a, 0, sizeof(a));
	clp_plan_opts_default(&a.o);
	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			help();
			return 0;
		}
	clp_cfg_defaults(&clp_train_schema, &cfg);
	for (int i = 1; i + 1 < argc; i++) /* the model's config first: overrides follow it */
		if (!strcmp(argv[i], "--model") &&
		    (st = clp_cfg_load_file(&clp_train_schema, &cfg, argv[i + 1])) != CLP_OK)
			return cli_fail("plan", st);
	if ((st = clp_cfg_args(&clp_train_schema, &cfg, &argc, argv)) != CLP_OK)
		return cli_fail("plan", st);
	if ((rc = parse_args(argc, argv, &a)) != 0)
		return rc;
	if (!a.model)
		return cli_usage_error("plan", "--model CONFIG is required");
	if (!!a.cluster + !!a.topology + !!a.inventory + a.live != 1 || !a.topology != !a.devices)
		return cli_usage_error("plan", "give one of --cluster, --topology with --devices, "
				       "--inventory, --live");
	if (!!a.blocks + !!a.profile != 1)
		return cli_usage_error("plan", "give --blocks or --profile");
	if (a.precision &&
	    clp_cfg_set(&clp_train_schema, &cfg, "train.precision", a.precision, "--precision") !=
		    CLP_OK)
		return cli_usage_error("plan", "%s", clp_last_error());
	if (a.live && (st = clp_comm_world(&argc, &argv, &world)) != CLP_OK)
		return cli_fail("plan", st);
	st = plan_inputs(&a, world, &cfg, &m, &blocks, &c, &derived);
	if (st == CLP_OK && (!world || clp_comm_rank(world) == 0)) /* rank 0 plans */
		st = plan_steps(&a, &cfg, &m, blocks, c, derived, &best, &naive);
	if (st != CLP_OK)
		rc = cli_fail("plan", st);
	clp_plan_clear(&best);
	clp_plan_clear(&naive);
	clp_cluster_free(c);
	clp_costs_free(blocks);
	clp_comm_free(world);
	return rc;
}
