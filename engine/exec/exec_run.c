/* The executor's interpreter: one pass over this rank's op list per step. Messages go through
 * host staging buffers; every wait polls the device and the transport together. */
#include "engine/exec/exec_internal.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl/ops.h"

#define LOCAL(e, g) ((int)((g) - (e)->ix.off[(e)->rank]))

/* A transfer finished: its interval goes into the trace. */
static clp_status transfer_done(clp_exec *e, int i)
{
	if (!e->tracing)
		return CLP_OK;
	return exec_trace_host(e, &e->s->ranks[e->rank].ops[i], e->posted[i], clp_comm_now());
}

/* Nothing to do: give the core away, the longer the longer nothing happens (ranks often share
 * cores with each other and with the device's threads, which a spinning poll would starve; a
 * message or event waits at most 250 us more). */
void exec_back_off(int idle)
{
	struct timespec ts = {0, 0};

	if (idle < 16) {
		sched_yield();
		return;
	}
	ts.tv_nsec = 5000L * (idle - 15 < 50 ? idle - 15 : 50);
	nanosleep(&ts, NULL);
}

/* Poll every pending request once. */
static clp_status progress(clp_exec *e)
{
	for (int i = 0; i < e->nops; i++)
		if (e->os[i].req) {
			int done;

			CLP_TRY(clp_comm_test(e->comm, &e->os[i].req, &done));
			if (done)
				CLP_TRY(transfer_done(e, i));
		}
	return CLP_OK;
}

/* Wait for a device event while keeping the transport moving. */
static clp_status wait_event(clp_exec *e, cl_event ev)
{
	cl_int status = CL_QUEUED;
	int idle = 0;

	clFlush(clp_cl_ctx_queue(e->ctx));
	for (;; exec_back_off(idle++)) {
		cl_int err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
					    &status, NULL);

		if (err != CL_SUCCESS)
			return clp_cl_fail(e->ctx, err, "rank %d: event status", e->rank);
		if (status < 0)
			return clp_cl_fail(e->ctx, status, "rank %d: a device command failed", e->rank);
		if (status == CL_COMPLETE)
			return CLP_OK;
		CLP_TRY(progress(e));
	}
}

/* Everything enqueued so far has finished, without blocking in clFinish. */
static clp_status drain(clp_exec *e)
{
	cl_event ev;
	cl_int err = clEnqueueMarkerWithWaitList(clp_cl_ctx_queue(e->ctx), 0, NULL, &ev);
	clp_status st;

	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: marker", e->rank);
	st = wait_event(e, ev);
	clReleaseEvent(ev);
	return st;
}

clp_status exec_drain(clp_exec *e)
{
	return drain(e);
}

/* Wait for the request of op i (a receive or a send), polling the others meanwhile. */
static clp_status wait_req(clp_exec *e, int i, uint32_t step)
{
	double deadline = clp_comm_now() + clp_comm_timeout(e->comm);
	int idle = 0;

	for (; e->os[i].req; exec_back_off(idle++)) {
		int done = 0;

		CLP_TRY(clp_comm_test(e->comm, &e->os[i].req, &done));
		if (done)
			return transfer_done(e, i);
		CLP_TRY(progress(e));
		if (clp_comm_now() > deadline) {
			char what[160];

			clp_op_describe(&e->s->ranks[e->rank].ops[i], what, sizeof(what));
			clp_comm_cancel(e->comm, &e->os[i].req);
			return clp_error(CLP_ERR_TIMEOUT, "rank %d, step %u: %s timed out after %.1f s "
					 "(peer rank %d)", e->rank, (unsigned)step + 1, what,
					 clp_comm_timeout(e->comm), e->s->ranks[e->rank].ops[i].peer);
		}
	}
	return CLP_OK;
}

static int slot_of(struct lstage *l, int mb, int take)
{
	for (int i = 0; i < l->nslots; i++)
		if (l->slot_mb[i] == mb)
			return i;
	if (take)
		for (int i = 0; i < l->nslots; i++)
			if (l->slot_mb[i] < 0) {
				l->slot_mb[i] = mb;
				return i;
			}
	return -1;
}

int exec_slot(struct lstage *l, int mb)
{
	return slot_of(l, mb, 0);
}

static void release_slot(struct lstage *l, int mb)
{
	int s = slot_of(l, mb, 0);

	if (s >= 0)
		l->slot_mb[s] = -1;
}

/* Bring the input of a forward or backward (index i) into dst: from its receive, or from the
 * host copy of a local producer. */
