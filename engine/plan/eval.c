/* A plan scored by the simulator: its schedule (the generator's, the plan's stage map, PipeFisher's
 * cycle when asked), its per-stage cost table and its layout, simulated on the cluster; the
 * simulated peak memory of every rank checked against its device less the reserve. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/plan_internal.h"
#include "engine/sched/gen.h"
#include "engine/model/stage.h"
#include "engine/pass/scenario.h"
#include "engine/sim/sim.h"

void clp_plan_opts_default(clp_plan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->kinds = (1u << CLP_SCHED_KIND_COUNT) - 1;
	o->chunks = 2;
	o->recompute = -1;
	o->pipefisher = -1;
	o->mem_reserve = 0.1;
	o->refine_top = 4;
	o->refine_evals = 120;
	o->phases_top = 2;
	o->drop_slow = 1;
}

void clp_plan_clear(clp_plan *p)
{
	free(p->layers);
	free(p->device);
	free(p->peak_bytes);
	free(p->usable_bytes);
	memset(p, 0, sizeof(*p));
}

clp_status plan_alloc(clp_plan *p)
{
	free(p->layers);
	free(p->device);
	free(p->peak_bytes);
	free(p->usable_bytes);
	p->nstages = p->depth * (p->kind == CLP_SCHED_INTERLEAVED ? p->chunks : 1);
	p->nranks = p->depth * p->replicas;
	p->layers = calloc((size_t)p->nstages, sizeof(int));
	p->device = calloc((size_t)p->nranks, sizeof(int));
	p->peak_bytes = calloc((size_t)p->nranks, sizeof(int64_t));
	p->usable_bytes = calloc((size_t)p->nranks, sizeof(int64_t));
	if (!p->layers || !p->device || !p->peak_bytes || !p->usable_bytes)
		return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	return CLP_OK;
}

clp_status clp_plan_init(clp_plan *p, int kind, int depth, int replicas, int chunks,
			 int microbatches)
{
	memset(p, 0, sizeof(*p));
	if (kind < 0 || kind >= CLP_SCHED_KIND_COUNT || depth < 1 || replicas < 1 || chunks < 1)
		return clp_error(CLP_ERR_INVALID, "plan: schedule %d, %d x %d ranks, %d chunks", kind,
				 depth, replicas, chunks);
	p->kind = kind, p->depth = depth, p->replicas = replicas;
	p->chunks = kind == CLP_SCHED_INTERLEAVED ? chunks : 1;
	p->microbatches = microbatches;
	return plan_alloc(p);
}

clp_status clp_plan_copy(clp_plan *dst, const clp_plan *src)
{
	clp_plan t = *src;

	t.layers = NULL, t.device = NULL, t.peak_bytes = NULL, t.usable_bytes = NULL;
	CLP_TRY(plan_alloc(&t));
	memcpy(t.layers, src->layers, (size_t)src->nstages * sizeof(int));
	memcpy(t.device, src->device, (size_t)src->nranks * sizeof(int));
	memcpy(t.peak_bytes, src->peak_bytes, (size_t)src->nranks * sizeof(int64_t));
	memcpy(t.usable_bytes, src->usable_bytes, (size_t)src->nranks * sizeof(int64_t));
	clp_plan_clear(dst);
	*dst = t;
	return CLP_OK;
}

void plan_ctx_free(plan_ctx *x)
{
	free(x->tf);
	free(x->tb);
	free(x->te);
	free(x->th);
	free(x->usable);
	memset(x, 0, sizeof(*x));
}

/* Stage memory is linear in the layers it holds: static a + n b, a slot c + n d, fitted from
 * stages of one and two layers (embedding and head: models of two and three layers). */
