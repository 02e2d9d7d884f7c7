/* Whether a saved PipeFisher cycle fits a pipeline (clp_pipefisher_check, pipefisher.h): used
 * when training reuses a cycle instead of running the pass. */
#include <string.h>

#include "engine/pass/pipefisher.h"
#include "engine/sched/sched.h"

clp_status clp_pipefisher_check(const clp_sched *base, const clp_sched *cycle)
{
	if (cycle->nranks != base->nranks || cycle->nstages != base->nstages ||
	    cycle->nmb != base->nmb || cycle->npipes != base->npipes ||
	    cycle->nreplicas != base->nreplicas || cycle->ngroups < base->ngroups ||
	    base->nsteps != 1)
		return clp_error(CLP_ERR_INVALID, "pipefisher: the cycle (%d ranks, %d stages, %d "
				 "micro-batches, %d pipelines, %d replicas) is not made for this "
				 "pipeline (%d, %d, %d, %d, %d)", cycle->nranks, cycle->nstages,
				 cycle->nmb, cycle->npipes, cycle->nreplicas, base->nranks,
				 base->nstages, base->nmb, base->npipes, base->nreplicas);
	for (int i = 0; i < base->nstages; i++)
		if (cycle->stages[i].first_layer != base->stages[i].first_layer ||
		    cycle->stages[i].nlayers != base->stages[i].nlayers ||
		    cycle->stages[i].embed != base->stages[i].embed ||
		    cycle->stages[i].head != base->stages[i].head)
			return clp_error(CLP_ERR_INVALID, "pipefisher: the cycle's stage %d holds layers "
					 "%d..+%d, this pipeline's %d..+%d", i,
					 cycle->stages[i].first_layer, cycle->stages[i].nlayers,
					 base->stages[i].first_layer, base->stages[i].nlayers);
	for (int r = 0; r < base->nranks; r++) {
		const clp_rank_prog *b = &base->ranks[r], *c = &cycle->ranks[r];
		int j = 0, t = 0;

		for (int i = 0; i < c->nops; i++) {
			clp_op want;

			if (clp_op_is_kfac(c->ops[i].kind))
				continue;
			if (j == b->nops) {
				j = 0;
				t++;
			}
			want = b->ops[j++];
			want.step = (uint16_t)t;
			if (memcmp(&want, &c->ops[i], sizeof(want))) {
				char x[160], y[160];

				clp_op_describe(&c->ops[i], x, sizeof(x));
				clp_op_describe(&want, y, sizeof(y));
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d of the cycle is "
						 "%s (step %d); this pipeline's schedule has %s (step %d) "
						 "there", r, i, x, c->ops[i].step, y, t);
			}
		}
		if (t + 1 != cycle->nsteps || j != b->nops)
			return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d: the cycle does not hold "
					 "%d whole steps of this pipeline's schedule", r, cycle->nsteps);
	}
	return CLP_OK;
}

/* Whether phase `phase` of the refresh (st, l, f) follows op i on the rank. */
static int later_phase(const clp_rank_prog *p, int i, int st, int l, int f, int phase)
{
	for (int j = i + 1; j < p->nops; j++)
		if (p->ops[j].kind == CLP_OP_KFAC_INV && p->ops[j].stage == st &&
		    p->ops[j].layer == l && p->ops[j].factor == f && p->ops[j].mb == phase)
			return 1;
	return 0;
}

/* Rank r's ops of Shampoo's layer l, factor f of stage st (phases in order) after its
 * OPT_STEP of step 0 at index opt: how many whole items (a phased one counts once). */
static int count_refresh(const clp_rank_prog *p, int opt, int st, int l, int f, int *bad)
{
	int n = 0, phase = 0;

	for (int i = 0; i < p->nops; i++) {
		const clp_op *o = &p->ops[i];

		if (o->kind != CLP_OP_KFAC_INV || o->stage != st || o->layer != l || o->factor != f)
			continue;
		if (i < opt || (o->mb >= 0 && o->mb != phase)) {
			*bad = i;
			return -1;
		}
		if (o->mb < 0) {
			n++;
			continue;
		}
		phase++;
		if (!later_phase(p, i, st, l, f, phase)) { /* whole at its last phase */
			n++;
			phase = 0;
		}
	}
	return n;
}

/* Delayed Muon's NS items of (stage st, layer l, matrix f) in step t on a rank, up to op `end`
 * (exclusive) of its list, whole (a phased one counts at its last phase); *bad: an op out of
 * phase order (-1: none). Phases of several NS in one step are counted each. */
static int count_ns(const clp_rank_prog *p, int end, int t, int st, int l, int f, int *bad)
{
	int n = 0, phase = 0;

	*bad = -1;
	for (int i = 0; i < end; i++) {
		const clp_op *o = &p->ops[i];

		if (o->kind != CLP_OP_KFAC_INV || o->step != t || o->stage != st || o->layer != l ||
		    o->factor != f)
			continue;
		if (o->mb < 0) {
			n += phase == 0;
			if (phase) {
				*bad = i;
				return -1;
			}
			continue;
		}
		if (o->mb != phase) {
			*bad = i;
			return -1;
		}
		phase++;
		if (!later_phase(p, i, st, l, f, phase)) { /* whole at its last phase */
			n++;
			phase = 0;
		}
	}
	return n;
}