static clp_status fetch_input(clp_exec *e, int i, clp_buf dst, uint32_t step)
{
	int64_t in = e->ix.input[e->ix.off[e->rank] + i];
	int j;
	cl_int err;

	if (in < 0)
		return clp_error(CLP_ERR_STATE, "rank %d: op %d has no input", e->rank, i);
	j = LOCAL(e, in);
	if (clp_op_is_recv(e->s->ranks[e->rank].ops[j].kind))
		CLP_TRY(wait_req(e, j, step));
	else
		CLP_TRY(wait_event(e, e->os[j].ev));
	err = clEnqueueWriteBuffer(clp_cl_ctx_queue(e->ctx), dst.mem, CL_FALSE, dst.off * 4,
				   e->os[j].bytes, e->os[j].buf, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: staging an input", e->rank);
	return CLP_OK;
}

/* A producer's output goes to its host buffer when something consumes it. */
static clp_status stage_output(clp_exec *e, int i, clp_buf src)
{
	cl_int err;

	if (!e->os[i].needed)
		return CLP_OK;
	if (e->os[i].ev)
		clReleaseEvent(e->os[i].ev);
	err = clEnqueueReadBuffer(clp_cl_ctx_queue(e->ctx), src.mem, CL_FALSE, src.off * 4,
				  e->os[i].bytes, e->os[i].buf, 0, NULL, &e->os[i].ev);
	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: reading an output", e->rank);
	return CLP_OK;
}

static clp_stage_mb mb_of(const clp_exec *e, const clp_exec_data *d, int slot, int mb)
{
	size_t o = (size_t)mb * e->N;
	clp_stage_mb m = {slot, d->step, (uint32_t)mb, d->seed, d->tokens + o,
			  d->types ? d->types + o : NULL, d->targets + o};

	return m;
}

static clp_status run_fwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d,
			  int release)
{
	struct lstage *l = exec_find(e, op->stage, op->pipe);
	int slot = l ? slot_of(l, op->mb, 1) : -1;
	clp_stage_mb m;

	if (slot < 0)
		return clp_error(CLP_ERR_STATE, "rank %d: no free slot for FWD stage %d mb %d",
				 e->rank, op->stage, op->mb);
	m = mb_of(e, d, slot, op->mb);
	if (!clp_stage_has_embedding(l->st))
		CLP_TRY(fetch_input(e, i, clp_stage_act_in(l->st, slot), d->step));
	if (e->tracing) /* the op starts once its input is here */
		CLP_TRY(exec_trace_mark(e, &e->cur_ev0));
	CLP_TRY(clp_stage_forward(l->st, &m, exec_inv(d, op->mb)));
	if (clp_stage_has_head(l->st))
		CLP_TRY(clp_cl_axpy(e->ctx, clp_buf_at(e->acc, 0), clp_stage_loss(l->st, slot), 1.0f,
				    1));
	CLP_TRY(stage_output(e, i, clp_stage_act_out(l->st, slot)));
	if (release)
		release_slot(l, op->mb);
	return CLP_OK;
}

static clp_status run_bwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d)
{
	struct lstage *l = exec_find(e, op->stage, op->pipe);
	int slot = l ? slot_of(l, op->mb, 0) : -1;
	clp_stage_mb m;

	if (slot < 0)
		return clp_error(CLP_ERR_STATE, "rank %d: backward of stage %d mb %d before its "
				 "forward", e->rank, op->stage, op->mb);
	m = mb_of(e, d, slot, op->mb);
	if (!clp_stage_has_head(l->st))
		CLP_TRY(fetch_input(e, i, clp_stage_grad_in(l->st), d->step));
	if (e->tracing)
		CLP_TRY(exec_trace_mark(e, &e->cur_ev0));
	if (op->kind == CLP_OP_BWD_B)
		CLP_TRY(clp_stage_backward_input(l->st, &m, exec_inv(d, op->mb)));
	else
		CLP_TRY(clp_stage_backward(l->st, &m, exec_inv(d, op->mb)));
	CLP_TRY(stage_output(e, i, clp_stage_grad_in(l->st)));
	if (op->kind == CLP_OP_BWD)
		release_slot(l, op->mb);
	return CLP_OK;
}

