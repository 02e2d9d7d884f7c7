/* The cluster inventory: building it from every rank's host (what the MPI gather does), its
 * JSON round trip, and the errors a broken cluster file gives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "topology/comm/comm.h"
#include "topology/discover.h"
#include "topology/gather.h"

static int mixed_host(clp_topo_host *h)
{
	char xp[512], dp[512];
	clp_topo_cldev *d = NULL;
	int n = 0;
	clp_status s;

	snprintf(xp, sizeof(xp), "%s/32em64t-2n8c2t-pci-normalio.xml", TOPO_DATA);
	snprintf(dp, sizeof(dp), "%s/mixed.devices.json", TOPO_DATA);
	s = clp_topo_cldevs_read(dp, &d, &n);
	if (s == CLP_OK)
		s = clp_topo_discover(xp, d, n, h);
	CHECK_OK(s);
	free(d);
	return s == CLP_OK;
}

static int same_host(const clp_topo_host *a, const clp_topo_host *b)
{
	if (strcmp(a->name, b->name) || a->cores != b->cores || a->pus != b->pus ||
	    a->numa_nodes != b->numa_nodes || strcmp(a->cpuset, b->cpuset) ||
	    a->ndevices != b->ndevices || a->nlinks != b->nlinks)
		return 0;
	for (int i = 0; i < a->ndevices; i++) {
		const clp_topo_device *x = &a->devices[i], *y = &b->devices[i];

		if (x->index != y->index || strcmp(x->name, y->name) || strcmp(x->vendor, y->vendor) ||
		    strcmp(x->type, y->type) || x->global_mem != y->global_mem ||
		    x->compute_units != y->compute_units || x->max_subdevices != y->max_subdevices ||
		    strcmp(x->pci, y->pci) || x->numa != y->numa || strcmp(x->cpuset, y->cpuset) ||
		    x->cores != y->cores || x->local_to_host != y->local_to_host || x->loc != y->loc)
			return 0;
	}
	for (int i = 0; i < a->nlinks; i++)
		if (a->links[i].a != b->links[i].a || a->links[i].b != b->links[i].b ||
		    a->links[i].bandwidth_gbps != b->links[i].bandwidth_gbps)
			return 0;
	return 1;
}

/* Four ranks on two hosts, interleaved: hosts in order of their first rank, local ranks by
 * rank within a host. */
static void test_from_ranks(void)
{
	clp_topo_host hosts[4];
	clp_topo_cluster c;

	memset(hosts, 0, sizeof(hosts));
	if (!mixed_host(&hosts[0]))
		return;
	snprintf(hosts[0].name, sizeof(hosts[0].name), "alpha");
	CHECK_OK(clp_topo_host_copy(&hosts[1], &hosts[0]));
	snprintf(hosts[1].name, sizeof(hosts[1].name), "beta");
	CHECK_OK(clp_topo_host_copy(&hosts[2], &hosts[0]));
	CHECK_OK(clp_topo_host_copy(&hosts[3], &hosts[1]));
	CHECK_OK(clp_topo_cluster_from_ranks(hosts, 4, 1, &c));
	CHECK(c.nhosts == 2 && c.nranks == 4, "%d hosts, %d ranks", c.nhosts, c.nranks);
	if (c.nhosts == 2 && c.nranks == 4) {
		CHECK(!strcmp(c.hosts[0].name, "alpha") && !strcmp(c.hosts[1].name, "beta"),
		      "host order %s %s", c.hosts[0].name, c.hosts[1].name);
		CHECK(c.ranks[0].host == 0 && c.ranks[1].host == 1 && c.ranks[2].host == 0 &&
			      c.ranks[3].host == 1, "rank hosts");
		CHECK(c.ranks[0].local_rank == 0 && c.ranks[1].local_rank == 0 &&
			      c.ranks[2].local_rank == 1 && c.ranks[3].local_rank == 1,
		      "local ranks %d %d %d %d", c.ranks[0].local_rank, c.ranks[1].local_rank,
		      c.ranks[2].local_rank, c.ranks[3].local_rank);
		CHECK(same_host(&c.hosts[0], &hosts[0]), "host copied whole");
	}
	clp_topo_cluster_clear(&c);

	/* a rank on alpha that sees other devices */
	hosts[2].ndevices = 2;
	CHECK_ERR(clp_topo_cluster_from_ranks(hosts, 4, 1, &c), CLP_ERR_INVALID, "rank 2",
		  "alpha");
	CHECK_OK(clp_topo_cluster_from_ranks(hosts, 4, 0, &c)); /* not strict: first view wins */
	CHECK(c.nhosts == 2 && c.hosts[0].ndevices == 6, "first rank's view kept");
	clp_topo_cluster_clear(&c);
	hosts[2].ndevices = 6;
	for (int i = 0; i < 4; i++)
		clp_topo_host_clear(&hosts[i]);
}