static clp_status mem_coeffs(plan_ctx *x)
{
	for (int i = 0; i < 16; i++) {
		int sp = i >> 3, rc = (i >> 2) & 1, e = (i >> 1) & 1, h = i & 1;
		clp_model_config c1 = x->m->cfg, c2 = x->m->cfg;
		int f1, l1, f2, l2;
		clp_model_mem m1, m2;

		c1.n_layer = c2.n_layer = 3; /* other blocks do not depend on the count */
		if (e && h) {
			c1.n_layer = 1, c2.n_layer = 2;
			f1 = f2 = 0, l1 = 2, l2 = 3;
		} else if (e) {
			f1 = f2 = 0, l1 = 1, l2 = 2;
		} else if (h) {
			f1 = 3, f2 = 2, l1 = l2 = 4;
		} else {
			f1 = f2 = 1, l1 = 1, l2 = 2;
		}
		CLP_TRY(clp_plan_stage_mem(x->m, &c1, f1, l1, sp, rc, &m1));
		CLP_TRY(clp_plan_stage_mem(x->m, &c2, f2, l2, sp, rc, &m2));
		/* masters, gradients, optimizer state and the 16-bit copy (0 in fp32) */
		x->st_b[i] = (m2.param_bytes + m2.grad_bytes + m2.opt_bytes + m2.copy_bytes) -
			     (m1.param_bytes + m1.grad_bytes + m1.opt_bytes + m1.copy_bytes);
		x->st_a[i] = m1.param_bytes + m1.grad_bytes + m1.opt_bytes + m1.copy_bytes +
			     m1.work_bytes -
			     x->st_b[i];
		x->act_d[i] = m2.act_bytes - m1.act_bytes;
		x->act_c[i] = m1.act_bytes - x->act_d[i];
		if (x->m->kfac) /* factors and inverses, wherever the K-FAC work runs */
			x->st_a[i] += m1.kfac_bytes - (m2.kfac_bytes - m1.kfac_bytes),
			x->st_b[i] += m2.kfac_bytes - m1.kfac_bytes;
	}
	return CLP_OK;
}

clp_status plan_ctx_init(plan_ctx *x, const clp_cluster *c, const clp_costs *blocks,
			 const clp_plan_model *m, const clp_plan_opts *o)
{
	int n = c->ndevices;
	double ref = 1;

	memset(x, 0, sizeof(*x));
	x->c = c, x->blocks = blocks, x->m = m;
	if (o)
		x->o = *o;
	else
		clp_plan_opts_default(&x->o);
	CLP_TRY(clp_plan_blocks_check(blocks, "block table"));
	if (m->micro_batches < 1 || m->batch < 1 || m->seq < 1 || m->cfg.n_layer < 1)
		return clp_error(CLP_ERR_INVALID, "plan: the model needs layers, a micro-batch shape "
				 "and micro-batches (%d layers, %zu x %zu, %d micro-batches)",
				 m->cfg.n_layer, m->batch, m->seq, m->micro_batches);
	if (m->kfac && m->kfac_interval < 1)
		return clp_error(CLP_ERR_INVALID, "plan: kfac.interval must be >= 1");
	if (!(x->o.mem_reserve >= 0 && x->o.mem_reserve < 1))
		return clp_error(CLP_ERR_INVALID, "plan: the memory reserve %g is not in [0, 1)",
				 x->o.mem_reserve);
	x->tf = calloc((size_t)n, sizeof(double));
	x->tb = calloc((size_t)n, sizeof(double));
	x->te = calloc((size_t)n, sizeof(double));
	x->th = calloc((size_t)n, sizeof(double));
	x->usable = calloc((size_t)n, sizeof(int64_t));
	if (!x->tf || !x->tb || !x->te || !x->th || !x->usable) {
		plan_ctx_free(x);
		return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	}
	/* speeds count relative to the table's own kind, as in the simulator */
	for (int i = 0; i < n; i++)
		if (!strcmp(c->devices[i].kind, blocks->device_kind)) {
			ref = c->devices[i].speed;
			break;
		}
	for (int i = 0; i < n; i++) {
		const clp_device *d = &c->devices[i];
		int k = clp_costs_kind_index(blocks, d->kind);
		double sp = d->speed / ref;

#define T_(b, t) clp_costs_time(blocks, b, t, k, sp)
		x->tf[i] = T_(CLP_PLAN_LAYER, CLP_COST_FWD);
		x->tb[i] = T_(CLP_PLAN_LAYER, CLP_COST_BWD);
		x->te[i] = T_(CLP_PLAN_EMBED, CLP_COST_FWD) + T_(CLP_PLAN_EMBED, CLP_COST_BWD);
		x->th[i] = T_(CLP_PLAN_HEAD, CLP_COST_FWD) + T_(CLP_PLAN_HEAD, CLP_COST_BWD);
#undef T_
		x->usable[i] = (int64_t)((double)d->memory_bytes * (1 - x->o.mem_reserve));
	}
	{
		clp_status st = mem_coeffs(x);

		if (st != CLP_OK)
			plan_ctx_free(x);
		return st;
	}
}

