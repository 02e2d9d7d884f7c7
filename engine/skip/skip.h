/* SkipPipe (Blagoev et al., 2025): partial and reordered pipelines with per-micro-batch paths.
 *
 * A model is split into S stages; each stage is served by one or more nodes (data-parallel
 * replicas). Stage 0 holds the embedding, the head and the loss. Every micro-batch starts at a
 * stage-0 node (its origin), visits P - 1 other stages, each on one node, in (almost) increasing
 * order, comes back to its origin for the loss, and retraces the path for the backward pass.
 * docs/SKIPPIPE.md states the rules, the JSON form of a path set, the scheduler and how an
 * executor runs the schedule made from a path set.
 *
 * Pieces:
 *   clp_skip_paths      the nodes (stage each serves, device), and per micro-batch its origin and
 *                       hops (stage, node) between the origin's two visits;
 *   clp_skip_validate   the rules (each a parameter of clp_skip_rules);
 *   clp_skip_to_sched   a path set as the engine's schedule IR: one dataflow-mode rank per node
 *                       with messages between nodes and per-stage gradient all-reduces;
 *   clp_skip_simulate   the iteration time of a path set (the simulator on that IR);
 *   clp_skip_random, clp_skip_schedule, clp_skip_full_pipeline, clp_skip_allocate
 *                       random valid paths, the path scheduler, the full-pipeline baseline and a
 *                       node-to-stage allocation. */
#ifndef CLP_SKIP_SKIP_H
#define CLP_SKIP_SKIP_H

#include <stdint.h>

#include "cl/base/status.h"
#include "engine/scenario/cluster.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/sched/sched.h"

#define CLP_SKIP_FORMAT "clpipe-skip-paths"
/* Micro-batch ids go into 10 bits of the IR's tags: more per iteration could pair messages
 * wrongly in dataflow mode, where sends leave in completion order. */
#define CLP_SKIP_MAX_MB 1024

typedef struct clp_skip_rules {
	int nstages;       /* S: model stages */
	int path_len;      /* P: stages on every path, stage 0 counted once */
	int max_jump;      /* J: a hop goes at most J stages past the furthest stage reached */
	int max_swaps;     /* W: swaps of two adjacent stages per path (0: increasing order) */
	int memory;        /* M: micro-batches whose activations a node holds at once (0: no cap) */
	int balance;       /* every stage but 0 is visited by the same number of micro-batches */
	int deadlock_free; /* with M > 0: no cycle of nodes handing forwards to each other */
} clp_skip_rules;

/* S stages, P = S (no skipping), J = 4, W = 2, M = 0, balance and deadlock_free on. */
void clp_skip_rules_default(clp_skip_rules *r, int nstages);

typedef struct clp_skip_hop {
	int stage, node;
} clp_skip_hop;

/* Which ready op a node runs first when several are (the order of its dataflow list): the loss
 * always, then backwards before forwards (the default) or forwards before backwards. */
enum { CLP_SKIP_BACKWARD_FIRST = 0, CLP_SKIP_FORWARD_FIRST = 1 };

/* A path set. Node i is rank i of the schedule made from it. */
typedef struct clp_skip_paths {
	char file[256]; /* the file it was read from ("" if made in memory): messages name it */
	int nstages;
	int nnodes;
	int *node_stage;                   /* [nnodes] the stage each node serves */
	unsigned char *node_prio;          /* [nnodes] CLP_SKIP_BACKWARD_FIRST or _FORWARD_FIRST */
	char (*node_device)[CLP_NAME_MAX]; /* [nnodes] its cluster device id ("" : device i) */
	int nmb;
	int *origin;                       /* [nmb] the stage-0 node it starts and ends at */
	int *hop_start;                    /* [nmb + 1] mb's hops: hops[hop_start[mb] ..] */
	clp_skip_hop *hops;
} clp_skip_paths;

/* nnodes nodes (stage 0, no device) and nmb micro-batches without origins or hops. */
clp_status clp_skip_paths_create(clp_skip_paths **out, int nstages, int nnodes, int nmb);
void clp_skip_paths_free(clp_skip_paths *p);
clp_status clp_skip_paths_copy(const clp_skip_paths *p, clp_skip_paths **out);
/* Set mb's hops (the other micro-batches' are kept). */
clp_status clp_skip_set_hops(clp_skip_paths *p, int mb, const clp_skip_hop *h, int n);
/* Give every stage-0 node per_origin micro-batches, numbered round-robin over the stage-0 nodes
 * (mb = round * n0 + k), which is also the priority order of the schedule; hops are cleared. */
