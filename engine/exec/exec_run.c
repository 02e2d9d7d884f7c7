/* The executor's ordered interpreter: one pass over this rank's op list per step, each op one
 * call to a primitive (exec_internal.h) or an optimizer hook (exec_optim.h). */
#include "engine/exec/exec_env.h"
#include "engine/exec/exec_internal.h"

#include <stdlib.h>

#include "cl/ops.h"

/* Gradients of the local copy of op.stage, summed over its replicas (and Chimera's twin). */
static clp_status allreduce_stage(clp_exec *e, const clp_op *op)
{
	struct lstage *l = exec_find_stage(e, op->stage);

	if (!l)
		return clp_error(CLP_ERR_STATE, "rank %d: ALLREDUCE of stage %d it does not hold",
				 e->rank, op->stage);
	return exec_reduce_grads(e, op, &l->st, 1, 0, 1.0f, "stage gradients");
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
	/* a frozen embedding (the same on every rank of the group): no gradient to sum */
	for (int i = 0; i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);

		for (int k = 0; k < t->ntensors; k++)
			if (t->tensors[k].role == CLP_R_TOK_EMB && !clp_stage_trained(e->ls[i].st, k)) {
				free(sum);
				free(h);
				return CLP_OK;
			}
	}
	for (int i = 0; s == CLP_OK && i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);

		for (int k = 0; s == CLP_OK && k < t->ntensors; k++)
			if (t->tensors[k].role == CLP_R_TOK_EMB && e->ls[i].pipe == 0 &&
			    clp_stage_trained(e->ls[i].st, k)) {
				s = clp_stage_read(e->ls[i].st, CLP_ST_GRAD, k, h);
				for (size_t j = 0; j < n; j++)
					sum[j] += h[j];
			}
	}
	if (s == CLP_OK)
		s = clp_exec_group_sum(e, op->group, CLP_COMM_F32, sum, n,
				       "tied embedding gradient");
	for (int i = 0; s == CLP_OK && i < e->nls; i++) {
		const clp_param_table *t = clp_stage_table(e->ls[i].st);

		for (int k = 0; s == CLP_OK && k < t->ntensors; k++)
			if (t->tensors[k].role == CLP_R_TOK_EMB && clp_stage_trained(e->ls[i].st, k))
				s = clp_stage_write(e->ls[i].st, CLP_ST_GRAD, k, sum);
	}
	free(sum);
	free(h);
	return s;
}

static clp_status allreduce(clp_exec *e, const clp_op *op, float max_norm)
{
	CLP_TRY(exec_drain(e));
	switch (op->what) {
	case CLP_RED_GRADS:
		return allreduce_stage(e, op);
	case CLP_RED_TIED:
		return allreduce_tied(e, op);
	case CLP_RED_NORM:
		return exec_grad_norm(e, op, max_norm);
	}
	return CLP_OK;
}

/* The first optimizer step of the step computes the norm (unless a NORM op did). */
static clp_status opt_step(clp_exec *e, const clp_op *op, const void *set,
			   float max_norm)
{
	if (!exec_find_stage(e, op->stage))
		return clp_error(CLP_ERR_STATE, "rank %d: OPT_STEP of stage %d it does not hold",
				 e->rank, op->stage);
	if (!e->norm_done)
		CLP_TRY(exec_grad_norm(e, NULL, max_norm));
	return exec_optim_stage_step(e, op->stage, set);
}

static clp_status run_op(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d,
			 const void *set, float max_norm)
{
	switch (op->kind) {
	case CLP_OP_RECV_ACT:
	case CLP_OP_RECV_GRAD:
		return exec_post_recv(e, i, op, d->step);
	case CLP_OP_SEND_ACT:
	case CLP_OP_SEND_GRAD:
		return exec_post_send(e, i, op, d->step);
	case CLP_OP_FWD:
		return exec_run_fwd(e, i, op, d, 0);
	case CLP_OP_BWD:
	case CLP_OP_BWD_B:
		CLP_TRY(exec_run_bwd(e, i, op, d));
		return exec_optim_after_bwd(e, op);
	case CLP_OP_BWD_W:
		return exec_run_bwd_w(e, op, d);
	case CLP_OP_ALLREDUCE:
		return allreduce(e, op, max_norm);
	case CLP_OP_REDUCE: /* the loss is summed over all ranks at the end of the step */
		return CLP_OK;
	case CLP_OP_OPT_STEP:
		return opt_step(e, op, set, max_norm);
	case CLP_OP_OPT_PREP:
		if (!exec_find_stage(e, op->stage))
			return clp_error(CLP_ERR_STATE, "rank %d: OPT_PREP of stage %d it does not "
					 "hold", e->rank, op->stage);
		return exec_optim_prep(e, op, set);
	case CLP_OP_KFAC_SYNC: /* a collective: what it sums is read once the device is idle */
	case CLP_OP_KFAC_INV_SYNC:
	case CLP_OP_KFAC_PREC_SYNC:
		CLP_TRY(exec_drain(e));
		return exec_optim_item(e, op);
	case CLP_OP_KFAC_CURV_A:
	case CLP_OP_KFAC_CURV_B:
	case CLP_OP_KFAC_INV:
	case CLP_OP_KFAC_PRECOND:
		return exec_optim_item(e, op);
	}
	return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: op %s is not run by this executor yet",
			 e->rank, clp_op_kind_name(op->kind));
}

