/* The PipeFisher pass (pipefisher.h): the base schedule's checks, the rounds (items, placement,
 * memory cap) until the K-step cycle fits, the cycle built, validated and simulated, and the
 * report. The parts are pipefisher_items.c, _owners.c, _place.c, _syncs.c, _cap.c and
 * _build.c; the check of a saved cycle against a pipeline is pipefisher_check.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pass/pipefisher_internal.h"
#include "engine/pass/validate.h"

void clp_pf_opts_default(clp_pf_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->eager_bytes = -1;
	o->mem_cap = -1;
	o->max_steps = 256;
	o->precondition = 1;
}

static clp_status check_base(const clp_sched *b, const clp_pf_opts *o)
{
	if (!o->costs)
		return clp_error(CLP_ERR_INVALID, "pipefisher: needs a cost table with K-FAC times");
	if (o->costs->nstages != b->nstages)
		return clp_error(CLP_ERR_INVALID, "pipefisher: the cost table%s%s has %d stages, the "
				 "schedule %d", o->costs->file[0] ? " " : "", o->costs->file,
				 o->costs->nstages, b->nstages);
	for (int s = 0; s < b->nstages; s++)
		if (b->stages[s].nlayers != o->costs->stages[s].nlayers)
			return clp_error(CLP_ERR_INVALID, "pipefisher: stage %d holds %d layers in the "
					 "schedule, %d in the cost table", s, b->stages[s].nlayers,
					 o->costs->stages[s].nlayers);
	if (b->nsteps != 1)
		return clp_error(CLP_ERR_INVALID, "pipefisher: schedule %s covers %d steps; give one "
				 "step (the pass makes the cycle)", b->name, b->nsteps);
	if (o->work < CLP_PF_WORK_KFAC || o->work > CLP_PF_WORK_MUON_DELAY)
		return clp_error(CLP_ERR_INVALID, "pipefisher: work %d is not K-FAC's (0), Shampoo's "
				 "(1), Muon's (2) or delayed Muon's (3)", o->work);
	if (o->max_steps < 1 || o->max_steps > 4096)
		return clp_error(CLP_ERR_INVALID, "pipefisher: max_steps %d out of [1, 4096]",
				 o->max_steps);
	if (o->min_steps < 0 || o->min_steps > o->max_steps)
		return clp_error(CLP_ERR_INVALID, "pipefisher: min_steps %d out of [0, max_steps %d]",
				 o->min_steps, o->max_steps);
	if (o->min_steps > 1 && o->work == CLP_PF_WORK_MUON_DELAY)
		return clp_error(CLP_ERR_INVALID, "pipefisher: min_steps %d: the delayed Muon's "
				 "cycle is one step", o->min_steps);
	for (int r = 0; r < b->nranks; r++) {
		int opt = 0;

		if (b->ranks[r].mode != CLP_RANK_ORDERED)
			return clp_error(CLP_ERR_UNSUPPORTED, "pipefisher: rank %d runs in dataflow "
					 "mode; the pass needs ranks that run their lists in order", r);
		for (int i = 0; i < b->ranks[r].nops; i++) {
			int k = b->ranks[r].ops[i].kind;

			opt += k == CLP_OP_OPT_STEP;
			if (clp_op_is_kfac(k))
				return clp_error(CLP_ERR_INVALID, "pipefisher: schedule %s already has "
						 "K-FAC items (rank %d op %d)", b->name, r, i);
		}
		if (!opt)
			return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d has no OPT_STEP (the "
					 "preconditioning and inversions need the step's end)", r);
	}
	return CLP_OK;
}

static void report(const pf *P, int K, int64_t peak, clp_pf_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->K = K;
	for (int g = 0; g < P->ngaps; g++)
		if (P->gaps[g].t1 - P->gaps[g].t0 > rep->max_gap_s)
			rep->max_gap_s = P->gaps[g].t1 - P->gaps[g].t0;
	for (int s = 0; s < P->base->nstages; s++)
		rep->split_stages += P->base->stages[s].nlayers > 0 &&
				     P->owner[P->base->stages[s].first_layer] >= 0;
	rep->peak_kept = peak;
	for (int i = 0; i < P->nit; i++) {
		const pf_item *x = &P->it[i];

		rep->items++;
		rep->immediate += x->immediate;
		rep->forced += x->forced;
		rep->kfac_s += clp_op_is_collective(x->op.kind) ? 0 : x->dur;
		rep->exchanges += x->op.kind == CLP_OP_KFAC_INV_SYNC;
		if (!clp_op_is_collective(x->op.kind) && x->dur > rep->max_item_s)
			rep->max_item_s = x->dur;
	}
	for (int r = 0; pf_per_step(P) && r < P->base->nranks; r++)
		for (int i = 0; i < P->base->ranks[r].nops; i++) {
			const clp_op *o = &P->base->ranks[r].ops[i];

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			rep->precond_items += K;
			rep->precond_s += K * pf_precond_time(P, o->stage, -1, r);
		}
}

/* The pass's state for base: the per-rank and per-layer arrays (pf_free releases them). */
static clp_status pf_init(pf *P, const clp_sched *base, const clp_pf_opts *o, int mid_sync)
{
	memset(P, 0, sizeof(*P));
	P->base = base;
	P->o = o;
	P->mid_sync = mid_sync;
	P->mid_j = calloc((size_t)base->nranks + 1, sizeof(int));
	P->kind = calloc((size_t)base->nranks + 1, sizeof(int));
	P->speed = calloc((size_t)base->nranks + 1, sizeof(double));
	P->idle = calloc((size_t)base->nranks + 1, sizeof(double));
	P->owner = calloc((size_t)base->nlayers + 1, sizeof(int));
	if (!P->kind || !P->speed || !P->idle || !P->owner || !P->mid_j)
		return clp_error(CLP_ERR_NOMEM, "pipefisher: out of host memory");
	return CLP_OK;
}

