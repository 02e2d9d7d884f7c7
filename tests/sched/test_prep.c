/* The placement of the optimizer's early part (clp_sched_place_prep, engine/sched/prep.c; Muon's
 * momentum and Newton-Schulz, docs/OPTIMIZERS.md): on every generated schedule an OPT_STEP
 * gets at most one OPT_PREP of its stage and step, marked as in a bubble, after the stage's
 * last backward and gradient all-reduce and before the norm and the OPT_STEP; the schedule
 * stays valid, a second pass adds nothing, and one-stage schedules get none.
 * In the pipelines, the last stage's OPT_PREP does not wait for the first stage's last
 * backward: following the schedule's own edges (list order, a receive after its send, a
 * collective after every member's arrival), it is not behind it, so it can run in the
 * cool-down bubble, and the pass marks it so (CLP_OPF_BUBBLE; stage 0's, behind every
 * backward, is not kept); the OPT_STEP is behind it (through the norm's
 * all-reduce), which is the control that shows the check can fail. No timing is asserted.
 * The simulator charges an OPT_PREP its stage's prep_s share of the optimizer step and the
 * OPT_STEP after it the rest (an OPT_STEP without one the whole); calibration from a trace
 * sets prep_s to the OPT_PREPs' time per step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/pass/validate.h"
#include "engine/scenario/costs.h"
#include "engine/scenario/trace.h"
#include "engine/sched/gen.h"
#include "engine/sched/index.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

static clp_sched *gen(int kind, int d, int n, int chunks, int r)
{
	clp_gen_opts g;
	clp_sched *s = NULL;

	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = d;
	g.microbatches = n;
	g.chunks = chunks;
	g.replicas = r;
	g.opt_step = g.tied_embedding = g.grad_norm = 1;
	CHECK_OK(clp_sched_generate(&s, &g));
	return s;
}

static int is_bwd(int k)
{
	return k == CLP_OP_BWD || k == CLP_OP_BWD_B || k == CLP_OP_BWD_W;
}

/* Index of the last op of rank r before `before` that is a backward of stage (or its gradient
 * all-reduce with grads = 1); -1 if none. */
static int last_grad_op(const clp_sched *s, int r, int stage, int before, int grads)
{
	const clp_rank_prog *p = &s->ranks[r];
	int last = -1;

	for (int i = 0; i < before; i++) {
		const clp_op *o = &p->ops[i];

		if (o->stage == stage && (is_bwd(o->kind) || (grads && o->kind == CLP_OP_ALLREDUCE &&
							       o->what == CLP_RED_GRADS)))
			last = i;
	}
	return last;
}

/* The ops each rank must have run before op `at` of rank r can start: need[q] = how many of
 * rank q's first ops (list order; a receive after its send; a collective after every member
 * has reached it). */
static void needed(const clp_sched *s, const clp_sched_index *ix, int r, int at, int *need)
{
	int changed = 1;

	for (int q = 0; q < s->nranks; q++)
		need[q] = 0;
	need[r] = at;
	while (changed) {
		changed = 0;
		for (int q = 0; q < s->nranks; q++)
			for (int i = 0; i < need[q]; i++) {
				int64_t g = ix->off[q] + i;
				const clp_op *o = &s->ranks[q].ops[i];

				if (clp_op_is_recv(o->kind) && ix->match[g] >= 0) {
					int pr = clp_sched_index_rank(ix, ix->match[g]);
					int pi = (int)(ix->match[g] - ix->off[pr]);

					if (need[pr] < pi + 1)
						need[pr] = pi + 1, changed = 1;
				}
				if (ix->coll[g] < 0)
					continue;
				for (int64_t h = 0; h < ix->nops; h++) {
					int hr, hi;

					if (ix->coll[h] != ix->coll[g])
						continue;
					hr = clp_sched_index_rank(ix, h);
					hi = (int)(h - ix->off[hr]);
					if (need[hr] < hi + 1)
						need[hr] = hi + 1, changed = 1;
				}
			}
	}
}

/* Every OPT_PREP is marked and sits where the rule puts it, at most one per OPT_STEP; returns
 * how many. */
