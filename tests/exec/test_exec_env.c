/* The executor's services for optimizers (engine/exec/exec_env.h), on one rank: a third
 * optimizer written on them alone (this file includes neither exec_internal.h nor AdamW's
 * file) is installed with clp_exec_set_optim and gives the default AdamW's losses bitwise, its
 * hooks called as exec_optim.h says with the step's settings passed through untouched; the
 * counts, the stage lookup, the sums over a group (device buffers scaled, bad groups and
 * 16-bit buffers refused) do what exec_env.h promises. */
#include <stdlib.h>
#include <string.h>

#include "engine/exec/exec.h"
#include "engine/exec/exec_env.h"
#include "engine/sched/gen.h"
#include "tests/harness.h"
#include "topology/comm/comm.h"

#define BB 2
#define TT 5
#define MB 3
#define STEPS 3

static clp_model_config model(void)
{
	clp_model_config c = {0};

	c.preset = CLP_PRESET_GPT2;
	c.n_layer = 2;
	c.d_model = 16;
	c.n_head = 2;
	c.d_ff = 24;
	c.vocab = 29;
	c.ctx = 8;
	CHECK_OK(clp_model_config_resolve(&c));
	return c;
}

/* "Counted AdamW": AdamW's update through the services, counting the hooks. */
typedef struct counted {
	int begins, ends, steps, frees, bad_settings;
	const void *want; /* the settings this step was given */
} counted;

static clp_status c_begin(clp_exec *e, void *state, const clp_exec_data *d)
{
	(void)e;
	(void)d;
	((counted *)state)->begins++;
	return CLP_OK;
}

static clp_status c_stage_step(clp_exec *e, void *state, int stage, const void *settings)
{
	counted *c = state;
	clp_exec_counts n;

	c->bad_settings += settings != c->want;
	clp_exec_step_counts(e, &n);
	for (int i = 0; i < clp_exec_nstages(e); i++)
		if (clp_exec_stage_id(e, i) == stage) {
			clp_stage *st = clp_exec_stage(e, i, NULL);

			c->steps++;
			CLP_TRY(clp_stage_adamw_scaled(st, settings, clp_stage_stats(st),
						       1.0f / n.loss_scale));
		}
	return CLP_OK;
}

static clp_status c_end(clp_exec *e, void *state)
{
	(void)e;
	((counted *)state)->ends++;
	return CLP_OK;
}

static void c_free(clp_exec *e, void *state)
{
	(void)e;
	((counted *)state)->frees++;
}

static const clp_exec_optim counted_optim = {
	.name = "counted AdamW",
	.step_begin = c_begin,
	.stage_step = c_stage_step,
	.step_end = c_end,
	.free = c_free,
};

static void batch(int step, int32_t *tok, int32_t *tg)
{
	th_rng r = th_rng_seed((uint64_t)step * 7 + 1);

	for (int i = 0; i < MB * BB * TT; i++) {
		tok[i] = (int32_t)(th_next(&r) % 29);
		tg[i] = (int32_t)(th_next(&r) % 29);
	}
}

/* STEPS steps of a one-rank GPipe executor; the counted optimizer when c is given. */
static void train(clp_comm *comm, const clp_sched *s, counted *c, double *loss)
{
	clp_model_config m = model();
	clp_exec_opts o = {BB, TT, 1, 0, CLP_F32, NULL};
	clp_exec *e = NULL;
	int32_t tok[MB * BB * TT], tg[MB * BB * TT];

	CHECK_OK(clp_exec_create(&e, comm, th_ctx(), s, &m, &o));
	if (!e)
		return;
	CHECK_OK(clp_exec_init_params(e, 5));
	if (c)
		CHECK_OK(clp_exec_set_optim(e, &counted_optim, c));
	for (int step = 0; step < STEPS; step++) {
		clp_nn_adamw_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
				      .weight_decay = 0.1f, .step = step + 1};
		clp_exec_data d = {tok, NULL, tg, 1.0f / (MB * BB * TT), 3, (uint32_t)step, NULL, 0};
		clp_exec_result r = {0};

		if (c)
			c->want = &hp;
		batch(step, tok, tg);
		CHECK_OK(clp_exec_step(e, &d, &hp, 1.0f, &r));
		loss[step] = r.loss;
	}
	clp_exec_free(e);
}

static void third_optimizer(clp_comm *comm, const clp_sched *s)
{
	double ref[STEPS] = {0}, got[STEPS] = {0};
	counted c = {0};

	train(comm, s, NULL, ref);
	train(comm, s, &c, got);
	for (int i = 0; i < STEPS; i++)
		CHECK(ref[i] == got[i] && ref[i] > 0, "step %d: loss %.17g with AdamW, %.17g with the "
		      "counted AdamW on exec_env.h", i + 1, ref[i], got[i]);
	CHECK(c.begins == STEPS && c.ends == STEPS, "step_begin %d, step_end %d times (want %d)",
	      c.begins, c.ends, STEPS);
	CHECK(c.steps == STEPS, "stage_step updated %d stages (want one per step, %d)", c.steps,
	      STEPS);
	CHECK(c.bad_settings == 0, "stage_step got other settings than clp_exec_step %d times",
	      c.bad_settings);
	CHECK(c.frees == 1, "the optimizer's free ran %d times (want 1, at clp_exec_free)",
	      c.frees);
}

