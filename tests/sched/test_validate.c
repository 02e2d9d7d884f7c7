/* The validator against broken schedules: a missing receive, a swapped order that deadlocks
 * under rendezvous, a duplicated forward, collectives in different orders, a backward before its
 * forward, a wrong tag. Each message must name the rank, the op index and the micro-batch. */
#include <string.h>

#include "engine/sched/gen.h"
#include "engine/pass/validate.h"
#include "tests/harness.h"

static clp_sched *gen(int kind, int d, int n, int r, int extras)
{
	clp_gen_opts g;
	clp_sched *s = NULL;

	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = d;
	g.microbatches = n;
	g.replicas = r;
	g.grad_norm = g.loss_reduce = extras;
	CHECK_OK(clp_sched_generate(&s, &g));
	return s;
}

static int find(const clp_sched *s, int r, int kind, int mb)
{
	for (int i = 0; i < s->ranks[r].nops; i++)
		if (s->ranks[r].ops[i].kind == kind && s->ranks[r].ops[i].mb == mb)
			return i;
	return -1;
}

static void erase(clp_sched *s, int r, int i)
{
	clp_rank_prog *p = &s->ranks[r];

	memmove(&p->ops[i], &p->ops[i + 1], (size_t)(p->nops - i - 1) * sizeof(clp_op));
	p->nops--;
}

/* Move op `from` so that it lands at index `to` (other ops shift). */
static void move(clp_sched *s, int r, int from, int to)
{
	clp_op op = s->ranks[r].ops[from];

	erase(s, r, from);
	memmove(&s->ranks[r].ops[to + 1], &s->ranks[r].ops[to],
		(size_t)(s->ranks[r].nops - to) * sizeof(clp_op));
	s->ranks[r].ops[to] = op;
	s->ranks[r].nops++;
}

static void test_generated_pass(void)
{
	for (int k = 0; k < CLP_SCHED_KIND_COUNT; k++) {
		clp_gen_opts g;
		clp_sched *s = NULL;

		clp_gen_opts_default(&g);
		g.kind = k;
		g.depth = 4;
		g.microbatches = k == CLP_SCHED_CHIMERA_FD ? 16 : 8;
		g.chunks = k == CLP_SCHED_INTERLEAVED ? 2 : 1;
		g.replicas = 2;
		g.tied_embedding = g.grad_norm = g.loss_reduce = 1;
		CHECK_OK(clp_sched_generate(&s, &g));
		if (s)
			CHECK(clp_sched_validate(s, 1) == CLP_OK, "%s: %s", clp_sched_kind_name(k),
			      clp_last_error());
		clp_sched_free(s);
	}
}

static void test_missing_receive(void)
{
	clp_sched *s = gen(CLP_SCHED_1F1B, 2, 3, 1, 0);
	int i;

	if (!s)
		return;
	i = find(s, 1, CLP_OP_RECV_ACT, 1);
	CHECK(i >= 0, "rank 1 has no RECV_ACT mb 1");
	erase(s, 1, i);
	/* rank 0's SEND_ACT of mb 1 now has no receive */
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "rank 0 op ", "SEND_ACT", "mb 1",
		  "no matching receive");
	clp_sched_free(s);
}

static void test_swapped_deadlock(void)
{
	clp_sched *s = gen(CLP_SCHED_1F1B, 2, 2, 1, 0);
	int snd, bwd;

	if (!s)
		return;
	CHECK(clp_sched_validate(s, 1) == CLP_OK, "unmodified: %s", clp_last_error());
	/* Rank 0 sends mb 0's activation only after its backward: it waits for a gradient that
	 * rank 1 can only make from that activation. Every op is still after the op it needs
	 * locally, so only the dry run finds it. */
	snd = find(s, 0, CLP_OP_SEND_ACT, 0);
	bwd = find(s, 0, CLP_OP_BWD, 0);
	CHECK(snd >= 0 && bwd > snd, "unexpected 1F1B order");
	move(s, 0, snd, bwd);
	CHECK(clp_sched_validate(s, 0) == CLP_OK, "structure alone should pass: %s",
	      clp_last_error());
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "dry run", "deadlock",
		  "rank 0 at op ", "(BWD stage 0 mb 0)", "rank 1 at op ", "(FWD stage 1 mb 0)");
	clp_sched_free(s);
}

