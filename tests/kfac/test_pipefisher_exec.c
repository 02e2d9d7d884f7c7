/* A PipeFisher cycle run for real equals the serial cycle rule: a two-stage llama pipeline
 * (1F1B, 4 micro-batches) whose K-FAC items the pass spread over K steps is executed on one
 * device in the order the simulator runs the lists (activations and gradients copied between
 * the stages where the lists send them; factors from kept inputs and output gradients wherever
 * the items sit; inversions per factor; the serial refresh in the first cycle), and after three
 * cycles every parameter equals a single-stage run applying the rule serially with the same K.
 * This is the executor's contract for the K-FAC ops (engine/optim/kfac.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/optim/kfac.h"
#include "engine/sched/gen.h"
#include "engine/pass/pipefisher.h"
#include "engine/sim/sim.h"
#include "tests/harness.h"

#define D 2      /* stages */
#define M 4      /* micro-batches */
#define CYCLES 3
#define BB 2
#define TT 5
#define NN (BB * TT)

static clp_model_config model(void)
{
	clp_model_config c = {0};

	c.preset = CLP_PRESET_LLAMA;
	c.n_layer = 4;
	c.d_model = 16;
	c.n_head = 2;
	c.n_kv_head = 1;
	c.d_ff = 24;
	c.vocab = 29;
	c.ctx = 8;
	CHECK_OK(clp_model_config_resolve(&c));
	return c;
}

/* The batch of (step, micro-batch): every position has a target. */
static void batch(long step, int mb, int32_t *tok, int32_t *tg)
{
	th_rng r = th_rng_seed((uint64_t)(step * 131 + mb + 1));

	for (int i = 0; i < NN; i++) {
		tok[i] = (int32_t)(th_next(&r) % 29);
		tg[i] = (int32_t)(th_next(&r) % 29);
	}
}

static clp_kfac_opts kfac_opts(int K)
{
	clp_kfac_opts o;

	clp_kfac_opts_default(&o);
	o.interval = K;
	o.damping = 0.03;
	o.ema = 0.5;
	o.kl_clip = 0; /* KL clipping is global: an executor all-reduces clp_kfac_opt_kl_sum */
	return o;
}

static const clp_nn_adamw_hp hp0 = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
#define KFAC_LR 0.05f

/* The serial rule on one stage holding the whole model. */
static clp_stage *serial(int K, int steps)
{
	clp_model_config c = model();
	clp_stage_opts so = {BB, TT, 1, 0, 0, CLP_F32, NULL};
	clp_kfac_opts o = kfac_opts(K);
	clp_stage *st = NULL;
	clp_kfac_opt *k = NULL;
	int32_t tok[NN], tg[NN];

	CHECK_OK(clp_stage_create(&st, th_ctx(), &c, 0, c.n_layer + 1, &so));
	if (!st)
		return NULL;
	CHECK_OK(clp_stage_init_params(st, 11));
	CHECK_OK(clp_kfac_opt_create(&k, st, &o));
	for (long t = 0; k && t < steps; t++) {
		clp_nn_adamw_hp hp = hp0;
		int collect = 0;

		hp.step = t + 1;
		CHECK_OK(clp_stage_zero_grads(st));
		CHECK_OK(clp_kfac_opt_step_begin(k, t, NN * M, NN * M, &collect));
		for (int m = 0; m < M; m++) {
			clp_stage_mb mb = {0, (uint32_t)t, (uint32_t)m, 7, tok, NULL, tg, 0};

			batch(t, m, tok, tg);
			CHECK_OK(clp_stage_forward(st, &mb, 1.0f / (NN * M)));
			CHECK_OK(clp_stage_backward(st, &mb, 1.0f / (NN * M)));
		}
		CHECK_OK(clp_stage_grad_stats(st, clp_stage_stats(st), 0.0f));
		if (collect) {
			CHECK_OK(clp_kfac_opt_invert(k, -1, -1));
			if (t == 0)
				CHECK_OK(clp_kfac_opt_activate(k));
		}
		CHECK_OK(clp_kfac_opt_precondition(k));
		CHECK_OK(clp_kfac_opt_update(k, &hp, KFAC_LR, clp_stage_stats(st)));
	}
	CHECK_OK(clp_cl_finish(th_ctx()));
	clp_kfac_opt_free(k);
	return st;
}

