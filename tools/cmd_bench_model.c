/* clpipe bench --model CONFIG: model-shaped device profiles. Per selected device, the blocks of
 * the config's model at its micro-batch (embedding, one transformer layer, head + loss) run as
 * real stages: forward, backward, its B and W halves and the optimizer step, wall-clock with a
 * clFinish each (what a training step pays, launches included), medians and spread over the
 * repeats; attention forward and backward from the kernels' device times; the K-FAC work of one
 * layer (factors A and B from one micro-batch, inverting all factors, preconditioning); memory
 * per block as the stages allocate it. The output is a cost table (engine/scenario/costs.h): the block
 * table clpipe plan reads (entries "embedding", "layer", "head"; other devices under
 * `devices`), or with --layers / --stages the per-stage table clpipe sim reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/gemm.h"
#include "cl/runtime.h"
#include "engine/io/config.h"
#include "engine/optim/kfac.h"
#include "engine/optim/stage_time.h"
#include "engine/plan/plan.h"
#include "engine/sched/gen.h"
#include "tools/cli.h"
#include "tools/stats.h"

enum { F_FWD, F_BWD, F_BWD_B, F_BWD_W, F_OPT, F_ATT_F, F_ATT_B, F_KA, F_KB, F_KINV, F_KPRE, NF };
static const char *const fig_names[NF] = {
	"forward", "backward", "backward B (input)", "backward W (weights)", "optimizer (AdamW)",
	"attention forward", "attention backward", "K-FAC factors A", "K-FAC factors B",
	"K-FAC inversion", "K-FAC preconditioning"};

typedef struct dev_result {
	char kind[CLP_NAME_MAX], name[128];
	clp_stats fig[CLP_PLAN_NBLOCKS][NF];
	int nfactors;
	int fdim[CLP_COST_MAX_FACTORS];
} dev_result;

typedef struct bm {
	clp_cl_ctx *ctx;
	const clp_plan_model *m;
	int repeats, warmup;
	int32_t *tok, *types, *tgt;
	uint64_t rng; /* the random inputs and output gradients of the timed stages */
} bm;

static void help(void)
{
	printf("usage: clpipe bench --model CONFIG [--section.key=VALUE ...]\n"
	       "                    [--device SPEC[,SPEC..] | --all] [--kind NAME[,NAME..]]\n"
	       "                    [--repeats N] [--warmup N] [--layers N,N,.. | --stages D]\n"
	       "                    [--json FILE] [--quiet]\n"
	       "       clpipe bench --model CONFIG --memory [--section.key=VALUE ...]\n\n"
	       "Times the model's blocks at its micro-batch (train.batch x train.seq) on each device:\n"
	       "embedding, one transformer layer and head + loss, each forward, backward, the\n"
	       "backward's input (B) and weight (W) halves and the AdamW step; attention forward\n"
	       "and backward; K-FAC's factors, inversion and preconditioning of one layer; memory\n"
	       "per block. Medians over --repeats (default 5) after --warmup (default 1), with\n"
	       "their range. --json writes the block cost table clpipe plan reads (--blocks); with\n"
	       "--layers (layers per stage) or --stages D (an even split) it writes the per-stage\n"
	       "table clpipe sim reads (--costs) instead. --train.precision=bf16 (or fp16) runs\n"
	       "the blocks in that storage precision; the table records it (\"precision\").\n\n"
	       "  --kind NAME,..  device kinds as the cluster file names them (default: the device's\n"
	       "                  name, which clpipe plan matches inside device names)\n"
	       "  --memory        no timing: the device memory of one stage holding the whole model\n"
	       "                  (what clpipe train allocates on one device, engine/model/\n"
	       "                  stage_mem.c) in train.precision, part by part, in bytes\n");
}

static clp_status rnd_ids(int32_t *v, size_t n, int mod, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		v[i] = (int32_t)((seed >> 33) % (uint64_t)mod);
	}
	return CLP_OK;
}

