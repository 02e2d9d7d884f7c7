/* Under mpirun -np 2: the MPI transport (messages, a deadline that expires because one rank
 * never sends, collectives, the rank-ordered allreduce, splits), the gathered cluster inventory,
 * rank-to-device assignment on one host, PoCL shared by two ranks, and the ping-pong benchmark.
 * Tests run in the order given; every rank runs every test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/ops.h"
#include "tests/harness.h"
#include "topology/assign.h"
#include "topology/bench.h"
#include "topology/comm/comm.h"
#include "topology/discover.h"
#include "topology/gather.h"

static clp_comm *world;

static int two_ranks(void)
{
	CHECK(world && clp_comm_size(world) == 2 && !strcmp(clp_comm_kind(world), "mpi"),
	      "run under mpirun -np 2 (kind %s, size %d)", world ? clp_comm_kind(world) : "-",
	      world ? clp_comm_size(world) : 0);
	return world && clp_comm_size(world) == 2;
}

static void test_messages(void)
{
	int me, peer, out[64], in[64], done = 0;
	clp_comm_req *s = NULL, *r = NULL;

	if (!two_ranks())
		return;
	me = clp_comm_rank(world);
	peer = 1 - me;
	for (int i = 0; i < 64; i++)
		out[i] = me * 1000 + i, in[i] = -1;
	CHECK_OK(clp_comm_irecv(world, in, sizeof(in), peer, 3, "payload", &r));
	CHECK_OK(clp_comm_isend(world, out, sizeof(out), peer, 3, "payload", &s));
	CHECK_OK(clp_comm_wait(world, &s, 10));
	CHECK_OK(clp_comm_wait(world, &r, 10));
	CHECK_OK(clp_comm_test(world, &r, &done));
	CHECK(done && in[0] == peer * 1000 && in[63] == peer * 1000 + 63, "rank %d got %d..%d", me,
	      in[0], in[63]);
	CHECK_OK(clp_comm_barrier(world, "after messages"));
}

/* Rank 0 never sends: rank 1's wait must end at its deadline and name both ranks. */
static void test_deadline(void)
{
	int x = 0;
	clp_comm_req *r = NULL;

	if (!two_ranks())
		return;
	if (clp_comm_rank(world) == 1) {
		double t0 = clp_comm_now();

		CHECK_OK(clp_comm_irecv(world, &x, sizeof(x), 0, 99, "activations mb 5", &r));
		CHECK_ERR(clp_comm_wait(world, &r, 0.3), CLP_ERR_TIMEOUT, "rank 1",
			  "'activations mb 5'", "from rank 0", "tag 99", "timed out after");
		CHECK(clp_comm_now() - t0 >= 0.3 && clp_comm_now() - t0 < 10, "waited %.2f s",
		      clp_comm_now() - t0);
		clp_comm_cancel(world, &r);
		CHECK(r == NULL, "cancelled");
	}
	CHECK_OK(clp_comm_barrier(world, "after deadline"));
}

static void test_collectives(void)
{
	int me;
	float v[5], ref[5], tmp[2][5];
	double d[3];
	void *all = NULL;
	size_t *offs = NULL;
	char mine[8];
	clp_comm *sub = NULL;

	if (!two_ranks())
		return;
	me = clp_comm_rank(world);
	/* values whose sum depends on the order of addition */
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 5; i++)
			tmp[r][i] = r == 0 ? 1e8f * (float)(i + 1) : 3.3f + (float)i * 0.7f;
	for (int i = 0; i < 5; i++) {
		v[i] = tmp[me][i];
		ref[i] = tmp[0][i] + tmp[1][i];
	}
	CHECK_OK(clp_comm_allreduce_sum(world, CLP_COMM_F32, v, 5, 1, "ordered"));
	CHECK(!memcmp(v, ref, sizeof(v)), "ordered sum is bitwise x0 + x1 on rank %d", me);
	for (int i = 0; i < 5; i++)
		v[i] = tmp[me][i];
	CHECK_OK(clp_comm_allreduce_sum(world, CLP_COMM_F32, v, 5, 0, "mpi"));
	CHECK(fabsf(v[4] - ref[4]) <= 1e-6f * fabsf(ref[4]), "MPI sum %g vs %g", v[4], ref[4]);
	d[0] = me + 0.5, d[1] = -1.0, d[2] = 1e-300;
	CHECK_OK(clp_comm_allreduce_sum(world, CLP_COMM_F64, d, 3, 0, "f64"));
	CHECK(d[0] == 2.0 && d[1] == -2.0 && d[2] == 2e-300, "f64 sums %g %g", d[0], d[1]);

	snprintf(mine, sizeof(mine), "%.*s", me + 2, "abcdef");
	CHECK_OK(clp_comm_allgatherv(world, mine, strlen(mine), &all, &offs, "names"));
	CHECK(offs && offs[1] == 2 && offs[2] == 5 && !memcmp(all, "ababc", 5),
	      "allgatherv of different lengths");
	free(all);
	free(offs);

	CHECK_OK(clp_comm_split(world, me, 0, &sub));
	CHECK(sub && clp_comm_size(sub) == 1 && clp_comm_rank(sub) == 0, "split by rank");
	clp_comm_free(sub);
	CHECK_OK(clp_comm_split_host(world, &sub));
	CHECK(sub && clp_comm_size(sub) == 2 && clp_comm_rank(sub) == me, "both ranks share "
	      "this host");
	clp_comm_free(sub);
}