static void services(clp_comm *comm, const clp_sched *s)
{
	clp_model_config m = model();
	clp_exec_opts o = {BB, TT, 1, 0, CLP_F32, NULL};
	clp_exec *e = NULL;
	clp_exec_counts n;
	clp_comm *g = NULL;
	cl_mem mem = NULL;
	float h[7], back[7];
	double v = 3.5;

	CHECK_OK(clp_exec_create(&e, comm, th_ctx(), s, &m, &o));
	if (!e)
		return;
	CHECK(clp_exec_sched(e) == s && clp_exec_rank(e) == 0 && clp_exec_ctx(e) == th_ctx(),
	      "the schedule, rank and context are the executor's");
	clp_exec_step_counts(e, &n);
	CHECK(n.rows == BB * TT && n.nmb == MB && n.nreplicas == 1 && n.nsteps == 1 &&
	      !n.recompute && n.loss_scale == 1.0f, "counts: rows %zu nmb %d replicas %d steps %d "
	      "recompute %d scale %g", n.rows, n.nmb, n.nreplicas, n.nsteps, n.recompute,
	      (double)n.loss_scale);
	CHECK(clp_exec_nstages(e) == 1 && clp_exec_find_stage(e, 0, 0) == 0 &&
	      clp_exec_find_stage(e, 0, -1) == 0 && clp_exec_find_stage(e, 0, 1) == -1 &&
	      clp_exec_find_stage(e, 7, -1) == -1, "stage lookup");
	CHECK(clp_exec_slot(e, 0, 0) == -1 && clp_exec_slot(e, 3, 0) == -1,
	      "no micro-batch holds a slot between steps");
	/* a group of one: no communicator, and the sums leave the values (scaled) */
	for (int gi = 0; gi < s->ngroups; gi++) {
		CHECK_OK(clp_exec_group_comm(e, gi, &g, "test"));
		CHECK(g == NULL, "group %d has one rank: no communicator", gi);
	}
	CHECK_ERR(clp_exec_group_comm(e, s->ngroups, &g, "test sum"), CLP_ERR_INVALID,
		  "test sum", "group");
	CHECK_OK(clp_exec_group_sum(e, -1, CLP_COMM_F64, &v, 1, "test"));
	CHECK(v == 3.5, "a sum over the one rank keeps the value (%g)", v);
	for (int i = 0; i < 7; i++)
		h[i] = (float)i - 2.5f;
	CHECK_OK(clp_cl_buffer(th_ctx(), sizeof(h) + 8, "test buffer", &mem));
	if (mem) {
		clp_buf b[2] = {{mem, 2, CLP_F32}, {mem, 0, CLP_F32}};
		size_t cnt[2] = {5, 2};
		clp_buf b16 = {mem, 0, CLP_BF16};
		size_t one = 1;

		CHECK_OK(clp_cl_write(th_ctx(), mem, 0, sizeof(h), h));
		CHECK_OK(clp_exec_sum_bufs(e, -1, b, cnt, 2, 2.0f, "test"));
		CHECK_OK(clp_cl_read(th_ctx(), mem, 0, sizeof(back), back));
		for (int i = 0; i < 7; i++)
			CHECK(back[i] == 2.0f * h[i], "element %d: %g, want %g", i, (double)back[i],
			      2.0 * h[i]);
		CHECK_ERR(clp_exec_sum_bufs(e, -1, &b16, &one, 1, 1.0f, "test"), CLP_ERR_INVALID,
			  "bf16", "fp32");
		clReleaseMemObject(mem);
	}
	clp_exec_free(e);
}

/* A one-rank job and its GPipe schedule of MB micro-batches; 0 when either failed. */
static int job(clp_comm **comm, clp_sched **s)
{
	clp_gen_opts g;

	*comm = NULL;
	*s = NULL;
	if (!th_ctx())
		return 0;
	CHECK_OK(clp_comm_self(comm));
	clp_gen_opts_default(&g);
	g.kind = CLP_SCHED_GPIPE;
	g.depth = 1;
	g.microbatches = MB;
	g.layers = 2;
	CHECK_OK(clp_sched_generate(s, &g));
	return *comm && *s;
}

static void end_job(clp_comm *comm, clp_sched *s)
{
	clp_sched_free(s);
	clp_comm_free(comm);
}

static void test_third_optimizer_on_services(void)
{
	clp_comm *comm;
	clp_sched *s;

	if (job(&comm, &s))
		third_optimizer(comm, s);
	end_job(comm, s);
}

static void test_services(void)
{
	clp_comm *comm;
	clp_sched *s;

	if (job(&comm, &s))
		services(comm, s);
	end_job(comm, s);
}

TH_MAIN(TH_TEST(test_third_optimizer_on_services), TH_TEST(test_services))
