/* clpipe bench: the device benchmark. Every selected device (or, under mpirun, every rank's
 * device) is measured in one run; rank 0 prints one table and writes the device profile
 * (--json F, docs/DEVICE_PROFILE.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"
#include "cl/runtime.h"
#include "engine/scenario/cluster.h"
#include "topology/assign.h"
#include "topology/bench.h"
#include "topology/bind.h"
#include "topology/discover.h"
#include "tools/cli.h"
#include "topology/rank_device.h"

static void help(void)
{
	printf("usage: clpipe bench [--device SPEC[,SPEC..] | --all] [--json FILE]\n"
	       "                    [--only PARTS] [--repeats N] [--warmup N] [--gemm MxNxK[,..]]\n"
	       "                    [--bw-mib N] [--xfer-mib N] [--compute-ms MS]\n"
	       "                    [--bind auto|none|core] [--widths] [--quick] [--quiet]\n"
	       "       clpipe bench gemm ...   (the GEMM benchmark; see clpipe bench gemm --help)\n"
	       "       clpipe bench --model CONFIG ...   (the model's blocks on each device, the\n"
	       "                               planner's costs; clpipe bench --model x --help)\n"
	       "       clpipe bench --compare A.json B.json ...   (device profiles side by side,\n"
	       "                               with each one's ratio to the first)\n"
	       "           [--svg F [--kernels K.json ..]]   (their rooflines on one plot, with the\n"
	       "                               kernels of clpipe bench nn --json K.json)\n\n"
	       "Measures each device: peak single-precision compute (dependent multiply-add\n"
	       "chains as clpeak does, and the best of 20 formulations with independent chains;\n"
	       "on CPU devices also a C FMA loop on the host's cores), global memory bandwidth (read,\n"
	       "write, copy), host<->device transfers (pageable, pinned, mapped), kernel launch\n"
	       "latency (queued, round trip), the engine's GEMM at the given shapes and, under\n"
	       "mpirun, latency and bandwidth between every pair of ranks. Every figure is the\n"
	       "median over --repeats runs, with its range.\n\n"
	       "  --device SPEC[,..]  devices to measure (selector grammar: clpipe devices --help);\n"
	       "                      under mpirun, local rank i takes entry i (cyclically)\n"
	       "  --all               every device of this machine (alone; under mpirun each rank\n"
	       "                      measures the device it is assigned)\n"
	       "  --json FILE         write the device profile (docs/DEVICE_PROFILE.md)\n"
	       "  --cluster-out FILE  under mpirun: write the measured links as a cluster file\n"
	       "                      (docs/FORMATS.md; one device per rank, a link per pair\n"
	       "                      of hosts: the mean over their ranks' pairs)\n"
	       "  --only PARTS        comma list of compute,bandwidth,transfer,launch,gemm,p2p\n"
	       "  --repeats N         timed runs per figure (default 10); --warmup N (default 2)\n"
	       "  --gemm MxNxK,..     GEMM shapes (default 512x768x768,512x3072x768)\n"
	       "  --bw-mib N          bandwidth buffer (default 256, at most half the largest\n"
	       "                      allocation); --xfer-mib N transfer size (default 64)\n"
	       "  --compute-ms MS     duration each compute kernel is sized to (default 50)\n"
	       "  --bind MODE         under mpirun: auto (keep the launcher's binding, else bind\n"
	       "                      near the device), none, core (always bind near the device)\n"
	       "  --widths            print the figures of every vector width, not only the best\n"
	       "  --quick             tiny sizes and 3 repeats (a smoke test, not a measurement)\n"
	       "  --quiet             no progress lines on stderr\n");
}

static clp_status parse_parts(const char *s, unsigned *parts)
{
	static const char *const names[] = {"compute", "bandwidth", "transfer", "launch", "gemm",
					    "p2p"};
	char buf[256], *save = NULL;

	*parts = 0;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned i = 0;

		for (; i < sizeof(names) / sizeof(names[0]); i++)
			if (!strcmp(t, names[i]))
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			return clp_error(CLP_ERR_INVALID, "--only: '%s' is not one of compute, "
					 "bandwidth, transfer, launch, gemm, p2p", t);
		*parts |= 1u << i;
	}
	return CLP_OK;
}

static clp_status parse_gemm(const char *s, clp_topo_bench_opts *o)
{
	const char *p = s;

	o->ngemm = 0;
	while (*p) {
		unsigned long m, n, k;
		int used = 0;

		if (o->ngemm == CLP_TOPO_MAX_GEMM)
			return clp_error(CLP_ERR_INVALID, "--gemm: at most %d shapes",
					 CLP_TOPO_MAX_GEMM);
		if (sscanf(p, "%lux%lux%lu%n", &m, &n, &k, &used) != 3 || !m || !n || !k ||
		    (p[used] != ',' && p[used] != '\0'))
			return clp_error(CLP_ERR_INVALID, "--gemm '%s': expected MxNxK[,MxNxK..] "
					 "with positive sizes", s);
		o->gemm[o->ngemm][0] = m;
		o->gemm[o->ngemm][1] = n;
		o->gemm[o->ngemm][2] = k;
		o->ngemm++;
		p += used + (p[used] == ',');
	}
	return CLP_OK;
}

static void row(const char *what, const clp_topo_stat *s, const char *unit)
{
	if (s->n == 0)
		return;
	printf("  %-40s %10.3f  [%10.3f .. %10.3f]  %s\n", what, s->median, s->min, s->max, unit);
}

static void print_profile(const clp_topo_profile *p, int show_widths)
{
	char what[96];

	printf("\ndevice %s on %s (rank %d): %s (%s, %s, %u CUs, %.1f GiB)\n", p->selector,
	       p->host, p->rank, p->name, p->vendor, p->type, p->compute_units,
	       p->global_mem / 1073741824.0);
	printf("  %-40s %10s  [%10s .. %10s]\n", "figure", "median", "min", "max");
	snprintf(what, sizeof(what), "compute, clpeak's kernel (float%d)",
		 clp_topo_width(p->mad_best));
	row(what, &p->mad[p->mad_best], "GFLOP/s");
	for (int w = 0; show_widths && w < CLP_TOPO_NWIDTHS; w++) {
		snprintf(what, sizeof(what), "  float%d", clp_topo_width(w));
		row(what, &p->mad[w], "GFLOP/s");
	}
	snprintf(what, sizeof(what), "compute, best of %d (float%d x%d, wg %d)", p->indep_tried,
		 p->indep_width, p->indep_chains, p->indep_local);
	row(what, &p->mad_indep, "GFLOP/s");
	snprintf(what, sizeof(what), "host FMA loop (%s, %d thr x%d)", p->host_fma_isa,
		 p->host_fma_threads, p->host_fma_chains);
	row(what, &p->host_fma, "GFLOP/s");
	row("  device best / host loop, pair by pair", &p->host_fma_ratio, "");
	snprintf(what, sizeof(what), "memory read (float%d, %zu MiB)", clp_topo_width(p->read_best),
		 p->bw_bytes >> 20);
	row(what, &p->read[p->read_best], "GB/s");
	for (int w = 0; show_widths && w < CLP_TOPO_NWIDTHS; w++) {
		snprintf(what, sizeof(what), "  float%d", clp_topo_width(w));
		row(what, &p->read[w], "GB/s");
	}
	snprintf(what, sizeof(what), "memory write (float%d)", clp_topo_width(p->write_best));
	row(what, &p->write[p->write_best], "GB/s");
	snprintf(what, sizeof(what), "memory copy, read+write (float%d)",
		 clp_topo_width(p->copy_best));
	row(what, &p->copy[p->copy_best], "GB/s");
	snprintf(what, sizeof(what), "host->device pageable (%zu MiB)", p->xfer_bytes >> 20);
	row(what, &p->h2d_pageable, "GB/s");
	row("host->device pinned", &p->h2d_pinned, "GB/s");
	row("host->device mapped", &p->h2d_mapped, "GB/s");
	row("device->host pageable", &p->d2h_pageable, "GB/s");
	row("device->host pinned", &p->d2h_pinned, "GB/s");
	row("device->host mapped", &p->d2h_mapped, "GB/s");
	row("kernel launch, queued (per kernel)", &p->launch_queued, "us");
	row("kernel launch, round trip", &p->launch_roundtrip, "us");
	row("kernel launch, profiling queued->end", &p->launch_q2e, "us");
	for (int g = 0; g < p->ngemm; g++) {
		snprintf(what, sizeof(what), "gemm %zux%zux%zu (%s)", p->gemm[g].m, p->gemm[g].n,
			 p->gemm[g].k, p->gemm[g].backend);
		row(what, &p->gemm[g].gflops, "GFLOP/s");
	}
}

struct run {
	clp_topo_bench_opts opts;
	const char *devices; /* selector list, or NULL */
	int all;
	const char *json, *cluster_out;
	clp_topo_bind_mode bind;
	int quiet, widths;
};

