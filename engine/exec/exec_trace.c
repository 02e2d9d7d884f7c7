/* Timelines of a real step: device time of every compute op (markers around its kernels, moved
 * to host time by a per-queue offset), host time of transfers and collectives, clocks of all
 * ranks aligned to rank 0's by a ping-pong, everything gathered on rank 0 as a clp_trace. */
#include "engine/exec/exec_internal.h"

#include <stdlib.h>
#include <string.h>

/* Device time (ns) to host seconds: host = dev * 1e-9 + offset. The marker's end is read after
 * it completes, so each sample's offset is too large by the completion latency: keep the
 * smallest of several. */
static clp_status queue_offset(clp_exec *e, double *offset)
{
	double best = 1e300;

	for (int i = 0; i < 5; i++) {
		cl_event ev;
		cl_ulong end = 0;
		cl_int err = clEnqueueMarkerWithWaitList(clp_cl_ctx_queue(e->ctx), 0, NULL, &ev);
		double host;

		if (err != CL_SUCCESS)
			return clp_cl_fail(e->ctx, err, "trace marker");
		clWaitForEvents(1, &ev);
		host = clp_comm_now();
		clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(end), &end, NULL);
		clReleaseEvent(ev);
		if (host - (double)end * 1e-9 < best)
			best = host - (double)end * 1e-9;
	}
	*offset = best;
	return CLP_OK;
}

/* Rank r's clock minus rank 0's, by the ping-pong of least round trip. */
static clp_status clock_offsets(clp_exec *e, double *off)
{
	int n = clp_comm_size(e->comm), me = e->rank;

	for (int r = 0; r < n; r++)
		off[r] = 0;
	for (int r = 1; r < n; r++) {
		double best_rtt = 1e300;

		for (int k = 0; k < 8; k++) {
			double msg[2] = {0, 0};
			clp_comm_req *q = NULL;

			if (me == 0) {
				double t0 = clp_comm_now(), t2;

				CLP_TRY(clp_comm_isend(e->comm, &t0, sizeof(t0), r, 32000, "clock ping",
						       &q));
				CLP_TRY(clp_comm_wait(e->comm, &q, 0));
				CLP_TRY(clp_comm_irecv(e->comm, msg, sizeof(msg), r, 32001, "clock pong",
						       &q));
				CLP_TRY(clp_comm_wait(e->comm, &q, 0));
				t2 = clp_comm_now();
				if (t2 - t0 < best_rtt) {
					best_rtt = t2 - t0;
					off[r] = msg[1] - 0.5 * (t0 + t2);
				}
			} else if (me == r) {
				CLP_TRY(clp_comm_irecv(e->comm, msg, sizeof(double), 0, 32000,
						       "clock ping", &q));
				CLP_TRY(clp_comm_wait(e->comm, &q, 0));
				msg[1] = clp_comm_now();
				CLP_TRY(clp_comm_isend(e->comm, msg, sizeof(msg), 0, 32001, "clock pong",
						       &q));
				CLP_TRY(clp_comm_wait(e->comm, &q, 0));
			}
		}
	}
	return CLP_OK;
}

clp_status clp_exec_trace_start(clp_exec *e)
{
	e->tr_n = 0;
	e->tracing = 1;
	CLP_TRY(queue_offset(e, &e->tr_qoff));
	e->tr_t0 = clp_comm_now();
	return CLP_OK;
}

clp_status exec_trace_grow(clp_exec *e)
{
	if (e->tr_n == e->tr_cap) {
		int cap = e->tr_cap ? 2 * e->tr_cap : 256;
		struct exec_tev *t = realloc(e->tr, (size_t)cap * sizeof(*t));

		if (!t)
			return clp_error(CLP_ERR_NOMEM, "out of host memory for the trace");
		e->tr = t;
		e->tr_cap = cap;
	}
	return CLP_OK;
}

clp_status exec_trace_mark(clp_exec *e, cl_event *ev)
{
	cl_int err = clEnqueueMarkerWithWaitList(clp_cl_ctx_queue(e->ctx), 0, NULL, ev);

	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "trace marker");
	return CLP_OK;
}

