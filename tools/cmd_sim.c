/* clpipe sim: simulate a schedule on a cost table and a cluster; print step time, utilisation,
 * bubble and peak memory; write the trace (Chrome JSON) and an SVG timeline; --bench measures
 * the simulator itself. Options are config fields ([sim] section, docs/SCHEDULES.md), so a run
 * can be a config file plus overrides. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/io/config.h"
#include "engine/sched/gen.h"
#include "engine/pass/scenario.h"
#include "engine/scenario/shared_cores.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "engine/sim/sim.h"
#include "tools/cli.h"
#include "cl/base/clock.h"

#define PATH_MAX_ 512

typedef struct sim_cfg {
	char schedule[32], schedule_file[PATH_MAX_];
	long stages, microbatches, chunks, replicas, layers, prefetch, steps;
	int tied, grad_norm, loss_reduce;
	char cluster[PATH_MAX_], layout[PATH_MAX_], costs[PATH_MAX_], profile[PATH_MAX_];
	char calibrate[PATH_MAX_];
	long batch, seq, hidden;
	double tf, tb, tw;
	long eager_bytes;
	double hop_s, task_gap_s;
	long shared_cores;
	int recompute, validate, strict_memory;
	char trace[PATH_MAX_], svg[PATH_MAX_], compare[PATH_MAX_];
	int full_trace, json, bench;
	int pipefisher, kfac_split;
	long kfac_split_bits;
	long kfac_mem_cap, kfac_max_steps, kfac_min_steps, kfac_keep_a, kfac_keep_b;
	char pf_optim[16];
	long pf_iters, pf_ns_steps, pf_phases;
	int pf_per_step;
	char write_schedule[PATH_MAX_], write_costs[PATH_MAX_], write_layout[PATH_MAX_];
	char precision[8];
} sim_cfg;

#define F(member, key, type, dflt, help, lo, hi, choices)                                          \
	CLP_CFG_FIELD(sim_cfg, member, "sim." key, type, dflt, help, lo, hi, choices)
static const clp_cfg_field fields[] = {
	F(schedule, "schedule", CLP_CFG_STRING, "\"1f1b\"", "generator", 0, 0,
	  "gpipe|1f1b|interleaved|chimera|chimera-fd|zbh1"),
	F(schedule_file, "schedule_file", CLP_CFG_STRING, "\"\"", "schedule JSON instead of a "
	  "generator", 0, 0, NULL),
	F(stages, "stages", CLP_CFG_INT, "4", "pipeline ranks D per replica", 1, 1e6, NULL),
	F(microbatches, "microbatches", CLP_CFG_INT, "8", "micro-batches N per step", 1, 1e6, NULL),
	F(chunks, "chunks", CLP_CFG_INT, "1", "model chunks v per rank (interleaved)", 1, 1024,
	  NULL),
	F(replicas, "replicas", CLP_CFG_INT, "1", "data-parallel replicas R", 1, 1e6, NULL),
	F(layers, "layers", CLP_CFG_INT, "0", "model layers (0: one per stage, or the profile's)",
	  0, 1e6, NULL),
	F(prefetch, "prefetch", CLP_CFG_INT, "1", "post receives this many compute ops early", 0,
	  1e6, NULL),
	F(steps, "steps", CLP_CFG_INT, "1", "steps in the simulated cycle", 1, 65535, NULL),
	F(tied, "tied", CLP_CFG_BOOL, "false", "all-reduce a tied embedding", 0, 0, NULL),
	F(grad_norm, "grad_norm", CLP_CFG_BOOL, "false", "all-reduce the global gradient norm", 0,
	  0, NULL),
	F(loss_reduce, "loss_reduce", CLP_CFG_BOOL, "false", "reduce the loss to rank 0", 0, 0,
	  NULL),
	F(cluster, "cluster", CLP_CFG_STRING, "\"\"", "cluster JSON; none: free links, memory unchecked", 0, 0,
	  NULL),
	F(layout, "layout", CLP_CFG_STRING, "\"\"", "rank layout JSON; none: rank r on device r",
	  0, 0, NULL),
	F(costs, "costs", CLP_CFG_STRING, "\"\"", "cost table JSON", 0, 0, NULL),
	F(profile, "profile", CLP_CFG_STRING, "\"\"", "PipeFisher per-layer CSV instead of a cost "
	  "table", 0, 0, NULL),
	F(calibrate, "calibrate", CLP_CFG_STRING, "\"\"", "take compute times from this measured "
	  "trace", 0, 0, NULL),
	F(precision, "precision", CLP_CFG_STRING, "\"table\"", "storage precision of activations "
	  "and messages: the cost table's, or convert its sizes to fp32 (4 bytes an element), "
	  "bf16 or fp16 (2); times stay the table's", 0, 0, "table|fp32|bf16|fp16"),
	F(batch, "batch", CLP_CFG_INT, "8", "micro-batch size (profile row)", 1, 1e9, NULL),
	F(seq, "seq", CLP_CFG_INT, "0", "sequence length for --profile (0: the model's)", 0, 1e9,
	  NULL),
	F(hidden, "hidden", CLP_CFG_INT, "0", "hidden size for --profile (0: the model's)", 0,
	  1e9, NULL),
	F(tf, "tf", CLP_CFG_FLOAT, "0.001", "uniform costs: forward seconds per stage", 0, 1e6,
	  NULL),
	F(tb, "tb", CLP_CFG_FLOAT, "0.002", "uniform costs: backward seconds per stage", 0, 1e6,
	  NULL),
	F(tw, "tw", CLP_CFG_FLOAT, "-1", "uniform costs: weight-gradient part of tb (-1: tb/2)",
	  -1, 1e6, NULL),
	F(eager_bytes, "eager_bytes", CLP_CFG_INT, "-1", "eager limit (-1: the cluster's)", -1,
	  1e18, NULL),
	F(hop_s, "hop_s", CLP_CFG_FLOAT, "0", "seconds added to every point-to-point transfer "
	  "(SkipPipe's cost model: 0.35)", 0, 1e6, NULL),
	F(task_gap_s, "task_gap_s", CLP_CFG_FLOAT, "0", "idle seconds after each F/B/W on a rank "
	  "(SkipPipe's cost model: 0.13)", 0, 1e6, NULL),
	F(shared_cores, "shared_cores", CLP_CFG_INT, "0", "every rank's compute shares this many "
	  "cores of one machine (a network lab of namespaces; processor sharing, docs/PIPELINE.md); "
	  "--calibrate then takes each op's time alone from the trace; 0: a device each", 0,
	  1 << 20, NULL),
	F(recompute, "recompute", CLP_CFG_BOOL, "false", "activation recomputation", 0, 0, NULL),
	F(validate, "validate", CLP_CFG_BOOL, "true", "validate the schedule first (with a dry "
	  "run)", 0, 0, NULL),
	F(strict_memory, "strict_memory", CLP_CFG_BOOL, "false", "fail when a rank's peak memory "
	  "exceeds its device", 0, 0, NULL),
	F(trace, "trace", CLP_CFG_STRING, "\"\"", "write the Chrome trace here", 0, 0, NULL),
	F(svg, "svg", CLP_CFG_STRING, "\"\"", "write the SVG timeline here", 0, 0, NULL),
	F(compare, "compare", CLP_CFG_STRING, "\"\"", "a measured trace to put next to the "
	  "prediction", 0, 0, NULL),
	F(full_trace, "full_trace", CLP_CFG_BOOL, "false", "keep every event (default: the first "
	  "100000)", 0, 0, NULL),
	F(json, "json", CLP_CFG_BOOL, "false", "print the results as JSON", 0, 0, NULL),
	F(bench, "bench", CLP_CFG_BOOL, "false", "time generation, validation and simulation", 0,
	  0, NULL),
	F(write_schedule, "write_schedule", CLP_CFG_STRING, "\"\"", "save the schedule as JSON",
	  0, 0, NULL),
	F(write_costs, "write_costs", CLP_CFG_STRING, "\"\"", "save the cost table used", 0, 0,
	  NULL),
	F(write_layout, "write_layout", CLP_CFG_STRING, "\"\"", "save the rank layout used", 0, 0,
	  NULL),
	F(pipefisher, "pipefisher", CLP_CFG_BOOL, "false", "put K-FAC work into the bubbles "
	  "(PipeFisher; docs/KFAC.md) and simulate the K-step cycle", 0, 0, NULL),
	F(kfac_split, "kfac_split", CLP_CFG_BOOL, "false", "PipeFisher: split each layer's "
	  "inversion and preconditioning between the holders of its stage (Chimera's two "
	  "pipelines, replicas) and exchange the results", 0, 0, NULL),
	F(kfac_split_bits, "kfac_split_bits", CLP_CFG_INT, "0", "PipeFisher: parts of the split "
	  "(bits: 1 inversions, 2 preconditioning, 4 inversion phases, 8 mid-step all-reduces and "
	  "the last step's drain; --kfac-split: all)", 0,
	  15, NULL),
	F(kfac_mem_cap, "kfac_mem_cap", CLP_CFG_INT, "-1", "PipeFisher: bytes of kept inputs and "
	  "output gradients per rank (-1: no cap)", -1, 1e18, NULL),
	F(kfac_max_steps, "kfac_max_steps", CLP_CFG_INT, "256", "PipeFisher: the largest cycle",
	  1, 4096, NULL),
	F(kfac_min_steps, "kfac_min_steps", CLP_CFG_INT, "0", "PipeFisher: the least cycle (0: the "
	  "least that holds the work; training sets soap.frequency or shampoo.interval)", 0, 4096,
	  NULL),
	F(kfac_keep_a, "kfac_keep_a", CLP_CFG_INT, "0", "PipeFisher: bytes of one layer's inputs "
	  "per micro-batch (0: 7 x the stage output, a block with a 4x MLP)", 0, 1e18, NULL),
	F(pf_optim, "pf_optim", CLP_CFG_STRING, "\"kfac\"", "PipeFisher: whose work goes into "
	  "the bubbles: K-FAC's (the cost table's kfac_*_s), Shampoo's (roots refreshed every K "
	  "steps), Muon's (Newton-Schulz each step) or one-step-delayed Muon's (the Newton-Schulz "
	  "of the last step's direction in this step's bubbles) or SOAP's (eigenbases refreshed "
	  "every K steps, as Shampoo's roots), the last four counted from a block of width "
	  "--hidden (0: the profile's model) and --batch x --seq tokens", 0, 0,
	  "kfac|shampoo|muon|muon-delay|soap"),
	F(pf_iters, "pf_iters", CLP_CFG_INT, "25", "PipeFisher, Shampoo: coupled Newton "
	  "iterations per inverse root", 1, 1000, NULL),
	F(pf_ns_steps, "pf_ns_steps", CLP_CFG_INT, "5", "PipeFisher, Muon: Newton-Schulz "
	  "iterations", 1, 100, NULL),
	F(pf_phases, "pf_phases", CLP_CFG_INT, "0", "PipeFisher, Shampoo: phases of a root "
	  "longer than the shortest bubble with --kfac-split-bits 4 (0: one per Newton "
	  "iteration)", 0, 1000, NULL),
	F(pf_per_step, "pf_per_step", CLP_CFG_BOOL, "true", "PipeFisher: the per-step items "
	  "(K-FAC's preconditioning, Shampoo's statistics and preconditioning, Muon's "
	  "Newton-Schulz) before every OPT_STEP; --no-pf-per-step shows what the refreshes alone "
	  "add", 0, 0, NULL),
	F(kfac_keep_b, "kfac_keep_b", CLP_CFG_INT, "0", "PipeFisher: bytes of one layer's output "
	  "gradients per micro-batch (0: 9 x the stage output)", 0, 1e18, NULL),
};
#undef F
static const clp_cfg_schema schema = {"sim", fields, (int)(sizeof(fields) / sizeof(fields[0])), 0};

static void usage(void)
{
	printf("usage: clpipe sim [--schedule %s]\n"
	       "                  [--stages D] [--microbatches N] [--chunks v] [--replicas R]\n"
	       "                  [--cluster F] [--layout F]\n"
	       "                  [--costs F | --profile CSV [--batch B] | --tf S --tb S [--tw S]]\n"
	       "                  [--precision table|fp32|bf16|fp16]\n"
	       "                  [--pipefisher [--kfac-split | --kfac-split-bits N]\n"
	       "                                [--kfac-mem-cap BYTES]\n"
	       "                                [--pf-optim kfac|shampoo|muon|muon-delay|soap]]\n"
	       "                  [--trace out.json] [--svg out.svg] [--compare measured.json]\n"
	       "                  [--json] [--bench] [--config F] [--sim.KEY=VALUE ...]\n\n"
	       "Simulates a schedule and prints the step time, per-rank compute utilisation,\n"
	       "communication and busy fractions, the bubble fraction and the peak memory of\n"
	       "each rank against its device. Every option is also a config field; the short\n"
	       "forms --X map to --sim.X (dashes as underscores), booleans take no value and\n"
	       "--no-X turns one off.\n\noptions:\n", clp_sched_kind_list());
	clp_cfg_help(&schema, stdout);
}

static clp_status make_schedule(const sim_cfg *c, clp_sched **s, int layers)
{
	clp_gen_opts g;

	if (c->schedule_file[0])
		return clp_sched_load(c->schedule_file, s);
	clp_gen_opts_default(&g);
	g.kind = clp_sched_kind_parse(c->schedule);
	g.depth = (int)c->stages;
	g.microbatches = (int)c->microbatches;
	g.chunks = (int)c->chunks;
	g.replicas = (int)c->replicas;
	g.layers = layers ? layers : (int)c->layers;
	g.prefetch = (int)c->prefetch;
	g.tied_embedding = c->tied;
	g.grad_norm = c->grad_norm;
	g.loss_reduce = c->loss_reduce;
	return clp_sched_generate(s, &g);
}

static clp_status make_costs(const sim_cfg *c, const clp_sched *s, clp_costs **out)
{
	if (c->costs[0]) {
		CLP_TRY(clp_costs_load(c->costs, out));
	} else if (c->profile[0]) {
		clp_profile_opts po = {.nstages = s->nstages,
				       .nlayers = (int)c->layers,
				       .batch = (int)c->batch,
				       .seq = (int)c->seq,
				       .hidden = (int)c->hidden};

		CLP_TRY(clp_costs_from_profile(c->profile, &po, out));
	} else {
		CLP_TRY(clp_costs_uniform(s->nstages, c->tf, c->tb, c->tw, out));
	}
	if (strcmp(c->precision, "table")) {
		clp_dtype p = CLP_F32;
		clp_status st = clp_costs_precision_parse(c->precision, "--precision", &p);

		if (st != CLP_OK) {
			clp_costs_free(*out);
			*out = NULL;
			return st;
		}
		clp_costs_set_precision(*out, p);
	}
	if (c->calibrate[0]) {
		clp_trace t;
		int nset = 0;
		clp_status st = clp_trace_read_chrome(c->calibrate, &t);

		if (st == CLP_OK && c->shared_cores > 0)
			st = clp_trace_solo(&t, (int)c->shared_cores);
		if (st == CLP_OK)
			st = clp_costs_calibrate(*out, &t, &nset);
		clp_trace_free(&t);
		if (st != CLP_OK) {
			clp_costs_free(*out);
			*out = NULL;
			return st;
		}
	}
	return CLP_OK;
}

static void human_bytes(int64_t b, char *buf, size_t n)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
}

static void print_text(const clp_sched *s, const clp_costs *costs, const sim_cfg *c,
		       const clp_sim_result *r)
{
	int show = r->nranks <= 64 ? r->nranks : 16;
	char mb[32];

	printf("schedule     %s: %d ranks, %d stages, %d micro-batches, %d pipeline%s, %d "
	       "replica%s, %d step%s\n", s->name, s->nranks, s->nstages, s->nmb, s->npipes,
	       s->npipes > 1 ? "s" : "", s->nreplicas, s->nreplicas > 1 ? "s" : "", s->nsteps,
	       s->nsteps > 1 ? "s" : "");
	printf("costs        %s\n", costs->source[0] ? costs->source : "(no source given)");
	printf("cluster      %s\n", c->cluster[0] ? c->cluster : "none: free links, memory "
	       "unchecked");
	human_bytes(r->msg_bytes, mb, sizeof(mb));
	printf("precision    %s%s: %s of messages between stages\n",
	       clp_dtype_name(costs->precision), strcmp(c->precision, "table") ? "" :
	       " (the cost table's)", mb);
	printf("step time    %.6g ms%s\n", r->step_s * 1e3, s->nsteps > 1 ? " (cycle / steps)" : "");
	printf("bubble       %.2f %%   (compute utilisation %.2f %%, busy %.2f %%, mean over "
	       "ranks)\n", 100 * r->bubble, 100 * r->util_mean, 100 * r->busy_mean);
	printf("\nrank  compute%%   comm%%   busy%%   peak memory   device memory\n");
	for (int i = 0; i < r->nranks; i++) {
		const clp_sim_rank *k = &r->ranks[i];
		char pk[32], dm[32];

		if (i == show && show < r->nranks) {
			printf("  ... %d more ranks (--json lists all)\n", r->nranks - show);
			break;
		}
		human_bytes(k->peak_bytes, pk, sizeof(pk));
		if (k->memory_bytes > 0)
			human_bytes(k->memory_bytes, dm, sizeof(dm));
		else
			snprintf(dm, sizeof(dm), "unknown");
		printf("%4d  %8.2f  %6.2f  %6.2f  %12s  %14s%s\n", i,
		       r->cycle_s > 0 ? 100 * k->compute_s / r->cycle_s : 0,
		       r->cycle_s > 0 ? 100 * k->comm_s / r->cycle_s : 0,
		       r->cycle_s > 0 ? 100 * k->busy_s / r->cycle_s : 0, pk, dm,
		       k->memory_bytes > 0 && k->peak_bytes > k->memory_bytes ? "  OVER" : "");
	}
}

static void print_json(const clp_sched *s, const clp_costs *costs, const clp_sim_result *r)
{
	json_t *o = json_object(), *ranks = json_array();
	char *txt;

	json_object_set_new(o, "schedule", json_string(s->name));
	json_object_set_new(o, "ranks", json_integer(s->nranks));
	json_object_set_new(o, "stages", json_integer(s->nstages));
	json_object_set_new(o, "microbatches", json_integer(s->nmb));
	json_object_set_new(o, "step_s", json_real(r->step_s));
	json_object_set_new(o, "cycle_s", json_real(r->cycle_s));
	json_object_set_new(o, "bubble", json_real(r->bubble));
	json_object_set_new(o, "utilisation", json_real(r->util_mean));
	json_object_set_new(o, "busy", json_real(r->busy_mean));
	json_object_set_new(o, "events", json_integer(r->nevents));
	json_object_set_new(o, "ranks_over_memory", json_integer(r->over_memory));
	json_object_set_new(o, "precision", json_string(clp_dtype_name(costs->precision)));
	json_object_set_new(o, "message_bytes", json_integer(r->msg_bytes));
	for (int i = 0; i < r->nranks; i++) {
		const clp_sim_rank *k = &r->ranks[i];

		json_array_append_new(ranks, json_pack("{s:f, s:f, s:f, s:I, s:I, s:I}", "compute_s",
						       k->compute_s, "comm_s", k->comm_s, "busy_s",
						       k->busy_s, "peak_bytes", (json_int_t)k->peak_bytes,
						       "static_bytes", (json_int_t)k->static_bytes,
						       "device_memory_bytes",
						       (json_int_t)k->memory_bytes));
	}
	json_object_set_new(o, "per_rank", ranks);
	txt = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (txt)
		printf("%s\n", txt);
	free(txt);
	json_decref(o);
}

/* Trace, SVG (with a measured trace above the prediction when given) and saved inputs. */
static clp_status write_outputs(const sim_cfg *c, const clp_sched *s, const clp_costs *costs,
				const clp_layout *layout, clp_sim_result *r)
{
	if (r->trace.dropped && (c->trace[0] || c->svg[0]))
		fprintf(stderr, "clpipe sim: %lld events; the trace keeps the first %zu (use "
			"--full-trace for all)\n", (long long)r->nevents, r->trace.n);
	if (c->trace[0])
		CLP_TRY(clp_trace_write_chrome(&r->trace, c->trace));
	if (c->svg[0]) {
		clp_trace measured = {0};
		const clp_trace *tr[2] = {&measured, &r->trace};
		const char *labels[2] = {"measured", "simulated"};
		clp_status st = CLP_OK;

		if (c->compare[0])
			st = clp_trace_read_chrome(c->compare, &measured);
		if (st == CLP_OK)
			st = c->compare[0] ? clp_trace_write_svg(c->svg, tr, labels, 2)
					   : clp_trace_write_svg(c->svg, tr + 1, labels + 1, 1);
		clp_trace_free(&measured);
		CLP_TRY(st);
	}
	if (c->write_schedule[0])
		CLP_TRY(clp_sched_save(s, c->write_schedule));
	if (c->write_costs[0])
		CLP_TRY(clp_costs_save(costs, c->write_costs));
	if (c->write_layout[0])
		CLP_TRY(clp_layout_save(layout, c->write_layout));
	return CLP_OK;
}

