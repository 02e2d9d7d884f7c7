/* The single-process transport: messages to oneself matched by tag in either order, waits that
 * end at their deadline with a message naming rank, peer and label, collectives of one rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "topology/comm/comm.h"

static void test_self_basics(void)
{
	clp_comm *c = NULL;

	CHECK_OK(clp_comm_self(&c));
	if (!c)
		return;
	CHECK(clp_comm_rank(c) == 0 && clp_comm_size(c) == 1, "rank %d of %d", clp_comm_rank(c),
	      clp_comm_size(c));
	CHECK(!strcmp(clp_comm_kind(c), "self") && clp_comm_host(c)[0], "kind %s host %s",
	      clp_comm_kind(c), clp_comm_host(c));
	CHECK(clp_comm_timeout(c) == 60.0, "default deadline %g", clp_comm_timeout(c));
	clp_comm_set_timeout(c, 2.5);
	CHECK(clp_comm_timeout(c) == 2.5, "deadline %g", clp_comm_timeout(c));
	CHECK_OK(clp_comm_barrier(c, "start"));
	clp_comm_free(c);
}

static void test_self_messages(void)
{
	clp_comm *c = NULL;
	clp_comm_req *s1 = NULL, *s2 = NULL, *r1 = NULL, *r2 = NULL;
	int a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, ga[4] = {0}, gb[4] = {0}, done = 0;

	CHECK_OK(clp_comm_self(&c));
	if (!c)
		return;
	/* send first, tags out of order: each receive takes the send with its tag */
	CHECK_OK(clp_comm_isend(c, a, sizeof(a), 0, 1, "a", &s1));
	CHECK_OK(clp_comm_isend(c, b, sizeof(b), 0, 2, "b", &s2));
	a[0] = -1; /* the send was buffered: the caller may reuse its buffer */
	CHECK_OK(clp_comm_irecv(c, gb, sizeof(gb), 0, 2, "b", &r2));
	CHECK_OK(clp_comm_irecv(c, ga, sizeof(ga), 0, 1, "a", &r1));
	CHECK_OK(clp_comm_wait(c, &s1, 1.0));
	CHECK_OK(clp_comm_wait(c, &s2, 1.0));
	CHECK_OK(clp_comm_wait(c, &r1, 1.0));
	CHECK_OK(clp_comm_test(c, &r2, &done));
	CHECK(done && r1 == NULL && r2 == NULL && s1 == NULL, "requests released when done");
	CHECK(ga[0] == 1 && ga[3] == 4 && gb[0] == 5 && gb[3] == 8, "payloads %d %d %d %d",
	      ga[0], ga[3], gb[0], gb[3]);

	/* receive first */
	memset(ga, 0, sizeof(ga));
	CHECK_OK(clp_comm_irecv(c, ga, sizeof(ga), 0, 9, "late", &r1));
	CHECK_OK(clp_comm_test(c, &r1, &done));
	CHECK(!done && r1, "nothing sent yet");
	CHECK_OK(clp_comm_isend(c, b, sizeof(b), 0, 9, "late", &s1));
	CHECK_OK(clp_comm_wait(c, &r1, 1.0));
	CHECK_OK(clp_comm_wait(c, &s1, 1.0));
	CHECK(ga[0] == 5 && ga[3] == 8, "payload after a posted receive");

	/* a message larger than the receive buffer */
	CHECK_OK(clp_comm_isend(c, b, sizeof(b), 0, 3, "big", &s1));
	CHECK_OK(clp_comm_irecv(c, ga, 2 * sizeof(int), 0, 3, "small", &r1));
	CHECK_ERR(clp_comm_wait(c, &r1, 1.0), CLP_ERR_INVALID, "small", "16 bytes", "8-byte");
	CHECK_OK(clp_comm_wait(c, &s1, 1.0));

	CHECK_ERR(clp_comm_isend(c, a, 4, 1, 0, "to nobody", &s1), CLP_ERR_INVALID, "peer 1",
		  "to nobody");
	CHECK_ERR(clp_comm_irecv(c, a, 4, 0, -2, "bad tag", &r1), CLP_ERR_INVALID, "tag -2");
	CHECK(s1 == NULL && r1 == NULL, "no request on failure");
	clp_comm_free(c);
}

