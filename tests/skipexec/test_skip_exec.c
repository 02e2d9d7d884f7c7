/* SkipPipe path schedules run over MPI (engine/exec/exec_dataflow.c) compute the training that
 * one process computes by running, for each micro-batch in order, the layers of its path in
 * path order (docs/SKIPPIPE.md, "Gradients"): the loss of micro-batch m scaled by 1 / (its
 * targets x the micro-batches of its origin), a stage's gradient summed over the micro-batches
 * that visited it and divided by the stage's node count, the head's share of the tied embedding
 * added to the embedding's, one AdamW step with the global norm clipped. Losses, parameters and
 * AdamW moments after 5 steps agree within a normalised error of 1e-4 (the ranks add in arrival
 * order). Every rank also checks that it never held more than mem_cap micro-batches.
 *
 * Run under mpirun with 6 ranks. Two path sets on the same ranks (and C in order, also in bf16):
 *   A  gpt2 (tied), S = 4, nodes 0,1 stage 0, 2 stage 1, 3,4 stage 2, 5 stage 3; P = 3 (one
 *      stage skipped per path), two swaps (2 then 1, 3 then 2), M = 2 with 3 micro-batches per
 *      origin, targets partly masked so micro-batches weigh differently;
 *   B  llama (untied), S = 3, two nodes per stage, P = 2, M = 1, nodes 3 and 5 visited by no
 *      micro-batch (they all-reduce a zero gradient and step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/ops.h"
#include "engine/exec/exec.h"
#include "engine/pass/validate.h"
#include "engine/skip/skip.h"
#include "tests/harness.h"
#include "topology/comm/comm.h"

#define STEPS 5
#define B 2
#define T 16
#define SEED 4242

static clp_comm *world;
static clp_dtype precision; /* train.precision of both sides (test_in_order_bitwise_bf16) */

typedef struct scenario {
	const char *name;
	clp_preset preset;
	int S, lps, nnodes, per_origin, path_len, memory;
	const int *node_stage;
	const int (*hops)[2][2]; /* per mb: path_len - 1 hops of (stage, node) */
	const int *origin;       /* per mb its origin; NULL: round-robin over the stage-0 nodes */
	int exact;               /* no clipping; parameters and moments compared bit for bit */
} scenario;

static clp_model_config model(const scenario *sc)
{
	clp_model_config m;

	memset(&m, 0, sizeof(m));
	m.preset = sc->preset;
	m.n_layer = sc->S * sc->lps;
	m.d_model = 32;
	m.n_head = 4;
	m.n_kv_head = sc->preset == CLP_PRESET_LLAMA ? 2 : 0;
	m.vocab = 67;
	m.ctx = T;
	CHECK_OK(clp_model_config_resolve(&m));
	return m;
}

static clp_skip_paths *make_paths(const scenario *sc, clp_skip_rules *r)
{
	clp_skip_paths *p = NULL;

	CHECK_OK(clp_skip_paths_create(&p, sc->S, sc->nnodes, 0));
	if (!p)
		return NULL;
	for (int n = 0; n < sc->nnodes; n++)
		p->node_stage[n] = sc->node_stage[n];
	CHECK_OK(clp_skip_set_origins(p, sc->per_origin));
	for (int m = 0; sc->origin && m < p->nmb; m++)
		p->origin[m] = sc->origin[m];
	for (int m = 0; m < p->nmb; m++) {
		clp_skip_hop h[2];

		for (int k = 0; k < sc->path_len - 1; k++)
			h[k] = (clp_skip_hop){sc->hops[m][k][0], sc->hops[m][k][1]};
		CHECK_OK(clp_skip_set_hops(p, m, h, sc->path_len - 1));
	}
	clp_skip_rules_default(r, sc->S);
	r->path_len = sc->path_len;
	r->memory = sc->memory;
	CHECK_OK(clp_skip_validate(r, p));
	return p;
}

