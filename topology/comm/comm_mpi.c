/* The MPI transport (Open MPI 4.1, or 5 with ULFM): nonblocking point to point and MPI-3
 * nonblocking collectives, polled by comm.c until their deadline. Errors return
 * (MPI_ERRORS_RETURN) and carry MPI's error string. Built with ULFM (CLP_HAVE_ULFM), a failed
 * peer is CLP_ERR_PEER_LOST naming the rank and its host, and this process revokes every
 * communicator it holds, so every survivor's pending call ends too (comm_ft.c: shrink). */
#include "topology/comm/comm_internal.h"
#include "topology/comm/comm_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mpi_state {
	MPI_Comm comm;
	int is_world; /* freeing it finalises MPI */
	struct mpi_state *next; /* every live communicator of this process (revoked together) */
};

static struct mpi_state *live;
static char (*hosts)[64]; /* world rank -> host name */
static int nworld;
static int failure_seen; /* a peer was lost: MPI_Finalize may wait on it, so it is skipped */

MPI_Comm clp_comm_mpi_handle(const clp_comm *c)
{
	return ((const struct mpi_state *)c->impl)->comm;
}

int clp_comm_mpi_world_rank(const clp_comm *c, int rank)
{
	MPI_Group g, w;
	int out = rank;

	if (MPI_Comm_group(clp_comm_mpi_handle(c), &g) != MPI_SUCCESS)
		return rank;
	MPI_Comm_group(MPI_COMM_WORLD, &w);
	MPI_Group_translate_ranks(g, 1, &rank, w, &out);
	MPI_Group_free(&g);
	MPI_Group_free(&w);
	return out == MPI_UNDEFINED ? rank : out;
}

const char *clp_comm_mpi_host(int world_rank)
{
	return hosts && world_rank >= 0 && world_rank < nworld ? hosts[world_rank] : "?";
}

void clp_comm_mpi_revoke_all(void)
{
	failure_seen = 1;
#ifdef CLP_HAVE_ULFM
	for (struct mpi_state *m = live; m; m = m->next)
		MPIX_Comm_revoke(m->comm);
#endif
}

int clp_comm_mpi_failure_seen(void)
{
	return failure_seen;
}

static MPI_Request *req_of(clp_comm_req *r)
{
	return (MPI_Request *)&r->impl[0];
}

static clp_status mpi_fail_peer(const clp_comm *c, int err, const char *what, const char *label,
				int peer)
{
	char msg[MPI_MAX_ERROR_STRING] = "";
	int len = 0, cls = err;

	MPI_Error_string(err, msg, &len);
	MPI_Error_class(err, &cls);
	if (clp_comm_mpi_lost_class(cls) || clp_comm_mpi_lost_now(c)) {
		char who[160];

		clp_comm_mpi_revoke_all();
		clp_comm_mpi_describe_lost(c, peer, who, sizeof(who));
		return clp_error(CLP_ERR_PEER_LOST, "rank %d: %s '%s': %s lost (%s)", c->rank, what,
				 label ? label : "", who, msg);
	}
	return clp_error(CLP_ERR_MPI, "rank %d: %s '%s': %s", c->rank, what, label ? label : "",
			 msg);
}

static clp_status mpi_fail(const clp_comm *c, int err, const char *what, const char *label)
{
	return mpi_fail_peer(c, err, what, label, -1);
}

static MPI_Comm comm_of(const clp_comm *c)
{
	return ((const struct mpi_state *)c->impl)->comm;
}

static clp_status mpi_isend(clp_comm *c, const void *buf, size_t bytes, clp_comm_req *r)
{
	int e = MPI_Isend(buf, (int)bytes, MPI_BYTE, r->peer, r->tag, comm_of(c), req_of(r));

	return e == MPI_SUCCESS ? CLP_OK : mpi_fail(c, e, "MPI_Isend", r->label);
}

static clp_status mpi_irecv(clp_comm *c, void *buf, size_t bytes, clp_comm_req *r)
{
	int e = MPI_Irecv(buf, (int)bytes, MPI_BYTE, r->peer, r->tag, comm_of(c), req_of(r));

	return e == MPI_SUCCESS ? CLP_OK : mpi_fail(c, e, "MPI_Irecv", r->label);
}

static clp_status mpi_test(clp_comm *c, clp_comm_req *r)
{
	MPI_Status st;
	int flag = 0;
	int e = MPI_Test(req_of(r), &flag, &st);

	if (e != MPI_SUCCESS) {
		r->done = 1;
		r->status = mpi_fail_peer(c, e, r->op, r->label, r->peer);
		return CLP_OK;
	}
	if (flag) {
		r->done = 1;
		r->status = CLP_OK;
	}
	return CLP_OK;
}

static void mpi_cancel(clp_comm *c, clp_comm_req *r)
{
	MPI_Request *q = req_of(r);

	if (*q == MPI_REQUEST_NULL)
		return;
	if (!strcmp(r->op, "recv"))
		MPI_Cancel(q);
	MPI_Request_free(q);
}

static clp_status mpi_ibarrier(clp_comm *c, clp_comm_req *r)
{
	int e = MPI_Ibarrier(comm_of(c), req_of(r));

	return e == MPI_SUCCESS ? CLP_OK : mpi_fail(c, e, "MPI_Ibarrier", r->label);
}