/* Random values into a device range (the inputs and output gradients a stage gets). */
/* n random values into b, in its storage type (a 16-bit stage's activations: rounded). */
static clp_status fill_rand(clp_cl_ctx *ctx, clp_buf b, size_t n)
{
	float *h = malloc(n * sizeof(float));
	size_t es = clp_dtype_size(b.dt);
	uint64_t s = 88172645463325252ULL;
	clp_status st;

	if (!h)
		return clp_error(CLP_ERR_NOMEM, "bench: out of host memory");
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		h[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
	}
	if (es == 2) {
		uint16_t *w = malloc(n * sizeof(uint16_t));

		if (!w) {
			free(h);
			return clp_error(CLP_ERR_NOMEM, "bench: out of host memory");
		}
		clp_dtype_pack(b.dt, w, h, n);
		st = clp_cl_write(ctx, b.mem, b.off * es, n * es, w);
		free(w);
	} else {
		st = clp_cl_write(ctx, b.mem, b.off * es, n * es, h);
	}
	free(h);
	return st;
}

static clp_stage_mb mb_of(const bm *b, uint32_t i)
{
	return (clp_stage_mb){.step = 1, .micro_batch = i, .seed = 1, .tokens = b->tok,
			      .types = b->types, .targets = b->tgt};
}

/* One stage of block range [first, last]; inputs made up where the stage takes activations. */
static clp_status make_stage(bm *b, int first, int last, int split, clp_stage **out)
{
	clp_stage_opts so = {.B = b->m->batch, .T = b->m->seq, .slots = 1, .split = split,
			     .precision = b->m->precision};
	size_t N = b->m->batch * b->m->seq, C = (size_t)b->m->cfg.d_model;

	CLP_TRY(clp_stage_create(out, b->ctx, &b->m->cfg, first, last, &so));
	CLP_TRY(clp_stage_init_params(*out, 3));
	if (!clp_stage_has_embedding(*out))
		CLP_TRY(fill_rand(b->ctx, clp_stage_act_in(*out, 0), N * C));
	if (!clp_stage_has_head(*out))
		CLP_TRY(fill_rand(b->ctx, clp_stage_grad_in(*out), N * C));
	return clp_cl_finish(b->ctx);
}

static float inv_count(const bm *b)
{
	return 1.0f / (float)(b->m->batch * b->m->seq);
}

/* Device time of the attention kernels (labels "attn...") in a profile. */
static clp_status attn_ms(clp_cl_ctx *ctx, double *s)
{
	clp_cl_timing *t = NULL;
	int n = 0;

	*s = 0;
	CLP_TRY(clp_cl_profile_stop(ctx, &t, &n));
	for (int i = 0; i < n; i++)
		if (!strncmp(t[i].label, "attn", 4))
			*s += t[i].total_ms * 1e-3;
	free(t);
	return CLP_OK;
}

/* One run of a block through clp_stage_time (the measurement PipeFisher's start-up makes too):
 * forward, backward and AdamW on st; B and W on sp (split); for the layer the K-FAC items on ks
 * and the attention kernels' device time of a forward and a backward. */
static clp_status one_run(bm *b, clp_stage *st, clp_stage *sp, clp_stage *ks, clp_kfac_opt *k,
			  uint32_t r, double *t)
{
	clp_stage_mb mb = mb_of(b, r);
	size_t C = (size_t)b->m->cfg.d_model;
	clp_stage_times d;
	float ic = inv_count(b);

	CLP_TRY(clp_stage_time(st, NULL, 0, &mb, C, &b->rng, &d));
	t[F_FWD] = d.fwd;
	t[F_BWD] = d.bwd;
	t[F_OPT] = d.opt;
	CLP_TRY(clp_stage_time(sp, NULL, 1, &mb, C, &b->rng, &d));
	t[F_BWD_B] = d.bwd_b;
	t[F_BWD_W] = d.bwd_w;
	if (!ks)
		return CLP_OK;
	CLP_TRY(clp_stage_time(ks, k, 0, &mb, C, &b->rng, &d));
	t[F_KA] = d.kfac_a;
	t[F_KB] = d.kfac_b;
	t[F_KINV] = d.kfac_inv;
	t[F_KPRE] = d.kfac_pre;
	clp_cl_profile_start(b->ctx);
	CLP_TRY(clp_stage_forward(st, &mb, ic));
	CLP_TRY(attn_ms(b->ctx, &t[F_ATT_F]));
	clp_cl_profile_start(b->ctx);
	CLP_TRY(clp_stage_backward(st, &mb, ic));
	return attn_ms(b->ctx, &t[F_ATT_B]);
}

