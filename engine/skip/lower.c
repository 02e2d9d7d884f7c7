/* A path set as the engine's schedule IR, its layout (and a layout's nodes), and its simulation
 * (docs/SKIPPIPE.md, "The schedule"). IR stage S is the head and loss of stage 0: it runs on the
 * micro-batch's origin, so every IR path is 0, hops..., S and every IR stage appears at most
 * once on it, which is what the IR validator and both interpreters expect. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"

/* One visit of a micro-batch to a node: position i of its IR path. */
typedef struct visit {
	int mb, pos;
} visit;

typedef struct lower {
	const clp_skip_paths *p;
	int S;
	clp_sched *s;
} lower;

/* Node and IR stage at position i of mb's IR path (0: origin, 1..H: hops, H + 1: head). */
static void at(const clp_skip_paths *p, int mb, int i, int *node, int *stage)
{
	int h = p->hop_start[mb + 1] - p->hop_start[mb];

	if (i == 0 || i == h + 1) {
		*node = p->origin[mb];
		*stage = i ? p->nstages : 0;
	} else {
		*node = p->hops[p->hop_start[mb] + i - 1].node;
		*stage = p->hops[p->hop_start[mb] + i - 1].stage;
	}
}

static clp_status push_msg(lower *L, int node, clp_op_kind kind, int stage, int mb, int peer)
{
	clp_op op = clp_op_make(kind, stage, 0, 0, mb);

	op.peer = peer;
	op.tag = clp_sched_tag(kind == CLP_OP_SEND_ACT || kind == CLP_OP_RECV_ACT ? CLP_TAG_ACT
										    : CLP_TAG_GRAD, 0, 0, mb);
	return clp_sched_push(L->s, node, &op);
}

/* The ops of one visit in one section of its node's list: receives, head (forward, backward
 * and the gradient back), backward (+ send) or forward (+ send). */
enum { SEC_RECV, SEC_HEAD, SEC_BWD, SEC_FWD };

static clp_status emit(lower *L, const visit *v, int sec)
{
	const clp_skip_paths *p = L->p;
	int h = p->hop_start[v->mb + 1] - p->hop_start[v->mb], n, st, pn = -1, ps, nn = -1, ns;
	int head = v->pos == h + 1;
	clp_op op;

	at(p, v->mb, v->pos, &n, &st);
	if (v->pos > 0)
		at(p, v->mb, v->pos - 1, &pn, &ps);
	if (v->pos <= h)
		at(p, v->mb, v->pos + 1, &nn, &ns);
	if (pn == n)
		pn = -1; /* P = 1: stage 0 and the head on one node, no message */
	if (nn == n)
		nn = -1;
	switch (sec) {
	case SEC_RECV:
		if (pn >= 0)
			CLP_TRY(push_msg(L, n, CLP_OP_RECV_ACT, st, v->mb, pn));
		if (nn >= 0)
			CLP_TRY(push_msg(L, n, CLP_OP_RECV_GRAD, st, v->mb, nn));
		return CLP_OK;
	case SEC_HEAD:
	case SEC_BWD:
		if ((sec == SEC_HEAD) != head)
			return CLP_OK;
		if (head) {
			op = clp_op_make(CLP_OP_FWD, st, 0, 0, v->mb);
			CLP_TRY(clp_sched_push(L->s, n, &op));
		}
		op = clp_op_make(CLP_OP_BWD, st, 0, 0, v->mb);
		CLP_TRY(clp_sched_push(L->s, n, &op));
		return pn >= 0 ? push_msg(L, n, CLP_OP_SEND_GRAD, st, v->mb, pn) : CLP_OK;
	case SEC_FWD:
		if (head)
			return CLP_OK;
		op = clp_op_make(CLP_OP_FWD, st, 0, 0, v->mb);
		CLP_TRY(clp_sched_push(L->s, n, &op));
		return nn >= 0 ? push_msg(L, n, CLP_OP_SEND_ACT, st, v->mb, nn) : CLP_OK;
	}
	return CLP_OK;
}

