/* SkipPipe training (pipeline.schedule = "skippipe"; docs/SKIPPIPE.md, "Training with paths"):
 * the path set (skip.paths, or the path scheduler's on unit costs from skip.stage_nodes and the
 * rules), its schedule with the model's stage map, every micro-batch's loss scale, and the
 * evaluation of the whole model: its stages live on different nodes, so rank 0 gathers one copy
 * of each into a single stage and runs the validation batches through it. */
#include "engine/train/session_internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/pass/validate.h"
#include "engine/skip/skip.h"

/* Tags of the gather (below the clock ping-pong's 32000, above any micro-batch tag in flight:
 * the step's messages are all done by then). */
#define GATHER_TAG 30000

/* p's origins, the rules checked on it, and the scheduler on unit costs (*costs, the caller's
 * to free). */
static clp_status schedule_unit(clp_session *s, clp_skip_paths *p, const clp_skip_rules *r,
				clp_costs **costs)
{
	const clp_train_config *c = &s->cfg;
	clp_skip_env env;
	clp_skip_opts o;
	clp_skip_report rep;

	CLP_TRY(clp_skip_set_origins(p, (int)c->train.micro_batches));
	CLP_TRY(clp_skip_check_config(r, p));
	CLP_TRY(clp_costs_uniform(p->nstages, 1.0, 2.0, -1.0, costs));
	memset(&env, 0, sizeof(env));
	env.costs = *costs;
	env.rules = *r;
	clp_skip_opts_default(&o);
	o.seed = (uint64_t)c->skip.seed;
	o.iterations = (int)c->skip.iterations;
	return clp_skip_schedule(&env, p, &o, &rep);
}

/* The path scheduler on unit costs (every stage's forward 1, backward 2, free links): balanced
 * paths that follow the rules; the same on every rank (deterministic move counts). */
static clp_status make_paths(clp_session *s, clp_skip_paths **out, clp_skip_rules *r)
{
	const clp_train_config *c = &s->cfg;
	const clp_cfg_ints *sn = &c->skip.stage_nodes;
	int S = sn->n, nodes = 0;
	clp_costs *costs = NULL;
	clp_skip_paths *p = NULL;
	clp_status st;

	*out = NULL;
	if (S < 2)
		return clp_error(CLP_ERR_INVALID, "pipeline.schedule = \"skippipe\" needs skip.paths "
				 "(a path set file) or skip.stage_nodes (nodes per stage, 2 stages or "
				 "more)");
	for (int k = 0; k < S; k++) {
		if (sn->v[k] < 1)
			return clp_error(CLP_ERR_INVALID, "skip.stage_nodes[%d] = %ld: every stage needs "
					 "a node", k, sn->v[k]);
		nodes += (int)sn->v[k];
	}
	r->nstages = S;
	if (r->path_len == 0)
		r->path_len = S;
	CLP_TRY(clp_skip_paths_create(&p, S, nodes, 0));
	for (int n = 0, k = 0, left = (int)sn->v[0]; n < nodes; n++, left--) {
		while (left == 0)
			left = (int)sn->v[++k];
		p->node_stage[n] = k;
	}
	st = schedule_unit(s, p, r, &costs);
	clp_costs_free(costs);
	if (st != CLP_OK) {
		clp_skip_paths_free(p);
		return clp_error_context(st, "skippipe paths from skip.stage_nodes: ");
	}
	*out = p;
	return CLP_OK;
}

/* Every rank must run the same path set (a scheduler run differing between hosts would pair the
 * wrong messages): compare a hash of it. */
