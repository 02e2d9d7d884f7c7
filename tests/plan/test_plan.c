/* The planner on real machines' hwloc files and synthetic mixes (pure data): the plan fits every
 * device, its layers add up to the model's, its schedule validates and its layout matches, it is
 * at least as fast as the naive equal split (faster where devices differ), and each mix shows
 * what it is about (slow devices get fewer layers, a small device recomputes or takes fewer,
 * slow wide-area links carry no stage boundary). Also: the greedy balance against brute force,
 * stage cost composition, and bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/io/config.h"
#include "engine/plan/plan_internal.h"
#include "engine/sched/gen.h"
#include "engine/sim/sim.h"
#include "engine/pass/validate.h"
#include "engine/skip/skip.h"
#include "tests/harness.h"
#include "topology/discover.h"

#define PD PLAN_DATA "/"
#define TD TOPO_DATA "/"

/* The default options with a smaller refinement budget (CI time; the facts hold either way). */
static void opts(clp_plan_opts *o)
{
	clp_plan_opts_default(o);
	o->refine_top = 2;
	o->refine_evals = 60;
}

static clp_costs *profiles(const char *a, const char *b, int batch)
{
	const char *f[2] = {a, b};
	clp_costs *c = NULL;

	CHECK_OK(clp_plan_blocks_from_profiles(f, b ? 2 : 1, batch, &c));
	return c;
}

static void model(clp_plan_model *m, int batch, int micro_batches, const char *optim)
{
	clp_train_config cfg;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &cfg));
	CHECK_OK(clp_cfg_load_file(&clp_train_schema, &cfg, PD "bert-large.toml"));
	cfg.train.batch = batch;
	cfg.train.micro_batches = micro_batches;
	snprintf(cfg.optim.name, sizeof(cfg.optim.name), "%s", optim);
	CHECK_OK(clp_plan_model_from_config(&cfg, m));
}

/* Layers each rank holds, by the plan's layout. */
static void rank_layers(const clp_plan *p, const clp_layout *l, int *out)
{
	for (int r = 0; r < l->nranks; r++) {
		out[r] = 0;
		for (int i = 0; i < l->ranks[r].nstages; i++)
			out[r] += p->layers[l->ranks[r].stages[i].stage];
	}
}

/* The facts every plan must satisfy; *ratio = naive step / plan step (0 when the naive split
 * does not fit). */
static void check_plan(const clp_cluster *c, const clp_costs *b, const clp_plan_model *m,
		       const clp_plan_opts *o, clp_plan *best, double *ratio)
{
	clp_plan naive = {0}, again = {0};
	clp_sched *s = NULL;
	clp_layout *l = NULL;
	int sum = 0, used[4096] = {0};

	*ratio = 0;
	{
		clp_status st = clp_plan_search(c, b, m, o, best);

		CHECK(st == CLP_OK, "search: %s", clp_last_error());
		if (st != CLP_OK)
			return;
	}
	CHECK(best->over_memory == 0, "the plan is over memory on %d ranks", best->over_memory);
	for (int r = 0; r < best->nranks; r++) {
		CHECK(best->usable_bytes[r] == 0 || best->peak_bytes[r] <= best->usable_bytes[r],
		      "rank %d: peak %lld over %lld", r, (long long)best->peak_bytes[r],
		      (long long)best->usable_bytes[r]);
		CHECK(best->device[r] >= 0 && best->device[r] < c->ndevices && !used[best->device[r]],
		      "rank %d: device %d used twice or out of range", r, best->device[r]);
		if (best->device[r] >= 0 && best->device[r] < c->ndevices)
			used[best->device[r]] = 1;
	}
	for (int s_ = 0; s_ < best->nstages; s_++) {
		CHECK(best->layers[s_] >= 1, "stage %d has %d layers", s_, best->layers[s_]);
		sum += best->layers[s_];
	}
	CHECK(sum == m->cfg.n_layer, "layers add up to %d, the model has %d", sum, m->cfg.n_layer);
	CHECK(best->step_s > 0 && isfinite(best->step_s), "step %g", best->step_s);
	CHECK_OK(clp_plan_schedule(best, m, &s));
	if (s) {
		CHECK_OK(clp_sched_validate(s, 1));
		CHECK_OK(clp_plan_layout(best, c, s, &l));
	}
	if (l) {
		CHECK_OK(clp_layout_check(l, s, "plan layout"));
		CHECK_OK(clp_layout_resolve(l, c, "plan layout"));
	}
	/* deterministic: the same plan scores the same */
	CHECK_OK(clp_plan_copy(&again, best));
	CHECK_OK(clp_plan_evaluate(c, b, m, o, &again));
	CHECK(again.step_s == best->step_s, "evaluated again: %.9g s, searched %.9g s",
	      again.step_s, best->step_s);
	CHECK_OK(clp_plan_naive(c, b, m, o, &naive));
	if (naive.over_memory == 0) {
		CHECK(best->step_s <= naive.step_s * (1 + 1e-12), "plan %.6g s slower than the "
		      "naive split's %.6g s", best->step_s, naive.step_s);
		*ratio = naive.step_s / best->step_s;
	}
	clp_plan_clear(&again);
	clp_plan_clear(&naive);
	clp_layout_free(l);
	clp_sched_free(s);
}