typedef struct ent {
	int rank, idx;
} ent;

/* The cycle's ops of all ranks in the order the simulator starts them: the ranks' lists merged
 * by start time (each list keeps its order; at equal times sends and receives go first, then
 * the lower rank), so every op comes after what it needs. */
static ent *order(const clp_sched *s, const clp_costs *co, int64_t *n)
{
	clp_sim_opts so;
	clp_sim_result res;
	int64_t nops = clp_sched_nops(s), off[D + 1] = {0};
	double *t0 = malloc((size_t)nops * sizeof(double));
	ent *e = malloc((size_t)nops * sizeof(ent));
	int pc[D] = {0};

	clp_sim_opts_default(&so);
	so.costs = co;
	so.trace_limit = 0;
	so.op_t0 = t0;
	CHECK_OK(clp_sim_run(s, &so, &res));
	clp_sim_result_free(&res);
	for (int r = 0; r < D; r++)
		off[r + 1] = off[r] + s->ranks[r].nops;
	for (int64_t g = 0; g < nops; g++) {
		int best = -1;

		for (int r = 0; r < D; r++) {
			const clp_op *o, *b2;

			if (pc[r] >= s->ranks[r].nops)
				continue;
			if (best < 0) {
				best = r;
				continue;
			}
			o = &s->ranks[r].ops[pc[r]];
			b2 = &s->ranks[best].ops[pc[best]];
			if (t0[off[r] + pc[r]] < t0[off[best] + pc[best]] ||
			    (t0[off[r] + pc[r]] == t0[off[best] + pc[best]] &&
			     clp_op_is_p2p(o->kind) && !clp_op_is_p2p(b2->kind)))
				best = r;
		}
		e[g] = (ent){best, pc[best]++};
	}
	free(t0);
	*n = nops;
	return e;
}

static void copy(clp_buf dst, clp_buf src, size_t n)
{
	cl_int err = clEnqueueCopyBuffer(clp_cl_ctx_queue(th_ctx()), src.mem, dst.mem, src.off * 4,
					 dst.off * 4, n * 4, 0, NULL, NULL);

	CHECK(err == CL_SUCCESS, "copy: %d", err);
}

/* Backwards run so far in the collecting step, per rank and micro-batch. */
static int bwd_done[D][M];

