/* The transport's implementation interface (internal): each implementation fills a table of
 * operations; comm.c holds what they share (deadlines, polling, messages, derived collectives). */
#ifndef CLP_TOPO_COMM_INTERNAL_H
#define CLP_TOPO_COMM_INTERNAL_H

#include "topology/comm/comm.h"

struct clp_comm_req {
	const char *op;  /* "send", "recv", "barrier", "allgather", "allreduce" */
	char label[96];
	int peer, tag;
	size_t bytes;
	int done;
	clp_status status; /* of a completed request */
	void *impl[4];     /* the implementation's handle (an MPI_Request, a queue entry) */
};

struct clp_comm_ops {
	clp_status (*isend)(clp_comm *c, const void *buf, size_t bytes, clp_comm_req *r);
	clp_status (*irecv)(clp_comm *c, void *buf, size_t bytes, clp_comm_req *r);
	/* Set r->done (and r->status) when complete; the request is then finished. */
	clp_status (*test)(clp_comm *c, clp_comm_req *r);
	void (*cancel)(clp_comm *c, clp_comm_req *r);
	clp_status (*ibarrier)(clp_comm *c, clp_comm_req *r);
	clp_status (*iallgather)(clp_comm *c, const void *mine, size_t bytes, void *all,
				 clp_comm_req *r);
	/* n <= 2^30 */
	clp_status (*iallreduce)(clp_comm *c, clp_comm_type t, void *inout, size_t n,
				 clp_comm_req *r);
	clp_status (*split)(clp_comm *c, int color, int key, clp_comm **out);
	clp_status (*split_host)(clp_comm *c, clp_comm **out);
	void (*abort_job)(clp_comm *c, int code); /* MPI_Abort: for the command line only */
	void (*destroy)(clp_comm *c);
	/* NULL: unsupported. Revoke c; *out: the communicator of its live ranks. */
	clp_status (*shrink)(clp_comm *c, clp_comm **out);
};

struct clp_comm {
	const struct clp_comm_ops *ops;
	const char *kind;
	int rank, size;
	char host[256];
	double timeout;
	void *impl;
};

/* A new communicator with host name and default timeout filled in. */
clp_comm *clp_comm_alloc(const struct clp_comm_ops *ops, const char *kind, int rank, int size);


#endif