/* The selectors this process measures: under MPI, its assigned device; alone, the list. */
static clp_status my_selectors(clp_comm *world, const struct run *r, char (*sel)[32], int *nsel,
			       char *note, size_t nnote)
{
	clp_status s;

	note[0] = '\0';
	*nsel = 0;
	if (clp_comm_size(world) == 1) {
		if (r->all) {
			clp_cl_devinfo *devs = NULL;
			int n = 0;

			CLP_TRY(clp_cl_devices(&devs, &n));
			for (int i = 0; i < n && i < 64; i++)
				snprintf(sel[(*nsel)++], 32, "%d", i);
			free(devs);
			if (n == 0)
				return clp_error(CLP_ERR_NOT_FOUND, "no OpenCL device to measure");
			return CLP_OK;
		}
		{
			char buf[512], *save = NULL;

			snprintf(buf, sizeof(buf), "%s", r->devices ? r->devices : "");
			for (char *t = strtok_r(buf, ",", &save); t && *nsel < 64;
			     t = strtok_r(NULL, ",", &save))
				snprintf(sel[(*nsel)++], 32, "%s", t);
			if (*nsel == 0)
				sel[(*nsel)++][0] = '\0'; /* CLPIPE_DEVICE, else the default */
		}
		return CLP_OK;
	}
	s = clp_topo_rank_device(world, r->devices, r->bind, sel[0], 32, note, nnote);
	if (s == CLP_OK)
		*nsel = 1;
	return s;
}