static void test_two_fast_two_slow(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model m;
	clp_plan_opts o;
	clp_plan p = {0};
	double ratio;

	model(&m, 8, 8, "adamw");
	opts(&o);
	CHECK_OK(clp_cluster_load(PD "mix_2fast2slow.json", &c));
	if (!c || !b)
		goto out;
	check_plan(c, b, &m, &o, &p, &ratio);
	CHECK(ratio > 1.2, "plan only %.3fx the naive split on two fast and two slow GPUs", ratio);
	{
		/* one pipeline, every device: the V100s carry more layers than the P100s */
		clp_plan one = {0};
		clp_sched *s = NULL;
		clp_layout *l = NULL;
		int lay[4], fast = 0, slow = 0;

		o.fixed_depth = 4, o.fixed_replicas = 1, o.kinds = 1u << CLP_SCHED_1F1B;
		CHECK_OK(clp_plan_search(c, b, &m, &o, &one));
		CHECK_OK(clp_plan_schedule(&one, &m, &s));
		CHECK_OK(clp_plan_layout(&one, c, s, &l));
		if (l) {
			rank_layers(&one, l, lay);
			for (int r = 0; r < 4; r++)
				if (!strcmp(c->devices[one.device[r]].kind, "V100"))
					fast += lay[r];
				else
					slow += lay[r];
			CHECK(fast > slow, "V100s hold %d layers, P100s %d", fast, slow);
		}
		clp_layout_free(l);
		clp_sched_free(s);
		clp_plan_clear(&one);
	}
out:
	clp_plan_clear(&p);
	clp_cluster_free(c);
	clp_costs_free(b);
}

/* Layers the device of the given kind holds in a plan. */
static int layers_on(const clp_plan *p, const clp_plan_model *m, const clp_cluster *c,
		     const char *kind)
{
	clp_sched *s = NULL;
	clp_layout *l = NULL;
	int lay[64] = {0}, n = 0;

	CHECK_OK(clp_plan_schedule(p, m, &s));
	if (s)
		CHECK_OK(clp_plan_layout(p, c, s, &l));
	if (l && l->nranks <= 64) {
		rank_layers(p, l, lay);
		for (int r = 0; r < l->nranks; r++)
			if (!strcmp(c->devices[p->device[r]].kind, kind))
				n += lay[r];
	}
	clp_layout_free(l);
	clp_sched_free(s);
	return n;
}

static void test_fast_small_memory(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_p100.csv",
				PD "bert-large_time_memory_rtx3090.csv", 32);
	clp_plan_model m;
	clp_plan_opts o;
	clp_plan p = {0}, big = {0}, naive = {0};
	double ratio;
	int small;

	model(&m, 32, 8, "adamw");
	opts(&o);
	CHECK_OK(clp_cluster_load(PD "mix_smallmem.json", &c));
	if (!c || !b)
		goto out;
	check_plan(c, b, &m, &o, &p, &ratio);
	small = layers_on(&p, &m, c, "RTX3090");
	/* the same devices with room to spare */
	c->devices[1].memory_bytes = (int64_t)24 << 30;
	CHECK_OK(clp_plan_search(c, b, &m, &o, &big));
	CHECK(p.recompute || small < layers_on(&big, &m, c, "RTX3090"),
	      "the 4 GiB RTX 3090 holds %d layers without recomputation, as many as with 24 GiB",
	      small);
	CHECK(!big.recompute, "recomputation where every device has room");
	c->devices[1].memory_bytes = (int64_t)4 << 30;
	/* the equal split does not fit without recomputation */
	CHECK_OK(clp_plan_naive(c, b, &m, &o, &naive));
	CHECK(naive.recompute || naive.over_memory, "the naive split fits the 4 GiB device");
out:
	clp_plan_clear(&p);
	clp_plan_clear(&big);
	clp_plan_clear(&naive);
	clp_cluster_free(c);
	clp_costs_free(b);
}

static void test_two_sockets_and_hosts(void)
{
	const char *files[] = {PD "two_sockets.json", PD "four_hosts.json"};
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model m;
	clp_plan_opts o;

	model(&m, 8, 8, "adamw");
	opts(&o);
	for (int i = 0; b && i < 2; i++) {
		clp_cluster *c = NULL;
		clp_plan p = {0};
		double ratio = 0.0; /* stays 0 (the CHECK fails) when the cluster does not load */

		CHECK_OK(clp_cluster_load(files[i], &c));
		if (c)
			check_plan(c, b, &m, &o, &p, &ratio);
		CHECK(ratio > 1.1, "%s: plan only %.3fx the naive split", files[i], ratio);
		clp_plan_clear(&p);
		clp_cluster_free(c);
	}
	clp_costs_free(b);
}