/* The step's data, the same on every rank: mb m masks its first (m * 3) % 7 targets. */
static void make_data(const clp_skip_paths *p, int step, int32_t *tok, int32_t *tg, float *inv,
		      int V)
{
	th_rng r = th_rng_seed(1000 + (uint64_t)step);
	size_t N = (size_t)B * T;

	for (int m = 0; m < p->nmb; m++) {
		size_t valid = 0;

		for (size_t i = 0; i < N; i++) {
			tok[m * N + i] = (int32_t)(th_next(&r) % (uint64_t)V);
			tg[m * N + i] = (int32_t)(th_next(&r) % (uint64_t)V);
			if (i < (size_t)((m * 3) % 7))
				tg[m * N + i] = -1;
			valid += tg[m * N + i] >= 0;
		}
		inv[m] = 1.0f / ((float)valid * (float)clp_skip_mb_of_origin(p, p->origin[m]));
	}
}

/* AdamW with eps = 1e-6: with 1e-8, a gradient element that cancels to ~1e-8 turns the 1e-10 by
 * which the order of additions moves it into 1 % of a step, and one such element among a
 * tensor's thousand puts it past 1e-4 (the test then measures AdamW's sensitivity near zero, not
 * the executor; scenario C shows the executor exact where the order is the reference's). */
static clp_nn_adamw_hp hyper(int step)
{
	clp_nn_adamw_hp hp = {3e-3f / (float)(1 + step), 0.9f, 0.95f, 1e-6f, 0.1f, step + 1};

	return hp;
}

/* ---- the reference: one process, one stage object per schedule stage ----------------------- */

typedef struct ref {
	int S, nst;
	clp_stage *st[8];
	int nodes[8]; /* nodes holding each stage (the head: the stage-0 nodes) */
	double loss[STEPS];
} ref;

static int tied_copy(const clp_tensor_desc *t)
{
	return t->role == CLP_R_TOK_EMB && t->block != 0;
}

