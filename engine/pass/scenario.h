/* The scenario object: one schedule with the data files it is about (cost table, cluster, rank
 * layout, from engine/scenario/), resolved against each other, optionally passed through
 * PipeFisher, simulated. `clpipe sim`, the planner (engine/plan) and training's PipeFisher
 * start-up (engine/train/session_pf.c) all go through it, so the PipeFisher set-up (which data
 * the pass sees, how much memory the deferred factors keep) is written once, here.
 *
 * Lifetime: zero it with clp_scenario_init, fill the fields (a file's loader, a generator, a
 * caller's own table), call clp_scenario_free at the end. Every field set is freed there unless
 * its bit is in `borrowed` (the planner lends its cluster, the training session its schedule).
 * The PipeFisher step replaces sched by its cycle, which the scenario then owns (the borrowed
 * bit of the schedule is cleared); a caller that keeps the cycle sets sched to NULL after
 * taking it. */
#ifndef CLP_PASS_SCENARIO_H
#define CLP_PASS_SCENARIO_H

#include "engine/model/linear.h"
#include "engine/pass/pipefisher.h"
#include "engine/scenario/cluster.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/layout.h"
#include "engine/sched/sched.h"
#include "engine/sim/sim.h"

enum {
	CLP_SCN_SCHED = 1, /* `borrowed` bits: the caller frees this field */
	CLP_SCN_COSTS = 2,
	CLP_SCN_CLUSTER = 4,
	CLP_SCN_LAYOUT = 8,
};

typedef struct clp_scenario {
	clp_sched *sched;     /* the schedule (after clp_scenario_pipefisher: its K-step cycle) */
	clp_costs *costs;     /* required before PipeFisher or a simulation */
	clp_cluster *cluster; /* optional: without one, links and devices are the cost table's */
	clp_layout *layout;   /* rank -> device; used only together with a cluster */
	int64_t eager_bytes;  /* eager limit of the transfers; -1 (default): the cluster's */
	unsigned borrowed;    /* CLP_SCN_* bits of the fields clp_scenario_free leaves alone */
} clp_scenario;

void clp_scenario_init(clp_scenario *sc);
void clp_scenario_free(clp_scenario *sc);

/* The layout: the file's (needs a cluster; checked against the schedule and resolved against
 * the cluster, messages naming the file) or, with file NULL or "", one rank per device in the
 * schedule's order (clp_layout_from_sched). */
clp_status clp_scenario_resolve(clp_scenario *sc, const char *layout_file);

/* How PipeFisher is asked for. The kept memory (the inputs and output gradients of one layer
 * for one micro-batch, held while the layer's factors are deferred) is computed one way: given
 * bytes win; else, with a model, exactly as the stages allocate it (clp_model_kfac_layer, what
 * training and the planner use); else (`clpipe sim` has no model) a guess from the cost
 * table's stage 0 out_bytes (a micro-batch's rows of width d, taken at 4 bytes an element
 * whatever the table's precision: K-FAC keeps them in fp32): 7x for the inputs and 9x for
 * the output gradients, what clp_model_kfac_layer gives for a GPT-2 block with a 4x MLP (its
 * four linears read widths d, d, d, 4d and write 3d, d, 4d, d). */
typedef struct clp_scenario_pf {
	const clp_model_config *model; /* NULL: no model (the 7x/9x guess) */
	size_t tokens;                 /* rows of a micro-batch (B x T), with model */
	int64_t keep_a_bytes;          /* > 0: given (clpipe sim --kfac_keep_a) */
	int64_t keep_b_bytes;          /* > 0: given (clpipe sim --kfac_keep_b) */
	int64_t mem_cap;               /* kept bytes per rank at most; < 0: no cap */
	int max_steps;                 /* the largest K to try; 0: the pass's default */
	int min_steps;                 /* the least K (clp_pf_opts); 0: none */
	int split;                     /* CLP_PF_SPLIT_* bits */
	int work;                      /* CLP_PF_WORK_*: whose items (default K-FAC's) */
	int no_per_step;               /* 1: leave the per-step items out (the pass's
					* precondition = 0; to see what the refreshes alone add) */
	int steady;                    /* 1: the report's steady state too (clp_pf_opts) */
} clp_scenario_pf;

void clp_scenario_pf_default(clp_scenario_pf *p);

/* The kept bytes per layer and micro-batch for the deferred factors A and B (rule above). */
void clp_scenario_kfac_keep(const clp_scenario *sc, const clp_scenario_pf *p, int64_t *keep_a,
			    int64_t *keep_b);

/* Replace sc->sched (a one-step schedule with OPT_STEP ops) by its PipeFisher cycle, the pass
 * seeing the scenario's costs, cluster and layout. rep may be NULL. */
clp_status clp_scenario_pipefisher(clp_scenario *sc, const clp_scenario_pf *p,
				   clp_pf_report *rep);

/* The simulator's options for this scenario (costs, cluster, layout, eager limit; the rest at
 * clp_sim_opts_default), for a caller to adjust before clp_scenario_sim. */
void clp_scenario_sim_opts(const clp_scenario *sc, clp_sim_opts *o);

/* Simulate sc->sched; o NULL: clp_scenario_sim_opts's. r as for clp_sim_run. */
clp_status clp_scenario_sim(const clp_scenario *sc, const clp_sim_opts *o, clp_sim_result *r);

#endif