static clp_cluster *xml_cluster(const char *xml, const char *devices, const clp_costs *b,
				int hosts)
{
	clp_topo_cldev *devs = NULL;
	clp_topo_host h = {0};
	clp_topo_cluster inv = {0};
	clp_cluster *c = NULL;
	int n = 0;

	CHECK_OK(clp_topo_cldevs_read(devices, &devs, &n));
	CHECK_OK(clp_topo_discover(xml, devs, n, &h));
	inv.hosts = calloc((size_t)hosts, sizeof(*inv.hosts));
	for (int i = 0; inv.hosts && i < hosts; i++) {
		CHECK_OK(clp_topo_host_copy(&inv.hosts[i], &h));
		snprintf(inv.hosts[i].name, sizeof(inv.hosts[i].name), "host%d", i);
		inv.nhosts++;
	}
	CHECK_OK(clp_plan_cluster_from_inventory(&inv, b, NULL, 0, &c));
	clp_topo_cluster_clear(&inv);
	clp_topo_host_clear(&h);
	free(devs);
	return c;
}

static void test_xml_topologies(void)
{
	clp_costs *p100 = profiles(PD "bert-large_time_memory_p100.csv", NULL, 8);
	clp_costs *v100 = profiles(PD "bert-large_time_memory_v100.csv", NULL, 8);
	clp_costs *old = NULL;
	clp_plan_model m;
	clp_plan_opts o;
	struct {
		const char *xml, *dev;
		clp_costs **b;
		int hosts, ndev;
	} cases[] = {
		{TD "power8gpudistances.xml", TD "power8.devices.json", &p100, 1, 4},
		{TD "power8gpudistances.xml", TD "power8.devices.json", &p100, 2, 8},
		{TD "nvidiaDGX2.xml", TD "dgx2.devices.json", &v100, 1, 16},
		{TD "32em64t-2n8c2t-pci-normalio.xml", TD "mixed.devices.json", &old, 1, 5},
	};

	CHECK_OK(clp_costs_load(PD "blocks_2012.json", &old));
	model(&m, 8, 16, "adamw");
	opts(&o);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clp_cluster *c;
		clp_plan p = {0};
		double ratio;

		if (!*cases[i].b)
			continue;
		c = xml_cluster(cases[i].xml, cases[i].dev, *cases[i].b, cases[i].hosts);
		if (!c)
			continue;
		CHECK(c->ndevices == cases[i].ndev, "%s: %d devices, expected %d", cases[i].xml,
		      c->ndevices, cases[i].ndev);
		check_plan(c, *cases[i].b, &m, &o, &p, &ratio);
		if (i == 0) {
			/* two NVLink pairs, and PCIe across the sockets between the pairs */
			int nv = 0, cross = 0;

			for (int k = 0; k < c->nlinks; k++)
				nv += c->links[k].spec.bandwidth_Bps == 40e9,
				cross += c->links[k].spec.bandwidth_Bps == 8e9;
			CHECK(nv == 2 && cross == 4, "power8: %d NVLink and %d cross-socket links", nv,
			      cross);
			CHECK(strchr(c->devices[0].id, ':') && !strcmp(c->devices[0].kind, "P100"),
			      "power8: device 0 is \"%s\" of kind \"%s\"", c->devices[0].id,
			      c->devices[0].kind);
		}
		if (i == 3) /* the old GPUs differ by 10x: the plan leaves the naive split far behind */
			CHECK(ratio == 0 || ratio > 2, "mixed 2012 GPUs: only %.3fx", ratio);
		clp_plan_clear(&p);
		clp_cluster_free(c);
	}
	clp_costs_free(p100);
	clp_costs_free(v100);
	clp_costs_free(old);
}

static int region_is(const char *id, const char *r)
{
	return !strncmp(id, r, strlen(r)) && id[strlen(r)] == '-';
}

static void test_geo_distributed(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv", NULL, 8);
	clp_plan_model m;
	clp_plan_opts o;
	clp_plan p = {0};
	double ratio;

	model(&m, 8, 8, "adamw");
	opts(&o);
	CHECK_OK(clp_cluster_load(PD "geo8.json", &c));
	if (!c || !b)
		goto out;
	check_plan(c, b, &m, &o, &p, &ratio);
	CHECK(ratio > 10, "geo-distributed: only %.3fx the naive split", ratio);
	/* NL-London moves 0.24 MB/s: no stage hands activations over it */
	for (int q = 0; q < p.replicas; q++)
		for (int d = 0; d + 1 < p.depth; d++) {
			const char *a = c->devices[p.device[q * p.depth + d]].id;
			const char *z = c->devices[p.device[q * p.depth + d + 1]].id;

			CHECK(!((region_is(a, "NL") && region_is(z, "London")) ||
				(region_is(a, "London") && region_is(z, "NL"))),
			      "stages %d and %d on %s and %s", d, d + 1, a, z);
		}
out:
	clp_plan_clear(&p);
	clp_cluster_free(c);
	clp_costs_free(b);
}

/* SkipPipe on the geo-distributed nodes: paths the rules accept, a finite iteration; a batch
 * the balance rule cannot spread is refused by name. */