static void ref_run(ref *R, const clp_sched *s, const clp_skip_paths *p, const clp_model_config *m,
		    float max_norm)
{
	clp_cl_ctx *ctx = th_ctx();
	int L = m->n_layer, S = p->nstages;
	size_t N = (size_t)B * T, NC = N * (size_t)m->d_model;
	int32_t *tok = malloc((size_t)p->nmb * N * sizeof(int32_t));
	int32_t *tg = malloc((size_t)p->nmb * N * sizeof(int32_t));
	float *inv = malloc((size_t)p->nmb * sizeof(float));

	memset(R, 0, sizeof(*R));
	R->S = S;
	R->nst = S + 1;
	for (int k = 0; k <= S; k++) {
		const clp_stage_info *si = &s->stages[k];
		clp_stage_opts o = {B, T, 1, 0, 0, precision, NULL};

		CHECK_OK(clp_stage_create(&R->st[k], ctx, m, si->embed ? 0 : si->first_layer + 1,
					  si->head ? L + 1 : si->first_layer + si->nlayers, &o));
		CHECK_OK(clp_stage_init_params(R->st[k], SEED));
	}
	for (int n = 0; n < p->nnodes; n++)
		R->nodes[p->node_stage[n]]++;
	R->nodes[S] = R->nodes[0];
	for (int step = 0; step < STEPS; step++) {
		clp_nn_adamw_hp hp = hyper(step);
		double sumsq = 0, loss = 0;
		float stats[4];
		clp_buf emb = {0}, copy = {0};
		size_t nemb = 0;

		make_data(p, step, tok, tg, inv, m->vocab);
		for (int k = 0; k <= S; k++)
			CHECK_OK(clp_stage_zero_grads(R->st[k]));
		for (int mb = 0; mb < p->nmb; mb++) {
			int path[8], n = 0;
			clp_stage_mb x = {0, (uint32_t)step, (uint32_t)mb, SEED, tok + mb * N, NULL,
					  tg + mb * N, 0};
			float l = 0;
			clp_buf lb;

			path[n++] = 0;
			for (int h = p->hop_start[mb]; h < p->hop_start[mb + 1]; h++)
				path[n++] = p->hops[h].stage;
			path[n++] = S;
			for (int j = 0; j < n; j++) {
				if (j > 0)
					CHECK_OK(clp_cl_copy(ctx, clp_stage_act_in(R->st[path[j]], 0),
							     clp_stage_act_out(R->st[path[j - 1]], 0), NC));
				CHECK_OK(clp_stage_forward(R->st[path[j]], &x, inv[mb]));
			}
			lb = clp_stage_loss(R->st[S], 0);
			CHECK_OK(clp_cl_read(ctx, lb.mem, lb.off * 4, 4, &l));
			loss += l;
			CHECK_OK(clp_stage_backward(R->st[S], &x, inv[mb]));
			for (int j = n - 2; j >= 0; j--) {
				CHECK_OK(clp_cl_copy(ctx, clp_stage_grad_in(R->st[path[j]]),
						     clp_stage_grad_in(R->st[path[j + 1]]), NC));
				CHECK_OK(clp_stage_backward(R->st[path[j]], &x, inv[mb]));
			}
		}
		R->loss[step] = loss / R->nodes[0];
		/* the head's share of the tied embedding, then each stage's mean over its nodes */
		for (int k = 0; k <= S; k++) {
			const clp_param_table *t = clp_stage_table(R->st[k]);

			for (int j = 0; j < t->ntensors; j++)
				if (t->tensors[j].role == CLP_R_TOK_EMB) {
					*(tied_copy(&t->tensors[j]) ? &copy : &emb) =
						clp_stage_tensor(R->st[k], CLP_ST_GRAD, j);
					nemb = t->tensors[j].numel;
				}
		}
		if (copy.mem)
			CHECK_OK(clp_cl_axpy(ctx, emb, copy, 1.0f, nemb));
		for (int k = 0; k <= S; k++) {
			const clp_param_table *t = clp_stage_table(R->st[k]);

			for (int j = 0; j < t->ntensors; j++) {
				float *h;

				if (tied_copy(&t->tensors[j]))
					continue;
				h = malloc(t->tensors[j].numel * sizeof(float));
				CHECK_OK(clp_cl_scale(ctx, clp_stage_tensor(R->st[k], CLP_ST_GRAD, j),
						      1.0f / (float)R->nodes[k], t->tensors[j].numel));
				CHECK_OK(clp_stage_read(R->st[k], CLP_ST_GRAD, j, h));
				for (size_t i = 0; i < t->tensors[j].numel; i++)
					sumsq += (double)h[i] * h[i];
				free(h);
			}
		}
		if (copy.mem)
			CHECK_OK(clp_cl_copy(ctx, copy, emb, nemb));
		stats[CLP_NN_GSTAT_SUMSQ] = (float)sumsq;
		stats[CLP_NN_GSTAT_NONFINITE] = 0;
		stats[CLP_NN_GSTAT_NORM] = (float)sqrt(sumsq);
		stats[CLP_NN_GSTAT_SCALE] = max_norm > 0 ? (float)fmin(1.0, max_norm /
									    (sqrt(sumsq) + 1e-6)) : 1.0f;
		for (int k = 0; k <= S; k++) {
			clp_buf b = clp_stage_stats(R->st[k]);

			CHECK_OK(clp_cl_write(ctx, b.mem, b.off * 4, sizeof(stats), stats));
			CHECK_OK(clp_stage_adamw(R->st[k], &hp, b));
		}
	}
	clp_cl_finish(ctx);
	free(tok);
	free(tg);
	free(inv);
}

static void ref_free(ref *R)
{
	for (int k = 0; k < R->nst; k++)
		clp_stage_free(R->st[k]);
}

/* ---- the path schedule over MPI, compared with the reference ------------------------------- */