static void print_pf(const clp_pf_report *p, const char *optim, int json)
{
	char kb[32];

	if (json) {
		printf("{\"pipefisher\": {\"optim\": \"%s\", \"precond_items\": %d, "
		       "\"precond_s\": %.9g, ", optim, p->precond_items, p->precond_s);
		printf("\"K\": %d, \"base_step_s\": %.9g, \"step_s\": %.9g, "
		       "\"added_s\": %.9g, \"base_utilisation\": %.6f, \"utilisation\": %.6f, "
		       "\"items\": %d, \"immediate\": %d, \"forced\": %d, \"kfac_s\": %.9g, "
		       "\"peak_kept_bytes\": %lld, \"bound\": %d, \"bound_rank\": %d, "
		       "\"bound_work_s\": %.9g, \"bound_idle_s\": %.9g, \"max_item_s\": %.9g, "
		       "\"max_gap_s\": %.9g, \"split_stages\": %d, \"exchanges\": %d, "
		       "\"steady_base_step_s\": %.9g, \"steady_step_s\": %.9g, "
		       "\"steady_added_s\": %.9g, \"serial_fallback\": %d, "
		       "\"placed_step_s\": %.9g, \"placed_steady_step_s\": %.9g}}\n", p->K,
		       p->base_step_s, p->step_s, p->added_s, p->base_util, p->util, p->items,
		       p->immediate, p->forced, p->kfac_s, (long long)p->peak_kept, p->bound,
		       p->bound_rank, p->bound_work_s, p->bound_idle_s, p->max_item_s, p->max_gap_s,
		       p->split_stages, p->exchanges, p->steady_base_step_s, p->steady_step_s,
		       p->steady_added_s, p->serial_fallback, p->placed_step_s,
		       p->placed_steady_step_s);
		return;
	}
	human_bytes(p->peak_kept, kb, sizeof(kb));
	if (strcmp(optim, "kfac"))
		printf("pipefisher   %s: %d refresh items per cycle (%.6g ms), %d per-step items "
		       "(%.6g ms) per cycle of %d steps\n", optim, p->items, p->kfac_s * 1e3,
		       p->precond_items, p->precond_s * 1e3, p->K);
	if (!strcmp(optim, "muon-delay"))
		printf("pipefisher   K = 1; %d Newton-Schulz items and exchanges a step, %d forced "
		       "before their OPT_STEP's collectives (no bubble before it held them)\n",
		       p->items, p->forced);
	else
		printf("pipefisher   K = %d (steps per factor refresh); %d K-FAC items per cycle, %d "
		       "computed right after F/B (memory cap), %d longer than any bubble; kept data "
		       "at most %s per rank\n", p->K, p->items, p->immediate, p->forced, kb);
	if (p->serial_fallback)
		printf("             serial fallback: first fit in the bubbles simulated %.6g ms a "
		       "step, slower than every item before its OPT_STEP (%.6g ms): kept that\n",
		       p->placed_step_s * 1e3, p->step_s * 1e3);
	if (p->bound > 0)
		printf("             bound K >= %d: rank %d has %.6g ms of K-FAC work per refresh "
		       "and %.6g ms idle per step of the cycle after preconditioning%s\n", p->bound,
		       p->bound_rank, p->bound_work_s * 1e3, p->bound_idle_s * 1e3,
		       p->K > p->bound ? "; K is above it" : "; K is at it");
	else
		printf("             bound: none (rank %d has no idle time left after "
		       "preconditioning: every item lengthens a step)\n", p->bound_rank);
	if (p->K > p->bound && p->bound > 0)
		printf("             longest item %.6g ms, longest bubble %.6g ms%s\n",
		       p->max_item_s * 1e3, p->max_gap_s * 1e3,
		       p->forced ? " (items longer than every bubble lengthen their step)"
				 : " (bubbles too short or split across steps for the work)");
	if (p->split_stages)
		printf("             split: %d stages share their inversions and preconditioning "
		       "between holders (%d inverse exchanges per cycle)\n", p->split_stages,
		       p->exchanges);
	printf("             step %.6g ms -> %.6g ms (%+.4g ms, %+.2f %%); utilisation %.2f %% -> "
	       "%.2f %%\n", p->base_step_s * 1e3, p->step_s * 1e3, p->added_s * 1e3,
	       p->base_step_s > 0 ? 100 * p->added_s / p->base_step_s : 0, 100 * p->base_util,
	       100 * p->util);
	printf("             steady state (two cycles less one): step %.6g ms -> %.6g ms (%+.4g "
	       "ms, %+.2f %%)\n\n", p->steady_base_step_s * 1e3, p->steady_step_s * 1e3,
	       p->steady_added_s * 1e3,
	       p->steady_base_step_s > 0 ? 100 * p->steady_added_s / p->steady_base_step_s : 0);
}