static void test_skippipe(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv", NULL, 8);
	clp_plan_model m;
	clp_plan_skip sk;

	model(&m, 8, 12, "adamw");
	CHECK_OK(clp_cluster_load(PD "geo8.json", &c));
	if (!c || !b)
		goto out;
	CHECK_OK(clp_plan_skippipe(c, b, &m, 4, 3, 100, &sk));
	if (sk.paths) {
		CHECK_OK(clp_skip_validate(&sk.rules, sk.paths));
		CHECK(sk.iter_s > 0 && isfinite(sk.iter_s), "iteration %g s", sk.iter_s);
		CHECK(sk.paths->nmb == 12 && sk.per_origin == 6, "%d micro-batches, %d per origin",
		      sk.paths->nmb, sk.per_origin);
	}
	clp_plan_skip_clear(&sk);
	m.micro_batches = 8;
	CHECK_ERR(clp_plan_skippipe(c, b, &m, 4, 3, 100, &sk), CLP_ERR_INVALID, "balance");
	CHECK_ERR(clp_plan_skippipe(c, b, &m, 9, 3, 100, &sk), CLP_ERR_INVALID, "9 stages");
out:
	clp_cluster_free(c);
	clp_costs_free(b);
}

/* Muon's Newton-Schulz in OPT's cost: a BERT-Large layer (4 C x C, F x C, C x F, F = 4C) takes
 * 5 x 60 C^3 flops a step, its forward and backward 6 x 12 C^2 a token: 300 C / (72 tokens) */
static void test_muon_opt_cost(void)
{
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model ma, mm;
	clp_plan p = {0};
	clp_sched *s = NULL;
	clp_costs *ca = NULL, *cm = NULL;
	const double want = 300.0 * 1024 / (72.0 * 8 * 128);

	model(&ma, 8, 8, "adamw");
	model(&mm, 8, 8, "muon");
	CHECK(ma.opt_layer_work == 0 && fabs(mm.opt_layer_work / want - 1) < 1e-12,
	      "Muon's work per layer %.9g (want %.9g), AdamW's %g", mm.opt_layer_work, want,
	      ma.opt_layer_work);
	{
		/* Shampoo (shampoo.iters 25, roots every step): per layer the statistics and
		 * preconditioning, 4 a b (a + b) a matrix (q, k, v, o: 8 C^3 each; MLP in and out:
		 * 80 C^3 each), and two roots a matrix, 25 x 8 d^3 each (q, k, v, o: 400 C^3 each;
		 * in and out: 200 (C^3 + 64 C^3) each): 27792 C^3 against 72 C^2 a token */
		clp_plan_model msh;

		model(&msh, 8, 8, "shampoo");
		CHECK(fabs(msh.opt_layer_work / (27792.0 * 1024 / (72.0 * 8 * 128)) - 1) < 1e-12,
		      "Shampoo's work per layer %.9g (want %.9g)", msh.opt_layer_work,
		      27792.0 * 1024 / (72.0 * 8 * 128));
	}
	if (!b)
		return;
	CHECK_OK(clp_plan_init(&p, CLP_SCHED_1F1B, 4, 1, 1, 8));
	for (int i = 0; i < 4; i++)
		p.layers[i] = 6;
	CHECK_OK(clp_plan_schedule(&p, &mm, &s));
	if (s) {
		CHECK_OK(clp_plan_stage_costs(b, &ma, s, 0, 0, 0, &ca));
		CHECK_OK(clp_plan_stage_costs(b, &mm, s, 0, 0, 0, &cm));
	}
	if (ca && cm) {
		const double *l = b->stages[CLP_PLAN_LAYER].t;
		double extra = 6 * want * (l[CLP_COST_FWD] + l[CLP_COST_BWD]);
		double got = cm->stages[1].t[CLP_COST_OPT] - ca->stages[1].t[CLP_COST_OPT];

		CHECK(fabs(got - extra) <= 1e-12 + 1e-9 * extra && extra > 0,
		      "stage 1's OPT time grows by %.9g s (want %.9g)", got, extra);
	}
	clp_costs_free(ca);
	clp_costs_free(cm);
	clp_sched_free(s);
	clp_plan_clear(&p);
	clp_costs_free(b);
}

/* Chimera (every stage has two holders): the planner tries PipeFisher with its work split between
 * them (pipeline.pipefisher_split) and keeps the better of split and unsplit for a placement */
static void test_kfac_pipefisher_split(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model m;
	clp_plan_opts o;
	clp_plan p = {0}, whole = {0}, split = {0};
	double ratio;
	clp_train_config cfg;

	model(&m, 8, 8, "kfac");
	opts(&o);
	o.kinds = 1u << CLP_SCHED_CHIMERA;
	o.fixed_replicas = 1, o.fixed_depth = 4, o.pipefisher = 1;
	o.refine_top = 2, o.refine_evals = 40;
	CHECK_OK(clp_cluster_load(PD "mix_2fast2slow.json", &c));
	if (!c || !b)
		goto out;
	check_plan(c, b, &m, &o, &p, &ratio);
	CHECK(p.pipefisher && p.kfac_K >= 1, "a PipeFisher plan (K %d)", p.kfac_K);
	CHECK_OK(clp_plan_copy(&whole, &p));
	CHECK_OK(clp_plan_copy(&split, &p));
	whole.pf_split = 0, split.pf_split = 1;
	CHECK_OK(clp_plan_evaluate(c, b, &m, &o, &whole));
	CHECK_OK(clp_plan_evaluate(c, b, &m, &o, &split));
	CHECK(split.kfac_K != whole.kfac_K || split.step_s != whole.step_s,
	      "the split changes the cycle (K %d / %d, %g / %g s)", split.kfac_K, whole.kfac_K,
	      split.step_s, whole.step_s);
	CHECK(p.step_s <= whole.step_s * (1 + 1e-12) && p.step_s <= split.step_s * (1 + 1e-12),
	      "the plan (%g s, split %d) is not the better of split (%g s, K %d) and unsplit "
	      "(%g s, K %d)", p.step_s, p.pf_split, split.step_s, split.kfac_K, whole.step_s,
	      whole.kfac_K);
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &cfg));
	CHECK_OK(clp_plan_apply_config(&split, "layout.json", &cfg));
	CHECK(cfg.pipeline.pipefisher && cfg.pipeline.pipefisher_split,
	      "a split plan's config turns on pipeline.pipefisher and pipefisher_split");
