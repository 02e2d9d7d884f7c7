/* The PipeFisher pass with other optimizers' periodic work (clp_pf_opts.work), host only.
 * Shampoo: for GPipe, 1F1B, Chimera, ZB-H1 and two replicas every rank refreshes every root
 * (layer x factor) of every stage it steps exactly once per cycle, after the stage's OPT_STEP
 * of the cycle's first step (its statistics' snapshot), never a factor item or all-reduce; the
 * per-step work precedes every OPT_STEP; K respects the packing bound; with the phases each
 * root runs in its phases, in order; clp_pipefisher_check_work accepts the cycle and refuses
 * it with one refresh dropped or moved before the snapshot (as SOAP's, the messages naming
 * SOAP). Muon: K = 1, only the per-step work. Delayed Muon: K = 1, every rank's NS of every
 * matrix of every layer of every stage it steps once a step (its phases in order), before the
 * stage's OPT_STEP (or, split, before the layer's exchange, on exactly one holder), some
 * before the rank's first F/B (ready at the step's start), no per-step item; what does not
 * fit is forced right before the OPT_STEP; clp_pipefisher_check_work refuses an item dropped, moved after its OPT_STEP or phases
 * swapped; the step is never longer than the serial one (the serial fallback).
 * clp_pf_work_costs: the flop counts of docs/OPTIMIZERS.md at the stage's GEMM rate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/soap.h"
#include "engine/pass/pipefisher.h"
#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

#define NF 4 /* roots per layer in these tests */

/* Uniform stages (F 1, B 2) of `layers` layers with Shampoo-like times; K-FAC's factor times
 * are set too, to show they are ignored. */
static clp_costs *costs(int nstages, int layers, double inv, double prec)
{
	clp_costs *c = NULL;
	static const int dims[NF] = {8, 8, 16, 4};

	CHECK_OK(clp_costs_uniform(nstages, 1.0, 2.0, -1, &c));
	if (!c)
		return NULL;
	for (int s = 0; s < nstages; s++) {
		c->stages[s].nlayers = layers;
		c->stages[s].t[CLP_COST_KFAC_CURV_A] = 0.6;
		c->stages[s].t[CLP_COST_KFAC_CURV_B] = 0.6;
		c->stages[s].t[CLP_COST_KFAC_INV] = inv;
		c->stages[s].t[CLP_COST_KFAC_PRECOND] = prec;
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
	g.replicas = replicas;
	g.layers = 2 * depth;
	CHECK_OK(clp_sched_generate(&s, &g));
	return s;
}

/* Index of rank p's OPT_STEP of stage st in cycle step 0; -1. */
static int opt_of(const clp_rank_prog *p, int st)
{
	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].kind == CLP_OP_OPT_STEP && p->ops[i].stage == st && p->ops[i].step == 0)
			return i;
	return -1;
}

/* Shampoo's items of the cycle, checked by hand (independently of clp_pipefisher_check_work). */
static void check_shampoo(const char *what, const clp_sched *b, const clp_sched *cy, int phases)
{
	for (int r = 0; r < cy->nranks; r++) {
		const clp_rank_prog *p = &cy->ranks[r];

		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];

			CHECK(o->kind != CLP_OP_KFAC_CURV_A && o->kind != CLP_OP_KFAC_CURV_B &&
				      o->kind != CLP_OP_KFAC_SYNC && o->kind != CLP_OP_KFAC_INV_SYNC,
			      "%s: rank %d op %d: %s is K-FAC's", what, r, i, clp_op_kind_name(o->kind));
			if (o->kind == CLP_OP_OPT_STEP)
				CHECK(i > 0 && p->ops[i - 1].kind == CLP_OP_KFAC_PRECOND &&
					      p->ops[i - 1].stage == o->stage,
				      "%s: rank %d op %d: no per-step work before the OPT_STEP", what, r,
				      i);
		}
		for (int j = 0; j < b->ranks[r].nops; j++) {
			const clp_op *o = &b->ranks[r].ops[j];
			const clp_stage_info *si;
			int opt;

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			si = &b->stages[o->stage];
			opt = opt_of(p, o->stage);
			CHECK(opt >= 0, "%s: rank %d: no OPT_STEP of stage %d", what, r, o->stage);
			for (int l = si->first_layer; l < si->first_layer + si->nlayers; l++)
				for (int f = 1; f <= NF; f++) {
					int n = 0, next = 0, whole = 0;

					for (int i = 0; i < p->nops; i++) {
						const clp_op *x = &p->ops[i];

						if (x->kind != CLP_OP_KFAC_INV || x->stage != o->stage ||
						    x->layer != l || x->factor != f)
							continue;
						n++;
						CHECK(i > opt, "%s: rank %d: refresh of layer %d factor %d "
						      "(op %d) before the snapshot (op %d)", what, r, l, f,
						      i, opt);
						if (x->mb < 0) {
							whole++;
							continue;
						}
						CHECK(x->mb == next, "%s: rank %d layer %d factor %d: "
						      "phase %d where %d is due", what, r, l, f, x->mb,
						      next);
						next = (x->mb + 1) % phases;
						whole += x->mb == phases - 1;
					}
					CHECK(whole == 1 && n >= 1, "%s: rank %d stage %d layer %d "
					      "factor %d refreshed %d times (%d ops)", what, r, o->stage,
					      l, f, whole, n);
				}
		}
	}
}

