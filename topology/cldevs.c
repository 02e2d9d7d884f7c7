/* The OpenCL devices a machine reports, live or from a device description file (discover.h). */
#include "topology/discover.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"

clp_status clp_topo_cldevs_live(clp_topo_cldev **out, int *n)
{
	clp_cl_devinfo *infos = NULL;
	clp_topo_cldev *devs;
	int count = 0;

	*out = NULL;
	*n = 0;
	CLP_TRY(clp_cl_devices(&infos, &count));
	devs = calloc((size_t)count + 1, sizeof(*devs));
	if (!devs) {
		free(infos);
		return clp_error(CLP_ERR_NOMEM, "out of host memory listing devices");
	}
	for (int i = 0; i < count; i++) {
		clp_status s;

		devs[i].info = infos[i];
		s = clp_cl_device_pci(i, &devs[i].pci);
		devs[i].has_pci = s == CLP_OK;
		if (s != CLP_OK && s != CLP_ERR_NOT_FOUND) {
			free(infos);
			free(devs);
			return s;
		}
	}
	clp_error_clear();
	free(infos);
	*out = devs;
	*n = count;
	return CLP_OK;
}

clp_status clp_topo_pci_parse(const char *s, clp_cl_pci *out)
{
	unsigned v[4] = {0, 0, 0, 0};
	const unsigned max[4] = {0xffff, 0xff, 0x1f, 7};
	const char seps4[] = "::.", seps3[] = ":.";
	int colons = 0, k = 0;
	const char *p = s;

	memset(out, 0, sizeof(*out));
	for (const char *q = s; *q; q++)
		colons += *q == ':';
	if (colons == 1)
		k = 1; /* "bb:dd.f": domain 0 */
	for (int field = k; field < 4; field++) {
		const char *seps = colons == 1 ? seps3 : seps4;
		int digits = 0;

		for (; isxdigit((unsigned char)*p) && digits < 5; p++, digits++)
			v[field] = v[field] * 16 + (unsigned)(isdigit((unsigned char)*p) ?
								*p - '0' :
								tolower((unsigned char)*p) - 'a' + 10);
		if (digits == 0 || v[field] > max[field])
			goto bad;
		if (field < 3) {
			if (*p != seps[field - k])
				goto bad;
			p++;
		}
	}
	if (*p != '\0' || (colons != 1 && colons != 2))
		goto bad;
	out->domain = v[0];
	out->bus = v[1];
	out->dev = v[2];
	out->func = v[3];
	return CLP_OK;
bad:
	return clp_error(CLP_ERR_INVALID, "'%s' is not a PCI address (dddd:bb:dd.f)", s);
}

static json_t *cldev_to_json(const clp_topo_cldev *c)
{
	const clp_cl_devinfo *d = &c->info;
	json_t *j = json_pack(
		"{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:i, "
		"s:i, s:i, s:b, s:b, s:b, s:s}",
		"index", d->index, "name", d->name, "vendor", d->vendor, "type", d->type, "platform",
		d->platform, "driver", d->driver, "version", d->version, "opencl_c", d->c_version,
		"vendor_id", (int)d->vendor_id, "compute_units", (int)d->compute_units,
		"max_clock_mhz", (int)d->max_clock_mhz, "global_mem", (json_int_t)d->global_mem,
		"max_alloc", (json_int_t)d->max_alloc, "local_mem", (json_int_t)d->local_mem,
		"max_wg_size", (json_int_t)d->max_wg_size, "pref_vector_float",
		(int)d->pref_vec_float, "mem_align", (int)d->mem_align, "max_subdevices",
		(int)d->max_subdevices, "fp64", d->fp64, "fp16", d->fp16, "unified_memory",
		d->unified_memory, "extensions", d->extensions);

	if (j)
		json_object_set_new(j, "platform_index", json_integer(d->platform_index));
	if (j && c->has_pci) {
		char pci[16];

		clp_cl_pci_str(&c->pci, pci, sizeof(pci));
		json_object_set_new(j, "pci", json_string(pci));
	}
	return j;
}

json_t *clp_topo_cldevs_to_json(const clp_topo_cldev *devs, int n)
{
	json_t *arr = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(arr, cldev_to_json(&devs[i]));
	return json_pack("{s:o}", "devices", arr);
}

static int known_type(const char *t)
{
	return !strcmp(t, "cpu") || !strcmp(t, "gpu") || !strcmp(t, "accelerator") ||
	       !strcmp(t, "other");
}