out:
	clp_plan_clear(&p);
	clp_plan_clear(&whole);
	clp_plan_clear(&split);
	clp_cluster_free(c);
	clp_costs_free(b);
}

static void test_kfac_pipefisher(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model m;
	clp_plan_opts o;
	clp_plan p = {0}, off = {0}, on = {0};
	double ratio;

	model(&m, 8, 8, "kfac");
	opts(&o);
	o.kinds = (1u << CLP_SCHED_1F1B) | (1u << CLP_SCHED_GPIPE);
	o.fixed_replicas = 1, o.fixed_depth = 4;
	o.refine_top = 2, o.refine_evals = 40;
	CHECK_OK(clp_cluster_load(PD "mix_2fast2slow.json", &c));
	if (!c || !b)
		goto out;
	check_plan(c, b, &m, &o, &p, &ratio);
	CHECK(!p.pipefisher || p.kfac_K >= 1, "PipeFisher plan without a cycle (K %d)", p.kfac_K);
	/* the same placement with and without PipeFisher: the pass fills bubbles the serial rule
	 * leaves idle */
	CHECK_OK(clp_plan_copy(&off, &p));
	CHECK_OK(clp_plan_copy(&on, &p));
	off.pipefisher = 0, on.pipefisher = 1;
	CHECK_OK(clp_plan_evaluate(c, b, &m, &o, &off));
	CHECK_OK(clp_plan_evaluate(c, b, &m, &o, &on));
	CHECK(on.kfac_K >= 1 && on.step_s > 0 && off.step_s > 0, "K %d, steps %g / %g", on.kfac_K,
	      on.step_s, off.step_s);
	CHECK(p.step_s <= off.step_s && p.step_s <= on.step_s * (1 + 1e-12),
	      "the plan (%g s) is not the better of with (%g s) and without (%g s) PipeFisher",
	      p.step_s, on.step_s, off.step_s);
out:
	clp_plan_clear(&p);
	clp_plan_clear(&on);
	clp_plan_clear(&off);
	clp_cluster_free(c);
	clp_costs_free(b);
}

/* Shampoo with PipeFisher, the placement the planner picks for BERT-Large on two V100 and two
 * P100 (ZB-H1, [3, 9, 8, 4]): scored with its roots in phases (what clpipe train runs,
 * pipeline.pipefisher_phases) the step is shorter than with whole roots, whose 4096-wide roots
 * (1.9 s on a P100) fit no bubble; and each plan's step is the steady state (two cycles less
 * one), not above its first cycle from idle ranks, whose base has no warm-up (steady = cold:
 * what makes it comparable with the plans without PipeFisher). */
static void test_shampoo_phases_steady(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model m;
	clp_plan_opts o;
	clp_plan whole = {0}, ph = {0};
	const int lay[4] = {3, 9, 8, 4}, dev[4] = {0, 1, 3, 2};

	model(&m, 8, 8, "shampoo");
	opts(&o);
	CHECK_OK(clp_cluster_load(PD "mix_2fast2slow.json", &c));
	CHECK_OK(clp_plan_init(&whole, CLP_SCHED_ZBH1, 4, 1, 1, 8));
	if (!c || !b || !whole.layers)
		goto out;
	memcpy(whole.layers, lay, sizeof(lay));
	memcpy(whole.device, dev, sizeof(dev));
	whole.pipefisher = 1;
	CHECK_OK(clp_plan_copy(&ph, &whole));
	ph.pf_phases = 1;
	CHECK_OK(clp_plan_evaluate(c, b, &m, &o, &whole));
	CHECK_OK(clp_plan_evaluate(c, b, &m, &o, &ph));
	printf("Shampoo, ZB-H1 [3, 9, 8, 4]: whole roots K %d, step %.6g ms (first cycle %.6g); "
	       "phases K %d, %.6g ms (%.6g)\n", whole.kfac_K, 1e3 * whole.step_s,
	       1e3 * whole.first_step_s, ph.kfac_K, 1e3 * ph.step_s, 1e3 * ph.first_step_s);
	CHECK(ph.step_s > 0 && ph.step_s < 0.9 * whole.step_s,
	      "the phases pack better: %g s against %g s whole", ph.step_s, whole.step_s);
	CHECK(ph.kfac_K > whole.kfac_K, "the phases take a longer cycle (K %d against %d)",
	      ph.kfac_K, whole.kfac_K);
	for (int i = 0; i < 2; i++) {
		const clp_plan *p = i ? &ph : &whole;

		CHECK(p->step_s > 0 && p->step_s <= p->first_step_s * (1 + 1e-12),
		      "the steady step %g s above the first cycle's %g s", p->step_s,
		      p->first_step_s);
		CHECK(p->base_step_s > 0 &&
		      fabs(p->base_steady_step_s - p->base_step_s) <= 1e-9 * p->base_step_s,
		      "the base warms up: steady %.12g s, cold %.12g s", p->base_steady_step_s,
		      p->base_step_s);
	}
out:
	clp_plan_clear(&whole);
	clp_plan_clear(&ph);
	clp_cluster_free(c);
	clp_costs_free(b);
}