/* Drop the first refresh of rank 0 (or move it before everything): the check refuses. */
static void check_mutations(const char *what, const clp_sched *cy)
{
	clp_sched *c2 = NULL;
	char *js;

	CHECK_OK(clp_pipefisher_check_work(cy, CLP_PF_WORK_SHAMPOO, NF));
	CHECK_OK(clp_pipefisher_check_work(cy, CLP_PF_WORK_SOAP, NF));
	for (int move = 0; move < 2; move++) {
		clp_rank_prog *p;
		int k = -1;

		js = clp_sched_to_json(cy);
		CHECK(js != NULL, "%s: to json", what);
		if (!js)
			return;
		CHECK_OK(clp_sched_from_json(js, "copy", &c2));
		free(js);
		if (!c2)
			return;
		p = &c2->ranks[0];
		for (int i = 0; i < p->nops && k < 0; i++)
			if (p->ops[i].kind == CLP_OP_KFAC_INV)
				k = i;
		CHECK(k >= 0, "%s: rank 0 has a refresh", what);
		if (k >= 0) {
			clp_op x = p->ops[k];

			memmove(&p->ops[k], &p->ops[k + 1], (size_t)(p->nops - k - 1) * sizeof(x));
			if (move) { /* to the front: before the snapshot */
				memmove(&p->ops[1], &p->ops[0], (size_t)(p->nops - 1) * sizeof(x));
				p->ops[0] = x;
			} else {
				p->nops--;
			}
			/* refused, naming the optimizer configured (the same items for both) */
			CHECK_ERR(clp_pipefisher_check_work(c2, CLP_PF_WORK_SHAMPOO, NF),
				  CLP_ERR_INVALID, "Shampoo's");
			CHECK_ERR(clp_pipefisher_check_work(c2, CLP_PF_WORK_SOAP, NF),
				  CLP_ERR_INVALID, move ? "SOAP's refresh" : "SOAP's cycle needs one");
			clp_error_clear();
		}
		clp_sched_free(c2);
		c2 = NULL;
	}
}

static void test_shampoo_items(void)
{
	static const struct {
		int kind, depth, mb, replicas;
		const char *name;
	} cases[] = {
		{CLP_SCHED_GPIPE, 4, 4, 1, "gpipe"},   {CLP_SCHED_1F1B, 4, 8, 1, "1f1b"},
		{CLP_SCHED_CHIMERA, 4, 4, 1, "chimera"}, {CLP_SCHED_ZBH1, 4, 8, 1, "zbh1"},
		{CLP_SCHED_1F1B, 2, 4, 2, "1f1b x2"},
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int ph = 0; ph < 2; ph++) {
			clp_sched *b = generate(cases[c].kind, cases[c].depth, cases[c].mb,
						cases[c].replicas);
			clp_costs *t = b ? costs(b->nstages, 2, 12.0, 0.3) : NULL;
			clp_pf_opts o;
			clp_pf_report rep;
			clp_sched *cy = NULL;
			char what[64];

			if (!b || !t) {
				clp_sched_free(b);
				clp_costs_free(t);
				continue;
			}
			snprintf(what, sizeof(what), "%s%s", cases[c].name, ph ? " phases" : "");
			t->inv_phases = ph ? 5 : 0;
			clp_pf_opts_default(&o);
			o.costs = t;
			o.work = CLP_PF_WORK_SHAMPOO;
			o.split = ph ? CLP_PF_SPLIT_PHASES : 0;
			CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
			if (cy) {
				check_shampoo(what, b, cy, ph ? 5 : 1);
				CHECK(rep.K >= rep.bound && rep.bound >= 2, "%s: K %d, bound %d", what,
				      rep.K, rep.bound);
				CHECK(rep.kfac_s > 0 && rep.peak_kept == 0 && rep.immediate == 0,
				      "%s: refresh work %g s, kept %lld", what, rep.kfac_s,
				      (long long)rep.peak_kept);
				CHECK(rep.precond_items == rep.K * cases[c].depth * cases[c].replicas *
								   (cases[c].kind == CLP_SCHED_CHIMERA ? 2 : 1),
				      "%s: %d per-step items in %d steps", what, rep.precond_items,
				      rep.K);
				CHECK(cy->nsteps == rep.K, "%s: %d steps, K %d", what, cy->nsteps, rep.K);
				if (!ph)
					check_mutations(what, cy);
			}
			clp_sched_free(cy);
			clp_sched_free(b);
			clp_costs_free(t);
		}
}

/* The least K (clp_pf_opts.min_steps: SOAP's soap.frequency, Shampoo's shampoo.interval): a
 * cycle of at least that many steps, valid; refreshes far longer than any bubble (all forced)
 * spread over more of its steps than the least cycle's; a least K above the largest and one
 * for the delayed Muon are refused. */
static int inv_steps(const clp_sched *cy)
{
	int seen[64] = {0}, n = 0;

	for (int r = 0; r < cy->nranks; r++)
		for (int i = 0; i < cy->ranks[r].nops; i++)
			if (cy->ranks[r].ops[i].kind == CLP_OP_KFAC_INV && cy->ranks[r].ops[i].step < 64)
				seen[cy->ranks[r].ops[i].step] = 1;
	for (int k = 0; k < 64; k++)
		n += seen[k];
	return n;
}

