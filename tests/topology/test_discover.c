/* Discovery on real machines' hwloc XML topologies with device descriptions: which NUMA node
 * and cores each GPU gets, devices that match no PCI object or report none, CPU devices as
 * host-local, NVLink links; and the errors bad files give. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "topology/discover.h"

#ifndef TOPO_DATA
#error "TOPO_DATA (the test data directory) must be defined"
#endif

static int load(const char *xml, const char *devs, clp_topo_host *h)
{
	char xp[512], dp[512];
	clp_topo_cldev *d = NULL;
	int n = 0;
	clp_status s;

	snprintf(xp, sizeof(xp), "%s/%s", TOPO_DATA, xml);
	snprintf(dp, sizeof(dp), "%s/%s", TOPO_DATA, devs);
	s = clp_topo_cldevs_read(dp, &d, &n);
	CHECK_OK(s);
	if (s != CLP_OK)
		return 0;
	s = clp_topo_discover(xp, d, n, h);
	CHECK_OK(s);
	free(d);
	return s == CLP_OK;
}

static void check_dev(const clp_topo_host *h, int i, clp_topo_loc loc, int numa,
		      const char *cpuset, int cores)
{
	const clp_topo_device *d = &h->devices[i];

	CHECK(d->loc == loc, "device %d (%s): locality %s, want %s", i, d->name,
	      clp_topo_loc_name(d->loc), clp_topo_loc_name(loc));
	CHECK(d->numa == numa, "device %d (%s): NUMA %d, want %d", i, d->name, d->numa, numa);
	CHECK(!strcmp(d->cpuset, cpuset), "device %d (%s): cpuset '%s', want '%s'", i, d->name,
	      d->cpuset, cpuset);
	CHECK(d->cores == cores, "device %d (%s): %d cores, want %d", i, d->name, d->cores, cores);
	CHECK(d->local_to_host == (loc != CLP_TOPO_LOC_PCI), "device %d: local_to_host %d", i,
	      d->local_to_host);
}

/* NVIDIA and AMD GPUs on different sockets, a device with an unknown PCI address, one without
 * any, and PoCL. */
static void test_mixed_vendors(void)
{
	clp_topo_host h;

	if (!load("32em64t-2n8c2t-pci-normalio.xml", "mixed.devices.json", &h))
		return;
	CHECK(h.pus == 32 && h.cores == 16 && h.numa_nodes == 2, "host %d PUs %d cores %d nodes",
	      h.pus, h.cores, h.numa_nodes);
	CHECK(!strcmp(h.cpuset, "0-31"), "host cpuset '%s'", h.cpuset);
	CHECK(h.ndevices == 6, "%d devices", h.ndevices);
	if (h.ndevices == 6) {
		check_dev(&h, 0, CLP_TOPO_LOC_PCI, 0, "0-7,16-23", 8);  /* Tesla M2075, socket 0 */
		check_dev(&h, 1, CLP_TOPO_LOC_PCI, 1, "8-15,24-31", 8); /* Radeon, socket 1 */
		check_dev(&h, 2, CLP_TOPO_LOC_PCI, 1, "8-15,24-31", 8); /* Tesla K40m */
		check_dev(&h, 3, CLP_TOPO_LOC_PCI_UNMATCHED, -1, "0-31", 16);
		check_dev(&h, 4, CLP_TOPO_LOC_NO_PCI_ID, -1, "0-31", 16);
		check_dev(&h, 5, CLP_TOPO_LOC_CPU_DEVICE, -1, "0-31", 16);
		CHECK(!strcmp(h.devices[1].pci, "0000:84:00.1"), "AMD pci '%s'", h.devices[1].pci);
		CHECK(!strcmp(h.devices[3].pci, "0000:99:00.0"), "unmatched keeps its address '%s'",
		      h.devices[3].pci);
		CHECK(h.devices[4].pci[0] == '\0', "no PCI address: '%s'", h.devices[4].pci);
		CHECK(h.devices[5].max_subdevices == 32, "PoCL splits");
	}
	CHECK(h.nlinks == 0, "no NVLink here, got %d", h.nlinks);
	clp_topo_host_clear(&h);
}