clp_status clp_skip_set_origins(clp_skip_paths *p, int per_origin);
/* Micro-batches starting at node (what their loss is divided by). */
int clp_skip_mb_of_origin(const clp_skip_paths *p, int node);

/* Rules. Errors name the micro-batch, its origin and the rule: "mb 7 (origin node 2): rule
 * max_jump (J = 4): hop 1 goes to stage 6, 6 stages past stage 0, the furthest reached". */
clp_status clp_skip_check_config(const clp_skip_rules *r, const clp_skip_paths *p);
clp_status clp_skip_validate(const clp_skip_rules *r, const clp_skip_paths *p);
/* The check of one path alone (the rules that do not involve other micro-batches). */
clp_status clp_skip_check_path(const clp_skip_rules *r, const clp_skip_paths *p, int mb);

/* JSON (docs/SKIPPIPE.md, "clpipe-skip-paths"). Rules found in the file are returned in *r when
 * r is not NULL (fields absent from the file keep r's values). Loading checks the structure, not
 * the rules: call clp_skip_validate. */
clp_status clp_skip_load(const char *path, clp_skip_paths **out, clp_skip_rules *r);
clp_status clp_skip_save(const clp_skip_paths *p, const clp_skip_rules *r, double iter_s,
			 const char *path);

/* The cost model: the cluster (device speeds, links), the cost table (stages 0 .. S-1 and, as
 * entry S, the head and loss that run on the origin; a table of S entries means a free head),
 * the rules and the authors' constants. */
typedef struct clp_skip_env {
	const clp_cluster *cluster; /* NULL: free links, speed 1 */
	const clp_costs *costs;     /* required */
	clp_skip_rules rules;
	double hop_s;               /* added to every hop (SkipPipe's model: 0.35 s) */
	double gap_s;               /* idle after each task on a node (SkipPipe's model: 0.13 s) */
	int shared_cores;           /* > 0: the nodes' compute shares this many cores of one
				     * machine (clp_sim_opts.shared_cores); 0: a device each */
} clp_skip_env;

/* Resolve the nodes' device ids against the cluster (node i on device i where none is given);
 * errors name the node. */
clp_status clp_skip_resolve(const clp_skip_env *e, const clp_skip_paths *p, int *node_dev);

/* The schedule IR of a path set (see docs/SKIPPIPE.md): S + 1 IR stages, the last being the
 * head and loss of stage 0 on the origin; per micro-batch the IR path 0, hop stages..., S; one
 * dataflow rank per node (mem_cap = M), lists in priority order; a gradient all-reduce per stage
 * over its nodes, then the optimizer step. layers_per_stage fills the stage map (0: one each). */
clp_status clp_skip_to_sched(const clp_skip_paths *p, const clp_skip_rules *r,
			     int layers_per_stage, clp_sched **out);
/* The schedule's cost table (S + 1 stages): the given one, with a free head added when it has
 * only the S model stages. */
clp_status clp_skip_costs(const clp_costs *c, int nstages, clp_costs **out);
/* The layout of that schedule: rank i on node i's device with its stage (and S on stage 0). */
clp_status clp_skip_layout(const clp_skip_paths *p, const clp_cluster *c, clp_layout **out);

/* The nodes of a layout (the inverse of clp_skip_layout): node i is rank i, on its device, with
 * the lowest stage it holds; CLP_ERR_INVALID naming `what` (the file) and the rank where a rank
 * holds no stage in [0, nstages). */
clp_status clp_skip_from_layout(const clp_layout *l, int nstages, const char *what,
				clp_skip_paths **out);

typedef struct clp_skip_result {
	double iter_s;      /* simulated iteration time */
	double *mb_end_s;   /* [nmb] end of each micro-batch's last backward (NULL if not asked) */
	int *node_peak_mb;  /* [nnodes] most micro-batches held at once on each node (if asked) */
} clp_skip_result;

/* Simulate a path set. want_detail fills mb_end_s and node_peak_mb (from the full trace); a
 * trace file is written when trace_path is given. */
clp_status clp_skip_simulate(const clp_skip_env *e, const clp_skip_paths *p, int want_detail,
			     const char *trace_path, clp_skip_result *res);
void clp_skip_result_free(clp_skip_result *r);