/* The gradient all-reduce of the node's stage over the stage's nodes, then the optimizer steps.
 * Stage-0 nodes hold IR stages 0 and S (the head): one all-reduce, stage 0's, carries both (the
 * executor reduces every gradient the node holds; one message instead of two). */
static clp_status end_of_step(lower *L, const int *group_of)
{
	const clp_skip_paths *p = L->p;

	for (int n = 0; n < p->nnodes; n++) {
		int held[2] = {p->node_stage[n], p->node_stage[n] == 0 ? L->S : -1};

		if (group_of[held[0]] >= 0) {
			clp_op op = clp_op_make(CLP_OP_ALLREDUCE, held[0], 0, 0, -1);

			op.what = CLP_RED_GRADS;
			op.group = group_of[held[0]];
			CLP_TRY(clp_sched_push(L->s, n, &op));
		}
		for (int k = 0; k < 2 && held[k] >= 0; k++) {
			clp_op op = clp_op_make(CLP_OP_OPT_STEP, held[k], 0, 0, -1);

			CLP_TRY(clp_sched_push(L->s, n, &op));
		}
	}
	return CLP_OK;
}

/* The groups: the nodes of each stage, when more than one. */
static clp_status make_groups(lower *L, int *group_of, int *buf)
{
	const clp_skip_paths *p = L->p;

	for (int s = 0; s < L->S; s++) {
		int n = 0;

		group_of[s] = -1;
		for (int i = 0; i < p->nnodes; i++)
			if (p->node_stage[i] == s)
				buf[n++] = i;
		if (n > 1)
			CLP_TRY(clp_sched_group(L->s, buf, n, &group_of[s]));
	}
	return CLP_OK;
}

static clp_status stage_map(clp_sched *s, int S, int lps)
{
	lps = lps > 0 ? lps : 1;
	s->nlayers = S * lps;
	for (int k = 0; k <= S; k++) {
		s->stages[k].first_layer = k < S ? k * lps : S * lps;
		s->stages[k].nlayers = k < S ? lps : 0;
		s->stages[k].embed = k == 0;
		s->stages[k].head = k == S;
	}
	snprintf(s->name, sizeof(s->name), "skippipe");
	return CLP_OK;
}

static clp_status lower_paths(lower *L, visit *vis, int *vstart, int *irp, int *irs)
{
	const clp_skip_paths *p = L->p;
	int S = L->S, k = 0;

	for (int m = 0; m < p->nmb; m++) {
		int h = p->hop_start[m + 1] - p->hop_start[m];

		irp[m] = k;
		for (int i = 0; i <= h + 1; i++) {
			int n, st;

			at(p, m, i, &n, &st);
			irs[k++] = st;
			vstart[n + 1]++;
		}
	}
	irp[p->nmb] = k;
	CLP_TRY(clp_sched_set_paths(L->s, irp, irs));
	for (int n = 0; n < p->nnodes; n++)
		vstart[n + 1] += vstart[n];
	/* Visits bucketed by node, each bucket in micro-batch order (the priority). */
	for (int m = 0; m < p->nmb; m++) {
		int h = p->hop_start[m + 1] - p->hop_start[m];

		for (int i = 0; i <= h + 1; i++) {
			int n, st;

			at(p, m, i, &n, &st);
			vis[vstart[n]++] = (visit){m, i};
		}
	}
	for (int n = p->nnodes; n > 0; n--)
		vstart[n] = vstart[n - 1];
	vstart[0] = 0;
	(void)S;
	return CLP_OK;
}

