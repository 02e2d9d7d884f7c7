/* Executor setup: the stages this rank holds, their slots, host staging for messages, and
 * ownership of tensors for checkpoints and the gradient norm. */
#include "engine/exec/exec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/ops.h"

struct lstage *exec_find(clp_exec *e, int stage, int pipe)
{
	for (int i = 0; i < e->nls; i++)
		if (e->ls[i].stage == stage && e->ls[i].pipe == pipe)
			return &e->ls[i];
	return NULL;
}

struct lstage *exec_find_stage(clp_exec *e, int stage)
{
	for (int i = 0; i < e->nls; i++)
		if (e->ls[i].stage == stage)
			return &e->ls[i];
	return NULL;
}

/* Whether the list runs the stage's backward in halves (zero-bubble B and W). */
static int has_split(const clp_rank_prog *p, int stage, int pipe)
{
	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].stage == stage && p->ops[i].pipe == pipe && p->ops[i].kind == CLP_OP_BWD_B)
			return 1;
	return 0;
}

/* The most micro-batches a stage holds at once in this rank's list; a dataflow rank runs its
 * list in any order, so the cap or, without one, every micro-batch of the stage. */
static int slots_needed(const clp_rank_prog *p, int stage, int pipe)
{
	int live = 0, peak = 1, split = 0;

	if (p->mode == CLP_RANK_DATAFLOW) {
		int n = 0;

		for (int i = 0; i < p->nops; i++)
			n += p->ops[i].kind == CLP_OP_FWD && p->ops[i].stage == stage &&
			     p->ops[i].pipe == pipe;
		n = p->mem_cap > 0 && p->mem_cap < n ? p->mem_cap : n;
		return n > 0 ? n : 1;
	}

	for (int i = 0; i < p->nops; i++)
		if (p->ops[i].stage == stage && p->ops[i].pipe == pipe && p->ops[i].kind == CLP_OP_BWD_B)
			split = 1;
	for (int i = 0; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];

		if (op->stage != stage || op->pipe != pipe)
			continue;
		if (op->kind == CLP_OP_FWD && ++live > peak)
			peak = live;
		if ((op->kind == CLP_OP_BWD && !split) || op->kind == CLP_OP_BWD_W)
			live--;
	}
	return peak;
}

static clp_status add_stage(clp_exec *e, int stage, int pipe)
{
	const clp_stage_info *si = &e->s->stages[stage];
	int first, last;
	struct lstage *l = &e->ls[e->nls];
	clp_stage_opts o = {
		.B = e->B,
		.T = e->T,
		.slots = slots_needed(&e->s->ranks[e->rank], stage, pipe),
		.split = has_split(&e->s->ranks[e->rank], stage, pipe),
		.recompute = e->recompute,
		.precision = e->prec,
		.frozen = e->frozen,
	};
	const clp_param_table *t;
	clp_status st;

	clp_stage_info_blocks(si, e->m.n_layer, &first, &last);
	memset(l, 0, sizeof(*l));
	l->stage = stage;
	l->pipe = pipe;
	l->nslots = o.slots;
	l->owner = e->replica == 0 && pipe == 0;
	CLP_TRY(clp_stage_create(&l->st, e->ctx, &e->m, first, last, &o));
	e->nls++;
	t = clp_stage_table(l->st);
	l->slot_mb = malloc((size_t)o.slots * sizeof(int));
	l->gindex = malloc((size_t)t->ntensors * sizeof(int));
	l->owns = malloc((size_t)t->ntensors * sizeof(int));
	if (!l->slot_mb || !l->gindex || !l->owns)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the executor");
	for (int i = 0; i < o.slots; i++)
		l->slot_mb[i] = -1;
	for (int i = 0; i < t->ntensors; i++) {
		l->gindex[i] = clp_param_find(&e->full, t->tensors[i].name);
		/* the head's copy of the tied embedding is the embedding holder's to count */
		l->owns[i] = l->owner && !exec_tied_copy(&t->tensors[i]);
	}
	st = clp_cl_buffer(e->ctx, (size_t)t->ntensors * 4 * sizeof(float), "norm statistics",
			   &l->stats_mem);
	l->stats = clp_buf_at(l->stats_mem, 0);
	return st;
}

