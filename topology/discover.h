/* Discovery: join the OpenCL device list with hwloc's topology by PCI address.
 *
 * Two inputs, each either live or from a file:
 *   the OpenCL devices   clp_topo_cldevs_live() asks OpenCL (clp_cl_devices() plus each
 *                        device's PCI address, cl/pci.h); clp_topo_cldevs_read() reads a
 *                        device description: the devices a machine would report, as JSON
 *   the topology         this machine (hwloc, with its I/O objects kept), or an hwloc XML file
 *
 * Device description file (fields as in clp_cl_devinfo, cl/runtime.h; name and type required,
 * pci only when the device reports one):
 *   {"devices": [{"name": "Tesla K40m", "vendor": "NVIDIA Corporation", "type": "gpu",
 *                 "platform": "NVIDIA CUDA", "compute_units": 15, "global_mem": 12079136768,
 *                 "max_alloc": 3019784192, "pci": "0000:84:00.0"}, ...]}
 *
 * A device is placed by its PCI object: its NUMA node and nearby cores are those of the object's
 * first non-I/O ancestor. hwloc never lists a CPU-only OpenCL device such as PoCL's, and some
 * devices report no PCI address or one the topology lacks: those are local to the whole host,
 * and clp_topo_device.loc says which case it is. */
#ifndef CLP_TOPO_DISCOVER_H
#define CLP_TOPO_DISCOVER_H

#include "cl/pci.h"
#include "cl/runtime.h"
#include "topology/inventory.h"

/* What OpenCL reports about one device, as data. */
typedef struct clp_topo_cldev {
	clp_cl_devinfo info;
	int has_pci;
	clp_cl_pci pci;
} clp_topo_cldev;

/* Every root device of this machine with its PCI address. *out is malloc()ed (free()); no
 * OpenCL at all gives *n = 0. */
clp_status clp_topo_cldevs_live(clp_topo_cldev **out, int *n);

/* Read / write a device description file. Errors name the file, the device and the field. */
clp_status clp_topo_cldevs_read(const char *path, clp_topo_cldev **out, int *n);
clp_status clp_topo_cldevs_write(const char *path, const clp_topo_cldev *devs, int n);
json_t *clp_topo_cldevs_to_json(const clp_topo_cldev *devs, int n);
clp_status clp_topo_cldevs_from_json(const json_t *j, const char *origin, clp_topo_cldev **out,
				     int *n);

/* Parse "dddd:bb:dd.f" (or "bb:dd.f", domain 0). */
clp_status clp_topo_pci_parse(const char *s, clp_cl_pci *out);

/* Locate devs[] in a topology: xml_path NULL means this machine, else an hwloc XML file. The host
 * is named after the topology's HostName (or, for a file without one, the file's base name).
 * *out is zeroed first; release it with clp_topo_host_clear(). */
clp_status clp_topo_discover(const char *xml_path, const clp_topo_cldev *devs, int n,
			     clp_topo_host *out);

/* The whole live path: this machine's devices on this machine's topology. */
clp_status clp_topo_discover_live(clp_topo_host *out);

#endif