static clp_status measure(clp_comm *world, const struct run *r, clp_topo_profile_set *mine)
{
	char sel[64][32], note[1400];
	int nsel = 0;
	clp_status s;

	CLP_TRY(my_selectors(world, r, sel, &nsel, note, sizeof(note)));
	if (note[0] && !r->quiet)
		fprintf(stderr, "%s\n", note);
	mine->profiles = calloc((size_t)nsel, sizeof(*mine->profiles));
	if (!mine->profiles)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int i = 0; i < nsel; i++) {
		clp_topo_profile *p = &mine->profiles[i];
		clp_cl_ctx *ctx = NULL;

		CLP_TRY(clp_cl_ctx_create(&ctx, sel[i]));
		if (!r->quiet)
			fprintf(stderr, "rank %d: measuring %s (%s)\n", clp_comm_rank(world),
				clp_cl_ctx_device(ctx)->name, sel[i][0] ? sel[i] : "default");
		s = clp_topo_bench_device(ctx, &r->opts, p);
		clp_cl_ctx_free(ctx);
		if (s != CLP_OK)
			return clp_error_context(s, "rank %d, device '%s': ", clp_comm_rank(world),
						 sel[i]);
		p->rank = clp_comm_rank(world);
		snprintf(p->host, sizeof(p->host), "%s", clp_comm_host(world));
		snprintf(p->selector, sizeof(p->selector), "%.31s", sel[i][0] ? sel[i] : "default");
		mine->nprofiles++;
	}
	return CLP_OK;
}

/* Every rank's profiles to every rank (rank 0 prints and writes them). */
static clp_status gather(clp_comm *world, const clp_topo_profile_set *mine,
			 clp_topo_profile_set *all)
{
	json_t *j = clp_topo_profile_set_to_json(mine);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	void *buf = NULL;
	size_t *offs = NULL;
	clp_status s;

	json_decref(j);
	memset(all, 0, sizeof(*all));
	if (!text)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	s = clp_comm_allgatherv(world, text, strlen(text), &buf, &offs, "device profiles");
	free(text);
	for (int r = 0; s == CLP_OK && r < clp_comm_size(world); r++) {
		json_t *pj;
		clp_topo_profile_set one;
		clp_topo_profile *grown;
		char origin[48];

		snprintf(origin, sizeof(origin), "profile from rank %d", r);
		s = clp_json_parse(origin, (char *)buf + offs[r], offs[r + 1] - offs[r], &pj);
		if (s != CLP_OK)
			break;
		s = clp_topo_profile_set_from_json(pj, origin, &one);
		json_decref(pj);
		if (s != CLP_OK)
			break;
		grown = realloc(all->profiles,
				(size_t)(all->nprofiles + one.nprofiles + 1) * sizeof(*grown));
		if (!grown) {
			clp_topo_profile_set_clear(&one);
			s = clp_error(CLP_ERR_NOMEM, "out of host memory");
			break;
		}
		all->profiles = grown;
		memcpy(all->profiles + all->nprofiles, one.profiles,
		       (size_t)one.nprofiles * sizeof(*grown));
		all->nprofiles += one.nprofiles;
		clp_topo_profile_set_clear(&one);
	}
	free(buf);
	free(offs);
	return s;
}