static void test_min_steps(void)
{
	clp_sched *b = generate(CLP_SCHED_1F1B, 4, 8, 1);
	clp_costs *t = b ? costs(b->nstages, 2, 400.0, 0.3) : NULL; /* no bubble holds a root */
	clp_pf_opts o;
	clp_pf_report rep;
	clp_sched *cy = NULL;
	int k0 = 0, n0 = 0;

	if (!b || !t)
		goto out;
	clp_pf_opts_default(&o);
	o.costs = t;
	o.work = CLP_PF_WORK_SHAMPOO;
	CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
	if (cy) {
		k0 = rep.K;
		n0 = inv_steps(cy);
		CHECK(rep.forced > 0, "roots of 400 against F 1, B 2: %d forced", rep.forced);
	}
	clp_sched_free(cy);
	cy = NULL;
	o.min_steps = k0 + 6;
	CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
	if (cy) {
		check_shampoo("min_steps", b, cy, 1);
		CHECK(rep.K == k0 + 6 && cy->nsteps == rep.K, "min_steps %d: K %d, %d steps", k0 + 6,
		      rep.K, cy->nsteps);
		CHECK(inv_steps(cy) > n0, "min_steps %d: forced roots in %d steps, %d at K %d",
		      k0 + 6, inv_steps(cy), n0, k0);
	}
	clp_sched_free(cy);
	cy = NULL;
	o.min_steps = o.max_steps + 1;
	CHECK_ERR(clp_pipefisher(b, &o, &cy, &rep), CLP_ERR_INVALID, "min_steps 257");
	o.min_steps = 2;
	o.work = CLP_PF_WORK_MUON_DELAY;
	CHECK_ERR(clp_pipefisher(b, &o, &cy, &rep), CLP_ERR_INVALID, "min_steps 2",
		  "delayed Muon");
out:
	clp_sched_free(b);
	clp_costs_free(t);
}

static void test_muon_items(void)
{
	clp_sched *b = generate(CLP_SCHED_1F1B, 4, 8, 1), *cy = NULL;
	clp_costs *t = b ? costs(b->nstages, 2, 0, 0.5) : NULL;
	clp_pf_opts o;
	clp_pf_report rep;

	if (!b || !t)
		goto out;
	clp_pf_opts_default(&o);
	o.costs = t;
	o.work = CLP_PF_WORK_MUON;
	CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
	if (!cy)
		goto out;
	CHECK(rep.K == 1 && rep.items == 0 && rep.precond_items == 4,
	      "muon: K %d, %d refreshes, %d per-step items", rep.K, rep.items, rep.precond_items);
	for (int r = 0; r < cy->nranks; r++)
		for (int i = 0; i < cy->ranks[r].nops; i++) {
			const clp_op *x = &cy->ranks[r].ops[i];

			CHECK(!clp_op_is_kfac(x->kind) || x->kind == CLP_OP_KFAC_PRECOND,
			      "muon: rank %d op %d is %s", r, i, clp_op_kind_name(x->kind));
			if (x->kind == CLP_OP_OPT_STEP)
				CHECK(i > 0 && cy->ranks[r].ops[i - 1].kind == CLP_OP_KFAC_PRECOND,
				      "muon: rank %d: the Newton-Schulz work does not precede its "
				      "OPT_STEP", r);
		}
	CHECK_OK(clp_pipefisher_check_work(cy, CLP_PF_WORK_MUON, 0));
	/* a bubble-free step grows by the last stage's work, never by less */
	CHECK(rep.added_s >= 0.5 - 1e-9, "muon: step grows by %g s", rep.added_s);
out:
	clp_sched_free(cy);
	clp_sched_free(b);
	clp_costs_free(t);
}

/* Rank p's ops of delayed Muon's (st, l, f) before op end: whole NS, phases checked in order
 * (*bad set when not); all: every one in the list. */
static int delay_count(const clp_rank_prog *p, int end, int st, int l, int f, int phases,
		       int *bad)
{
	int whole = 0, next = 0;

	for (int i = 0; i < end; i++) {
		const clp_op *x = &p->ops[i];

		if (x->kind != CLP_OP_KFAC_INV || x->stage != st || x->layer != l || x->factor != f)
			continue;
		if (x->mb < 0) {
			whole++;
			*bad |= next != 0;
			continue;
		}
		*bad |= x->mb != next;
		next = (x->mb + 1) % phases;
		whole += x->mb == phases - 1;
	}
	*bad |= next != 0;
	return whole;
}

/* Index of rank p's KFAC_INV_SYNC of (st, l); -1. */
static int exchange_of(const clp_rank_prog *p, int st, int l)
{
	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].kind == CLP_OP_KFAC_INV_SYNC && p->ops[i].stage == st &&
		    p->ops[i].layer == l)
			return i;
	return -1;
}

/* Delayed Muon's items of a one-step cycle, by hand. *early: items before the rank's first
 * F/B seen. */
