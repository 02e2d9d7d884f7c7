/* What ULFM (Open MPI 5's fault-tolerant MPI, CLP_HAVE_ULFM) adds to the MPI transport: a lost
 * peer told apart from other errors and named with its host, and the shrink that makes the
 * communicator of the survivors. Without ULFM a lost peer is never reported as such (Open MPI
 * 4.1 ends the job) and shrinking is CLP_ERR_UNSUPPORTED. */
#include "topology/comm/comm_mpi.h"

#include <stdio.h>
#include <string.h>

int clp_comm_mpi_lost_class(int cls)
{
#ifdef CLP_HAVE_ULFM
	return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_PROC_FAILED_PENDING ||
	       cls == MPIX_ERR_REVOKED;
#else
	(void)cls;
	return 0;
#endif
}

int clp_comm_mpi_lost_now(const clp_comm *c)
{
#ifdef CLP_HAVE_ULFM
	MPI_Group failed = MPI_GROUP_NULL;
	int flag = 0, nf = 0;

	MPIX_Comm_is_revoked(clp_comm_mpi_handle(c), &flag);
	if (!flag && MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed) == MPI_SUCCESS) {
		MPI_Group_size(failed, &nf);
		MPI_Group_free(&failed);
	}
	return flag || nf > 0;
#else
	(void)c;
	return 0;
#endif
}

static void name_rank(const clp_comm *c, int r, char *buf, size_t n)
{
	int w = clp_comm_mpi_world_rank(c, r);

	snprintf(buf, n, "rank %d (host %s, world rank %d)", r, clp_comm_mpi_host(w), w);
}

void clp_comm_mpi_describe_lost(const clp_comm *c, int peer, char *buf, size_t n)
{
#ifdef CLP_HAVE_ULFM
	MPI_Group failed = MPI_GROUP_NULL, g = MPI_GROUP_NULL;
	int nf = 0;

	snprintf(buf, n, "a rank");
	if (MPIX_Comm_get_failed(clp_comm_mpi_handle(c), &failed) == MPI_SUCCESS)
		MPI_Group_size(failed, &nf);
	if (nf > 0 && MPI_Comm_group(clp_comm_mpi_handle(c), &g) == MPI_SUCCESS) {
		int fr = 0, r = MPI_UNDEFINED;

		/* the first failed rank, as a rank of c */
		MPI_Group_translate_ranks(failed, 1, &fr, g, &r);
		if (peer >= 0 && nf == 1 && r != peer)
			peer = -1;
		name_rank(c, peer >= 0 ? peer : r, buf, n);
		if (nf > 1) {
			size_t l = strlen(buf);

			snprintf(buf + l, n - l, " and %d more", nf - 1);
		}
		MPI_Group_free(&g);
	} else if (peer >= 0 && nf > 0) {
		name_rank(c, peer, buf, n);
	}
	if (failed != MPI_GROUP_NULL)
		MPI_Group_free(&failed);
#else
	if (peer >= 0)
		name_rank(c, peer, buf, n);
	else
		snprintf(buf, n, "a rank");
#endif
}

int clp_comm_mpi_failed(const clp_comm *c, int *ranks, int max)
{
	int nf = 0;
#ifdef CLP_HAVE_ULFM
	MPI_Group failed = MPI_GROUP_NULL, g = MPI_GROUP_NULL;

	if (MPIX_Comm_get_failed(clp_comm_mpi_handle(c), &failed) != MPI_SUCCESS)
		return 0;
	MPI_Group_size(failed, &nf);
	if (nf > 0 && MPI_Comm_group(clp_comm_mpi_handle(c), &g) == MPI_SUCCESS) {
		for (int i = 0; i < nf && i < max; i++) {
			int r = MPI_UNDEFINED;

			MPI_Group_translate_ranks(failed, 1, &i, g, &r);
			ranks[i] = r;
		}
		MPI_Group_free(&g);
	}
	MPI_Group_free(&failed);
#else
	(void)c;
	(void)ranks;
	(void)max;
#endif
	return nf < max ? nf : max;
}

clp_status clp_comm_mpi_shrink(clp_comm *c, clp_comm **out)
{
#ifdef CLP_HAVE_ULFM
	MPI_Comm nc = MPI_COMM_NULL;
	int e;

	clp_comm_mpi_revoke_all();
	e = MPIX_Comm_shrink(clp_comm_mpi_handle(c), &nc);
	if (e != MPI_SUCCESS) {
		char msg[MPI_MAX_ERROR_STRING] = "";
		int len = 0;

		MPI_Error_string(e, msg, &len);
		return clp_error(CLP_ERR_PEER_LOST, "rank %d: MPIX_Comm_shrink over %d ranks: %s",
				 c->rank, c->size, msg);
	}
	return clp_comm_mpi_wrap(nc, 0, out);
#else
	return clp_error(CLP_ERR_UNSUPPORTED, "rank %d: shrinking a communicator needs an MPI "
			 "with ULFM (this build's has none: see docs/PIPELINE.md, Failures)",
			 c->rank);
#endif
}
