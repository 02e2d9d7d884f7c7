/* Rank-to-device assignment by local rank and by policy, CPU devices shared through sub-devices
 * or a thread limit, and where binding puts each rank (on the XML machines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "topology/assign.h"
#include "topology/bind.h"
#include "topology/discover.h"

static int load(const char *xml, const char *devs, clp_topo_host *h)
{
	char xp[512], dp[512];
	clp_topo_cldev *d = NULL;
	int n = 0;
	clp_status s;

	snprintf(xp, sizeof(xp), "%s/%s", TOPO_DATA, xml);
	snprintf(dp, sizeof(dp), "%s/%s", TOPO_DATA, devs);
	s = clp_topo_cldevs_read(dp, &d, &n);
	if (s == CLP_OK)
		s = clp_topo_discover(xp, d, n, h);
	CHECK_OK(s);
	free(d);
	return s == CLP_OK;
}

/* A host with one PoCL device of `cus` compute units and 2 cores. */
static void pocl_host(clp_topo_host *h, unsigned cus, unsigned maxsub)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "laptop");
	h->cores = h->pus = 2;
	h->numa_nodes = 1;
	snprintf(h->cpuset, sizeof(h->cpuset), "0-1");
	h->devices = calloc(1, sizeof(*h->devices));
	h->ndevices = 1;
	snprintf(h->devices[0].name, sizeof(h->devices[0].name), "pthread-haswell");
	snprintf(h->devices[0].type, sizeof(h->devices[0].type), "cpu");
	snprintf(h->devices[0].cpuset, sizeof(h->devices[0].cpuset), "0-1");
	h->devices[0].compute_units = cus;
	h->devices[0].max_subdevices = maxsub;
	h->devices[0].local_to_host = 1;
	h->devices[0].loc = CLP_TOPO_LOC_CPU_DEVICE;
}

static void test_by_local_rank(void)
{
	clp_topo_host h;
	clp_topo_assignment a;

	if (!load("power8gpudistances.xml", "power8.devices.json", &h))
		return;
	for (int l = 0; l < 4; l++) {
		CHECK_OK(clp_topo_assign(&h, l, 4, "auto", &a));
		CHECK(a.device == l && a.sharers == 1 && a.sub_index == -1, "rank %d -> device %d "
		      "(%d sharers)", l, a.device, a.sharers);
		CHECK(!strcmp(a.cpuset, h.devices[l].cpuset), "rank %d near its GPU: %s", l,
		      a.cpuset);
	}
	CHECK_OK(clp_topo_assign(&h, 5, 6, NULL, &a));
	CHECK(a.device == 1 && a.sharers == 2 && strstr(a.why, "share"), "6 ranks on 4 GPUs: "
	      "rank 5 -> %d, %d sharers (%s)", a.device, a.sharers, a.why);
	CHECK_ERR(clp_topo_assign(&h, 4, 4, NULL, &a), CLP_ERR_INVALID, "local rank 4 of 4");
	clp_topo_host_clear(&h);
}

/* The mixed host: accelerators first, PoCL only when asked. */
static void test_policy(void)
{
	clp_topo_host h;
	clp_topo_assignment a;

	if (!load("32em64t-2n8c2t-pci-normalio.xml", "mixed.devices.json", &h))
		return;
	CHECK_OK(clp_topo_assign(&h, 0, 2, "", &a));
	CHECK(a.device == 0 && !strcmp(a.selector, "0"), "auto: rank 0 -> %s", a.selector);
	CHECK_OK(clp_topo_assign(&h, 1, 2, "", &a));
	CHECK(a.device == 1 && !strcmp(a.cpuset, "8-15,24-31"), "auto: rank 1 -> %d near %s",
	      a.device, a.cpuset);
	CHECK_OK(clp_topo_assign(&h, 1, 2, "Tahiti,K40m", &a));
	CHECK(a.device == 2, "policy by name: rank 1 -> %d", a.device);
	CHECK_OK(clp_topo_assign(&h, 2, 3, "2,1", &a));
	CHECK(a.device == 2 && a.sharers == 2, "policy cycles: rank 2 -> %d (%d sharers)",
	      a.device, a.sharers);
	/* two ranks on PoCL (32 compute units): disjoint halves */
	for (int l = 0; l < 2; l++) {
		char want[16];

		CHECK_OK(clp_topo_assign(&h, l, 2, "cpu", &a));
		snprintf(want, sizeof(want), "5.%d/2", l);
		CHECK(!strcmp(a.selector, want) && a.sub_index == l && a.sub_parts == 2 &&
			      a.part == l && a.parts == 2 && !a.limit_threads,
		      "rank %d on PoCL: '%s' (%s)", l, a.selector, a.why);
	}
	CHECK_OK(clp_topo_assign(&h, 0, 1, "5.3/4", &a));
	CHECK(!strcmp(a.selector, "5.3/4") && a.part == 3 && a.parts == 4, "explicit split '%s'",
	      a.selector);
	CHECK_ERR(clp_topo_assign(&h, 0, 2, "gpu,fpga", &a), CLP_ERR_NOT_FOUND, "fpga",
		  "local rank 1");
	CHECK_ERR(clp_topo_assign(&h, 0, 1, "1.0/2", &a), CLP_ERR_UNSUPPORTED, "cannot be split");
	clp_topo_host_clear(&h);
}

