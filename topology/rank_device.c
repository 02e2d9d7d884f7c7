/* This rank's device and binding under a launcher (see rank_device.h). */
#include "topology/rank_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topology/assign.h"
#include "topology/discover.h"

clp_status clp_topo_rank_device(clp_comm *world, const char *policy, clp_topo_bind_mode bind,
				char *selector, size_t nsel, char *note, size_t nnote)
{
	clp_comm *hostc = NULL;
	clp_topo_host host = {0};
	clp_topo_assignment a;
	char bound[320];
	clp_status s;

	note[0] = '\0';
	if (clp_comm_size(world) == 1) {
		const char *comma = policy ? strchr(policy, ',') : NULL;

		snprintf(selector, nsel, "%.*s", comma ? (int)(comma - policy) : (int)nsel,
			 policy && strcmp(policy, "auto") ? policy : "");
		return CLP_OK;
	}
	CLP_TRY(clp_comm_split_host(world, &hostc));
	/* PoCL reads its thread count once, at the first OpenCL call, which discovery makes */
	if (clp_comm_size(hostc) > 1 && !getenv("POCL_MAX_PTHREAD_COUNT")) {
		char n[16];
		long pus = sysconf(_SC_NPROCESSORS_ONLN);

		snprintf(n, sizeof(n), "%d",
			 clp_topo_pocl_threads(pus > 0 ? (int)pus : 1, clp_comm_size(hostc)));
		setenv("POCL_MAX_PTHREAD_COUNT", n, 1);
	}
	s = clp_topo_discover_live(&host);
	if (s == CLP_OK)
		s = clp_topo_assign(&host, clp_comm_rank(hostc), clp_comm_size(hostc), policy, &a);
	if (s == CLP_OK)
		s = clp_topo_bind(bind, &a, bound, sizeof(bound));
	if (s == CLP_OK) {
		snprintf(selector, nsel, "%s", a.selector);
		snprintf(note, nnote, "rank %d (local %d of %d on %.64s): %s; %s; PoCL threads %s",
			 clp_comm_rank(world), clp_comm_rank(hostc), clp_comm_size(hostc), host.name,
			 a.why, bound, getenv("POCL_MAX_PTHREAD_COUNT") ? getenv("POCL_MAX_PTHREAD_COUNT")
									 : "all");
	}
	clp_topo_host_clear(&host);
	clp_comm_free(hostc);
	return s;
}
