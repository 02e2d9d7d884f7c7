/* Which device a rank uses, and where its threads run.
 *
 * Assignment is a pure function of the host's inventory, the rank's position among the ranks of
 * its host (local rank, from MPI_Comm_split_type SHARED or the gathered cluster) and a policy:
 *   "auto" (or NULL/"")  accelerators first: local rank i takes accelerator i mod A; a host with
 *                        none puts every rank on its (first) CPU device
 *   "S0,S1,..."          local rank i takes selector S(i mod n), in the device-selector grammar
 *                        of cl/runtime.h ("1", "gpu", "0.1/2", "Radeon", ...): the config's word
 *
 * Several ranks on one CPU device (PoCL) must not all spawn a thread per core: they get disjoint
 * sub-devices ("N.J/P") when the device can split that far, and otherwise the device must be
 * limited to one thread per rank (POCL_MAX_PTHREAD_COUNT, which takes effect only when set
 * before the first OpenCL call: see clp_topo_pocl_threads()). GPUs may be shared; `why` says
 * so. */
#ifndef CLP_TOPO_ASSIGN_H
#define CLP_TOPO_ASSIGN_H

#include "topology/inventory.h"

typedef struct clp_topo_assignment {
	int device;        /* position in host->devices */
	char selector[32]; /* for clp_cl_ctx_create(): "1", "0.1/2" */
	int sub_index;     /* -1, or this rank's part of a split device */
	int sub_parts;     /* number of parts (0 when not split) */
	int sharers;       /* local ranks on this device, this one included */
	int part, parts;   /* this rank's share of the device's cores: part of parts */
	int limit_threads; /* 1: a shared CPU device that cannot split: run it on one thread */
	char cpuset[CLP_TOPO_CPUSET_LEN]; /* the device's nearby PUs (to be shared by parts) */
	char why[512];     /* the decision in words */
} clp_topo_assignment;

clp_status clp_topo_assign(const clp_topo_host *host, int local_rank, int local_size,
			   const char *policy, clp_topo_assignment *out);

/* The PoCL thread count for one of local_size ranks on a host with `pus` hardware threads
 * (at least 1), for POCL_MAX_PTHREAD_COUNT. */
int clp_topo_pocl_threads(int pus, int local_size);

#endif