static clp_status same_paths(clp_session *s, const clp_skip_paths *p)
{
	int n = clp_comm_size(s->comm);
	uint64_t h = 1469598103934665603ull, *all;
	clp_status st;

	for (int m = 0; m <= p->nmb; m++)
		h = (h ^ (uint64_t)(m < p->nmb ? p->origin[m] : -1)) * 1099511628211ull;
	for (int i = 0; i < p->hop_start[p->nmb]; i++)
		h = (h ^ (uint64_t)(p->hops[i].stage * 65536 + p->hops[i].node)) * 1099511628211ull;
	for (int i = 0; i < p->nnodes; i++)
		h = (h ^ (uint64_t)(p->node_stage[i] * 2 + p->node_prio[i])) * 1099511628211ull;
	if (n == 1)
		return CLP_OK;
	if (!(all = malloc((size_t)n * sizeof(*all))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	st = clp_comm_allgather(s->comm, &h, sizeof(h), all, "skippipe path hash");
	for (int r = 0; st == CLP_OK && r < n; r++)
		if (all[r] != all[0])
			st = clp_error(CLP_ERR_STATE, "skippipe: rank %d made other paths than rank 0 "
				       "(give every rank the same skip.paths file)", r);
	free(all);
	return st;
}

/* The model's layers over the S stages: pipeline.layers, or as even as possible (earlier stages
 * take the remainder, as sample.skip_stages counts them); the head stage S holds none. */
static clp_status stage_map(clp_session *s, clp_sched *sc, int S)
{
	const clp_cfg_ints *lay = &s->cfg.pipeline.layers;
	int L = s->m.n_layer, sum = 0;

	if (lay->n && lay->n != S)
		return clp_error(CLP_ERR_INVALID, "pipeline.layers has %d entries; the path set has "
				 "%d stages", lay->n, S);
	for (int k = 0; k < S; k++) {
		int n = lay->n ? (int)lay->v[k] : L / S + (k < L % S);

		if (n < 1)
			return clp_error(CLP_ERR_INVALID, "skippipe: stage %d would hold no layer "
					 "(model.n_layer = %d over %d stages); every stage needs one",
					 k, L, S);
		sc->stages[k].first_layer = sum;
		sc->stages[k].nlayers = n;
		sum += n;
	}
	if (sum != L)
		return clp_error(CLP_ERR_INVALID, "pipeline.layers adds up to %d layers, the model has "
				 "model.n_layer = %d", sum, L);
	sc->stages[S].first_layer = L;
	sc->stages[S].nlayers = 0;
	sc->nlayers = L;
	return CLP_OK;
}

clp_status sess_skip_schedule(clp_session *s)
{
	clp_train_config *c = &s->cfg;
	clp_skip_paths *p = NULL;
	clp_skip_rules r;
	clp_status st;

	if (!s->optim->skippipe)
		return clp_error(CLP_ERR_UNSUPPORTED, "optim.name = \"%s\" is not run with "
				 "pipeline.schedule = \"skippipe\" yet", c->optim.name);
	if (c->pipeline.pipefisher)
		return clp_error(CLP_ERR_UNSUPPORTED, "pipeline.pipefisher places %s's periodic work "
				 "in the bubbles of ranks that run their lists in order; SkipPipe's "
				 "ranks run theirs in dataflow order (the pass refuses them): turn "
				 "pipeline.pipefisher off or use another pipeline.schedule",
				 s->optim->label);
	if (c->pipeline.replicas != 1 || c->pipeline.chunks != 1)
		return clp_error(CLP_ERR_INVALID, "pipeline.schedule = \"skippipe\": the path set "
				 "gives the nodes and their stages; leave pipeline.replicas and "
				 "pipeline.chunks at 1");
	clp_skip_rules_default(&r, 0);
	r.path_len = (int)c->skip.path_len;
	r.max_jump = (int)c->skip.max_jump;
	r.max_swaps = (int)c->skip.max_swaps;
	r.memory = (int)c->skip.memory;
	if (c->skip.paths[0]) {
		st = clp_skip_load(c->skip.paths, &p, &r);
		if (st == CLP_OK) {
			r.nstages = p->nstages;
			r.path_len = r.path_len ? r.path_len : p->nstages;
		}
	} else {
		st = make_paths(s, &p, &r);
	}
	if (st == CLP_OK)
		st = clp_skip_validate(&r, p);
	if (st == CLP_OK && p->nnodes != clp_comm_size(s->comm))
		st = clp_error(CLP_ERR_INVALID, "skippipe: the path set has %d nodes (rank i is node "
			       "i); this job has %d ranks (mpirun -np %d)", p->nnodes,
			       clp_comm_size(s->comm), p->nnodes);
	if (st == CLP_OK)
		st = same_paths(s, p);
	if (st == CLP_OK)
		st = clp_skip_to_sched(p, &r, 1, &s->sched);
	if (st == CLP_OK)
		st = stage_map(s, s->sched, p->nstages);
	if (st == CLP_OK)
		st = clp_sched_validate(s->sched, 1);
	if (st == CLP_OK) {
		s->M = p->nmb;
		s->R = 1;
		s->mb_div = malloc((size_t)p->nmb * sizeof(int));
		s->inv_mb = calloc((size_t)p->nmb, sizeof(float));
		if (!s->mb_div || !s->inv_mb)
			st = clp_error(CLP_ERR_NOMEM, "out of host memory");
	}
	for (int m = 0; st == CLP_OK && m < p->nmb; m++)
		s->mb_div[m] = clp_skip_mb_of_origin(p, p->origin[m]);
	if (st == CLP_OK) {
		/* the stored config tells eval --sample.skip_stages how the layers were split */
		c->pipeline.stages = p->nstages;
		if (sess_rank(s) == 0)
			fprintf(s->out, "skippipe: %d nodes, %d stages, %d micro-batches per step, "
				"paths of %d stages (stage 0 once), memory cap %d%s%s\n", p->nnodes,
				p->nstages, p->nmb, r.path_len, r.memory,
				c->skip.paths[0] ? ", paths from " : "", c->skip.paths);
	}
	clp_skip_paths_free(p);
	if (st != CLP_OK)
		return clp_error_context(st, "pipeline.schedule = \"skippipe\": ");
	return CLP_OK;
}

void sess_skip_scales(clp_session *s)
{
	for (int m = 0; m < s->M; m++) {
		const int32_t *tg = s->tg + (size_t)m * s->N;
		size_t valid = 0;

		for (size_t i = 0; i < s->N; i++)
			valid += tg[i] >= 0;
		s->inv_mb[m] = valid ? 1.0f / ((float)valid * (float)s->mb_div[m]) : 0.0f;
	}
}

/* The lowest rank holding IR stage k: the one that saves it and sends it to the gather. */
static int owner_of(const clp_sched *sc, int k)
{
	for (int r = 0; r < sc->nranks; r++)
		for (int i = 0; i < sc->ranks[r].nops; i++) {
			const clp_op *op = &sc->ranks[r].ops[i];

			if ((op->kind == CLP_OP_FWD || op->kind == CLP_OP_BWD ||
			     op->kind == CLP_OP_OPT_STEP) && op->stage == k)
				return r;
		}
	return -1;
}

/* Tensors of a stage that are sent: all but the head's copy of the tied embedding. */
static int sent(const clp_tensor_desc *t)
{
	return !(t->role == CLP_R_TOK_EMB && t->block != 0);
}

/* Owner: pack local stage k's tensors. Rank 0: put a packed stage into the whole model. */
static clp_status pack(clp_session *s, int k, float **buf, size_t *n)
{
	for (int i = 0; i < clp_exec_nstages(s->ex); i++) {
		clp_stage *st = clp_exec_stage(s->ex, i, NULL);
		const clp_param_table *t = clp_stage_table(st);
		size_t off = 0;

		if (clp_exec_stage_id(s->ex, i) != k)
			continue;
		*n = 0;
		for (int j = 0; j < t->ntensors; j++)
			*n += sent(&t->tensors[j]) ? t->tensors[j].numel : 0;
		if (!(*buf = malloc((*n ? *n : 1) * sizeof(float))))
			return clp_error(CLP_ERR_NOMEM, "out of host memory gathering the model");
		for (int j = 0; j < t->ntensors; j++)
			if (sent(&t->tensors[j])) {
				CLP_TRY(clp_stage_read(st, CLP_ST_PARAM, j, *buf + off));
				off += t->tensors[j].numel;
			}
		return CLP_OK;
	}
	return clp_error(CLP_ERR_STATE, "rank %d does not hold stage %d", sess_rank(s), k);
}

static clp_status unpack(clp_session *s, const clp_param_table *t, const float *buf)
{
	const clp_param_table *whole = clp_stage_table(s->eval_st);
	size_t off = 0;

	for (int j = 0; j < t->ntensors; j++) {
		int w;

		if (!sent(&t->tensors[j]))
			continue;
		w = clp_param_find(whole, t->tensors[j].name);
		if (w < 0)
			return clp_error(CLP_ERR_STATE, "gathering the model: %s is not in it",
					 t->tensors[j].name);
		CLP_TRY(clp_stage_write(s->eval_st, CLP_ST_PARAM, w, buf + off));
		off += t->tensors[j].numel;
	}
	return CLP_OK;
}

/* Stage k's tensors from its owner o to rank 0: the owner packs them (and, not rank 0, sends
 * them); rank 0 receives them (unless it owns the stage) and puts them into the whole model.
 * *t, *buf and *q are the caller's to free (or cancel). */
static clp_status gather_steps(clp_session *s, int k, int o, const char *label,
			       clp_param_table *t, float **buf, clp_comm_req **q)
{
	const clp_stage_info *si = &s->sched->stages[k];
	int me = sess_rank(s), first, last;
	size_t n = 0;

	if (me == o)
		CLP_TRY(pack(s, k, buf, &n));
	if (me == o && me != 0) {
		CLP_TRY(clp_comm_isend(s->comm, *buf, n * sizeof(float), 0, GATHER_TAG + k, label, q));
		CLP_TRY(clp_comm_wait(s->comm, q, 0));
	}
	if (me != 0)
		return CLP_OK;
	clp_stage_info_blocks(si, s->m.n_layer, &first, &last);
	CLP_TRY(clp_param_table_build(&s->m, first, last, t));
	if (o != 0) {
		for (int j = 0; j < t->ntensors; j++)
			n += sent(&t->tensors[j]) ? t->tensors[j].numel : 0;
		if (!(*buf = malloc((n ? n : 1) * sizeof(float))))
			return clp_error(CLP_ERR_NOMEM, "out of host memory gathering the model");
		CLP_TRY(clp_comm_irecv(s->comm, *buf, n * sizeof(float), o, GATHER_TAG + k, label,
				       q));
		CLP_TRY(clp_comm_wait(s->comm, q, 0));
	}
	return unpack(s, t, *buf);
}

/* Stage k of the schedule onto rank 0. */
static clp_status gather_stage(clp_session *s, int k)
{
	int me = sess_rank(s), o = owner_of(s->sched, k);
	clp_param_table t = {0};
	clp_comm_req *q = NULL;
	float *buf = NULL;
	char label[64];
	clp_status st;

	if (o < 0 || (me != o && me != 0))
		return CLP_OK;
	snprintf(label, sizeof(label), "parameters of stage %d for evaluation", k);
	st = gather_steps(s, k, o, label, &t, &buf, &q);
	if (q)
		clp_comm_cancel(s->comm, &q);
	clp_param_table_free(&t);
	free(buf);
	return st;
}

clp_status sess_skip_eval_begin(clp_session *s)
{
	if (sess_rank(s) == 0 && !s->eval_st) {
		/* forward only: weights, no gradients or moments */
		clp_stage_opts so = {.B = s->B, .T = s->T, .slots = 1, .precision = s->prec};
		unsigned char *all = NULL;
		clp_status st = sess_all_frozen(&s->m, &all);

		so.frozen = all;
		if (st == CLP_OK)
			st = clp_stage_create(&s->eval_st, s->ctx, &s->m, 0,
					      clp_model_nblocks(&s->m) - 1, &so);
		free(all);
		CLP_TRY(st);
	}
	for (int k = 0; k < s->sched->nstages; k++)
		CLP_TRY(gather_stage(s, k));
	return CLP_OK;
}

clp_status sess_skip_eval_forward(clp_session *s, float inv_count, double *loss)
{
	*loss = 0;
	if (sess_rank(s) != 0)
		return CLP_OK;
	for (int m = 0; m < s->M; m++) {
		size_t o = (size_t)m * s->N;
		clp_stage_mb mb = {0, 0, (uint32_t)m, (uint64_t)s->cfg.train.seed, s->in + o,
				   s->types + o, s->tg + o, 0};
		float l = 0;
		clp_buf b;

		CLP_TRY(clp_stage_forward(s->eval_st, &mb, inv_count));
		b = clp_stage_loss(s->eval_st, 0);
		CLP_TRY(clp_cl_read(s->ctx, b.mem, b.off * sizeof(float), sizeof(float), &l));
		*loss += l;
	}
	return CLP_OK;
}

clp_status sess_skip_eval_end(clp_session *s, double *loss)
{
	if (clp_comm_size(s->comm) == 1)
		return CLP_OK;
	return clp_comm_allreduce_sum(s->comm, CLP_COMM_F64, loss, 1, 1, "validation loss");
}

void sess_skip_free(clp_session *s)
{
	clp_stage_free(s->eval_st);
	free(s->mb_div);
	free(s->inv_mb);
	s->eval_st = NULL;
	s->mb_div = NULL;
	s->inv_mb = NULL;
}
