/* The single-process transport: one rank. A send to rank 0 is copied and waits, in order, for a
 * receive with the same tag (or meets one already posted); collectives are copies. A receive
 * that nothing sends to never completes, so waits on it time out as they would under MPI. */
#include "topology/comm/comm_internal.h"

#include <stdlib.h>
#include <string.h>

struct self_msg { /* a send not yet received */
	int tag;
	size_t bytes;
	unsigned char *data;
	struct self_msg *next;
};

struct self_recv { /* a receive not yet matched */
	clp_comm_req *req;
	void *buf;
	struct self_recv *next;
};

struct self_state {
	struct self_msg *msgs;
	struct self_recv *recvs;
};

static clp_status deliver(clp_comm *c, clp_comm_req *r, void *buf, const void *data,
			  size_t bytes)
{
	r->done = 1;
	if (bytes > r->bytes) {
		r->status = clp_error(CLP_ERR_INVALID, "rank %d: recv '%s' from rank %d (tag %d): "
				      "message of %zu bytes is larger than the %zu-byte buffer",
				      c->rank, r->label, r->peer, r->tag, bytes, r->bytes);
		return CLP_OK;
	}
	memcpy(buf, data, bytes);
	r->status = CLP_OK;
	return CLP_OK;
}

static clp_status self_isend(clp_comm *c, const void *buf, size_t bytes, clp_comm_req *r)
{
	struct self_state *st = c->impl;
	struct self_recv **pp = &st->recvs;
	struct self_msg *m, **tail;

	for (; *pp; pp = &(*pp)->next) {
		struct self_recv *rv = *pp;

		if (rv->req->tag != r->tag)
			continue;
		*pp = rv->next;
		deliver(c, rv->req, rv->buf, buf, bytes);
		free(rv);
		r->done = 1;
		return CLP_OK;
	}
	m = calloc(1, sizeof(*m));
	if (!m || !(m->data = malloc(bytes ? bytes : 1))) {
		free(m);
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory buffering send '%s'",
				 c->rank, r->label);
	}
	memcpy(m->data, buf, bytes);
	m->tag = r->tag;
	m->bytes = bytes;
	for (tail = &st->msgs; *tail; tail = &(*tail)->next)
		;
	*tail = m;
	r->done = 1; /* buffered: the sender's buffer is free again */
	return CLP_OK;
}

static clp_status self_irecv(clp_comm *c, void *buf, size_t bytes, clp_comm_req *r)
{
	struct self_state *st = c->impl;
	struct self_msg **pp = &st->msgs;
	struct self_recv *rv, **tail;

	for (; *pp; pp = &(*pp)->next) {
		struct self_msg *m = *pp;

		if (m->tag != r->tag)
			continue;
		*pp = m->next;
		deliver(c, r, buf, m->data, m->bytes);
		free(m->data);
		free(m);
		return CLP_OK;
	}
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
	rv->req = r;
	rv->buf = buf;
	for (tail = &st->recvs; *tail; tail = &(*tail)->next)
		;
	*tail = rv;
	return CLP_OK;
}

static clp_status self_test(clp_comm *c, clp_comm_req *r)
{
	return CLP_OK; /* completion happens when the matching call is made */
}

static void self_cancel(clp_comm *c, clp_comm_req *r)
{
	struct self_state *st = c->impl;

	for (struct self_recv **pp = &st->recvs; *pp; pp = &(*pp)->next)
		if ((*pp)->req == r) {
			struct self_recv *rv = *pp;

			*pp = rv->next;
			free(rv);
			return;
		}
}

static clp_status self_ibarrier(clp_comm *c, clp_comm_req *r)
{
	r->done = 1;
	return CLP_OK;
}

static clp_status self_iallgather(clp_comm *c, const void *mine, size_t bytes, void *all,
				  clp_comm_req *r)
{
	if (bytes)
		memmove(all, mine, bytes);
	r->done = 1;
	return CLP_OK;
}

static clp_status self_iallreduce(clp_comm *c, clp_comm_type t, void *inout, size_t n,
				  clp_comm_req *r)
{
	r->done = 1;
	return CLP_OK;
}

static clp_status self_split(clp_comm *c, int color, int key, clp_comm **out)
{
	if (color < 0)
		return CLP_OK;
	return clp_comm_self(out);
}

static clp_status self_split_host(clp_comm *c, clp_comm **out)
{
	return clp_comm_self(out);
}

static void self_abort(clp_comm *c, int code)
{
}

static void self_destroy(clp_comm *c)
{
	struct self_state *st = c->impl;

	while (st && st->msgs) {
		struct self_msg *m = st->msgs;

		st->msgs = m->next;
		free(m->data);
		free(m);
	}
	while (st && st->recvs) {
		struct self_recv *rv = st->recvs;

		st->recvs = rv->next;
		free(rv);
	}
	free(st);
	free(c);
}

static const struct clp_comm_ops self_ops = {
	self_isend,     self_irecv, self_test,	     self_cancel,     self_ibarrier,
	self_iallgather, self_iallreduce, self_split, self_split_host, self_abort,
	self_destroy,	NULL,
};

clp_status clp_comm_self(clp_comm **out)
{
	clp_comm *c = clp_comm_alloc(&self_ops, "self", 0, 1);

	*out = NULL;
	if (!c)
		return clp_error(CLP_ERR_NOMEM, "out of host memory creating a communicator");
	c->impl = calloc(1, sizeof(struct self_state));
	if (!c->impl) {
		free(c);
		return clp_error(CLP_ERR_NOMEM, "out of host memory creating a communicator");
	}
	*out = c;
	return CLP_OK;
}

#ifndef CLPIPE_HAVE_MPI
clp_status clp_comm_mpi_world(int *argc, char ***argv, clp_comm **out)
{
	*out = NULL;
	return clp_error(CLP_ERR_UNSUPPORTED, "this clpipe was built without MPI "
			 "(CLPIPE_WITH_MPI=OFF); it cannot join an mpirun job");
}
#endif