/* The greedy's bottleneck equals the best over every split (one holder per stage). */
static void test_balance_exact(void)
{
	th_rng rng = th_rng_seed(7);
	clp_costs *b = NULL;
	clp_plan_model m;

	model(&m, 8, 8, "adamw");
	CHECK_OK(clp_costs_uniform(3, 0.001, 0.002, -1, &b));
	if (!b)
		return;
	for (int i = 0; i < 3; i++)
		snprintf(b->stages[i].blocks, sizeof(b->stages[i].blocks), "%s",
			 clp_plan_block_name(i));
	b->stages[CLP_PLAN_EMBED].t[CLP_COST_FWD] = 0.0004;
	b->stages[CLP_PLAN_HEAD].t[CLP_COST_FWD] = 0.0025;
	for (int trial = 0; trial < 40; trial++) {
		int D = 2 + trial % 3, L = D + (int)(th_next(&rng) % 9);
		clp_cluster *c = NULL;
		plan_ctx x;
		plan_shape *sh = malloc(sizeof(*sh));
		clp_plan p = {0};
		int64_t budget[8] = {0};
		int bind, n[8];
		double got = 0, best = INFINITY;

		m.cfg.n_layer = L;
		CHECK_OK(clp_cluster_ideal(D, &c));
		for (int d = 0; c && d < D; d++)
			c->devices[d].speed = 0.3 + 2 * th_uniform(&rng);
		if (!c || !sh || plan_ctx_init(&x, c, b, &m, NULL) != CLP_OK) {
			CHECK(0, "setup");
			free(sh);
			clp_cluster_free(c);
			break;
		}
		p.kind = CLP_SCHED_1F1B, p.depth = D, p.replicas = 1, p.chunks = 1;
		p.microbatches = 8;
		CHECK_OK(plan_alloc(&p));
		for (int d = 0; d < D; d++)
			p.device[d] = d;
		CHECK_OK(plan_shape_of(&p, &m, sh));
		CHECK_OK(plan_balance(&x, sh, &p, budget, &bind));
#define POS_T(d, k) ((d) == 0 ? x.te[d] : 0) + ((d) == D - 1 ? x.th[d] : 0) + \
	(k) * (x.tf[d] + x.tb[d])
		for (int d = 0; d < D; d++)
			got = fmax(got, POS_T(d, p.layers[d]));
		/* every composition of L into D positive parts */
		for (int d = 0; d < D; d++)
			n[d] = 1;
		n[D - 1] = L - D + 1;
		for (;;) {
			double t = 0;
			int k;

			for (int d = 0; d < D; d++)
				t = fmax(t, POS_T(d, n[d]));
			best = fmin(best, t);
			/* next composition: move one from the last part leftwards */
			for (k = D - 2; k >= 0; k--) {
				int rest = 0;

				for (int j = k + 1; j < D; j++)
					rest += n[j];
				if (rest > D - 1 - k) {
					n[k]++;
					for (int j = k + 1; j < D; j++)
						n[j] = 1;
					n[D - 1] = L;
					for (int j = 0; j < D - 1; j++)
						n[D - 1] -= n[j];
					break;
				}
			}
			if (k < 0)
				break;
		}
#undef POS_T
		CHECK(fabs(got - best) <= 1e-12 * best, "D %d L %d: greedy %.9g, best %.9g", D, L,
		      got, best);
		CHECK(!bind, "no budget, yet binding");
		clp_plan_clear(&p);
		plan_ctx_free(&x);
		clp_cluster_free(c);
		free(sh);
	}
	clp_costs_free(b);
}

