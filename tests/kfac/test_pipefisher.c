/* The PipeFisher pass over the schedule IR, host only: for GPipe, 1F1B, interleaved, Chimera,
 * ZB-H1 and data parallelism the cycle keeps the base lists intact, has every factor once per
 * micro-batch after its forward / backward, every inversion once after its layer's factors (and
 * their all-reduce), the preconditioning before every optimizer step, and the same collectives
 * in the same order on every member (the validator and its dry run accept it). Work that fits
 * in the bubbles costs no time; longer work spreads over K steps; items longer than any bubble
 * are counted; the memory cap turns deferred factors into immediate ones; the pass is
 * deterministic; its result survives the schedule JSON; bad input is refused. With opts.split
 * (stages with two holders) each layer has one owner, exchanges follow, the validator refuses
 * broken split cycles, and inversions longer than short bubbles run in phases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sched/gen.h"
#include "engine/pass/pipefisher.h"
#include "engine/sched/sched_json.h"
#include "engine/pass/validate.h"
#include "tests/harness.h"

#define NF 4 /* factors per layer in these tests */

/* Uniform stages (F 1, B 2) of `layers` layers each, with K-FAC times per stage. */
static clp_costs *costs(int nstages, int layers, double curv, double inv, double prec)
{
	clp_costs *c = NULL;
	static const int dims[NF] = {8, 8, 16, 4};

	CHECK_OK(clp_costs_uniform(nstages, 1.0, 2.0, -1, &c));
	if (!c)
		return NULL;
	for (int s = 0; s < nstages; s++) {
		c->stages[s].nlayers = layers;
		c->stages[s].t[CLP_COST_KFAC_CURV_A] = curv;
		c->stages[s].t[CLP_COST_KFAC_CURV_B] = curv;
		c->stages[s].t[CLP_COST_KFAC_INV] = inv;
		c->stages[s].t[CLP_COST_KFAC_PRECOND] = prec;
		c->stages[s].kfac_bytes = 1000;
	}
	CHECK_OK(clp_costs_set_kfac_factors(c, dims, NF));
	return c;
}

static clp_sched *generate(int kind, int depth, int mb, int replicas)
{
	clp_gen_opts g;
	clp_sched *s = NULL;

	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = depth;
	g.microbatches = mb;
	g.chunks = kind == CLP_SCHED_INTERLEAVED ? 2 : 1;
	g.replicas = replicas;
	g.layers = 2 * depth * g.chunks;
	CHECK_OK(clp_sched_generate(&s, &g));
	return s;
}

static int is_kfac(int k)
{
	return clp_op_is_kfac(k);
}

/* Position of the first op on rank r at or after `from` matching the predicate fields. */
static int find(const clp_rank_prog *p, int kind, int stage, int mb, int layer, int step, int from)
{
	for (int i = from; i < p->nops; i++) {
		const clp_op *o = &p->ops[i];

		if (o->kind == kind && o->stage == stage && (mb < -1 || o->mb == mb) &&
		    (layer < -1 || o->layer == layer) && (step < 0 || o->step == step))
			return i;
	}
	return -1;
}

static int count(const clp_rank_prog *p, int kind, int stage, int mb, int layer, int factor)
{
	int n = 0;

	for (int i = 0; i < p->nops; i++) {
		const clp_op *o = &p->ops[i];

		n += o->kind == kind && o->stage == stage && (mb < -1 || o->mb == mb) &&
		     o->layer == layer && (factor < 0 || o->factor == factor);
	}
	return n;
}