clp_status plan_sched(const clp_plan *p, const clp_plan_model *m, clp_sched **out)
{
	clp_gen_opts g;
	clp_sched *s = NULL;
	int sum = 0;

	*out = NULL;
	clp_gen_opts_default(&g);
	g.kind = p->kind;
	g.depth = p->depth;
	g.microbatches = p->microbatches;
	g.chunks = p->kind == CLP_SCHED_INTERLEAVED ? p->chunks : 1;
	g.replicas = p->replicas;
	g.layers = m->cfg.n_layer;
	g.opt_step = 1;
	g.tied_embedding = m->cfg.tied;
	g.grad_norm = 1;
	CLP_TRY(clp_sched_generate(&s, &g));
	for (int i = 0; i < s->nstages && i < p->nstages; i++) {
		s->stages[i].first_layer = sum;
		s->stages[i].nlayers = p->layers[i];
		sum += p->layers[i];
	}
	if (s->nstages != p->nstages || sum != m->cfg.n_layer) {
		clp_sched_free(s);
		return clp_error(CLP_ERR_INVALID, "plan: %d stages with %d layers for a schedule of "
				 "%d stages and a model of %d", p->nstages, sum, s->nstages,
				 m->cfg.n_layer);
	}
	/* the tied embedding's all-reduce carries the token table (the cost table has no size
	 * for it) */
	for (int r = 0; r < s->nranks; r++)
		for (int i = 0; i < s->ranks[r].nops; i++) {
			clp_op *op = &s->ranks[r].ops[i];

			if (op->kind == CLP_OP_ALLREDUCE && op->what == CLP_RED_TIED && !op->bytes)
				op->bytes = (int64_t)m->cfg.vocab * m->cfg.d_model * 4;
		}
	*out = s;
	return CLP_OK;
}