/* The cycle step each op runs in (a K-step cycle runs one step per clp_exec_step): its op.step,
 * except the factor items, whose op.step names the step they record (the cycle's first): they
 * run with the op they precede (the PipeFisher pass puts an item before the op ending the gap it
 * fills), or in the last step at the list's end. The steps must not go back along the list. */
static clp_status run_steps(clp_exec *e, const clp_sched *s, const clp_rank_prog *p)
{
	int cur = s->nsteps - 1;

	if (!(e->run_step = malloc(((size_t)p->nops + 1) * sizeof(int))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the executor");
	for (int i = p->nops - 1; i >= 0; i--) {
		const clp_op *op = &p->ops[i];

		if (op->kind != CLP_OP_KFAC_CURV_A && op->kind != CLP_OP_KFAC_CURV_B)
			cur = op->step;
		if (cur >= s->nsteps)
			return clp_error(CLP_ERR_INVALID, "rank %d: op %d runs in step %d of a %d-step "
					 "cycle", e->rank, i, cur, s->nsteps);
		if (i + 1 < p->nops && cur > e->run_step[i + 1])
			return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: op %d (cycle step %d) comes after "
					 "op %d (step %d): the executor runs a cycle step by step",
					 e->rank, i + 1, e->run_step[i + 1], i, cur);
		e->run_step[i] = cur;
	}
	return CLP_OK;
}

static clp_status check(const clp_comm *comm, const clp_sched *s, const clp_model_config *m)
{
	int layers = 0;

	if (s->nranks != clp_comm_size(comm))
		return clp_error(CLP_ERR_INVALID, "the schedule has %d ranks but the job has %d "
				 "(mpirun -np %d)", s->nranks, clp_comm_size(comm), s->nranks);
	for (int i = 0; i < s->nstages; i++)
		layers += s->stages[i].nlayers;
	if (layers != m->n_layer)
		return clp_error(CLP_ERR_INVALID, "the schedule's stages hold %d layers, the model has "
				 "model.n_layer = %d", layers, m->n_layer);
	return CLP_OK;
}

static int holds_stage(const clp_rank_prog *p, const clp_op *op)
{
	return op->kind == CLP_OP_FWD || op->kind == CLP_OP_BWD ||
	       (op->kind == CLP_OP_OPT_STEP && p->mode == CLP_RANK_DATAFLOW);
}

int clp_exec_rank_stages(const clp_sched *s, int rank, clp_exec_stage_need *out, int max)
{
	const clp_rank_prog *p = &s->ranks[rank];
	int n = 0;

	for (int i = 0; i < p->nops && n < max; i++) {
		const clp_op *op = &p->ops[i];
		int seen = 0;

		for (int k = 0; k < n && !seen; k++)
			seen = out[k].stage == op->stage && out[k].pipe == op->pipe;
		if (!holds_stage(p, op) || seen)
			continue;
		out[n].stage = op->stage;
		out[n].pipe = op->pipe;
		out[n].slots = slots_needed(p, op->stage, op->pipe);
		out[n].split = has_split(p, op->stage, op->pipe);
		n++;
	}
	return n;
}

/* Staging buffers: receives, and producers whose output a send or a local op consumes. */
static clp_status staging(clp_exec *e, const clp_rank_prog *p)
{
	size_t bytes = e->N * e->C * clp_dtype_size(e->prec); /* activations and gradients */

	for (int i = 0; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];
		int64_t in = e->ix.input[e->ix.off[e->rank] + i];

		if (clp_op_is_recv(op->kind)) {
			e->os[i].bytes = bytes;
		} else if (in >= 0 && clp_sched_index_rank(&e->ix, in) == e->rank &&
			   (clp_op_is_send(op->kind) || op->kind == CLP_OP_FWD ||
			    clp_op_is_bwd_input(op->kind))) {
			const clp_op *src = clp_sched_index_op(e->s, &e->ix, in);

			if (clp_op_is_compute(src->kind)) {
				int pi = (int)(in - e->ix.off[e->rank]);

				e->os[pi].needed = 1;
				e->os[pi].bytes = bytes;
			}
		}
	}
	for (int i = 0; i < p->nops; i++)
		if (e->os[i].bytes && !(e->os[i].buf = malloc(e->os[i].bytes)))
			return clp_error(CLP_ERR_NOMEM, "out of host memory for message buffers");
	return CLP_OK;
}