/* The structural promises of a cycle made from base. */
static void check_cycle(const char *what, const clp_sched *base, const clp_sched *cyc, int K)
{
	CHECK(cyc->nsteps == K, "%s: %d steps, K = %d", what, cyc->nsteps, K);
	CHECK(clp_sched_validate(cyc, 1) == CLP_OK, "%s: %s", what, clp_last_error());
	for (int r = 0; r < base->nranks; r++) {
		const clp_rank_prog *b = &base->ranks[r], *p = &cyc->ranks[r];
		int n = 0;

		/* without the K-FAC items: the base list K times */
		for (int i = 0; i < p->nops; i++) {
			clp_op want;

			if (is_kfac(p->ops[i].kind))
				continue;
			want = b->ops[n % b->nops];
			want.step = (uint16_t)(n / b->nops);
			CHECK(!memcmp(&want, &p->ops[i], sizeof(want)), "%s: rank %d op %d is not base "
			      "op %d of step %d", what, r, i, n % b->nops, n / b->nops);
			n++;
		}
		CHECK(n == K * b->nops, "%s: rank %d keeps %d of %d base ops", what, r, n,
		      K * b->nops);
		for (int i = 0; i < b->nops; i++) {
			const clp_op *o = &b->ops[i];
			const clp_stage_info *si = &base->stages[o->stage >= 0 ? o->stage : 0];

			if (o->kind == CLP_OP_FWD)
				for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
					int f = find(p, CLP_OP_FWD, o->stage, o->mb, -2, 0, 0);
					int bw = find(p, CLP_OP_BWD, o->stage, o->mb, -2, 0, 0);
					int a = find(p, CLP_OP_KFAC_CURV_A, o->stage, o->mb, l, 0, 0);
					int g = find(p, CLP_OP_KFAC_CURV_B, o->stage, o->mb, l, 0, 0);

					if (bw < 0)
						bw = find(p, CLP_OP_BWD_B, o->stage, o->mb, -2, 0, 0);
					CHECK(count(p, CLP_OP_KFAC_CURV_A, o->stage, o->mb, l, -1) == 1 &&
					      count(p, CLP_OP_KFAC_CURV_B, o->stage, o->mb, l, -1) == 1,
					      "%s: rank %d stage %d mb %d layer %d: factors not once", what,
					      r, o->stage, o->mb, l);
					CHECK(a > f && g > bw, "%s: rank %d layer %d mb %d: factor before its "
					      "pass (A %d F %d, B %d BWD %d)", what, r, l, o->mb, a, f, g, bw);
				}
			if (o->kind == CLP_OP_OPT_STEP) {
				int ar = -1;

				for (int j = 0; j < b->nops; j++)
					if (b->ops[j].kind == CLP_OP_ALLREDUCE &&
					    b->ops[j].what == CLP_RED_GRADS && b->ops[j].stage == o->stage)
						ar = j;
				for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
					int last = -1, sync = find(p, CLP_OP_KFAC_SYNC, o->stage, -2, l, -1, 0);

					for (int j = 0; j < p->nops; j++)
						if ((p->ops[j].kind == CLP_OP_KFAC_CURV_A ||
						     p->ops[j].kind == CLP_OP_KFAC_CURV_B) &&
						    p->ops[j].stage == o->stage && p->ops[j].layer == l)
							last = j;
					CHECK((ar >= 0) == (sync >= 0), "%s: rank %d stage %d layer %d: %s",
					      what, r, o->stage, l, ar >= 0 ? "no factor all-reduce" :
					      "an all-reduce without a group to reduce over");
					CHECK(sync < 0 || (sync > last &&
							   count(p, CLP_OP_KFAC_SYNC, o->stage, -1, l, -1) == 1),
					      "%s: rank %d layer %d: all-reduce before the factors", what, r, l);
					for (int f = 1; f <= NF; f++) {
						int inv = find(p, CLP_OP_KFAC_INV, o->stage, -2, l, -1, 0);

						while (inv >= 0 && p->ops[inv].factor != f)
							inv = find(p, CLP_OP_KFAC_INV, o->stage, -2, l, -1, inv + 1);
						CHECK(count(p, CLP_OP_KFAC_INV, o->stage, -1, l, f) == 1 &&
						      inv > last && inv > sync, "%s: rank %d layer %d factor %d: "
						      "inversion not once after its factors (%d, last %d, sync %d)",
						      what, r, l, f - 1, inv, last, sync);
					}
				}
				for (int t = 0; t < K; t++) {
					int opt = find(p, CLP_OP_OPT_STEP, o->stage, -2, -2, t, 0);

					CHECK(opt > 0 && p->ops[opt - 1].kind == CLP_OP_KFAC_PRECOND &&
					      p->ops[opt - 1].stage == o->stage, "%s: rank %d step %d: no "
					      "preconditioning before the optimizer step", what, r, t);
				}
			}
		}
	}
}

/* Work that fits: no time added (the preconditioning costs nothing here), for every generator;
 * longer work: more steps, still nothing added. */