static void test_json_round_trip(void)
{
	clp_topo_host h = {0}, h2 = {0};
	clp_topo_cluster c, back;
	char path[256];

	if (!mixed_host(&h))
		return;
	/* a link so that links round-trip too */
	h.links = calloc(1, sizeof(*h.links));
	h.nlinks = 1;
	h.links[0].a = 1;
	h.links[0].b = 2;
	h.links[0].bandwidth_gbps = 25.5;
	snprintf(h.links[0].kind, sizeof(h.links[0].kind), "nvlink");
	CHECK_OK(clp_topo_host_copy(&h2, &h));
	CHECK_OK(clp_topo_cluster_single(&c, &h));
	CHECK(h.devices == NULL && c.hosts[0].ndevices == 6, "single takes ownership");
	snprintf(path, sizeof(path), "/tmp/clp_topo_inv_%d.json", (int)getpid());
	CHECK_OK(clp_topo_cluster_write(&c, path));
	CHECK_OK(clp_topo_cluster_read(path, &back));
	CHECK(back.nhosts == 1 && back.nranks == 1 && back.ranks[0].host == 0,
	      "%d hosts %d ranks", back.nhosts, back.nranks);
	if (back.nhosts == 1)
		CHECK(same_host(&back.hosts[0], &h2), "host differs after a JSON round trip");
	remove(path);
	clp_topo_cluster_clear(&c);
	clp_topo_cluster_clear(&back);
	clp_topo_host_clear(&h2);
}

static clp_status parse(const char *text, clp_topo_cluster *c)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);
	clp_status s;

	if (!j)
		return clp_error(CLP_ERR_FORMAT, "test JSON: %s", err.text);
	s = clp_topo_cluster_from_json(j, "cluster.json", c);
	json_decref(j);
	return s;
}

static void test_bad_cluster(void)
{
	clp_topo_cluster c;

	CHECK_ERR(parse("{}", &c), CLP_ERR_FORMAT, "cluster.json", "'hosts'");
	CHECK_ERR(parse("{\"hosts\": [{\"name\": \"a\"}]}", &c), CLP_ERR_FORMAT, "host 'a'",
		  "'devices'");
	CHECK_ERR(parse("{\"hosts\": [{\"name\": \"a\", \"devices\": [{\"index\": 0, \"name\": "
			"\"g\", \"type\": \"gpu\", \"numa\": \"zero\"}]}]}", &c),
		  CLP_ERR_FORMAT, "host 'a'.devices[0].numa", "integer");
	CHECK_ERR(parse("{\"hosts\": [{\"name\": \"a\", \"devices\": [{\"index\": 0, \"name\": "
			"\"g\", \"type\": \"gpu\", \"locality\": \"moon\"}]}]}", &c),
		  CLP_ERR_FORMAT, "locality", "moon");
	CHECK_ERR(parse("{\"hosts\": [{\"name\": \"a\", \"devices\": []}, {\"name\": \"a\", "
			"\"devices\": []}]}", &c),
		  CLP_ERR_FORMAT, "both named 'a'");
	CHECK_ERR(parse("{\"hosts\": [{\"name\": \"a\", \"devices\": []}], \"ranks\": "
			"[{\"rank\": 0, \"host\": 1, \"local_rank\": 0}]}", &c),
		  CLP_ERR_FORMAT, "ranks[0].host", "outside");
	CHECK_ERR(parse("{\"hosts\": [{\"name\": \"a\", \"devices\": [], \"links\": [{\"a\": 0, "
			"\"b\": 1, \"bandwidth_gbps\": 1}]}]}", &c),
		  CLP_ERR_FORMAT, "links[0].a");
	/* keys it does not know are for later parts: ignored */
	CHECK_OK(parse("{\"hosts\": [{\"name\": \"a\", \"devices\": [], \"rack\": 3}], "
		       "\"links\": [{\"from\": 0, \"to\": 1, \"latency_us\": 2.5}]}", &c));
	CHECK(c.nhosts == 1 && c.nranks == 0, "parsed with extra keys");
	clp_topo_cluster_clear(&c);
}

/* The gather over the single-process transport gives a one-host, one-rank cluster. */
static void test_gather_self(void)
{
	clp_topo_host h = {0};
	clp_topo_cluster c;
	clp_comm *comm = NULL;

	if (!mixed_host(&h))
		return;
	CHECK_OK(clp_comm_self(&comm));
	if (!comm)
		return;
	CHECK_OK(clp_topo_gather(comm, &h, 1, &c));
	CHECK(c.nhosts == 1 && c.nranks == 1 && c.ranks[0].local_rank == 0, "self gather");
	if (c.nhosts == 1)
		CHECK(same_host(&c.hosts[0], &h), "gathered host equals the local one");
	clp_topo_cluster_clear(&c);
	clp_topo_host_clear(&h);
	clp_comm_free(comm);
}

TH_MAIN(TH_TEST(test_from_ranks), TH_TEST(test_json_round_trip), TH_TEST(test_bad_cluster),
	TH_TEST(test_gather_self))
