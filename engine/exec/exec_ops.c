/* The executor's compute and transfer primitives: a stage's forward, backward and weight
 * gradient for one micro-batch in its slot, and the posting of sends and receives. Messages go
 * through host staging buffers: a producer's output is read to the host when something consumes
 * it, a consumer's input is written from there. */
#include "engine/exec/exec_internal.h"

#include <stdio.h>

#include "cl/ops.h"

#define LOCAL(e, g) ((int)((g) - (e)->ix.off[(e)->rank]))

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
		CLP_TRY(exec_wait_req(e, j, step));
	else
		CLP_TRY(exec_wait_event(e, e->os[j].ev));
	err = clEnqueueWriteBuffer(clp_cl_ctx_queue(e->ctx), dst.mem, CL_FALSE,
				   dst.off * clp_dtype_size(dst.dt), e->os[j].bytes, e->os[j].buf,
				   0, NULL, NULL);
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
	err = clEnqueueReadBuffer(clp_cl_ctx_queue(e->ctx), src.mem, CL_FALSE,
				  src.off * clp_dtype_size(src.dt), e->os[i].bytes, e->os[i].buf, 0,
				  NULL, &e->os[i].ev);
	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: reading an output", e->rank);
	return CLP_OK;
}

static clp_stage_mb mb_of(const clp_exec *e, const clp_exec_data *d, int slot, int mb)
{
	size_t o = (size_t)mb * e->N;

	return (clp_stage_mb){
		.slot = slot,
		.step = d->step,
		.micro_batch = (uint32_t)mb,
		.seed = d->seed,
		.tokens = d->tokens + o,
		.types = d->types ? d->types + o : NULL,
		.targets = d->targets + o,
		.stream_base = d->mb_base,
	};
}

clp_status exec_run_fwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d,
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

clp_status exec_run_bwd(clp_exec *e, int i, const clp_op *op, const clp_exec_data *d)
{
	struct lstage *l = exec_find(e, op->stage, op->pipe);
	int slot = l ? slot_of(l, op->mb, 0) : -1;
	clp_stage_mb m;

	if (slot < 0)
		return clp_error(CLP_ERR_STATE, "rank %d: backward of stage %d mb %d before its "
				 "forward", e->rank, op->stage, op->mb);
	m = mb_of(e, d, slot, op->mb);
	/* gradients travel in the stage's precision: widened into grad_in after the receive,
	 * rounded into the message buffer before the send (no-ops in fp32) */
	if (!clp_stage_has_head(l->st)) {
		CLP_TRY(fetch_input(e, i, clp_stage_grad_wire(l->st), d->step));
		CLP_TRY(clp_stage_grad_unpack(l->st));
	}
	if (e->tracing)
		CLP_TRY(exec_trace_mark(e, &e->cur_ev0));
	if (op->kind == CLP_OP_BWD_B)
		CLP_TRY(clp_stage_backward_input(l->st, &m, exec_bwd_scale(e, d, op->mb)));
	else
		CLP_TRY(clp_stage_backward(l->st, &m, exec_bwd_scale(e, d, op->mb)));
	/* the backward left the rounded input gradient in the wire (clp_stage_backward) */
	CLP_TRY(stage_output(e, i, clp_stage_grad_wire(l->st)));
	if (op->kind == CLP_OP_BWD)
		release_slot(l, op->mb);
	return CLP_OK;
}

clp_status exec_run_bwd_w(clp_exec *e, const clp_op *op, const clp_exec_data *d)
{
	struct lstage *l = exec_find(e, op->stage, op->pipe);
	int slot = l ? slot_of(l, op->mb, 0) : -1;
	clp_stage_mb m;

	if (slot < 0)
		return clp_error(CLP_ERR_STATE, "rank %d: W of stage %d mb %d before its B", e->rank,
				 op->stage, op->mb);
	m = mb_of(e, d, slot, op->mb);
	CLP_TRY(clp_stage_backward_weight(l->st, &m));
	release_slot(l, op->mb);
	return CLP_OK;
}

static void transfer_label(char *label, size_t n, const clp_op *op, uint32_t step)
{
	snprintf(label, n, "%s stage %d mb %d step %u",
		 op->kind == CLP_OP_SEND_ACT || op->kind == CLP_OP_RECV_ACT ? "activation"
									    : "gradient",
		 op->stage, op->mb, (unsigned)step);
}

clp_status exec_post_send(clp_exec *e, int i, const clp_op *op, uint32_t step)
{
	int j = LOCAL(e, e->ix.input[e->ix.off[e->rank] + i]);
	char label[96];

	CLP_TRY(exec_wait_event(e, e->os[j].ev));
	transfer_label(label, sizeof(label), op, step);
	e->posted[i] = clp_comm_now();
	CLP_TRY(clp_comm_isend(e->comm, e->os[j].buf, e->os[j].bytes, op->peer, op->tag, label,
			       &e->os[i].req));
	if (op->flags & CLP_OPF_WAIT)
		CLP_TRY(exec_wait_req(e, i, step));
	return CLP_OK;
}

clp_status exec_post_recv(clp_exec *e, int i, const clp_op *op, uint32_t step)
{
	char label[96];

	transfer_label(label, sizeof(label), op, step);
	e->posted[i] = clp_comm_now();
	return clp_comm_irecv(e->comm, e->os[i].buf, e->os[i].bytes, op->peer, op->tag, label,
			      &e->os[i].req);
}