static void test_generators(void)
{
	static const struct {
		int kind, depth, mb, replicas;
	} cases[] = {{CLP_SCHED_GPIPE, 4, 8, 1},   {CLP_SCHED_1F1B, 4, 8, 1},
		     {CLP_SCHED_1F1B, 2, 4, 2},    {CLP_SCHED_INTERLEAVED, 4, 8, 1},
		     {CLP_SCHED_CHIMERA, 4, 8, 1}, {CLP_SCHED_CHIMERA_FD, 4, 8, 1},
		     {CLP_SCHED_ZBH1, 4, 8, 1}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int heavy = 0; heavy < 2; heavy++) {
			clp_sched *b = generate(cases[c].kind, cases[c].depth, cases[c].mb,
						cases[c].replicas), *cyc = NULL;
			clp_costs *co = b ? costs(b->nstages, 2, 0.1 + heavy * 0.4, 0.4 + heavy * 1.6, 0) : NULL;
			clp_pf_opts o;
			clp_pf_report rep;
			char what[96];

			if (!co)
				goto next;
			for (int s = 0; s < b->nstages; s++)
				co->stages[s].nlayers = b->stages[s].nlayers;
			clp_pf_opts_default(&o);
			o.costs = co;
			o.keep_a_bytes = o.keep_b_bytes = 100;
			snprintf(what, sizeof(what), "%s D=%d R=%d %s", clp_sched_kind_name(cases[c].kind),
				 cases[c].depth, cases[c].replicas, heavy ? "heavy" : "light");
			CHECK_OK(clp_pipefisher(b, &o, &cyc, &rep));
			if (!cyc)
				goto next;
			check_cycle(what, b, cyc, rep.K);
			CHECK(rep.forced == 0 && rep.immediate == 0, "%s: %d forced, %d immediate",
			      what, rep.forced, rep.immediate);
			CHECK(fabs(rep.added_s) <= 1e-9 * rep.base_step_s, "%s: filling bubbles added "
			      "%g s to a %g s step", what, rep.added_s, rep.base_step_s);
			CHECK(rep.util > rep.base_util, "%s: utilisation %g -> %g", what, rep.base_util,
			      rep.util);
			CHECK(heavy ? rep.K > 1 : rep.K >= 1, "%s: K = %d", what, rep.K);
			CHECK(rep.bound >= 1 && rep.K >= rep.bound, "%s: K = %d below the bound %d", what,
			      rep.K, rep.bound);
			CHECK(rep.peak_kept > 0, "%s: nothing kept", what);
next:
			clp_sched_free(cyc);
			clp_sched_free(b);
			clp_costs_free(co);
		}
}

/* A copy of c through the schedule JSON (text round trip checked). */
static clp_sched *copy_of(const clp_sched *c)
{
	char *text = clp_sched_to_json(c);
	clp_sched *back = NULL;

	CHECK(text != NULL, "no text");
	if (text)
		CHECK_OK(clp_sched_from_json(text, "split cycle", &back));
	if (back)
		CHECK(clp_sched_compare(c, back) == CLP_OK, "text round trip: %s", clp_last_error());
	free(text);
	return back;
}

/* The rank that inverts layer l in cyc (-1: none, -2: several). */
static int inverter(const clp_sched *cyc, int l)
{
	int who = -1;

	for (int r = 0; r < cyc->nranks; r++)
		for (int i = 0; i < cyc->ranks[r].nops; i++)
			if (cyc->ranks[r].ops[i].kind == CLP_OP_KFAC_INV && cyc->ranks[r].ops[i].layer == l)
				who = who == -1 || who == r ? r : -2;
	return who;
}

/* The split cycle's promises: one owner inverts each layer (every factor once, whole or in its
 * three phases in order), owners balanced; every holder exchanges each layer's inverses once
 * after the owner's inversions; each layer preconditioned once per step, then exchanged. */