static void test_duplicated_forward(void)
{
	clp_sched *s = gen(CLP_SCHED_GPIPE, 2, 3, 1, 0);
	int i;

	if (!s)
		return;
	i = find(s, 0, CLP_OP_FWD, 1);
	CHECK_OK(clp_sched_push(s, 0, &s->ranks[0].ops[i]));
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "rank 0 op ", "FWD stage 0 mb 1",
		  "duplicate of op");
	clp_sched_free(s);
}

static void test_collective_order(void)
{
	clp_sched *s = gen(CLP_SCHED_1F1B, 2, 2, 1, 1);
	int norm, loss;

	if (!s)
		return;
	CHECK(clp_sched_validate(s, 1) == CLP_OK, "unmodified: %s", clp_last_error());
	norm = find(s, 1, CLP_OP_ALLREDUCE, -1);
	loss = find(s, 1, CLP_OP_REDUCE, -1);
	CHECK(norm >= 0 && loss > norm, "expected NORM then LOSS on rank 1");
	move(s, 1, loss, norm);
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "collective #0",
		  "ALLREDUCE NORM", "rank 1 op ", "REDUCE LOSS", "order differs");
	clp_sched_free(s);
}

static void test_backward_before_forward(void)
{
	clp_sched *s = gen(CLP_SCHED_GPIPE, 1, 2, 1, 0);
	int f, b;

	if (!s)
		return;
	f = find(s, 0, CLP_OP_FWD, 1);
	b = find(s, 0, CLP_OP_BWD, 1);
	move(s, 0, b, f);
	CHECK_ERR(clp_sched_validate(s, 0), CLP_ERR_INVALID, "rank 0 op ", "mb 1",
		  "comes before the forward");
	clp_sched_free(s);
}

static void test_wrong_tag(void)
{
	clp_sched *s = gen(CLP_SCHED_GPIPE, 2, 2, 1, 0);
	int i;

	if (!s)
		return;
	i = find(s, 1, CLP_OP_RECV_ACT, 0);
	s->ranks[1].ops[i].tag = clp_sched_tag(CLP_TAG_ACT, 0, 0, 1); /* mb 1's tag */
	s->ranks[1].ops[find(s, 1, CLP_OP_RECV_ACT, 1)].tag = clp_sched_tag(CLP_TAG_ACT, 0, 0, 0);
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "rank 0 op ", "SEND_ACT",
		  "mb 0", "is matched with rank 1 op ", "mb 1");
	s->ranks[1].ops[i].tag = 40000;
	CHECK_ERR(clp_sched_validate(s, 1), CLP_ERR_INVALID, "rank 1 op ", "tag out of range");
	clp_sched_free(s);
}

static void test_missing_stage(void)
{
	clp_sched *s = gen(CLP_SCHED_GPIPE, 1, 2, 1, 0);

	if (!s)
		return;
	erase(s, 0, find(s, 0, CLP_OP_BWD, 0));
	CHECK_ERR(clp_sched_validate(s, 0), CLP_ERR_INVALID, "rank 0 op ", "FWD stage 0 mb 0",
		  "no backward");
	clp_sched_free(s);
}

TH_MAIN(TH_TEST(test_generated_pass), TH_TEST(test_missing_receive),
	TH_TEST(test_swapped_deadlock), TH_TEST(test_duplicated_forward),
	TH_TEST(test_collective_order), TH_TEST(test_backward_before_forward),
	TH_TEST(test_wrong_tag), TH_TEST(test_missing_stage))