clp_status clp_skip_to_sched(const clp_skip_paths *p, const clp_skip_rules *r, int lps,
			     clp_sched **out)
{
	int S = p->nstages, nh = p->hop_start[p->nmb], nv = nh + 2 * p->nmb;
	int *vstart = NULL, *irp = NULL, *irs = NULL, *group_of = NULL, *buf = NULL;
	visit *vis = NULL;
	lower L = {p, S, NULL};
	clp_status st;

	*out = NULL;
	if (p->nmb < 1 || p->nmb > CLP_SKIP_MAX_MB)
		return clp_error(CLP_ERR_INVALID, "skip: %d micro-batches; a schedule takes 1 to %d "
				 "(their ids go into 10 bits of the message tags)", p->nmb,
				 CLP_SKIP_MAX_MB);
	for (int m = 0; m < p->nmb; m++)
		if (p->origin[m] < 0 || p->origin[m] >= p->nnodes)
			return clp_error(CLP_ERR_INVALID, "skip: mb %d has no origin node", m);
	st = clp_sched_create(&L.s, p->nnodes, S + 1, p->nmb, S + 1);
	if (st != CLP_OK)
		return st;
	stage_map(L.s, S, lps);
	vstart = calloc((size_t)p->nnodes + 1, sizeof(int));
	irp = malloc(((size_t)p->nmb + 1) * sizeof(int));
	irs = malloc((size_t)nv * sizeof(int) + 1);
	vis = malloc((size_t)nv * sizeof(*vis) + 1);
	group_of = malloc(((size_t)S + 1) * sizeof(int));
	buf = malloc((size_t)p->nnodes * sizeof(int));
	if (!vstart || !irp || !irs || !vis || !group_of || !buf) {
		st = clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
		goto out;
	}
	for (int n = 0; n < p->nnodes; n++) {
		L.s->ranks[n].mode = CLP_RANK_DATAFLOW;
		L.s->ranks[n].mem_cap = r ? r->memory : 0;
	}
	st = lower_paths(&L, vis, vstart, irp, irs);
	/* Receives first (all posted at the start anyway), then the loss, then backwards before
	 * forwards or the other way round, as the node's priority says. */
	for (int n = 0; n < p->nnodes && st == CLP_OK; n++) {
		int fwd = p->node_prio[n] == CLP_SKIP_FORWARD_FIRST;
		int order[4] = {SEC_RECV, SEC_HEAD, fwd ? SEC_FWD : SEC_BWD, fwd ? SEC_BWD : SEC_FWD};

		for (int k = 0; k < 4 && st == CLP_OK; k++)
			for (int i = vstart[n]; i < vstart[n + 1] && st == CLP_OK; i++)
				st = emit(&L, &vis[i], order[k]);
	}
	if (st == CLP_OK)
		st = make_groups(&L, group_of, buf);
	if (st == CLP_OK)
		st = end_of_step(&L, group_of);
out:
	free(vstart);
	free(irp);
	free(irs);
	free(vis);
	free(group_of);
	free(buf);
	if (st != CLP_OK) {
		clp_sched_free(L.s);
		return st;
	}
	*out = L.s;
	return CLP_OK;
}

clp_status clp_skip_layout(const clp_skip_paths *p, const clp_cluster *c, clp_layout **out)
{
	clp_layout *l = calloc(1, sizeof(*l));
	clp_status st = CLP_OK;

	*out = NULL;
	if (!l || !(l->ranks = calloc((size_t)p->nnodes, sizeof(*l->ranks)))) {
		free(l);
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	}
	l->nranks = p->nnodes;
	for (int n = 0; n < p->nnodes && st == CLP_OK; n++) {
		clp_layout_rank *rk = &l->ranks[n];

		if (p->node_device[n][0])
			snprintf(rk->device_id, sizeof(rk->device_id), "%s", p->node_device[n]);
		else if (c && n < c->ndevices)
			snprintf(rk->device_id, sizeof(rk->device_id), "%s", c->devices[n].id);
		else
			snprintf(rk->device_id, sizeof(rk->device_id), "dev%d", n);
		rk->device = -1;
		rk->nstages = p->node_stage[n] == 0 ? 2 : 1;
		rk->stages = calloc(2, sizeof(*rk->stages));
		if (!rk->stages) {
			st = clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
			break;
		}
		rk->stages[0].stage = p->node_stage[n];
		rk->stages[1].stage = p->nstages;
	}
	if (st == CLP_OK && c)
		st = clp_layout_resolve(l, c, "skip paths");
	if (st != CLP_OK) {
		clp_layout_free(l);
		return st;
	}
	*out = l;
	return CLP_OK;
}

