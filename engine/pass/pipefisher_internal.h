/* Internals of the PipeFisher pass shared by its parts: pipefisher.c (the entry point, the
 * rounds), pipefisher_items.c (work items and their times), _owners.c (split ownership, the
 * packing bound), _place.c (a round of placement), _syncs.c (the collectives), _cap.c (the
 * memory cap) and _build.c (schedules with items at their slots, their simulated bubbles). */
#ifndef CLP_SCHED_PIPEFISHER_INTERNAL_H
#define CLP_SCHED_PIPEFISHER_INTERNAL_H

#include "engine/pass/pipefisher.h"

/* Times (seconds) closer than this are equal. */
#define PF_EPS 1e-12

/* Order of the items sharing a slot (all before the slot's base op). */
enum { PF_IMMEDIATE = 0, PF_GAP = 1, PF_SYNC = 2, PF_PRECOND = 3 };

/* A K-FAC work item of one rank. Its slot is (step, j): before base op j of cycle step `step`
 * (j = the rank's base op count: the end of that step), ordered by (key, seq). */
typedef struct pf_item {
	clp_op op;
	int rank;
	int dep;       /* base index of the FWD / backward it records (cycle step 0); -1 */
	int bwd;       /* curvature: base index of the stage's backward of its micro-batch */
	int layer_last; /* INV: index of the layer's last curvature item on the rank; -1 */
	int sync;      /* INV: index of the layer's KFAC_SYNC item on the rank; -1 */
	int prev;      /* INV phase: index of the phase before it; -1 */
	double dur;
	int64_t keep;  /* bytes kept when it runs after the backward */
	int placed, immediate, forced, in_tmpl;
	int step, j, key, seq;
	double t_place; /* planned start (timeline of the template it was placed on) */
} pf_item;

/* An idle gap of a rank's compute stream and the slot an item placed in it takes. */
typedef struct pf_gap {
	double t0, t1, used;
	int rank, step, j;
} pf_gap;

/* Where an op of a built schedule comes from: base op j of template step `step` (item -1), or
 * item `item` (then j and step are its slot). */
typedef struct pf_origin {
	int step, j, item;
} pf_origin;

typedef struct pf {
	const clp_sched *base;
	const clp_pf_opts *o;
	pf_item *it;
	int nit, cap;
	int seq;
	int kmax;            /* cycle steps the template simulates */
	int *kind;           /* per rank: cost-table device kind, -1 */
	double *speed;       /* per rank */
	pf_gap *gaps;        /* of the last template, rank by rank in time order */
	int ngaps;
	double *bwd_end;     /* per item: end of the backward it follows (template) */
	double *idle;        /* per rank: idle time of one base step */
	int mid_sync;        /* place factor all-reduces mid-step where they fit (opts.split) */
	int serial;          /* delayed Muon's fallback: no item into a gap, all before their dep */
	int *mid_j;          /* per rank: the slot of a mid-step all-reduce (mid_slots) */
	int *owner;          /* per model layer: the rank that inverts and preconditions it; -1:
			      * every holder of its stage (not split) */
} pf;

/* Whether the cycle has per-step KFAC_PRECOND items: opts.precondition, except for delayed
 * Muon (whose per-step work is its NS items). */
static inline int pf_per_step(const pf *P)
{
	return P->o->precondition && P->o->work != CLP_PF_WORK_MUON_DELAY;
}

/* A schedule of nsteps steps of the base lists (op.step = template step) with the items that
 * have in_tmpl set at their slots (item step s in template step s + warm) and, with precond,
 * KFAC_PRECOND before every OPT_STEP. *org (malloc()ed, clp_sched_nops entries, rank by
 * rank) says where each op comes from. */
clp_status pf_build(pf *P, int nsteps, int warm, int precond, clp_sched **out, pf_origin **org);
/* Simulate the template (warm step + kmax cycle steps with the immediate items): the gaps of
 * every rank (P->gaps) and each curvature item's backward end (P->bwd_end). */
clp_status pf_timeline(pf *P);
/* Simulate the base step: P->kind, P->speed and P->idle of every rank. */
clp_status pf_base_idle(pf *P);
/* Base index of rank r's gradient all-reduce of stage s (-1: none) and its group. */
int pf_find_allreduce(const clp_sched *b, int r, int s, int *group);
/* A copy of s (its shape, groups and lists) repeated `times` times (clp_sched_repeat). */
clp_status pf_repeated(const clp_sched *s, int times, clp_sched **out);
/* Simulate s with the pass's costs, cluster and layout: cycle time, utilisation. */
clp_status pf_simulate(const pf *P, const clp_sched *s, double *cycle_s, double *util);

/* pipefisher_items.c. Append an item (add_item) or a placed collective of stage s's layer l
 * over group g on rank r at base index j of cycle step `step`, ordered by key (add_sync). */
clp_status pf_add_item(pf *P, const pf_item *x);
clp_status pf_add_sync(pf *P, clp_op_kind kind, int s, int l, int g, int r, int step, int j,
		       int key);
/* Duration of an item on rank r as the simulator charges it; preconditioning per step of stage
 * s (layer -1: the whole stage, else one layer); inversion of every factor of one layer. */
double pf_item_time(const pf *P, const clp_op *op, int r);
double pf_precond_time(const pf *P, int s, int layer, int r);
double pf_layer_inv_time(const pf *P, int s, int r);
/* Curvature items for every forward of the base, and per layer and factor an inversion. */
clp_status pf_make_items(pf *P);
/* opts.split: inversions longer than their rank's shortest bubble split into three phases. */
clp_status pf_split_phases(pf *P);
/* pipefisher_owners.c: the owner of each layer (P->owner) and the report's packing bound. */
clp_status pf_assign_owners(pf *P);
void pf_packing_bound(const pf *P, clp_pf_report *rep);
/* pipefisher_place.c: whether item a's slot comes before (step, j, key, seq); one round of
 * placement at the current kmax (*K = the cycle length, 0: kmax steps were not enough). */
int pf_before(const pf_item *a, int step, int j, int key, int seq);
clp_status pf_round(pf *P, int *K);
/* pipefisher_syncs.c: the factor all-reduces (*last = the latest step used) and the inverse
 * exchanges of split stages (raise *K to include them). */
clp_status pf_make_syncs(pf *P, int *last);
clp_status pf_make_inv_syncs(pf *P, int *K);
/* pipefisher_cap.c: mark the factors that would push a rank's kept data over opts.mem_cap
 * immediate; returns how many, *peak the most kept. */
int pf_apply_cap(pf *P, int64_t *peak);

#endif
