/* clpipe devices: list the OpenCL devices this machine offers. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/runtime.h"
#include "tools/cli.h"

static void help(void)
{
	printf("usage: clpipe devices [--json]\n\n"
	       "Lists every OpenCL device: index, platform, name, vendor, type, compute units,\n"
	       "memory, largest single allocation, OpenCL C version, fp64/fp16 and how it splits.\n\n"
	       "Select a device elsewhere with --device SPEC or CLPIPE_DEVICE=SPEC, where SPEC is\n"
	       "  N        device N of this list\n"
	       "  N.J      sub-device J of device N split into single compute units\n"
	       "  N.J/P    sub-device J of device N split equally into P parts\n"
	       "  cpu|gpu|accelerator   the first device of that type\n"
	       "  TEXT     the first device whose name, vendor or platform contains TEXT\n"
	       "  default  the first GPU, else the first device\n");
}

static json_t *dev_json(const clp_cl_devinfo *d)
{
	return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:s, s:b, "
			 "s:b, s:i, s:i}",
			 "index", d->index, "platform", d->platform, "name", d->name, "vendor",
			 d->vendor, "type", d->type, "driver", d->driver, "version", d->version,
			 "compute_units", (int)d->compute_units, "max_clock_mhz",
			 (int)d->max_clock_mhz, "global_mem", (json_int_t)d->global_mem,
			 "max_alloc", (json_int_t)d->max_alloc, "local_mem",
			 (json_int_t)d->local_mem, "opencl_c", d->c_version, "fp64", d->fp64,
			 "fp16", d->fp16, "max_subdevices", (int)d->max_subdevices,
			 "pref_vector_float", (int)d->pref_vec_float);
}

int cmd_devices(int argc, char **argv)
{
	int as_json = 0, n = 0;
	clp_cl_devinfo *devs = NULL;
	clp_status s;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			help();
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			as_json = 1;
		} else {
			return cli_usage_error("devices", "unknown option '%s'", argv[i]);
		}
	}
	s = clp_cl_devices(&devs, &n);
	if (s != CLP_OK)
		return cli_fail("devices", s);
	if (as_json) {
		json_t *arr = json_array();

		for (int i = 0; i < n; i++)
			json_array_append_new(arr, dev_json(&devs[i]));
		json_dumpf(arr, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(arr);
		free(devs);
		return 0;
	}
	if (n == 0) {
		printf("no OpenCL devices found (is an ICD such as pocl-opencl-icd installed?)\n");
		free(devs);
		return 0;
	}
	printf("%-3s %-28s %-32s %-14s %-5s %4s %9s %9s %-10s %-9s %s\n", "#", "platform", "name",
	       "vendor", "type", "CUs", "memory", "max alloc", "OpenCL C", "fp64/fp16", "split");
	for (int i = 0; i < n; i++) {
		const clp_cl_devinfo *d = &devs[i];
		const char *cv = strstr(d->c_version, "OpenCL C ");
		char ver[16];

		snprintf(ver, sizeof(ver), "%.3s", cv ? cv + 9 : d->c_version);
		printf("%-3d %-28.28s %-32.32s %-14.14s %-5s %4u %7.1fGi %7.1fGi %-10s %-4s/%-4s ", i,
		       d->platform, d->name, d->vendor, d->type, d->compute_units,
		       d->global_mem / 1073741824.0, d->max_alloc / 1073741824.0, ver,
		       d->fp64 ? "yes" : "no", d->fp16 ? "yes" : "no");
		if (d->max_subdevices > 1)
			printf("up to %u parts (%d.0 .. %d.%u)\n", d->max_subdevices, i, i,
			       d->max_subdevices - 1);
		else
			printf("-\n");
	}
	free(devs);
	return 0;
}
