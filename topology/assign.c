/* Rank-to-device assignment (see assign.h). */
#include "topology/assign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/runtime.h"

/* The host's devices in the shape the selector grammar reads. */
static clp_cl_devinfo *as_devinfo(const clp_topo_host *h)
{
	clp_cl_devinfo *d = calloc((size_t)h->ndevices + 1, sizeof(*d));

	for (int i = 0; d && i < h->ndevices; i++) {
		const clp_topo_device *t = &h->devices[i];

		d[i].index = i;
		d[i].sub_index = -1;
		snprintf(d[i].name, sizeof(d[i].name), "%s", t->name);
		snprintf(d[i].vendor, sizeof(d[i].vendor), "%s", t->vendor);
		snprintf(d[i].type, sizeof(d[i].type), "%s", t->type);
		d[i].compute_units = t->compute_units;
		d[i].max_subdevices = t->max_subdevices;
		d[i].global_mem = t->global_mem;
	}
	return d;
}

/* The n-th comma-separated entry of policy (cyclically), into buf. */
static void nth_entry(const char *policy, int n, char *buf, size_t len)
{
	int count = 1;
	const char *p = policy;

	for (const char *q = policy; *q; q++)
		count += *q == ',';
	n %= count;
	for (int i = 0; i < n; i++)
		p = strchr(p, ',') + 1;
	snprintf(buf, len, "%.*s", (int)(strchr(p, ',') ? (size_t)(strchr(p, ',') - p) : strlen(p)),
		 p);
}

static clp_status select_device(const clp_topo_host *h, const char *policy, int local_rank,
				int local_size, int *dev, int *sub, int *parts, int *sharers)
{
	int auto_policy = !policy || !*policy || !strcmp(policy, "auto");

	*sub = -1;
	*parts = 0;
	*sharers = 0;
	if (h->ndevices == 0)
		return clp_error(CLP_ERR_NOT_FOUND, "host '%s' has no OpenCL device for local rank "
				 "%d", h->name, local_rank);
	if (auto_policy) {
		int acc[256], na = 0;

		for (int i = 0; i < h->ndevices && na < 256; i++)
			if (strcmp(h->devices[i].type, "cpu"))
				acc[na++] = i;
		if (na == 0) {
			*dev = 0;
			for (int i = h->ndevices - 1; i >= 0; i--)
				if (!strcmp(h->devices[i].type, "cpu"))
					*dev = i;
			*sharers = local_size;
		} else {
			*dev = acc[local_rank % na];
			for (int l = 0; l < local_size; l++)
				*sharers += l % na == local_rank % na;
		}
		return CLP_OK;
	} else {
		clp_cl_devinfo *infos = as_devinfo(h);
		clp_cl_selection sel;
		char entry[64];
		clp_status s;

		if (!infos)
			return clp_error(CLP_ERR_NOMEM, "out of host memory");
		for (int l = 0; l < local_size; l++) {
			nth_entry(policy, l, entry, sizeof(entry));
			s = clp_cl_select(infos, h->ndevices, entry, &sel);
			if (s != CLP_OK) {
				free(infos);
				return clp_error_context(s, "device policy '%s', local rank %d on "
							 "host '%s': ", policy, l, h->name);
			}
			if (l == local_rank) {
				*dev = sel.index;
				*sub = sel.sub_index;
				*parts = sel.sub_parts;
			}
		}
		/* sharers: ranks naming the same device and (if split) the same part */
		for (int l = 0; l < local_size; l++) {
			nth_entry(policy, l, entry, sizeof(entry));
			clp_cl_select(infos, h->ndevices, entry, &sel);
			*sharers += sel.index == *dev && sel.sub_index == *sub;
		}
		free(infos);
		return CLP_OK;
	}
}

clp_status clp_topo_assign(const clp_topo_host *h, int local_rank, int local_size,
			   const char *policy, clp_topo_assignment *a)
{
	const clp_topo_device *d;
	int dev, sub, parts, sharers, pos = 0;

	memset(a, 0, sizeof(*a));
	if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
		return clp_error(CLP_ERR_INVALID, "local rank %d of %d ranks on host '%s'",
				 local_rank, local_size, h->name);
	CLP_TRY(select_device(h, policy, local_rank, local_size, &dev, &sub, &parts, &sharers));
	d = &h->devices[dev];
	a->device = dev;
	a->sub_index = sub;
	a->sub_parts = parts;
	a->sharers = sharers;
	a->part = 0;
	a->parts = 1;
	snprintf(a->cpuset, sizeof(a->cpuset), "%s", d->cpuset[0] ? d->cpuset : h->cpuset);
	if (sub >= 0) { /* the policy split the device itself */
		snprintf(a->selector, sizeof(a->selector), "%d.%d/%d", d->index, sub, parts);
		a->part = sub;
		a->parts = parts;
		snprintf(a->why, sizeof(a->why), "policy '%.48s': part %d of %d of device %d (%.80s)",
			 policy, sub, parts, d->index, d->name);
		return CLP_OK;
	}
	snprintf(a->selector, sizeof(a->selector), "%d", d->index);
	if (sharers <= 1) {
		snprintf(a->why, sizeof(a->why), "local rank %d has device %d (%.80s) to itself%s",
			 local_rank, d->index, d->name,
			 d->local_to_host ? "" : ", near its own cores");
		return CLP_OK;
	}
	/* this rank's position among the ranks that share the device */
	for (int l = 0; l < local_rank; l++) {
		int dl, sl, pl, shl;

		if (select_device(h, policy, l, local_size, &dl, &sl, &pl, &shl) == CLP_OK &&
		    dl == dev)
			pos++;
	}
	if (strcmp(d->type, "cpu")) {
		snprintf(a->why, sizeof(a->why), "local ranks outnumber the accelerators: %d ranks "
			 "share device %d (%.80s)", sharers, d->index, d->name);
		return CLP_OK;
	}
	a->part = pos;
	a->parts = sharers;
	if (d->max_subdevices >= (uint32_t)sharers && d->compute_units >= (uint32_t)sharers) {
		a->sub_index = pos;
		a->sub_parts = sharers;
		snprintf(a->selector, sizeof(a->selector), "%d.%d/%d", d->index, pos, sharers);
		snprintf(a->why, sizeof(a->why), "%d ranks share CPU device %d (%.80s): disjoint "
			 "sub-devices, this rank takes part %d of %d", sharers, d->index, d->name,
			 pos, sharers);
	} else {
		a->limit_threads = 1;
		snprintf(a->why, sizeof(a->why), "%d ranks share CPU device %d (%.80s), which cannot "
			 "split %d ways (%u compute units): one thread per rank "
			 "(POCL_MAX_PTHREAD_COUNT=1 before the first OpenCL call)", sharers,
			 d->index, d->name, sharers, d->compute_units);
	}
	return CLP_OK;
}

int clp_topo_pocl_threads(int pus, int local_size)
{
	int t = local_size > 0 ? pus / local_size : pus;

	return t > 0 ? t : 1;
}