static int check_places(const clp_sched *s)
{
	int n = 0;

	for (int r = 0; r < s->nranks; r++) {
		const clp_rank_prog *p = &s->ranks[r];

		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];
			int prep = -1, count = 0, lb;

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			for (int j = 0; j < p->nops; j++)
				if (p->ops[j].kind == CLP_OP_OPT_PREP && p->ops[j].stage == o->stage &&
				    p->ops[j].step == o->step)
					prep = j, count++;
			CHECK(count <= 1, "rank %d stage %d: %d OPT_PREPs", r, o->stage, count);
			if (!count)
				continue;
			CHECK(p->ops[prep].flags & CLP_OPF_BUBBLE, "rank %d stage %d: an OPT_PREP "
			      "kept outside a bubble", r, o->stage);
			CHECK(prep >= 0 && prep < i, "rank %d stage %d: OPT_PREP at %d, OPT_STEP at %d", r,
			      o->stage, prep, i);
			lb = last_grad_op(s, r, o->stage, p->nops, 1);
			CHECK(lb >= 0 && lb < prep, "rank %d stage %d: last backward/reduction at %d, "
			      "OPT_PREP at %d", r, o->stage, lb, prep);
			/* no norm and nothing to send after it */
			for (int j = prep + 1; j < p->nops; j++) {
				const clp_op *x = &p->ops[j];

				CHECK(!clp_op_is_send(x->kind), "rank %d: a send at %d after the OPT_PREP "
				      "of stage %d at %d", r, j, o->stage, prep);
			}
			for (int j = 0; j < prep; j++)
				CHECK(p->ops[j].kind != CLP_OP_ALLREDUCE ||
				      p->ops[j].what != CLP_RED_NORM,
				      "rank %d: the norm (%d) before the OPT_PREP of stage %d (%d)", r, j,
				      o->stage, prep);
			n++;
		}
	}
	return n;
}

/* The last stage's OPT_PREP is not behind the first stage's last backward; its OPT_STEP is. */
static void check_bubble(const clp_sched *s, const char *name)
{
	clp_sched_index ix;
	int last = s->nstages - 1, rl = -1, r0 = -1, prep = -1, opt = -1, b0, split = 0;
	int *need = calloc((size_t)s->nranks, sizeof(int));

	CHECK_OK(clp_sched_index_build(s, &ix));
	for (int r = 0; r < s->nranks && (rl < 0 || r0 < 0); r++)
		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *o = &s->ranks[r].ops[i];

			split |= o->kind == CLP_OP_BWD_W;
			if (o->kind == CLP_OP_OPT_PREP && o->stage == last && rl < 0)
				rl = r, prep = i;
			if (o->kind == CLP_OP_OPT_STEP && o->stage == last && rl == r)
				opt = i;
			if (o->kind == CLP_OP_OPT_STEP && o->stage == 0 && r0 < 0)
				r0 = r;
		}
	CHECK(rl >= 0 && r0 >= 0 && rl != r0 && opt > prep && need, "%s: ranks %d, %d", name, rl,
	      r0);
	if (rl < 0 || r0 < 0 || rl == r0 || opt <= prep || !need) {
		free(need);
		clp_sched_index_free(&ix);
		return;
	}
	CHECK(s->ranks[rl].ops[prep].flags & CLP_OPF_BUBBLE, "%s: the OPT_PREP of stage %d is not "
	      "marked as in a bubble", name, last);
	/* stage 0's, behind every backward, is not kept (zero-bubble schedules: other ranks'
	 * weight gradients may still run after stage 0's) */
	for (int i = 0; !split && i < s->ranks[r0].nops; i++)
		CHECK(s->ranks[r0].ops[i].kind != CLP_OP_OPT_PREP || s->ranks[r0].ops[i].stage != 0,
		      "%s: stage 0's OPT_PREP, behind every backward, is kept", name);
	b0 = last_grad_op(s, r0, 0, s->ranks[r0].nops, 0);
	needed(s, &ix, rl, prep, need);
	CHECK(need[r0] <= b0, "%s: the OPT_PREP of stage %d (rank %d op %d) waits for rank %d's "
	      "first %d ops, past stage 0's last backward (op %d)", name, last, rl, prep, r0,
	      need[r0], b0);
	needed(s, &ix, rl, opt, need);
	CHECK(need[r0] > b0, "%s: the OPT_STEP of stage %d does not wait for stage 0's last "
	      "backward (need %d, backward %d): the check could not fail", name, last, need[r0],
	      b0);
	free(need);
	clp_sched_index_free(&ix);
}