static void test_pocl_sharing(void)
{
	clp_topo_host h;
	clp_topo_assignment a0, a1;

	pocl_host(&h, 2, 2);
	CHECK_OK(clp_topo_assign(&h, 0, 2, NULL, &a0));
	CHECK_OK(clp_topo_assign(&h, 1, 2, NULL, &a1));
	CHECK(!strcmp(a0.selector, "0.0/2") && !strcmp(a1.selector, "0.1/2"),
	      "disjoint sub-devices: '%s' '%s'", a0.selector, a1.selector);
	CHECK(!a0.limit_threads && !a1.limit_threads, "no thread limit needed");
	clp_topo_host_clear(&h);

	/* POCL_MAX_PTHREAD_COUNT=1 already: one compute unit, cannot split */
	pocl_host(&h, 1, 1);
	CHECK_OK(clp_topo_assign(&h, 1, 2, NULL, &a1));
	CHECK(!strcmp(a1.selector, "0") && a1.limit_threads && a1.part == 1 && a1.parts == 2,
	      "thread limit: '%s' limit %d (%s)", a1.selector, a1.limit_threads, a1.why);
	CHECK(strstr(a1.why, "POCL_MAX_PTHREAD_COUNT") != NULL, "why names the limit: %s",
	      a1.why);
	clp_topo_host_clear(&h);

	pocl_host(&h, 2, 2);
	h.ndevices = 0;
	CHECK_ERR(clp_topo_assign(&h, 0, 1, NULL, &a0), CLP_ERR_NOT_FOUND, "laptop",
		  "no OpenCL device");
	h.ndevices = 1;
	clp_topo_host_clear(&h);
	CHECK(clp_topo_pocl_threads(16, 4) == 4 && clp_topo_pocl_threads(2, 3) == 1,
	      "pocl threads");
}

/* Binding targets on the XML machines: a socket's cores, split in whole cores between ranks. */
static void test_bind_target(void)
{
	char xml[512], set[256];
	clp_topo_assignment a;
	clp_topo_bind_mode m;

	snprintf(xml, sizeof(xml), "%s/32em64t-2n8c2t-pci-normalio.xml", TOPO_DATA);
	memset(&a, 0, sizeof(a));
	snprintf(a.selector, sizeof(a.selector), "1");
	snprintf(a.cpuset, sizeof(a.cpuset), "8-15,24-31");
	a.parts = 1;
	CHECK_OK(clp_topo_bind_target(xml, &a, set, sizeof(set)));
	CHECK(!strcmp(set, "8-15,24-31"), "whole socket: %s", set);
	a.parts = 2;
	a.part = 0;
	CHECK_OK(clp_topo_bind_target(xml, &a, set, sizeof(set)));
	CHECK(!strcmp(set, "8-11,24-27"), "part 0 of 2, whole cores with their threads: %s",
	      set);
	a.part = 1;
	CHECK_OK(clp_topo_bind_target(xml, &a, set, sizeof(set)));
	CHECK(!strcmp(set, "12-15,28-31"), "part 1 of 2: %s", set);
	a.parts = 32; /* more parts than cores: PUs */
	a.part = 17;
	CHECK_OK(clp_topo_bind_target(xml, &a, set, sizeof(set)));
	/* PUs in hwloc's logical order: the two threads of a core are neighbours (8, 24, 9, ...) */
	CHECK(!strcmp(set, "24"), "part 17 of 32: PU %s", set);
	a.cpuset[0] = '\0'; /* unknown: the whole machine */
	a.parts = 1;
	CHECK_OK(clp_topo_bind_target(xml, &a, set, sizeof(set)));
	CHECK(!strcmp(set, "0-31"), "whole machine: %s", set);

	CHECK(clp_topo_bind_wanted(CLP_TOPO_BIND_AUTO, "0-31", "0-31", 0) == 1, "auto binds an "
	      "unbound rank");
	CHECK(clp_topo_bind_wanted(CLP_TOPO_BIND_AUTO, "0-31", "4", 0) == 0, "auto keeps the "
	      "launcher's binding");
	CHECK(clp_topo_bind_wanted(CLP_TOPO_BIND_AUTO, "0-31", "0-31", 1) == 0, "auto trusts "
	      "Open MPI's word");
	CHECK(clp_topo_bind_wanted(CLP_TOPO_BIND_CORE, "0-31", "4", 1) == 1, "core overrides");
	CHECK(clp_topo_bind_wanted(CLP_TOPO_BIND_NONE, "0-31", "0-31", 0) == 0, "none");
	CHECK_OK(clp_topo_bind_parse("core", &m));
	CHECK(m == CLP_TOPO_BIND_CORE, "parse core");
	CHECK_ERR(clp_topo_bind_parse("socket", &m), CLP_ERR_INVALID, "socket", "auto, none");
}

TH_MAIN(TH_TEST(test_by_local_rank), TH_TEST(test_policy), TH_TEST(test_pocl_sharing),
	TH_TEST(test_bind_target))