static void check_delay(const char *what, const clp_sched *b, const clp_sched *cy, int phases,
			int split, int *early)
{
	for (int r = 0; r < cy->nranks; r++) {
		const clp_rank_prog *p = &cy->ranks[r];
		int first = -1;

		for (int i = 0; i < p->nops; i++) {
			const clp_op *o = &p->ops[i];

			CHECK(!clp_op_is_kfac(o->kind) || o->kind == CLP_OP_KFAC_INV ||
				      (split && o->kind == CLP_OP_KFAC_INV_SYNC),
			      "%s: rank %d op %d: %s is not delayed Muon's", what, r, i,
			      clp_op_kind_name(o->kind));
			CHECK(o->step == 0, "%s: rank %d op %d in step %d", what, r, i, o->step);
			if (first < 0 && (o->kind == CLP_OP_FWD || clp_op_is_bwd_input(o->kind)))
				first = i;
			if (o->kind == CLP_OP_KFAC_INV && (first < 0 || i < first))
				*early = 1;
		}
		for (int j = 0; j < b->ranks[r].nops; j++) {
			const clp_op *o = &b->ranks[r].ops[j];
			const clp_stage_info *si;
			int opt;

			if (o->kind != CLP_OP_OPT_STEP)
				continue;
			si = &b->stages[o->stage];
			opt = opt_of(p, o->stage);
			CHECK(opt >= 0, "%s: rank %d: no OPT_STEP of stage %d", what, r, o->stage);
			for (int l = si->first_layer; opt >= 0 && l < si->first_layer + si->nlayers;
			     l++) {
				int ex = exchange_of(p, o->stage, l);

				CHECK(ex < opt, "%s: rank %d layer %d: exchange %d after OPT_STEP %d",
				      what, r, l, ex, opt);
				for (int f = 1; f <= NF; f++) {
					int bad = 0, owners = 0;
					int n = delay_count(p, ex >= 0 ? ex : opt, o->stage, l, f, phases,
							    &bad);
					int all = delay_count(p, p->nops, o->stage, l, f, phases, &bad);

					CHECK(!bad && all == n, "%s: rank %d layer %d matrix %d: phases "
					      "out of order or after the OPT_STEP / exchange", what, r, l,
					      f);
					if (ex < 0) {
						CHECK(n == 1, "%s: rank %d stage %d layer %d matrix %d: %d "
						      "NS a step", what, r, o->stage, l, f, n);
						continue;
					}
					CHECK(split, "%s: an exchange without split", what);
					for (int q = 0; q < cy->nranks; q++)
						owners += delay_count(&cy->ranks[q], cy->ranks[q].nops,
								      o->stage, l, f, phases, &bad) > 0;
					CHECK(n <= 1 && owners == 1, "%s: layer %d matrix %d: %d NS here, "
					      "%d holders compute it", what, l, f, n, owners);
				}
			}
		}
	}
}

static int phased_seen; /* some case cut an NS into its phases */

/* Drop rank 0's first NS item, move it after the rank's last OPT_STEP, or (phases) swap the
 * first phase 0 of any rank with its phase 1: clp_pipefisher_check_work refuses each. */
static void check_delay_mutations(const char *what, const clp_sched *cy, int phases)
{
	CHECK_OK(clp_pipefisher_check_work(cy, CLP_PF_WORK_MUON_DELAY, NF));
	for (int m = 0; m < (phases > 1 ? 3 : 2); m++) {
		clp_sched *c2 = NULL;
		char *js = clp_sched_to_json(cy);
		clp_rank_prog *p;
		int k = -1;

		CHECK(js != NULL, "%s: to json", what);
		if (!js)
			return;
		CHECK_OK(clp_sched_from_json(js, "copy", &c2));
		free(js);
		if (!c2)
			return;
		for (int r = 0; r < (m < 2 ? 1 : c2->nranks) && k < 0; r++) {
			p = &c2->ranks[r];
			for (int i = 0; i < p->nops && k < 0; i++)
				if (p->ops[i].kind == CLP_OP_KFAC_INV && (m < 2 || p->ops[i].mb == 0))
					k = i;
		}
		CHECK(k >= 0 || m == 2, "%s: rank 0 has an NS item", what);
		phased_seen |= m == 2 && k >= 0;
		if (k >= 0) {
			clp_op x = p->ops[k];
			int q = k + 1;

			if (m == 2) { /* its phase 1 before it */
				while (q < p->nops && !(p->ops[q].kind == CLP_OP_KFAC_INV &&
							p->ops[q].layer == x.layer &&
							p->ops[q].factor == x.factor && p->ops[q].mb == 1))
					q++;
				CHECK(q < p->nops, "%s: no phase 1", what);
				if (q < p->nops) {
					p->ops[k] = p->ops[q];
					p->ops[q] = x;
				}
			} else {
				memmove(&p->ops[k], &p->ops[k + 1],
					(size_t)(p->nops - k - 1) * sizeof(x));
				if (m == 1)
					p->ops[p->nops - 1] = x; /* after the OPT_STEPs */
				else
					p->nops--;
			}
			CHECK(clp_pipefisher_check_work(c2, CLP_PF_WORK_MUON_DELAY, NF) ==
				      CLP_ERR_INVALID,
			      "%s: a cycle with the first NS %s passes", what,
			      m == 0 ? "dropped" : m == 1 ? "after its OPT_STEP" : "phases swapped");
			clp_error_clear();
		}
		clp_sched_free(c2);
	}
}

/* A split cycle passes clp_pipefisher_check_work, and without a non-owner's exchange of a
 * layer (it would step without that layer's update) it does not. */