/* Every figure of block `blk` (stage blocks first..last) on b's device into res. */
static clp_status measure_block(bm *b, int blk, int first, int last, dev_result *res)
{
	clp_stage *st = NULL, *sp = NULL, *ks = NULL;
	clp_kfac_opt *k = NULL;
	clp_kfac_opts ko;
	int n = b->warmup + b->repeats, layer = blk == CLP_PLAN_LAYER;
	double *x = calloc((size_t)NF * (size_t)b->repeats, sizeof(double));
	clp_status s = x ? CLP_OK : clp_error(CLP_ERR_NOMEM, "bench: out of host memory");

	clp_kfac_opts_default(&ko);
	if (s == CLP_OK)
		s = make_stage(b, first, last, 0, &st);
	if (s == CLP_OK)
		s = make_stage(b, first, last, 1, &sp);
	if (s == CLP_OK && layer)
		s = make_stage(b, first, last, 0, &ks);
	if (s == CLP_OK && layer)
		s = clp_kfac_opt_create(&k, ks, &ko);
	for (int r = 0; s == CLP_OK && r < n; r++) {
		double t[NF] = {0};

		s = one_run(b, st, sp, ks, k, (uint32_t)r, t);
		for (int f = 0; r >= b->warmup && f < NF; f++)
			x[(size_t)f * (size_t)b->repeats + (size_t)(r - b->warmup)] = t[f];
	}
	for (int f = 0; s == CLP_OK && f < NF; f++)
		res->fig[blk][f] = clp_stats_of(&x[(size_t)f * (size_t)b->repeats], b->repeats);
	if (s == CLP_OK && k) {
		res->nfactors = clp_kfac_opt_nfactors(k);
		if (res->nfactors > CLP_COST_MAX_FACTORS)
			res->nfactors = 0;
		for (int f = 0; f < res->nfactors; f++)
			res->fdim[f] = (int)clp_kfac_opt_factor_dim(k, f);
	}
	clp_kfac_opt_free(k);
	clp_stage_free(ks);
	clp_stage_free(sp);
	clp_stage_free(st);
	free(x);
	return s;
}

static clp_status measure_device(bm *b, const char *sel, const char *kind, int quiet,
				 dev_result *res)
{
	int L = b->m->cfg.n_layer;
	const int range[CLP_PLAN_NBLOCKS][2] = {{0, 0}, {1, 1}, {L + 1, L + 1}};
	clp_status s;

	memset(res, 0, sizeof(*res));
	CLP_TRY(clp_cl_ctx_create(&b->ctx, sel[0] ? sel : NULL));
	snprintf(res->name, sizeof(res->name), "%.127s", clp_cl_ctx_device(b->ctx)->name);
	snprintf(res->kind, sizeof(res->kind), "%.*s", CLP_NAME_MAX - 1,
		 kind && kind[0] ? kind : res->name);
	s = CLP_OK;
	for (int blk = 0; s == CLP_OK && blk < CLP_PLAN_NBLOCKS; blk++) {
		if (!quiet)
			fprintf(stderr, "bench: %s: %s\n", res->name, clp_plan_block_name(blk));
		s = measure_block(b, blk, range[blk][0], range[blk][1], res);
	}
	clp_cl_ctx_free(b->ctx);
	b->ctx = NULL;
	if (s != CLP_OK)
		return clp_error_context(s, "device '%s': ", sel[0] ? sel : "default");
	return CLP_OK;
}

/* Times of one device into t (a stage's or a kind's): B and W keep their measured ratio and add
 * up to the measured full backward (the cost table requires bwd_s = bwd_b_s + bwd_w_s). */
static void put_times(const dev_result *r, int blk, double *t)
{
	const clp_stats *f = r->fig[blk];
	double bb = f[F_BWD_B].median, bw = f[F_BWD_W].median, full = f[F_BWD].median;

	t[CLP_COST_FWD] = f[F_FWD].median;
	t[CLP_COST_BWD] = full;
	t[CLP_COST_BWD_B] = bb + bw > 0 ? full * bb / (bb + bw) : full / 2;
	t[CLP_COST_BWD_W] = full - t[CLP_COST_BWD_B];
	t[CLP_COST_OPT] = f[F_OPT].median;
	t[CLP_COST_KFAC_CURV_A] = f[F_KA].median;
	t[CLP_COST_KFAC_CURV_B] = f[F_KB].median;
	t[CLP_COST_KFAC_INV] = f[F_KINV].median;
	t[CLP_COST_KFAC_PRECOND] = f[F_KPRE].median;
}

