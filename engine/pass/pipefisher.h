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
	int min_steps;               /* the least K (0 or 1: the least that holds the work): an
				      * optimizer refreshing no more often than it is told to
				      * (SOAP's soap.frequency, Shampoo's shampoo.interval) */
	int precondition;            /* add KFAC_PRECOND to every step (default 1) */
	int split;                   /* CLP_PF_SPLIT_* bits (default 0) */
	int work;                    /* whose periodic work: CLP_PF_WORK_* (default K-FAC's) */
	int steady;                  /* 1: also simulate two cycles for the report's steady_*
				      * (default 0: they stay 0; the planner and training skip
				      * the cost) */
} clp_pf_opts;

/* An optimizer's periodic work, as items of the pass (docs/OPTIMIZERS.md, "An optimizer's work
 * in the bubbles"). The op kinds are K-FAC's, read as the generic items: KFAC_CURV_A/B the
 * statistics of a micro-batch after its pass, KFAC_SYNC their all-reduce where a stage's
 * holders must agree, KFAC_INV the refresh of one factor of a layer (op.factor, its share of
 * the stage's kfac_inv_s), KFAC_PRECOND the per-step work before the stage's OPT_STEP
 * (kfac_precond_s). The times are the cost table's kfac_* (clp_pf_work_costs fills them for
 * Shampoo and Muon from the model's shapes). */
enum {
	CLP_PF_WORK_KFAC = 0,    /* factors per micro-batch, their all-reduce, inversions after
				  * them (the readiness above), preconditioning every step */
	CLP_PF_WORK_SHAMPOO = 1, /* the statistics of the step's final gradient and the
				  * preconditioning (per step, KFAC_PRECOND: they need the clipped,
				  * all-reduced gradient, so they stay at the step); the inverse 4th
				  * root of each side of each matrix (KFAC_INV, one per factor)
				  * after the stage's OPT_STEP of the cycle's first step (its
				  * statistics snapshot); no all-reduce (the holders' statistics are
				  * equal: they come from the all-reduced gradient) */
	CLP_PF_WORK_MUON = 2,    /* only per-step work: the Newton-Schulz iterations of the
				  * stage's matrices (KFAC_PRECOND) once its gradients are final,
				  * right before its OPT_STEP: K = 1 */
	CLP_PF_WORK_MUON_DELAY = 3, /* one-step-delayed Muon (muon.delay): the update applied at
				  * step t is the Newton-Schulz (NS) of step t - 1's direction,
				  * which step t - 1's OPT_STEP wrote, so step t's NS depends on
				  * nothing in step t. K = 1. Per stage a rank steps, per layer l
				  * (global, op.layer) and matrix k (op.factor: 1.. the layer's
				  * matrices in clp_pf_work_costs's order q, k, v, attention out,
				  * MLP in, MLP out, each with its share of kfac_inv_s by its NS
				  * flops; 0: the whole layer where the cost table has no
				  * factors), one KFAC_INV item, op.mb -1 (the whole NS) or, cut
				  * into phases (CLP_PF_SPLIT_PHASES, the cost table's inv_phases =
				  * ns_steps), p = 0.. one NS iteration each (phase 0 includes the
				  * normalisation), in order; op.step = the step it runs in. Ready
				  * at the start of the step; each sits in the rank's list before
				  * its stage's OPT_STEP of that step (first fit into the gaps
				  * there; what does not fit is forced before it, ahead of the
				  * collectives and OPT_STEPs right before it, where the rank
				  * waits for its peers). No
				  * per-step KFAC_PRECOND, no factor items or syncs; with
				  * CLP_PF_SPLIT_INV a stage's holders own its layers (one each)
				  * and a KFAC_INV_SYNC per layer (the owner's NS output, the
				  * others' zeros, summed), right before the stage's gradient
				  * all-reduce, brings it to every holder: the owner's items come
				  * before that exchange. */
	CLP_PF_WORK_SOAP = 4,    /* clp_pf_work_costs and clp_pipefisher_check_work only (its
				  * messages then name SOAP): SOAP's eigenbasis refreshes as
				  * Shampoo's roots (the same items: run the pass with
				  * CLP_PF_WORK_SHAMPOO, which the executor runs for SOAP too) */
};

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
	int precond_items;          /* per-step items per cycle: one per OPT_STEP and step (a split
				     * stage's per-layer items count as one) */
	double precond_s;           /* their compute per cycle, summed over ranks */
	int exchanges;              /* KFAC_INV_SYNC and KFAC_PREC_SYNC per cycle, over ranks */
	/* With opts.steady, the steady state: the second of two cycles run back to back, per
	 * step, with the work and without (step_s and base_step_s are one cycle from idle ranks:
	 * work at a step's start, which in a run overlaps the previous step's tail, counts in
	 * full there). */
	double steady_step_s, steady_base_step_s, steady_added_s;
	/* Delayed Muon: 1 when the first-fit placement simulated slower than the serial fallback
	 * (every item right before the collectives and OPT_STEP it serves, no bubble used) and the
	 * pass returned the fallback; placed_step_s (placed_steady_step_s, with opts.steady): the
	 * first-fit placement's step either way. */
	int serial_fallback;
	double placed_step_s, placed_steady_step_s;
} clp_pf_report;