static void pf_free(pf *P)
{
	free(P->it);
	free(P->gaps);
	free(P->kind);
	free(P->speed);
	free(P->bwd_end);
	free(P->idle);
	free(P->owner);
	free(P->mid_j);
}

/* Items, then rounds: more steps while the work does not fit; more immediate factors while the
 * kept data exceeds the cap (both only grow, so this ends). *K: the cycle length; *peak: the
 * most kept data. */
static clp_status place_items(pf *P, int *K, int64_t *peak)
{
	const clp_pf_opts *o = P->o;

	CLP_TRY(pf_base_idle(P));
	CLP_TRY(pf_assign_owners(P));
	CLP_TRY(pf_make_items(P));
	P->kmax = o->max_steps < 4 ? o->max_steps : 4;
	if (P->kmax < o->min_steps) /* the template simulates at least the least cycle */
		P->kmax = o->min_steps;
	if (o->work == CLP_PF_WORK_MUON_DELAY)
		P->kmax = 1; /* K = 1: every item in the step it serves */
	for (;;) {
		CLP_TRY(pf_round(P, K));
		if (!*K) {
			if (P->kmax >= o->max_steps)
				return clp_error(CLP_ERR_INVALID, "pipefisher: the K-FAC work does not "
						 "fit in the bubbles of %d steps (max_steps)",
						 o->max_steps);
			P->kmax = 2 * P->kmax < o->max_steps ? 2 * P->kmax : o->max_steps;
			continue;
		}
		if (!pf_apply_cap(P, peak))
			return CLP_OK;
	}
}

/* The steady state of cycle s of K steps (which the cold cycle_s, one cycle from idle ranks,
 * overstates where the work sits at a step's start, in the previous step's tail): two cycles
 * simulated, less one. */
static clp_status steady_step(const pf *P, const clp_sched *s, int K, double cold_s,
			      double *steady_s)
{
	clp_sched *two = NULL;
	double span = 0, util;
	clp_status st = pf_repeated(s, 2, &two);

	if (st == CLP_OK)
		st = pf_simulate(P, two, &span, &util);
	clp_sched_free(two);
	CLP_TRY(st);
	*steady_s = (span - cold_s) / K;
	return CLP_OK;
}

/* The base over the same K steps, simulated: rep's base step, the time the cycle adds, the
 * packing bound. */
static clp_status simulate_base(pf *P, int K, clp_pf_report *rep)
{
	clp_sched *rb = NULL;
	pf_origin *org = NULL;
	clp_status st;

	for (int i = 0; i < P->nit; i++)
		P->it[i].in_tmpl = 0;
	st = pf_build(P, K, 0, 0, &rb, &org);
	if (st == CLP_OK)
		st = pf_simulate(P, rb, &rep->base_step_s, &rep->base_util);
	if (st == CLP_OK && P->o->steady)
		st = steady_step(P, rb, K, rep->base_step_s, &rep->steady_base_step_s);
	clp_sched_free(rb);
	free(org);
	CLP_TRY(st);
	rep->base_step_s /= K;
	rep->steady_added_s = rep->steady_step_s - rep->steady_base_step_s;
	rep->added_s = rep->step_s - rep->base_step_s;
	pf_packing_bound(P, rep);
	return CLP_OK;
}