static void test_generated(void)
{
	static const struct {
		int kind, d, n, chunks, r, bubble;
	} c[] = {
		{CLP_SCHED_GPIPE, 1, 4, 1, 1, 0},       {CLP_SCHED_1F1B, 2, 4, 1, 1, 1},
		{CLP_SCHED_1F1B, 4, 8, 1, 1, 1},        {CLP_SCHED_GPIPE, 4, 4, 1, 1, 1},
		{CLP_SCHED_ZBH1, 4, 8, 1, 1, 1},        {CLP_SCHED_INTERLEAVED, 2, 4, 2, 1, 1},
		{CLP_SCHED_1F1B, 2, 4, 1, 2, 1},        {CLP_SCHED_CHIMERA, 2, 4, 1, 1, 0},
		{CLP_SCHED_1F1B, 1, 2, 1, 2, 0},
	};

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		clp_sched *s = gen(c[k].kind, c[k].d, c[k].n, c[k].chunks, c[k].r);
		int added = -1, again = -1, opts = 0;
		char name[64];

		if (!s)
			continue;
		snprintf(name, sizeof(name), "%s D%d N%d v%d R%d", clp_sched_kind_name(c[k].kind),
			 c[k].d, c[k].n, c[k].chunks, c[k].r);
		for (int r = 0; r < s->nranks; r++)
			for (int i = 0; i < s->ranks[r].nops; i++)
				opts += s->ranks[r].ops[i].kind == CLP_OP_OPT_STEP;
		CHECK_OK(clp_sched_place_prep(s, &added));
		CHECK(opts > 0 && added <= opts && (c[k].bubble ? added > 0 : c[k].d > 1 || !added),
		      "%s: %d OPT_PREPs for %d OPT_STEPs", name, added, opts);
		CHECK_OK(clp_sched_validate(s, 1));
		CHECK(check_places(s) == added, "%s: placements", name);
		CHECK_OK(clp_sched_place_prep(s, &again));
		CHECK(again == 0, "%s: a second pass added %d", name, again);
		if (c[k].bubble)
			check_bubble(s, name);
		CHECK(c[k].d > 1 || added == 0, "%s: %d OPT_PREPs on one stage", name, added);
		clp_sched_free(s);
	}
}

/* 1F1B D4 N8 with its OPT_PREPs, opt_s 1 a stage, prep_s 0.6: every OPT_PREP takes 0.6 s, the
 * OPT_STEP after one 0.4 s, one without 1 s; each rank's compute time is that of the schedule
 * without OPT_PREPs, and the step is no longer (the kept OPT_PREPs are in bubbles). */
