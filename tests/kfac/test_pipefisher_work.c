/* The PipeFisher pass with other optimizers' periodic work (clp_pf_opts.work), host only.
 * Shampoo: for GPipe, 1F1B, Chimera, ZB-H1 and two replicas every rank refreshes every root
 * (layer x factor) of every stage it steps exactly once per cycle, after the stage's OPT_STEP
 * of the cycle's first step (its statistics' snapshot), never a factor item or all-reduce; the
 * per-step work precedes every OPT_STEP; K respects the packing bound; with the phases each
 * root runs in its phases, in order; clp_pipefisher_check_work accepts the cycle and refuses
 * it with one refresh dropped or moved before the snapshot. Muon: K = 1, only the per-step
 * work. clp_pf_work_costs: the flop counts of docs/OPTIMIZERS.md at the stage's GEMM rate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pass/pipefisher.h"
#include "engine/sched/gen.h"
#include "engine/sched/sched_json.h"
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
			CHECK(clp_pipefisher_check_work(c2, CLP_PF_WORK_SHAMPOO, NF) ==
				      CLP_ERR_INVALID,
			      "%s: a cycle with rank 0's refresh %s passes", what,
			      move ? "moved before the snapshot" : "dropped");
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
	CHECK(clp_pf_work_costs(c, CLP_PF_WORK_KFAC, 8, 32, 10, 25, 5, 0) == CLP_ERR_INVALID &&
		      clp_pf_work_costs(c, CLP_PF_WORK_MUON, 0, 32, 10, 25, 5, 0) == CLP_ERR_INVALID,
	      "bad work or width accepted");
	clp_error_clear();
	clp_costs_free(c);
}

TH_MAIN(TH_TEST(test_shampoo_items), TH_TEST(test_muon_items), TH_TEST(test_work_costs))