static void check_delay_split_mutation(const char *what, const clp_sched *cy)
{
	clp_sched *c2 = NULL;
	char *js = clp_sched_to_json(cy);
	int done = 0;

	CHECK_OK(clp_pipefisher_check_work(cy, CLP_PF_WORK_MUON_DELAY, NF));
	if (js)
		CHECK_OK(clp_sched_from_json(js, "copy", &c2));
	free(js);
	for (int r = 0; c2 && r < c2->nranks && !done; r++) {
		clp_rank_prog *p = &c2->ranks[r];

		for (int i = 0; i < p->nops && !done; i++) {
			int own = 0;

			if (p->ops[i].kind != CLP_OP_KFAC_INV_SYNC)
				continue;
			for (int u = 0; u < p->nops; u++)
				own |= p->ops[u].kind == CLP_OP_KFAC_INV &&
				       p->ops[u].layer == p->ops[i].layer;
			if (own)
				continue;
			memmove(&p->ops[i], &p->ops[i + 1], (size_t)(p->nops - i - 1) * sizeof(*p->ops));
			p->nops--;
			done = 1;
		}
	}
	CHECK(done, "%s: no non-owner's exchange", what);
	if (done) {
		CHECK(clp_pipefisher_check_work(c2, CLP_PF_WORK_MUON_DELAY, NF) == CLP_ERR_INVALID,
		      "%s: a non-owner without its exchange passes", what);
		clp_error_clear();
	}
	clp_sched_free(c2);
}

static void test_muon_delay_items(void)
{
	static const struct {
		int kind, depth, mb, replicas;
		const char *name;
	} cases[] = {
		{CLP_SCHED_GPIPE, 4, 4, 1, "gpipe"},   {CLP_SCHED_1F1B, 4, 8, 1, "1f1b"},
		{CLP_SCHED_CHIMERA, 4, 4, 1, "chimera"}, {CLP_SCHED_ZBH1, 4, 8, 1, "zbh1"},
		{CLP_SCHED_1F1B, 2, 4, 2, "1f1b x2"},
	};
	int early = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int v = 0; v < 4; v++) { /* bit 0 phases, bit 1 split */
			int ph = v & 1, split = (v & 2) != 0;
			int holders = cases[c].replicas * (cases[c].kind == CLP_SCHED_CHIMERA ? 2 : 1);
			clp_sched *b = generate(cases[c].kind, cases[c].depth, cases[c].mb,
						cases[c].replicas);
			/* NS 6 s a stage (the MLP-in-like matrix 2.4 s a layer: longer than a
			 * 1 s bubble); K-FAC's per-step time 0.3 is not used */
			clp_costs *t = b ? costs(b->nstages, 2, 6.0, 0.3) : NULL;
			clp_pf_opts o;
			clp_pf_report rep;
			clp_sched *cy = NULL;
			char what[64];

			if (!b || !t || (split && holders < 2)) {
				clp_sched_free(b);
				clp_costs_free(t);
				continue;
			}
			snprintf(what, sizeof(what), "delay %s%s%s", cases[c].name,
				 ph ? " phases" : "", split ? " split" : "");
			t->inv_phases = ph ? 5 : 0;
			clp_pf_opts_default(&o);
			o.costs = t;
			o.work = CLP_PF_WORK_MUON_DELAY;
			o.steady = 1;
			o.split = (ph ? CLP_PF_SPLIT_PHASES : 0) |
				  (split ? CLP_PF_SPLIT_INV | CLP_PF_SPLIT_PREC : 0);
			CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
			if (cy) {
				int nitems = 0;

				for (int r = 0; r < cy->nranks; r++)
					for (int i = 0; i < cy->ranks[r].nops; i++)
						nitems += cy->ranks[r].ops[i].kind == CLP_OP_KFAC_INV &&
							  cy->ranks[r].ops[i].mb <= 0;
				check_delay(what, b, cy, ph ? 5 : 1, split, &early);
				CHECK(rep.K == 1 && cy->nsteps == 1 && rep.precond_items == 0 &&
					      rep.precond_s == 0,
				      "%s: K %d, %d steps, %d per-step items", what, rep.K, cy->nsteps,
				      rep.precond_items);
				/* every layer's matrices once (split: over the holders) */
				CHECK(nitems == cases[c].depth * 2 * NF * (split ? 1 : holders),
				      "%s: %d NS a step", what, nitems);
				CHECK(rep.split_stages == (split ? cases[c].depth : 0) &&
					      rep.exchanges == (split ? 2 * cases[c].depth * holders : 0),
				      "%s: %d split stages, %d exchanges", what, rep.split_stages,
				      rep.exchanges);
				CHECK(rep.steady_added_s >= -1e-9 && rep.added_s >= -1e-9,
				      "%s: the work shortens the step (%g, steady %g)", what,
				      rep.added_s, rep.steady_added_s);
				if (!split)
					check_delay_mutations(what, cy, ph ? 5 : 1);
				else
					check_delay_split_mutation(what, cy);
			}
			clp_sched_free(cy);
			clp_sched_free(b);
			clp_costs_free(t);
		}
	CHECK(early, "delay: no NS item ran before its rank's first F/B (ready at the start)");
	CHECK(phased_seen, "delay: no case cut an NS into its phases");
}

/* More NS than the bubbles hold: the rest sits after the rank's last F/B and before its
 * OPT_STEP, forced, and the step grows. */