static void compare_stage(const scenario *sc, int rank, clp_stage *got, clp_stage *want, int k)
{
	const clp_param_table *t = clp_stage_table(got);
	static const clp_stage_what what[3] = {CLP_ST_PARAM, CLP_ST_ADAM_M, CLP_ST_ADAM_V};
	static const char *const name[3] = {"", ".exp_avg", ".exp_avg_sq"};

	for (int j = 0; j < t->ntensors; j++)
		for (int w = 0; w < 3; w++) {
			size_t n = t->tensors[j].numel;
			float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
			double *yd = malloc(n * sizeof(double)), err;

			CHECK_OK(clp_stage_read(got, what[w], j, x));
			CHECK_OK(clp_stage_read(want, what[w], j, y));
			for (size_t i = 0; i < n; i++)
				yd[i] = y[i];
			err = th_norm_err(x, yd, n);
			if (sc->exact)
				CHECK(!memcmp(x, y, n * sizeof(float)), "%s: rank %d stage %d: %s%s "
				      "differs (normalised error %.3g)", sc->name, rank, k,
				      t->tensors[j].name, name[w], err);
			else
				CHECK(err <= 1e-4, "%s: rank %d stage %d: %s%s normalised error %.3g > "
				      "1e-4", sc->name, rank, k, t->tensors[j].name, name[w], err);
			free(x);
			free(y);
			free(yd);
		}
}

static void run_scenario(const scenario *sc)
{
	clp_model_config m = model(sc);
	clp_skip_rules r;
	clp_skip_paths *p = make_paths(sc, &r);
	clp_sched *s = NULL;
	clp_exec *e = NULL;
	clp_exec_opts o = {B, T, 0, 0, precision, NULL};
	int rank = clp_comm_rank(world), cap = sc->memory;
	size_t N = (size_t)B * T;
	int32_t *tok = NULL, *tg = NULL;
	float *inv = NULL;
	double loss[STEPS];
	ref R;

	if (!p)
		return;
	CHECK_OK(clp_skip_to_sched(p, &r, sc->lps, &s));
	if (s)
		CHECK_OK(clp_sched_validate(s, 1));
	if (s)
		CHECK_OK(clp_exec_create(&e, world, th_ctx(), s, &m, &o));
	if (!e)
		goto out;
	CHECK_OK(clp_exec_init_params(e, SEED));
	tok = malloc((size_t)p->nmb * N * sizeof(int32_t));
	tg = malloc((size_t)p->nmb * N * sizeof(int32_t));
	inv = malloc((size_t)p->nmb * sizeof(float));
	for (int step = 0; step < STEPS; step++) {
		clp_nn_adamw_hp hp = hyper(step);
		clp_exec_data d = {tok, NULL, tg, 0.0f, SEED, (uint32_t)step, inv, 0};
		clp_exec_result res = {0};
		int visited = 0;

		make_data(p, step, tok, tg, inv, m.vocab);
		CHECK_OK(clp_exec_step(e, &d, &hp, sc->exact ? 0.0f : 1.0f, &res));
		loss[step] = res.loss;
		for (int mb = 0; mb < p->nmb; mb++) {
			visited |= p->origin[mb] == rank;
			for (int h = p->hop_start[mb]; h < p->hop_start[mb + 1]; h++)
				visited |= p->hops[h].node == rank;
		}
		CHECK(clp_exec_peak_held(e) <= cap, "%s: rank %d held %d micro-batches at once, "
		      "cap %d", sc->name, rank, clp_exec_peak_held(e), cap);
		CHECK(clp_exec_peak_held(e) == 0 || visited, "%s: rank %d holds micro-batches but "
		      "none visits it", sc->name, rank);
		CHECK(!visited || clp_exec_peak_held(e) >= 1, "%s: rank %d ran no forward",
		      sc->name, rank);
	}
	ref_run(&R, s, p, &m, sc->exact ? 0.0f : 1.0f);
	for (int step = 0; step < STEPS; step++)
		CHECK(fabs(loss[step] - R.loss[step]) <= 1e-4 * fabs(R.loss[step]),
		      "%s: step %d loss %.9g, reference %.9g", sc->name, step + 1, loss[step],
		      R.loss[step]);
	if (rank == 0)
		printf("%s: losses %.6f .. %.6f (reference %.6f .. %.6f)\n", sc->name, loss[0],
		       loss[STEPS - 1], R.loss[0], R.loss[STEPS - 1]);
	for (int i = 0; i < clp_exec_nstages(e); i++) {
		int k = clp_exec_stage_id(e, i);

		compare_stage(sc, rank, clp_exec_stage(e, i, NULL), R.st[k], k);
	}
	ref_free(&R);
out:
	clp_exec_free(e);
	clp_sched_free(s);
	clp_skip_paths_free(p);
	free(tok);
	free(tg);
	free(inv);
}

