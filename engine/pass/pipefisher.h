/* PipeFisher (Osawa, Li, Hoefler, MLSys 2023): a pass that puts the work of K-FAC into the
 * bubbles of a pipeline schedule. docs/KFAC.md describes it; in short:
 *
 *   work items  per rank, for each layer of each stage it holds: the factor A (KFAC_CURV_A) and
 *               B (KFAC_CURV_B) from each micro-batch, allowed after that micro-batch's forward,
 *               resp. backward, in the cycle's first step; the factors' all-reduce (KFAC_SYNC)
 *               where a stage has several holders (data parallelism, Chimera's two pipelines);
 *               the inversion of each factor (KFAC_INV with op.factor) once its layer's factors
 *               are complete; and every step the preconditioning (KFAC_PRECOND) before the
 *               stage's optimizer step.
 *   placement   the schedule is simulated (engine/sim) on the cost table; the idle gaps of each
 *               rank's compute stream are filled first-fit, in time order, with the items that
 *               are ready and fit. What does not fit in one step continues in the bubbles of the
 *               next steps: the result is a cycle of K steps, K being the refresh interval.
 *               Items longer than every gap of their rank are put where the most room is left
 *               (they lengthen the step; the report counts them).
 *   memory      deferring a factor past the backward keeps the layer's inputs / output
 *               gradients of that micro-batch; where the kept data would exceed the per-rank
 *               cap, the factor is computed right after its forward / backward instead.
 *   collectives KFAC_SYNC of a stage sits just before the stage's gradient all-reduce, in the
 *               first step where every holder has finished the layer's factors: the same
 *               position, in the same order, on every member of the group.
 *   split       (opts.split) a stage with several holders gives each layer one owner (chosen
 *               greedily to balance the holders' work against their idle time): only the
 *               owner inverts the layer's factors (KFAC_INV_SYNC, zeros from the others, brings
 *               the inverses to every holder, placed like KFAC_SYNC in the first step after
 *               the owner's last inversion) and preconditions its gradient every step (right
 *               after the stage's gradient all-reduce: KFAC_PRECOND with op.layer, then
 *               KFAC_PREC_SYNC, zeros from non-owners, gives every holder every layer's).
 *
 * Semantics of the result (the executor's and the single-device reference's): the factors come
 * from the first step of each cycle; the inverses computed during cycle c become active together
 * at the start of cycle c + 1; step 0 does one serial refresh. The pass is deterministic; its
 * output (K and the placement, the schedule itself) is stored and reused, so timing noise never
 * changes the maths. Works on schedules whose ranks run in list order (every generator:
 * GPipe, 1F1B, interleaved, Chimera, ZB-H1), not on dataflow ranks. */
#ifndef CLP_SCHED_PIPEFISHER_H
#define CLP_SCHED_PIPEFISHER_H

#include "engine/scenario/cluster.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/sched/sched.h"

typedef struct clp_pf_opts {
	const clp_costs *costs;      /* required: F/B and K-FAC times per stage, factor shares */
	const clp_cluster *cluster;  /* optional, as for clp_sim_run */
	const clp_layout *layout;
	int64_t eager_bytes;         /* -1: the cluster's */
	int64_t keep_a_bytes;        /* inputs of one layer for one micro-batch (factor A) */
	int64_t keep_b_bytes;        /* output gradients of one layer for one micro-batch (B) */
	int64_t mem_cap;             /* kept bytes per rank at most; < 0: no cap */
	int max_steps;               /* the largest K to try */
	int precondition;            /* add KFAC_PRECOND to every step (default 1) */
	int split;                   /* CLP_PF_SPLIT_* bits (default 0) */
} clp_pf_opts;

/* What opts.split turns on (docs/KFAC.md, "Splitting the work"): */
enum {
	CLP_PF_SPLIT_INV = 1,    /* one owner inverts each layer of a stage with several holders;
				  * KFAC_INV_SYNC brings the inverses to the others */
	CLP_PF_SPLIT_PREC = 2,   /* (with INV) the owner alone preconditions it; KFAC_PREC_SYNC */
	CLP_PF_SPLIT_PHASES = 4, /* inversions longer than the shortest bubble in three phases */
	CLP_PF_SPLIT_SYNC = 8,   /* factor all-reduces mid-step where the holders allow; the
				  * cycle's last step uses its drain */
	CLP_PF_SPLIT_ALL = 15,
	CLP_PF_SPLIT_RUN = CLP_PF_SPLIT_ALL, /* what clpipe train uses (pipeline.pipefisher_split) */
};

void clp_pf_opts_default(clp_pf_opts *o);

typedef struct clp_pf_report {
	int K;                      /* steps in the cycle: the refresh interval */
	double base_step_s, base_util; /* the schedule as given (repeated K times) */
	double step_s, util;        /* with K-FAC: cycle time / K, compute utilisation */
	double added_s;             /* step_s - base_step_s */
	int items;                  /* K-FAC items per cycle (without the preconditioning) */
	int immediate;              /* computed right after their F/B because of the memory cap */
	int forced;                 /* longer than every gap of their rank */
	double kfac_s;              /* K-FAC compute per cycle, summed over ranks */
	int64_t peak_kept;          /* most kept bytes on one rank */
	/* The packing bound: K >= ceil(work_s / idle_s) on every rank, work_s the K-FAC work of
	 * one refresh on it (factors, its inversions), idle_s its idle time per step of the cycle
	 * (idle in the base step, plus added_s, less its preconditioning per step). bound: the
	 * largest over ranks (0: some rank has no idle time left), on rank bound_rank. */
	int bound, bound_rank;
	double bound_work_s, bound_idle_s;
	double max_item_s;          /* the longest K-FAC item */
	double max_gap_s;           /* the longest idle gap of the cycle's steps (the template) */
	int split_stages;           /* stages whose work is split between holders */
	int exchanges;              /* KFAC_INV_SYNC and KFAC_PREC_SYNC per cycle, over ranks */
} clp_pf_report;

/* The K-step cycle with K-FAC items for base, a one-step schedule with OPT_STEP ops (as the
 * generators make it). *out is a new schedule (free with clp_sched_free) that the validator
 * accepts (the pass validates it) and the simulator runs. rep may be NULL. */
clp_status clp_pipefisher(const clp_sched *base, const clp_pf_opts *o, clp_sched **out,
			  clp_pf_report *rep);

/* Whether cycle is base's one-step lists repeated cycle->nsteps times with K-FAC items added
 * (a saved cycle reused for a pipeline); CLP_ERR_INVALID naming the first difference. */
clp_status clp_pipefisher_check(const clp_sched *base, const clp_sched *cycle);

#endif
