/* Timing statistics for benchmarks: median and spread of repeated measurements. */
#ifndef CLP_TOOLS_STATS_H
#define CLP_TOOLS_STATS_H

#include <stddef.h>

typedef struct clp_stats {
	double median, min, max, q1, q3;
	int n;
} clp_stats;

/* Sorts x in place. */
clp_stats clp_stats_of(double *x, int n);
double clp_now_s(void); /* monotonic seconds */

#endif