clp_status clp_skip_from_layout(const clp_layout *l, int nstages, const char *what,
				clp_skip_paths **out)
{
	int S = nstages;

	CLP_TRY(clp_skip_paths_create(out, S, l->nranks, 0));
	for (int r = 0; r < l->nranks; r++) {
		int s = S;

		for (int k = 0; k < l->ranks[r].nstages; k++)
			if (l->ranks[r].stages[k].stage < s)
				s = l->ranks[r].stages[k].stage;
		if (s >= S) {
			clp_skip_paths_free(*out);
			*out = NULL;
			return clp_error(CLP_ERR_INVALID, "%s: rank %d: no stage in [0, %d)", what, r,
					 S);
		}
		(*out)->node_stage[r] = s;
		snprintf((*out)->node_device[r], CLP_NAME_MAX, "%s", l->ranks[r].device_id);
	}
	return CLP_OK;
}

clp_status clp_skip_resolve(const clp_skip_env *e, const clp_skip_paths *p, int *node_dev)
{
	const clp_cluster *c = e->cluster;

	for (int n = 0; n < p->nnodes; n++) {
		int d = n;

		if (p->node_device[n][0]) {
			if (!c)
				return clp_error(CLP_ERR_INVALID, "skip: node %d names device \"%s\" but "
						 "no cluster is given", n, p->node_device[n]);
			d = clp_cluster_find_device(c, p->node_device[n]);
			if (d < 0)
				return clp_error(CLP_ERR_NOT_FOUND, "skip: node %d: device \"%s\" is not "
						 "in the cluster", n, p->node_device[n]);
		} else if (c && n >= c->ndevices) {
			return clp_error(CLP_ERR_INVALID, "skip: node %d has no device: the cluster "
					 "has %d", n, c->ndevices);
		}
		for (int k = 0; k < n; k++)
			if (node_dev[k] == d)
				return clp_error(CLP_ERR_INVALID, "skip: nodes %d and %d are on one "
						 "device (%d)", k, n, d);
		node_dev[n] = d;
	}
	return CLP_OK;
}

/* The IR's cost table: the model stages and the head (a zero head when the table has S). */
clp_status clp_skip_costs(const clp_costs *c, int S, clp_costs **out)
{
	clp_costs *x;

	*out = NULL;
	if (!c)
		return clp_error(CLP_ERR_INVALID, "skip: a cost table is required");
	if (c->nstages != S && c->nstages != S + 1)
		return clp_error(CLP_ERR_INVALID, "skip: the cost table%s%s has %d stages; SkipPipe "
				 "needs one per model stage (%d) plus, optionally, the head and loss "
				 "of stage 0 as the last", c->file[0] ? " " : "", c->file, c->nstages,
				 S);
	CLP_TRY(clp_costs_create(S + 1, &x));
	memcpy(x->stages, c->stages, (size_t)c->nstages * sizeof(*x->stages));
	if (c->nstages == S)
		x->stages[S].nlayers = 1;
	snprintf(x->device_kind, sizeof(x->device_kind), "%s", c->device_kind);
	snprintf(x->source, sizeof(x->source), "%s", c->source);
	x->micro_batch_size = c->micro_batch_size;
	if (c->nkinds) {
		x->kinds = malloc((size_t)c->nkinds * sizeof(*x->kinds));
		x->kind_t = malloc((size_t)c->nkinds * (size_t)(S + 1) * CLP_COST_NTIMES *
				   sizeof(double));
		if (!x->kinds || !x->kind_t) {
			clp_costs_free(x);
			return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
		}
		x->nkinds = c->nkinds;
		memcpy(x->kinds, c->kinds, (size_t)c->nkinds * sizeof(*x->kinds));
		for (int k = 0; k < c->nkinds; k++)
			for (int s = 0; s <= S; s++)
				for (int t = 0; t < CLP_COST_NTIMES; t++)
					x->kind_t[((size_t)k * (S + 1) + s) * CLP_COST_NTIMES + t] =
						s < c->nstages ? c->kind_t[((size_t)k * c->nstages + s) *
									   CLP_COST_NTIMES + t]
							       : NAN;
	}
	*out = x;
	return CLP_OK;
}

