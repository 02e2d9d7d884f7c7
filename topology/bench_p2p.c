/* Device benchmark, links between ranks: ping-pong latency (small messages) and bandwidth (large
 * ones) for every pair, one pair at a time so pairs do not compete (see bench.h). */
#include "topology/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/comm/comm.h"

#define TAG_PING 7101
#define TAG_PONG 7102

/* warmup + repeats round trips of `bytes` between a (starts) and b; a records half of each
 * round trip in us. */
static clp_status pingpong(clp_comm *c, int a, int b, size_t bytes, int warmup, int repeats,
			   unsigned char *buf, double *us)
{
	int me = clp_comm_rank(c);
	int peer = me == a ? b : a;
	char label[64];

	snprintf(label, sizeof(label), "ping-pong %zu bytes", bytes);
	for (int i = 0; i < warmup + repeats; i++) {
		clp_comm_req *r = NULL;
		double t0 = clp_comm_now();

		if (me == a) {
			CLP_TRY(clp_comm_isend(c, buf, bytes, peer, TAG_PING, label, &r));
			CLP_TRY(clp_comm_wait(c, &r, 0));
			CLP_TRY(clp_comm_irecv(c, buf, bytes, peer, TAG_PONG, label, &r));
			CLP_TRY(clp_comm_wait(c, &r, 0));
			if (i >= warmup)
				us[i - warmup] = (clp_comm_now() - t0) * 1e6 / 2;
		} else {
			CLP_TRY(clp_comm_irecv(c, buf, bytes, peer, TAG_PING, label, &r));
			CLP_TRY(clp_comm_wait(c, &r, 0));
			CLP_TRY(clp_comm_isend(c, buf, bytes, peer, TAG_PONG, label, &r));
			CLP_TRY(clp_comm_wait(c, &r, 0));
		}
	}
	return CLP_OK;
}

/* st[0..1] from the rank that has them to every rank (the others pass zeros). */
static clp_status share(clp_comm *c, clp_topo_stat *st)
{
	double v[12];

	for (int i = 0; i < 2; i++) {
		v[i * 6 + 0] = st[i].n;
		v[i * 6 + 1] = st[i].median;
		v[i * 6 + 2] = st[i].min;
		v[i * 6 + 3] = st[i].max;
		v[i * 6 + 4] = st[i].q1;
		v[i * 6 + 5] = st[i].q3;
	}
	CLP_TRY(clp_comm_allreduce_sum(c, CLP_COMM_F64, v, 12, 1, "ping-pong results"));
	for (int i = 0; i < 2; i++) {
		st[i].n = (int)v[i * 6 + 0];
		st[i].median = v[i * 6 + 1];
		st[i].min = v[i * 6 + 2];
		st[i].max = v[i * 6 + 3];
		st[i].q1 = v[i * 6 + 4];
		st[i].q3 = v[i * 6 + 5];
	}
	return CLP_OK;
}

clp_status clp_topo_bench_p2p(clp_comm *c, const clp_topo_bench_opts *o, clp_topo_p2p **out,
			      int *n)
{
	int p = clp_comm_size(c), me = clp_comm_rank(c), npairs = p * (p - 1) / 2, at = 0;
	size_t small = o->p2p_small ? o->p2p_small : 8;
	size_t large = o->p2p_large ? o->p2p_large : (size_t)4 << 20;
	int nlat = o->repeats * 10; /* small messages are quick: more samples */
	char *hosts = calloc((size_t)p, 256);
	unsigned char *buf = calloc(large > small ? large : small, 1);
	double *us = calloc((size_t)nlat, sizeof(*us));
	clp_topo_p2p *links = calloc((size_t)npairs + 1, sizeof(*links));
	clp_status s = CLP_OK;

	*out = NULL;
	*n = 0;
	if (!hosts || !buf || !us || !links) {
		s = clp_error(CLP_ERR_NOMEM, "rank %d: out of host memory", me);
		goto out;
	}
	{
		char mine[256];

		snprintf(mine, sizeof(mine), "%s", clp_comm_host(c));
		if ((s = clp_comm_allgather(c, mine, sizeof(mine), hosts, "host names")) != CLP_OK)
			goto out;
	}
	for (int a = 0; a < p && s == CLP_OK; a++)
		for (int b = a + 1; b < p && s == CLP_OK; b++, at++) {
			clp_topo_p2p *l = &links[at];
			/* only rank a's timings mean anything; it shares them after the pair */
			clp_topo_stat st[2];

			memset(st, 0, sizeof(st));
			l->a = a;
			l->b = b;
			snprintf(l->host_a, sizeof(l->host_a), "%s", hosts + (size_t)a * 256);
			snprintf(l->host_b, sizeof(l->host_b), "%s", hosts + (size_t)b * 256);
			l->small_bytes = small;
			l->large_bytes = large;
			if (me == a || me == b) {
				s = pingpong(c, a, b, small, o->warmup * 10, nlat, buf, us);
				if (s == CLP_OK && me == a)
					clp_topo_stat_of(us, nlat, &st[0]);
				if (s == CLP_OK)
					s = pingpong(c, a, b, large, o->warmup, o->repeats, buf, us);
				if (s == CLP_OK && me == a) {
					for (int i = 0; i < o->repeats; i++)
						us[i] = (double)large / (us[i] * 1e-6) / 1e9;
					clp_topo_stat_of(us, o->repeats, &st[1]);
				}
			}
			if (s != CLP_OK)
				break;
			/* everyone learns rank a's figures: a sum where only a contributes */
			if ((s = share(c, st)) != CLP_OK)
				break;
			l->latency_us = st[0];
			l->bandwidth_gbps = st[1];
			if (o->log && me == 0)
				fprintf(o->log, "  link     rank %d <-> %d: %.2f us, %.2f GB/s\n", a, b,
					l->latency_us.median, l->bandwidth_gbps.median);
		}
	if (s == CLP_OK) {
		*out = links;
		*n = npairs;
		links = NULL;
	}
out:
	free(hosts);
	free(buf);
	free(us);
	free(links);
	return s;
}
