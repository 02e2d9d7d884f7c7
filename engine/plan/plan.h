/* Placement (docs/PLACEMENT.md): which devices serve which pipeline stages, how many layers each
 * stage gets, the data-parallel degree, the schedule (GPipe, 1F1B, interleaved, Chimera, ZB-H1;
 * with or without PipeFisher) and activation recomputation, chosen for a cluster of mixed
 * devices. Pure functions of data: a cluster (engine/scenario/cluster.h), a block cost table
 * and the model; every candidate is scored by the simulator (engine/sim) with its memory model
 * checked against each device's memory.
 *
 * Inputs
 *   block table  a cost table (engine/scenario/costs.h) of exactly three entries, named in
 *                `blocks`: "embedding", "layer" (one transformer layer), "head" (final norm,
 *                head and loss), each with its times on the table's device kind and, under
 *                `devices`, on other kinds (`clpipe bench --model` writes one;
 *                clp_plan_blocks_from_profiles makes one from PipeFisher's per-layer profiles).
 *                Devices whose kind the table lacks scale the table's times by their cluster
 *                `speed`.
 *   memory       computed from the model config as the executor's stages allocate it
 *                (clp_model_stage_mem_prec, in the model's train.precision), not from the
 *                table, so that it holds for any split.
 *   model        layers, micro-batch shape, micro-batches per step over all replicas (the
 *                global batch is kept: R replicas run M / R micro-batches each), optimizer.
 *
 * Method (clp_plan_search): for every device subset (all devices, then without the slowest
 * kinds), data-parallel degree R and depth D with D x R devices, replica grouping (contiguous in
 * the topology, strided, or speed classes dealt over the replicas) and schedule, the layers are
 * balanced by a greedy that is exact for the bottleneck (add each layer where the slowest rank
 * it lands on stays fastest; per-rank memory budgets respected); recomputation is tried where
 * memory binds; the candidate is simulated, and if a rank's simulated peak is over its device
 * the budget is cut and the split redone. The best candidates are then refined on the simulator
 * (devices of two positions exchanged, single layers moved between stages). */
#ifndef CLP_PLAN_PLAN_H
#define CLP_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scenario/cluster.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/model/model.h"
#include "engine/model/stage_mem.h"
#include "engine/sched/sched.h"
#include "engine/skip/skip.h"
#include "engine/train/train_config.h"
#include "topology/inventory.h"

/* ---- blocks and memory (engine/plan/blocks.c, mem.c) ---------------------------------------- */

enum { CLP_PLAN_EMBED = 0, CLP_PLAN_LAYER = 1, CLP_PLAN_HEAD = 2, CLP_PLAN_NBLOCKS = 3 };
const char *clp_plan_block_name(int b); /* "embedding", "layer", "head" */

/* The table is a block table (three entries named as above); origin names it in the message. */
clp_status clp_plan_blocks_check(const clp_costs *c, const char *origin);

/* A block table from PipeFisher per-layer profiles (../shared/profiles/pipefisher, one CSV), one
 * file per device kind (the first file's kind is the table's): the layer's times and K-FAC
 * times from the row of micro-batch size `batch`; embedding and head cost nothing (the profiles
 * do not measure them). */
clp_status clp_plan_blocks_from_profiles(const char *const *csv, int n, int batch,
					 clp_costs **out);


/* ---- the workload and the options ------------------------------------------------------------ */

typedef struct clp_plan_model {
	clp_model_config cfg; /* resolved (clp_model_config_resolve) */
	size_t batch, seq;    /* a micro-batch: batch sequences of seq tokens */
	int micro_batches;    /* M: micro-batches per step over all replicas */
	int kfac;             /* the optimizer is K-FAC: PipeFisher is a choice */
	int kfac_interval;    /* K of the serial cycle rule (without PipeFisher) */
	int shampoo;          /* the optimizer is Shampoo: PipeFisher (its roots refreshed in the
			       * bubbles, docs/OPTIMIZERS.md) is a choice too */
	int shampoo_iters;    /* its coupled Newton iterations per root */
	int soap;             /* the optimizer is SOAP: PipeFisher (its eigenbases refreshed in the
			       * bubbles as Shampoo's roots, CLP_PF_WORK_SOAP's costs) too */
	int muon_delay;       /* the optimizer is the one-step-delayed Muon (muon.delay): PipeFisher
			       * (its Newton-Schulz as the step's bubble items) is a choice too */
	int muon_ns_steps;    /* its Newton-Schulz iterations (muon.ns_steps) */
	double opt_layer_work; /* the optimizer's extra work per layer and step, in forward +
				* backwards of one micro-batch of the layer (Muon; 0: none) */
	/* The optimizer's own device buffers on a rank holding stages with tables tabs[0..n-1]
	 * (clp_optim_info.own_bytes: Shampoo's statistics, Muon's scratch; NULL: none). The
	 * planner counts each stage as its own rank's. */
	int64_t (*opt_own_bytes)(const clp_param_table *const *tabs, int n);
	clp_dtype precision;  /* train.precision: activations and messages in 2 bytes an element
			       * for bf16 / fp16, plus the 16-bit weight copy (CLP_F32 when zero) */
	char freeze[1024];    /* train.freeze: with cfg's LoRA base, the tensors kept as weights
			       * only (no gradient or optimizer state) */
} clp_plan_model;

