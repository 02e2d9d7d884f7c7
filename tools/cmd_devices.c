/* clpipe devices: the OpenCL devices and where they sit (PCI address, NUMA node, nearby cores),
 * for this machine, for an hwloc XML topology with a device description, or for every host of
 * an mpirun job. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/comm/comm.h"
#include "topology/discover.h"
#include "topology/gather.h"
#include "tools/cli.h"

static void help(void)
{
	printf("usage: clpipe devices [--topology FILE] [--devices FILE] [--json]\n"
	       "                      [--write-devices FILE]\n\n"
	       "Lists every OpenCL device with its locality: vendor, type, memory, PCI address,\n"
	       "NUMA node and the cores near it (from hwloc). CPU devices (PoCL) and devices\n"
	       "without a PCI address are local to the whole host, and the notes say so.\n\n"
	       "  --topology FILE       an hwloc XML topology (lstopo --of xml) instead of this\n"
	       "                        machine\n"
	       "  --devices FILE        the OpenCL devices that machine reports, as JSON (see\n"
	       "                        topology/discover.h; --write-devices makes one)\n"
	       "  --json                print the cluster inventory as JSON, with each local\n"
	       "                        device's probed capabilities (\"capabilities\")\n"
	       "  --write-devices FILE  write this machine's device description to FILE\n\n"
	       "Under mpirun every rank reports its host and rank 0 prints the whole cluster.\n\n"
	       "Select a device elsewhere with --device SPEC or CLPIPE_DEVICE=SPEC, where SPEC is\n"
	       "  N        device N of this list\n"
	       "  N.J      sub-device J of device N split into single compute units\n"
	       "  N.J/P    sub-device J of device N split equally into P parts\n"
	       "  cpu|gpu|accelerator   the first device of that type\n"
	       "  TEXT     the first device whose name, vendor or platform contains TEXT\n"
	       "  default  the first GPU, else the first device\n");
}

static void print_host(const clp_topo_host *h, const clp_topo_cluster *c, int hi)
{
	int nranks = 0;

	for (int r = 0; c && r < c->nranks; r++)
		nranks += c->ranks[r].host == hi;
	printf("host %s: %d PUs (%d cores) %s, %d NUMA node%s", h->name, h->pus, h->cores,
	       h->cpuset, h->numa_nodes, h->numa_nodes == 1 ? "" : "s");
	if (nranks)
		printf(", %d rank%s", nranks, nranks == 1 ? "" : "s");
	printf("\n");
	if (h->ndevices == 0) {
		printf("  no OpenCL devices (is an ICD such as pocl-opencl-icd installed?)\n");
		return;
	}
	printf("  %-3s %-30s %-18s %-5s %4s %9s %-12s %4s %s\n", "#", "device", "vendor", "type",
	       "CUs", "memory", "PCI", "NUMA", "near cores");
	for (int i = 0; i < h->ndevices; i++) {
		const clp_topo_device *d = &h->devices[i];
		char numa[8];

		snprintf(numa, sizeof(numa), "%d", d->numa);
		printf("  %-3d %-30.30s %-18.18s %-5s %4u %7.1fGi %-12s %4s %s (%d core%s%s)\n",
		       d->index, d->name, d->vendor, d->type, d->compute_units,
		       d->global_mem / 1073741824.0, d->pci[0] ? d->pci : "-",
		       d->numa >= 0 ? numa : "-", d->cpuset, d->cores, d->cores == 1 ? "" : "s",
		       d->local_to_host ? ", whole host" : "");
	}
	for (int i = 0; i < h->ndevices; i++) {
		const clp_topo_device *d = &h->devices[i];

		if (d->loc != CLP_TOPO_LOC_PCI)
			printf("  note: device %d %s%s%s: %s\n", d->index,
			       d->pci[0] ? "(PCI " : "", d->pci, d->pci[0] ? ")" : "",
			       clp_topo_loc_text(d->loc));
		if (d->max_subdevices > 1)
			printf("  note: device %d splits into up to %u parts (%d.0 .. %d.%u)\n",
			       d->index, d->max_subdevices, d->index, d->index,
			       d->max_subdevices - 1);
	}
	for (int i = 0; i < h->nlinks; i++)
		printf("  link: device %d <-> device %d  %s %.0f GB/s\n",
		       h->devices[h->links[i].a].index, h->devices[h->links[i].b].index,
		       h->links[i].kind, h->links[i].bandwidth_gbps);
}

static clp_status local_host(const char *topology, const char *devices, clp_topo_host *h)
{
	clp_topo_cldev *devs = NULL;
	int n = 0;
	clp_status s;

	if (devices)
		s = clp_topo_cldevs_read(devices, &devs, &n);
	else
		s = clp_topo_cldevs_live(&devs, &n);
	if (s == CLP_OK)
		s = clp_topo_discover(topology, devs, n, h);
	free(devs);
	return s;
}

/* Each local device's probed capabilities (cl/caps.c; cached per device and driver, so only
 * the first call on a machine runs the probe kernels). */