/* Replace the scenario's one-step schedule by its PipeFisher cycle. No model here: the kept
 * bytes are --kfac_keep_a/b or the scenario's guess from the stage output (scenario.h). */
/* Shampoo's or Muon's work (--pf-optim) into the cost table's kfac_* times: the block width
 * and tokens from --hidden, --batch and --seq, or the profile's model. */
static clp_status optim_work(const sim_cfg *c, clp_scenario *sc, int work)
{
	int layers = 0, seq = 0, hidden = 0;

	if (c->profile[0])
		clp_profile_shape(c->profile, &layers, &seq, &hidden);
	hidden = c->hidden > 0 ? (int)c->hidden : hidden;
	seq = c->seq > 0 ? (int)c->seq : seq;
	if (hidden < 1 || seq < 1)
		return clp_error(CLP_ERR_INVALID, "--pf-optim %s counts its work from the model's "
				 "shapes: give --hidden and --seq (or a --profile of a known model)",
				 c->pf_optim);
	return clp_pf_work_costs(sc->costs, work, hidden, 4 * hidden, (double)c->batch * seq,
				 (int)c->pf_iters, (int)c->pf_ns_steps,
				 work == CLP_PF_WORK_MUON_DELAY ? (int)c->pf_ns_steps /* one an NS step */
				 : c->pf_phases > 0		? (int)c->pf_phases
								: (int)c->pf_iters);
}

