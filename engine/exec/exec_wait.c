/* Waiting in the executor: every wait polls OpenCL event status and the transport's requests
 * together, under the transport's deadline, and never blocks in clFinish while messages are
 * pending (Open MPI 4.1 makes progress only inside MPI calls). */
#include "engine/exec/exec_internal.h"

#include <sched.h>
#include <time.h>

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

clp_status exec_event_done(clp_exec *e, cl_event ev, int *done)
{
	cl_int status = CL_QUEUED;
	cl_int err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
				    NULL);

	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: event status", e->rank);
	if (status < 0)
		return clp_cl_fail(e->ctx, status, "rank %d: a device command failed", e->rank);
	*done = status == CL_COMPLETE;
	return CLP_OK;
}

clp_status exec_progress(clp_exec *e)
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

clp_status exec_wait_event(clp_exec *e, cl_event ev)
{
	int idle = 0, done = 0;

	clFlush(clp_cl_ctx_queue(e->ctx));
	for (;; exec_back_off(idle++)) {
		CLP_TRY(exec_event_done(e, ev, &done));
		if (done)
			return CLP_OK;
		CLP_TRY(exec_progress(e));
	}
}

clp_status exec_drain(clp_exec *e)
{
	cl_event ev;
	cl_int err = clEnqueueMarkerWithWaitList(clp_cl_ctx_queue(e->ctx), 0, NULL, &ev);
	clp_status st;

	if (err != CL_SUCCESS)
		return clp_cl_fail(e->ctx, err, "rank %d: marker", e->rank);
	st = exec_wait_event(e, ev);
	clReleaseEvent(ev);
	return st;
}

clp_status exec_wait_req(clp_exec *e, int i, uint32_t step)
{
	double deadline = clp_comm_now() + clp_comm_timeout(e->comm);
	int idle = 0;

	for (; e->os[i].req; exec_back_off(idle++)) {
		int done = 0;

		CLP_TRY(clp_comm_test(e->comm, &e->os[i].req, &done));
		if (done)
			return transfer_done(e, i);
		CLP_TRY(exec_progress(e));
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

clp_status exec_finish_step(clp_exec *e, uint32_t step)
{
	for (int i = 0; i < e->nops; i++)
		if (e->os[i].req)
			CLP_TRY(exec_wait_req(e, i, step));
	CLP_TRY(exec_drain(e));
	for (int i = 0; i < e->nls; i++)
		for (int k = 0; k < e->ls[i].nslots; k++)
			e->ls[i].slot_mb[k] = -1;
	return CLP_OK;
}