static clp_status post_send(clp_exec *e, int i, const clp_op *op, uint32_t step)
{
	int j = LOCAL(e, e->ix.input[e->ix.off[e->rank] + i]);
	char label[96];

	CLP_TRY(wait_event(e, e->os[j].ev));
	snprintf(label, sizeof(label), "%s stage %d mb %d step %u",
		 op->kind == CLP_OP_SEND_ACT ? "activation" : "gradient", op->stage, op->mb,
		 (unsigned)step);
	e->posted[i] = clp_comm_now();
	CLP_TRY(clp_comm_isend(e->comm, e->os[j].buf, e->os[j].bytes, op->peer, op->tag, label,
			       &e->os[i].req));
	if (op->flags & CLP_OPF_WAIT)
		CLP_TRY(wait_req(e, i, step));
	return CLP_OK;
}

static clp_status post_recv(clp_exec *e, int i, const clp_op *op, uint32_t step)
{
	char label[96];

	snprintf(label, sizeof(label), "%s stage %d mb %d step %u",
		 op->kind == CLP_OP_RECV_ACT ? "activation" : "gradient", op->stage, op->mb,
		 (unsigned)step);
	e->posted[i] = clp_comm_now();
	return clp_comm_irecv(e->comm, e->os[i].buf, e->os[i].bytes, op->peer, op->tag, label,
			      &e->os[i].req);
}

/* Sum over the op's group (its communicator was made at creation); no op: every rank. */
static clp_status group_sum(clp_exec *e, const clp_op *op, clp_comm_type t, void *buf, size_t n,
			    const char *label)
{
	const clp_group *g;

	if (!op)
		return clp_comm_size(e->comm) > 1
			       ? clp_comm_allreduce_sum(e->comm, t, buf, n, e->det, label) : CLP_OK;
	g = &e->s->groups[op->group];

	if (g->n == 1)
		return CLP_OK;
	if (g->n == clp_comm_size(e->comm))
		return clp_comm_allreduce_sum(e->comm, t, buf, n, e->det, label);
	if (!e->gcomm[op->group])
		return clp_error(CLP_ERR_STATE, "rank %d: a collective of group %d, which it is not "
				 "in", e->rank, op->group);
	return clp_comm_allreduce_sum(e->gcomm[op->group], t, buf, n, e->det, label);
}

/* Sum a set of device tensors over the op's group, through one host buffer. */
static clp_status reduce_tensors(clp_exec *e, const clp_op *op, clp_stage *st, const int *which,
				 int n, const char *label)
{
	const clp_param_table *t = clp_stage_table(st);
	size_t total = 0, off = 0;
	float *h;
	clp_status s = CLP_OK;

	for (int k = 0; k < n; k++)
		total += t->tensors[which[k]].numel;
	h = malloc((total ? total : 1) * sizeof(float));
	if (!h)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for %s", label);
	for (int k = 0; k < n && s == CLP_OK; k++) {
		s = clp_stage_read(st, CLP_ST_GRAD, which[k], h + off);
		off += t->tensors[which[k]].numel;
	}
	if (s == CLP_OK)
		s = group_sum(e, op, CLP_COMM_F32, h, total, label);
	off = 0;
	for (int k = 0; k < n && s == CLP_OK; k++) {
		s = clp_stage_write(st, CLP_ST_GRAD, which[k], h + off);
		off += t->tensors[which[k]].numel;
	}
	free(h);
	return s;
}

/* Gradients of the local copy of op.stage, summed over its replicas (and Chimera's twin). */
static clp_status allreduce_stage(clp_exec *e, const clp_op *op)
{
	for (int i = 0; i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);
		int *which;
		clp_status s;

		if (e->ls[i].stage != op->stage)
			continue;
		if (!(which = malloc((size_t)t->ntensors * sizeof(int))))
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		for (int k = 0; k < t->ntensors; k++)
			which[k] = k;
		s = reduce_tensors(e, op, e->ls[i].st, which, t->ntensors, "stage gradients");
		free(which);
		return s;
	}
	return clp_error(CLP_ERR_STATE, "rank %d: ALLREDUCE of stage %d it does not hold", e->rank,
			 op->stage);
}

/* The tied embedding: after the stage reductions every copy of one pipeline agrees with its
 * twin, so each rank contributes the sum of its pipeline-0 copies (the embedding's or the
 * head's), and the total goes to all its copies. */