/* Op i with its trace records: compute ops on the device (forwards and backwards mark their
 * start once their input has arrived), collectives on the host. */
static clp_status run_traced(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d,
			     const void *set, float max_norm)
{
	int compute = clp_op_is_compute(op->kind);
	double h0 = clp_comm_now();
	clp_status st;

	e->cur_ev0 = NULL;
	if (compute && op->kind != CLP_OP_FWD && !clp_op_is_bwd_input(op->kind))
		CLP_TRY(exec_trace_mark(e, &e->cur_ev0));
	st = run_op(e, i, op, d, set, max_norm);
	if (compute && st == CLP_OK)
		return exec_trace_compute(e, op);
	if (compute && e->cur_ev0) {
		clReleaseEvent(e->cur_ev0);
		e->cur_ev0 = NULL;
	}
	if (clp_op_is_collective(op->kind) && st == CLP_OK)
		st = exec_trace_host(e, op, h0, clp_comm_now());
	return st;
}

/* This step's ops of the list in order (cs: the step of a K-step cycle), then the step's end:
 * the optimizer's, the norm when no OPT_STEP took it, the loss. */
static clp_status step_ops(clp_exec *e, const clp_exec_data *d, const void *set,
			   float max_norm, int cs, clp_exec_result *r)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];

	for (int i = 0; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];

		if (e->run_step[i] != cs || exec_optim_skips(e, op))
			continue;
		CLP_TRY(e->tracing ? run_traced(e, i, op, d, set, max_norm)
				   : run_op(e, i, op, d, set, max_norm));
	}
	CLP_TRY(exec_finish_step(e, d->step));
	CLP_TRY(exec_optim_step_end(e));
	if (!e->norm_done) /* a schedule without optimizer steps */
		CLP_TRY(exec_grad_norm(e, NULL, max_norm));
	return exec_loss_total(e, &r->loss);
}

clp_status clp_exec_step(clp_exec *e, const clp_exec_data *d, const void *set,
			 float max_norm, clp_exec_result *r)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];
	int cs = (int)(d->step % (uint32_t)e->s->nsteps); /* the step of a K-step cycle */
	clp_status st;

	if (p->mode == CLP_RANK_DATAFLOW)
		return exec_dataflow_step(e, d, set, max_norm, r);
	e->norm_done = 0;
	e->max_norm = max_norm;
	for (int i = 0; i < e->nls; i++)
		CLP_TRY(clp_stage_zero_grads(e->ls[i].st));
	CLP_TRY(clp_cl_fill(e->ctx, clp_buf_at(e->acc, 0), 0.0f, 1));
	CLP_TRY(exec_optim_step_begin(e, d));
	st = step_ops(e, d, set, max_norm, cs, r);
	r->grad_norm = e->norm;
	r->skipped = e->nonfinite;
	exec_update_loss_scale(e, r);
	return st;
}

/* The forward ops of a cycle's first step (every micro-batch once), then the loss. */
static clp_status forward_ops(clp_exec *e, const clp_exec_data *d, double *loss)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];

	for (int i = 0; i < p->nops; i++) {
		const clp_op *op = &p->ops[i];

		if (e->run_step[i] != 0) /* a cycle's first step passes every micro-batch once */
			continue;
		if (op->kind == CLP_OP_RECV_ACT)
			CLP_TRY(exec_post_recv(e, i, op, d->step));
		else if (op->kind == CLP_OP_SEND_ACT)
			CLP_TRY(exec_post_send(e, i, op, d->step));
		else if (op->kind == CLP_OP_FWD)
			CLP_TRY(exec_run_fwd(e, i, op, d, 1));
	}
	CLP_TRY(exec_finish_step(e, d->step));
	return exec_loss_total(e, loss);
}

clp_status clp_exec_forward(clp_exec *e, const clp_exec_data *d, double *loss)
{
	const clp_rank_prog *p = &e->s->ranks[e->rank];

	if (p->mode == CLP_RANK_DATAFLOW)
		return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: a forward-only pass of a dataflow "
				 "(SkipPipe) schedule is not run; evaluate the gathered model",
				 e->rank);
	CLP_TRY(clp_cl_fill(e->ctx, clp_buf_at(e->acc, 0), 0.0f, 1));
	return forward_ops(e, d, loss);
}