static clp_status mpi_iallgather(clp_comm *c, const void *mine, size_t bytes, void *all,
				 clp_comm_req *r)
{
	int e = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, comm_of(c),
			       req_of(r));

	return e == MPI_SUCCESS ? CLP_OK : mpi_fail(c, e, "MPI_Iallgather", r->label);
}

static clp_status mpi_iallreduce(clp_comm *c, clp_comm_type t, void *inout, size_t n,
				 clp_comm_req *r)
{
	int e = MPI_Iallreduce(MPI_IN_PLACE, inout, (int)n, t == CLP_COMM_F32 ? MPI_FLOAT :
			       MPI_DOUBLE, MPI_SUM, comm_of(c), req_of(r));

	return e == MPI_SUCCESS ? CLP_OK : mpi_fail(c, e, "MPI_Iallreduce", r->label);
}


/* MPI's split calls block; a barrier with a deadline first makes sure every rank has arrived. */
static clp_status mpi_split(clp_comm *c, int color, int key, clp_comm **out)
{
	MPI_Comm nc = MPI_COMM_NULL;
	int e;

	CLP_TRY(clp_comm_barrier(c, "before split"));
	e = MPI_Comm_split(comm_of(c), color < 0 ? MPI_UNDEFINED : color, key, &nc);
	if (e != MPI_SUCCESS)
		return mpi_fail(c, e, "MPI_Comm_split", "");
	if (nc == MPI_COMM_NULL)
		return CLP_OK;
	return clp_comm_mpi_wrap(nc, 0, out);
}

static clp_status mpi_split_host(clp_comm *c, clp_comm **out)
{
	MPI_Comm nc = MPI_COMM_NULL;
	int e;

	CLP_TRY(clp_comm_barrier(c, "before split by host"));
	e = MPI_Comm_split_type(comm_of(c), MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &nc);
	if (e != MPI_SUCCESS)
		return mpi_fail(c, e, "MPI_Comm_split_type", "shared");
	return clp_comm_mpi_wrap(nc, 0, out);
}

static void mpi_abort(clp_comm *c, int code)
{
	/* after a lost peer (ULFM) every communicator is revoked, so every survivor's calls end
	 * and each exits by itself; MPI_Abort would make `mpirun --with-ft ulfm` exit 0
	 * (Open MPI 5.0.11), hiding the failure from a supervisor. The caller exits. */
	if (failure_seen)
		return;
	MPI_Abort(comm_of(c), code);
}

static void mpi_destroy(clp_comm *c)
{
	struct mpi_state *st = c->impl;
	int fin = 0;

	MPI_Finalized(&fin);
	for (struct mpi_state **p = &live; st && *p; p = &(*p)->next)
		if (*p == st) {
			*p = st->next;
			break;
		}
	if (st && !fin) {
		MPI_Comm_free(&st->comm);
		/* after a lost peer MPI_Finalize can wait for it forever (Open MPI 5.0.x); a
		 * process that leaves without it still ends with status 0 under --with-ft */
		if (st->is_world && !failure_seen)
			MPI_Finalize();
		if (st->is_world) {
			free(hosts);
			hosts = NULL;
		}
	}
	free(st);
	free(c);
}

static const struct clp_comm_ops mpi_ops = {
	.isend = mpi_isend,
	.irecv = mpi_irecv,
	.test = mpi_test,
	.cancel = mpi_cancel,
	.ibarrier = mpi_ibarrier,
	.iallgather = mpi_iallgather,
	.iallreduce = mpi_iallreduce,
	.split = mpi_split,
	.split_host = mpi_split_host,
	.abort_job = mpi_abort,
	.destroy = mpi_destroy,
	.shrink = clp_comm_mpi_shrink,
};

clp_status clp_comm_mpi_wrap(MPI_Comm comm, int is_world, clp_comm **out)
{
	struct mpi_state *st = calloc(1, sizeof(*st));
	int rank = 0, size = 1;
	clp_comm *c;

	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	c = clp_comm_alloc(&mpi_ops, "mpi", rank, size);
	if (!st || !c) {
		free(st);
		free(c);
		MPI_Comm_free(&comm);
		return clp_error(CLP_ERR_NOMEM, "out of host memory creating a communicator");
	}
	st->comm = comm;
	st->is_world = is_world;
	st->next = live;
	live = st;
	c->impl = st;
	*out = c;
	return CLP_OK;
}

clp_status clp_comm_mpi_world(int *argc, char ***argv, clp_comm **out)
{
	int inited = 0, provided = 0, e;
	MPI_Comm dup = MPI_COMM_NULL;

	*out = NULL;
	MPI_Initialized(&inited);
	if (!inited) {
		e = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
		if (e != MPI_SUCCESS)
			return clp_error(CLP_ERR_MPI, "MPI_Init_thread failed (error %d)", e);
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	e = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	if (e != MPI_SUCCESS)
		return clp_error(CLP_ERR_MPI, "MPI_Comm_dup(MPI_COMM_WORLD) failed (error %d)", e);
	MPI_Comm_size(MPI_COMM_WORLD, &nworld);
	hosts = calloc((size_t)nworld, sizeof(*hosts));
	if (hosts) { /* the host of every rank, for messages about a lost one */
		char mine[64] = "";

		gethostname(mine, sizeof(mine) - 1);
		if (MPI_Allgather(mine, 64, MPI_CHAR, hosts, 64, MPI_CHAR, dup) != MPI_SUCCESS) {
			free(hosts);
			hosts = NULL;
		}
	}
	return clp_comm_mpi_wrap(dup, !inited, out);
}