static void test_inventory(void)
{
	clp_topo_host h;
	clp_topo_cluster c;
	clp_topo_assignment a;
	int me;

	if (!two_ranks())
		return;
	me = clp_comm_rank(world);
	CHECK_OK(clp_topo_discover_live(&h));
	CHECK_OK(clp_topo_gather(world, &h, 1, &c));
	CHECK(c.nhosts == 1 && c.nranks == 2 && c.ranks[1].host == 0 &&
		      c.ranks[0].local_rank == 0 && c.ranks[1].local_rank == 1,
	      "one host, two ranks: %d hosts %d ranks", c.nhosts, c.nranks);
	if (c.nhosts == 1)
		CHECK(c.hosts[0].ndevices == h.ndevices && !strcmp(c.hosts[0].name, h.name),
		      "gathered host is ours");
	/* With POCL_MAX_PTHREAD_COUNT=1 (this test's environment) PoCL has one compute unit:
	 * two ranks cannot split it, so each runs it on one thread. */
	if (h.ndevices == 1 && !strcmp(h.devices[0].type, "cpu") && h.devices[0].compute_units == 1) {
		CHECK_OK(clp_topo_assign(&c.hosts[0], c.ranks[me].local_rank, 2, NULL, &a));
		CHECK(a.limit_threads && a.parts == 2 && a.part == me, "rank %d: %s", me, a.why);
	}
	clp_topo_cluster_clear(&c);
	clp_topo_host_clear(&h);
}

/* Without a thread limit, two ranks on PoCL get disjoint halves as sub-devices. */
static void test_subdevices(void)
{
	clp_topo_host h;
	clp_topo_assignment a;
	clp_comm *hostc = NULL;
	clp_cl_ctx *ctx = NULL;
	char sels[2][32];
	int me;

	if (!two_ranks())
		return;
	me = clp_comm_rank(world);
	CHECK_OK(clp_comm_split_host(world, &hostc));
	CHECK_OK(clp_topo_discover_live(&h));
	if (!hostc || h.ndevices == 0 || strcmp(h.devices[0].type, "cpu") ||
	    h.devices[0].max_subdevices < 2) {
		printf("skip: device 0 is not a CPU device that splits in two\n");
		goto out;
	}
	CHECK_OK(clp_topo_assign(&h, clp_comm_rank(hostc), clp_comm_size(hostc), "cpu", &a));
	CHECK(a.sub_parts == 2 && a.sub_index == me && !a.limit_threads, "rank %d: %s (%s)", me,
	      a.selector, a.why);
	CHECK_OK(clp_comm_allgather(world, a.selector, 32, sels, "selectors"));
	CHECK(strcmp(sels[0], sels[1]) != 0, "disjoint: '%s' and '%s'", sels[0], sels[1]);
	CHECK_OK(clp_cl_ctx_create(&ctx, a.selector));
	if (ctx) {
		const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
		float got[7];
		cl_mem m = NULL;

		CHECK(d->sub_index == me && d->compute_units == h.devices[0].compute_units / 2,
		      "sub-device %d with %u compute units", d->sub_index, d->compute_units);
		CHECK_OK(clp_cl_buffer(ctx, sizeof(got), "t", &m));
		th_poison(got, 7);
		if (m) {
			CHECK_OK(clp_cl_fill(ctx, clp_buf_at(m, 0), (float)(me + 2), 7));
			CHECK_OK(clp_cl_read(ctx, m, 0, sizeof(got), got));
			CHECK(got[0] == me + 2 && got[6] == me + 2, "the sub-device computes");
			clReleaseMemObject(m);
		}
		clp_cl_ctx_free(ctx);
	}
out:
	CHECK_OK(clp_comm_barrier(world, "after sub-devices"));
	clp_topo_host_clear(&h);
	clp_comm_free(hostc);
}

static void test_bench_p2p(void)
{
	clp_topo_bench_opts o;
	clp_topo_p2p *l = NULL;
	int n = 0;

	if (!two_ranks())
		return;
	clp_topo_bench_defaults(&o);
	o.repeats = 3;
	o.warmup = 1;
	o.p2p_large = 64 << 10;
	CHECK_OK(clp_topo_bench_p2p(world, &o, &l, &n));
	CHECK(n == 1 && l && l[0].a == 0 && l[0].b == 1, "one pair, got %d", n);
	if (n == 1) {
		CHECK(l[0].latency_us.n == 30 && l[0].latency_us.median > 0 &&
			      isfinite(l[0].latency_us.max),
		      "latency %g us (n %d) on rank %d", l[0].latency_us.median, l[0].latency_us.n,
		      clp_comm_rank(world));
		CHECK(l[0].bandwidth_gbps.n == 3 && l[0].bandwidth_gbps.median > 0,
		      "bandwidth %g GB/s", l[0].bandwidth_gbps.median);
		CHECK(l[0].large_bytes == (64 << 10) && l[0].host_a[0], "sizes and hosts");
	}
	free(l);
}

int main(int argc, char **argv)
{
	static const struct th_test tests[] = {
		TH_TEST(test_messages),	 TH_TEST(test_deadline),   TH_TEST(test_collectives),
		TH_TEST(test_inventory), TH_TEST(test_subdevices), TH_TEST(test_bench_p2p),
	};
	clp_status s = clp_comm_world(&argc, &argv, &world);
	int rc;

	if (s != CLP_OK) {
		fprintf(stderr, "no transport: %s\n", clp_last_error());
		return 1;
	}
	clp_comm_set_timeout(world, 60);
	rc = th_main(argc, argv, tests, (int)(sizeof(tests) / sizeof(tests[0])));
	clp_comm_free(world);
	return rc;
}
