/* OpenCL device enumeration and the device selector grammar (see cl/runtime.h). */
#include "cl/runtime.h"
#include "cl/runtime_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void info_str(cl_device_id d, cl_device_info what, char *dst, size_t n)
{
	size_t got = 0;

	dst[0] = '\0';
	if (clGetDeviceInfo(d, what, n, dst, &got) != CL_SUCCESS)
		dst[0] = '\0';
	dst[n - 1] = '\0';
}

static uint64_t info_u64(cl_device_id d, cl_device_info what)
{
	cl_ulong v = 0;

	clGetDeviceInfo(d, what, sizeof(v), &v, NULL);
	return v;
}

static uint32_t info_u32(cl_device_id d, cl_device_info what)
{
	cl_uint v = 0;

	clGetDeviceInfo(d, what, sizeof(v), &v, NULL);
	return v;
}

static const char *type_name(cl_device_type t)
{
	if (t & CL_DEVICE_TYPE_GPU)
		return "gpu";
	if (t & CL_DEVICE_TYPE_CPU)
		return "cpu";
	if (t & CL_DEVICE_TYPE_ACCELERATOR)
		return "accelerator";
	return "other";
}

void clp_cl_describe(cl_device_id d, clp_cl_devinfo *o)
{
	cl_device_type type = 0;
	size_t wg = 0;
	cl_bool unified = CL_FALSE;
	cl_device_partition_property props[8];
	size_t nprops = 0;

	info_str(d, CL_DEVICE_NAME, o->name, sizeof(o->name));
	info_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof(o->vendor));
	info_str(d, CL_DRIVER_VERSION, o->driver, sizeof(o->driver));
	info_str(d, CL_DEVICE_VERSION, o->version, sizeof(o->version));
	info_str(d, CL_DEVICE_OPENCL_C_VERSION, o->c_version, sizeof(o->c_version));
	info_str(d, CL_DEVICE_EXTENSIONS, o->extensions, sizeof(o->extensions));
	clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	snprintf(o->type, sizeof(o->type), "%s", type_name(type));
	o->vendor_id = info_u32(d, CL_DEVICE_VENDOR_ID);
	o->compute_units = info_u32(d, CL_DEVICE_MAX_COMPUTE_UNITS);
	o->max_clock_mhz = info_u32(d, CL_DEVICE_MAX_CLOCK_FREQUENCY);
	o->global_mem = info_u64(d, CL_DEVICE_GLOBAL_MEM_SIZE);
	o->max_alloc = info_u64(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
	o->local_mem = info_u64(d, CL_DEVICE_LOCAL_MEM_SIZE);
	clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
	o->max_wg_size = wg;
	o->pref_vec_float = info_u32(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT);
	o->mem_align = info_u32(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
	o->fp64 = strstr(o->extensions, "cl_khr_fp64") != NULL;
	o->fp16 = strstr(o->extensions, "cl_khr_fp16") != NULL;
	clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL);
	o->unified_memory = unified == CL_TRUE;
	o->max_subdevices = 0;
	if (clGetDeviceInfo(d, CL_DEVICE_PARTITION_PROPERTIES, sizeof(props), props, &nprops) ==
	    CL_SUCCESS) {
		for (size_t i = 0; i < nprops / sizeof(props[0]); i++)
			if (props[i] == CL_DEVICE_PARTITION_EQUALLY)
				o->max_subdevices = info_u32(d, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
	}
}

clp_status clp_cl_root_devices(clp_cl_devinfo **out, cl_device_id **ids, int *n)
{
	cl_uint np = 0;
	cl_platform_id *plats = NULL;
	clp_cl_devinfo *devs = NULL;
	cl_device_id *dids = NULL;
	int count = 0;
	cl_int err;

	*out = NULL;
	if (ids)
		*ids = NULL;
	*n = 0;
	err = clGetPlatformIDs(0, NULL, &np);
	if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || np == 0)
		return CLP_OK; /* no OpenCL at all: an empty list, not an error */
	if (err != CL_SUCCESS)
		return clp_error(CLP_ERR_OPENCL, "clGetPlatformIDs: %s", clp_cl_errname(err));
	plats = calloc(np, sizeof(*plats));
	if (!plats)
		return clp_error(CLP_ERR_NOMEM, "out of host memory listing OpenCL platforms");
	clGetPlatformIDs(np, plats, NULL);
	for (cl_uint p = 0; p < np; p++) {
		cl_uint nd = 0;
		cl_device_id *pd;
		char pname[128] = "", pver[128] = "";

		if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || !nd)
			continue;
		pd = calloc(nd, sizeof(*pd));
		devs = realloc(devs, (count + nd) * sizeof(*devs));
		dids = realloc(dids, (count + nd) * sizeof(*dids));
		if (!pd || !devs || !dids) {
			free(pd);
			free(plats);
			free(devs);
			free(dids);
			return clp_error(CLP_ERR_NOMEM, "out of host memory listing OpenCL devices");
		}
		clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, pd, NULL);
		clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof(pname), pname, NULL);
		clGetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof(pver), pver, NULL);
		pname[sizeof(pname) - 1] = pver[sizeof(pver) - 1] = '\0';
		for (cl_uint i = 0; i < nd; i++) {
			clp_cl_devinfo *o = &devs[count];

			memset(o, 0, sizeof(*o));
			clp_cl_describe(pd[i], o);
			o->index = count;
			o->platform_index = (int)p;
			o->sub_index = -1;
			snprintf(o->platform, sizeof(o->platform), "%s", pname);
			snprintf(o->platform_version, sizeof(o->platform_version), "%s", pver);
			dids[count++] = pd[i];
		}
		free(pd);
	}
	free(plats);
	*out = devs;
	if (ids)
		*ids = dids;
	else
		free(dids);
	*n = count;
	return CLP_OK;
}