static clp_status allreduce_tied(clp_exec *e, const clp_op *op)
{
	size_t n = (size_t)e->m.vocab * e->C;
	float *sum = calloc(n, sizeof(float)), *h = malloc(n * sizeof(float));
	clp_status s = CLP_OK;

	if (!sum || !h) {
		free(sum);
		free(h);
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the tied embedding");
	}
	for (int i = 0; s == CLP_OK && i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);

		for (int k = 0; s == CLP_OK && k < t->ntensors; k++)
			if (t->tensors[k].role == CLP_R_TOK_EMB && e->ls[i].pipe == 0) {
				s = clp_stage_read(e->ls[i].st, CLP_ST_GRAD, k, h);
				for (size_t j = 0; j < n; j++)
					sum[j] += h[j];
			}
	}
	if (s == CLP_OK)
		s = group_sum(e, op, CLP_COMM_F32, sum, n, "tied embedding gradient");
	for (int i = 0; s == CLP_OK && i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);

		for (int k = 0; s == CLP_OK && k < t->ntensors; k++)
			if (t->tensors[k].role == CLP_R_TOK_EMB)
				s = clp_stage_write(e->ls[i].st, CLP_ST_GRAD, k, sum);
	}
	free(sum);
	free(h);
	return s;
}

/* Per-tensor sums of squares of the owned gradients into e->tsum (whole-model order) and the
 * non-finite flags after them; reduced over all ranks when group_op is given. */
static clp_status grad_norm(clp_exec *e, const clp_op *group_op, float max_norm)
{
	int nt = e->full.ntensors;
	double sum = 0;
	float stats[4];

	memset(e->tsum, 0, 2 * (size_t)nt * sizeof(double));
	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_stage_fold_tied(e->ls[i].st));
	for (int i = 0; i < e->nls; i++) {
		struct lstage *l = &e->ls[i];
		const clp_param_table *t = clp_stage_table(l->st);
		float *h = malloc((size_t)t->ntensors * 4 * sizeof(float));

		if (!h)
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		for (int k = 0; k < t->ntensors; k++) {
			clp_buf g = clp_stage_tensor(l->st, CLP_ST_GRAD, k);
			size_t n = t->tensors[k].numel;

			if (l->owns[k])
				CLP_TRY(clp_nn_grad_stats(e->ctx, clp_buf_at(l->stats.mem,
									     l->stats.off + 4 * k),
							  &g, &n, 1, 0.0f));
		}
		CLP_TRY(clp_cl_read(e->ctx, l->stats.mem, l->stats.off * 4,
				    (size_t)t->ntensors * 4 * sizeof(float), h));
		for (int k = 0; k < t->ntensors; k++)
			if (l->owns[k] && l->gindex[k] >= 0) {
				e->tsum[l->gindex[k]] = h[4 * k + CLP_NN_GSTAT_SUMSQ];
				e->tsum[nt + l->gindex[k]] = h[4 * k + CLP_NN_GSTAT_NONFINITE];
			}
		free(h);
	}
	if (group_op || e->norm_world)
		CLP_TRY(group_sum(e, group_op, CLP_COMM_F64, e->tsum, 2 * (size_t)nt,
				  "gradient norm"));
	e->nonfinite = 0;
	for (int k = 0; k < nt; k++) {
		sum += e->tsum[k];
		e->nonfinite |= e->tsum[nt + k] != 0;
	}
	e->norm = sqrt(sum);
	e->nonfinite |= !isfinite(e->norm);
	stats[CLP_NN_GSTAT_SUMSQ] = (float)sum;
	stats[CLP_NN_GSTAT_NONFINITE] = e->nonfinite ? 1.0f : 0.0f;
	stats[CLP_NN_GSTAT_NORM] = (float)e->norm;
	stats[CLP_NN_GSTAT_SCALE] = e->nonfinite ? 0.0f
			   : max_norm > 0 && e->norm > 0 ? (float)fmin(1.0, max_norm / (e->norm + 1e-6))
							 : 1.0f;
	for (int i = 0; i < e->nls; i++) {
		clp_buf s = clp_stage_stats(e->ls[i].st);

		CLP_TRY(clp_cl_write(e->ctx, s.mem, s.off * 4, sizeof(stats), stats));
	}
	e->norm_done = 1;
	return CLP_OK;
}

static clp_status finish_step(clp_exec *e, uint32_t step)
{
	for (int i = 0; i < e->nops; i++)
		if (e->os[i].req)
			CLP_TRY(wait_req(e, i, step));
	CLP_TRY(drain(e));
	for (int i = 0; i < e->nls; i++)
		for (int k = 0; k < e->ls[i].nslots; k++)
			e->ls[i].slot_mb[k] = -1;
	return CLP_OK;
}