/* Four P100s, two per socket, with NVLink between the pairs. */
static void test_power8_nvlink(void)
{
	clp_topo_host h;

	if (!load("power8gpudistances.xml", "power8.devices.json", &h))
		return;
	CHECK(!strcmp(h.name, "drac-12.grenoble.grid5000.fr"), "host name from the XML: '%s'",
	      h.name);
	CHECK(h.ndevices == 4 && h.numa_nodes == 2, "%d devices, %d nodes", h.ndevices,
	      h.numa_nodes);
	if (h.ndevices == 4) {
		check_dev(&h, 0, CLP_TOPO_LOC_PCI, 0, "0-1,8-9,16-17,24-25", 4);
		check_dev(&h, 1, CLP_TOPO_LOC_PCI, 0, "0-1,8-9,16-17,24-25", 4);
		check_dev(&h, 2, CLP_TOPO_LOC_PCI, 1, "80-81,88-89,96-97,104-105", 4);
		check_dev(&h, 3, CLP_TOPO_LOC_PCI, 1, "80-81,88-89,96-97,104-105", 4);
	}
	CHECK(h.nlinks == 2, "two NVLink pairs, got %d", h.nlinks);
	for (int i = 0; i < h.nlinks; i++) {
		const clp_topo_link *l = &h.links[i];

		CHECK((l->a == 0 && l->b == 1) || (l->a == 2 && l->b == 3), "link %d-%d", l->a,
		      l->b);
		CHECK(l->bandwidth_gbps == 40.0 && !strcmp(l->kind, "nvlink"), "link %s %.1f GB/s",
		      l->kind, l->bandwidth_gbps);
	}
	clp_topo_host_clear(&h);
}

/* A DGX-2: 16 V100s behind PCIe switches, 8 per socket; PoCL on the host. */
static void test_dgx2(void)
{
	clp_topo_host h;

	if (!load("nvidiaDGX2.xml", "dgx2.devices.json", &h))
		return;
	CHECK(h.ndevices == 17, "%d devices", h.ndevices);
	for (int i = 0; i < 16 && i < h.ndevices; i++)
		check_dev(&h, i, CLP_TOPO_LOC_PCI, i < 8 ? 0 : 1, i < 8 ? "0-1" : "24-25", 2);
	if (h.ndevices == 17)
		check_dev(&h, 16, CLP_TOPO_LOC_CPU_DEVICE, -1, "0-1,24-25", 4);
	CHECK(h.nlinks == 0, "GPU-GPU NVLink only through switches: %d direct links", h.nlinks);
	clp_topo_host_clear(&h);
}

static void test_pci_parse(void)
{
	clp_cl_pci p;
	char s[16];

	CHECK_OK(clp_topo_pci_parse("000a:01:1f.7", &p));
	CHECK(p.domain == 10 && p.bus == 1 && p.dev == 31 && p.func == 7, "parsed %x:%x:%x.%x",
	      p.domain, p.bus, p.dev, p.func);
	clp_cl_pci_str(&p, s, sizeof(s));
	CHECK(!strcmp(s, "000a:01:1f.7"), "printed '%s'", s);
	CHECK_OK(clp_topo_pci_parse("84:00.1", &p));
	CHECK(p.domain == 0 && p.bus == 0x84 && p.func == 1, "short form");
	CHECK_ERR(clp_topo_pci_parse("84:00", &p), CLP_ERR_INVALID, "84:00");
	CHECK_ERR(clp_topo_pci_parse("0000:00:20.0", &p), CLP_ERR_INVALID, "not a PCI address");
	CHECK_ERR(clp_topo_pci_parse("0000:00:01.0x", &p), CLP_ERR_INVALID, "0x");
}