void skip_ctx_free(skip_ctx *c)
{
	free(c->node_dev);
	free(c->st_first);
	free(c->st_nodes);
	free(c->lat);
	free(c->inv_bw);
	free(c->work);
	free(c->fwd);
	free(c->bwd);
	free(c->head);
	free(c->out_bytes);
	clp_costs_free(c->ir_costs);
	clp_layout_free(c->layout);
	memset(c, 0, sizeof(*c));
}

/* Speeds relative to the cost table's device kind, as the simulator counts them. */
static double rel_speed(const clp_cluster *cl, const clp_costs *k, int d)
{
	double ref = 1;

	if (!cl)
		return 1;
	for (int i = 0; i < cl->ndevices; i++)
		if (!strcmp(cl->devices[i].kind, k->device_kind)) {
			ref = cl->devices[i].speed;
			break;
		}
	return cl->devices[d].speed / ref;
}

static void node_costs(skip_ctx *c)
{
	const clp_costs *k = c->ir_costs;
	const clp_cluster *cl = c->env->cluster;

	for (int n = 0; n < c->nnodes; n++) {
		int d = c->node_dev[n], s = c->node_stage[n];
		int ki = cl ? clp_costs_kind_index(k, cl->devices[d].kind) : -1;
		double sp = rel_speed(cl, k, d), f = clp_costs_time(k, s, CLP_COST_FWD, ki, sp);
		double b = clp_costs_time(k, s, CLP_COST_BWD, ki, sp);

		c->fwd[n] = f + (f > 0) * c->env->gap_s;
		c->bwd[n] = b + (b > 0) * c->env->gap_s;
		c->work[n] = c->fwd[n] + c->bwd[n];
		f = clp_costs_time(k, c->S, CLP_COST_FWD, ki, sp);
		b = clp_costs_time(k, c->S, CLP_COST_BWD, ki, sp);
		c->head[n] = f + b + (f > 0) * c->env->gap_s + (b > 0) * c->env->gap_s;
	}
}