static clp_status loss_total(clp_exec *e, double *loss)
{
	float l = 0;

	CLP_TRY(clp_cl_read(e->ctx, e->acc, 0, sizeof(float), &l));
	*loss = l;
	if (clp_comm_size(e->comm) > 1)
		CLP_TRY(clp_comm_allreduce_sum(e->comm, CLP_COMM_F64, loss, 1, 1, "loss"));
	return CLP_OK;
}

clp_status clp_exec_step(clp_exec *e, const clp_exec_data *d, const clp_nn_adamw_hp *hp,
			 float max_norm, clp_exec_result *r)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];
	int cs = (int)(d->step % (uint32_t)e->s->nsteps); /* the step of a K-step cycle */
	clp_status st = CLP_OK;

	if (p->mode == CLP_RANK_DATAFLOW)
		return exec_dataflow_step(e, d, hp, max_norm, r);
	e->norm_done = 0;
	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_stage_zero_grads(e->ls[i].st));
	CLP_TRY(clp_cl_fill(e->ctx, clp_buf_at(e->acc, 0), 0.0f, 1));
	if (e->kfac)
		CLP_TRY(exec_kfac_step_begin(e, d));
	for (int i = 0; st == CLP_OK && i < p->nops; i++) {
		const clp_op *op = &p->ops[i];
		int traced = e->tracing && clp_op_is_compute(op->kind);
		int coll = e->tracing && clp_op_is_collective(op->kind);
		cl_event ev0 = NULL;
		double h0 = clp_comm_now();

		if (e->run_step[i] != cs)
			continue;
		/* the first cycle's serial refresh did the work of its factor items */
		if (e->kfac_cycle0 && op->kind >= CLP_OP_KFAC_CURV_A && op->kind <= CLP_OP_KFAC_INV)
			continue;
		e->cur_ev0 = NULL;
		/* forwards and backwards mark their start once their input has arrived */
		if (traced && op->kind != CLP_OP_FWD && !clp_op_is_bwd_input(op->kind) &&
		    (st = exec_trace_mark(e, &e->cur_ev0)) != CLP_OK)
			break;
		switch (op->kind) {
		case CLP_OP_RECV_ACT:
		case CLP_OP_RECV_GRAD:
			st = post_recv(e, i, op, d->step);
			break;
		case CLP_OP_SEND_ACT:
		case CLP_OP_SEND_GRAD:
			st = post_send(e, i, op, d->step);
			break;
		case CLP_OP_FWD:
			st = run_fwd(e, i, op, d, 0);
			break;
		case CLP_OP_BWD:
		case CLP_OP_BWD_B:
			st = run_bwd(e, i, op, d);
			if (st == CLP_OK && e->kfac)
				st = exec_kfac_after_bwd(e, op);
			break;
		case CLP_OP_BWD_W: {
			struct lstage *l = exec_find(e, op->stage, op->pipe);
			int slot = l ? slot_of(l, op->mb, 0) : -1;
			clp_stage_mb m = mb_of(e, d, slot, op->mb);

			if (slot < 0)
				st = clp_error(CLP_ERR_STATE, "rank %d: W of stage %d mb %d before its B",
					       e->rank, op->stage, op->mb);
			else
				st = clp_stage_backward_weight(l->st, &m);
			if (st == CLP_OK)
				release_slot(l, op->mb);
			break;
		}
		case CLP_OP_ALLREDUCE:
			st = drain(e);
			if (st == CLP_OK && op->what == CLP_RED_GRADS)
				st = allreduce_stage(e, op);
			else if (st == CLP_OK && op->what == CLP_RED_TIED)
				st = allreduce_tied(e, op);
			else if (st == CLP_OK && op->what == CLP_RED_NORM)
				st = grad_norm(e, op, max_norm);
			break;
		case CLP_OP_REDUCE: /* the loss is summed over all ranks at the end of the step */
			break;
		case CLP_OP_OPT_STEP: {
			struct lstage *l = NULL;

			for (int k = 0; k < e->nls && !l; k++)
				if (e->ls[k].stage == op->stage)
					l = &e->ls[k];
			if (!e->norm_done)
				st = grad_norm(e, NULL, max_norm);
			if (st == CLP_OK && e->kfac)
				st = exec_kfac_opt_step(e, op->stage, hp);
			for (int k = 0; st == CLP_OK && !e->kfac && k < e->nls; k++)
				if (e->ls[k].stage == op->stage)
					st = clp_stage_adamw(e->ls[k].st, hp, clp_stage_stats(e->ls[k].st));
			if (st == CLP_OK && !l)
				st = clp_error(CLP_ERR_STATE, "rank %d: OPT_STEP of stage %d it does not "
					       "hold", e->rank, op->stage);
			break;
		}
		case CLP_OP_KFAC_SYNC: /* a collective: the factors are read once the device is idle */
			st = drain(e);
			if (st == CLP_OK)
				st = exec_kfac_item(e, op);
			break;
		case CLP_OP_KFAC_CURV_A:
		case CLP_OP_KFAC_CURV_B:
		case CLP_OP_KFAC_INV:
		case CLP_OP_KFAC_PRECOND:
			st = exec_kfac_item(e, op);
			break;
		default:
			st = clp_error(CLP_ERR_UNSUPPORTED, "rank %d: op %s is not run by this executor "
				       "yet", e->rank, clp_op_kind_name(op->kind));
		}
		ev0 = e->cur_ev0;
		if (traced && st == CLP_OK && (st = exec_trace_grow(e)) == CLP_OK) {
			struct exec_tev *t = &e->tr[e->tr_n++];

			memset(t, 0, sizeof(*t));
			t->op = *op;
			t->queue = CLP_TQ_COMPUTE;
			t->ev0 = ev0;
			st = exec_trace_mark(e, &t->ev1);
		} else if (traced && ev0) {
			clReleaseEvent(ev0);
		}
		if (coll && st == CLP_OK)
			st = exec_trace_host(e, op, h0, clp_comm_now());
	}
	if (st == CLP_OK)
		st = finish_step(e, d->step);
	if (st == CLP_OK && e->kfac)
		st = exec_kfac_step_end(e);
	if (st == CLP_OK && !e->norm_done) /* a schedule without optimizer steps */
		st = grad_norm(e, NULL, max_norm);
	if (st == CLP_OK)
		st = loss_total(e, &r->loss);
	r->grad_norm = e->norm;
	r->skipped = e->nonfinite;
	return st;
}