static void test_skips_swaps_replicas_tied(void)
{
	static const int stage[6] = {0, 0, 1, 2, 2, 3};
	/* mb m starts at node m % 2; every stage 1..3 is visited 4 times; hand-offs acyclic */
	static const int hops[6][2][2] = {
		{{1, 2}, {2, 3}}, {{2, 4}, {1, 2}}, {{1, 2}, {3, 5}},
		{{2, 4}, {3, 5}}, {{3, 5}, {2, 3}}, {{1, 2}, {3, 5}},
	};
	scenario sc = {"A (gpt2, S 4, P 3, swaps, M 2)", CLP_PRESET_GPT2, 4, 1, 6, 3, 3, 2, stage,
		       hops, NULL, 0};

	run_scenario(&sc);
}

static void test_idle_nodes_cap_one_untied(void)
{
	static const int stage[6] = {0, 0, 1, 1, 2, 2};
	static const int hops[4][2][2] = {{{1, 2}}, {{2, 4}}, {{2, 4}}, {{1, 2}}};
	scenario sc = {"B (llama, S 3, P 2, idle nodes, M 1)", CLP_PRESET_LLAMA, 3, 2, 6, 2, 2, 1,
		       stage, hops, NULL, 0};

	run_scenario(&sc);
}

/* One origin with a cap of one runs its micro-batches one after another, so every node adds
 * them in micro-batch order, as the reference does; each stage's second node (and the second
 * stage-0 node) adds a zero or a last term: bit for bit equal. */
static void test_in_order_bitwise(void)
{
	static const int stage[6] = {0, 1, 1, 2, 2, 0};
	static const int origin[4] = {0, 0, 0, 0};
	static const int hops[4][2][2] = {
		{{1, 1}, {2, 3}}, {{1, 1}, {2, 3}}, {{1, 1}, {2, 3}}, {{2, 4}, {1, 2}},
	};
	scenario sc = {"C (gpt2, one origin, M 1, bitwise)", CLP_PRESET_GPT2, 3, 1, 6, 2, 3, 1,
		       stage, hops, origin, 1};

	run_scenario(&sc);
}

/* The same in bf16 (mixed precision: 16-bit activations and messages; the reference passes
 * the 16-bit activations and the rounded gradients between its stages): bit for bit. */
static void test_in_order_bitwise_bf16(void)
{
	precision = CLP_BF16;
	test_in_order_bitwise();
	precision = CLP_F32;
}

int main(int argc, char **argv)
{
	static const struct th_test tests[] = {TH_TEST(test_skips_swaps_replicas_tied),
					       TH_TEST(test_idle_nodes_cap_one_untied),
					       TH_TEST(test_in_order_bitwise),
					       TH_TEST(test_in_order_bitwise_bf16)};
	int rc;
	double f;

	if (clp_comm_world(&argc, &argv, &world) != CLP_OK) {
		fprintf(stderr, "no transport: %s\n", clp_last_error());
		return 1;
	}
	if (clp_comm_size(world) != 6) {
		fprintf(stderr, "run under mpirun -np 6 (this job has %d ranks)\n",
			clp_comm_size(world));
		clp_comm_free(world);
		return 2;
	}
	clp_comm_set_timeout(world, 300);
	rc = th_main(argc, argv, tests, (int)(sizeof(tests) / sizeof(tests[0])));
	/* every rank's verdict decides the exit code */
	f = rc;
	clp_comm_allreduce_sum(world, CLP_COMM_F64, &f, 1, 1, "verdict");
	clp_comm_free(world);
	return f != 0;
}
