/* The simulator: a discrete-event interpreter of the schedule IR on a cost table and a cluster.
 *
 * Each rank runs its list with the executor's semantics (engine/sched/sched.h): compute ops on
 * the rank's compute stream for their cost-table time; sends and receives posted where they
 * stand, a transfer starting once both sides are posted (rendezvous) or at the send for messages
 * under the cluster's eager limit; each direction of a link is a first-come-first-served
 * resource (bytes / bandwidth occupy it, latency follows); collectives cost what their algorithm
 * does (ring all-reduce 2(p-1)(alpha + S/(p beta)), reduce ceil(log2 p)(alpha + S/beta), over the
 * slowest link between ring neighbours). A memory model adds parameters, gradients, optimizer
 * state and the activations each schedule holds, and compares the peak with each device.
 *
 * Utilisation, busy and bubble fractions come from the trace events the run produces
 * (clp_trace_stats), fed as they happen; only the first trace_limit events are stored. A run
 * that cannot finish reports a deadlock naming every blocked rank, op and micro-batch. */
#ifndef CLP_SIM_SIM_H
#define CLP_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scenario/cluster.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/scenario/trace.h"
#include "engine/sched/sched.h"

/* Above this many events the simulator keeps summaries only, unless asked for the full trace. */
#define CLP_SIM_TRACE_DEFAULT 100000

typedef struct clp_sim_opts {
	const clp_costs *costs;     /* NULL: unit costs (F 1, B 2, B/W 1 each, 1 byte a message
				     * and 1 activation unit a micro-batch) */
	const clp_cluster *cluster; /* NULL: free links, unknown memory */
	const clp_layout *layout;   /* NULL: rank r on device r; else needs the cluster */
	int64_t eager_bytes;        /* -1: the cluster's limit (0 without a cluster) */
	int recompute;              /* keep only stage inputs; backward recomputes the forward */
	double hop_s;               /* added to every point-to-point transfer after its link's
				     * latency (SkipPipe's cost model: 0.35 s of per-hop overhead) */
	double task_gap_s;          /* a rank starts no F/B/W until this long after the last one it
				     * ran ended (SkipPipe's cost model: 0.13 s) */
	size_t trace_limit;         /* events stored in the result; 0: none, SIZE_MAX: all */
	/* Optional, clp_sched_nops(s) entries each (ops numbered rank by rank in list order):
	 * when each op started and ended. Compute ops: their run; collectives: the collective
	 * itself (from the last member's arrival, the same on every member); sends and receives:
	 * posted and complete. -1 for an op that never ran. (The PipeFisher pass reads bubbles
	 * from these.) */
	double *op_t0, *op_t1;
	/* > 0: every rank's compute shares this many cores of one machine (the network lab's
	 * namespaces, ranks oversubscribing one CPU): n compute ops at once each run at
	 * min(1, shared_cores / n) of their cost table's speed (processor sharing, sim_shared.c).
	 * 0: each rank computes on its own device. */
	int shared_cores;
} clp_sim_opts;

typedef struct clp_sim_rank {
	double compute_s, comm_s, busy_s; /* from the trace */
	double finish_s;                  /* last op done and every send complete */
	int64_t static_bytes;             /* parameters, gradients, optimizer state, K-FAC */
	int64_t peak_bytes;               /* static + most activations held at once */
	int64_t memory_bytes;             /* the device's (0: unknown) */
	int device;
	int kind;                         /* the device kind's index in the cost table, -1 */
	double speed;                     /* relative to the cost table's device kind */
} clp_sim_rank;

typedef struct clp_sim_result {
	int nranks;
	double cycle_s;   /* the whole list (nsteps steps) */
	double step_s;    /* cycle_s / nsteps */
	double util_mean, busy_mean, bubble;
	int64_t nevents;  /* trace events produced */
	int over_memory;  /* ranks whose peak exceeds their device's memory */
	int64_t msg_bytes; /* bytes of all point-to-point messages (activations and their
			    * gradients between stages), in the cost table's precision */
	clp_sim_rank *ranks;
	clp_trace trace;  /* the stored events */
} clp_sim_result;

void clp_sim_opts_default(clp_sim_opts *o);
/* Run s. On deadlock returns CLP_ERR_STATE with the blocked ranks in the message. */
clp_status clp_sim_run(const clp_sched *s, const clp_sim_opts *o, clp_sim_result *res);
void clp_sim_result_free(clp_sim_result *r);

/* Collective cost models over a link: ring all-reduce and binomial-tree reduce of bytes. */
double clp_sim_allreduce_s(int p, int64_t bytes, clp_link_spec link);
double clp_sim_reduce_s(int p, int64_t bytes, clp_link_spec link);

#endif