/* The steps of run_pass: the cycle into *s (freed by the caller on failure), rep filled. */
static clp_status pass_steps(pf *P, clp_sched **s, clp_pf_report *rep)
{
	pf_origin *org = NULL;
	int K = 0;
	int64_t peak = 0;
	clp_status st;

	CLP_TRY(place_items(P, &K, &peak));
	for (int i = 0; i < P->nit; i++)
		P->it[i].in_tmpl = P->it[i].placed;
	st = pf_build(P, K, 0, pf_per_step(P), s, &org);
	free(org);
	CLP_TRY(st);
	CLP_TRY(clp_sched_validate(*s, 1));
	report(P, K, peak, rep);
	CLP_TRY(pf_simulate(P, *s, &rep->step_s, &rep->util));
	if (P->o->steady || P->o->work == CLP_PF_WORK_MUON_DELAY) /* run_pass compares it */
		CLP_TRY(steady_step(P, *s, K, rep->step_s, &rep->steady_step_s));
	rep->step_s /= K;
	return simulate_base(P, K, rep);
}

/* One pass over base (serial: delayed Muon's fallback, no item in a gap): the cycle and rep. */
static clp_status one_pass(const clp_sched *base, const clp_pf_opts *o, int mid_sync, int serial,
			   clp_sched **out, clp_pf_report *rep)
{
	pf P;
	clp_sched *s = NULL;
	clp_status st = pf_init(&P, base, o, mid_sync);

	P.serial = serial;
	if (st == CLP_OK)
		st = pass_steps(&P, &s, rep);
	pf_free(&P);
	if (st != CLP_OK) {
		clp_sched_free(s);
		return st;
	}
	*out = s;
	return CLP_OK;
}

/* The pass; for delayed Muon also its serial fallback (every NS item right before the
 * collectives and OPT_STEP it serves, as the optimizer step would run it), which it can always
 * return. First fit fills the gaps of a template that starts after a warm step: where that
 * step's tail is skewed (a long OPT_STEP on a late stage), the next step's first gaps are longer
 * than they are in a step on its own, and the items there delay the first forwards. So the
 * placement is kept unless the fallback simulates a shorter steady step (the second of two
 * cycles, what a run sees), or as short a one and a shorter cycle from idle ranks; ties keep
 * the placement. The cycle returned is never slower than the serial step. Deterministic. */
static clp_status run_pass(const clp_sched *base, const clp_pf_opts *o, int mid_sync,
			   clp_sched **out, clp_pf_report *rep)
{
	clp_sched *fb = NULL;
	clp_pf_report frep;
	clp_status st;

	CLP_TRY(one_pass(base, o, mid_sync, 0, out, rep));
	rep->placed_step_s = rep->step_s;
	rep->placed_steady_step_s = rep->steady_step_s;
	if (o->work != CLP_PF_WORK_MUON_DELAY)
		return CLP_OK;
	st = one_pass(base, o, mid_sync, 1, &fb, &frep);
	if (st != CLP_OK) {
		clp_sched_free(*out);
		*out = NULL;
		return st;
	}
	if (frep.steady_step_s < rep->steady_step_s - 1e-9 * rep->steady_step_s ||
	    (frep.steady_step_s <= rep->steady_step_s + 1e-9 * rep->steady_step_s &&
	     frep.step_s < rep->step_s - 1e-9 * rep->step_s)) {
		frep.serial_fallback = 1;
		frep.placed_step_s = rep->step_s;
		frep.placed_steady_step_s = rep->steady_step_s;
		*rep = frep;
		clp_sched_free(*out);
		*out = fb;
	} else {
		clp_sched_free(fb);
	}
	if (!o->steady) /* computed for the comparison only */
		rep->steady_step_s = rep->steady_added_s = rep->placed_steady_step_s = 0;
	return CLP_OK;
}

clp_status clp_pipefisher(const clp_sched *base, const clp_pf_opts *o, clp_sched **out,
			  clp_pf_report *rep)
{
	clp_pf_report dummy;
	clp_status st;

	*out = NULL;
	rep = rep ? rep : &dummy;
	CLP_TRY(check_base(base, o));
	st = run_pass(base, o, (o->split & CLP_PF_SPLIT_SYNC) != 0, out, rep);
	if (st != CLP_OK && (o->split & CLP_PF_SPLIT_SYNC)) /* mid-step all-reduces the validator refused: without */
		st = run_pass(base, o, 0, out, rep);
	return st;
}
