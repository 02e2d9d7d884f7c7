/* Join OpenCL devices with hwloc's topology by PCI address (see discover.h). */
#include "topology/discover.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topology/hwloc_util.h"

static void set_list(char *dst, size_t n, hwloc_const_bitmap_t set)
{
	if (hwloc_bitmap_list_snprintf(dst, n, set) >= (int)n && n > 4)
		snprintf(dst + n - 4, 4, "..."); /* cut, and say so */
}

/* The OS index of the only NUMA node covering cpuset, or -1 when it covers several. */
static int numa_of(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset)
{
	hwloc_nodeset_t ns = hwloc_bitmap_alloc();
	int node = -1;

	hwloc_cpuset_to_nodeset(topo, cpuset, ns);
	if (hwloc_bitmap_weight(ns) == 1)
		node = hwloc_bitmap_first(ns);
	hwloc_bitmap_free(ns);
	return node;
}

static int count_cores(hwloc_topology_t topo, hwloc_const_cpuset_t set)
{
	int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE);

	return n > 0 ? n : hwloc_bitmap_weight(set); /* a topology without Core objects */
}

static void place_device(hwloc_topology_t topo, const clp_topo_cldev *c, clp_topo_device *d)
{
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
	hwloc_cpuset_t set = hwloc_bitmap_dup(allowed);
	hwloc_obj_t pci = NULL;

	memset(d, 0, sizeof(*d));
	d->index = c->info.index;
	snprintf(d->name, sizeof(d->name), "%s", c->info.name);
	snprintf(d->vendor, sizeof(d->vendor), "%s", c->info.vendor);
	snprintf(d->type, sizeof(d->type), "%s", c->info.type);
	d->global_mem = c->info.global_mem;
	d->compute_units = c->info.compute_units;
	d->max_subdevices = c->info.max_subdevices;
	if (c->has_pci)
		clp_cl_pci_str(&c->pci, d->pci, sizeof(d->pci));

	if (!strcmp(c->info.type, "cpu")) {
		d->loc = CLP_TOPO_LOC_CPU_DEVICE;
	} else if (!c->has_pci) {
		d->loc = CLP_TOPO_LOC_NO_PCI_ID;
	} else {
		pci = hwloc_get_pcidev_by_busid(topo, c->pci.domain, c->pci.bus, c->pci.dev,
						c->pci.func);
		d->loc = pci ? CLP_TOPO_LOC_PCI : CLP_TOPO_LOC_PCI_UNMATCHED;
	}
	if (pci) {
		hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);

		if (anc && anc->cpuset) {
			hwloc_bitmap_and(set, anc->cpuset, allowed);
			if (hwloc_bitmap_iszero(set)) /* its cores are all outside our cgroup */
				hwloc_bitmap_copy(set, allowed);
		}
	}
	d->local_to_host = d->loc != CLP_TOPO_LOC_PCI || hwloc_bitmap_isequal(set, allowed);
	d->numa = numa_of(topo, set);
	d->cores = count_cores(topo, set);
	set_list(d->cpuset, sizeof(d->cpuset), set);
	hwloc_bitmap_free(set);
}

/* Device position whose PCI object is obj's PCI ancestor (obj: an OS device or PCI device). */
static int device_of_obj(const clp_topo_host *h, hwloc_obj_t obj)
{
	char pci[16];

	while (obj && obj->type != HWLOC_OBJ_PCI_DEVICE)
		obj = obj->parent;
	if (!obj)
		return -1;
	snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%x", obj->attr->pcidev.domain,
		 obj->attr->pcidev.bus, obj->attr->pcidev.dev, obj->attr->pcidev.func);
	for (int i = 0; i < h->ndevices; i++)
		if (h->devices[i].loc == CLP_TOPO_LOC_PCI && !strcmp(h->devices[i].pci, pci))
			return i;
	return -1;
}

