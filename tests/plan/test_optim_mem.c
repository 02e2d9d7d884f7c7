/* The optimizers' own device buffers in the memory model (clp_optim_info.own_bytes, the
 * planner's clp_plan_stage_mem, the session's check) against what the optimizers allocate:
 * Shampoo's L, R, L_inv, R_inv per weight matrix and its scratch (with stale roots L_next,
 * R_next, and with roots in phases their X), Muon's scratch, for each
 * preset with odd sizes, one stage or two on the rank: the bytes its buffers hold (CL_MEM_SIZE),
 * exactly, and both equal to the count from the matrix shapes written out here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/exec/exec.h"
#include "engine/exec/exec_muon.h"
#include "engine/exec/exec_shampoo.h"
#include "engine/plan/plan.h"
#include "engine/sched/gen.h"
#include "engine/train/optim_kind.h"
#include "tests/harness.h"
#include "topology/comm/comm.h"

#define MAXST 4

static size_t max_z(size_t a, size_t b)
{
	return a > b ? a : b;
}

static size_t min_z(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* The shapes' count: Shampoo 8 (r^2 + c^2) a matrix + 4 (2 max rc + 6 max max(r, c)^2 + 2);
 * Muon 4 (2 max rc + 2 max min(r, c)^2 + 1), over the attention and MLP weight matrices. */
static void by_shapes(const clp_param_table *const *t, int n, int64_t *shampoo, int64_t *muon)
{
	int64_t state = 0;
	size_t big = 1, dd = 1, gram = 1;
	int mats = 0;

	for (int k = 0; k < n; k++)
		for (int i = 0; i < t[k]->ntensors; i++) {
			const clp_tensor_desc *d = &t[k]->tensors[i];
			size_t r = d->shape[0], c = d->shape[1];

			if (d->ndim != 2 || (d->role != CLP_R_QKV_W && d->role != CLP_R_ATT_O_W &&
					     d->role != CLP_R_FC_W && d->role != CLP_R_PROJ_W))
				continue;
			mats++;
			state += 8 * (int64_t)(r * r + c * c);
			big = max_z(big, r * c);
			dd = max_z(dd, max_z(r, c) * max_z(r, c));
			gram = max_z(gram, min_z(r, c) * min_z(r, c));
		}
	CHECK(mats > 0 || n == 0, "the stages hold weight matrices");
	*shampoo = state + 4 * (int64_t)(2 * big + 6 * dd + 2);
	*muon = 4 * (int64_t)(2 * big + 2 * gram + 1);
}

/* One rank holding stages of model m under schedule kind (chunks per rank): both optimizers'
 * buffers against the model's count and the shapes'. */
