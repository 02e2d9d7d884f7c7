/* Loading an hwloc topology the way clpipe needs it (internal). */
#ifndef CLP_TOPO_HWLOC_UTIL_H
#define CLP_TOPO_HWLOC_UTIL_H

#include <hwloc.h>

#include "cl/base/status.h"

/* Load this machine (xml_path NULL) or an hwloc XML file. keep_io keeps the PCI objects, which
 * hwloc filters out by default. hwloc's GPU-runtime plugins (OpenCL, CUDA, NVML, ...) are
 * switched off: clpipe asks OpenCL itself, and those plugins would initialise every runtime
 * (PoCL included) inside hwloc. On success the caller destroys *out. */
clp_status clp_topo_hwloc_load(const char *xml_path, int keep_io, hwloc_topology_t *out);

#endif
