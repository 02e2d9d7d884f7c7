/* PCI addresses of OpenCL devices: cl_khr_pci_bus_info, then AMD's, then NVIDIA's query. */
#include "cl/pci.h"
#include "cl/runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Declared here so that the file builds against headers that predate these extensions. */
#define CLP_DEVICE_PCI_BUS_INFO_KHR 0x410F
#define CLP_DEVICE_TOPOLOGY_AMD 0x4037
#define CLP_DEVICE_PCI_BUS_ID_NV 0x4008
#define CLP_DEVICE_PCI_SLOT_ID_NV 0x4009
#define CLP_DEVICE_PCI_DOMAIN_ID_NV 0x400A

struct khr_pci_bus_info {
	cl_uint domain, bus, device, function;
};

/* cl_device_topology_amd: 24 bytes; the PCIe view keeps bus/device/function as signed chars. */
union amd_topology {
	struct {
		cl_uint type;
		cl_uint data[5];
	} raw;
	struct {
		cl_uint type;
		cl_char unused[17];
		cl_char bus;
		cl_char device;
		cl_char function;
	} pcie;
};

static int has_ext(cl_device_id d, const char *ext)
{
	size_t len = 0;
	char *s;
	int found = 0;

	if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0)
		return 0;
	s = malloc(len + 1);
	if (!s)
		return 0;
	if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, len, s, NULL) == CL_SUCCESS) {
		s[len] = '\0';
		found = strstr(s, ext) != NULL;
	}
	free(s);
	return found;
}

clp_status clp_cl_device_id_pci(cl_device_id d, clp_cl_pci *out)
{
	struct khr_pci_bus_info khr;
	union amd_topology amd;
	cl_uint nvbus = 0, nvslot = 0, nvdomain = 0;

	memset(out, 0, sizeof(*out));
	if (has_ext(d, "cl_khr_pci_bus_info") &&
	    clGetDeviceInfo(d, CLP_DEVICE_PCI_BUS_INFO_KHR, sizeof(khr), &khr, NULL) == CL_SUCCESS) {
		out->domain = khr.domain;
		out->bus = khr.bus;
		out->dev = khr.device;
		out->func = khr.function;
		snprintf(out->how, sizeof(out->how), "cl_khr_pci_bus_info");
		return CLP_OK;
	}
	memset(&amd, 0, sizeof(amd));
	if (has_ext(d, "cl_amd_device_attribute_query") &&
	    clGetDeviceInfo(d, CLP_DEVICE_TOPOLOGY_AMD, sizeof(amd), &amd, NULL) == CL_SUCCESS &&
	    amd.raw.type == 1 /* CL_DEVICE_TOPOLOGY_TYPE_PCIE_AMD */) {
		out->domain = 0; /* AMD's query has no domain */
		out->bus = (unsigned char)amd.pcie.bus;
		out->dev = (unsigned char)amd.pcie.device;
		out->func = (unsigned char)amd.pcie.function;
		snprintf(out->how, sizeof(out->how), "amd_topology");
		return CLP_OK;
	}
	if (has_ext(d, "cl_nv_device_attribute_query") &&
	    clGetDeviceInfo(d, CLP_DEVICE_PCI_BUS_ID_NV, sizeof(nvbus), &nvbus, NULL) == CL_SUCCESS &&
	    clGetDeviceInfo(d, CLP_DEVICE_PCI_SLOT_ID_NV, sizeof(nvslot), &nvslot, NULL) ==
		    CL_SUCCESS) {
		/* The domain query exists since CUDA 10.2; older drivers mean domain 0. */
		if (clGetDeviceInfo(d, CLP_DEVICE_PCI_DOMAIN_ID_NV, sizeof(nvdomain), &nvdomain,
				    NULL) != CL_SUCCESS)
			nvdomain = 0;
		out->domain = nvdomain;
		out->bus = nvbus & 0xff;
		out->dev = nvslot >> 3; /* the slot id packs device and function like devfn */
		out->func = nvslot & 7;
		snprintf(out->how, sizeof(out->how), "nv_pci");
		return CLP_OK;
	}
	return clp_error(CLP_ERR_NOT_FOUND, "OpenCL device reports no PCI address");
}

clp_status clp_cl_device_pci(int index, clp_cl_pci *out)
{
	clp_cl_devinfo *devs = NULL;
	cl_device_id *ids = NULL;
	int n = 0;
	clp_status s;

	s = clp_cl_root_devices(&devs, &ids, &n);
	if (s != CLP_OK)
		return s;
	if (index < 0 || index >= n)
		s = clp_error(CLP_ERR_NOT_FOUND, "no OpenCL device %d (there are %d)", index, n);
	else
		s = clp_cl_device_id_pci(ids[index], out);
	if (s == CLP_ERR_NOT_FOUND && index >= 0 && index < n)
		clp_error(s, "OpenCL device %d (%s) reports no PCI address", index,
			  devs[index].name);
	free(devs);
	free(ids);
	return s;
}

void clp_cl_pci_str(const clp_cl_pci *p, char *buf, size_t n)
{
	snprintf(buf, n, "%04x:%02x:%02x.%x", p->domain & 0xffff, p->bus & 0xff, p->dev & 0x1f,
		 p->func & 7);
}