static const char *write_tmp(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/clp_topo_test_%d_%s", (int)getpid(), name);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

static void test_bad_inputs(void)
{
	clp_topo_cldev *d = NULL;
	clp_topo_host h;
	int n = 0;
	const char *p;

	CHECK_ERR(clp_topo_cldevs_read("/nonexistent/devs.json", &d, &n), CLP_ERR_IO,
		  "/nonexistent/devs.json");
	p = write_tmp("trunc.json", "{\"devices\": [{\"name\": \"x\", \"type\"");
	CHECK_ERR(clp_topo_cldevs_read(p, &d, &n), CLP_ERR_FORMAT, p, "not valid JSON");
	p = write_tmp("noname.json", "{\"devices\": [{\"type\": \"gpu\"}]}");
	CHECK_ERR(clp_topo_cldevs_read(p, &d, &n), CLP_ERR_FORMAT, p, "devices[0]", "'name'");
	p = write_tmp("type.json", "{\"devices\": [{\"name\": \"A\", \"type\": \"fpga\"}]}");
	CHECK_ERR(clp_topo_cldevs_read(p, &d, &n), CLP_ERR_FORMAT, "devices[0] ('A').type",
		  "fpga");
	p = write_tmp("pci.json", "{\"devices\": [{\"name\": \"A\", \"type\": \"gpu\"}, "
				  "{\"name\": \"B\", \"type\": \"gpu\", \"pci\": \"zz\"}]}");
	CHECK_ERR(clp_topo_cldevs_read(p, &d, &n), CLP_ERR_FORMAT, "devices[1] ('B').pci", "zz");
	p = write_tmp("mem.json",
		      "{\"devices\": [{\"name\": \"A\", \"type\": \"gpu\", \"global_mem\": \"8G\"}]}");
	CHECK_ERR(clp_topo_cldevs_read(p, &d, &n), CLP_ERR_FORMAT, "global_mem", "integer");
	p = write_tmp("notdev.json", "[1, 2]");
	CHECK_ERR(clp_topo_cldevs_read(p, &d, &n), CLP_ERR_FORMAT, "devices[0]", "object");

	CHECK_ERR(clp_topo_discover("/nonexistent/topo.xml", NULL, 0, &h), CLP_ERR_IO,
		  "/nonexistent/topo.xml");
	p = write_tmp("bad.xml", "<topology><object type=\"Machine\"");
	CHECK_ERR(clp_topo_discover(p, NULL, 0, &h), CLP_ERR_FORMAT, p);
	CHECK(d == NULL && n == 0, "outputs stay empty on failure");
}

/* The description a machine writes reads back as the same devices. */
static void test_description_round_trip(void)
{
	char path[512];
	clp_topo_cldev *a = NULL, *b = NULL;
	int na = 0, nb = 0;

	snprintf(path, sizeof(path), "%s/mixed.devices.json", TOPO_DATA);
	CHECK_OK(clp_topo_cldevs_read(path, &a, &na));
	snprintf(path, sizeof(path), "/tmp/clp_topo_test_%d_rt.json", (int)getpid());
	CHECK_OK(clp_topo_cldevs_write(path, a, na));
	CHECK_OK(clp_topo_cldevs_read(path, &b, &nb));
	CHECK(na == nb && na == 6, "%d then %d devices", na, nb);
	for (int i = 0; i < na && i < nb; i++) {
		CHECK(!strcmp(a[i].info.name, b[i].info.name) &&
			      !strcmp(a[i].info.type, b[i].info.type) &&
			      a[i].info.global_mem == b[i].info.global_mem &&
			      a[i].info.compute_units == b[i].info.compute_units &&
			      a[i].has_pci == b[i].has_pci && a[i].pci.bus == b[i].pci.bus &&
			      a[i].pci.func == b[i].pci.func &&
			      a[i].info.max_subdevices == b[i].info.max_subdevices,
		      "device %d differs after a round trip", i);
	}
	remove(path);
	free(a);
	free(b);
}

TH_MAIN(TH_TEST(test_mixed_vendors), TH_TEST(test_power8_nvlink), TH_TEST(test_dgx2),
	TH_TEST(test_pci_parse), TH_TEST(test_bad_inputs), TH_TEST(test_description_round_trip))