clp_status plan_shape_of(const clp_plan *p, const clp_plan_model *m, plan_shape *sh)
{
	clp_plan q = *p;
	clp_sched *s = NULL;
	clp_sim_opts so;
	clp_sim_result r = {0};
	clp_costs *unit = NULL;
	int *lay = calloc((size_t)p->nstages, sizeof(int));
	clp_status st;

	memset(sh, 0, sizeof(*sh));
	if (!lay)
		return clp_error(CLP_ERR_NOMEM, "plan: out of host memory");
	if (p->nstages > 4096 || p->depth > 1024) {
		free(lay);
		return clp_error(CLP_ERR_INVALID, "plan: at most 1024 ranks per pipeline and 4096 "
				 "stages");
	}
	/* any split will do: the shape does not depend on it */
	for (int i = 0; i < p->nstages; i++)
		lay[i] = m->cfg.n_layer / p->nstages + (i < m->cfg.n_layer % p->nstages);
	q.layers = lay;
	st = plan_sched(&q, m, &s);
	if (st == CLP_OK)
		st = clp_costs_uniform(s->nstages, 1, 2, -1, &unit);
	for (int i = 0; st == CLP_OK && i < s->nstages; i++)
		unit->stages[i].act_bytes = unit->stages[i].act_w_bytes = 1;
	sh->nstages = p->nstages, sh->depth = p->depth;
	for (int d = 0; st == CLP_OK && d < p->depth; d++)
		for (int i = 0; i < s->ranks[d].nops; i++) {
			const clp_op *op = &s->ranks[d].ops[i];
			int k = op->stage, dup = 0;

			if (op->kind != CLP_OP_FWD || k < 0 || k >= s->nstages)
				continue;
			for (int j = 0; j < sh->nholders[k]; j++)
				dup |= sh->holders[2 * k + j] == d;
			if (!dup && sh->nholders[k] < 2)
				sh->holders[2 * k + sh->nholders[k]++] = d;
		}
	if (st == CLP_OK) {
		clp_sim_opts_default(&so);
		so.costs = unit;
		so.trace_limit = 0;
		st = clp_sim_run(s, &so, &r);
	}
	for (int d = 0; st == CLP_OK && d < p->depth; d++)
		sh->held[d] = (int)r.ranks[d].peak_bytes;
	clp_sim_result_free(&r);
	clp_costs_free(unit);
	clp_sched_free(s);
	free(lay);
	return st;
}

clp_status clp_plan_schedule(const clp_plan *p, const clp_plan_model *m, clp_sched **out)
{
	return plan_sched(p, m, out);
}

clp_status clp_plan_layout(const clp_plan *p, const clp_cluster *c, const clp_sched *s,
			   clp_layout **out)
{
	CLP_TRY(clp_layout_from_sched(s, c, out));
	for (int r = 0; r < (*out)->nranks && r < p->nranks; r++) {
		clp_layout_rank *lr = &(*out)->ranks[r];

		lr->device = p->device[r];
		snprintf(lr->device_id, sizeof(lr->device_id), "%s", c->devices[p->device[r]].id);
	}
	return CLP_OK;
}

/* PipeFisher on the base schedule: the scenario's cycle replaces it; kept data (the model's,
 * clp_scenario_kfac_keep) capped by the room the base leaves on the tightest device. */
static clp_status with_pipefisher(plan_ctx *x, clp_plan *p, clp_scenario *sc,
				  const clp_sim_result *base, clp_pf_report *rep)
{
	clp_scenario_pf pf;
	int64_t room = -1;

	for (int r = 0; r < base->nranks; r++) {
		int64_t u = x->usable[p->device[r]];

		if (u > 0 && (room < 0 || u - base->ranks[r].peak_bytes < room))
			room = u - base->ranks[r].peak_bytes > 0 ? u - base->ranks[r].peak_bytes : 0;
	}
	clp_scenario_pf_default(&pf);
	pf.model = &x->m->cfg;
	pf.tokens = x->m->batch * x->m->seq;
	pf.mem_cap = room;
	/* what clpipe train runs. Shampoo: with pf_phases a root longer than its rank's shortest
	 * bubble in phases, one per coupled Newton iteration (pipeline.pipefisher_phases, the
	 * default, session_pf.c); the search scores its candidates with whole roots (an upper
	 * bound: phases on every candidate made plan.cli_shampoo_pipefisher 60 x slower, 5.5 s ->
	 * 326 s) and its best few again with phases (search.c, clp_plan_opts.phases_top). SOAP's
	 * refreshes are whole items (the executor has no phases of them) */
	pf.split = p->pf_split && !x->m->shampoo && !x->m->soap && !x->m->muon_delay
			   ? CLP_PF_SPLIT_RUN
			   : 0;
	if (x->m->shampoo && p->pf_phases)
		pf.split = CLP_PF_SPLIT_PHASES;
	/* the delayed Muon: each matrix's Newton-Schulz whole, K = 1 (session_pf.c's pass) */
	pf.work = x->m->shampoo || x->m->soap ? CLP_PF_WORK_SHAMPOO /* SOAP's: its items */
		  : x->m->muon_delay ? CLP_PF_WORK_MUON_DELAY
				     : CLP_PF_WORK_KFAC;
	/* the steady state too: the plan ranks by it (first_step_s is the cold cycle) */
	pf.steady = 1;
	CLP_TRY(clp_scenario_pipefisher(sc, &pf, rep));
	p->kfac_K = rep->K;
	return CLP_OK;
}