/* One communicator per group; every rank takes part in every split, in group order. */
static clp_status group_comms(clp_exec *e)
{
	const clp_sched *s = e->s;

	if (!(e->gcomm = calloc((size_t)s->ngroups + 1, sizeof(*e->gcomm))))
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the executor");
	for (int g = 0; g < s->ngroups; g++) {
		int member = 0;

		for (int k = 0; k < s->groups[g].n; k++)
			member |= s->groups[g].ranks[k] == e->rank;
		if (s->groups[g].n == clp_comm_size(e->comm) || s->groups[g].n == 1)
			continue; /* the world itself, or nothing to reduce */
		CLP_TRY(clp_comm_split(e->comm, member ? g : -1, e->rank, &e->gcomm[g]));
	}
	return CLP_OK;
}

/* Everything after the options are copied; on failure the caller frees the partial executor. */
static clp_status setup(clp_exec *e, const clp_rank_prog *p)
{
	CLP_TRY(clp_model_config_resolve(&e->m));
	CLP_TRY(clp_sched_index_build(e->s, &e->ix));
	CLP_TRY(clp_param_table_build(&e->m, 0, clp_model_nblocks(&e->m) - 1, &e->full));
	CLP_TRY(run_steps(e, e->s, p));
	e->ls = calloc((size_t)p->nops + 1, sizeof(*e->ls));
	e->os = calloc((size_t)p->nops + 1, sizeof(*e->os));
	e->tsum = calloc(2 * (size_t)e->full.ntensors + 1, sizeof(double));
	e->posted = calloc((size_t)p->nops + 1, sizeof(double));
	e->nops = p->nops;
	if (!e->ls || !e->os || !e->tsum || !e->posted)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the executor");
	/* the stages this rank runs, in order of first appearance (a dataflow node that no
	 * micro-batch visits still holds its stage: it all-reduces and steps it) */
	for (int i = 0; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];

		if (holds_stage(p, op) && !exec_find(e, op->stage, op->pipe))
			CLP_TRY(add_stage(e, op->stage, op->pipe));
	}
	CLP_TRY(staging(e, p));
	CLP_TRY(clp_cl_buffer(e->ctx, 4 * sizeof(float), "loss sum", &e->acc));
	CLP_TRY(group_comms(e));
	if (p->mode == CLP_RANK_DATAFLOW)
		CLP_TRY(exec_dataflow_setup(e));
	return CLP_OK;
}

clp_status clp_exec_create(clp_exec **out, clp_comm *comm, clp_cl_ctx *ctx, const clp_sched *s,
			   const clp_model_config *m, const clp_exec_opts *o)
{
	clp_exec *e;
	const clp_rank_prog *p;
	clp_status st;

	*out = NULL;
	CLP_TRY(check(comm, s, m));
	e = calloc(1, sizeof(*e));
	if (!e)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the executor");
	e->comm = comm;
	e->ctx = ctx;
	e->s = s;
	e->m = *m;
	e->rank = clp_comm_rank(comm);
	e->B = o->B;
	e->T = o->T;
	e->N = o->B * o->T;
	e->C = (size_t)m->d_model;
	e->det = o->deterministic;
	e->recompute = o->recompute;
	e->frozen = o->frozen;
	e->prec = o->precision;
	e->loss_scale = 1.0f;
	e->opt = &clp_exec_adamw;
	p = &s->ranks[e->rank];
	e->replica = p->replica;
	st = setup(e, p);
	if (st != CLP_OK) {
		clp_exec_free(e);
		return st;
	}
	*out = e;
	return CLP_OK;
}

