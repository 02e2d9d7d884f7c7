/* Loading an hwloc topology with I/O objects and without GPU-runtime plugins. */
#include "topology/hwloc_util.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

clp_status clp_topo_hwloc_load(const char *xml_path, int keep_io, hwloc_topology_t *out)
{
	static const char *const off[] = {"opencl", "cuda", "nvml", "rsmi", "levelzero", "gl"};
	hwloc_topology_t topo;

	*out = NULL;
	if (xml_path && access(xml_path, R_OK) != 0)
		return clp_error(CLP_ERR_IO, "cannot read topology '%s': %s", xml_path,
				 strerror(errno));
	if (hwloc_topology_init(&topo) != 0)
		return clp_error(CLP_ERR_NOMEM, "hwloc_topology_init failed: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
					      off[i]);
	if (keep_io)
		hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
	if (xml_path && hwloc_topology_set_xml(topo, xml_path) != 0) {
		int e = errno;

		hwloc_topology_destroy(topo);
		return clp_error(CLP_ERR_FORMAT, "topology '%s' is not an hwloc XML file hwloc can "
				 "read (%s)", xml_path, strerror(e));
	}
	if (hwloc_topology_load(topo) != 0) {
		int e = errno;

		hwloc_topology_destroy(topo);
		return clp_error(xml_path ? CLP_ERR_FORMAT : CLP_ERR_UNSUPPORTED,
				 "hwloc could not load %s%s (%s)", xml_path ? "topology " : "",
				 xml_path ? xml_path : "this machine's topology", strerror(e));
	}
	*out = topo;
	return CLP_OK;
}