/* The links of a p2p run as a cluster: a host per host name (in rank order), a device per rank
 * ("host:k", k-th rank on the host), a device link for two ranks on one host, and one link per
 * pair of hosts with the mean latency and bandwidth of their ranks' pairs (medians). */
static clp_status write_cluster(const clp_topo_p2p *p2p, int np2p, int nranks, const char *path)
{
	const char **host = calloc((size_t)nranks, sizeof(*host));
	int *hix = calloc((size_t)nranks, sizeof(*hix));
	double *sum = calloc((size_t)nranks * (size_t)nranks * 3, sizeof(*sum));
	clp_cluster *c = calloc(1, sizeof(*c));
	clp_status s = CLP_OK;

	if (nranks < 2 || np2p < 1) {
		s = clp_error(CLP_ERR_INVALID, "--cluster-out: links are measured between ranks: "
			      "run under mpirun with at least 2 ranks");
		goto out;
	}
	if (!host || !hix || !sum || !c ||
	    !(c->hosts = calloc((size_t)nranks, sizeof(*c->hosts))) ||
	    !(c->devices = calloc((size_t)nranks, sizeof(*c->devices))) ||
	    !(c->links = calloc((size_t)np2p, sizeof(*c->links)))) {
		s = clp_error(CLP_ERR_NOMEM, "--cluster-out: out of host memory");
		goto out;
	}
	for (int i = 0; i < np2p; i++) {
		if (p2p[i].a < 0 || p2p[i].a >= nranks || p2p[i].b < 0 || p2p[i].b >= nranks)
			continue;
		host[p2p[i].a] = p2p[i].host_a;
		host[p2p[i].b] = p2p[i].host_b;
	}
	for (int r = 0; r < nranks; r++) {
		int h = 0;
		clp_device *d = &c->devices[r];

		if (!host[r]) {
			s = clp_error(CLP_ERR_INVALID, "--cluster-out: no link measured for rank %d", r);
			goto out;
		}
		if (strlen(host[r]) >= sizeof(c->hosts[0].name) - 8) {
			s = clp_error(CLP_ERR_INVALID, "--cluster-out: rank %d's host name '%s' is "
				      "longer than %zu characters", r, host[r],
				      sizeof(c->hosts[0].name) - 9);
			goto out;
		}
		while (h < c->nhosts && strcmp(c->hosts[h].name, host[r]))
			h++;
		if (h == c->nhosts) {
			snprintf(c->hosts[h].name, sizeof(c->hosts[h].name), "%s", host[r]);
			c->nhosts++;
		}
		hix[r] = h;
		d->host = h;
		snprintf(d->id, sizeof(d->id), "%s:%d", host[r], c->hosts[h].ndevices++);
		snprintf(d->kind, sizeof(d->kind), "default");
		d->speed = 1.0;
	}
	/* devices in host order, as the file lists them */
	for (int h = 0, at = 0; h < c->nhosts; at += c->hosts[h].ndevices, h++)
		c->hosts[h].first_device = at;
	{
		clp_device *sorted = calloc((size_t)nranks, sizeof(*sorted));
		int *fill = calloc((size_t)c->nhosts, sizeof(*fill));

		if (!sorted || !fill) {
			free(sorted);
			free(fill);
			s = clp_error(CLP_ERR_NOMEM, "--cluster-out: out of host memory");
			goto out;
		}
		for (int r = 0; r < nranks; r++) {
			int h = hix[r], at = c->hosts[h].first_device + fill[h]++;

			sorted[at] = c->devices[r];
			hix[r] = at; /* from here on: the rank's device index */
		}
		free(c->devices);
		c->devices = sorted;
		c->ndevices = nranks;
		free(fill);
	}
	for (int i = 0; i < np2p; i++) {
		const clp_topo_p2p *l = &p2p[i];
		int da, db, ha, hb;

		if (l->a < 0 || l->a >= nranks || l->b < 0 || l->b >= nranks)
			continue;
		da = hix[l->a];
		db = hix[l->b];
		ha = c->devices[da].host;
		hb = c->devices[db].host;
		if (ha == hb) {
			c->links[c->nlinks++] = (clp_link){ha, da, hb, db, 0,
				{l->latency_us.median * 1e-6, l->bandwidth_gbps.median * 1e9}};
		} else {
			double *t = &sum[((size_t)(ha < hb ? ha : hb) * (size_t)nranks +
					  (size_t)(ha < hb ? hb : ha)) * 3];

			t[0] += l->latency_us.median * 1e-6;
			t[1] += l->bandwidth_gbps.median * 1e9;
			t[2] += 1;
		}
	}
	for (int a = 0; a < c->nhosts; a++)
		for (int b = a + 1; b < c->nhosts; b++) {
			const double *t = &sum[((size_t)a * (size_t)nranks + (size_t)b) * 3];

			if (t[2] > 0)
				c->links[c->nlinks++] = (clp_link){a, -1, b, -1, 0,
					{t[0] / t[2], t[1] / t[2]}};
		}
	c->intra = (clp_link_spec){5e-6, 50e9};
	c->inter = (clp_link_spec){20e-6, 12.5e9};
	c->eager_bytes = 65536;
	s = clp_cluster_save(c, path);
out:
	free(host);
	free(hix);
	free(sum);
	clp_cluster_free(c);
	return s;
}

