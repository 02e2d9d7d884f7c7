/* The PCI address of an OpenCL device, asked of the device itself.
 *
 * Three queries, in order: cl_khr_pci_bus_info (any vendor that implements it; Intel's GPUs do,
 * and Debian's hwloc 2.9 does not ask it), AMD's CL_DEVICE_TOPOLOGY_AMD, then NVIDIA's
 * CL_DEVICE_PCI_BUS_ID_NV / SLOT_ID_NV / DOMAIN_ID_NV. CPU devices (PoCL) and many integrated
 * GPUs report none. */
#ifndef CLP_CL_PCI_H
#define CLP_CL_PCI_H

#include "cl/runtime.h"

typedef struct clp_cl_pci {
	unsigned domain, bus, dev, func;
	char how[24]; /* which query answered: "cl_khr_pci_bus_info", "amd_topology", "nv_pci" */
} clp_cl_pci;

/* The PCI address of a device handle. CLP_ERR_NOT_FOUND when the device reports none (not an
 * error a caller needs to print: the device is then treated as local to the whole host). */
clp_status clp_cl_device_id_pci(cl_device_id d, clp_cl_pci *out);

/* The same for root device `index` in clp_cl_devices() order. */
clp_status clp_cl_device_pci(int index, clp_cl_pci *out);

/* "dddd:bb:dd.f", the form hwloc and Linux use (buf of at least 16 bytes). */
void clp_cl_pci_str(const clp_cl_pci *p, char *buf, size_t n);

#endif
