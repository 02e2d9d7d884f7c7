/* Gathering the cluster inventory from every rank (see gather.h). */
#include "topology/gather.h"

#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"

static int same_devices(const clp_topo_host *a, const clp_topo_host *b)
{
	if (a->ndevices != b->ndevices)
		return 0;
	for (int i = 0; i < a->ndevices; i++)
		if (strcmp(a->devices[i].name, b->devices[i].name) ||
		    strcmp(a->devices[i].pci, b->devices[i].pci))
			return 0;
	return 1;
}

clp_status clp_topo_cluster_from_ranks(const clp_topo_host *hosts, int nranks, int strict,
				       clp_topo_cluster *out)
{
	clp_status s = CLP_OK;

	memset(out, 0, sizeof(*out));
	out->hosts = calloc((size_t)nranks + 1, sizeof(*out->hosts));
	out->ranks = calloc((size_t)nranks + 1, sizeof(*out->ranks));
	if (!out->hosts || !out->ranks) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory building the cluster inventory");
		goto fail;
	}
	for (int r = 0; r < nranks; r++) {
		int h = 0, local = 0;

		for (; h < out->nhosts; h++)
			if (!strcmp(out->hosts[h].name, hosts[r].name))
				break;
		if (h == out->nhosts) {
			if ((s = clp_topo_host_copy(&out->hosts[h], &hosts[r])) != CLP_OK)
				goto fail;
			out->nhosts++;
		} else if (strict && !same_devices(&out->hosts[h], &hosts[r])) {
			s = clp_error(CLP_ERR_INVALID, "rank %d on host '%s' sees %d OpenCL devices "
				      "that differ from the %d of the host's first rank", r,
				      hosts[r].name, hosts[r].ndevices, out->hosts[h].ndevices);
			goto fail;
		}
		for (int q = 0; q < r; q++)
			local += out->ranks[q].host == h;
		out->ranks[r].rank = r;
		out->ranks[r].host = h;
		out->ranks[r].local_rank = local;
		out->nranks++;
	}
	return CLP_OK;
fail:
	clp_topo_cluster_clear(out);
	return s;
}

clp_status clp_topo_gather(clp_comm *c, const clp_topo_host *mine, int strict,
			   clp_topo_cluster *out)
{
	json_t *j = clp_topo_host_to_json(mine);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	void *all = NULL;
	size_t *offs = NULL;
	clp_topo_host *hosts = NULL;
	int p = clp_comm_size(c), nread = 0;
	clp_status s;

	memset(out, 0, sizeof(*out));
	json_decref(j);
	if (!text)
		return clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", clp_comm_rank(c));
	s = clp_comm_allgatherv(c, text, strlen(text), &all, &offs, "cluster inventory");
	free(text);
	if (s != CLP_OK)
		return s;
	hosts = calloc((size_t)p, sizeof(*hosts));
	if (!hosts) {
		s = clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", clp_comm_rank(c));
		goto out;
	}
	for (int r = 0; r < p; r++, nread++) {
		char origin[48];
		json_t *hj;

		snprintf(origin, sizeof(origin), "inventory from rank %d", r);
		s = clp_json_parse(origin, (const char *)all + offs[r], offs[r + 1] - offs[r], &hj);
		if (s != CLP_OK)
			goto out;
		s = clp_topo_host_from_json(hj, origin, &hosts[r]);
		json_decref(hj);
		if (s != CLP_OK)
			goto out;
	}
	s = clp_topo_cluster_from_ranks(hosts, p, strict, out);
out:
	for (int r = 0; r < nread; r++)
		clp_topo_host_clear(&hosts[r]);
	free(hosts);
	free(all);
	free(offs);
	return s;
}