static void test_muon_delay_forced(void)
{
	clp_sched *b = generate(CLP_SCHED_1F1B, 4, 8, 1), *cy = NULL;
	clp_costs *t = b ? costs(b->nstages, 2, 40.0, 0) : NULL;
	clp_pf_opts o;
	clp_pf_report rep;
	int early = 0;

	if (!b || !t)
		goto out;
	clp_pf_opts_default(&o);
	o.costs = t;
	o.work = CLP_PF_WORK_MUON_DELAY;
	o.steady = 1;
	CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
	if (!cy)
		goto out;
	check_delay("delay forced", b, cy, 1, 0, &early);
	CHECK(rep.forced > 0 && rep.added_s > 1 && rep.steady_added_s > 1,
	      "delay forced: %d forced, +%g s (steady %g)", rep.forced, rep.added_s,
	      rep.steady_added_s);
	for (int r = 0; r < cy->nranks; r++) { /* NS between the last F/B and the OPT_STEP */
		const clp_rank_prog *p = &cy->ranks[r];
		int o_ = opt_of(p, r), last = -1, ns = 0;

		for (int i = 0; i < o_; i++)
			if (p->ops[i].kind == CLP_OP_FWD || clp_op_is_bwd_input(p->ops[i].kind) ||
			    p->ops[i].kind == CLP_OP_BWD_W)
				last = i;
		for (int i = last + 1; i < o_; i++)
			ns += p->ops[i].kind == CLP_OP_KFAC_INV;
		CHECK(o_ > 0 && ns > 0, "delay forced: rank %d: no NS between its last F/B (op %d) "
		      "and its OPT_STEP (op %d)", r, last, o_);
	}
	CHECK_OK(clp_pipefisher_check_work(cy, CLP_PF_WORK_MUON_DELAY, NF));
out:
	clp_sched_free(cy);
	clp_sched_free(b);
	clp_costs_free(t);
}

/* The base with each stage's NS (its whole KFAC_INV time) added to its OPT_STEP, simulated: the
 * serial step, one step from idle ranks (*cold) and the second of two back to back (*steady,
 * as the pass's steady state). two: a second copy of the base (repeated here). */
static void serial_step(const clp_sched *b, clp_sched *two, clp_costs *t, double *cold,
			double *steady)
{
	clp_sim_opts so;
	clp_sim_result r1, r2;
	double opt[16];
	int n = t->nstages < 16 ? t->nstages : 16;

	*cold = *steady = -1;
	for (int s = 0; s < n; s++) {
		opt[s] = t->stages[s].t[CLP_COST_OPT];
		t->stages[s].t[CLP_COST_OPT] += t->stages[s].t[CLP_COST_KFAC_INV];
	}
	clp_sim_opts_default(&so);
	so.costs = t;
	so.trace_limit = 0;
	CHECK_OK(clp_sched_repeat(two, 2));
	if (clp_sim_run(b, &so, &r1) == CLP_OK) {
		*cold = r1.cycle_s;
		if (clp_sim_run(two, &so, &r2) == CLP_OK) {
			*steady = r2.cycle_s - r1.cycle_s;
			clp_sim_result_free(&r2);
		}
		clp_sim_result_free(&r1);
	}
	for (int s = 0; s < n; s++)
		t->stages[s].t[CLP_COST_OPT] = opt[s];
}

/* One case of test_muon_delay_fallback: the pass against the serial step; *fell, *kept count
 * the fallbacks and the placements faster than serial. */
static void fallback_case(int kind, int replicas, int big, double opt, double ns, int *fell,
			  int *kept)
{
	clp_sched *b = generate(kind, 4, 8, replicas), *two = generate(kind, 4, 8, replicas);
	clp_sched *cy = NULL;
	clp_costs *t = b ? costs(b->nstages, 2, ns, 0) : NULL;
	clp_pf_opts o;
	clp_pf_report rep;
	double cold, steady, e = 1e-9;

	if (!b || !two || !t)
		goto out;
	for (int s = 0; s < t->nstages; s++)
		t->stages[s].t[CLP_COST_OPT] = s == big ? opt : 0.1;
	clp_pf_opts_default(&o);
	o.costs = t;
	o.work = CLP_PF_WORK_MUON_DELAY;
	o.steady = 1;
	CHECK_OK(clp_pipefisher(b, &o, &cy, &rep));
	serial_step(b, two, t, &cold, &steady);
	CHECK(cy && cold > 0 && steady > 0 && rep.steady_step_s <= steady + e &&
		      rep.steady_step_s <= rep.placed_steady_step_s + e &&
		      rep.step_s <= rep.placed_step_s + e,
	      "fallback: kind %d x %d, OPT %g on stage %d, NS %g: steady step %g s (placed %g), "
	      "serial %g s; step %g s (placed %g)", kind, replicas, opt, big, ns,
	      rep.steady_step_s, rep.placed_steady_step_s, steady, rep.step_s, rep.placed_step_s);
	/* no faster in a run than the serial step: not slower from idle ranks either */
	CHECK(rep.steady_step_s < steady - e || rep.step_s <= cold + e,
	      "fallback: kind %d x %d, OPT %g on stage %d, NS %g: step %g s, serial %g s, steady "
	      "both %g s", kind, replicas, opt, big, ns, rep.step_s, cold, steady);
	CHECK(!rep.serial_fallback || rep.forced == rep.items,
	      "fallback: %d of %d items forced", rep.forced, rep.items);
	*fell += rep.serial_fallback;
	*kept += !rep.serial_fallback && rep.steady_step_s < steady - e;
out:
	clp_sched_free(cy);
	clp_sched_free(b);
	clp_sched_free(two);
	clp_costs_free(t);
}

