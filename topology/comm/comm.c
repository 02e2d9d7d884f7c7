/* The transport's shared part: requests, deadline-bounded polling with messages that name the
 * ranks, and collectives derived from the primitives (allgatherv, the rank-ordered allreduce). */
#include "topology/comm/comm_internal.h"
#include "cl/base/clock.h"
#ifdef CLPIPE_HAVE_MPI
#include "topology/comm/comm_mpi.h"
#endif

#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CLP_COMM_DEFAULT_TIMEOUT 60.0

double clp_comm_now(void)
{
	return clp_now();
}

int clp_comm_launched(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

clp_comm *clp_comm_alloc(const struct clp_comm_ops *ops, const char *kind, int rank, int size)
{
	clp_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ops = ops;
	c->kind = kind;
	c->rank = rank;
	c->size = size;
	c->timeout = CLP_COMM_DEFAULT_TIMEOUT;
	if (gethostname(c->host, sizeof(c->host)) != 0)
		snprintf(c->host, sizeof(c->host), "localhost");
	c->host[sizeof(c->host) - 1] = '\0';
	return c;
}

clp_status clp_comm_world(int *argc, char ***argv, clp_comm **out)
{
	if (clp_comm_launched())
		return clp_comm_mpi_world(argc, argv, out);
	return clp_comm_self(out);
}

void clp_comm_free(clp_comm *c)
{
	if (c)
		c->ops->destroy(c);
}

int clp_comm_rank(const clp_comm *c)
{
	return c->rank;
}

int clp_comm_size(const clp_comm *c)
{
	return c->size;
}

const char *clp_comm_host(const clp_comm *c)
{
	return c->host;
}

const char *clp_comm_kind(const clp_comm *c)
{
	return c->kind;
}

void clp_comm_set_timeout(clp_comm *c, double seconds)
{
	c->timeout = seconds > 0 ? seconds : CLP_COMM_DEFAULT_TIMEOUT;
}

double clp_comm_timeout(const clp_comm *c)
{
	return c->timeout;
}

static clp_comm_req *req_new(const char *op, const char *label, int peer, int tag, size_t bytes)
{
	clp_comm_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->op = op;
	snprintf(r->label, sizeof(r->label), "%s", label ? label : "");
	r->peer = peer;
	r->tag = tag;
	r->bytes = bytes;
	return r;
}

static clp_status check_p2p(clp_comm *c, const char *op, size_t bytes, int peer, int tag,
			    const char *label)
{
	if (peer < 0 || peer >= c->size)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s '%s': peer %d is not a rank (0..%d)",
				 c->rank, op, label ? label : "", peer, c->size - 1);
	if (tag < 0 || bytes > INT_MAX)
		return clp_error(CLP_ERR_INVALID, "rank %d: %s '%s' with rank %d: tag %d or size "
				 "%zu bytes out of range", c->rank, op, label ? label : "", peer,
				 tag, bytes);
	return CLP_OK;
}

static clp_status start_p2p(clp_comm *c, int is_send, void *buf, size_t bytes, int peer,
			    int tag, const char *label, clp_comm_req **req)
{
	const char *op = is_send ? "send" : "recv";
	clp_comm_req *r;
	clp_status s;

	*req = NULL;
	CLP_TRY(check_p2p(c, op, bytes, peer, tag, label));
	r = req_new(op, label, peer, tag, bytes);
	if (!r)
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
	s = is_send ? c->ops->isend(c, buf, bytes, r) : c->ops->irecv(c, buf, bytes, r);
	if (s != CLP_OK) {
		free(r);
		return s;
	}
	*req = r;
	return CLP_OK;
}

clp_status clp_comm_isend(clp_comm *c, const void *buf, size_t bytes, int peer, int tag,
			  const char *label, clp_comm_req **req)
{
	return start_p2p(c, 1, (void *)buf, bytes, peer, tag, label, req);
}

clp_status clp_comm_irecv(clp_comm *c, void *buf, size_t bytes, int peer, int tag,
			  const char *label, clp_comm_req **req)
{
	return start_p2p(c, 0, buf, bytes, peer, tag, label, req);
}

clp_status clp_comm_test(clp_comm *c, clp_comm_req **req, int *done)
{
	clp_comm_req *r = *req;
	clp_status s;

	*done = 0;
	if (!r) {
		*done = 1;
		return CLP_OK;
	}
	s = c->ops->test(c, r);
	if (s != CLP_OK)
		return s;
	if (!r->done)
		return CLP_OK;
	*done = 1;
	s = r->status;
	free(r);
	*req = NULL;
	return s;
}