static void check_split(const char *what, const clp_sched *b, const clp_sched *cyc,
			const clp_pf_report *rep)
{
	int owned[16] = {0}, nex = 0, lo = 1 << 30, hi = 0;

	CHECK(clp_sched_validate(cyc, 1) == CLP_OK, "%s: %s", what, clp_last_error());
	CHECK(rep->split_stages == b->nstages, "%s: %d of %d stages split", what, rep->split_stages,
	      b->nstages);
	for (int l = 0; l < b->nlayers; l++) {
		int o = inverter(cyc, l);

		CHECK(o >= 0, "%s: layer %d inverted by %s", what, l, o == -1 ? "nobody" : "several");
		if (o < 0 || o >= 16)
			continue;
		owned[o]++;
		for (int f = 1; f <= NF; f++) {
			const clp_rank_prog *p = &cyc->ranks[o];
			int whole = 0, ph[3] = {0, 0, 0}, order = 1, next = 0;

			for (int i = 0; i < p->nops; i++) {
				const clp_op *x = &p->ops[i];

				if (x->kind != CLP_OP_KFAC_INV || x->layer != l || x->factor != f)
					continue;
				whole += x->mb < 0;
				if (x->mb >= 0 && x->mb < 3) {
					ph[x->mb]++;
					order &= x->mb == next;
					next = x->mb + 1;
				}
			}
			CHECK((whole == 1 && !ph[0] && !ph[1] && !ph[2]) ||
			      (!whole && ph[0] == 1 && ph[1] == 1 && ph[2] == 1 && order),
			      "%s: layer %d factor %d: %d whole, phases %d %d %d (in order: %d)", what, l,
			      f, whole, ph[0], ph[1], ph[2], order);
		}
	}
	for (int r = 0; r < b->nranks && r < 16; r++) {
		lo = owned[r] < lo ? owned[r] : lo;
		hi = owned[r] > hi ? owned[r] : hi;
	}
	CHECK(hi - lo <= 1, "%s: owners hold %d to %d layers", what, lo, hi);
	for (int r = 0; r < b->nranks; r++) {
		const clp_rank_prog *p = &cyc->ranks[r];

		for (int i = 0; i < b->ranks[r].nops; i++) {
			const clp_op *o = &b->ranks[r].ops[i];
			const clp_stage_info *si = &b->stages[o->stage >= 0 ? o->stage : 0];

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++) {
				int x = find(p, CLP_OP_KFAC_INV_SYNC, o->stage, -2, l, -1, 0), last = -1;

				CHECK(x >= 0 && find(p, CLP_OP_KFAC_INV_SYNC, o->stage, -2, l, -1, x + 1) < 0,
				      "%s: rank %d: layer %d's inverses exchanged %s", what, r, l,
				      x < 0 ? "never" : "twice");
				nex += x >= 0;
				for (int i2 = 0; inverter(cyc, l) == r && i2 < p->nops; i2++)
					if (p->ops[i2].kind == CLP_OP_KFAC_INV && p->ops[i2].layer == l)
						last = i2;
				CHECK(last < x, "%s: rank %d: layer %d exchanged at op %d before its "
				      "inversion at op %d", what, r, l, x, last);
			}
		}
	}
	CHECK(nex == rep->exchanges, "%s: %d exchanges, report %d", what, nex, rep->exchanges);
	for (int t = 0; t < cyc->nsteps; t++)
		for (int l = 0; l < b->nlayers; l++) {
			int n = 0;

			for (int r = 0; r < cyc->nranks; r++)
				for (int i = 0; i < cyc->ranks[r].nops; i++) {
					const clp_op *x = &cyc->ranks[r].ops[i];

					n += x->kind == CLP_OP_KFAC_PRECOND && x->step == t && x->layer == l;
					CHECK(x->kind != CLP_OP_KFAC_PRECOND || x->layer >= 0,
					      "%s: rank %d preconditions a whole split stage", what, r);
				}
			CHECK(n == 1, "%s: step %d: layer %d preconditioned %d times", what, t, l, n);
		}
}

/* The validator refuses split cycles with a wrong layer, a second preconditioning of a layer,
 * or a phase out of range; each by name. */