static void test_sim_prep(void)
{
	clp_sched *s = gen(CLP_SCHED_1F1B, 4, 8, 1, 1), *plain = gen(CLP_SCHED_1F1B, 4, 8, 1, 1);
	clp_costs *c = NULL;
	clp_sim_opts o;
	clp_sim_result a, b;
	int added = 0, preps = 0, with = 0, without = 0;

	CHECK_OK(clp_costs_uniform(4, 1, 2, -1, &c));
	if (!s || !plain || !c)
		goto out;
	for (int i = 0; i < 4; i++) {
		c->stages[i].t[CLP_COST_OPT] = 1.0;
		c->stages[i].prep_s = 0.6;
	}
	CHECK_OK(clp_sched_place_prep(s, &added));
	clp_sim_opts_default(&o);
	o.costs = c;
	CHECK_OK(clp_sim_run(s, &o, &a));
	CHECK_OK(clp_sim_run(plain, &o, &b));
	for (size_t i = 0; i < a.trace.n; i++) {
		const clp_trace_event *e = &a.trace.ev[i];
		double d = e->t1 - e->t0;
		int pre = 0;

		if (e->kind == CLP_OP_OPT_PREP) {
			preps++;
			CHECK(fabs(d - 0.6) < 1e-12, "OPT_PREP of stage %d: %g s", e->stage, d);
		}
		if (e->kind != CLP_OP_OPT_STEP)
			continue;
		for (int r = 0; r < s->nranks; r++)
			for (int k = 0; k < s->ranks[r].nops; k++)
				pre |= r == e->rank && s->ranks[r].ops[k].kind == CLP_OP_OPT_PREP &&
				       s->ranks[r].ops[k].stage == e->stage;
		with += pre;
		without += !pre;
		CHECK(fabs(d - (pre ? 0.4 : 1.0)) < 1e-12, "OPT_STEP of stage %d%s: %g s", e->stage,
		      pre ? " after its OPT_PREP" : "", d);
	}
	CHECK(added > 0 && preps == added && with == added && without == 4 - added,
	      "%d OPT_PREPs placed, %d run; %d OPT_STEPs after one, %d without", added, preps,
	      with, without);
	for (int r = 0; r < 4; r++)
		CHECK(fabs(a.ranks[r].compute_s - b.ranks[r].compute_s) < 1e-9,
		      "rank %d computes %g s with OPT_PREPs, %g without", r, a.ranks[r].compute_s,
		      b.ranks[r].compute_s);
	CHECK(a.cycle_s <= b.cycle_s + 1e-9, "the step grows with OPT_PREPs: %g s, %g without",
	      a.cycle_s, b.cycle_s);
	clp_sim_result_free(&a);
	clp_sim_result_free(&b);
out:
	clp_costs_free(c);
	clp_sched_free(s);
	clp_sched_free(plain);
}

/* The one-step-delayed Muon's placement (clp_sched_place_prep_delayed): every OPT_STEP of a
 * rank that waits for another gets one OPT_PREP of its stage, pipe, chunk and step before it,
 * marked; the schedule stays valid; a second pass adds nothing; one device gets none. On the
 * plain pipelines every stage's OPT_PREP but stage 0's comes right before its first forward
 * (which waits for the activation) and stage 0's right before its first backward (the ranks'
 * first waits). */