/* The K-step cycle with K-FAC items for base, a one-step schedule with OPT_STEP ops (as the
 * generators make it). *out is a new schedule (free with clp_sched_free) that the validator
 * accepts (the pass validates it) and the simulator runs. rep may be NULL. */
clp_status clp_pipefisher(const clp_sched *base, const clp_pf_opts *o, clp_sched **out,
			  clp_pf_report *rep);

/* Set the cost table's kfac_* times to optimizer `work`'s (CLP_PF_WORK_SHAMPOO, _MUON,
 * _MUON_DELAY or _SOAP) for a
 * model whose layers are transformer blocks of width d and MLP width ff (q, k, v, out: d x d;
 * MLP in ff x d, out d x ff: the Muon / Shampoo matrices of clp_exec_muon_takes), `tokens`
 * rows a micro-batch: flops as docs/OPTIMIZERS.md counts them, at each stage's own GEMM rate
 * (6 x a layer's matrix weights x tokens per its F + B time of one micro-batch). Shampoo:
 * kfac_precond_s the statistics and preconditioning of a step (4 a b (a + b) a matrix),
 * kfac_inv_s the inverse 4th roots of both sides of every matrix (iters x 4 GEMMs of 2 d^3), 12
 * factors a layer with shares by d^3, and with phases > 0 each root in that many phases (one
 * per Newton iteration at phases = iters); Muon: kfac_precond_s the Newton-Schulz iterations
 * (ns_steps x (4 m^2 n + 2 m^3), m <= n), no inversion; delayed Muon: the same flops as
 * kfac_inv_s (the items of the next step's bubbles), no kfac_precond_s, 6 factors a layer (its
 * matrices) with shares by their NS flops, inv_phases = phases (0: ns_steps), kfac_bytes 0 (the
 * delayed directions live in the matrices' AdamW second moments, opt_bytes) and
 * delay_layer_bytes a layer's directions (fp32, its matrices' elements x 4: a split's
 * exchange); SOAP: as Shampoo's with kfac_precond_s its step's projections and statistics
 * (8 a b (a + b) a matrix, clp_soap_step_flops) and kfac_inv_s each side's refresh (a q and
 * the Householder QR, 2 d^3 + 8/3 d^3, clp_soap_refresh_flops), 12 factors a layer with
 * those shares, no phases. The factor times become 0. */
clp_status clp_pf_work_costs(clp_costs *c, int work, int d, int ff, double tokens, int iters,
			     int ns_steps, int phases);

/* Whether cycle is base's one-step lists repeated cycle->nsteps times with K-FAC items added
 * (a saved cycle reused for a pipeline); CLP_ERR_INVALID naming the first difference. */
clp_status clp_pipefisher_check(const clp_sched *base, const clp_sched *cycle);

/* Whether cycle holds optimizer `work`'s items whole (CLP_PF_WORK_SHAMPOO, _SOAP, _MUON,
 * _MUON_DELAY; K-FAC: not checked here): Shampoo (SOAP the same, its bases' refreshes as the
 * roots, the messages naming SOAP), on every rank, for every stage it steps, every layer of it
 * and every factor 1..nfactors (0: one item a layer, factor 0) one refresh (KFAC_INV, or its
 * phases 0.. in order) after the stage's OPT_STEP of the cycle's first step; Muon none; delayed Muon, for every OPT_STEP of every step, every layer of the stage and
 * every matrix 1..nfactors (0: factor 0) one NS item (or its phases in order) of that step
 * before the OPT_STEP and none after it, except a layer the rank receives by a KFAC_INV_SYNC
 * of that step before the OPT_STEP (the split: then none, or one before the exchange); no
 * factor items, all-reduces or per-step items (delayed Muon). CLP_ERR_INVALID naming the first
 * item missing or out of place (a saved cycle that dropped one would leave a root stale for
 * ever, or a delayed Muon step without its update). */
clp_status clp_pipefisher_check_work(const clp_sched *cycle, int work, int nfactors);

#endif