clp_status exec_trace_host(clp_exec *e, const clp_op *op, double t0, double t1)
{
	struct exec_tev *t;

	CLP_TRY(exec_trace_grow(e));
	t = &e->tr[e->tr_n++];
	memset(t, 0, sizeof(*t));
	t->op = *op;
	t->t0 = t0;
	t->t1 = t1;
	t->queue = CLP_TQ_COMM;
	return CLP_OK;
}

clp_status exec_trace_compute(clp_exec *e, const clp_op *op)
{
	struct exec_tev *t;
	clp_status st = exec_trace_grow(e);

	if (st != CLP_OK) {
		if (e->cur_ev0)
			clReleaseEvent(e->cur_ev0);
		e->cur_ev0 = NULL;
		return st;
	}
	t = &e->tr[e->tr_n++];
	memset(t, 0, sizeof(*t));
	t->op = *op;
	t->queue = CLP_TQ_COMPUTE;
	t->ev0 = e->cur_ev0;
	e->cur_ev0 = NULL;
	return exec_trace_mark(e, &t->ev1);
}

static void to_event(const clp_exec *e, const struct exec_tev *t, clp_trace_event *out)
{
	out->t0 = t->t0;
	out->t1 = t->t1;
	out->rank = e->rank;
	out->queue = (uint8_t)t->queue;
	out->kind = t->op.kind;
	out->pipe = t->op.pipe;
	out->what = t->op.what;
	out->stage = t->op.stage;
	out->mb = t->op.mb;
	out->peer = t->op.peer;
	out->layer = t->op.layer;
}

clp_status clp_exec_trace_finish(clp_exec *e, clp_trace *out)
{
	int n = clp_comm_size(e->comm);
	double *off = calloc((size_t)n, sizeof(double));
	clp_trace_event *mine = calloc((size_t)e->tr_n + 1, sizeof(*mine));
	void *all = NULL;
	size_t *offs = NULL;
	clp_status st = CLP_OK;

	e->tracing = 0;
	if (!off || !mine) {
		st = clp_error(CLP_ERR_NOMEM, "out of host memory for the trace");
		goto out;
	}
	/* device markers to host time */
	for (int i = 0; i < e->tr_n && st == CLP_OK; i++) {
		struct exec_tev *t = &e->tr[i];

		if (t->queue == CLP_TQ_COMPUTE) {
			cl_ulong a = 0, b = 0;

			clGetEventProfilingInfo(t->ev0, CL_PROFILING_COMMAND_END, sizeof(a), &a, NULL);
			clGetEventProfilingInfo(t->ev1, CL_PROFILING_COMMAND_END, sizeof(b), &b, NULL);
			t->t0 = (double)a * 1e-9 + e->tr_qoff;
			t->t1 = (double)b * 1e-9 + e->tr_qoff;
			clReleaseEvent(t->ev0);
			clReleaseEvent(t->ev1);
		}
		to_event(e, t, &mine[i]);
	}
	st = clock_offsets(e, off);
	for (int i = 0; st == CLP_OK && i < e->tr_n; i++) {
		mine[i].t0 -= off[e->rank];
		mine[i].t1 -= off[e->rank];
	}
	if (st == CLP_OK)
		st = clp_comm_allgatherv(e->comm, mine, (size_t)e->tr_n * sizeof(*mine), &all, &offs,
					 "trace");
	if (st == CLP_OK && e->rank == 0 && out) {
		double t0 = e->tr_t0; /* rank 0's step start is time 0 */

		clp_trace_init(out, n, 0);
		for (int r = 0; r < n && st == CLP_OK; r++)
			for (size_t b = offs[r]; b + sizeof(clp_trace_event) <= offs[r + 1] &&
						 st == CLP_OK; b += sizeof(clp_trace_event)) {
				clp_trace_event ev;

				memcpy(&ev, (char *)all + b, sizeof(ev));
				ev.t0 -= t0;
				ev.t1 -= t0;
				st = clp_trace_push(out, &ev);
			}
	}
out:
	e->tr_n = 0;
	free(all);
	free(offs);
	free(off);
	free(mine);
	return st;
}