/* The steps of plan_eval: sc's schedule, costs and layout, the base step when PipeFisher
 * replaces it, the simulated step into p; sc, r and base are the caller's to free. */
static clp_status eval_steps(plan_ctx *x, clp_plan *p, clp_scenario *sc, clp_sim_result *r,
			     clp_sim_result *base)
{
	clp_sim_opts so;
	clp_pf_report rep = {0};
	clp_status st;

	CLP_TRY(plan_sched(p, x->m, &sc->sched));
	/* K-FAC's work serially without PipeFisher; Shampoo's, delayed Muon's as items with it */
	CLP_TRY(clp_plan_costs(x->blocks, x->m, p, sc->sched, &sc->costs));
	CLP_TRY(clp_plan_layout(p, x->c, sc->sched, &sc->layout));
	clp_scenario_sim_opts(sc, &so);
	so.trace_limit = 0;
	if (p->pipefisher) {
		st = clp_scenario_sim(sc, &so, base);
		x->evals++;
		CLP_TRY(st);
		CLP_TRY(with_pipefisher(x, p, sc, base, &rep));
	}
	st = clp_scenario_sim(sc, &so, r);
	x->evals++;
	CLP_TRY(st);
	p->step_s = p->first_step_s = r->step_s;
	p->base_step_s = p->base_steady_step_s = 0;
	if (p->pipefisher) {
		p->step_s = rep.steady_step_s;
		p->base_step_s = rep.base_step_s;
		p->base_steady_step_s = rep.steady_base_step_s;
	}
	p->bubble = r->bubble;
	p->util = r->util_mean;
	p->over_memory = 0;
	for (int i = 0; i < p->nranks; i++) {
		p->peak_bytes[i] = r->ranks[i].peak_bytes;
		p->usable_bytes[i] = x->usable[p->device[i]];
		if (p->usable_bytes[i] > 0 && p->peak_bytes[i] > p->usable_bytes[i])
			p->over_memory++;
	}
	p->evaluations = x->evals;
	return CLP_OK;
}

clp_status plan_eval(plan_ctx *x, clp_plan *p)
{
	clp_scenario sc;
	clp_sim_result r = {0}, base = {0};
	clp_status st;

	clp_scenario_init(&sc);
	sc.cluster = (clp_cluster *)x->c; /* borrowed: never written, not freed */
	sc.borrowed = CLP_SCN_CLUSTER;
	p->microbatches = x->m->micro_batches / p->replicas;
	st = eval_steps(x, p, &sc, &r, &base);
	clp_sim_result_free(&r);
	clp_sim_result_free(&base);
	clp_scenario_free(&sc);
	return st;
}

clp_status clp_plan_evaluate(const clp_cluster *c, const clp_costs *blocks,
			     const clp_plan_model *m, const clp_plan_opts *o, clp_plan *p)
{
	plan_ctx x;
	clp_status st;

	CLP_TRY(plan_ctx_init(&x, c, blocks, m, o));
	for (int r = 0; r < p->nranks; r++)
		if (p->device[r] < 0 || p->device[r] >= c->ndevices) {
			plan_ctx_free(&x);
			return clp_error(CLP_ERR_INVALID, "plan: rank %d on device %d of a cluster of "
					 "%d", r, p->device[r], c->ndevices);
		}
	st = plan_eval(&x, p);
	plan_ctx_free(&x);
	return st;
}
