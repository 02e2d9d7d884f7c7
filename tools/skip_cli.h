/* clpipe skip: the [skip] config shared by its subcommands (skip_cli.c reads it; cmd_skip.c:
 * schedule, simulate, validate, cluster; cmd_skip_compare.c: compare, bench; cmd_skip_fixed.c:
 * fixed). */
#ifndef CLP_TOOLS_SKIP_CLI_H
#define CLP_TOOLS_SKIP_CLI_H

#include "engine/io/config.h"
#include "engine/skip/skip.h"

#define SKIP_PATH 512

typedef struct skip_cfg {
	char cluster[SKIP_PATH], costs[SKIP_PATH], layout[SKIP_PATH], paths[SKIP_PATH];
	char precision[8]; /* "table", or the precision the costs' sizes are converted to */
	clp_cfg_ints stage_nodes;
	long stages, microbatches, path_len, max_jump, max_swaps, memory;
	int balance, deadlock_free, authors;
	double hop_s, gap_s;
	long shared_cores;
	long seed, iterations, restarts, alloc_iterations, baseline_iterations, random, pipelines;
	double time_limit;
	char paths_out[SKIP_PATH], schedule_out[SKIP_PATH], layout_out[SKIP_PATH];
	char costs_out[SKIP_PATH], trace[SKIP_PATH], baseline_out[SKIP_PATH];
	int json, verbose;
	char init[SKIP_PATH], alloc_from[SKIP_PATH];
	long alloc_random;
	unsigned given_rules; /* SKIP_RULE_* bits: rules given on the command line */
	char table[SKIP_PATH], regions[1024], out[SKIP_PATH];
	long nodes;
	double intra_latency_s, intra_bandwidth_Bps;
} skip_cfg;

extern const clp_cfg_schema skip_schema;

/* The rules a path file's "rules" may set (bits of skip_cfg.given_rules). */
enum {
	SKIP_RULE_PATH_LEN = 1, SKIP_RULE_MAX_JUMP = 2, SKIP_RULE_MAX_SWAPS = 4, SKIP_RULE_MEMORY = 8,
	SKIP_RULE_BALANCE = 16, SKIP_RULE_DEADLOCK_FREE = 32
};
/* Report on stderr each rule given on the command line that the path file's "rules" set to
 * another value (the file's wins): cli is the rules from the options, file the rules used. */
void skip_report_overridden(const char *cmd, const skip_cfg *c, const clp_skip_rules *cli,
			    const clp_skip_rules *file);

/* Inputs every subcommand but `cluster` needs. */
typedef struct skip_inputs {
	clp_cluster *cluster;
	clp_costs *costs;
	clp_skip_env env;
	clp_skip_paths *nodes; /* the nodes and their stages (allocated when no layout is given) */
	clp_skip_paths *init;  /* --init: the path set to start from (its nodes are in nodes) */
} skip_inputs;

/* Config defaults, --config, --skip.KEY and short options; returns an exit code or -1 to go on.
 * Relative input paths not found from the working directory are looked up next to the config
 * file. */
int skip_parse(const char *cmd, int argc, char **argv, skip_cfg *c, void (*usage)(void));
/* The cluster, the costs (converted to --precision unless "table"), the rules and the
 * constants of the config (authors: true sets hop_s = 0.35, gap_s = 0.13). */
clp_status skip_load_env(const skip_cfg *c, int nstages, skip_inputs *in);
/* The nodes: from --init or --alloc-from (a path file's nodes and origins), from --layout, else
 * every cluster device, allocated by clp_skip_allocate with stage_nodes (alloc_iterations
 * moves) or drawn at random (--alloc-random SEED). Fills in->nodes and the micro-batches'
 * origins (and in->init). */
clp_status skip_load_nodes(const skip_cfg *c, skip_inputs *in, int verbose);
void skip_inputs_free(skip_inputs *in);
/* The model stages S the config implies: stages, else stage_nodes' length, else the layout. */
int skip_nstages(const skip_cfg *c);
/* Print the schedule's nodes: device, stage and micro-batches visiting each. */
void skip_print_nodes(const clp_skip_paths *p);

int cmd_skip_compare(int argc, char **argv);
int cmd_skip_bench(int argc, char **argv);
int cmd_skip_fixed(int argc, char **argv);

#endif
