/* Ranks that share a machine's cores: processor sharing (issue 28, the simulator on a slower
 * machine). In the network lab (tools/netlab.sh) every "host" is a namespace of one machine, so
 * its ranks' compute shares that machine's cores: with n ops running on c cores each advances at
 * min(1, c / n) of its own speed. A measured trace's compute times are then longer than the
 * ops' own (solo) times wherever more ops ran than there are cores, and a simulation that uses
 * them as they are predicts the pipeline's ramp-up and cool-down (few ops at once) too slow. */
#ifndef CLP_SCENARIO_SHARED_CORES_H
#define CLP_SCENARIO_SHARED_CORES_H

#include <stddef.h>

#include "cl/base/status.h"
#include "engine/scenario/trace.h"

/* Intervals [t0[i], t1[i]) of n compute ops on `cores` shared cores (one core an op at most):
 * work[i] = the integral over the op's interval of min(1, cores / ops running at that time),
 * i.e. the seconds it would have taken alone. Intervals with t1 <= t0 (or t0 < 0: never ran)
 * get their length (0) and count for nobody. */
clp_status clp_shared_cores_work(size_t n, const double *t0, const double *t1, int cores,
				 double *work);

/* Rewrite every compute-queue event of t so that it lasts its solo time on `cores` shared
 * cores (start kept). Before calibrating a cost table from a trace measured on ranks that shared
 * the cores (`clpipe sim --calibrate T --shared-cores C`). */
clp_status clp_trace_solo(clp_trace *t, int cores);

#endif