/* The memory of blocks first..last of model c (m's config, or one of another layer count) as
 * clp_model_stage_mem_frozen counts it for m's run: its precision, micro-batch, and frozen
 * tensors (m->freeze, cfg's LoRA base); with m->opt_own_bytes also the optimizer's own
 * buffers of a rank holding just these blocks (own_bytes, added to opt_bytes). */
clp_status clp_plan_stage_mem(const clp_plan_model *m, const clp_model_config *c, int first,
			      int last, int split, int recompute, clp_model_mem *out);

/* The block table of measured times (what `clpipe bench --model` writes): t holds, for each of
 * the n device kinds (the first is the table's, the others go under `devices`), per block
 * (CLP_PLAN_NBLOCKS) its CLP_COST_NTIMES times; memory per block comes from the model as the
 * stages allocate it; fdim (nf of them, may be 0) are a layer's K-FAC factor dimensions. */
clp_status clp_plan_blocks_make(const clp_plan_model *m, const char *const *kinds,
				const double *t, int n, const int *fdim, int nf,
				const char *source, clp_costs **out);

/* Links the planner assumes where a cluster comes from an inventory (hwloc files). */
typedef struct clp_plan_links {
	clp_link_spec pcie;         /* devices under one socket (the cluster's intra default) */
	clp_link_spec cross_socket; /* devices under different sockets of one host */
	clp_link_spec inter_host;
	double nvlink_latency_s;    /* NVLink links take the inventory's bandwidth */
} clp_plan_links;
void clp_plan_links_default(clp_plan_links *l);

/* A cluster from an inventory: per host its accelerators (its CPU devices too when include_cpu,
 * or when the host has no accelerator), ids "<host>:<OpenCL index>" (the part after the colon is
 * the device selector on that host), memory from OpenCL, kind = the first kind of `blocks`
 * (may be NULL) contained in the device's name, else the name; links as above. */
clp_status clp_plan_cluster_from_inventory(const clp_topo_cluster *inv, const clp_costs *blocks,
					   const clp_plan_links *links, int include_cpu,
					   clp_cluster **out);

typedef struct clp_plan_opts {
	unsigned kinds;       /* bit mask of clp_sched_kind to try (default: all) */
	int chunks;           /* v of interleaved 1F1B (default 2) */
	int max_replicas;     /* 0: any */
	int fixed_replicas;   /* > 0: only this data-parallel degree */
	int fixed_depth;      /* > 0: only this pipeline depth */
	int recompute;        /* -1 where memory needs it (default), 0 never, 1 always */
	int pipefisher;       /* K-FAC, Shampoo, delayed Muon: -1 try both (default), 0 off, 1 on */
	double mem_reserve;   /* fraction of each device's memory left free (default 0.1) */
	int refine_top;       /* candidates refined on the simulator (default 4) */
	int refine_evals;     /* simulations per refined candidate at most (default 120) */
	int phases_top;       /* Shampoo with PipeFisher: the best this many PipeFisher
			       * candidates (scored with whole roots) scored again with the roots
			       * in phases, as clpipe train runs them (default 2; 0: whole) */
	int drop_slow;        /* also try without the slowest device kinds (default 1) */
	int verbose;          /* one line per candidate to stderr */
} clp_plan_opts;
void clp_plan_opts_default(clp_plan_opts *o);

/* ---- a plan ---------------------------------------------------------------------------------- */

typedef struct clp_plan {
	int kind;            /* clp_sched_kind */
	int depth, replicas, chunks, microbatches; /* D, R, v, N per replica */
	int recompute, pipefisher;
	int pf_split;        /* PipeFisher's work split between a stage's holders
			      * (pipeline.pipefisher_split; Chimera, replicas) */
	int kfac_K;          /* PipeFisher's cycle (refresh interval); 0 without */
	int nstages;         /* D x v */
	int *layers;         /* [nstages] layers per global stage */
	int nranks;          /* D x R */
	int *device;         /* [nranks] cluster device of each rank (rank = replica * D + pos) */
	/* scored by the simulator. step_s, what the search ranks by: the steady state's step.
	 * With PipeFisher that is two cycles back to back less one, per step (the report's
	 * steady_step_s): work at a step's start (the delayed Muon's Newton-Schulz, a root
	 * phase the pass put there) runs, in a run, in the previous step's tail, which one
	 * cycle from idle ranks lacks; first_step_s is that cold cycle's step, the warm-up a run
	 * pays once. Without PipeFisher both are the one step from idle ranks (the base lists
	 * start with no work to hide: base_steady_step_s equals it, test_plan checks it). */
	double step_s, bubble, util;
	double first_step_s;        /* PipeFisher: the first cycle's step from idle ranks */
	double base_step_s, base_steady_step_s; /* PipeFisher: its base schedule's, cold, steady */
	int pf_phases;              /* PipeFisher with Shampoo: scored with its roots in phases
				     * (CLP_PF_SPLIT_PHASES, what clpipe train runs) */
	int64_t *peak_bytes;  /* [nranks] simulated peak */
	int64_t *usable_bytes; /* [nranks] device memory less the reserve (0: unknown) */
	int over_memory;      /* ranks whose peak exceeds their usable memory */
	int evaluations;      /* simulations the search ran */
	char note[256];
} clp_plan;