static clp_status timed_out(clp_comm *c, const clp_comm_req *r, double waited)
{
	if (!strcmp(r->op, "send") || !strcmp(r->op, "recv"))
		return clp_error(CLP_ERR_TIMEOUT, "rank %d: %s '%s' %s rank %d (tag %d, %zu bytes) "
				 "timed out after %.1f s", c->rank, r->op, r->label,
				 strcmp(r->op, "send") ? "from" : "to", r->peer, r->tag,
				 r->bytes, waited);
	return clp_error(CLP_ERR_TIMEOUT, "rank %d: %s '%s' over %d ranks timed out after %.1f s "
			 "(a rank has not joined it)", c->rank, r->op, r->label, c->size,
			 waited);
}

clp_status clp_comm_wait(clp_comm *c, clp_comm_req **req, double timeout_s)
{
	double t0 = clp_comm_now(), now = t0;
	long polls = 0;

	if (timeout_s <= 0)
		timeout_s = c->timeout;
	for (;;) {
		int done;
		clp_status s = clp_comm_test(c, req, &done);

		if (s != CLP_OK || done)
			return s;
		/* Spin first (latency), then yield the core to the other ranks and threads that
		 * share it, then sleep a little: waits on a busy 2-core machine must not starve
		 * the rank they wait for. */
		if ((++polls & 63) == 0)
			now = clp_comm_now();
		if (now - t0 > timeout_s)
			return timed_out(c, *req, now - t0);
		if (now - t0 > 0.05) {
			struct timespec ts = {0, 100000};

			nanosleep(&ts, NULL);
			now = clp_comm_now();
		} else if (now - t0 > 0.002) {
			sched_yield();
		}
	}
}

void clp_comm_cancel(clp_comm *c, clp_comm_req **req)
{
	if (!*req)
		return;
	c->ops->cancel(c, *req);
	free(*req);
	*req = NULL;
}

/* Start a collective with the ops' call, then wait for it with the communicator's deadline. On
 * timeout the request is abandoned: MPI cannot cancel a collective, and the job is broken. */
static clp_status collective(clp_comm *c, clp_comm_req *r, clp_status started)
{
	clp_status s;

	if (started != CLP_OK) {
		free(r);
		return started;
	}
	s = clp_comm_wait(c, &r, c->timeout);
	if (s == CLP_ERR_TIMEOUT)
		free(r);
	return s;
}

clp_status clp_comm_barrier(clp_comm *c, const char *label)
{
	clp_comm_req *r = req_new("barrier", label, -1, -1, 0);

	if (!r)
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
	return collective(c, r, c->ops->ibarrier(c, r));
}

clp_status clp_comm_allgather(clp_comm *c, const void *mine, size_t bytes, void *all,
			      const char *label)
{
	clp_comm_req *r;

	if (bytes > INT_MAX)
		return clp_error(CLP_ERR_INVALID, "rank %d: allgather '%s' of %zu bytes per rank "
				 "is over the limit", c->rank, label ? label : "", bytes);
	r = req_new("allgather", label, -1, -1, bytes);
	if (!r)
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
	return collective(c, r, c->ops->iallgather(c, mine, bytes, all, r));
}

clp_status clp_comm_allgatherv(clp_comm *c, const void *mine, size_t bytes, void **all,
			       size_t **offs, const char *label)
{
	uint64_t my = bytes, maxb = 0, *sizes;
	unsigned char *pad = NULL, *got = NULL, *packed = NULL;
	size_t *o = NULL;
	clp_status s;
	int p = c->size;

	*all = NULL;
	*offs = NULL;
	sizes = calloc((size_t)p, sizeof(*sizes));
	o = calloc((size_t)p + 1, sizeof(*o));
	if (!sizes || !o) {
		s = clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
		goto out;
	}
	if ((s = clp_comm_allgather(c, &my, sizeof(my), sizes, label)) != CLP_OK)
		goto out;
	for (int r = 0; r < p; r++) {
		maxb = sizes[r] > maxb ? sizes[r] : maxb;
		o[r + 1] = o[r] + (size_t)sizes[r];
	}
	pad = calloc(maxb + 1, 1);
	got = malloc((size_t)maxb * (size_t)p + 1);
	packed = malloc(o[p] + 1);
	if (!pad || !got || !packed) {
		s = clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory gathering %llu bytes",
			      c->rank, (unsigned long long)(maxb * (uint64_t)p));
		goto out;
	}
	if (bytes)
		memcpy(pad, mine, bytes);
	if ((s = clp_comm_allgather(c, pad, (size_t)maxb, got, label)) != CLP_OK)
		goto out;
	for (int r = 0; r < p; r++)
		memcpy(packed + o[r], got + (size_t)r * maxb, (size_t)sizes[r]);
	*all = packed;
	*offs = o;
	packed = NULL;
	o = NULL;