static int run_bench(struct run *r, int *argc, char ***argv)
{
	clp_comm *world = NULL;
	clp_topo_profile_set mine = {0}, all = {0};
	clp_status s;
	int rc = 0;

	if ((s = clp_comm_world(argc, argv, &world)) != CLP_OK)
		return cli_fail("bench", s);
	r->opts.log = r->quiet ? NULL : stderr;
	if (clp_comm_rank(world) != 0 && r->opts.log)
		r->opts.log = NULL; /* one rank's progress is enough */
	s = measure(world, r, &mine);
	if (s == CLP_OK && clp_comm_size(world) > 1 && (r->opts.parts & CLP_BENCH_P2P))
		s = clp_topo_bench_p2p(world, &r->opts, &mine.p2p, &mine.np2p);
	if (s != CLP_OK) {
		rc = cli_fail("bench", s);
		if (clp_comm_size(world) > 1)
			clp_comm_abort(world, 1);
		goto out;
	}
	if ((s = gather(world, &mine, &all)) != CLP_OK) {
		rc = cli_fail("bench", s);
		goto out;
	}
	all.p2p = mine.p2p; /* every rank has the full list */
	all.np2p = mine.np2p;
	mine.p2p = NULL;
	if (clp_comm_rank(world) == 0) {
		for (int i = 0; i < all.nprofiles; i++)
			print_profile(&all.profiles[i], r->widths);
		if (all.np2p)
			printf("\nlinks between ranks (ping-pong, %zu bytes for latency, %zu KiB for "
			       "bandwidth)\n", all.p2p[0].small_bytes, all.p2p[0].large_bytes >> 10);
		for (int i = 0; i < all.np2p; i++) {
			char what[96];
			const clp_topo_p2p *l = &all.p2p[i];

			snprintf(what, sizeof(what), "rank %d <-> %d latency", l->a, l->b);
			row(what, &l->latency_us, "us");
			snprintf(what, sizeof(what), "rank %d <-> %d bandwidth", l->a, l->b);
			row(what, &l->bandwidth_gbps, "GB/s");
		}
		if (r->json && (s = clp_topo_profile_set_write(&all, r->json)) != CLP_OK)
			rc = cli_fail("bench", s);
		else if (r->json)
			printf("\nwrote %s\n", r->json);
		if (r->cluster_out && rc == 0) {
			s = write_cluster(all.p2p, all.np2p, clp_comm_size(world), r->cluster_out);
			if (s != CLP_OK)
				rc = cli_fail("bench", s);
			else
				printf("wrote %s\n", r->cluster_out);
		}
	}
out:
	clp_topo_profile_set_clear(&mine);
	clp_topo_profile_set_clear(&all);
	clp_comm_free(world);
	return rc;
}

