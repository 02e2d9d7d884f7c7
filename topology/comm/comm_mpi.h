/* The MPI transport's internals shared by comm_mpi.c (the operations) and comm_ft.c (what ULFM
 * adds: telling a lost peer from other errors, naming it, shrinking). */
#ifndef CLP_TOPO_COMM_MPI_H
#define CLP_TOPO_COMM_MPI_H

#include <mpi.h>
#ifdef CLP_HAVE_ULFM
#include <mpi-ext.h>
#endif

#include "topology/comm/comm_internal.h"

MPI_Comm clp_comm_mpi_handle(const clp_comm *c);
clp_status clp_comm_mpi_wrap(MPI_Comm comm, int is_world, clp_comm **out);
/* rank of c in MPI_COMM_WORLD, and a world rank's host (gathered at start; "?" unknown) */
int clp_comm_mpi_world_rank(const clp_comm *c, int rank);
const char *clp_comm_mpi_host(int world_rank);
/* This process saw a lost peer: revoke every communicator it holds (ULFM; else only note it). */
void clp_comm_mpi_revoke_all(void);
int clp_comm_mpi_failure_seen(void);

/* 1 for MPIX_ERR_PROC_FAILED, _PENDING and MPIX_ERR_REVOKED (always 0 without ULFM). */
int clp_comm_mpi_lost_class(int cls);
/* 1 when c is revoked or a rank of the job is known to have failed: another error class then
 * is a consequence (Open MPI 5.0.11's nonblocking collectives end with MPI_ERR_OTHER when a
 * later round meets the failure). */
int clp_comm_mpi_lost_now(const clp_comm *c);
/* "rank 3 (host h, world rank 3)" for peer >= 0 when it is the lost one, else the ranks c
 * knows to have failed ("a rank" when none is known yet: a revoke from another survivor). */
void clp_comm_mpi_describe_lost(const clp_comm *c, int peer, char *buf, size_t n);
/* The ranks of c this process knows to have failed (at most max of them); their count. */
int clp_comm_mpi_failed(const clp_comm *c, int *ranks, int max);
/* ops->shrink: revoke c and make the communicator of its live ranks. */
clp_status clp_comm_mpi_shrink(clp_comm *c, clp_comm **out);

#endif