static clp_status cldev_from_json(const json_t *j, const char *origin, int i, clp_topo_cldev *c)
{
	clp_cl_devinfo *d = &c->info;
	char where[48], pci[32] = "";
	clp_status s;

	snprintf(where, sizeof(where), "devices[%d]", i);
	memset(c, 0, sizeof(*c));
	d->index = i;
	d->sub_index = -1;
	if (!json_is_object(j))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an object", origin, where);
	CLP_TRY(clp_json_str(origin, where, j, "name", 1, d->name, sizeof(d->name)));
	snprintf(where, sizeof(where), "devices[%d] ('%.24s')", i, d->name);
	CLP_TRY(clp_json_str(origin, where, j, "type", 1, d->type, sizeof(d->type)));
	for (char *p = d->type; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!known_type(d->type))
		return clp_error(CLP_ERR_FORMAT, "%s: %s.type: '%s' is not cpu, gpu, accelerator "
				 "or other", origin, where, d->type);
	CLP_TRY(clp_json_int(origin, where, j, "index", 0, 0, 1 << 20, &d->index));
	if (d->index != i)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.index is %d; devices are listed in "
				 "OpenCL order, so it must be %d", origin, where, d->index, i);
	CLP_TRY(clp_json_str(origin, where, j, "vendor", 0, d->vendor, sizeof(d->vendor)));
	CLP_TRY(clp_json_str(origin, where, j, "platform", 0, d->platform, sizeof(d->platform)));
	CLP_TRY(clp_json_int(origin, where, j, "platform_index", 0, 0, 1 << 16,
			     &d->platform_index));
	CLP_TRY(clp_json_str(origin, where, j, "driver", 0, d->driver, sizeof(d->driver)));
	CLP_TRY(clp_json_str(origin, where, j, "version", 0, d->version, sizeof(d->version)));
	CLP_TRY(clp_json_str(origin, where, j, "opencl_c", 0, d->c_version, sizeof(d->c_version)));
	CLP_TRY(clp_json_str(origin, where, j, "extensions", 0, d->extensions,
			     sizeof(d->extensions)));
	CLP_TRY(clp_json_u32(origin, where, j, "vendor_id", 0, INT32_MAX, &d->vendor_id));
	CLP_TRY(clp_json_u32(origin, where, j, "compute_units", 0, INT32_MAX, &d->compute_units));
	CLP_TRY(clp_json_u32(origin, where, j, "max_clock_mhz", 0, INT32_MAX, &d->max_clock_mhz));
	CLP_TRY(clp_json_u64(origin, where, j, "global_mem", 0, INT64_MAX, &d->global_mem));
	CLP_TRY(clp_json_u64(origin, where, j, "max_alloc", 0, INT64_MAX, &d->max_alloc));
	CLP_TRY(clp_json_u64(origin, where, j, "local_mem", 0, INT64_MAX, &d->local_mem));
	CLP_TRY(clp_json_u64(origin, where, j, "max_wg_size", 0, INT64_MAX, &d->max_wg_size));
	CLP_TRY(clp_json_u32(origin, where, j, "pref_vector_float", 0, INT32_MAX,
			     &d->pref_vec_float));
	CLP_TRY(clp_json_u32(origin, where, j, "mem_align", 0, INT32_MAX, &d->mem_align));
	CLP_TRY(clp_json_u32(origin, where, j, "max_subdevices", 0, INT32_MAX, &d->max_subdevices));
	CLP_TRY(clp_json_bool(origin, where, j, "fp64", 0, &d->fp64));
	CLP_TRY(clp_json_bool(origin, where, j, "fp16", 0, &d->fp16));
	CLP_TRY(clp_json_bool(origin, where, j, "unified_memory", 0, &d->unified_memory));
	CLP_TRY(clp_json_str(origin, where, j, "pci", 0, pci, sizeof(pci)));
	if (pci[0]) {
		if ((s = clp_topo_pci_parse(pci, &c->pci)) != CLP_OK)
			return clp_error_context(CLP_ERR_FORMAT, "%s: %s.pci: ", origin, where);
		snprintf(c->pci.how, sizeof(c->pci.how), "description");
		c->has_pci = 1;
	}
	if (d->max_alloc == 0)
		d->max_alloc = d->global_mem / 4; /* the OpenCL minimum a device must offer */
	return CLP_OK;
}

clp_status clp_topo_cldevs_from_json(const json_t *j, const char *origin, clp_topo_cldev **out,
				     int *n)
{
	const json_t *arr = j;
	clp_topo_cldev *devs;
	clp_status s;

	*out = NULL;
	*n = 0;
	if (json_is_object(j)) {
		json_t *a = NULL;

		CLP_TRY(clp_json_arr(origin, "device description", j, "devices", 1, &a));
		arr = a;
	}
	if (!json_is_array(arr))
		return clp_error(CLP_ERR_FORMAT, "%s: a device description is {\"devices\": [...]}",
				 origin);
	devs = calloc(json_array_size(arr) + 1, sizeof(*devs));
	if (!devs)
		return clp_error(CLP_ERR_NOMEM, "out of host memory reading %s", origin);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		if ((s = cldev_from_json(json_array_get(arr, i), origin, (int)i, &devs[i])) !=
		    CLP_OK) {
			free(devs);
			return s;
		}
	}
	*out = devs;
	*n = (int)json_array_size(arr);
	return CLP_OK;
}

clp_status clp_topo_cldevs_read(const char *path, clp_topo_cldev **out, int *n)
{
	json_t *j;
	clp_status s;

	*out = NULL;
	*n = 0;
	CLP_TRY(clp_json_load(path, &j));
	s = clp_topo_cldevs_from_json(j, path, out, n);
	json_decref(j);
	return s;
}

clp_status clp_topo_cldevs_write(const char *path, const clp_topo_cldev *devs, int n)
{
	json_t *j = clp_topo_cldevs_to_json(devs, n);
	clp_status s;

	if (!j)
		return clp_error(CLP_ERR_NOMEM, "out of host memory writing %s", path);
	s = clp_json_save_shared(path, j);
	json_decref(j);
	return s;
}