/* Index of rank p's KFAC_INV_SYNC of (st, l) in step t before op end; -1. */
static int find_exchange(const clp_rank_prog *p, int end, int t, int st, int l)
{
	for (int i = 0; i < end; i++)
		if (p->ops[i].kind == CLP_OP_KFAC_INV_SYNC && p->ops[i].step == t &&
		    p->ops[i].stage == st && p->ops[i].layer == l)
			return i;
	return -1;
}

/* clp_pipefisher_check_work for delayed Muon: rank r's OPT_STEP at op i of its list. */
static clp_status check_delay_opt(const clp_sched *cycle, int r, int i, int nfactors)
{
	const clp_rank_prog *p = &cycle->ranks[r];
	const clp_op *o = &p->ops[i];
	const clp_stage_info *si = &cycle->stages[o->stage];
	int f0 = nfactors > 0 ? 1 : 0, f1 = nfactors > 0 ? nfactors : 0;

	for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
		int ex = find_exchange(p, i, o->step, o->stage, l);

		for (int f = f0; f <= f1; f++) {
			int bad, n = count_ns(p, ex >= 0 ? ex : i, o->step, o->stage, l, f, &bad);
			int all = count_ns(p, p->nops, o->step, o->stage, l, f, &bad);

			if (n < 0 || all < 0)
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d: delayed "
						 "Muon's Newton-Schulz of stage %d layer %d matrix %d: "
						 "phases out of order", r, bad, o->stage, l, f);
			if (all != n)
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d: delayed Muon's "
						 "Newton-Schulz of stage %d layer %d matrix %d in step %d "
						 "comes after %s (op %d), which consumes it", r, o->stage,
						 l, f, o->step, ex >= 0 ? "its exchange" : "the OPT_STEP",
						 ex >= 0 ? ex : i);
			if (n == 1 || (n == 0 && ex >= 0))
				continue;
			return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d has %d Newton-Schulz "
					 "items of stage %d layer %d matrix %d in step %d before its "
					 "OPT_STEP (op %d); delayed Muon needs one%s", r, n, o->stage, l,
					 f, o->step, i, n ? "" : " (the schedule lacks it: the step "
					 "would apply no update)");
		}
	}
	return CLP_OK;
}

clp_status clp_pipefisher_check_work(const clp_sched *cycle, int work, int nfactors)
{
	const char *who = work == CLP_PF_WORK_SHAMPOO ? "Shampoo"
			  : work == CLP_PF_WORK_SOAP  ? "SOAP"
			  : work == CLP_PF_WORK_MUON  ? "Muon"
						      : "delayed Muon";
	int delay = work == CLP_PF_WORK_MUON_DELAY;
	int refresh = work == CLP_PF_WORK_SHAMPOO || work == CLP_PF_WORK_SOAP; /* the same items */

	if (!refresh && work != CLP_PF_WORK_MUON && !delay)
		return CLP_OK;
	for (int r = 0; r < cycle->nranks; r++) {
		const clp_rank_prog *p = &cycle->ranks[r];

		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];
			const clp_stage_info *si;

			if (delay ? clp_op_is_kfac(o->kind) && o->kind != CLP_OP_KFAC_INV &&
					    o->kind != CLP_OP_KFAC_INV_SYNC
				  : clp_op_is_kfac(o->kind) && o->kind != CLP_OP_KFAC_PRECOND &&
					    (!refresh || o->kind != CLP_OP_KFAC_INV))
				return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d is %s, not an "
						 "item of %s's work", r, i, clp_op_kind_name(o->kind),
						 who);
			if (delay && o->kind == CLP_OP_OPT_STEP)
				CLP_TRY(check_delay_opt(cycle, r, i, nfactors));
			if (!refresh || o->kind != CLP_OP_OPT_STEP || o->step != 0)
				continue;
			si = &cycle->stages[o->stage];
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				for (int f = nfactors > 0 ? 1 : 0; f <= (nfactors > 0 ? nfactors : 0);
				     f++) {
					int bad = -1, n = count_refresh(p, i, o->stage, l, f, &bad);

					if (n == 1)
						continue;
					if (n < 0)
						return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d op %d: "
								 "%s's refresh of stage %d layer %d "
								 "factor %d before the stage's OPT_STEP "
								 "of the cycle's first step (op %d) or "
								 "its phases out of order", r, bad, who,
								 o->stage, l, f, i);
					return clp_error(CLP_ERR_INVALID, "pipefisher: rank %d has %d "
							 "refreshes of stage %d layer %d factor %d per "
							 "cycle; %s's cycle needs one", r, n,
							 o->stage, l, f, who);
				}
		}
	}
	return CLP_OK;
}