static clp_status pipefisher(const sim_cfg *c, clp_scenario *sc)
{
	clp_scenario_pf pf;
	clp_pf_report rep;
	double kt = 0;
	int soap = !strcmp(c->pf_optim, "soap");
	int work = !strcmp(c->pf_optim, "shampoo") || soap ? CLP_PF_WORK_SHAMPOO
		   : !strcmp(c->pf_optim, "muon")  ? CLP_PF_WORK_MUON
		   : !strcmp(c->pf_optim, "muon-delay") ? CLP_PF_WORK_MUON_DELAY
						   : CLP_PF_WORK_KFAC;

	/* from the shapes with a profile or --hidden; else the table's kfac_* times as given */
	if (work != CLP_PF_WORK_KFAC && (c->profile[0] || c->hidden > 0))
		/* SOAP: its refreshes' flops, placed as Shampoo's items (whole: no phases) */
		CLP_TRY(optim_work(c, sc, soap ? CLP_PF_WORK_SOAP : work));
	for (int i = 0; i < sc->costs->nstages; i++)
		for (int t = CLP_COST_KFAC_CURV_A; t <= CLP_COST_KFAC_PRECOND; t++)
			kt += sc->costs->stages[i].t[t];
	if (kt == 0 && work == CLP_PF_WORK_KFAC)
		fprintf(stderr, "clpipe sim: warning: the cost table has no K-FAC times (give "
			"--profile, or --costs with kfac_*_s)\n");
	clp_scenario_pf_default(&pf);
	pf.mem_cap = c->kfac_mem_cap;
	pf.max_steps = (int)c->kfac_max_steps;
	pf.min_steps = (int)c->kfac_min_steps;
	pf.split = c->kfac_split ? CLP_PF_SPLIT_ALL : (int)c->kfac_split_bits;
	pf.keep_a_bytes = c->kfac_keep_a;
	pf.keep_b_bytes = c->kfac_keep_b;
	pf.work = work;
	pf.no_per_step = !c->pf_per_step;
	pf.steady = 1;
	CLP_TRY(clp_scenario_pipefisher(sc, &pf, &rep));
	print_pf(&rep, c->pf_optim, c->json);
	return CLP_OK;
}