static void check_split_rejects(const clp_sched *cyc)
{
	clp_sched *c = copy_of(cyc);
	int done = 0;

	for (int r = 0; c && r < c->nranks && done != 7; r++)
		for (int i = 0; i < c->ranks[r].nops && done != 7; i++) {
			clp_op *x = &c->ranks[r].ops[i], keep = *x;
			const clp_stage_info *si = &c->stages[x->stage >= 0 ? x->stage : 0];

			if (x->kind == CLP_OP_KFAC_INV_SYNC && !(done & 1)) {
				x->layer = -1;
				CHECK(clp_sched_validate(c, 0) == CLP_ERR_INVALID &&
				      strstr(clp_last_error(), "layer out of range"), "INV_SYNC layer -1: %s",
				      clp_last_error());
				x->kind = CLP_OP_KFAC_SYNC; /* a factor all-reduce where inverses go */
				x->layer = keep.layer;
				CHECK(clp_sched_validate(c, 1) == CLP_ERR_INVALID, "INV_SYNC turned SYNC "
				      "accepted");
				done |= 1;
			} else if (x->kind == CLP_OP_KFAC_PRECOND && x->layer >= 0 && !(done & 2)) {
				x->layer = (x->layer + 1 - si->first_layer) % si->nlayers + si->first_layer;
				CHECK(clp_sched_validate(c, 0) == CLP_ERR_INVALID &&
				      strstr(clp_last_error(), "preconditioned 2 times"), "second "
				      "preconditioning: %s", clp_last_error());
				x->layer = (si->first_layer + si->nlayers) % c->nlayers;
				CHECK(clp_sched_validate(c, 0) == CLP_ERR_INVALID &&
				      strstr(clp_last_error(), "not in stage"), "layer of another stage: %s",
				      clp_last_error());
				done |= 2;
			} else if (x->kind == CLP_OP_KFAC_INV && !(done & 4)) {
				x->mb = 3;
				CHECK(clp_sched_validate(c, 0) == CLP_ERR_INVALID &&
				      strstr(clp_last_error(), "phase"), "phase 3: %s", clp_last_error());
				done |= 4;
			} else {
				continue;
			}
			*x = keep;
			CHECK(clp_sched_validate(c, 1) == CLP_OK, "restored: %s", clp_last_error());
		}
	CHECK(done == 7, "found %d of the ops to break", done);
	clp_sched_free(c);
}

/* Split work (opts.split) where stages have two holders (Chimera, 1F1B with two replicas), on
 * heavy work: the split cycle keeps its promises, its bound and K are no larger than without
 * the split and K is at least the bound, preconditioning adds less per step, it survives the
 * JSON; without the split nothing is split. A 1F1B pipeline with short bubbles gets inversions
 * in phases and a smaller K. */
