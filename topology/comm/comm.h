/* The transport: how ranks exchange bytes. One small interface, two implementations:
 *   mpi   Open MPI (built when CLPIPE_WITH_MPI), used when the process was started by mpirun
 *   self  a single-process stand-in (one rank; a send to rank 0 is received by a matching
 *         receive), so the logic above it is testable without mpirun
 *
 * Nothing here waits forever. Open MPI 4.1 makes progress only inside MPI calls and has no fault
 * tolerance, so every wait polls (which makes progress) until a deadline; on expiry it returns
 * CLP_ERR_TIMEOUT with a message naming this rank, the peer and the label the caller gave
 * ("rank 1: recv 'activations mb 3' from rank 0 (tag 7, 4096 bytes) timed out after 30.0 s").
 * Collectives are the nonblocking MPI-3 ones, polled the same way.
 *
 * Lifecycle: clp_comm_world() (or _self/_mpi_world) -> operations -> clp_comm_free(); freeing
 * the world communicator finalises MPI. Sub-communicators from clp_comm_split*() are freed
 * before it. One thread drives a communicator. Messages are at most INT_MAX bytes. */
#ifndef CLP_TOPO_COMM_H
#define CLP_TOPO_COMM_H

#include <stddef.h>

#include "cl/base/status.h"

typedef struct clp_comm clp_comm;
typedef struct clp_comm_req clp_comm_req;

typedef enum clp_comm_type { CLP_COMM_F32 = 0, CLP_COMM_F64 } clp_comm_type;

/* 1 when started by a launcher that provides an MPI world (mpirun, srun): the environment
 * carries OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK. */
int clp_comm_launched(void);

/* The world: MPI when launched by mpirun and built with MPI, else self. */
clp_status clp_comm_world(int *argc, char ***argv, clp_comm **out);
clp_status clp_comm_self(clp_comm **out);
/* MPI's world (MPI_Init_thread, MPI_THREAD_FUNNELED); CLP_ERR_UNSUPPORTED without MPI. */
clp_status clp_comm_mpi_world(int *argc, char ***argv, clp_comm **out);
void clp_comm_free(clp_comm *c);

int clp_comm_rank(const clp_comm *c);
int clp_comm_size(const clp_comm *c);
const char *clp_comm_host(const clp_comm *c); /* this process's host name */
const char *clp_comm_kind(const clp_comm *c); /* "mpi" or "self" */

/* The deadline, in seconds, of waits and collectives that are not given one (default 60). */
void clp_comm_set_timeout(clp_comm *c, double seconds);
double clp_comm_timeout(const clp_comm *c);

/* Nonblocking point to point. buf must stay valid until the request completes. label (may be
 * NULL) names the transfer in errors; it is copied. tag >= 0. */
clp_status clp_comm_isend(clp_comm *c, const void *buf, size_t bytes, int peer, int tag,
			  const char *label, clp_comm_req **req);
clp_status clp_comm_irecv(clp_comm *c, void *buf, size_t bytes, int peer, int tag,
			  const char *label, clp_comm_req **req);
/* Poll once (this makes progress). When done, *req is released and set to NULL. */
clp_status clp_comm_test(clp_comm *c, clp_comm_req **req, int *done);
/* Poll until done or timeout_s (<= 0: the communicator's timeout). On CLP_ERR_TIMEOUT the
 * request is still pending: wait again, or give it up with clp_comm_cancel(). */
clp_status clp_comm_wait(clp_comm *c, clp_comm_req **req, double timeout_s);
/* Give up a pending request (a receive is cancelled; a send is left to MPI) and release it. */
void clp_comm_cancel(clp_comm *c, clp_comm_req **req);

/* Collectives over every rank of c, each with the communicator's deadline. */
clp_status clp_comm_barrier(clp_comm *c, const char *label);
/* all[r * bytes ...] receives rank r's `bytes` bytes from mine. */
clp_status clp_comm_allgather(clp_comm *c, const void *mine, size_t bytes, void *all,
			      const char *label);
/* Different sizes per rank: *all is malloc()ed, holding rank r's bytes at offs[r] (offs has
 * size + 1 entries, malloc()ed); free both. */
clp_status clp_comm_allgatherv(clp_comm *c, const void *mine, size_t bytes, void **all,
			       size_t **offs, const char *label);
/* Sum n elements of type t across ranks, in place. ordered = 1 adds in rank order, (((x0 + x1)
 * + x2) + ...), the same on every rank and in every run: bitwise reproducible, at the price of
 * gathering every rank's vector (done in chunks). ordered = 0 lets MPI choose. */
clp_status clp_comm_allreduce_sum(clp_comm *c, clp_comm_type t, void *inout, size_t n,
				  int ordered, const char *label);

/* New communicators: ranks with the same color, ordered by key then rank (color < 0: this rank
 * takes part in none and *out is NULL); or the ranks sharing this host's memory
 * (MPI_Comm_split_type SHARED). */
clp_status clp_comm_split(clp_comm *c, int color, int key, clp_comm **out);
clp_status clp_comm_split_host(clp_comm *c, clp_comm **out);

/* Fault tolerance (ULFM: Open MPI 5 built with it, started by `mpirun --with-ft ulfm`). A lost
 * peer makes every pending and later call on this process's communicators return
 * CLP_ERR_PEER_LOST naming the rank and its host (this process revokes them all, so every
 * survivor learns it). clp_comm_ft: 1 when the survivors can go on (built with ULFM and the job
 * started with it), else a lost rank ends the job as before. clp_comm_shrink: the communicator
 * of c's live ranks, in c's order (a collective over the survivors; CLP_ERR_UNSUPPORTED
 * without ULFM). */
int clp_comm_ft(const clp_comm *c);
clp_status clp_comm_shrink(clp_comm *c, clp_comm **out);
/* 1 once this process has seen a lost peer (freeing the world then skips MPI_Finalize, which
 * would wait for the dead rank). */
int clp_comm_failure_seen(void);
/* The ranks of c this process already knows to have failed, at most max (ULFM; else 0). */
int clp_comm_failed_ranks(const clp_comm *c, int *ranks, int max);
/* The host of c's rank r as the job started ("?" when unknown; this host for self). */
const char *clp_comm_peer_host(const clp_comm *c, int r);

/* Monotonic time in seconds (what deadlines are measured in). */
double clp_comm_now(void);

/* End the whole job (MPI_Abort). For the command line only, after a fatal error on one rank;
 * the self communicator returns and the caller exits, as MPI does after a lost peer (ULFM:
 * every survivor's calls end and it exits non-zero by itself). */
void clp_comm_abort(clp_comm *c, int code);

#endif