/* Direct device-to-device NVLink bandwidths that hwloc recorded (its NVML backend, or an XML
 * exported where it ran). Values are MB/s; links through NVSwitches are not direct and are left
 * out. */
static clp_status add_links(hwloc_topology_t topo, clp_topo_host *h)
{
	struct hwloc_distances_s *dist[4];
	unsigned nr = 4;

	if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, dist, 0) != 0)
		return CLP_OK;
	for (unsigned k = 0; k < nr && k < 4; k++) {
		struct hwloc_distances_s *d = dist[k];

		for (unsigned i = 0; i < d->nbobjs; i++) {
			int a = device_of_obj(h, d->objs[i]);

			for (unsigned j = i + 1; j < d->nbobjs && a >= 0; j++) {
				int b = device_of_obj(h, d->objs[j]);
				uint64_t v = d->values[i * d->nbobjs + j];
				clp_topo_link *l;

				if (b < 0 || b == a || v == 0)
					continue;
				l = realloc(h->links, (size_t)(h->nlinks + 1) * sizeof(*l));
				if (!l) {
					for (unsigned r = k; r < nr; r++)
						hwloc_distances_release(topo, dist[r]);
					return clp_error(CLP_ERR_NOMEM, "out of host memory");
				}
				h->links = l;
				l = &h->links[h->nlinks++];
				l->a = a;
				l->b = b;
				snprintf(l->kind, sizeof(l->kind), "nvlink");
				l->bandwidth_gbps = (double)v / 1000.0;
			}
		}
		hwloc_distances_release(topo, d);
	}
	return CLP_OK;
}

static void host_name(hwloc_topology_t topo, const char *xml_path, char *dst, size_t n)
{
	const char *name = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "HostName");
	const char *base;

	if (name && *name) {
		snprintf(dst, n, "%s", name);
		return;
	}
	if (!xml_path) {
		if (gethostname(dst, n) != 0)
			snprintf(dst, n, "localhost");
		dst[n - 1] = '\0';
		return;
	}
	base = strrchr(xml_path, '/');
	snprintf(dst, n, "%s", base ? base + 1 : xml_path);
	if (strlen(dst) > 4 && !strcmp(dst + strlen(dst) - 4, ".xml"))
		dst[strlen(dst) - 4] = '\0';
}

clp_status clp_topo_discover(const char *xml_path, const clp_topo_cldev *devs, int n,
			     clp_topo_host *out)
{
	hwloc_topology_t topo;
	hwloc_const_cpuset_t allowed;
	clp_status s;

	memset(out, 0, sizeof(*out));
	CLP_TRY(clp_topo_hwloc_load(xml_path, 1, &topo));
	allowed = hwloc_topology_get_allowed_cpuset(topo);
	host_name(topo, xml_path, out->name, sizeof(out->name));
	out->cores = count_cores(topo, allowed);
	out->pus = hwloc_bitmap_weight(allowed);
	out->numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
	set_list(out->cpuset, sizeof(out->cpuset), allowed);
	out->devices = calloc((size_t)n + 1, sizeof(*out->devices));
	if (!out->devices) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory placing devices");
		goto fail;
	}
	out->ndevices = n;
	for (int i = 0; i < n; i++)
		place_device(topo, &devs[i], &out->devices[i]);
	if ((s = add_links(topo, out)) != CLP_OK)
		goto fail;
	hwloc_topology_destroy(topo);
	return CLP_OK;
fail:
	hwloc_topology_destroy(topo);
	clp_topo_host_clear(out);
	return s;
}

clp_status clp_topo_discover_live(clp_topo_host *out)
{
	clp_topo_cldev *devs = NULL;
	int n = 0;
	clp_status s;

	memset(out, 0, sizeof(*out));
	CLP_TRY(clp_topo_cldevs_live(&devs, &n));
	s = clp_topo_discover(NULL, devs, n, out);
	free(devs);
	return s;
}