static json_t *local_caps(void)
{
	json_t *arr = json_array();
	clp_cl_devinfo *devs = NULL;
	int n = 0;

	if (clp_cl_devices(&devs, &n) != CLP_OK)
		return arr;
	for (int i = 0; i < n; i++) {
		char sel[16];
		clp_cl_ctx *ctx;
		json_t *c;

		snprintf(sel, sizeof(sel), "%d", i);
		if (clp_cl_ctx_create(&ctx, sel) != CLP_OK) {
			json_array_append_new(arr, json_pack("{s:i, s:s, s:s}", "index", i, "name",
							     devs[i].name, "error",
							     clp_last_error()));
			continue;
		}
		c = clp_cl_caps_json(clp_cl_ctx_caps(ctx));
		json_object_set_new(c, "index", json_integer(i));
		json_object_set_new(c, "name", json_string(devs[i].name));
		json_object_set_new(c, "platform", json_string(devs[i].platform));
		json_object_set_new(c, "driver", json_string(devs[i].driver));
		json_array_append_new(arr, c);
		clp_cl_ctx_free(ctx);
	}
	free(devs);
	return arr;
}

int cmd_devices(int argc, char **argv)
{
	const char *topology = NULL, *devices = NULL, *write_devices = NULL;
	int as_json = 0, rc = 0;
	clp_topo_host host = {0};
	clp_topo_cluster cluster = {0};
	clp_comm *comm = NULL;
	clp_status s;

	for (int i = 1; i < argc; i++) {
		int r = 0;

		if (cli_is_help(argv[i])) {
			help();
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			as_json = 1;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--topology", &topology)) == 0 &&
		    (r = cli_value(argc, argv, &i, "--devices", &devices)) == 0)
			r = cli_value(argc, argv, &i, "--write-devices", &write_devices);
		if (r < 0)
			return cli_usage_error("devices", "%s needs a value", argv[i]);
		if (r == 0)
			return cli_usage_error("devices", "unknown option '%s'", argv[i]);
	}
	if (write_devices) {
		clp_topo_cldev *devs = NULL;
		int n = 0;

		s = clp_topo_cldevs_live(&devs, &n);
		if (s == CLP_OK)
			s = clp_topo_cldevs_write(write_devices, devs, n);
		free(devs);
		if (s != CLP_OK)
			return cli_fail("devices", s);
		printf("wrote %d device%s to %s\n", n, n == 1 ? "" : "s", write_devices);
		return 0;
	}
	if ((s = clp_comm_world(&argc, &argv, &comm)) != CLP_OK)
		return cli_fail("devices", s);
	s = local_host(topology, devices, &host);
	if (s != CLP_OK) {
		rc = cli_fail("devices", s);
		if (clp_comm_size(comm) > 1)
			clp_comm_abort(comm, 1);
		goto out;
	}
	if ((s = clp_topo_gather(comm, &host, 0, &cluster)) != CLP_OK) {
		rc = cli_fail("devices", s);
		goto out;
	}
	if (clp_comm_rank(comm) == 0) {
		if (as_json) {
			json_t *j = clp_topo_cluster_to_json(&cluster);

			if (!devices)
				json_object_set_new(j, "capabilities", local_caps());

			json_dumpf(j, stdout, JSON_INDENT(2));
			printf("\n");
			json_decref(j);
		} else {
			for (int h = 0; h < cluster.nhosts; h++)
				print_host(&cluster.hosts[h], clp_comm_size(comm) > 1 ? &cluster :
					   NULL, h);
		}
	}
out:
	clp_topo_cluster_clear(&cluster);
	clp_topo_host_clear(&host);
	clp_comm_free(comm);
	return rc;
}