clp_status skip_ctx_init(skip_ctx *c, const clp_skip_env *e, const clp_skip_paths *p)
{
	int N = p->nnodes, S = p->nstages;
	size_t nn = (size_t)N * (size_t)N;
	clp_status st;

	memset(c, 0, sizeof(*c));
	c->env = e;
	c->S = S;
	c->H = e->rules.path_len - 1;
	c->nnodes = N;
	c->node_stage = p->node_stage;
	c->node_dev = malloc((size_t)N * sizeof(int));
	c->st_first = calloc((size_t)S + 2, sizeof(int));
	c->st_nodes = malloc((size_t)N * sizeof(int));
	c->lat = malloc(nn * sizeof(double));
	c->inv_bw = malloc(nn * sizeof(double));
	c->work = malloc((size_t)N * sizeof(double));
	c->fwd = malloc((size_t)N * sizeof(double));
	c->bwd = malloc((size_t)N * sizeof(double));
	c->head = malloc((size_t)N * sizeof(double));
	c->out_bytes = malloc(((size_t)S + 1) * sizeof(double));
	if (!c->node_dev || !c->st_first || !c->st_nodes || !c->lat || !c->inv_bw || !c->work ||
	    !c->fwd || !c->bwd || !c->head || !c->out_bytes) {
		skip_ctx_free(c);
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory (%d nodes)", N);
	}
	st = clp_skip_resolve(e, p, c->node_dev);
	if (st == CLP_OK)
		st = clp_skip_costs(e->costs, S, &c->ir_costs);
	if (st == CLP_OK && e->cluster)
		st = clp_skip_layout(p, e->cluster, &c->layout);
	if (st != CLP_OK) {
		skip_ctx_free(c);
		return st;
	}
	for (int n = 0; n < N; n++)
		if (p->node_stage[n] < 0 || p->node_stage[n] >= S) {
			skip_ctx_free(c);
			return clp_error(CLP_ERR_INVALID, "skip: node %d serves stage %d, out of range "
					 "[0, %d)", n, p->node_stage[n], S);
		}
	for (int n = 0; n < N; n++)
		c->st_first[p->node_stage[n] + 1]++;
	for (int s = 0; s < S; s++)
		c->st_first[s + 1] += c->st_first[s];
	/* Counting sort: st_first[s] is the end of stage s - 1's nodes, then moved back. */
	for (int n = 0; n < N; n++)
		c->st_nodes[c->st_first[p->node_stage[n]]++] = n;
	for (int s = S; s > 0; s--)
		c->st_first[s] = c->st_first[s - 1];
	c->st_first[0] = 0;
	for (int s = 0; s <= S; s++)
		c->out_bytes[s] = (double)c->ir_costs->stages[s].out_bytes;
	for (int u = 0; u < N; u++)
		for (int v = 0; v < N; v++) {
			clp_link_spec l = {0, INFINITY};
			size_t k = (size_t)u * N + v;

			if (u != v && e->cluster)
				l = clp_cluster_route(e->cluster, c->node_dev[u], c->node_dev[v]).spec;
			c->lat[k] = l.latency_s + (u != v ? e->hop_s : 0);
			c->inv_bw[k] = isinf(l.bandwidth_Bps) || l.bandwidth_Bps <= 0 ? 0
										   : 1.0 / l.bandwidth_Bps;
		}
	node_costs(c);
	return CLP_OK;
}

/* Per micro-batch, the end of its last backward (stage 0, on its origin). */
static void mb_ends(const clp_trace *t, int nmb, double *end)
{
	for (int m = 0; m < nmb; m++)
		end[m] = 0;
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *ev = &t->ev[i];

		if (ev->kind == CLP_OP_BWD && ev->stage == 0 && ev->mb >= 0 && ev->mb < nmb &&
		    ev->t1 > end[ev->mb])
			end[ev->mb] = ev->t1;
	}
}

static clp_status run(const clp_skip_env *e, const clp_costs *costs, const clp_layout *layout,
		      const clp_skip_paths *p, int full, clp_sim_result *r)
{
	clp_sched *s = NULL;
	clp_sim_opts o;
	clp_status st;

	CLP_TRY(clp_skip_to_sched(p, &e->rules, 0, &s));
	clp_sim_opts_default(&o);
	o.costs = costs;
	o.cluster = e->cluster;
	o.layout = e->cluster ? layout : NULL;
	o.hop_s = e->hop_s;
	o.task_gap_s = e->gap_s;
	o.shared_cores = e->shared_cores;
	o.trace_limit = full ? SIZE_MAX : 0;
	st = clp_sim_run(s, &o, r);
	clp_sched_free(s);
	return st;
}

clp_status skip_eval(const skip_ctx *c, const clp_skip_paths *p, double *iter_s, double *mb_end)
{
	clp_sim_result r;

	CLP_TRY(run(c->env, c->ir_costs, c->layout, p, mb_end != NULL, &r));
	*iter_s = r.step_s;
	if (mb_end)
		mb_ends(&r.trace, p->nmb, mb_end);
	clp_sim_result_free(&r);
	return CLP_OK;
}

/* Most micro-batches held at once per node: from each one's first forward there to its last
 * backward there, as the simulator's memory cap counts them. */