clp_status clp_exec_forward(clp_exec *e, const clp_exec_data *d, double *loss)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];
	clp_status st = CLP_OK;

	if (p->mode == CLP_RANK_DATAFLOW)
		return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: a forward-only pass of a dataflow "
				 "(SkipPipe) schedule is not run; evaluate the gathered model",
				 e->rank);
	CLP_TRY(clp_cl_fill(e->ctx, clp_buf_at(e->acc, 0), 0.0f, 1));
	for (int i = 0; st == CLP_OK && i < p->nops; i++) {
		const clp_op *op = &p->ops[i];

		if (e->run_step[i] != 0) /* a cycle's first step passes every micro-batch once */
			continue;
		if (op->kind == CLP_OP_RECV_ACT)
			st = post_recv(e, i, op, d->step);
		else if (op->kind == CLP_OP_SEND_ACT)
			st = post_send(e, i, op, d->step);
		else if (op->kind == CLP_OP_FWD)
			st = run_fwd(e, i, op, d, 1);
	}
	if (st == CLP_OK)
		st = finish_step(e, d->step);
	if (st == CLP_OK)
		st = loss_total(e, loss);
	return st;
}

/* ---- shared with the dataflow interpreter (exec_dataflow.c) --------------------------------- */

clp_status exec_progress(clp_exec *e)
{
	return progress(e);
}

clp_status exec_wait_req(clp_exec *e, int i, uint32_t step)
{
	return wait_req(e, i, step);
}

clp_status exec_post_send(clp_exec *e, int i, const clp_op *op, uint32_t step)
{
	return post_send(e, i, op, step);
}

clp_status exec_post_recv(clp_exec *e, int i, const clp_op *op, uint32_t step)
{
	return post_recv(e, i, op, step);
}

clp_status exec_run_fwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d)
{
	return run_fwd(e, i, op, d, 0);
}

clp_status exec_run_bwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d)
{
	return run_bwd(e, i, op, d);
}

clp_status exec_group_sum(clp_exec *e, const clp_op *op, clp_comm_type t, void *buf, size_t n,
			  const char *label)
{
	return group_sum(e, op, t, buf, n, label);
}

clp_status exec_grad_norm(clp_exec *e, const clp_op *group_op, float max_norm)
{
	return grad_norm(e, group_op, max_norm);
}

clp_status exec_finish_step(clp_exec *e, uint32_t step)
{
	return finish_step(e, step);
}

clp_status exec_loss_total(clp_exec *e, double *loss)
{
	return loss_total(e, loss);
}