static void test_split(void)
{
	static const struct {
		int kind, depth, mb, replicas;
	} cases[] = {{CLP_SCHED_CHIMERA, 4, 8, 1}, {CLP_SCHED_1F1B, 2, 4, 2}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		clp_sched *b = generate(cases[c].kind, cases[c].depth, cases[c].mb, cases[c].replicas);
		clp_sched *c0 = NULL, *c1 = NULL, *c2 = NULL;
		clp_costs *co = b ? costs(b->nstages, 2, 0.3, 2.0, 0.4) : NULL;
		clp_pf_opts o;
		clp_pf_report r0, r1;
		const char *what = clp_sched_kind_name(cases[c].kind);

		if (!co)
			goto next;
		clp_pf_opts_default(&o);
		o.costs = co;
		o.keep_a_bytes = o.keep_b_bytes = 100;
		CHECK_OK(clp_pipefisher(b, &o, &c0, &r0));
		o.split = CLP_PF_SPLIT_ALL;
		CHECK_OK(clp_pipefisher(b, &o, &c1, &r1));
		if (!c0 || !c1)
			goto next;
		CHECK(r0.split_stages == 0 && r0.exchanges == 0, "%s: split without opts.split", what);
		CHECK(r0.bound >= 1 && r0.K >= r0.bound && r1.bound >= 1 && r1.K >= r1.bound,
		      "%s: K %d bound %d, split: K %d bound %d", what, r0.K, r0.bound, r1.K, r1.bound);
		CHECK(r1.bound <= r0.bound && r1.K <= r0.K, "%s: split K %d (bound %d) against %d "
		      "(%d)", what, r1.K, r1.bound, r0.K, r0.bound);
		CHECK(r1.added_s < r0.added_s, "%s: split adds %g per step, unsplit %g", what,
		      r1.added_s, r0.added_s);
		CHECK(r1.bound_rank >= 0 && r1.bound_work_s > 0 && r1.bound_idle_s > 0 &&
		      r1.bound == (int)ceil(r1.bound_work_s / r1.bound_idle_s - 1e-9),
		      "%s: bound %d from %g / %g on rank %d", what, r1.bound, r1.bound_work_s,
		      r1.bound_idle_s, r1.bound_rank);
		check_split(what, b, c1, &r1);
		CHECK_OK(clp_pipefisher(b, &o, &c2, &r1));
		if (c2)
			CHECK(clp_sched_compare(c1, c2) == CLP_OK, "%s: two runs differ: %s", what,
			      clp_last_error());
		clp_sched_free(c2);
		c2 = copy_of(c1);
		if (c == 0)
			check_split_rejects(c1);
		clp_sched_free(c2);
		c2 = NULL;
		o.split = CLP_PF_SPLIT_INV | CLP_PF_SPLIT_PREC | CLP_PF_SPLIT_SYNC; /* no phases */
		CHECK_OK(clp_pipefisher(b, &o, &c2, &r1));
		for (int r = 0; c2 && r < c2->nranks; r++) {
			int isync = 0, psync = 0;

			for (int i = 0; i < c2->ranks[r].nops; i++) {
				const clp_op *x = &c2->ranks[r].ops[i];

				isync += x->kind == CLP_OP_KFAC_INV_SYNC;
				psync += x->kind == CLP_OP_KFAC_PREC_SYNC;
				CHECK(x->kind != CLP_OP_KFAC_INV || x->mb < 0,
				      "%s: rank %d op %d: an inversion phase in the runnable split", what, r,
				      i);
			}
			CHECK(isync > 0 && psync > 0, "%s: rank %d exchanges %d inverses, %d "
			      "preconditioned gradients", what, r, isync, psync);
		}
		if (c2)
			check_split(what, b, c2, &r1);
		if (c2)
			CHECK(clp_sched_validate(c2, 1) == CLP_OK && r1.K >= r1.bound &&
			      r1.split_stages == b->nstages, "%s: runnable split: %s (K %d, bound %d)",
			      what, clp_last_error(), r1.K, r1.bound);
next:
		clp_sched_free(c0);
		clp_sched_free(c1);
		clp_sched_free(c2);
		clp_sched_free(b);
		clp_costs_free(co);
	}
	{ /* 1F1B, one holder per stage: inversions longer than the short bubbles run in phases */
		clp_sched *b = generate(CLP_SCHED_1F1B, 4, 8, 1), *c0 = NULL, *c1 = NULL;
		clp_costs *co = b ? costs(4, 2, 0.3, 6.0, 0.2) : NULL;
		clp_pf_opts o;
		clp_pf_report r0, r1;
		int phases = 0;

		if (co) {
			clp_pf_opts_default(&o);
			o.costs = co;
			CHECK_OK(clp_pipefisher(b, &o, &c0, &r0));
			o.split = CLP_PF_SPLIT_ALL;
			CHECK_OK(clp_pipefisher(b, &o, &c1, &r1));
		}
		for (int r = 0; c1 && r < c1->nranks; r++)
			for (int i = 0; i < c1->ranks[r].nops; i++)
				phases += c1->ranks[r].ops[i].kind == CLP_OP_KFAC_INV &&
					  c1->ranks[r].ops[i].mb >= 0;
		if (c0 && c1) {
			CHECK(clp_sched_validate(c1, 1) == CLP_OK, "1f1b phases: %s", clp_last_error());
			CHECK(phases > 0 && phases % 3 == 0 && r1.split_stages == 0 && r1.K < r0.K &&
			      r1.K == r1.bound, "1f1b phases: %d phase items, K %d -> %d (bound %d)",
			      phases, r0.K, r1.K, r1.bound);
		}
		clp_sched_free(c0);
		clp_sched_free(c1);
		clp_sched_free(b);
		clp_costs_free(co);
	}
}

/* Inversions longer than every bubble lengthen the step and are counted; the preconditioning
 * adds at most its own time per step. */
