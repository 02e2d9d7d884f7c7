/* The one clock of the project: monotonic seconds (an arbitrary start), for durations,
 * deadlines and throughput. Every layer above uses it (clp_comm_now is the same clock). */
#ifndef CLP_BASE_CLOCK_H
#define CLP_BASE_CLOCK_H

#include <time.h>

static inline double clp_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