static void one(clp_model_config m, int kind, int chunks, const char *at)
{
	clp_comm *comm = NULL;
	clp_sched *s = NULL;
	clp_exec *e = NULL;
	clp_gen_opts g;
	clp_exec_opts o = {3, 5, 1, 0, CLP_F32, NULL};
	clp_exec_stage_need need[MAXST * 4];
	clp_param_table tab[MAXST * 4];
	const clp_param_table *tabs[MAXST * 4];
	const clp_exec_shampoo_opts so = {0.0f, 1e-6f, 1, 25, 0, 0, 0.0f, 0};
	const clp_exec_muon_opts mo = {0.95f, 1, 5, 0};
	int64_t want_s, want_m, real_s, real_m;
	int k, L = m.n_layer;

	CHECK_OK(clp_model_config_resolve(&m));
	CHECK_OK(clp_comm_self(&comm));
	clp_gen_opts_default(&g);
	g.kind = kind;
	g.depth = 1;
	g.chunks = chunks;
	g.microbatches = 2;
	g.layers = L;
	CHECK_OK(clp_sched_generate(&s, &g));
	if (!comm || !s)
		goto out;
	CHECK_OK(clp_exec_create(&e, comm, th_ctx(), s, &m, &o));
	if (!e)
		goto out;
	k = clp_exec_rank_stages(s, 0, need, MAXST * 4);
	CHECK(k == chunks, "%s: the rank holds %d stage(s), expected %d", at, k, chunks);
	for (int i = 0; i < k; i++) {
		const clp_stage_info *si = &s->stages[need[i].stage];

		CHECK_OK(clp_param_table_build(&m, si->embed ? 0 : si->first_layer + 1,
					       si->head ? L + 1 : si->first_layer + si->nlayers,
					       &tab[i]));
		tabs[i] = &tab[i];
	}
	by_shapes(tabs, k, &want_s, &want_m);

	/* SOAP: Shampoo's layout (L, R, QL, QR) and clp_soap_work for the largest matrix */
	{
		const clp_exec_soap_opts sp = {.beta1 = 0.95f, .beta2 = 0.95f, .shampoo_beta = 0.95f,
					       .eps = 1e-8f, .frequency = 10, .init_iters = 3,
					       .correct_bias = 1};

		CHECK_OK(clp_exec_soap(e, &sp));
		CHECK(clp_exec_soap_device_bytes(e) == clp_exec_soap_bytes(tabs, k) &&
			      clp_optim_info_of(CLP_OPTIM_SOAP)->own_bytes(tabs, k) ==
				      clp_exec_soap_bytes(tabs, k) &&
			      clp_exec_shampoo_device_bytes(e) == 0,
		      "%s: SOAP's buffers hold %lld bytes, the model says %lld", at,
		      (long long)clp_exec_soap_device_bytes(e),
		      (long long)clp_exec_soap_bytes(tabs, k));
	}
	{ /* SOAP's stale bases (PipeFisher): L_next, R_next, QL_next, QR_next and the perms,
	   * 4 (2 rows^2 + 2 cols^2 + rows + cols) a matrix */
		clp_exec_soap_opts sp = {.beta1 = 0.95f, .beta2 = 0.95f, .shampoo_beta = 0.95f,
					 .eps = 1e-8f, .frequency = 10, .init_iters = 3,
					 .correct_bias = 1, .stale = 1};
		int64_t next = 0;

		for (int i = 0; i < k; i++)
			for (int t = 0; t < tabs[i]->ntensors; t++) {
				const clp_tensor_desc *d = &tabs[i]->tensors[t];

				if (clp_exec_muon_takes(d))
					next += 4 * (int64_t)(2 * d->shape[0] * d->shape[0] +
							      2 * d->shape[1] * d->shape[1] +
							      d->shape[0] + d->shape[1]);
			}
		CHECK_OK(clp_exec_soap(e, &sp));
		CHECK(clp_exec_soap_device_bytes(e) == clp_exec_soap_bytes(tabs, k) + next &&
			      clp_exec_soap_next_bytes(tabs, k) == next,
		      "%s: SOAP's stale bases hold %lld bytes, the model says %lld + %lld", at,
		      (long long)clp_exec_soap_device_bytes(e), (long long)clp_exec_soap_bytes(tabs, k),
		      (long long)clp_exec_soap_next_bytes(tabs, k));
	}

	CHECK_OK(clp_exec_shampoo(e, &so));
	real_s = clp_exec_shampoo_device_bytes(e);
	CHECK(real_s == want_s && clp_exec_shampoo_bytes(tabs, k) == want_s,
	      "%s: Shampoo's buffers hold %lld bytes, the model says %lld, the shapes %lld", at,
	      (long long)real_s, (long long)clp_exec_shampoo_bytes(tabs, k), (long long)want_s);
	CHECK(clp_optim_info_of(CLP_OPTIM_SHAMPOO)->own_bytes(tabs, k) == real_s,
	      "%s: the optimizer table counts Shampoo's buffers", at);
	CHECK(clp_exec_muon_device_bytes(e) == 0, "%s: Muon is not installed", at);
	{ /* stale roots (PipeFisher): L_next and R_next too, 4 (rows^2 + cols^2) a matrix */
		clp_exec_shampoo_opts st = so;
		int64_t next = 0;

		for (int i = 0; i < k; i++)
			for (int t = 0; t < tabs[i]->ntensors; t++)
				if (clp_exec_muon_takes(&tabs[i]->tensors[t]))
					next += 4 * (int64_t)(tabs[i]->tensors[t].shape[0] *
								      tabs[i]->tensors[t].shape[0] +
							      tabs[i]->tensors[t].shape[1] *
								      tabs[i]->tensors[t].shape[1]);
		st.stale = 1;
		CHECK_OK(clp_exec_shampoo(e, &st));
		CHECK(clp_exec_shampoo_device_bytes(e) == want_s + next &&
			      clp_exec_shampoo_next_bytes(tabs, k) == next,
		      "%s: stale roots hold %lld bytes, the model says %lld + %lld", at,
		      (long long)clp_exec_shampoo_device_bytes(e), (long long)want_s,
		      (long long)clp_exec_shampoo_next_bytes(tabs, k));
		/* a root in phases (a PipeFisher item KFAC_INV with op.mb = phase): each
		 * matrix's X of its L and R roots too, another 4 (rows^2 + cols^2) */
		{
			clp_op op = clp_op_make(CLP_OP_KFAC_INV, need[0].stage, 0, 0, 1);

			op.layer = s->stages[need[0].stage].first_layer;
			op.factor = 1;
			CHECK_OK(clp_sched_push(s, 0, &op));
			CHECK(clp_exec_shampoo_sched_phases(s) == 2, "%s: a schedule with phase 1 "
			      "holds roots in 2 phases", at);
			CHECK_OK(clp_exec_shampoo(e, &st));
			CHECK(clp_exec_shampoo_device_bytes(e) == want_s + 2 * next &&
				      clp_exec_shampoo_phase_bytes(tabs, k) == next,
			      "%s: stale roots in phases hold %lld bytes, the model says %lld + %lld "
			      "+ %lld", at, (long long)clp_exec_shampoo_device_bytes(e),
			      (long long)want_s, (long long)next,
			      (long long)clp_exec_shampoo_phase_bytes(tabs, k));
		}
	}

	CHECK_OK(clp_exec_muon(e, &mo));
	real_m = clp_exec_muon_device_bytes(e);
	CHECK(real_m == want_m && clp_exec_muon_bytes(tabs, k) == want_m,
	      "%s: Muon's buffers hold %lld bytes, the model says %lld, the shapes %lld", at,
	      (long long)real_m, (long long)clp_exec_muon_bytes(tabs, k), (long long)want_m);
	CHECK(clp_optim_info_of(CLP_OPTIM_MUON)->own_bytes(tabs, k) == real_m,
	      "%s: the optimizer table counts Muon's buffers", at);
	CHECK(clp_exec_shampoo_device_bytes(e) == 0, "%s: Shampoo was replaced", at);
	CHECK(!clp_optim_info_of(CLP_OPTIM_ADAMW)->own_bytes &&
	      !clp_optim_info_of(CLP_OPTIM_KFAC)->own_bytes, "AdamW and K-FAC: no own buffers");
	fprintf(stderr, "%s: Shampoo %lld bytes, Muon %lld bytes\n", at, (long long)real_s,
		(long long)real_m);
	for (int i = 0; i < k; i++)
		clp_param_table_free(&tab[i]);
out:
	clp_exec_free(e);
	clp_sched_free(s);
	clp_comm_free(comm);
}

