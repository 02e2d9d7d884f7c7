/* The cluster inventory: hosts, their OpenCL devices and where each device sits (PCI address,
 * NUMA node, nearby cores), and which MPI rank runs on which host.
 *
 * Plain data. The same structure comes from this machine (topology/discover.h), from an hwloc XML
 * file paired with a device description (clpipe devices --topology F --devices F), or from an MPI
 * gather over every rank (topology/gather.h), and it reads and writes as JSON:
 *
 *   {"hosts": [{"name": "node1", "cores": 32, "pus": 64, "numa_nodes": 2, "cpuset": "0-63",
 *               "devices": [{"index": 0, "name": "...", "vendor": "...", "type": "gpu",
 *                            "global_mem": 17179869184, "compute_units": 56,
 *                            "max_subdevices": 0, "pci": "0000:3b:00.0", "numa": 0,
 *                            "cpuset": "0-15,32-47", "cores": 16, "local_to_host": false,
 *                            "locality": "pci"}],
 *               "links": [{"a": 0, "b": 1, "kind": "nvlink", "bandwidth_gbps": 40.0}]}],
 *    "ranks": [{"rank": 0, "host": 0, "local_rank": 0}]}
 *
 * Readers ignore keys they do not know, so later parts can add to the file (the pipeline's
 * measured links between ranks, for instance, as a top-level "links" array). */
#ifndef CLP_TOPO_INVENTORY_H
#define CLP_TOPO_INVENTORY_H

#include <stdint.h>

#include <jansson.h>

#include "cl/base/status.h"

#define CLP_TOPO_CPUSET_LEN 256

/* Why a device has the locality it has. Everything but PCI means "local to the whole host". */
typedef enum clp_topo_loc {
	CLP_TOPO_LOC_PCI = 0,       /* found its PCI object in the topology */
	CLP_TOPO_LOC_CPU_DEVICE,    /* a CPU device (PoCL): it is the host's own cores */
	CLP_TOPO_LOC_NO_PCI_ID,     /* the device reported no PCI address */
	CLP_TOPO_LOC_PCI_UNMATCHED, /* it reported one, but the topology has no such PCI object */
	CLP_TOPO_LOC_COUNT
} clp_topo_loc;

/* "pci", "cpu_device", "no_pci_id", "pci_unmatched" */
const char *clp_topo_loc_name(clp_topo_loc l);
/* A sentence for people: "CPU device: runs on the host's cores". */
const char *clp_topo_loc_text(clp_topo_loc l);

typedef struct clp_topo_device {
	int index;        /* OpenCL root-device index on its host (the selector "N") */
	char name[256];
	char vendor[128];
	char type[16];    /* "cpu", "gpu", "accelerator", "other" */
	uint64_t global_mem;     /* bytes */
	uint32_t compute_units;
	uint32_t max_subdevices; /* parts it can split into; < 2: cannot split */
	char pci[16];     /* "dddd:bb:dd.f", or "" when it reported none */
	int numa;         /* OS index of its NUMA node; -1 when its cores span several */
	char cpuset[CLP_TOPO_CPUSET_LEN]; /* nearby PUs (OS indices) as a list: "0-7,16-23" */
	int cores;        /* physical cores in cpuset */
	int local_to_host; /* 1: no better locality than the whole host (see loc) */
	clp_topo_loc loc;
} clp_topo_device;

/* A direct link between two devices of one host, from hwloc's distances (NVLink). */
typedef struct clp_topo_link {
	int a, b;              /* positions in the host's devices[] */
	char kind[16];         /* "nvlink" */
	double bandwidth_gbps; /* GB/s (1e9 bytes/s) */
} clp_topo_link;

typedef struct clp_topo_host {
	char name[256];
	int cores;      /* physical cores */
	int pus;        /* hardware threads */
	int numa_nodes;
	char cpuset[CLP_TOPO_CPUSET_LEN]; /* every PU the process may use */
	int ndevices;
	clp_topo_device *devices;
	int nlinks;
	clp_topo_link *links;
} clp_topo_host;

typedef struct clp_topo_rank {
	int rank;
	int host;       /* position in hosts[] */
	int local_rank; /* position among the ranks of its host, by rank */
} clp_topo_rank;

typedef struct clp_topo_cluster {
	int nhosts;
	clp_topo_host *hosts;
	int nranks;
	clp_topo_rank *ranks;
} clp_topo_cluster;

/* Release what a host or cluster owns (the structs themselves are the caller's). Safe on zeroed
 * structs. */
void clp_topo_host_clear(clp_topo_host *h);
void clp_topo_cluster_clear(clp_topo_cluster *c);

/* Deep copy; dst is overwritten (clear it first if it owned anything). */
clp_status clp_topo_host_copy(clp_topo_host *dst, const clp_topo_host *src);

/* A cluster of one host and one rank, taking ownership of *h (which is zeroed). */
clp_status clp_topo_cluster_single(clp_topo_cluster *c, clp_topo_host *h);

/* JSON. to_json returns a new reference (NULL only when out of memory). from_json fills *out
 * (zeroed first) and names the origin (a file name) and the field in its errors. */
json_t *clp_topo_host_to_json(const clp_topo_host *h);
json_t *clp_topo_cluster_to_json(const clp_topo_cluster *c);
clp_status clp_topo_host_from_json(const json_t *j, const char *origin, clp_topo_host *out);
clp_status clp_topo_cluster_from_json(const json_t *j, const char *origin, clp_topo_cluster *out);

clp_status clp_topo_cluster_write(const clp_topo_cluster *c, const char *path);
clp_status clp_topo_cluster_read(const char *path, clp_topo_cluster *out);

#endif