clp_status clp_exec_set_loss_scale(clp_exec *e, float scale, long window)
{
	if (scale > 0 && (!isfinite(scale) || window < 1))
		return clp_error(CLP_ERR_INVALID, "loss scale %g with a window of %ld steps: the "
				 "scale must be finite and the window at least 1", (double)scale,
				 window);
	e->scaling = scale > 0;
	e->loss_scale = scale > 0 ? scale : 1.0f;
	e->scale_window = window;
	e->scale_good = 0;
	return CLP_OK;
}

void clp_exec_loss_scale(const clp_exec *e, float *scale, long *good)
{
	*scale = e->loss_scale;
	*good = e->scale_good;
}

void clp_exec_restore_loss_scale(clp_exec *e, float scale, long good)
{
	if (!e->scaling || !(scale >= 1.0f) || !isfinite(scale))
		return;
	e->loss_scale = scale;
	e->scale_good = good < 0 ? 0 : good;
}

void exec_update_loss_scale(clp_exec *e, clp_exec_result *r)
{
	r->loss_scale = e->loss_scale;
	if (!e->scaling)
		return;
	if (e->nonfinite) { /* the step was skipped: a smaller scale next time */
		e->loss_scale = e->loss_scale > 1.0f ? e->loss_scale * 0.5f : 1.0f;
		e->scale_good = 0;
	} else if (++e->scale_good >= e->scale_window) {
		if (e->loss_scale < 0x1p24f)
			e->loss_scale *= 2.0f;
		e->scale_good = 0;
	}
}

void clp_exec_free(clp_exec *e)
{
	if (!e)
		return;
	clp_cl_finish(e->ctx);
	exec_optim_free(e);
	for (int i = 0; i < e->nls; i++) {
		clp_stage_free(e->ls[i].st);
		free(e->ls[i].slot_mb);
		free(e->ls[i].gindex);
		free(e->ls[i].owns);
		if (e->ls[i].stats_mem)
			clReleaseMemObject(e->ls[i].stats_mem);
	}
	for (int i = 0; e->os && i < e->nops; i++) {
		if (e->os[i].req)
			clp_comm_cancel(e->comm, &e->os[i].req);
		if (e->os[i].ev)
			clReleaseEvent(e->os[i].ev);
		free(e->os[i].buf);
	}
	if (e->acc)
		clReleaseMemObject(e->acc);
	for (int g = 0; e->gcomm && g < e->s->ngroups; g++)
		clp_comm_free(e->gcomm[g]);
	free(e->gcomm);
	clp_param_table_free(&e->full);
	clp_sched_index_free(&e->ix);
	free(e->ls);
	free(e->os);
	free(e->tsum);
	free(e->posted);
	free(e->run_step);
	for (int i = 0; i < e->tr_n; i++)
		if (e->tr[i].queue == CLP_TQ_COMPUTE) {
			clReleaseEvent(e->tr[i].ev0);
			clReleaseEvent(e->tr[i].ev1);
		}
	free(e->tr);
	free(e);
}

clp_status clp_exec_init_params(clp_exec *e, uint64_t seed)
{
	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_stage_init_params(e->ls[i].st, seed));
	return CLP_OK;
}

int clp_exec_nstages(const clp_exec *e)
{
	return e->nls;
}

clp_stage *clp_exec_stage(const clp_exec *e, int i, int *owner)
{
	if (owner)
		*owner = e->ls[i].owner;
	return e->ls[i].st;
}

int clp_exec_owns(const clp_exec *e, int i, int t)
{
	return e->save_all || e->ls[i].owns[t];
}

void clp_exec_save_all(clp_exec *e, int on)
{
	e->save_all = on != 0;
}

int clp_exec_stage_id(const clp_exec *e, int i)
{
	return e->ls[i].stage;
}