int cmd_bench_device(int argc, char **argv)
{
	struct run r;
	clp_status s;

	memset(&r, 0, sizeof(r));
	clp_topo_bench_defaults(&r.opts);
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		int got;

		if (cli_is_help(argv[i])) {
			help();
			return 0;
		}
		if (!strcmp(argv[i], "--all")) {
			r.all = 1;
		} else if (!strcmp(argv[i], "--quiet")) {
			r.quiet = 1;
		} else if (!strcmp(argv[i], "--widths")) {
			r.widths = 1;
		} else if (!strcmp(argv[i], "--quick")) {
			r.opts.repeats = 3;
			r.opts.warmup = 1;
			r.opts.bw_bytes = (size_t)4 << 20;
			r.opts.xfer_bytes = (size_t)1 << 20;
			r.opts.compute_ms = 2;
			r.opts.launch_batch = 10;
			r.opts.p2p_large = (size_t)64 << 10;
			r.opts.ngemm = 1;
			r.opts.gemm[0][0] = 65, r.opts.gemm[0][1] = 33, r.opts.gemm[0][2] = 17;
		} else if ((got = cli_value(argc, argv, &i, "--device", &v)) != 0) {
			if (got < 0)
				return cli_usage_error("bench", "--device needs a value");
			r.devices = v;
		} else if ((got = cli_value(argc, argv, &i, "--json", &v)) != 0) {
			if (got < 0)
				return cli_usage_error("bench", "--json needs a file name");
			r.json = v;
		} else if ((got = cli_value(argc, argv, &i, "--cluster-out", &v)) != 0) {
			if (got < 0)
				return cli_usage_error("bench", "--cluster-out needs a file name");
			r.cluster_out = v;
		} else if ((got = cli_value(argc, argv, &i, "--only", &v)) != 0) {
			if (got < 0 || (s = parse_parts(v, &r.opts.parts)) != CLP_OK)
				return cli_usage_error("bench", "%s", got < 0 ? "--only needs a value"
									      : clp_last_error());
		} else if ((got = cli_value(argc, argv, &i, "--gemm", &v)) != 0) {
			if (got < 0 || (s = parse_gemm(v, &r.opts)) != CLP_OK)
				return cli_usage_error("bench", "%s", got < 0 ? "--gemm needs a value"
									      : clp_last_error());
		} else if ((got = cli_value(argc, argv, &i, "--bind", &v)) != 0) {
			if (got < 0 || (s = clp_topo_bind_parse(v, &r.bind)) != CLP_OK)
				return cli_usage_error("bench", "%s", got < 0 ? "--bind needs a value"
									      : clp_last_error());
		} else {
			const char *num[] = {"--repeats", "--warmup", "--bw-mib", "--xfer-mib",
					     "--compute-ms"};
			int k = 0;
			long n;
			char *end = NULL;

			for (; k < 5; k++)
				if ((got = cli_value(argc, argv, &i, num[k], &v)) != 0)
					break;
			if (k == 5)
				return cli_usage_error("bench", "unknown option '%s'", argv[i]);
			n = got > 0 ? strtol(v, &end, 10) : -1;
			if (got < 0 || *end || n < (k == 1 ? 0 : 1) || n > 1 << 20)
				return cli_usage_error("bench", "%s needs a number %s", num[k],
						       k == 1 ? ">= 0" : ">= 1");
			if (k == 0)
				r.opts.repeats = (int)n;
			else if (k == 1)
				r.opts.warmup = (int)n;
			else if (k == 2)
				r.opts.bw_bytes = (size_t)n << 20;
			else if (k == 3)
				r.opts.xfer_bytes = (size_t)n << 20;
			else
				r.opts.compute_ms = (double)n;
		}
	}
	if (r.all && r.devices)
		return cli_usage_error("bench", "--all and --device exclude each other");
	if (r.cluster_out && !(r.opts.parts & CLP_BENCH_P2P))
		return cli_usage_error("bench", "--cluster-out needs the p2p part (--only ...,p2p)");
	return run_bench(&r, &argc, &argv);
}