static void test_forced_and_precondition(void)
{
	clp_sched *b = generate(CLP_SCHED_1F1B, 4, 8, 1), *cyc = NULL;
	clp_costs *co = b ? costs(4, 2, 0.1, 400, 0.5) : NULL;
	clp_pf_opts o;
	clp_pf_report rep;

	if (!co)
		goto out;
	clp_pf_opts_default(&o);
	o.costs = co;
	CHECK_OK(clp_pipefisher(b, &o, &cyc, &rep));
	if (cyc) {
		check_cycle("1f1b forced", b, cyc, rep.K);
		CHECK(rep.forced > 0 && rep.added_s > 0, "forced %d, added %g", rep.forced,
		      rep.added_s);
	}
	clp_sched_free(cyc);
	cyc = NULL;
	co->stages[0].t[CLP_COST_KFAC_INV] = 0.4;
	for (int s = 0; s < 4; s++)
		co->stages[s].t[CLP_COST_KFAC_INV] = 0.4;
	CHECK_OK(clp_pipefisher(b, &o, &cyc, &rep));
	CHECK(rep.forced == 0 && rep.added_s > 0 && rep.added_s <= 0.5 + 1e-9,
	      "preconditioning 0.5 per step added %g (forced %d)", rep.added_s, rep.forced);
	clp_sched_free(cyc);
out:
	clp_sched_free(b);
	clp_costs_free(co);
}

/* The cap on kept data: none kept with a cap of 0 (every deferred factor is computed right
 * after its pass), none forced immediate without a cap. Same result twice (deterministic), and
 * through the schedule JSON. */
static void test_memory_cap_determinism_json(void)
{
	clp_sched *b = generate(CLP_SCHED_1F1B, 4, 8, 1), *c1 = NULL, *c2 = NULL, *c3 = NULL;
	clp_costs *co = b ? costs(4, 2, 0.7, 8, 0) : NULL;
	clp_pf_opts o;
	clp_pf_report r1, r2;
	char path[] = "/tmp/clpipe-test-pf-XXXXXX";
	int fd;

	if (!co)
		goto out;
	clp_pf_opts_default(&o);
	o.costs = co;
	o.keep_a_bytes = 3;
	o.keep_b_bytes = 5;
	o.mem_cap = 0;
	CHECK_OK(clp_pipefisher(b, &o, &c1, &r1));
	CHECK(r1.immediate > 0 && r1.peak_kept == 0, "cap 0: %d immediate, %lld kept",
	      r1.immediate, (long long)r1.peak_kept);
	if (c1)
		check_cycle("cap 0", b, c1, r1.K);
	o.mem_cap = 40;
	CHECK_OK(clp_pipefisher(b, &o, &c2, &r2));
	CHECK(r2.peak_kept <= 40 && r2.immediate > 0 && r2.immediate < r1.immediate,
	      "cap 40: %lld kept, %d immediate (cap 0: %d)", (long long)r2.peak_kept, r2.immediate,
	      r1.immediate);
	clp_sched_free(c2);
	c2 = NULL;
	o.mem_cap = -1;
	CHECK_OK(clp_pipefisher(b, &o, &c2, &r2));
	CHECK(r2.immediate == 0 && r2.peak_kept > 40, "no cap: %d immediate, %lld kept",
	      r2.immediate, (long long)r2.peak_kept);
	CHECK_OK(clp_pipefisher(b, &o, &c3, &r1));
	if (c2 && c3)
		CHECK(clp_sched_compare(c2, c3) == CLP_OK, "two runs differ: %s", clp_last_error());
	clp_sched_free(c3);
	c3 = NULL;
	fd = mkstemp(path);
	if (fd >= 0 && c2) {
		close(fd);
		CHECK_OK(clp_sched_save(c2, path));
		CHECK_OK(clp_sched_load(path, &c3));
		if (c3)
			CHECK(clp_sched_compare(c2, c3) == CLP_OK, "JSON round trip: %s",
			      clp_last_error());
		remove(path);
	}
out:
	clp_sched_free(c1);
	clp_sched_free(c2);
	clp_sched_free(c3);
	clp_sched_free(b);
	clp_costs_free(co);
}

