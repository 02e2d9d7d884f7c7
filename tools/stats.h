/* Timing statistics for the benchmark commands: the device profile's figure over repeats
 * (topology/profile.h: median, quartiles, min, max) and the monotonic clock of topology/comm/comm.h,
 * under the short names the commands use. */
#ifndef CLP_TOOLS_STATS_H
#define CLP_TOOLS_STATS_H

#include "topology/comm/comm.h"
#include "topology/profile.h"

typedef clp_topo_stat clp_stats;

/* Sorts x in place. */
static inline clp_stats clp_stats_of(double *x, int n)
{
	clp_stats s;

	clp_topo_stat_of(x, n, &s);
	return s;
}

#endif
