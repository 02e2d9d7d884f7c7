/* Simulator internals shared by the event loop (sim.c) and the cost and memory model
 * (sim_model.c). */
#ifndef CLP_SIM_INTERNAL_H
#define CLP_SIM_INTERNAL_H

#include "engine/sched/index.h"
#include "engine/sim/sim.h"

/* A small int64 -> int64 hash map (open addressing), for routes and link resources. */
typedef struct sim_map {
	int64_t *keys, *vals;
	size_t cap, n;
} sim_map;

/* A cached route between two devices: its spec and the slot of its FCFS resource. */
typedef struct sim_route {
	clp_link_spec spec;
	int64_t slot; /* -1: no resource (same device or free link) */
} sim_route;

typedef struct sim_rank {
	int pc;             /* next op */
	int wait;           /* W_* */
	int64_t wait_op;    /* global op index waited on */
	int run_lo, run_hi; /* the last exchange (run of adjacent sends/receives) */
	int64_t open_reqs;  /* posted sends and receives not complete */
	int64_t running;    /* the compute op in progress (global index), -1 */
	int64_t inflight;   /* micro-batches holding activations (dataflow memory cap) */
	uint16_t *held;     /* dataflow with a cap: per (step, mb), the stages of it holding
			     * activations here; a micro-batch counts once in inflight */
	double gap_until;   /* task_gap_s: no F/B/W starts before this time */
	int started;        /* dataflow: receives posted */
	int64_t pending_free; /* activation bytes freed when the running compute op ends */
	int64_t mem, peak;
	int dev, kind_idx;
	double speed, finish;
} sim_rank;

typedef struct sim {
	const clp_sched *s;
	const clp_sim_opts *o;
	clp_sched_index ix;
	const clp_cluster *cl;
	clp_cluster *own_cluster;
	int64_t eager;
	sim_rank *rs;
	uint8_t *fl; /* per op: F_* */
	/* collectives */
	int32_t *inst_arrived;
	clp_link_spec *gspec; /* per group: slowest ring link; latency < 0 until computed */
	/* links */
	sim_map routes, res_slots;
	double *res_free;
	int64_t nres, res_cap;
	sim_route *route_tab;
	int64_t nroute, route_cap;
	/* events */
	struct sim_event *heap;
	size_t nheap, heap_cap;
	uint64_t seq;
	int ndone;
	clp_trace_stats stats;
	clp_sim_result *res;
	clp_status err; /* first allocation failure inside the loop */
	const double *scale; /* per op: its compute time's factor (shared cores), or NULL */
} sim;

/* Per-op flags: posted (send/receive), done (complete), arrived (an eager message before its
 * receive), started (transfer under way), eager, executed (dataflow: issued). */
enum { F_POSTED = 1, F_DONE = 2, F_ARRIVED = 4, F_STARTED = 8, F_EAGER = 16, F_EXEC = 32 };

/* sim.c: one run with each compute op's time multiplied by scale[g] (NULL: 1). */
clp_status sim_run_scaled(const clp_sched *s, const clp_sim_opts *o, const double *scale,
			  clp_sim_result *res);
/* sim_shared.c: clp_sim_run when o->shared_cores > 0. */
clp_status sim_shared_run(const clp_sched *s, const clp_sim_opts *o, clp_sim_result *res);

/* sim_model.c */
double sim_op_time(const sim *S, int rank, const clp_op *op);
int64_t sim_msg_bytes(const sim *S, const clp_op *send, const clp_op *recv);
int64_t sim_coll_bytes(const sim *S, const clp_op *op);
double sim_coll_time(sim *S, const clp_op *op, int64_t bytes);
/* Activation bytes held from FWD until BWD (or BWD_B), and from BWD_B until BWD_W. */
int64_t sim_act_bytes(const sim *S, int stage);
int64_t sim_act_w_bytes(const sim *S, int stage);
clp_status sim_route_of(sim *S, int src_rank, int dst_rank, sim_route *out);
clp_status sim_static_memory(sim *S);
void sim_map_free(sim_map *m);

#endif
