/* Two ranks, one message each way, timed against the link (tools/bench_net_cross.sh).
 *   cross BYTES DELAY_MS SENDER_BUSY_MS REPS
 * Rank 0 sends BYTES to rank 1 at t0 (after a barrier); rank 1 sends BYTES to rank 0 at t0 +
 * DELAY_MS (DELAY_MS < 0: rank 1 sends nothing). Both poll MPI_Test every 100 us, as the
 * executor's waits do, except that rank 0 makes no MPI call for SENDER_BUSY_MS after posting
 * its send (a rank busy with host work). Rank 0 prints, per repetition, when each message
 * completed at its receiver, in ms after t0. Built with mpicc by the script, not by CMake. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void nap(long us)
{
	struct timespec ts = {0, us * 1000L};

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 5 || size != 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 cross BYTES DELAY_MS SENDER_BUSY_MS REPS\n");
		MPI_Finalize();
		return 2;
	}
	int n = atoi(argv[1]), reps = atoi(argv[4]);
	double delay = atof(argv[2]) * 1e-3, busy = atof(argv[3]) * 1e-3;
	char *sbuf = calloc((size_t)n, 1), *rbuf = calloc((size_t)n, 1);
	int sends = rank == 0 || delay >= 0, recvs = rank == 1 || delay >= 0;

	for (int k = 0; k < reps; k++) {
		MPI_Request sq = MPI_REQUEST_NULL, rq = MPI_REQUEST_NULL;
		double at = rank == 0 ? 0 : delay, got = -1, t0, mine, all[2];
		int posted = 0;

		if (recvs)
			MPI_Irecv(rbuf, n, MPI_BYTE, 1 - rank, k, MPI_COMM_WORLD, &rq);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (;;) {
			double t = MPI_Wtime() - t0;
			int done;

			if (sends && !posted && t >= at) {
				MPI_Isend(sbuf, n, MPI_BYTE, 1 - rank, k, MPI_COMM_WORLD, &sq);
				posted = 1;
				while (rank == 0 && MPI_Wtime() - t0 < busy)
					nap(1000);
				continue;
			}
			if (sq != MPI_REQUEST_NULL)
				MPI_Test(&sq, &done, MPI_STATUS_IGNORE);
			if (rq != MPI_REQUEST_NULL) {
				MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
				if (done)
					got = t;
			}
			if ((!sends || (posted && sq == MPI_REQUEST_NULL)) && rq == MPI_REQUEST_NULL)
				break;
			nap(100);
		}
		mine = got * 1e3;
		MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		if (rank == 0) /* all[r]: when rank r's receive completed (-1: none) */
			printf("rep %d: 0->1 %.1f ms, 1->0 %.1f ms\n", k, all[1], all[0]);
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