static void test_stage_costs(void)
{
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv",
				PD "bert-large_time_memory_p100.csv", 8);
	clp_plan_model m;
	clp_plan p = {0};
	clp_sched *s = NULL;
	clp_costs *c = NULL, *rc = NULL;
	clp_model_mem whole;
	int64_t params = 0;

	model(&m, 8, 8, "adamw");
	p.kind = CLP_SCHED_1F1B, p.depth = 3, p.replicas = 1, p.chunks = 1, p.microbatches = 8;
	CHECK_OK(plan_alloc(&p));
	p.layers[0] = 10, p.layers[1] = 9, p.layers[2] = 5;
	CHECK_OK(clp_plan_schedule(&p, &m, &s));
	if (!s || !b)
		goto out;
	CHECK_OK(clp_plan_stage_costs(b, &m, s, 0, 0, 0, &c));
	CHECK_OK(clp_plan_stage_costs(b, &m, s, 0, 1, 0, &rc));
	if (!c || !rc)
		goto out;
	{
		double lf = b->stages[CLP_PLAN_LAYER].t[CLP_COST_FWD];
		double lb = b->stages[CLP_PLAN_LAYER].t[CLP_COST_BWD];
		int k = clp_costs_kind_index(c, "P100");

		CHECK(fabs(c->stages[1].t[CLP_COST_FWD] - 9 * lf) < 1e-12, "stage 1 forward %g, 9 "
		      "layers %g", c->stages[1].t[CLP_COST_FWD], 9 * lf);
		CHECK(fabs(rc->stages[2].t[CLP_COST_BWD] - 5 * (lb + lf)) < 1e-12, "recomputation "
		      "adds the forward to the backward");
		CHECK(k >= 0 && c->kind_t[((size_t)k * 3 + 2) * CLP_COST_NTIMES + CLP_COST_FWD] >
				5 * lf, "P100 times kept per stage");
		CHECK(rc->stages[0].act_bytes < c->stages[0].act_bytes / 4, "recomputation keeps "
		      "%lld of %lld bytes", (long long)rc->stages[0].act_bytes,
		      (long long)c->stages[0].act_bytes);
		CHECK(rc->stages[0].work_bytes > c->stages[0].work_bytes, "no recomputation buffer");
	}
	/* the stages' parameters are the model's, plus the head's copy of the tied embedding */
	for (int i = 0; i < 3; i++)
		params += c->stages[i].param_bytes;
	CHECK_OK(clp_model_stage_mem(&m.cfg, 0, m.cfg.n_layer + 1, 8, 128, 0, 0, &whole));
	CHECK(params == whole.param_bytes + (int64_t)m.cfg.vocab * m.cfg.d_model * 4,
	      "stages hold %lld parameter bytes, the model %lld", (long long)params,
	      (long long)whole.param_bytes);
out:
	clp_costs_free(c);
	clp_costs_free(rc);
	clp_sched_free(s);
	clp_plan_clear(&p);
	clp_costs_free(b);
}

/* train.precision in the planner's memory model: the per-stage table of a bf16 model sends
 * messages of exactly half the fp32 bytes, keeps fp32 masters, gradients and AdamW state and
 * adds a 16-bit copy of the weights (half the masters), and keeps fewer activation bytes
 * (more than half of fp32's: norms' and attention's statistics stay fp32); so the simulated
 * peak of the ranks holding several micro-batches falls, and static memory grows by the copy
 * (and the 16-bit stage's gradient message buffer). */