/* The block table (clp_plan_blocks_make): the first device's times, the others' under
 * `devices`. */
static clp_status block_table(const bm *b, const dev_result *res, int n, clp_costs **out)
{
	const clp_plan_model *m = b->m;
	size_t per = (size_t)CLP_PLAN_NBLOCKS * CLP_COST_NTIMES;
	double *t = malloc((size_t)n * per * sizeof(double));
	const char **kinds = malloc((size_t)n * sizeof(*kinds));
	char source[256];
	clp_status s;

	if (!t || !kinds) {
		free(t);
		free(kinds);
		return clp_error(CLP_ERR_NOMEM, "bench: out of host memory");
	}
	for (int k = 0; k < n; k++) {
		kinds[k] = res[k].kind;
		for (int blk = 0; blk < CLP_PLAN_NBLOCKS; blk++)
			put_times(&res[k], blk, &t[(size_t)k * per + (size_t)blk * CLP_COST_NTIMES]);
	}
	snprintf(source, sizeof(source), "clpipe bench --model: %s, %d layers, micro-batch %zu x "
		 "%zu, median of %d runs", clp_preset_name(m->cfg.preset), m->cfg.n_layer, m->batch,
		 m->seq, b->repeats);
	s = clp_plan_blocks_make(m, kinds, t, n, res[0].fdim, res[0].nfactors, source, out);
	free(t);
	free(kinds);
	return s;
}

static void print_device(const dev_result *r, const clp_plan_model *m)
{
	int L = m->cfg.n_layer;
	const int range[CLP_PLAN_NBLOCKS][2] = {{0, 0}, {1, 1}, {L + 1, L + 1}};

	printf("\ndevice %s (kind \"%s\"): %s, %d layers, micro-batch %zu x %zu, %s\n", r->name,
	       r->kind, clp_preset_name(m->cfg.preset), L, m->batch, m->seq,
	       clp_dtype_name(m->precision));
	printf("  %-10s %-24s %12s  [%10s .. %10s]\n", "block", "figure", "median ms", "min",
	       "max");
	for (int blk = 0; blk < CLP_PLAN_NBLOCKS; blk++) {
		clp_model_mem mem;

		for (int f = 0; f < NF; f++) {
			const clp_stats *s = &r->fig[blk][f];

			if (s->n == 0 || (blk != CLP_PLAN_LAYER && f >= F_ATT_F))
				continue;
			printf("  %-10s %-24s %12.3f  [%10.3f .. %10.3f]\n", clp_plan_block_name(blk),
			       fig_names[f], s->median * 1e3, s->min * 1e3, s->max * 1e3);
		}
		if (clp_plan_stage_mem(m, &m->cfg, range[blk][0], range[blk][1], 0, 0, &mem) ==
		    CLP_OK)
			printf("  %-10s memory: parameters %.1f MiB (+ gradients, AdamW 2x, 16-bit "
			       "copy %.1f MiB), activations %.1f MiB per micro-batch, message %.2f "
			       "MiB, workspace %.1f MiB\n", clp_plan_block_name(blk),
			       mem.param_bytes / 1048576.0, mem.copy_bytes / 1048576.0,
			       mem.act_bytes / 1048576.0, mem.out_bytes / 1048576.0,
			       mem.work_bytes / 1048576.0);
	}
}

/* The packed GEMM's kept packs of the stage (clp_model_stage_pack_mem) on the device sel names,
 * with the tuning table's entry for it and the cap: 0 and a note in why when there is none. */
