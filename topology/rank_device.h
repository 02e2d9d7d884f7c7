/* The device of this rank under a launcher: split the world by host, limit PoCL's threads when
 * several ranks share a CPU before the first OpenCL call, discover the host, assign a device by
 * local rank (or the policy's selectors) and bind the rank's threads near it. One call for every
 * command that runs under mpirun. */
#ifndef CLP_TOPO_RANK_DEVICE_H
#define CLP_TOPO_RANK_DEVICE_H

#include <stddef.h>

#include "topology/bind.h"
#include "topology/comm/comm.h"

/* selector (>= 32 bytes) receives the device selector for clp_cl_ctx_create(); note a line
 * describing the decision (rank, host, device, binding). A one-rank world gets the policy's
 * first selector, or "" (CLPIPE_DEVICE, else the default). */
clp_status clp_topo_rank_device(clp_comm *world, const char *policy, clp_topo_bind_mode bind,
				char *selector, size_t nsel, char *note, size_t nnote);

#endif