static void test_precision_memory(void)
{
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv", NULL, 8);
	clp_train_config cfg;
	clp_plan_model m[2];
	clp_plan p = {0};
	clp_sched *s = NULL;
	clp_costs *c[2] = {NULL, NULL};
	clp_sim_result r[2];
	clp_sim_opts o;

	memset(r, 0, sizeof(r));
	for (int k = 0; k < 2; k++) {
		CHECK_OK(clp_cfg_defaults(&clp_train_schema, &cfg));
		CHECK_OK(clp_cfg_load_file(&clp_train_schema, &cfg, PD "bert-large.toml"));
		cfg.train.batch = 8;
		cfg.train.micro_batches = 8;
		CHECK_OK(clp_cfg_set(&clp_train_schema, &cfg, "train.precision", k ? "bf16" : "fp32",
				     "test"));
		CHECK_OK(clp_plan_model_from_config(&cfg, &m[k]));
	}
	CHECK(m[0].precision == CLP_F32 && m[1].precision == CLP_BF16, "train.precision read");
	p.kind = CLP_SCHED_1F1B, p.depth = 3, p.replicas = 1, p.chunks = 1, p.microbatches = 8;
	CHECK_OK(plan_alloc(&p));
	p.layers[0] = 10, p.layers[1] = 9, p.layers[2] = 5;
	CHECK_OK(clp_plan_schedule(&p, &m[0], &s));
	if (!s || !b)
		goto out;
	for (int k = 0; k < 2; k++) {
		CHECK_OK(clp_plan_stage_costs(b, &m[k], s, 0, 0, 0, &c[k]));
		if (!c[k])
			goto out;
		CHECK(c[k]->precision == m[k].precision, "the stage table records the precision");
		clp_sim_opts_default(&o);
		o.costs = c[k];
		CHECK_OK(clp_sim_run(s, &o, &r[k]));
	}
	for (int i = 0; i < 3; i++) {
		const clp_stage_cost *x = &c[0]->stages[i], *y = &c[1]->stages[i];
		clp_model_mem mm;
		int first = i == 0 ? 0 : i == 1 ? 11 : 20, last = i == 0 ? 10 : i == 1 ? 19 : 25;

		CHECK(y->out_bytes * 2 == x->out_bytes && x->out_bytes == 8 * 128 * 1024 * 4,
		      "stage %d: messages %lld bytes in bf16, %lld in fp32", i,
		      (long long)y->out_bytes, (long long)x->out_bytes);
		CHECK(y->param_bytes == x->param_bytes && y->opt_bytes == x->opt_bytes,
		      "stage %d: masters and AdamW state stay fp32", i);
		CHECK(clp_costs_wcopy_bytes(c[1], i) * 2 == y->param_bytes &&
		      clp_costs_wcopy_bytes(c[0], i) == 0, "stage %d: the 16-bit copy", i);
		CHECK(y->act_bytes < x->act_bytes && 2 * y->act_bytes > x->act_bytes,
		      "stage %d: activations %lld bytes in bf16, %lld in fp32", i,
		      (long long)y->act_bytes, (long long)x->act_bytes);
		CHECK_OK(clp_model_stage_mem_prec(&m[1].cfg, first, last, 8, 128, 0, 0, CLP_BF16,
						  &mm));
		CHECK(mm.act_bytes == y->act_bytes && mm.copy_bytes * 2 == y->param_bytes,
		      "stage %d: the table is the stage memory model's (blocks %d..%d)", i, first,
		      last);
	}
	CHECK(r[1].msg_bytes * 2 == r[0].msg_bytes, "simulated message bytes halve");
	for (int i = 0; i < r[0].nranks && r[1].nranks == r[0].nranks; i++) {
		int64_t grow = clp_costs_wcopy_bytes(c[1], i) + c[1]->stages[i].work_bytes -
			       c[0]->stages[i].work_bytes;

		CHECK(r[1].ranks[i].static_bytes == r[0].ranks[i].static_bytes + grow,
		      "rank %d: static memory %lld in bf16, %lld in fp32: grows by the 16-bit copy "
		      "and the gradient message buffer (%lld)", i,
		      (long long)r[1].ranks[i].static_bytes, (long long)r[0].ranks[i].static_bytes,
		      (long long)grow);
		/* 1F1B: rank i holds 3 - i micro-batches' activations; the last stage, with the
		 * head and the tied embedding's copy, holds one and gains */
		CHECK(i == 2 || r[1].ranks[i].peak_bytes < r[0].ranks[i].peak_bytes,
		      "rank %d: peak %lld in bf16, %lld in fp32", i,
		      (long long)r[1].ranks[i].peak_bytes, (long long)r[0].ranks[i].peak_bytes);
	}
	snprintf(cfg.train.precision, sizeof(cfg.train.precision), "fp8");
	CHECK_ERR(clp_plan_model_from_config(&cfg, &m[1]), CLP_ERR_INVALID, "train.precision",
		  "fp8");
out:
	for (int k = 0; k < 2; k++) {
		clp_sim_result_free(&r[k]);
		clp_costs_free(c[k]);
	}
	clp_sched_free(s);
	clp_plan_clear(&p);
	clp_costs_free(b);
}

static void test_bad_input(void)
{
	clp_cluster *c = NULL;
	clp_costs *b = profiles(PD "bert-large_time_memory_v100.csv", NULL, 8), *two = NULL;
	clp_plan_model m;
	clp_plan p = {0};

	model(&m, 8, 8, "adamw");
	CHECK_OK(clp_cluster_load(PD "mix_2fast2slow.json", &c));
	CHECK_OK(clp_costs_uniform(2, 1, 2, -1, &two));
	if (!c || !b || !two)
		goto out;
	CHECK_ERR(clp_plan_search(c, two, &m, NULL, &p), CLP_ERR_FORMAT, "block table",
		  "3 entries");
	snprintf(b->stages[1].blocks, sizeof(b->stages[1].blocks), "layers");
	CHECK_ERR(clp_plan_blocks_check(b, "b.json"), CLP_ERR_FORMAT, "b.json",
		  "stages[1].blocks", "\"layer\"");
	snprintf(b->stages[1].blocks, sizeof(b->stages[1].blocks), "layer");
	m.micro_batches = 0;
	CHECK_ERR(clp_plan_search(c, b, &m, NULL, &p), CLP_ERR_INVALID, "micro-batches");
	m.micro_batches = 8;
	for (int d = 0; d < c->ndevices; d++)
		c->devices[d].memory_bytes = 100 << 20;
	CHECK_ERR(clp_plan_search(c, b, &m, NULL, &p), CLP_ERR_NOMEM, "no placement fits",
		  "memory");
out:
	clp_plan_clear(&p);
	clp_cluster_free(c);
	clp_costs_free(b);
	clp_costs_free(two);
}

TH_MAIN(TH_TEST(test_two_fast_two_slow), TH_TEST(test_fast_small_memory),
	TH_TEST(test_two_sockets_and_hosts), TH_TEST(test_xml_topologies),
	TH_TEST(test_geo_distributed), TH_TEST(test_skippipe), TH_TEST(test_kfac_pipefisher), TH_TEST(test_kfac_pipefisher_split), TH_TEST(test_shampoo_phases_steady), TH_TEST(test_muon_opt_cost), TH_TEST(test_balance_exact),
	TH_TEST(test_stage_costs), TH_TEST(test_precision_memory), TH_TEST(test_bad_input))