/* Delayed Muon's serial fallback: the pass's step is never longer than with every NS item in
 * the optimizer step (the base's OPT_STEPs lengthened by their stage's NS), in the steady
 * state, nor from idle ranks where the steady state gains nothing. A long OPT_STEP on the last
 * stage: first fit fills the first gaps of the next step (after the skewed tail of the step
 * before), which from idle ranks delays the first forwards (1F1B, 8 micro-batches: 49 s
 * against 47 s, 44 s both in a run): the fallback. Some cases keep the placement, faster
 * than serial. */
static void test_muon_delay_fallback(void)
{
	static const int kinds[] = {CLP_SCHED_1F1B, CLP_SCHED_ZBH1, CLP_SCHED_GPIPE};
	int fell = 0, kept = 0;

	for (int k = 0; k < 3; k++)
		for (int r = 1; r <= 2; r++)
			for (int big = 0; big < 4; big += 3)
				for (int ns = 4; ns <= 64; ns *= 16) {
					fallback_case(kinds[k], r, big, 0.1, ns, &fell, &kept);
					fallback_case(kinds[k], r, big, 16, ns, &fell, &kept);
				}
	CHECK(fell > 0 && kept > 0, "fallback: %d cases fell back, %d kept the placement (the "
	      "cases test neither)", fell, kept);
}

/* The counts for one block of width d = 8, MLP 32, 10 tokens, F + B = 3 s a stage of 2
 * layers: a flop takes 1.5 / (6 x 768 x 10) s. */
static void test_work_costs(void)
{
	clp_costs *c = costs(2, 2, 0, 0);
	const double w = 4 * 64 + 2 * 256, per = 1.5 / (6 * w * 10);
	double step = 0, root = 0, ns = 0, share = 0;
	const double rows[6] = {8, 8, 8, 8, 32, 8}, cols[6] = {8, 8, 8, 8, 8, 32};

	if (!c)
		return;
	for (int i = 0; i < 6; i++) {
		double a = rows[i], b = cols[i], m = a < b ? a : b, n = a < b ? b : a;

		step += 4 * a * b * (a + b);
		root += 25 * 8 * (a * a * a + b * b * b);
		ns += 5 * (4 * m * m * n + 2 * m * m * m);
	}
	CHECK_OK(clp_pf_work_costs(c, CLP_PF_WORK_SHAMPOO, 8, 32, 10, 25, 5, 25));
	CHECK(fabs(c->stages[1].t[CLP_COST_KFAC_PRECOND] - 2 * step * per) < 1e-12 &&
		      fabs(c->stages[1].t[CLP_COST_KFAC_INV] - 2 * root * per) < 1e-12,
	      "shampoo: step %g (want %g), refresh %g (want %g)",
	      c->stages[1].t[CLP_COST_KFAC_PRECOND], 2 * step * per,
	      c->stages[1].t[CLP_COST_KFAC_INV], 2 * root * per);
	CHECK(c->stages[0].t[CLP_COST_KFAC_CURV_A] == 0 && c->kfac_nfactors == 12 &&
		      c->inv_phases == 25,
	      "shampoo: factor times %g, %d roots, %d phases", c->stages[0].t[CLP_COST_KFAC_CURV_A],
	      c->kfac_nfactors, c->inv_phases);
	for (int f = 0; f < c->kfac_nfactors; f++)
		share += c->kfac_share[f];
	CHECK(fabs(share - 1) < 1e-12 && fabs(c->kfac_share[8] - 32768.0 * 200 / root) < 1e-12,
	      "shampoo: shares sum %g, the MLP-in L root's %g", share, c->kfac_share[8]);
	CHECK_OK(clp_pf_work_costs(c, CLP_PF_WORK_MUON, 8, 32, 10, 25, 5, 0));
	CHECK(fabs(c->stages[0].t[CLP_COST_KFAC_PRECOND] - 2 * ns * per) < 1e-12 &&
		      c->stages[0].t[CLP_COST_KFAC_INV] == 0 && c->kfac_nfactors == 0,
	      "muon: step %g (want %g), refresh %g", c->stages[0].t[CLP_COST_KFAC_PRECOND],
	      2 * ns * per, c->stages[0].t[CLP_COST_KFAC_INV]);
	CHECK_OK(clp_pf_work_costs(c, CLP_PF_WORK_MUON_DELAY, 8, 32, 10, 25, 5, 0));
	share = 0;
	for (int f = 0; f < c->kfac_nfactors; f++)
		share += c->kfac_share[f];
	CHECK(fabs(c->stages[1].t[CLP_COST_KFAC_INV] - 2 * ns * per) < 1e-12 &&
		      c->stages[1].t[CLP_COST_KFAC_PRECOND] == 0 && c->kfac_nfactors == 6 &&
		      c->inv_phases == 5 && fabs(share - 1) < 1e-12 &&
		      fabs(c->kfac_share[4] - 5 * (4 * 64 * 32 + 2 * 512) / ns) < 1e-12 &&
		      c->stages[0].kfac_bytes == 0 && c->delay_layer_bytes == 768 * 4,
	      "muon delay: NS %g (want %g), step %g, %d matrices, %d phases, shares %g, MLP in "
	      "%g, %lld bytes held, %lld a layer's exchange", c->stages[1].t[CLP_COST_KFAC_INV],
	      2 * ns * per, c->stages[1].t[CLP_COST_KFAC_PRECOND], c->kfac_nfactors,
	      c->inv_phases, share, c->kfac_share[4], (long long)c->stages[0].kfac_bytes,
	      (long long)c->delay_layer_bytes);
	{ /* SOAP: Shampoo's items, its step and refresh flops (cl/soap.h's counts), no phases */
		double sstep = 0, sref = 0;

		for (int i = 0; i < 6; i++) {
			sstep += clp_soap_step_flops((size_t)rows[i], (size_t)cols[i]);
			sref += clp_soap_refresh_flops((size_t)rows[i]) +
				clp_soap_refresh_flops((size_t)cols[i]);
		}
		CHECK_OK(clp_pf_work_costs(c, CLP_PF_WORK_SOAP, 8, 32, 10, 25, 5, 25));
		share = 0;
		for (int f = 0; f < c->kfac_nfactors; f++)
			share += c->kfac_share[f];
		CHECK(fabs(c->stages[1].t[CLP_COST_KFAC_PRECOND] - 2 * sstep * per) < 1e-12 &&
			      fabs(c->stages[1].t[CLP_COST_KFAC_INV] - 2 * sref * per) < 1e-12 &&
			      c->kfac_nfactors == 12 && c->inv_phases == 0 && fabs(share - 1) < 1e-12 &&
			      fabs(c->kfac_share[8] - clp_soap_refresh_flops(32) / sref) < 1e-12,
		      "soap: step %g (want %g), refresh %g (want %g), %d sides, %d phases, shares %g",
		      c->stages[1].t[CLP_COST_KFAC_PRECOND], 2 * sstep * per,
		      c->stages[1].t[CLP_COST_KFAC_INV], 2 * sref * per, c->kfac_nfactors,
		      c->inv_phases, share);
	}
	CHECK(clp_pf_work_costs(c, CLP_PF_WORK_KFAC, 8, 32, 10, 25, 5, 0) == CLP_ERR_INVALID &&
		      clp_pf_work_costs(c, CLP_PF_WORK_MUON, 0, 32, 10, 25, 5, 0) == CLP_ERR_INVALID,
	      "bad work or width accepted");
	clp_error_clear();
	clp_costs_free(c);
}