out:
	free(sizes);
	free(pad);
	free(got);
	free(packed);
	free(o);
	return s;
}

static clp_status allreduce_ordered(clp_comm *c, clp_comm_type t, void *inout, size_t n,
				    const char *label)
{
	size_t esz = t == CLP_COMM_F32 ? sizeof(float) : sizeof(double);
	size_t chunk = ((size_t)64 << 20) / (esz * (size_t)c->size);
	unsigned char *all;
	clp_status s = CLP_OK;

	if (chunk == 0)
		chunk = 1;
	if (chunk > n)
		chunk = n ? n : 1;
	all = malloc(chunk * esz * (size_t)c->size);
	if (!all)
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
	for (size_t at = 0; at < n && s == CLP_OK; at += chunk) {
		size_t m = n - at < chunk ? n - at : chunk;

		s = clp_comm_allgather(c, (unsigned char *)inout + at * esz, m * esz, all, label);
		for (size_t i = 0; i < m && s == CLP_OK; i++) {
			if (t == CLP_COMM_F32) {
				float acc = ((const float *)all)[i];

				for (int r = 1; r < c->size; r++)
					acc += ((const float *)(all + (size_t)r * m * esz))[i];
				((float *)inout)[at + i] = acc;
			} else {
				double acc = ((const double *)all)[i];

				for (int r = 1; r < c->size; r++)
					acc += ((const double *)(all + (size_t)r * m * esz))[i];
				((double *)inout)[at + i] = acc;
			}
		}
	}
	free(all);
	return s;
}

clp_status clp_comm_allreduce_sum(clp_comm *c, clp_comm_type t, void *inout, size_t n,
				  int ordered, const char *label)
{
	size_t esz = t == CLP_COMM_F32 ? sizeof(float) : sizeof(double);

	if (t != CLP_COMM_F32 && t != CLP_COMM_F64)
		return clp_error(CLP_ERR_INVALID, "rank %d: allreduce '%s': unknown element type %d",
				 c->rank, label ? label : "", (int)t);
	if (c->size == 1 || n == 0)
		return CLP_OK;
	if (ordered)
		return allreduce_ordered(c, t, inout, n, label);
	for (size_t at = 0; at < n;) {
		size_t m = n - at < ((size_t)1 << 30) ? n - at : ((size_t)1 << 30);
		clp_comm_req *r = req_new("allreduce", label, -1, -1, m * esz);
		clp_status s;

		if (!r)
			return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", c->rank);
		s = collective(c, r,
			       c->ops->iallreduce(c, t, (unsigned char *)inout + at * esz, m, r));
		if (s != CLP_OK)
			return s;
		at += m;
	}
	return CLP_OK;
}

clp_status clp_comm_split(clp_comm *c, int color, int key, clp_comm **out)
{
	*out = NULL;
	return c->ops->split(c, color, key, out);
}

clp_status clp_comm_split_host(clp_comm *c, clp_comm **out)
{
	*out = NULL;
	return c->ops->split_host(c, out);
}

int clp_comm_ft(const clp_comm *c)
{
#ifdef CLP_HAVE_ULFM
	const char *e = getenv("OMPI_MCA_mpi_ft_enable");

	return c && c->ops->shrink && !strcmp(c->kind, "mpi") && e && !strcmp(e, "1");
#else
	(void)c;
	return 0;
#endif
}

clp_status clp_comm_shrink(clp_comm *c, clp_comm **out)
{
	*out = NULL;
	if (!c->ops->shrink)
		return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: the %s transport cannot shrink",
				 c->rank, c->kind);
	return c->ops->shrink(c, out);
}

int clp_comm_failure_seen(void)
{
#ifdef CLPIPE_HAVE_MPI
	return clp_comm_mpi_failure_seen();
#else
	return 0;
#endif
}

int clp_comm_failed_ranks(const clp_comm *c, int *ranks, int max)
{
#ifdef CLPIPE_HAVE_MPI
	if (!strcmp(c->kind, "mpi"))
		return clp_comm_mpi_failed(c, ranks, max);
#endif
	(void)ranks;
	(void)max;
	return 0;
}

const char *clp_comm_peer_host(const clp_comm *c, int r)
{
#ifdef CLPIPE_HAVE_MPI
	if (!strcmp(c->kind, "mpi"))
		return clp_comm_mpi_host(clp_comm_mpi_world_rank(c, r));
#endif
	return r == c->rank ? c->host : "?";
}

void clp_comm_abort(clp_comm *c, int code)
{
	c->ops->abort_job(c, code);
}