/* A plan of this structure with its arrays allocated (layers and devices zero). */
clp_status clp_plan_init(clp_plan *p, int kind, int depth, int replicas, int chunks,
			 int microbatches);
void clp_plan_clear(clp_plan *p);
clp_status clp_plan_copy(clp_plan *dst, const clp_plan *src);

/* The best plan (fastest simulated step that fits every device). CLP_ERR_NOMEM with a message
 * naming the tightest device when nothing fits. */
clp_status clp_plan_search(const clp_cluster *c, const clp_costs *blocks,
			   const clp_plan_model *m, const clp_plan_opts *o, clp_plan *best);

/* The naive plan the search is compared with: every device of the cluster in its order as one
 * pipeline, 1F1B, layers split evenly (earlier stages take the remainder), recomputation only
 * if it is needed to fit (over_memory says whether it fits even so). Simulated like the rest. */
clp_status clp_plan_naive(const clp_cluster *c, const clp_costs *blocks, const clp_plan_model *m,
			  const clp_plan_opts *o, clp_plan *out);

/* Simulate p (its structure, layers and devices set) and fill its scores. */
clp_status clp_plan_evaluate(const clp_cluster *c, const clp_costs *blocks,
			     const clp_plan_model *m, const clp_plan_opts *o, clp_plan *p);

/* What the plan runs: the schedule (the generator's, with the plan's stage map; PipeFisher's
 * cycle when p->pipefisher), the per-stage cost table the simulator reads, and the layout. */
clp_status clp_plan_schedule(const clp_plan *p, const clp_plan_model *m, clp_sched **out);
clp_status clp_plan_stage_costs(const clp_costs *blocks, const clp_plan_model *m,
				const clp_sched *s, int split, int recompute, int kfac_serial,
				clp_costs **out);
clp_status clp_plan_layout(const clp_plan *p, const clp_cluster *c, const clp_sched *s,
			   clp_layout **out);
/* The cost table plan p simulates on its base schedule s: clp_plan_stage_costs (K-FAC's work
 * serially without PipeFisher); Shampoo with PipeFisher: the OPT time without its work, which
 * becomes the pass's items (clp_pf_work_costs: per-step statistics and preconditioning, the
 * roots' refreshes, whole as clpipe train runs them). */
clp_status clp_plan_costs(const clp_costs *blocks, const clp_plan_model *m, const clp_plan *p,
			  const clp_sched *s, clp_costs **out);

/* Outputs: the plan as JSON (settings, predicted step, memory per rank; the naive split's
 * figures when given) and the plan's settings in a training config: pipeline.schedule, stages,
 * replicas, chunks, layers, layout (= layout_path), train.micro_batches, train.recompute and,
 * with PipeFisher, kfac.interval. */
clp_status clp_plan_save(const clp_plan *p, const clp_cluster *c, const clp_plan_model *m,
			 const clp_plan *naive, const char *path);
clp_status clp_plan_apply_config(const clp_plan *p, const char *layout_path,
				 clp_train_config *cfg);
/* The workload of a training config: model (vocab 0: the tokenizer's), train.batch x train.seq,
 * train.micro_batches x pipeline.replicas micro-batches per step (the global batch the plan
 * keeps), optim.name = "kfac" and kfac.interval, train.precision. */
clp_status clp_plan_model_from_config(const clp_train_config *c, clp_plan_model *m);

/* ---- SkipPipe on the same cluster (engine/plan/skip.c) ------------------------------------- */

/* SkipPipe for slow wide-area links: the model in S stages, every device a node (nodes spread
 * evenly over the stages, stage 0 taking the remainder), the step's micro-batches spread over
 * the stage-0 nodes, paths of P stages (memory cap 3 micro-batches a node), allocation and paths
 * from engine/skip's scheduler (`iterations` moves), the iteration simulated on the same
 * cluster and block costs. SkipPipe computes less than a full pipeline (each micro-batch skips
 * S - P stages) and trains differently: the planner reports it next to the plan, it does not
 * choose it, and clpipe train does not run path schedules yet. */
typedef struct clp_plan_skip {
	int nstages, per_origin;
	clp_skip_rules rules;
	double iter_s;
	clp_skip_paths *paths;
} clp_plan_skip;
clp_status clp_plan_skippipe(const clp_cluster *c, const clp_costs *blocks,
			     const clp_plan_model *m, int S, int P, int iterations,
			     clp_plan_skip *out);
void clp_plan_skip_clear(clp_plan_skip *s);

#endif