static int64_t pack_bytes(const clp_plan_model *m, const char *sel, int64_t *transient,
			  char *why, size_t n)
{
	clp_cl_devinfo *devs = NULL;
	clp_cl_selection cs;
	clp_gemm_tuning t;
	clp_model_pack_shape ps;
	int nd = 0;
	int64_t kept = 0;
	size_t cap;

	*transient = 0;
	snprintf(why, n, "no OpenCL device to look the GEMM up for");
	if (clp_cl_devices(&devs, &nd) != CLP_OK || nd == 0 ||
	    clp_cl_select(devs, nd, sel, &cs) != CLP_OK ||
	    clp_gemm_tuning_lookup(&devs[cs.index], CLP_GEMM_AUTO, &t) != CLP_OK) {
		clp_error_clear();
		free(devs);
		return 0;
	}
	clp_gemm_pack_shape(&t, &ps.nr, &ps.kch, &ps.direct_a);
	cap = clp_gemm_keep_limit(&devs[cs.index]);
	if (ps.nr && cap &&
	    clp_model_stage_pack_mem(&m->cfg, 0, m->cfg.n_layer + 1, m->batch, m->seq, 1, &ps,
				     &kept, transient) != CLP_OK) {
		clp_error_clear();
		kept = *transient = 0;
	}
	if (!cap)
		ps.nr = 0;
	if (kept + *transient > (int64_t)cap) { /* the cache keeps no more than its cap */
		kept = kept > (int64_t)cap ? (int64_t)cap : kept;
		*transient = (int64_t)cap - kept;
	}
	snprintf(why, n, "the %s GEMM on %.60s%s", clp_gemm_backend_name(t.backend),
		 devs[cs.index].name, !ps.nr ? ": keeps none" : "");
	free(devs);
	return kept;
}

/* --memory: one stage of the whole model with one micro-batch slot, as a one-device run
 * allocates it (the model tests/plan/test_plan_mem.c holds equal to real stages), and the
 * GEMM's kept packs of its weights on the device (--device, else the default one). */
static clp_status print_memory(const clp_plan_model *m, int recompute, const char *sel)
{
	clp_model_mem mem;
	int64_t total, packs, ptr;
	char why[160];

	CLP_TRY(clp_plan_stage_mem(m, &m->cfg, 0, m->cfg.n_layer + 1, 0, recompute, &mem));
	packs = pack_bytes(m, sel, &ptr, why, sizeof(why));
	total = mem.param_bytes + mem.grad_bytes + mem.copy_bytes + mem.opt_bytes +
		mem.act_bytes + mem.work_bytes + packs + ptr;
	printf("memory of %s, %d layers, micro-batch %zu x %zu, %s%s, one stage:\n",
	       clp_preset_name(m->cfg.preset), m->cfg.n_layer, m->batch, m->seq,
	       clp_dtype_name(m->precision), recompute ? ", recomputation" : "");
	printf("  parameters     %14lld bytes (fp32 masters)\n", (long long)mem.param_bytes);
	printf("  gradients      %14lld bytes (%s)\n", (long long)mem.grad_bytes,
	       mem.grad_bytes == mem.param_bytes ? "every parameter trained"
						  : "the trained tensors: LoRA, train.freeze");
	printf("  16-bit copy    %14lld bytes\n", (long long)mem.copy_bytes);
	if (mem.own_bytes)
		printf("  optimizer      %14lld bytes (AdamW's two moments %lld, the optimizer's own "
		       "state and scratch %lld)\n", (long long)mem.opt_bytes,
		       (long long)(mem.opt_bytes - mem.own_bytes), (long long)mem.own_bytes);
	else
		printf("  optimizer      %14lld bytes (AdamW's two moments)\n",
		       (long long)mem.opt_bytes);
	printf("  activations    %14lld bytes per micro-batch slot (kept from forward to "
	       "backward)\n", (long long)mem.act_bytes);
	printf("  message        %14lld bytes (a stage's output, and its gradient)\n",
	       (long long)mem.out_bytes);
	printf("  workspace      %14lld bytes (backward temporaries, tables)\n",
	       (long long)mem.work_bytes);
	printf("  GEMM packs     %14lld bytes (the weights' kept strips, %s; + %lld during the "
	       "loss backward; CLPIPE_GEMM_KEEP_PACKS=0 keeps none)\n", (long long)packs, why,
	       (long long)ptr);
	printf("  total          %14lld bytes (%.1f MiB, one slot)\n", (long long)total,
	       (double)total / 1048576.0);
	return CLP_OK;
}

