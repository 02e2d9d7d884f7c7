/* The cluster inventory of a running job: every rank's host and devices, gathered over the
 * transport into the structure --topology files give (topology/inventory.h). */
#ifndef CLP_TOPO_GATHER_H
#define CLP_TOPO_GATHER_H

#include "topology/comm/comm.h"
#include "topology/inventory.h"

/* Every rank passes the host it discovered (clp_topo_discover_live, or one read from files);
 * every rank gets the whole cluster in *out: hosts in order of their lowest rank, ranks[] with
 * each rank's host and local rank (its position among its host's ranks, by rank: what
 * MPI_Comm_split_type(SHARED) with key = rank gives). Ranks on one host are expected to report
 * the same devices; when they do not (different visible devices per rank), the lowest rank's
 * view is kept and the rest named in the error of a strict gather (strict = 1), or ignored. */
clp_status clp_topo_gather(clp_comm *c, const clp_topo_host *mine, int strict,
			   clp_topo_cluster *out);

/* Build the cluster from hosts[i] = rank i's host, as the gather does (no communication). */
clp_status clp_topo_cluster_from_ranks(const clp_topo_host *hosts, int nranks, int strict,
				       clp_topo_cluster *out);

#endif
