/* This machine: live discovery (a CPU device is local to the whole host), the PCI query of a
 * device that has no PCI address, binding, and a short run of the device benchmark whose every
 * figure must be measured, finite and positive, and survive the JSON profile. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/pci.h"
#include "tests/harness.h"
#include "topology/assign.h"
#include "topology/bench.h"
#include "topology/bind.h"
#include "topology/discover.h"

static void test_live_discovery(void)
{
	clp_topo_host h;
	clp_topo_cldev *d = NULL;
	int n = 0;

	CHECK_OK(clp_topo_cldevs_live(&d, &n));
	CHECK_OK(clp_topo_discover_live(&h));
	CHECK(h.ndevices == n && n > 0, "%d devices, %d listed", h.ndevices, n);
	CHECK(h.pus > 0 && h.cores > 0 && h.numa_nodes > 0 && h.cpuset[0] && h.name[0],
	      "host %s: %d PUs %d cores %d nodes '%s'", h.name, h.pus, h.cores, h.numa_nodes,
	      h.cpuset);
	for (int i = 0; i < h.ndevices && i < n; i++) {
		const clp_topo_device *t = &h.devices[i];

		CHECK(!strcmp(t->name, d[i].info.name) && t->index == i, "device %d named", i);
		if (!strcmp(t->type, "cpu")) {
			clp_cl_pci pci;

			CHECK(t->loc == CLP_TOPO_LOC_CPU_DEVICE && t->local_to_host &&
				      !strcmp(t->cpuset, h.cpuset) && t->cores == h.cores,
			      "CPU device %d is the whole host: %s '%s'", i,
			      clp_topo_loc_name(t->loc), t->cpuset);
			CHECK(!d[i].has_pci, "CPU device %d reports no PCI address", i);
			CHECK_ERR(clp_cl_device_pci(i, &pci), CLP_ERR_NOT_FOUND, t->name);
		}
	}
	free(d);
	clp_topo_host_clear(&h);
}

static void test_live_bind(void)
{
	clp_topo_host h;
	clp_topo_assignment a;
	char report[320];

	CHECK_OK(clp_topo_discover_live(&h));
	if (h.ndevices == 0)
		return;
	CHECK_OK(clp_topo_assign(&h, 0, 1, NULL, &a));
	CHECK_OK(clp_topo_bind(CLP_TOPO_BIND_NONE, &a, report, sizeof(report)));
	CHECK(strstr(report, "not bound") != NULL, "none: %s", report);
	/* core: bind near the device, which for this machine's devices is where we run anyway */
	CHECK_OK(clp_topo_bind(CLP_TOPO_BIND_CORE, &a, report, sizeof(report)));
	CHECK(strstr(report, "bound to PUs") != NULL, "core: %s", report);
	clp_topo_host_clear(&h);
}

static void check_stat(const char *what, const clp_topo_stat *s, int n)
{
	CHECK(s->n == n && isfinite(s->median) && s->median > 0 && s->min <= s->median &&
		      s->median <= s->max && s->q1 <= s->q3,
	      "%s: n %d median %g [%g .. %g]", what, s->n, s->median, s->min, s->max);
}

static void test_bench_device(void)
{
	clp_cl_ctx *ctx = th_ctx();
	clp_topo_bench_opts o;
	clp_topo_profile p, q;
	json_t *j;

	if (!ctx)
		return;
	clp_topo_bench_defaults(&o);
	o.repeats = 3;
	o.warmup = 1;
	o.bw_bytes = (size_t)1 << 20;
	o.xfer_bytes = (size_t)256 << 10;
	o.compute_ms = 1;
	o.launch_batch = 5;
	o.ngemm = 2;
	o.gemm[0][0] = 33, o.gemm[0][1] = 17, o.gemm[0][2] = 9;
	o.gemm[1][0] = 1, o.gemm[1][1] = 127, o.gemm[1][2] = 7;
	CHECK_OK(clp_topo_bench_device(ctx, &o, &p));
	for (int w = 0; w < CLP_TOPO_NWIDTHS; w++) {
		check_stat("dependent MAD", &p.mad[w], 3);
		check_stat("read", &p.read[w], 3);
		check_stat("write", &p.write[w], 3);
		check_stat("copy", &p.copy[w], 3);
	}
	check_stat("independent MAD", &p.mad_indep, 3);
	CHECK(p.indep_width >= 1 && p.indep_width <= 16 &&
	      (p.indep_chains == 8 || p.indep_chains == 16) && p.indep_local >= 1 &&
	      p.indep_tried >= 10, "independent: width %d chains %d local %d of %d tried",
	      p.indep_width, p.indep_chains, p.indep_local, p.indep_tried);
	if (!strcmp(p.type, "cpu")) { /* the host FMA loop beside it, and their ratio */
		check_stat("host FMA loop", &p.host_fma, 3);
		check_stat("device / host", &p.host_fma_ratio, 3);
		CHECK(p.host_fma_threads == (int)p.compute_units && p.host_fma_chains >= 12 &&
		      p.host_fma_isa[0], "host loop: %d threads (%u CUs), %d chains, isa '%s'",
		      p.host_fma_threads, p.compute_units, p.host_fma_chains, p.host_fma_isa);
	} else {
		CHECK(p.host_fma.n == 0, "a host FMA loop for a %s device", p.type);
	}
	CHECK(p.bw_bytes > 0 && p.bw_bytes <= ((size_t)1 << 20), "bandwidth buffer %zu",
	      p.bw_bytes);
	for (int w = 0; w < CLP_TOPO_NWIDTHS; w++)
		CHECK(p.mad[w].median <= p.mad[p.mad_best].median, "best width is the best");
	check_stat("h2d pageable", &p.h2d_pageable, 3);
	check_stat("h2d pinned", &p.h2d_pinned, 3);
	check_stat("h2d mapped", &p.h2d_mapped, 3);
	check_stat("d2h pageable", &p.d2h_pageable, 3);
	check_stat("d2h pinned", &p.d2h_pinned, 3);
	check_stat("d2h mapped", &p.d2h_mapped, 3);
	check_stat("launch queued", &p.launch_queued, 3);
	check_stat("launch round trip", &p.launch_roundtrip, 30);
	CHECK(p.launch_q2e.n == 30 && p.launch_q2e.min >= 0, "queued->end n %d", p.launch_q2e.n);
	CHECK(p.ngemm == 2 && p.gemm[1].n == 127 && p.gemm[0].backend[0], "gemm shapes %d",
	      p.ngemm);
	check_stat("gemm", &p.gemm[0].gflops, 3);
	check_stat("gemm ms", &p.gemm[1].ms, 3);

	j = clp_topo_profile_to_json(&p);
	CHECK(j != NULL, "profile to JSON");
	if (j) {
		CHECK_OK(clp_topo_profile_from_json(j, "live profile", &q));
		CHECK(q.mad[4].median == p.mad[4].median && q.read_best == p.read_best &&
			      q.launch_queued.max == p.launch_queued.max && q.ngemm == 2 &&
			      q.gemm[0].gflops.median == p.gemm[0].gflops.median &&
			      q.xfer_bytes == p.xfer_bytes && !strcmp(q.name, p.name),
		      "live profile survives JSON");
		json_decref(j);
	}

	o.repeats = 0;
	CHECK_ERR(clp_topo_bench_device(ctx, &o, &p), CLP_ERR_INVALID, "repeats");
}

TH_MAIN(TH_TEST(test_live_discovery), TH_TEST(test_live_bind), TH_TEST(test_bench_device))