/* Random valid paths: stage sets, orders, swaps and nodes drawn at random within the rules;
 * every node then runs backwards first or every node forwards first, whichever simulates
 * faster (so that random paths are not also handicapped in priorities). */
clp_status clp_skip_random(const clp_skip_env *e, clp_skip_paths *p, uint64_t seed);

typedef struct clp_skip_opts {
	uint64_t seed;
	int iterations;     /* local-search moves (0: construction only) */
	int restarts;       /* anneal the starts this many times, each with `iterations` moves
			     * and its own random stream; the best is kept (0, 1: once) */
	double time_limit_s; /* stop the search after this long (0: no limit) */
	int verbose;        /* progress to stderr */
	/* A path set to start from (NULL: none): the same nodes, stages and origins as the
	 * problem, valid under its rules; the result is never worse than it. */
	const clp_skip_paths *init;
} clp_skip_opts;

void clp_skip_opts_default(clp_skip_opts *o);

typedef struct clp_skip_report {
	double construct_s, search_s;  /* wall time of the two phases (the starts, the search) */
	double construct_iter_s;       /* iteration time of the best start (construction, chain
					* starts, the caller's init) */
	double iter_s;                 /* final */
	int evaluations, accepted;
} clp_skip_report;

/* The path scheduler (docs/SKIPPIPE.md): p holds the nodes and origins; its hops are replaced. */
clp_status clp_skip_schedule(const clp_skip_env *e, clp_skip_paths *p, const clp_skip_opts *o,
			     clp_skip_report *rep);

/* Baselines from the SkipPipe paper's description, on p's allocation (docs/SKIPPIPE.md,
 * "Fixed-allocation benchmark"): collision-aware search over a time-expanded graph, conflict-based
 * search over one chain per origin, greedy. p's hops and priorities are replaced; *iter_s is the
 * simulated iteration time. CLP_ERR_NOT_FOUND / CLP_ERR_INVALID: the baseline has no answer on
 * this problem (the message says why). */
enum { CLP_SKIP_BASE_CA_TIME = 0, CLP_SKIP_BASE_CBS = 1, CLP_SKIP_BASE_GREEDY = 2,
       CLP_SKIP_NBASE = 3 };
clp_status clp_skip_baseline(const clp_skip_env *e, clp_skip_paths *p, int kind, double *iter_s);

/* The full pipeline on the same nodes: npipes complete pipelines (one node per stage each, the
 * nodes left over idle), the global batch split round-robin over them. Starting from pipelines
 * built on p's allocation, nodes change places (pipeline and stage, or with an idle node) while
 * the simulated iteration time falls (at most `iterations` simulations): the baseline gets its
 * own arrangement. p's stages and micro-batches are replaced by the baseline's. */
clp_status clp_skip_full_pipeline(const clp_skip_env *e, clp_skip_paths *p, int npipes,
				  int total_mb, const clp_skip_opts *o, double *iter_s);

/* Node-to-stage allocation: nodes 0 .. nnodes-1 on the cluster's devices, stage_nodes[s] of
 * them on stage s (sum = nnodes), chosen so that paths can stay among well-connected nodes
 * (docs/SKIPPIPE.md). Sets p->node_stage. */
clp_status clp_skip_allocate(const clp_skip_env *e, clp_skip_paths *p, const int *stage_nodes,
			     int per_origin, const clp_skip_opts *o);

/* The nodes in order take stage_nodes[0] labels of stage 0, then stage_nodes[1] of stage 1, ...
 * (nodes past the sum stay on the last stage). Sets p->node_stage. */
void clp_skip_alloc_in_order(clp_skip_paths *p, const int *stage_nodes);
/* A random allocation: the labels of clp_skip_alloc_in_order shuffled over the nodes (a
 * generator seeded by seed), drawn again (up to 100 times) until the origins of per_origin
 * micro-batches each and the configuration rules r hold; the last draw's error otherwise. */
clp_status clp_skip_alloc_random(clp_skip_paths *p, const int *stage_nodes, int per_origin,
				 uint64_t seed, const clp_skip_rules *r);

/* A cluster from a network table (the tables in ../shared/networks: region_a, region_b, latency_ms,
 * bandwidth_GiBps): node i in region regions[i mod nregions], links between every two nodes of
 * different regions, intra (latency, bandwidth) inside one region. Host and device names are
 * "<region>-<i>". */
clp_status clp_skip_cluster_from_table(const char *tsv, const char *const *regions,
				       int nregions, int nnodes, clp_link_spec intra,
				       clp_cluster **out);

#endif