static void test_delayed(void)
{
	static const struct {
		int kind, d, n, chunks, r;
	} c[] = {
		{CLP_SCHED_GPIPE, 1, 4, 1, 1},  {CLP_SCHED_1F1B, 2, 4, 1, 1}, {CLP_SCHED_1F1B, 4, 8, 1, 1},
		{CLP_SCHED_GPIPE, 4, 4, 1, 1},  {CLP_SCHED_ZBH1, 4, 8, 1, 1}, {CLP_SCHED_INTERLEAVED, 2, 4, 2, 1},
		{CLP_SCHED_1F1B, 2, 4, 1, 2},   {CLP_SCHED_CHIMERA, 2, 4, 1, 1}, {CLP_SCHED_CHIMERA, 4, 4, 1, 1},
		{CLP_SCHED_1F1B, 1, 2, 1, 2},
	};

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		clp_sched *s = gen(c[k].kind, c[k].d, c[k].n, c[k].chunks, c[k].r);
		const int plain = c[k].r == 1 && c[k].chunks == 1 && c[k].kind != CLP_SCHED_CHIMERA;
		int added = -1, again = -1, opts = 0, preps = 0;
		char name[64];

		if (!s)
			continue;
		snprintf(name, sizeof(name), "delayed %s D%d N%d v%d R%d",
			 clp_sched_kind_name(c[k].kind), c[k].d, c[k].n, c[k].chunks, c[k].r);
		for (int r = 0; r < s->nranks; r++)
			for (int i = 0; i < s->ranks[r].nops; i++)
				opts += s->ranks[r].ops[i].kind == CLP_OP_OPT_STEP;
		CHECK_OK(clp_sched_place_prep_delayed(s, &added));
		CHECK_OK(clp_sched_validate(s, 1));
		CHECK(c[k].d * c[k].r > 1 ? added == opts : added == 0,
		      "%s: %d OPT_PREPs for %d OPT_STEPs", name, added, opts);
		for (int r = 0; r < s->nranks; r++) {
			const clp_rank_prog *p = &s->ranks[r];
			int first = -1;

			for (int i = 0; i < p->nops; i++) {
				const clp_op *o = &p->ops[i];
				int n = 0;

				if (o->kind == CLP_OP_OPT_PREP) {
					preps++;
					CHECK(o->flags & CLP_OPF_BUBBLE, "%s rank %d: unmarked", name, r);
					if (first < 0)
						first = i;
				}
				if (o->kind != CLP_OP_OPT_STEP)
					continue;
				for (int j = 0; j < i; j++)
					n += p->ops[j].kind == CLP_OP_OPT_PREP &&
					     p->ops[j].stage == o->stage && p->ops[j].pipe == o->pipe &&
					     p->ops[j].chunk == o->chunk && p->ops[j].step == o->step;
				CHECK(n == (added > 0), "%s rank %d: %d OPT_PREPs before the OPT_STEP of "
				      "stage %d", name, r, n, o->stage);
			}
			if (plain && c[k].d > 1 && first >= 0 && first + 1 < p->nops) {
				int want = r > 0 ? CLP_OP_FWD : -1, got = p->ops[first + 1].kind;
				int before = 0;

				for (int j = 0; j < first; j++)
					before |= r > 0 ? p->ops[j].kind == CLP_OP_FWD
								  : is_bwd(p->ops[j].kind);
				CHECK(want >= 0 ? got == want : got == CLP_OP_BWD || got == CLP_OP_BWD_B,
				      "%s rank %d: the OPT_PREP precedes a %s", name, r,
				      clp_op_kind_name(got));
				CHECK(!before, "%s rank %d: the OPT_PREP is not before the rank's first "
				      "%s", name, r, want >= 0 ? "forward" : "backward");
			}
		}
		CHECK(preps == added, "%s: %d OPT_PREPs in the lists, %d added", name, preps, added);
		CHECK_OK(clp_sched_place_prep_delayed(s, &again));
		CHECK(again == 0, "%s: a second pass added %d", name, again);
		clp_sched_free(s);
	}
}

/* A trace's OPT_PREP joins its stage's optimizer-step cost in a calibration: two steps of
 * prep 3 + step 1 give an OPT cost of 4, not the mean of the four events (2), and prep_s 3. */
static void test_calibrate(void)
{
	static const clp_trace_event ev[] = {
		{0, 3, 0, CLP_TQ_COMPUTE, CLP_OP_OPT_PREP, 0, 0, 0, -1, -1, -1},
		{3, 4, 0, CLP_TQ_COMPUTE, CLP_OP_OPT_STEP, 0, 0, 0, -1, -1, -1},
		{10, 13, 0, CLP_TQ_COMPUTE, CLP_OP_OPT_PREP, 0, 0, 0, -1, -1, -1},
		{13, 14, 0, CLP_TQ_COMPUTE, CLP_OP_OPT_STEP, 0, 0, 0, -1, -1, -1},
	};
	clp_trace t;
	clp_costs *c = NULL;
	int nset = 0;

	clp_trace_init(&t, 1, 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_OK(clp_trace_push(&t, &ev[i]));
	CHECK_OK(clp_costs_uniform(1, 9, 9, -1, &c));
	if (c) {
		CHECK_OK(clp_costs_calibrate(c, &t, &nset));
		CHECK(nset == 1 && c->stages[0].t[CLP_COST_OPT] == 4.0 && c->stages[0].prep_s == 3.0,
		      "OPT cost %g (%d set), want 4; prep %g, want 3", c->stages[0].t[CLP_COST_OPT],
		      nset, c->stages[0].prep_s);
	}
	clp_costs_free(c);
	clp_trace_free(&t);
}

TH_MAIN(TH_TEST(test_generated), TH_TEST(test_sim_prep), TH_TEST(test_delayed),
	TH_TEST(test_calibrate))