/* One op of the cycle on the two stages. */
static void run_op(const clp_op *op, int r, long t, int cycle0, clp_stage **st, clp_kfac_opt **k,
		   cl_mem pend, int32_t (*tok)[NN], int32_t (*tg)[NN])
{
	int l0 = clp_stage_first_layer(st[r]);
	clp_stage_mb mb = {op->mb, (uint32_t)t, (uint32_t)op->mb, 7, tok[op->mb], NULL, tg[op->mb], 0};
	clp_nn_adamw_hp hp = hp0;

	hp.step = t + 1;
	switch (op->kind) {
	case CLP_OP_SEND_ACT:
		copy(clp_stage_act_in(st[op->peer], op->mb), clp_stage_act_out(st[r], op->mb), NN * 16);
		break;
	case CLP_OP_SEND_GRAD:
		copy(clp_buf_at(pend, (size_t)op->mb * NN * 16), clp_stage_grad_in(st[r]), NN * 16);
		break;
	case CLP_OP_FWD:
		batch(t, op->mb, tok[op->mb], tg[op->mb]);
		CHECK_OK(clp_stage_forward(st[r], &mb, 1.0f / (NN * M)));
		break;
	case CLP_OP_BWD:
		if (!clp_stage_has_head(st[r]))
			copy(clp_stage_grad_in(st[r]), clp_buf_at(pend, (size_t)op->mb * NN * 16),
			     NN * 16);
		CHECK_OK(clp_stage_backward(st[r], &mb, 1.0f / (NN * M)));
		bwd_done[r][op->mb] = 1;
		break;
	case CLP_OP_KFAC_CURV_A: /* before the backward from the slot, else from the copy */
		if (!cycle0 && !bwd_done[r][op->mb])
			CHECK_OK(clp_kfac_opt_curv_a(k[r], op->layer - l0, op->mb, op->mb));
		else if (!cycle0)
			CHECK_OK(clp_kfac_opt_curv_a_kept(k[r], op->layer - l0, op->mb));
		break;
	case CLP_OP_KFAC_CURV_B:
		if (!cycle0)
			CHECK_OK(clp_kfac_opt_curv_b_kept(k[r], op->layer - l0, op->mb));
		break;
	case CLP_OP_KFAC_INV:
		if (!cycle0)
			CHECK_OK(clp_kfac_opt_invert(k[r], op->layer, op->factor - 1));
		break;
	case CLP_OP_KFAC_PRECOND:
		if (cycle0 && t == 0) { /* the serial refresh */
			CHECK_OK(clp_kfac_opt_invert(k[r], -1, -1));
			CHECK_OK(clp_kfac_opt_activate(k[r]));
		}
		CHECK_OK(clp_kfac_opt_precondition(k[r]));
		break;
	case CLP_OP_OPT_STEP:
		CHECK_OK(clp_stage_grad_stats(st[r], clp_stage_stats(st[r]), 0.0f));
		CHECK_OK(clp_kfac_opt_update(k[r], &hp, KFAC_LR, clp_stage_stats(st[r])));
		break;
	default:
		break;
	}
}