clp_status clp_cl_devices(clp_cl_devinfo **out, int *n)
{
	return clp_cl_root_devices(out, NULL, n);
}

static int contains_ci(const char *hay, const char *needle)
{
	size_t nl = strlen(needle);

	for (; *hay; hay++)
		if (strncasecmp(hay, needle, nl) == 0)
			return 1;
	return 0;
}

static int parse_int(const char *s, const char **end, int *v)
{
	char *e;
	long x;

	if (!isdigit((unsigned char)*s))
		return 0;
	x = strtol(s, &e, 10);
	if (x < 0 || x > 1 << 20)
		return 0;
	*v = (int)x;
	*end = e;
	return 1;
}

static clp_status no_match(const clp_cl_devinfo *devs, int n, const char *selector, const char *why)
{
	char list[2048];
	size_t used = 0;

	list[0] = '\0';
	for (int i = 0; i < n && used < sizeof(list) - 1; i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "\n  %d: %s (%s, %s)",
					 i, devs[i].name, devs[i].vendor, devs[i].type);
	if (n == 0)
		snprintf(list, sizeof(list), " (no OpenCL device found: is an ICD installed?)");
	return clp_error(CLP_ERR_NOT_FOUND, "device selector '%s' %s; devices:%s", selector, why,
			 list);
}

clp_status clp_cl_select(const clp_cl_devinfo *devs, int n, const char *selector,
			 clp_cl_selection *sel)
{
	const char *s = selector;
	const char *end;
	int idx;

	if (!s || !*s)
		s = getenv("CLPIPE_DEVICE");
	if (!s || !*s)
		s = "default";
	sel->index = -1;
	sel->sub_index = -1;
	sel->sub_parts = 0;
	if (n == 0)
		return no_match(devs, n, s, "matches nothing");
	if (parse_int(s, &end, &idx)) {
		int sub, parts = 0;

		if (idx >= n)
			return no_match(devs, n, s, "is past the last device");
		sel->index = idx;
		if (*end == '\0')
			return CLP_OK;
		if (*end != '.' || !parse_int(end + 1, &end, &sub))
			return no_match(devs, n, s, "is not of the form N, N.J or N.J/P");
		if (*end == '/') {
			if (!parse_int(end + 1, &end, &parts) || parts < 1)
				return no_match(devs, n, s, "has a bad part count after '/'");
		} else {
			parts = (int)devs[idx].compute_units;
		}
		if (*end != '\0')
			return no_match(devs, n, s, "has trailing characters");
		if (devs[idx].max_subdevices < 2)
			return clp_error(CLP_ERR_UNSUPPORTED,
					 "device selector '%s': device %d (%s) cannot be split into "
					 "sub-devices", s, idx, devs[idx].name);
		if (parts < 1 || (uint32_t)parts > devs[idx].compute_units ||
		    (uint32_t)parts > devs[idx].max_subdevices || sub >= parts)
			return clp_error(CLP_ERR_INVALID,
					 "device selector '%s': device %d (%s) has %u compute units; "
					 "cannot take part %d of %d", s, idx, devs[idx].name,
					 devs[idx].compute_units, sub, parts);
		sel->sub_index = sub;
		sel->sub_parts = parts;
		return CLP_OK;
	}
	if (strcasecmp(s, "default") == 0) {
		for (int i = 0; i < n; i++)
			if (strcmp(devs[i].type, "gpu") == 0) {
				sel->index = i;
				return CLP_OK;
			}
		sel->index = 0;
		return CLP_OK;
	}
	if (!strcasecmp(s, "cpu") || !strcasecmp(s, "gpu") || !strcasecmp(s, "accelerator")) {
		for (int i = 0; i < n; i++)
			if (strcasecmp(devs[i].type, s) == 0) {
				sel->index = i;
				return CLP_OK;
			}
		return no_match(devs, n, s, "matches no device of that type");
	}
	for (int i = 0; i < n; i++)
		if (contains_ci(devs[i].name, s) || contains_ci(devs[i].vendor, s) ||
		    contains_ci(devs[i].platform, s)) {
			sel->index = i;
			return CLP_OK;
		}
	return no_match(devs, n, s, "matches no device name, vendor or platform");
}