static void test_bad_input(void)
{
	clp_sched *b = generate(CLP_SCHED_1F1B, 2, 4, 1), *out = NULL, *cyc = NULL;
	clp_costs *co = b ? costs(2, 2, 0.1, 0.1, 0) : NULL;
	clp_pf_opts o;

	if (!co)
		goto done;
	clp_pf_opts_default(&o);
	CHECK_ERR(clp_pipefisher(b, &o, &out, NULL), CLP_ERR_INVALID, "cost table", NULL);
	o.costs = co;
	co->stages[1].nlayers = 3;
	CHECK_ERR(clp_pipefisher(b, &o, &out, NULL), CLP_ERR_INVALID, "stage 1 holds 2 layers", NULL);
	co->stages[1].nlayers = 2;
	CHECK_OK(clp_pipefisher(b, &o, &cyc, NULL));
	if (cyc) /* a cycle already has K-FAC items (and several steps) */
		CHECK_ERR(clp_pipefisher(cyc, &o, &out, NULL), CLP_ERR_INVALID, "pipefisher", NULL);
	CHECK_OK(clp_sched_repeat(b, 2));
	CHECK_ERR(clp_pipefisher(b, &o, &out, NULL), CLP_ERR_INVALID, "one step", NULL);
	clp_sched_free(b);
	b = generate(CLP_SCHED_1F1B, 2, 4, 1);
	if (b) {
		b->ranks[1].mode = CLP_RANK_DATAFLOW;
		CHECK_ERR(clp_pipefisher(b, &o, &out, NULL), CLP_ERR_UNSUPPORTED, "dataflow", NULL);
		b->ranks[1].mode = CLP_RANK_ORDERED;
		b->ranks[1].nops--; /* drop rank 1's last op, its OPT_STEP */
		CHECK_ERR(clp_pipefisher(b, &o, &out, NULL), CLP_ERR_INVALID, "no OPT_STEP", NULL);
	}
	o.max_steps = 1;
	for (int s = 0; s < 2; s++)
		co->stages[s].t[CLP_COST_KFAC_CURV_A] = co->stages[s].t[CLP_COST_KFAC_CURV_B] = 1;
	if (b) {
		b->ranks[1].nops++;
		CHECK_ERR(clp_pipefisher(b, &o, &out, NULL), CLP_ERR_INVALID, "max_steps", NULL);
	}
	CHECK(out == NULL, "no schedule after errors");
	clp_sched_free(cyc);
done:
	clp_sched_free(b);
	clp_costs_free(co);
}

/* A cycle kept as text (a checkpoint's "pipefisher.cycle") comes back the same, and
 * clp_pipefisher_check accepts it for its own pipeline only. */
static void test_text_and_check(void)
{
	clp_sched *b = generate(CLP_SCHED_GPIPE, 2, 4, 1), *other = generate(CLP_SCHED_1F1B, 2, 4, 1);
	clp_sched *c = NULL, *back = NULL;
	clp_costs *co = b ? costs(2, 2, 0.6, 2, 0.2) : NULL;
	clp_pf_opts o;
	clp_pf_report r;
	char *text = NULL;

	if (!co || !other)
		goto out;
	clp_pf_opts_default(&o);
	o.costs = co;
	CHECK_OK(clp_pipefisher(b, &o, &c, &r));
	if (!c)
		goto out;
	CHECK(r.K >= 2, "K = %d", r.K);
	text = clp_sched_to_json(c);
	CHECK(text != NULL, "no text");
	if (text)
		CHECK_OK(clp_sched_from_json(text, "cycle text", &back));
	if (back)
		CHECK(clp_sched_compare(c, back) == CLP_OK, "text round trip: %s", clp_last_error());
	CHECK_OK(clp_pipefisher_check(b, c));
	CHECK(clp_pipefisher_check(other, c) == CLP_ERR_INVALID &&
	      strstr(clp_last_error(), "rank 0 op"), "another schedule: %s", clp_last_error());
	CHECK(clp_pipefisher_check(b, b) == CLP_OK, "a one-step base is its own cycle");
	c->stages[1].nlayers++;
	CHECK(clp_pipefisher_check(b, c) == CLP_ERR_INVALID && strstr(clp_last_error(), "stage 1"),
	      "another stage map: %s", clp_last_error());
	clp_sched_free(back);
	CHECK(clp_sched_from_json("{\"format\": ", "broken", &back) == CLP_ERR_FORMAT &&
	      strstr(clp_last_error(), "broken"), "broken text: %s", clp_last_error());
out:
	free(text);
	clp_sched_free(back);
	clp_sched_free(c);
	clp_sched_free(b);
	clp_sched_free(other);
	clp_costs_free(co);
}

TH_MAIN(TH_TEST(test_generators), TH_TEST(test_forced_and_precondition),
	TH_TEST(test_memory_cap_determinism_json), TH_TEST(test_text_and_check),
	TH_TEST(test_bad_input), TH_TEST(test_split))
