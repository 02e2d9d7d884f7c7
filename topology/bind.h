/* Binding a rank's threads near its device (--bind auto|none|core).
 *
 *   none  never bind
 *   auto  leave alone a binding the launcher already made (the process may use fewer PUs than
 *         the machine allows it, or Open MPI says it bound the rank); otherwise bind to the
 *         cores near the device
 *   core  bind to the cores near the device, replacing any launcher binding
 *
 * "Near the device" is the assignment's cpuset; when several ranks share it (parts > 1), rank
 * part J of P takes the J-th of P equal groups of whole cores. Bind before the first OpenCL
 * call: PoCL's worker threads inherit the binding of the thread that creates them. */
#ifndef CLP_TOPO_BIND_H
#define CLP_TOPO_BIND_H

#include <stddef.h>

#include "topology/assign.h"

typedef enum clp_topo_bind_mode {
	CLP_TOPO_BIND_AUTO = 0,
	CLP_TOPO_BIND_NONE,
	CLP_TOPO_BIND_CORE
} clp_topo_bind_mode;

clp_status clp_topo_bind_parse(const char *s, clp_topo_bind_mode *out);

/* The PUs (list string) a rank with this assignment should run on, computed on the topology
 * (xml_path NULL: this machine). */
clp_status clp_topo_bind_target(const char *xml_path, const clp_topo_assignment *a, char *set,
				size_t n);

/* Whether to bind, given the mode, the PUs the process may use, those it is bound to now and
 * whether the launcher's environment says it bound the rank. Pure; lists as "0-3,8". */
int clp_topo_bind_wanted(clp_topo_bind_mode m, const char *allowed, const char *current,
			 int launcher_says_bound);

/* Apply to this process (all its threads). report (may be NULL) gets one line saying what was
 * done and why. */
clp_status clp_topo_bind(clp_topo_bind_mode m, const clp_topo_assignment *a, char *report,
			 size_t n);

#endif
