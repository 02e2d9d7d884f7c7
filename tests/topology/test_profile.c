/* Device profiles as data: statistics over repeats, the JSON round trip, and reader errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "topology/profile.h"

static void test_stats(void)
{
	double odd[5] = {5, 1, 4, 2, 3}, even[4] = {10, 40, 20, 30}, one[1] = {7};
	clp_topo_stat s, r;

	clp_topo_stat_of(odd, 5, &s);
	CHECK(s.n == 5 && s.median == 3 && s.min == 1 && s.max == 5 && s.q1 == 2 && s.q3 == 4,
	      "odd: n %d median %g [%g %g] q %g %g", s.n, s.median, s.min, s.max, s.q1, s.q3);
	clp_topo_stat_of(even, 4, &s);
	CHECK(s.median == 25 && s.q1 == 17.5 && s.q3 == 32.5 && s.min == 10 && s.max == 40,
	      "even: median %g q %g %g", s.median, s.q1, s.q3);
	clp_topo_stat_of(one, 1, &s);
	CHECK(s.n == 1 && s.median == 7 && s.min == 7 && s.max == 7, "one sample");
	clp_topo_stat_of(one, 0, &s);
	CHECK(s.n == 0, "no samples: not measured");
	clp_topo_stat_of(odd, 5, &s);
	r = clp_topo_stat_scale(s, -2);
	CHECK(r.min == -10 && r.max == -2 && r.median == -6, "negative scale keeps min <= max");
	r = clp_topo_stat_recip(s, 60);
	CHECK(r.min == 12 && r.max == 60 && r.median == 20, "reciprocal: %g [%g %g]", r.median,
	      r.min, r.max);
}

static clp_topo_stat mk(double med)
{
	clp_topo_stat s = {9, med, med * 0.9, med * 1.2, med * 0.95, med * 1.05};

	return s;
}

static int same_stat(const clp_topo_stat *a, const clp_topo_stat *b)
{
	return a->n == b->n && a->median == b->median && a->min == b->min && a->max == b->max &&
	       a->q1 == b->q1 && a->q3 == b->q3;
}

static void test_round_trip(void)
{
	clp_topo_profile_set set = {0}, back = {0};
	clp_topo_profile p;
	clp_topo_p2p l;
	char path[256];

	memset(&p, 0, sizeof(p));
	p.rank = 1;
	snprintf(p.host, sizeof(p.host), "node7");
	snprintf(p.selector, sizeof(p.selector), "0.1/2");
	snprintf(p.name, sizeof(p.name), "gfx90a");
	snprintf(p.type, sizeof(p.type), "gpu");
	p.compute_units = 104;
	p.global_mem = 68702699520ULL;
	for (int w = 0; w < CLP_TOPO_NWIDTHS; w++) {
		p.mad[w] = mk(100.0 * (w + 1));
		p.read[w] = mk(500.0 + w);
		p.write[w] = mk(400.0 + w);
	}
	p.copy[2] = mk(900);
	p.mad_best = 4;
	p.read_best = 3;
	p.copy_best = 2;
	p.mad_indep = mk(2000);
	p.indep_width = 8;
	p.indep_chains = 8;
	p.indep_local = 32;
	p.indep_tried = 20;
	p.host_fma = mk(2100);
	p.host_fma_ratio = mk(0.95);
	snprintf(p.host_fma_isa, sizeof(p.host_fma_isa), "avx512f");
	p.host_fma_threads = 104;
	p.host_fma_chains = 16;
	p.bw_bytes = (size_t)256 << 20;
	p.xfer_bytes = (size_t)64 << 20;
	p.h2d_pinned = mk(24);
	p.d2h_mapped = mk(20);
	p.launch_roundtrip = mk(12);
	p.ngemm = 1;
	p.gemm[0].m = 512, p.gemm[0].n = 3072, p.gemm[0].k = 768;
	snprintf(p.gemm[0].backend, sizeof(p.gemm[0].backend), "clblast");
	p.gemm[0].gflops = mk(15000);
	p.gemm[0].ms = mk(0.16);
	memset(&l, 0, sizeof(l));
	l.a = 0, l.b = 1, l.small_bytes = 8, l.large_bytes = 4 << 20;
	snprintf(l.host_a, sizeof(l.host_a), "node6");
	snprintf(l.host_b, sizeof(l.host_b), "node7");
	l.latency_us = mk(1.7);
	l.bandwidth_gbps = mk(11.5);
	set.profiles = &p;
	set.nprofiles = 1;
	set.p2p = &l;
	set.np2p = 1;
	snprintf(path, sizeof(path), "/tmp/clp_profile_%d.json", (int)getpid());
	CHECK_OK(clp_topo_profile_set_write(&set, path));
	CHECK_OK(clp_topo_profile_set_read(path, &back));
	CHECK(back.nprofiles == 1 && back.np2p == 1, "%d profiles %d links", back.nprofiles,
	      back.np2p);
	if (back.nprofiles == 1 && back.np2p == 1) {
		const clp_topo_profile *q = &back.profiles[0];
		int ok = q->rank == 1 && !strcmp(q->host, "node7") && !strcmp(q->selector, "0.1/2") &&
			 q->compute_units == 104 && q->global_mem == p.global_mem &&
			 q->mad_best == 4 && q->read_best == 3 && q->copy_best == 2 &&
			 q->indep_width == 8 && q->bw_bytes == p.bw_bytes &&
			 same_stat(&q->mad_indep, &p.mad_indep) && q->indep_local == 32 &&
			 q->indep_tried == 20 && same_stat(&q->host_fma, &p.host_fma) &&
			 same_stat(&q->host_fma_ratio, &p.host_fma_ratio) &&
			 !strcmp(q->host_fma_isa, "avx512f") && q->host_fma_threads == 104 &&
			 q->host_fma_chains == 16 &&
			 same_stat(&q->h2d_pinned, &p.h2d_pinned) && q->h2d_pageable.n == 0 &&
			 same_stat(&q->launch_roundtrip, &p.launch_roundtrip) && q->ngemm == 1 &&
			 q->gemm[0].n == 3072 && !strcmp(q->gemm[0].backend, "clblast") &&
			 same_stat(&q->gemm[0].gflops, &p.gemm[0].gflops);

		for (int w = 0; w < CLP_TOPO_NWIDTHS; w++)
			ok &= same_stat(&q->mad[w], &p.mad[w]) && same_stat(&q->read[w], &p.read[w]);
		CHECK(ok, "profile differs after a JSON round trip");
		CHECK(back.p2p[0].large_bytes == l.large_bytes &&
			      !strcmp(back.p2p[0].host_b, "node7") &&
			      same_stat(&back.p2p[0].latency_us, &l.latency_us),
		      "link differs after a round trip");
	}
	remove(path);
	clp_topo_profile_set_clear(&back);
}

static clp_status parse(const char *text, clp_topo_profile_set *out)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);
	clp_status s;

	if (!j)
		return clp_error(CLP_ERR_FORMAT, "test JSON: %s", err.text);
	s = clp_topo_profile_set_from_json(j, "profile.json", out);
	json_decref(j);
	return s;
}

static void test_bad_profiles(void)
{
	clp_topo_profile_set s;

	CHECK_ERR(parse("{\"format\": \"clpeak\", \"version\": 1, \"devices\": []}", &s),
		  CLP_ERR_FORMAT, "profile.json", "clpeak");
	CHECK_ERR(parse("{\"format\": \"clpipe-device-profile\", \"version\": 2, \"devices\": []}",
			&s), CLP_ERR_FORMAT, "version", "2");
	CHECK_ERR(parse("{\"format\": \"clpipe-device-profile\", \"version\": 1, \"devices\": "
			"[{\"name\": \"g\", \"launch\": {\"roundtrip\": {\"median\": 5, \"min\": 6, "
			"\"max\": 9, \"n\": 3}}}]}", &s),
		  CLP_ERR_FORMAT, "device 'g'.roundtrip", "not within");
	CHECK_ERR(parse("{\"format\": \"clpipe-device-profile\", \"version\": 1, \"devices\": "
			"[{\"name\": \"g\", \"gemm\": [{\"m\": 1, \"n\": 2}]}]}", &s),
		  CLP_ERR_FORMAT, "gemm[0]", "'k'");
	CHECK_OK(parse("{\"format\": \"clpipe-device-profile\", \"version\": 1, \"devices\": "
		       "[{\"name\": \"g\"}]}", &s));
	CHECK(s.nprofiles == 1 && s.profiles[0].mad[0].n == 0, "figures not measured stay empty");
	clp_topo_profile_set_clear(&s);
}

TH_MAIN(TH_TEST(test_stats), TH_TEST(test_round_trip), TH_TEST(test_bad_profiles))