/* The phases --bench times. */
typedef struct sim_times {
	double gen, val, sim;
} sim_times;

/* The schedule (repeated --steps times; made again with a profile's layer count), its costs,
 * cluster and layout into sc (which owns them, after a failure too), PipeFisher's cycle when
 * asked, and the simulation into *r. */
static clp_status sim_steps(const sim_cfg *c, clp_scenario *sc, clp_sim_opts *o,
			    clp_sim_result *r, sim_times *tm)
{
	double t0 = clp_now();
	clp_status st = make_schedule(c, &sc->sched, 0);

	if (st == CLP_OK && c->steps > 1 && c->pipefisher)
		st = clp_error(CLP_ERR_INVALID, "--pipefisher makes its own cycle of steps; leave "
			       "--steps at 1");
	if (st == CLP_OK && (c->kfac_split || c->kfac_split_bits) && !c->pipefisher)
		st = clp_error(CLP_ERR_INVALID, "--kfac-split%s splits PipeFisher's work between a "
			       "stage's holders: add --pipefisher", c->kfac_split ? "" : "-bits");
	if (st == CLP_OK && c->steps > 1)
		st = clp_sched_repeat(sc->sched, (int)c->steps);
	tm->gen = clp_now() - t0;
	CLP_TRY(st);
	if (c->validate) {
		t0 = clp_now();
		st = clp_sched_validate(sc->sched, 1);
		tm->val = clp_now() - t0;
		CLP_TRY(st);
	}
	CLP_TRY(make_costs(c, sc->sched, &sc->costs));
	if (c->profile[0] && !c->layers && !c->schedule_file[0]) {
		/* the profiled model's layers, so that the stage map and the costs agree */
		int L = 0;

		for (int i = 0; i < sc->costs->nstages; i++)
			L += sc->costs->stages[i].nlayers;
		if (L != sc->sched->nlayers) {
			clp_sched_free(sc->sched);
			sc->sched = NULL;
			CLP_TRY(make_schedule(c, &sc->sched, L));
			if (c->steps > 1)
				CLP_TRY(clp_sched_repeat(sc->sched, (int)c->steps));
		}
	}
	sc->eager_bytes = c->eager_bytes;
	if (c->cluster[0])
		CLP_TRY(clp_cluster_load(c->cluster, &sc->cluster));
	CLP_TRY(clp_scenario_resolve(sc, c->layout));
	if (c->pipefisher)
		CLP_TRY(pipefisher(c, sc));
	clp_scenario_sim_opts(sc, o);
	o->recompute = c->recompute;
	o->hop_s = c->hop_s;
	o->task_gap_s = c->task_gap_s;
	o->shared_cores = (int)c->shared_cores;
	o->trace_limit = c->bench ? 0 : c->full_trace ? SIZE_MAX : CLP_SIM_TRACE_DEFAULT;
	t0 = clp_now();
	st = clp_scenario_sim(sc, o, r);
	tm->sim = clp_now() - t0;
	return st;
}