/* With --layers / --stages: the per-stage table of a 1F1B pipeline with that split. */
static clp_status stage_table(const clp_costs *blocks, const clp_plan_model *m,
			      const clp_cfg_ints *layers, int recompute, clp_costs **out)
{
	clp_plan p = {0};
	clp_sched *s = NULL;
	clp_status st;
	int sum = 0;

	CLP_TRY(clp_plan_init(&p, CLP_SCHED_1F1B, layers->n, 1, 1, m->micro_batches));
	for (int i = 0; i < layers->n; i++) {
		p.layers[i] = (int)layers->v[i];
		sum += p.layers[i];
	}
	st = sum == m->cfg.n_layer ? CLP_OK
				   : clp_error(CLP_ERR_INVALID, "--layers adds up to %d layers, the "
					       "model has %d", sum, m->cfg.n_layer);
	if (st == CLP_OK)
		st = clp_plan_schedule(&p, m, &s);
	if (st == CLP_OK)
		st = clp_plan_stage_costs(blocks, m, s, 0, recompute, 0, out);
	clp_sched_free(s);
	clp_plan_clear(&p);
	return st;
}

int cmd_bench_model(int argc, char **argv)
{
	clp_train_config cfg;
	clp_plan_model m;
	bm b;
	const char *devices = NULL, *kinds = NULL, *json = NULL, *lay = NULL;
	char sel[64][32], kind[64][CLP_NAME_MAX];
	int nsel = 0, nkind = 0, all = 0, quiet = 0, stages = 0, rc = 0, memory = 0;
	dev_result *res = NULL;
	clp_costs *blocks = NULL, *out = NULL;
	clp_cfg_ints layers = {0};
	clp_status s;

	memset(&b, 0, sizeof(b));
	b.repeats = 5, b.warmup = 1, b.rng = 88172645463325252ULL;
	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			help();
			return 0;
		}
	clp_cfg_defaults(&clp_train_schema, &cfg);
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--model") &&
		    (s = clp_cfg_load_file(&clp_train_schema, &cfg, argv[i + 1])) != CLP_OK)
			return cli_fail("bench", s);
	if ((s = clp_cfg_args(&clp_train_schema, &cfg, &argc, argv)) != CLP_OK)
		return cli_fail("bench", s);
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		int got;

		if (!strcmp(argv[i], "--all")) {
			all = 1;
		} else if (!strcmp(argv[i], "--quiet")) {
			quiet = 1;
		} else if (!strcmp(argv[i], "--memory")) {
			memory = 1;
		} else if ((got = cli_value(argc, argv, &i, "--model", &v)) != 0) {
			if (got < 0)
				return cli_usage_error("bench", "--model needs a config file");
		} else if ((got = cli_value(argc, argv, &i, "--device", &devices)) != 0 ||
			   (got = cli_value(argc, argv, &i, "--kind", &kinds)) != 0 ||
			   (got = cli_value(argc, argv, &i, "--json", &json)) != 0 ||
			   (got = cli_value(argc, argv, &i, "--layers", &lay)) != 0) {
			if (got < 0)
				return cli_usage_error("bench", "%s needs a value", argv[i]);
		} else {
			const char *num[] = {"--repeats", "--warmup", "--stages"};
			int *dst[] = {&b.repeats, &b.warmup, &stages}, k = 0;
			char *end;
			long n;

			for (; k < 3; k++)
				if ((got = cli_value(argc, argv, &i, num[k], &v)) != 0)
					break;
			if (k == 3)
				return cli_usage_error("bench", "unknown option '%s' (with --model)",
						       argv[i]);
			n = got > 0 ? strtol(v, &end, 10) : -1;
			if (got < 0 || *end || n < (k == 1 ? 0 : 1) || n > 4096)
				return cli_usage_error("bench", "%s needs a number", num[k]);
			*dst[k] = (int)n;
		}
	}
	if (all && devices)
		return cli_usage_error("bench", "--all and --device exclude each other");
	if (lay && stages)
		return cli_usage_error("bench", "--layers and --stages exclude each other");
	if (lay && lay[0] != '[') { /* 3,3,2 as well as [3, 3, 2] */
		static char wrapped[600];

		snprintf(wrapped, sizeof(wrapped), "[%.590s]", lay);
		lay = wrapped;
	}
	if (lay && (s = clp_cfg_set(&clp_train_schema, &cfg, "pipeline.layers", lay,
				    "--layers")) != CLP_OK)
		return cli_usage_error("bench", "--layers: expected [N, N, ..]: %s",
				       clp_last_error());
	if ((s = clp_plan_model_from_config(&cfg, &m)) != CLP_OK)
		return cli_fail("bench", s);
	if (memory) {
		s = print_memory(&m, cfg.train.recompute, devices);
		return s == CLP_OK ? 0 : cli_fail("bench", s);
	}
	layers = cfg.pipeline.layers;
	if (stages) {
		if (stages > m.cfg.n_layer || stages > CLP_CFG_MAX_INTS)
			return cli_usage_error("bench", "--stages %d for %d layers", stages,
					       m.cfg.n_layer);
		layers.n = stages;
		for (int i = 0; i < stages; i++)
			layers.v[i] = m.cfg.n_layer / stages + (i < m.cfg.n_layer % stages);
	} else if (!lay) {
		layers.n = 0;
	}
	{
		long sum = 0;

		for (int i = 0; i < layers.n; i++)
			sum += layers.v[i] > 0 ? layers.v[i] : -1000000;
		if (layers.n && sum != m.cfg.n_layer)
			return cli_usage_error("bench", "--layers: %d stages of %ld layers in all, each "
					       ">= 1; the model has %d", layers.n, sum, m.cfg.n_layer);
	}
	if (all) {
		clp_cl_devinfo *devs = NULL;
		int n = 0;

		if ((s = clp_cl_devices(&devs, &n)) != CLP_OK)
			return cli_fail("bench", s);
		for (int i = 0; i < n && i < 64; i++)
			snprintf(sel[nsel++], 32, "%d", i);
		free(devs);
	} else {
		char buf[512], *save = NULL;

		snprintf(buf, sizeof(buf), "%s", devices ? devices : "");
		for (char *t = strtok_r(buf, ",", &save); t && nsel < 64; t = strtok_r(NULL, ",", &save))
			snprintf(sel[nsel++], 32, "%s", t);
		if (nsel == 0)
			sel[nsel++][0] = '\0';
	}
	if (kinds) {
		char buf[1024], *save = NULL;

		snprintf(buf, sizeof(buf), "%s", kinds);
		for (char *t = strtok_r(buf, ",", &save); t && nkind < 64; t = strtok_r(NULL, ",", &save))
			snprintf(kind[nkind++], CLP_NAME_MAX, "%.*s", CLP_NAME_MAX - 1, t);
		if (nkind != nsel)
			return cli_usage_error("bench", "--kind names %d kinds for %d devices", nkind,
					       nsel);
	}
	b.m = &m;
	b.tok = malloc(m.batch * m.seq * sizeof(int32_t));
	b.types = calloc(m.batch * m.seq, sizeof(int32_t));
	b.tgt = malloc(m.batch * m.seq * sizeof(int32_t));
	res = calloc((size_t)nsel, sizeof(*res));
	s = b.tok && b.types && b.tgt && res ? CLP_OK
					     : clp_error(CLP_ERR_NOMEM, "bench: out of host memory");
	if (s == CLP_OK) {
		rnd_ids(b.tok, m.batch * m.seq, m.cfg.vocab, 1);
		rnd_ids(b.tgt, m.batch * m.seq, m.cfg.vocab, 2);
	}
	for (int i = 0; s == CLP_OK && i < nsel; i++) {
		s = measure_device(&b, sel[i], nkind ? kind[i] : NULL, quiet, &res[i]);
		if (s == CLP_OK)
			print_device(&res[i], &m);
	}
	for (int i = 0; s == CLP_OK && i < nsel; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(res[i].kind, res[j].kind))
				s = clp_error(CLP_ERR_INVALID, "devices %d and %d are both of kind "
					      "\"%s\": name them apart with --kind", j, i,
					      res[i].kind);
	if (s == CLP_OK)
		s = block_table(&b, res, nsel, &blocks);
	if (s == CLP_OK && json) {
		if (layers.n)
			s = stage_table(blocks, &m, &layers, cfg.train.recompute, &out);
		if (s == CLP_OK)
			s = clp_costs_save(out ? out : blocks, json);
		if (s == CLP_OK)
			printf("\nwrote %s (%s)\n", json, out ? "per-stage costs for clpipe sim"
							      : "block costs for clpipe plan");
	}
	if (s != CLP_OK)
		rc = cli_fail("bench", s);
	clp_costs_free(out);
	clp_costs_free(blocks);
	free(res);
	free(b.tok);
	free(b.types);
	free(b.tgt);
	return rc;
}