/* A cost table's other device kinds (clpipe plan's tables): a kind measured at half the
 * stage's rate gets twice its work, not its K-FAC times; an unmeasured kind (NAN) none, so the
 * stage's over the device's speed applies. */
static void test_work_costs_kinds(void)
{
	clp_costs *c = costs(2, 2, 0.9, 0.4);
	const size_t per = (size_t)2 * CLP_COST_NTIMES;

	if (!c)
		return;
	c->kinds = calloc(2, sizeof(*c->kinds));
	c->kind_t = malloc(2 * per * sizeof(double));
	if (!c->kinds || !c->kind_t) {
		clp_costs_free(c);
		CHECK(0, "out of host memory");
		return;
	}
	c->nkinds = 2;
	for (size_t i = 0; i < 2 * per; i++)
		c->kind_t[i] = NAN;
	for (int st = 0; st < 2; st++) { /* kind 0: F 2, B 4 (half the rate), K-FAC's times */
		double *t = &c->kind_t[(size_t)st * CLP_COST_NTIMES];

		t[CLP_COST_FWD] = 2, t[CLP_COST_BWD] = 4;
		t[CLP_COST_KFAC_CURV_A] = t[CLP_COST_KFAC_CURV_B] = 0.6;
		t[CLP_COST_KFAC_INV] = 0.9, t[CLP_COST_KFAC_PRECOND] = 0.4;
	}
	for (int work = CLP_PF_WORK_SHAMPOO; work <= CLP_PF_WORK_MUON_DELAY; work++) {
		const double *k0 = &c->kind_t[CLP_COST_NTIMES], *k1 = &c->kind_t[per];
		const double *s1 = c->stages[1].t;

		CHECK_OK(clp_pf_work_costs(c, work, 8, 32, 10, 25, 5, 0));
		CHECK(fabs(k0[CLP_COST_KFAC_INV] - 2 * s1[CLP_COST_KFAC_INV]) < 1e-12 &&
			      fabs(k0[CLP_COST_KFAC_PRECOND] - 2 * s1[CLP_COST_KFAC_PRECOND]) < 1e-12 &&
			      k0[CLP_COST_KFAC_CURV_A] == 0 && k0[CLP_COST_KFAC_CURV_B] == 0 &&
			      s1[CLP_COST_KFAC_INV] + s1[CLP_COST_KFAC_PRECOND] > 0,
		      "work %d: kind 0 refresh %g, step %g, factors %g (stage: %g, %g)", work,
		      k0[CLP_COST_KFAC_INV], k0[CLP_COST_KFAC_PRECOND], k0[CLP_COST_KFAC_CURV_A],
		      s1[CLP_COST_KFAC_INV], s1[CLP_COST_KFAC_PRECOND]);
		CHECK(isnan(k1[CLP_COST_KFAC_INV]) && isnan(k1[CLP_COST_KFAC_PRECOND]) &&
			      isnan(k1[CLP_COST_KFAC_CURV_A]),
		      "work %d: the unmeasured kind got times (%g)", work, k1[CLP_COST_KFAC_INV]);
	}
	clp_costs_free(c);
}

TH_MAIN(TH_TEST(test_shampoo_items), TH_TEST(test_min_steps), TH_TEST(test_muon_items), TH_TEST(test_muon_delay_items),
	TH_TEST(test_muon_delay_forced), TH_TEST(test_muon_delay_fallback),
	TH_TEST(test_work_costs),
	TH_TEST(test_work_costs_kinds))
