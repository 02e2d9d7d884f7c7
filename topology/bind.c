/* Binding a rank near its device with hwloc (see bind.h). */
#include "topology/bind.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/hwloc_util.h"

clp_status clp_topo_bind_parse(const char *s, clp_topo_bind_mode *out)
{
	if (!s || !strcmp(s, "auto"))
		*out = CLP_TOPO_BIND_AUTO;
	else if (!strcmp(s, "none"))
		*out = CLP_TOPO_BIND_NONE;
	else if (!strcmp(s, "core"))
		*out = CLP_TOPO_BIND_CORE;
	else
		return clp_error(CLP_ERR_INVALID, "--bind '%s': expected auto, none or core", s);
	return CLP_OK;
}

/* part J of P equal groups of the whole cores inside set (of its PUs when it has fewer cores
 * than parts), into out. */
static void part_of(hwloc_topology_t topo, hwloc_const_cpuset_t set, int part, int parts,
		    hwloc_cpuset_t out)
{
	int ncores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE);
	hwloc_obj_type_t unit = ncores >= parts ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
	int nunits = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, unit);

	hwloc_bitmap_zero(out);
	if (nunits < parts) { /* fewer PUs than parts: parts share PUs round robin */
		hwloc_obj_t o = hwloc_get_obj_inside_cpuset_by_type(topo, set, HWLOC_OBJ_PU,
								    (unsigned)(part % nunits));
		if (o)
			hwloc_bitmap_copy(out, o->cpuset);
		return;
	}
	for (int i = part * nunits / parts; i < (part + 1) * nunits / parts; i++) {
		hwloc_obj_t o = hwloc_get_obj_inside_cpuset_by_type(topo, set, unit, (unsigned)i);

		if (o)
			hwloc_bitmap_or(out, out, o->cpuset);
	}
	hwloc_bitmap_and(out, out, set);
}

static clp_status target_set(hwloc_topology_t topo, const clp_topo_assignment *a,
			     hwloc_cpuset_t out)
{
	hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
	hwloc_cpuset_t near = hwloc_bitmap_alloc();

	if (!near)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (!a->cpuset[0] || hwloc_bitmap_list_sscanf(near, a->cpuset) != 0)
		hwloc_bitmap_copy(near, allowed);
	hwloc_bitmap_and(near, near, allowed);
	if (hwloc_bitmap_iszero(near))
		hwloc_bitmap_copy(near, allowed);
	if (a->parts > 1)
		part_of(topo, near, a->part, a->parts, out);
	else
		hwloc_bitmap_copy(out, near);
	if (hwloc_bitmap_iszero(out))
		hwloc_bitmap_copy(out, near);
	hwloc_bitmap_free(near);
	return CLP_OK;
}

clp_status clp_topo_bind_target(const char *xml_path, const clp_topo_assignment *a, char *set,
				size_t n)
{
	hwloc_topology_t topo;
	hwloc_cpuset_t out;
	clp_status s;

	CLP_TRY(clp_topo_hwloc_load(xml_path, 0, &topo));
	out = hwloc_bitmap_alloc();
	s = out ? target_set(topo, a, out) : clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (s == CLP_OK)
		hwloc_bitmap_list_snprintf(set, n, out);
	hwloc_bitmap_free(out);
	hwloc_topology_destroy(topo);
	return s;
}

int clp_topo_bind_wanted(clp_topo_bind_mode m, const char *allowed, const char *current,
			 int launcher_says_bound)
{
	hwloc_bitmap_t al, cur;
	int narrower;

	if (m == CLP_TOPO_BIND_NONE)
		return 0;
	if (m == CLP_TOPO_BIND_CORE)
		return 1;
	if (launcher_says_bound)
		return 0;
	al = hwloc_bitmap_alloc();
	cur = hwloc_bitmap_alloc();
	hwloc_bitmap_list_sscanf(al, allowed);
	hwloc_bitmap_list_sscanf(cur, current);
	/* bound already when the process may run on fewer PUs than it is allowed */
	narrower = !hwloc_bitmap_iszero(cur) && hwloc_bitmap_isincluded(cur, al) &&
		   !hwloc_bitmap_isequal(cur, al);
	hwloc_bitmap_free(al);
	hwloc_bitmap_free(cur);
	return !narrower;
}

/* Open MPI exports its binding decision to the ranks it started. */
static int launcher_bound(void)
{
	const char *pol = getenv("OMPI_MCA_hwloc_base_binding_policy");

	return pol && *pol && strcmp(pol, "none") != 0;
}

clp_status clp_topo_bind(clp_topo_bind_mode m, const clp_topo_assignment *a, char *report,
			 size_t n)
{
	hwloc_topology_t topo;
	hwloc_cpuset_t cur = NULL, target = NULL;
	char allowed_s[CLP_TOPO_CPUSET_LEN] = "", cur_s[CLP_TOPO_CPUSET_LEN] = "";
	char target_s[CLP_TOPO_CPUSET_LEN] = "";
	clp_status s = CLP_OK;

	if (report && n)
		report[0] = '\0';
	if (m == CLP_TOPO_BIND_NONE) {
		if (report)
			snprintf(report, n, "not bound (--bind none)");
		return CLP_OK;
	}
	CLP_TRY(clp_topo_hwloc_load(NULL, 0, &topo));
	cur = hwloc_bitmap_alloc();
	target = hwloc_bitmap_alloc();
	if (!cur || !target) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory");
		goto out;
	}
	if (hwloc_get_cpubind(topo, cur, HWLOC_CPUBIND_PROCESS) != 0)
		hwloc_bitmap_copy(cur, hwloc_topology_get_allowed_cpuset(topo));
	hwloc_bitmap_list_snprintf(allowed_s, sizeof(allowed_s),
				   hwloc_topology_get_allowed_cpuset(topo));
	hwloc_bitmap_list_snprintf(cur_s, sizeof(cur_s), cur);
	if (!clp_topo_bind_wanted(m, allowed_s, cur_s, launcher_bound())) {
		if (report)
			snprintf(report, n, "left as the launcher bound it: PUs %s", cur_s);
		goto out;
	}
	if ((s = target_set(topo, a, target)) != CLP_OK)
		goto out;
	hwloc_bitmap_list_snprintf(target_s, sizeof(target_s), target);
	if (hwloc_set_cpubind(topo, target, HWLOC_CPUBIND_PROCESS) != 0) {
		s = clp_error(CLP_ERR_UNSUPPORTED, "binding to PUs %s (near device %s) failed: %s",
			      target_s, a->selector, strerror(errno));
		goto out;
	}
	if (report)
		snprintf(report, n, "bound to PUs %s (near device %s%s)", target_s, a->selector,
			 a->parts > 1 ? ", this rank's share" : "");
out:
	hwloc_bitmap_free(cur);
	hwloc_bitmap_free(target);
	hwloc_topology_destroy(topo);
	return s;
}