static void test_pipefisher_equals_serial(void)
{
	clp_model_config c = model();
	clp_gen_opts g;
	clp_sched *base = NULL, *cyc = NULL;
	clp_costs *co = NULL;
	clp_pf_opts po;
	clp_pf_report rep = {0};
	clp_stage *st[D] = {NULL, NULL}, *ref = NULL;
	clp_kfac_opt *k[D] = {NULL, NULL};
	int32_t tok[M][NN], tg[M][NN];
	int dims[16], nf, cur[D] = {-1, -1}, collect[D] = {0, 0};
	cl_mem pend = NULL;
	ent *ord = NULL;
	int64_t nord = 0;

	if (!th_ctx())
		return;
	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_1F1B;
	g.depth = D;
	g.microbatches = M;
	g.layers = c.n_layer;
	CHECK_OK(clp_sched_generate(&base, &g));
	for (int r = 0; r < D; r++) {
		clp_stage_opts so = {BB, TT, M, 0, 0, CLP_F32, NULL};

		CHECK_OK(clp_stage_create(&st[r], th_ctx(), &c, r ? 3 : 0, r ? 5 : 2, &so));
		if (!st[r])
			goto out;
		CHECK_OK(clp_stage_init_params(st[r], 11));
		{
			clp_kfac_opts o = kfac_opts(1);

			CHECK_OK(clp_kfac_opt_create(&k[r], st[r], &o));
			if (!k[r])
				goto out;
		}
	}
	/* costs: F 1, B 2; factors that need more than one step's bubbles; shares by dimension */
	nf = clp_kfac_opt_nfactors(k[0]);
	for (int f = 0; f < nf; f++)
		dims[f] = (int)clp_kfac_opt_factor_dim(k[0], f);
	CHECK_OK(clp_costs_uniform(D, 1.0, 2.0, -1, &co));
	if (!co || !base)
		goto out;
	CHECK_OK(clp_costs_set_kfac_factors(co, dims, nf));
	for (int s = 0; s < D; s++) {
		co->stages[s].nlayers = 2;
		co->stages[s].t[CLP_COST_KFAC_CURV_A] = co->stages[s].t[CLP_COST_KFAC_CURV_B] = 0.6;
		co->stages[s].t[CLP_COST_KFAC_INV] = 1.0;
		co->stages[s].t[CLP_COST_KFAC_PRECOND] = 0.2;
	}
	clp_pf_opts_default(&po);
	po.costs = co;
	CHECK_OK(clp_pipefisher(base, &po, &cyc, &rep));
	if (!cyc)
		goto out;
	CHECK(rep.K >= 2, "the test wants factors spread over steps (K = %d)", rep.K);
	/* the same K in the optimizers (they were made with 1 to learn the factor table) */
	for (int r = 0; r < D; r++) {
		clp_kfac_opts o = kfac_opts(rep.K);

		clp_kfac_opt_free(k[r]);
		k[r] = NULL;
		CHECK_OK(clp_kfac_opt_create(&k[r], st[r], &o));
		if (!k[r])
			goto out;
	}
	CHECK_OK(clp_cl_buffer(th_ctx(), (size_t)M * NN * 16 * 4, "pending gradients", &pend));
	ord = order(cyc, co, &nord);
	for (int cy = 0; cy < CYCLES && pend; cy++)
		for (int64_t i = 0; i < nord; i++) {
			int r = ord[i].rank;
			const clp_op *op = &cyc->ranks[r].ops[ord[i].idx];
			long t = (long)cy * rep.K + op->step;

			if (op->kind != CLP_OP_KFAC_CURV_A && op->kind != CLP_OP_KFAC_CURV_B &&
			    t > cur[r]) { /* a rank's first op of step t */
				cur[r] = (int)t;
				CHECK_OK(clp_stage_zero_grads(st[r]));
				CHECK_OK(clp_kfac_opt_step_begin(k[r], t, NN * M, NN * M, &collect[r]));
				/* the first cycle: factors at once (serial refresh); later ones: kept
				 * for the items wherever they sit */
				clp_kfac_opt_defer(k[r], collect[r] && cy > 0);
				if (collect[r])
					memset(bwd_done[r], 0, sizeof(bwd_done[r]));
			}
			run_op(op, r, t, cy == 0, st, k, pend, tok, tg);
		}
	CHECK_OK(clp_cl_finish(th_ctx()));
	ref = serial(rep.K, CYCLES * rep.K);
	if (!ref)
		goto out;
	{
		const clp_param_table *full = clp_stage_table(ref);
		double worst = 0;
		int exact = 1;

		for (int r = 0; r < D; r++) {
			const clp_param_table *t = clp_stage_table(st[r]);

			for (int i = 0; i < t->ntensors; i++) {
				size_t n = t->tensors[i].numel;
				int j = clp_param_find(full, t->tensors[i].name);
				float *a = malloc(n * 4), *b = malloc(n * 4);

				CHECK(j >= 0, "%s not in the serial model", t->tensors[i].name);
				CHECK_OK(clp_stage_read(st[r], CLP_ST_PARAM, i, a));
				if (j >= 0)
					CHECK_OK(clp_stage_read(ref, CLP_ST_PARAM, j, b));
				for (size_t e = 0; j >= 0 && e < n; e++) {
					double d = fabs((double)a[e] - b[e]);

					exact &= a[e] == b[e];
					worst = d > worst ? d : worst;
					CHECK(isfinite(a[e]) && d <= 1e-6 * (1 + fabs(b[e])),
					      "%s[%zu]: pipelined %.9g, serial %.9g", t->tensors[i].name, e,
					      a[e], b[e]);
				}
				free(a);
				free(b);
			}
		}
		printf("K = %d, %d cycles: largest difference %.3g (%s)\n", rep.K, CYCLES, worst,
		       exact ? "bitwise equal" : "not bitwise");
		/* the additions happen in the same order: the same bits (docs/DESIGN.md, Numbers) */
		CHECK(exact, "the pipelined run differs from the serial one (largest %.3g)", worst);
	}
out:
	free(ord);
	if (pend)
		clReleaseMemObject(pend);
	for (int r = 0; r < D; r++) {
		clp_kfac_opt_free(k[r]);
		clp_stage_free(st[r]);
	}
	clp_stage_free(ref);
	clp_sched_free(base);
	clp_sched_free(cyc);
	clp_costs_free(co);
}

TH_MAIN(TH_TEST(test_pipefisher_equals_serial))