typedef struct tick {
	double t;
	int d; /* -1 an end, +1 a start: ends sort first, the simulator retires a backward
		* before it picks the next op */
} tick;

static int tick_cmp(const void *a, const void *b)
{
	const tick *x = a, *y = b;

	return x->t < y->t ? -1 : x->t > y->t ? 1 : x->d - y->d;
}

static clp_status peaks(const clp_trace *t, const clp_skip_paths *p, int *peak)
{
	size_t n = (size_t)p->nnodes * (size_t)p->nmb;
	double *first = malloc(n * sizeof(double)), *last = malloc(n * sizeof(double));
	tick *tk = malloc(2 * (size_t)p->nmb * sizeof(tick) + 1);

	if (!first || !last || !tk) {
		free(first);
		free(last);
		free(tk);
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
	}
	for (size_t i = 0; i < n; i++)
		first[i] = last[i] = -1;
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *e = &t->ev[i];
		size_t k = (size_t)e->rank * (size_t)p->nmb + (size_t)e->mb;

		if (e->queue != CLP_TQ_COMPUTE || e->mb < 0 || e->mb >= p->nmb || e->rank < 0 ||
		    e->rank >= p->nnodes)
			continue;
		if (e->kind == CLP_OP_FWD && (first[k] < 0 || e->t0 < first[k]))
			first[k] = e->t0;
		if (e->kind == CLP_OP_BWD && e->t1 > last[k])
			last[k] = e->t1;
	}
	for (int nd = 0; nd < p->nnodes; nd++) {
		int k = 0, cur = 0, best = 0;

		for (int m = 0; m < p->nmb; m++) {
			size_t x = (size_t)nd * (size_t)p->nmb + (size_t)m;

			if (first[x] < 0)
				continue;
			tk[k++] = (tick){first[x], 1};
			tk[k++] = (tick){last[x], -1};
		}
		qsort(tk, (size_t)k, sizeof(*tk), tick_cmp);
		for (int i = 0; i < k; i++) {
			cur += tk[i].d;
			if (cur > best)
				best = cur;
		}
		peak[nd] = best;
	}
	free(first);
	free(last);
	free(tk);
	return CLP_OK;
}

clp_status clp_skip_simulate(const clp_skip_env *e, const clp_skip_paths *p, int detail,
			     const char *trace_path, clp_skip_result *res)
{
	skip_ctx c;
	clp_sim_result r;
	clp_status st;

	memset(res, 0, sizeof(*res));
	CLP_TRY(skip_ctx_init(&c, e, p));
	st = run(e, c.ir_costs, c.layout, p, detail || trace_path, &r);
	skip_ctx_free(&c);
	if (st != CLP_OK)
		return st;
	res->iter_s = r.step_s;
	if (trace_path) {
		snprintf(r.trace.title, sizeof(r.trace.title), "skippipe: %d nodes, %d micro-batches "
			 "(simulated)", p->nnodes, p->nmb);
		st = clp_trace_write_chrome(&r.trace, trace_path);
	}
	if (st == CLP_OK && detail) {
		res->mb_end_s = malloc(((size_t)p->nmb + 1) * sizeof(double));
		res->node_peak_mb = malloc((size_t)p->nnodes * sizeof(int));
		if (!res->mb_end_s || !res->node_peak_mb)
			st = clp_error(CLP_ERR_NOMEM, "skip: out of host memory");
		if (st == CLP_OK) {
			mb_ends(&r.trace, p->nmb, res->mb_end_s);
			st = peaks(&r.trace, p, res->node_peak_mb);
		}
	}
	clp_sim_result_free(&r);
	if (st != CLP_OK)
		clp_skip_result_free(res);
	return st;
}

void clp_skip_result_free(clp_skip_result *r)
{
	free(r->mb_end_s);
	free(r->node_peak_mb);
	memset(r, 0, sizeof(*r));
}
