/* SkipPipe internals shared by the validator, the lowering to the IR, the path planner, the
 * search, the baseline and the allocation. */
#ifndef CLP_SKIP_INTERNAL_H
#define CLP_SKIP_INTERNAL_H

#include <stddef.h>

#include "engine/sim/sim.h"
#include "engine/skip/skip.h"

/* Stages per path are checked with small arrays on the stack. */
#define CLP_SKIP_MAX_STAGES 256

/* A directed multigraph of nodes with edge counts (the hand-off graph of forwards). */
typedef struct skip_edge {
	int v, count, mb; /* mb: one micro-batch that uses the edge */
} skip_edge;

typedef struct skip_graph {
	int n;
	skip_edge **adj;
	int *deg, *cap;
	int *mark, stamp; /* DFS visits */
	int *stack, *it, *parent;
} skip_graph;

clp_status skip_graph_init(skip_graph *g, int n);
void skip_graph_free(skip_graph *g);
clp_status skip_graph_add(skip_graph *g, int u, int v, int mb);
void skip_graph_remove(skip_graph *g, int u, int v);
/* A path of edges with count > 0 from a to b (a == b: trivially). */
int skip_graph_reaches(skip_graph *g, int a, int b);
/* A cycle (its first max nodes in cyc, length in *len); 0 if acyclic. */
int skip_graph_find_cycle(skip_graph *g, int *cyc, int max, int *len);
int skip_graph_edge_mb(const skip_graph *g, int u, int v);
/* Add / remove the hand-offs of micro-batch m's path. */
clp_status skip_graph_add_path(skip_graph *g, const clp_skip_paths *p, int m);
void skip_graph_remove_path(skip_graph *g, const clp_skip_paths *p, int m);
/* Add the hand-offs of hops h[0 .. n-1] unless one closes a cycle: 1 added; 0 not (bad gets
 * the edge), -1 out of memory (nothing added either way but on success). */
int skip_graph_try_path(skip_graph *g, const clp_skip_hop *h, int n, int mb, int *bad);

/* What the planner, the search and the evaluation share: the problem in dense form. */
typedef struct skip_ctx {
	const clp_skip_env *env;
	int S, H;              /* stages; hops per path (P - 1) */
	int nnodes;
	const int *node_stage; /* the path set's allocation (borrowed) */
	int *node_dev;         /* [nnodes] cluster devices */
	int *st_first, *st_nodes; /* nodes serving each stage: st_nodes[st_first[s] .. s+1] */
	double *lat, *inv_bw;  /* [nnodes^2] link latency (+ hop_s) and seconds per byte */
	double *work;          /* [nnodes] forward + backward of its stage (+ gaps) */
	double *fwd, *bwd;     /* [nnodes] its stage's forward, backward (each + its gap) */
	double *head;          /* [nnodes] loss (head forward + backward) on a stage-0 node */
	double *out_bytes;     /* [S] activation message of each stage */
	/* evaluation: the IR's costs (S + 1 stages) and the layout, built once */
	clp_costs *ir_costs;
	clp_layout *layout;
} skip_ctx;

clp_status skip_ctx_init(skip_ctx *c, const clp_skip_env *e, const clp_skip_paths *p);
void skip_ctx_free(skip_ctx *c);
/* Seconds to send stage s's activation (or the gradient back) from node u to node v. */
static inline double skip_msg(const skip_ctx *c, int s, int u, int v)
{
	size_t k = (size_t)u * (size_t)c->nnodes + (size_t)v;

	return u == v ? 0 : c->lat[k] + c->out_bytes[s] * c->inv_bw[k];
}

/* Simulate p with the context's costs and layout; mb_end (NULL: not wanted) gets the end of
 * each micro-batch's last backward. */
clp_status skip_eval(const skip_ctx *c, const clp_skip_paths *p, double *iter_s, double *mb_end);

/* The path planner: the cheapest valid path for one micro-batch under additive costs, by
 * dynamic programming over the blocks of a path (a stage, or two adjacent stages swapped). */
typedef struct skip_plan_in {
	int origin;
	int mb;              /* for the hand-off graph's labels */
	const int *cap;      /* [S] visits each stage may still take (>= 0) */
	int remaining;       /* micro-batches still to plan, this one included */
	const double *ncost; /* [nnodes] cost of visiting a node */
	double edge_w;       /* weight of the round-trip message time of each hop */
	uint64_t noise_seed; /* != 0: random edge costs (random valid paths) */
	int max_cand;        /* nodes considered per stage (0: all) */
	skip_graph *graph;   /* with a memory cap: keep the hand-off graph acyclic (or NULL) */
} skip_plan_in;

/* Fills h[0 .. H-1]; CLP_ERR_NOT_FOUND when no valid path exists. */
clp_status skip_plan_path(const skip_ctx *c, const skip_plan_in *in, clp_skip_hop *h);

/* Construction: plan every micro-batch in order (round-robin over origins) against the loads
 * of those before it; weights select the trade-off between locality and load. */
typedef struct skip_build_w {
	double load_w;  /* weight of the work already on a node */
	double wave_w;  /* weight of the work on it from micro-batches of the same wave */
	double edge_w;  /* weight of message time */
} skip_build_w;

clp_status skip_build(const skip_ctx *c, clp_skip_paths *p, const skip_build_w *w,
		      uint64_t noise_seed);

/* splitmix64 */
static inline uint64_t skip_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline double skip_uniform(uint64_t *s)
{
	return (double)(skip_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Round-trip time of a message of `bytes` between two devices (hop_s included; 0 without a
 * cluster), the largest activation of a cost table, and a nearest-neighbour chain over a
 * distance matrix (alloc.c). */
double skip_rtt(const clp_skip_env *e, int a, int b, double bytes);
double skip_max_out_bytes(const clp_costs *c);
void skip_chain(const double *d, int n, int *order);

#endif