/* Nobody sends: the wait ends at its deadline and says who waited for whom. */
static void test_self_deadline(void)
{
	clp_comm *c = NULL;
	clp_comm_req *r = NULL;
	int x = 0;
	double t0;

	CHECK_OK(clp_comm_self(&c));
	if (!c)
		return;
	CHECK_OK(clp_comm_irecv(c, &x, sizeof(x), 0, 5, "activations mb 3", &r));
	t0 = clp_comm_now();
	CHECK_ERR(clp_comm_wait(c, &r, 0.05), CLP_ERR_TIMEOUT, "rank 0", "recv 'activations mb 3'",
		  "from rank 0", "tag 5", "timed out");
	CHECK(clp_comm_now() - t0 >= 0.05, "waited its deadline");
	CHECK(r != NULL, "the request is still pending after a timeout");
	clp_comm_cancel(c, &r);
	CHECK(r == NULL, "cancel releases it");
	/* the communicator's own deadline applies when none is given */
	clp_comm_set_timeout(c, 0.02);
	CHECK_OK(clp_comm_irecv(c, &x, sizeof(x), 0, 6, "grad", &r));
	CHECK_ERR(clp_comm_wait(c, &r, 0), CLP_ERR_TIMEOUT, "recv 'grad'");
	clp_comm_cancel(c, &r);
	/* a send after cancelling is not delivered to the cancelled receive */
	clp_comm_free(c);
}

static void test_self_collectives(void)
{
	clp_comm *c = NULL, *sub = NULL;
	float f[3] = {1.5f, -2.0f, 3.25f};
	double d[2] = {0.1, 0.2};
	char all[8];
	void *v = NULL;
	size_t *offs = NULL;

	CHECK_OK(clp_comm_self(&c));
	if (!c)
		return;
	CHECK_OK(clp_comm_allgather(c, "abcdefg", 8, all, "names"));
	CHECK(!strcmp(all, "abcdefg"), "allgather '%s'", all);
	CHECK_OK(clp_comm_allgatherv(c, "xyz", 3, &v, &offs, "var"));
	CHECK(v && offs && offs[0] == 0 && offs[1] == 3 && !memcmp(v, "xyz", 3), "allgatherv");
	free(v);
	free(offs);
	CHECK_OK(clp_comm_allreduce_sum(c, CLP_COMM_F32, f, 3, 0, "grads"));
	CHECK_OK(clp_comm_allreduce_sum(c, CLP_COMM_F64, d, 2, 1, "ordered"));
	CHECK(f[0] == 1.5f && f[2] == 3.25f && d[1] == 0.2, "one rank: the sum is itself");
	CHECK_ERR(clp_comm_allreduce_sum(c, (clp_comm_type)7, f, 3, 0, "x"), CLP_ERR_INVALID,
		  "element type");
	CHECK_OK(clp_comm_split(c, 3, 0, &sub));
	CHECK(sub && clp_comm_size(sub) == 1, "split");
	clp_comm_free(sub);
	CHECK_OK(clp_comm_split(c, -1, 0, &sub));
	CHECK(sub == NULL, "color < 0: no communicator");
	CHECK_OK(clp_comm_split_host(c, &sub));
	CHECK(sub && clp_comm_size(sub) == 1, "split by host");
	clp_comm_free(sub);
	clp_comm_abort(c, 1); /* self: returns */
	clp_comm_free(c);
}

TH_MAIN(TH_TEST(test_self_basics), TH_TEST(test_self_messages), TH_TEST(test_self_deadline),
	TH_TEST(test_self_collectives))