static void test_against_optimizers(void)
{
	const clp_preset presets[] = {CLP_PRESET_GPT2, CLP_PRESET_LLAMA, CLP_PRESET_BERT};

	if (!th_ctx())
		return;
	for (int pi = 0; pi < 3; pi++) {
		clp_model_config m = {.preset = presets[pi], .n_layer = 2, .d_model = 12,
				      .n_head = 3, .d_ff = 33, .vocab = 31, .ctx = 8, .n_types = 2};
		char at[64];

		if (presets[pi] == CLP_PRESET_LLAMA)
			m.n_kv_head = 1;
		snprintf(at, sizeof(at), "%s, one stage", clp_preset_name(m.preset));
		one(m, CLP_SCHED_GPIPE, 1, at);
		snprintf(at, sizeof(at), "%s, two stages on the rank", clp_preset_name(m.preset));
		one(m, CLP_SCHED_INTERLEAVED, 2, at);
	}
}

/* The planner (clp_plan_model_from_config, clp_plan_stage_mem) and `clpipe bench --memory`
 * add the optimizer's own buffers to the optimizer state: tests/plan/data/tiny.toml's
 * GPT-2 (4 layers, C = 64, F = 256) in one stage, counted from the shapes by hand. */
static void test_planner(void)
{
	const char *names[] = {"adamw", "muon", "shampoo"};
	/* per layer 8 ((64^2 + 192^2) + 2 64^2 + 2 (64^2 + 256^2)) = 1507328, 4 layers, and
	 * 4 (2 x 64 x 256 + 6 x 256^2 + 2) of scratch; Muon 4 (2 x 64 x 256 + 2 x 64^2 + 1) */
	const int64_t own[] = {0, 163844, 4 * 1507328 + 1703944};

	for (int i = 0; i < 3; i++) {
		clp_train_config c;
		clp_plan_model pm;
		clp_model_mem got, base;

		CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.preset", "gpt2", "test"));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.n_layer", "4", "test"));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.d_model", "64", "test"));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.n_head", "4", "test"));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "model.ctx", "32", "test"));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "train.seq", "32", "test"));
		CHECK_OK(clp_cfg_set(&clp_train_schema, &c, "optim.name", names[i], "test"));
		CHECK_OK(clp_plan_model_from_config(&c, &pm));
		CHECK_OK(clp_plan_stage_mem(&pm, &pm.cfg, 0, 5, 0, 0, &got));
		CHECK_OK(clp_model_stage_mem_prec(&pm.cfg, 0, 5, pm.batch, pm.seq, 0, 0,
						 pm.precision, &base));
		CHECK(got.own_bytes == own[i] && got.opt_bytes == base.opt_bytes + own[i] &&
		      got.param_bytes == base.param_bytes && got.work_bytes == base.work_bytes,
		      "%s: the planner counts %lld bytes of the optimizer's own (expected %lld), "
		      "optimizer state %lld (AdamW's moments %lld)", names[i],
		      (long long)got.own_bytes, (long long)own[i], (long long)got.opt_bytes,
		      (long long)base.opt_bytes);
	}
}

TH_MAIN(TH_TEST(test_against_optimizers), TH_TEST(test_planner))