static void print_bench(const sim_cfg *c, const clp_sched *s, const clp_sim_result *r,
			const sim_times *tm)
{
	int64_t nops = clp_sched_nops(s);

	printf("bench %s: %d ranks x %d micro-batches, %lld ops\n", s->name, s->nranks, s->nmb,
	       (long long)nops);
	printf("  generate  %8.3f s\n", tm->gen);
	if (c->validate)
		printf("  validate  %8.3f s (with a dry run)\n", tm->val);
	printf("  simulate  %8.3f s: %lld events, %.3g events/s, %.3g ops/s\n", tm->sim,
	       (long long)r->nevents, tm->sim > 0 ? (double)r->nevents / tm->sim : 0,
	       tm->sim > 0 ? (double)nops / tm->sim : 0);
	printf("  step time %.6g ms, bubble %.2f %%\n", r->step_s * 1e3, 100 * r->bubble);
}

int cmd_sim(int argc, char **argv)
{
	sim_cfg c;
	clp_scenario sc;
	clp_sim_opts o;
	clp_sim_result r = {0};
	sim_times tm = {0, 0, 0};
	clp_status st;
	int rc = 0;

	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage();
			return 0;
		}
	clp_cfg_defaults(&schema, &c);
	if ((st = clp_cfg_args(&schema, &c, &argc, argv)) != CLP_OK)
		return cli_fail("sim", st);
	if ((rc = cli_parse_short("sim", &schema, "sim", &c, argc, argv)) != 0)
		return rc;
	clp_scenario_init(&sc);
	st = sim_steps(&c, &sc, &o, &r, &tm);
	if (st == CLP_OK && c.bench) {
		print_bench(&c, sc.sched, &r, &tm);
	} else if (st == CLP_OK) {
		if (c.json)
			print_json(sc.sched, sc.costs, &r);
		else
			print_text(sc.sched, sc.costs, &c, &r);
		st = write_outputs(&c, sc.sched, sc.costs, sc.layout, &r);
	}
	if (st == CLP_OK && r.over_memory) {
		for (int i = 0; i < r.nranks; i++)
			if (r.ranks[i].memory_bytes > 0 && r.ranks[i].peak_bytes > r.ranks[i].memory_bytes)
				fprintf(stderr, "clpipe sim: %s: rank %d needs %lld bytes at its peak, "
					"device %s has %lld\n", c.strict_memory ? "error" : "warning",
					i, (long long)r.ranks[i].peak_bytes,
					sc.cluster->devices[r.ranks[i].device].id,
					(long long)r.ranks[i].memory_bytes);
		if (c.strict_memory)
			st = clp_error(CLP_ERR_NOMEM, "%d ranks exceed their device memory",
				       r.over_memory);
	}
	rc = st == CLP_OK ? 0 : cli_fail("sim", st);
	clp_sim_result_free(&r);
	clp_scenario_free(&sc); /* it owns the schedule, costs, the cluster and the layout */
	return rc;
}
