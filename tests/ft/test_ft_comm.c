/* The transport under ULFM (mpirun --with-ft ulfm -np 3): rank 2 raises SIGKILL on itself.
 * Rank 0's receive from it and rank 1's receive from rank 0 (alive, but revoked by rank 0 on
 * its error) both end with CLP_ERR_PEER_LOST, not a hang or an abort: rank 0's names rank 2
 * and its host; then a barrier on the revoked communicator fails the same way, the survivors
 * shrink to 2 ranks, in order, and an all-reduce and a send/receive over them work. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/harness.h"
#include "topology/comm/comm.h"

int main(int argc, char **argv)
{
	clp_comm *w = NULL, *s = NULL;
	clp_comm_req *q = NULL;
	double x = 1.0;
	char buf[64] = "";
	int rank;

	CHECK_OK(clp_comm_world(&argc, &argv, &w));
	CHECK(clp_comm_size(w) == 3, "needs 3 ranks, got %d", clp_comm_size(w));
	CHECK(clp_comm_ft(w), "the job runs under ULFM (mpirun --with-ft ulfm)");
	clp_comm_set_timeout(w, 120);
	rank = clp_comm_rank(w);
	CHECK_OK(clp_comm_barrier(w, "start"));
	if (rank == 2)
		raise(SIGKILL);
	CHECK_OK(clp_comm_irecv(w, buf, sizeof(buf), rank == 0 ? 2 : 0, 5, "from the next", &q));
	CHECK_ERR(clp_comm_wait(w, &q, 0), CLP_ERR_PEER_LOST, "lost");
	if (rank == 0)
		CHECK(strstr(clp_last_error(), "rank 2 (host ") != NULL,
		      "the message names the lost rank and its host: %s", clp_last_error());
	clp_comm_cancel(w, &q);
	CHECK(clp_comm_failure_seen(), "the process knows a peer was lost");
	CHECK_ERR(clp_comm_barrier(w, "after the loss"), CLP_ERR_PEER_LOST, "barrier",
		  "Revoked");
	CHECK_OK(clp_comm_shrink(w, &s));
	CHECK(s && clp_comm_size(s) == 2 && clp_comm_rank(s) == rank, "shrunk to ranks 0 and 1");
	if (s) {
		CHECK_OK(clp_comm_allreduce_sum(s, CLP_COMM_F64, &x, 1, 1, "sum of the survivors"));
		CHECK(x == 2.0, "the survivors' sum is 2, got %g", x);
		if (rank == 0) {
			CHECK_OK(clp_comm_isend(s, "hello", 6, 1, 6, "hello", &q));
			CHECK_OK(clp_comm_wait(s, &q, 0));
		} else {
			CHECK_OK(clp_comm_irecv(s, buf, 6, 0, 6, "hello", &q));
			CHECK_OK(clp_comm_wait(s, &q, 0));
			CHECK(!strcmp(buf, "hello"), "received '%s'", buf);
		}
	}
	printf("rank %d: %d failures\n", rank, th_failures());
	clp_comm_free(s);
	clp_comm_free(w);
	return th_failures() ? 1 : 0;
}
