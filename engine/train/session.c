/* Opening and closing a session (see session.h): tokenizer, model config, data, device,
 * schedule, executor or sampling stage, and the checkpoint it starts from. Checkpoints are in
 * session_ckpt.c, the step loop and evaluation in session_train.c. */
#include "engine/train/session_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/warmup.h"
#include "cl/base/durable.h"
#include "engine/scenario/layout.h"
#include "engine/sched/gen.h"
#include "engine/pass/validate.h"
#include "engine/train/hf.h"
#include "topology/bind.h"
#include "topology/rank_device.h"

/* ---- tokenizer, data, model ------------------------------------------------------------------ */

static clp_status open_tokenizer(clp_session *s)
{
	const clp_train_config *c = &s->cfg;
	int hf = c->data.tokenizer_path[0] || !strcmp(c->data.tokenizer, "hf");

	if (hf) {
		if (!strcmp(c->data.tokenizer, "gpt2"))
			return clp_error(CLP_ERR_INVALID, "data.tokenizer = \"gpt2\" and "
					 "data.tokenizer_path = \"%s\": give one tokenizer",
					 c->data.tokenizer_path);
		if (!c->data.tokenizer_path[0])
			return clp_error(CLP_ERR_INVALID, "data.tokenizer = \"hf\" needs "
					 "data.tokenizer_path (a model directory or tokenizer file)");
		CLP_TRY(clp_tok_open(&s->tok, c->data.tokenizer_path));
		snprintf(s->cfg.data.tokenizer, sizeof(s->cfg.data.tokenizer), "hf");
	} else if (!strcmp(c->data.tokenizer, "gpt2")) {
		if (!c->data.bpe_vocab[0] || !c->data.bpe_merges[0])
			return clp_error(CLP_ERR_INVALID, "data.tokenizer = \"gpt2\" needs "
					 "data.bpe_vocab and data.bpe_merges (vocab.json, merges.txt)");
		CLP_TRY(clp_tok_gpt2_load(&s->tok, c->data.bpe_vocab, c->data.bpe_merges));
	} else if (s->bert) {
		CLP_TRY(clp_tok_byte_create(&s->tok, clp_tok_specials_bert, clp_tok_specials_bert_n));
	} else {
		CLP_TRY(clp_tok_byte_create(&s->tok, clp_tok_specials_gpt, clp_tok_specials_gpt_n));
	}
	s->byte_level = !strcmp(clp_tok_kind(s->tok), "byte");
	if (s->bert) { /* masking never picks nor draws the tokenizer's role tokens */
		static const clp_tok_role roles[] = {CLP_TOK_PAD, CLP_TOK_CLS, CLP_TOK_SEP,
						     CLP_TOK_MASK, CLP_TOK_UNK, CLP_TOK_BOS,
						     CLP_TOK_EOS};

		for (int i = 0; i < 7; i++) {
			int32_t id = clp_tok_role_id(s->tok, roles[i]);
			int dup = 0;

			for (int k = 0; k < s->nspecial; k++)
				dup |= s->specials[k] == id;
			if (id >= 0 && !dup)
				s->specials[s->nspecial++] = id;
		}
		s->mask_id = clp_tok_role_id(s->tok, CLP_TOK_MASK);
		if (s->mask_id < 0)
			return clp_error(CLP_ERR_INVALID, "bert needs a [MASK] token; the %s tokenizer "
					 "%s has none", clp_tok_kind(s->tok), clp_tok_path(s->tok));
	}
	return CLP_OK;
}

static clp_status model_config(clp_session *s)
{
	const clp_train_config *c = &s->cfg;
	clp_model_config *m = &s->m;
	int tv = clp_tok_vocab_size(s->tok);

	memset(m, 0, sizeof(*m));
	CLP_TRY(clp_preset_parse(c->model.preset, &m->preset));
	m->n_layer = (int)c->model.n_layer;
	m->d_model = (int)c->model.d_model;
	m->n_head = (int)c->model.n_head;
	m->n_kv_head = (int)c->model.n_kv_head;
	m->d_ff = (int)c->model.d_ff;
	m->vocab = c->model.vocab ? (int)c->model.vocab : tv;
	m->ctx = (int)c->model.ctx;
	if (c->model.norm_eps == 0) /* the preset's default, kept as a decimal in the config */
		s->cfg.model.norm_eps = m->preset == CLP_PRESET_GPT2 ? 1e-5
					: m->preset == CLP_PRESET_LLAMA ? 1e-6 : 1e-12;
	m->norm_eps = (float)s->cfg.model.norm_eps;
	m->rope_theta = (float)c->model.rope_theta;
	m->dropout = (float)c->model.dropout;
	m->tied = c->model.tie_embeddings;
	m->lora_r = (int)c->model.lora_r;
	m->lora_alpha = (float)c->model.lora_alpha;
	/* LoRA dropout is training's (PEFT's): eval and sample run the adapters whole */
	m->lora_dropout = s->mode == CLP_SESSION_TRAIN ? (float)c->model.lora_dropout : 0.0f;
	if (m->lora_r > 0)
		CLP_TRY(sess_lora_mask(m, c->model.lora_targets, &m->lora_mask));
	if (m->vocab < tv)
		return clp_error(CLP_ERR_INVALID, "model.vocab = %d is smaller than the tokenizer's "
				 "%d symbols", m->vocab, tv);
	CLP_TRY(clp_model_config_resolve(m));
	/* write back what the presets filled in, so the printed config is the one in effect */
	s->cfg.model.vocab = m->vocab;
	s->cfg.model.n_kv_head = m->n_kv_head;
	s->cfg.model.d_ff = m->d_ff;
	if (!s->cfg.train.seq)
		s->cfg.train.seq = m->ctx;
	if (s->cfg.train.seq > m->ctx)
		return clp_error(CLP_ERR_INVALID, "train.seq = %ld is longer than model.ctx = %d",
				 s->cfg.train.seq, m->ctx);
	return CLP_OK;
}

static clp_status open_data(clp_session *s)
{
	const clp_train_config *c = &s->cfg;
	clp_data_opts o = {
		.seq_len = (int)c->train.seq,
		.val_frac = c->data.val_fraction,
		.seed = (uint64_t)c->train.seed,
		.shuffle = c->data.shuffle,
		.vocab_size = s->m.vocab,
	};

	if (!c->data.path[0])
		return clp_error(CLP_ERR_INVALID, "data.path is empty: name a text file (or shards "
				 "with data.format = \"shards\")");
	if (!strcmp(c->data.format, "shards"))
		CLP_TRY(clp_dataset_open_shards(&s->ds, c->data.path, c->data.val_path, &o));
	else
		CLP_TRY(clp_dataset_open_text(&s->ds, c->data.path, s->tok, &o));
	if (clp_dataset_nseq(s->ds, CLP_SPLIT_TRAIN) == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: too short for one training sequence of %ld "
				 "tokens", c->data.path, c->train.seq);
	if (clp_dataset_nseq(s->ds, CLP_SPLIT_VAL) == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: no validation sequence of %ld tokens (raise "
				 "data.val_fraction or give data.val_path)", c->data.path,
				 c->train.seq);
	return CLP_OK;
}

/* Bytes per token and the unigram entropy of the training split (up to 16M tokens). */
static clp_status baseline(clp_session *s)
{
	uint64_t nseq = clp_dataset_nseq(s->ds, CLP_SPLIT_TRAIN), total = 0, bytes = 0;
	size_t V = (size_t)s->m.vocab, T = (size_t)s->cfg.train.seq;
	uint64_t *count = calloc(V, sizeof(*count));
	int32_t *seq = malloc((T + 1) * sizeof(*seq));
	double h = 0;

	if (!count || !seq) {
		free(count);
		free(seq);
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	}
	for (uint64_t i = 0; i < nseq && total < (16u << 20); i++) {
		CLP_TRY(clp_dataset_seq(s->ds, CLP_SPLIT_TRAIN, i, seq));
		for (size_t t = 0; t < T; t++) { /* token T is the next sequence's first */
			const char *b;
			size_t len = 0;

			count[seq[t]]++;
			total++;
			if (clp_tok_token(s->tok, seq[t], &b, &len) == CLP_OK)
				bytes += len;
		}
	}
	for (size_t v = 0; v < V; v++)
		if (count[v])
			h -= (double)count[v] / (double)total * log2((double)count[v] / (double)total);
	s->bytes_per_token = total && bytes ? (double)bytes / (double)total : 1.0;
	s->baseline_bpb = h / s->bytes_per_token;
	free(count);
	free(seq);
	return CLP_OK;
}

clp_status sess_check_mode(const clp_session *s, int a, int b, const char *call)
{
	static const char *const names[] = {"training", "evaluation", "sampling"};

	if (!s)
		return clp_error(CLP_ERR_INVALID, "%s: no session", call);
	if ((int)s->mode == a || (int)s->mode == b)
		return CLP_OK;
	return clp_error(CLP_ERR_STATE, "%s: the session was opened for %s", call,
			 names[s->mode]);
}

clp_dtype sess_precision(const clp_train_config *c)
{
	return !strcmp(c->train.precision, "bf16")   ? CLP_BF16
	       : !strcmp(c->train.precision, "fp16") ? CLP_F16
						     : CLP_F32;
}

int sess_rank(const clp_session *s)
{
	return s->comm ? clp_comm_rank(s->comm) : 0;
}

/* ---- open and close --------------------------------------------------------------------------- */

/* The steps of sess_make_schedule, returning at the first failure (*sched freed by the caller). */
static clp_status sched_steps(const clp_session *s, const clp_train_config *c, int nranks,
			      clp_sched **sched)
{
	clp_gen_opts o;
	const clp_cfg_ints *lay = &c->pipeline.layers;
	int train = s->mode == CLP_SESSION_TRAIN;
	clp_status st;

	clp_gen_opts_default(&o);
	o.kind = train ? clp_sched_kind_parse(c->pipeline.schedule) : CLP_SCHED_GPIPE;
	o.depth = train ? (int)c->pipeline.stages : 1;
	o.replicas = train ? (int)c->pipeline.replicas : 1;
	o.chunks = train ? (int)c->pipeline.chunks : 1;
	o.microbatches = s->M;
	o.layers = s->m.n_layer;
	o.opt_step = 1;
	o.tied_embedding = s->m.tied;
	o.grad_norm = 1;
	o.loss_reduce = 0;
	if (o.kind < 0)
		return clp_error(CLP_ERR_INVALID, "pipeline.schedule = \"%s\": unknown",
				 c->pipeline.schedule);
	st = clp_sched_generate(sched, &o);
	if (st != CLP_OK)
		return clp_error_context(st, "pipeline (schedule %s, %ld stages, %ld replicas, %d "
					 "micro-batches): ", c->pipeline.schedule, c->pipeline.stages,
					 c->pipeline.replicas, s->M);
	if (train && lay->n) {
		int sum = 0;

		if (lay->n != (*sched)->nstages)
			return clp_error(CLP_ERR_INVALID, "pipeline.layers has %d entries for %d stages",
					 lay->n, (*sched)->nstages);
		for (int i = 0; i < lay->n; i++) {
			(*sched)->stages[i].first_layer = sum;
			(*sched)->stages[i].nlayers = (int)lay->v[i];
			sum += (int)lay->v[i];
		}
		if (sum != s->m.n_layer)
			return clp_error(CLP_ERR_INVALID, "pipeline.layers adds up to %d layers, the "
					 "model has model.n_layer = %d", sum, s->m.n_layer);
	}
	if ((*sched)->nranks != nranks)
		return clp_error(CLP_ERR_INVALID, "pipeline: %ld stages x %ld replicas need %d ranks; "
				 "this job has %d (mpirun -np %d)", c->pipeline.stages,
				 c->pipeline.replicas, (*sched)->nranks, nranks,
				 (*sched)->nranks);
	if (train && c->pipeline.layout[0]) { /* the plan's stages are the schedule's */
		clp_layout *l = NULL;

		st = clp_layout_load(c->pipeline.layout, &l);
		if (st == CLP_OK)
			st = clp_layout_check(l, *sched, c->pipeline.layout);
		clp_layout_free(l);
		CLP_TRY(st);
	}
	return clp_sched_validate(*sched, 1);
}

/* The early part of c's optimizer (clp_optim_info.prep) placed in a training schedule. */
static clp_status sched_prep(const clp_train_config *c, clp_sched *sched)
{
	const clp_optim_info *oi;
	clp_optim_kind k;

	CLP_TRY(clp_train_optim_kind(c, &k));
	oi = clp_optim_info_of(k);
	if (!oi || !oi->prep || !c->pipeline.optim_prep)
		return CLP_OK;
	/* the delayed Muon's work needs nothing of its step: where the rank first waits, or
	 * where the PipeFisher pass puts its items (session_pf.c) */
	if (k == CLP_OPTIM_MUON && c->muon.delay && c->pipeline.pipefisher)
		return CLP_OK;
	if (k == CLP_OPTIM_MUON && c->muon.delay)
		CLP_TRY(clp_sched_place_prep_delayed(sched, NULL));
	else
		CLP_TRY(clp_sched_place_prep(sched, NULL));
	return clp_sched_validate(sched, 1);
}

/* The schedule: the configured pipeline (of config c, over nranks ranks) for training, one
 * stage for evaluation. */
clp_status sess_make_schedule(const clp_session *s, const clp_train_config *c, int nranks,
			      clp_sched **out)
{
	clp_sched *sched = NULL;
	clp_status st = sched_steps(s, c, nranks, &sched);

	if (st == CLP_OK && s->mode == CLP_SESSION_TRAIN)
		st = sched_prep(c, sched);

	if (st != CLP_OK)
		clp_sched_free(sched);
	else
		*out = sched;
	return st;
}

/* Host names match when equal, or when one is the other's first label ("n1", "n1.lab"). */
static int same_host(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	return !strcmp(a, b) || (la < lb && !strncmp(a, b, la) && b[la] == '.') ||
	       (lb < la && !strncmp(a, b, lb) && a[lb] == '.');
}

/* pipeline.layout (clpipe plan): this rank's device "host:selector" (or a bare selector) as the
 * device policy; the host part must be this rank's host. */
static clp_status layout_selector(clp_session *s, char *sel, size_t n)
{
	const char *path = s->cfg.pipeline.layout, *id, *colon;
	int r = clp_comm_rank(s->comm);
	clp_layout *l = NULL;
	clp_status st = clp_layout_load(path, &l);

	if (st == CLP_OK && l->nranks != clp_comm_size(s->comm))
		st = clp_error(CLP_ERR_INVALID, "pipeline.layout %s: %d ranks; this job has %d",
			       path, l->nranks, clp_comm_size(s->comm));
	if (st == CLP_OK) {
		id = l->ranks[r].device_id;
		colon = strrchr(id, ':');
		if (colon) {
			char host[CLP_NAME_MAX];

			snprintf(host, sizeof(host), "%.*s", (int)(colon - id), id);
			if (!same_host(host, clp_comm_host(s->comm)))
				st = clp_error(CLP_ERR_INVALID, "pipeline.layout %s: rank %d runs on "
					       "host %s, the layout puts it on %s (start the ranks "
					       "in the layout's host order)", path, r,
					       clp_comm_host(s->comm), id);
		}
		snprintf(sel, n, "%s", colon ? colon + 1 : id);
	}
	clp_layout_free(l);
	return st;
}

static clp_status open_device(clp_session *s)
{
	char sel[64] = "", note[1400], from_layout[64] = "";
	clp_topo_bind_mode bind = CLP_TOPO_BIND_AUTO;
	const char *policy = s->cfg.train.device, *env = getenv("CLPIPE_DEVICE");

	if (!policy[0] && env && *env) /* per rank under mpirun: -x CLPIPE_DEVICE=... per app */
		policy = env;
	CLP_TRY(clp_topo_bind_parse(s->cfg.pipeline.bind, &bind));
	if (s->mode == CLP_SESSION_TRAIN && s->cfg.pipeline.layout[0]) {
		CLP_TRY(layout_selector(s, from_layout, sizeof(from_layout)));
		policy = from_layout;
	}
	CLP_TRY(clp_topo_rank_device(s->comm, policy, bind, sel, sizeof(sel), note,
				     sizeof(note)));
	if (note[0])
		fprintf(stderr, "%s\n", note);
	return clp_cl_ctx_create(&s->ctx, sel[0] ? sel : NULL);
}

/* The layers eval and sample skip: sample.skip_layers, plus the layers of sample.skip_stages
 * under the stage map of pipeline.stages / pipeline.layers (as the pipeline split them). */
static clp_status apply_skips(clp_session *s, clp_stage *st)
{
	const clp_train_config *c = &s->cfg;
	int L = s->m.n_layer, D = (int)c->pipeline.stages, list[4096], n = 0;

	for (int i = 0; i < c->sample.skip_layers.n && n < 4096; i++)
		list[n++] = (int)c->sample.skip_layers.v[i];
	for (int i = 0; i < c->sample.skip_stages.n; i++) {
		int stg = (int)c->sample.skip_stages.v[i], first = 0, count;

		if (stg < 0 || stg >= D)
			return clp_error(CLP_ERR_INVALID, "sample.skip_stages: stage %d of a %d-stage "
					 "split (pipeline.stages)", stg, D);
		if (c->pipeline.layers.n == D) {
			for (int k = 0; k < stg; k++)
				first += (int)c->pipeline.layers.v[k];
			count = (int)c->pipeline.layers.v[stg];
		} else {
			first = clp_even_first(L, D, stg);
			count = clp_even_layers(L, D, stg);
		}
		for (int l = first; l < first + count && n < 4096; l++)
			list[n++] = l;
	}
	if (n && sess_rank(s) == 0) {
		fprintf(s->out, "skipping %d of %d layers:", n, L);
		for (int i = 0; i < n; i++)
			fprintf(s->out, " %d", list[i]);
		fprintf(s->out, "\n");
	}
	return clp_stage_skip_layers(st, list, n);
}

static clp_status open_model(clp_session *s)
{
	clp_exec_opts eo = {
		.B = s->B,
		.T = s->T,
		.deterministic = s->cfg.pipeline.deterministic,
		.recompute = s->cfg.train.recompute,
		.precision = s->prec,
		.frozen = s->frozen,
	};
	clp_stage_opts so = {
		.B = s->B, .T = s->T, .slots = 1, .precision = s->prec, .frozen = s->frozen};
	size_t n;

	if (s->skip) /* the path set decides the micro-batches of a step */
		CLP_TRY(sess_skip_schedule(s));
	/* the flags allow 2^16 x 2^20 x 2^40 tokens a step: refuse a product that wraps */
	if (__builtin_mul_overflow((size_t)s->R, (size_t)s->M, &n) ||
	    __builtin_mul_overflow(n, s->N, &n) || n > SIZE_MAX / (3 * sizeof(int32_t)))
		return clp_error(CLP_ERR_NOMEM, "a step of pipeline.replicas (%d) x "
				 "train.micro_batches (%d) x train.batch (%zu) x train.seq (%zu) "
				 "tokens is too many to hold", s->R, s->M, s->B, s->T);
	s->in = calloc(n, sizeof(int32_t));
	s->tg = calloc(n, sizeof(int32_t));
	s->types = calloc(n, sizeof(int32_t));
	if (!s->in || !s->tg || !s->types)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for a step's batches: %zu tokens "
				 "(pipeline.replicas %d x train.micro_batches %d x train.batch %zu x "
				 "train.seq %zu)", n, s->R, s->M, s->B, s->T);
	if (s->mode == CLP_SESSION_SAMPLE) {
		CLP_TRY(sess_check_memory(s));
		CLP_TRY(clp_stage_create(&s->st, s->ctx, &s->m, 0, clp_model_nblocks(&s->m) - 1,
					 &so));
		CLP_TRY(apply_skips(s, s->st));
		return clp_stage_init_params(s->st, (uint64_t)s->cfg.train.seed);
	}
	if (!s->sched)
		CLP_TRY(sess_make_schedule(s, &s->cfg, clp_comm_size(s->comm), &s->sched));
	if (s->mode == CLP_SESSION_TRAIN)
		CLP_TRY(sess_pf_plan(s));
	CLP_TRY(sess_check_memory(s));
	CLP_TRY(clp_exec_create(&s->ex, s->comm, s->ctx, s->sched, &s->m, &eo));
	if (s->mode == CLP_SESSION_EVAL)
		CLP_TRY(apply_skips(s, clp_exec_stage(s->ex, 0, NULL)));
	if (s->mode == CLP_SESSION_TRAIN)
		CLP_TRY(s->optim->open ? s->optim->open(s) : CLP_OK);
	if (s->mode == CLP_SESSION_TRAIN && s->prec == CLP_F16)
		CLP_TRY(clp_exec_set_loss_scale(s->ex, (float)s->cfg.train.loss_scale,
						s->cfg.train.loss_scale_window));
	/* a take-over writes every tensor (session_ft.h): the random fill would be thrown away */
	return s->no_init ? CLP_OK : clp_exec_init_params(s->ex, (uint64_t)s->cfg.train.seed);
}

/* The steps of clp_session_open, each returning at the first failure; *ck is the checkpoint an
 * eval or sample run starts from (closed by the caller). */
static clp_status open_steps(clp_session *s, clp_comm *comm, clp_ckpt **ck)
{
	enum clp_session_mode mode = s->mode;

	if (!s->comm || mode != CLP_SESSION_TRAIN) {
		if (mode != CLP_SESSION_TRAIN && comm && clp_comm_size(comm) > 1)
			return clp_error(CLP_ERR_UNSUPPORTED, "eval and sample run on one device; "
					 "start them without mpirun");
		s->own_comm = 1;
		s->comm = NULL;
		CLP_TRY(clp_comm_self(&s->comm));
	}
	/* until every rank has built its kernels, waits may be long: the deadline is armed after
	 * the start-up barrier below */
	clp_comm_set_timeout(s->comm, 3600.0 > s->cfg.pipeline.deadline
					       ? 3600.0 : s->cfg.pipeline.deadline);
	if (mode != CLP_SESSION_TRAIN && !s->cfg.sample.ckpt[0])
		return clp_error(CLP_ERR_INVALID, "no checkpoint given (--ckpt DIR or "
				 "--sample.ckpt=DIR)");
	if (mode != CLP_SESSION_TRAIN || s->cfg.train.init[0])
		CLP_TRY(sess_config_from(s, mode == CLP_SESSION_TRAIN ? s->cfg.train.init
								      : s->cfg.sample.ckpt,
					 mode == CLP_SESSION_TRAIN, ck));
	s->bert = !strcmp(s->cfg.model.preset, "bert");
	s->prec = sess_precision(&s->cfg);
	CLP_TRY(sess_optim_kind(s));
	if (mode == CLP_SESSION_TRAIN && !(s->optim->precisions & 1u << s->prec))
		return clp_error(CLP_ERR_UNSUPPORTED, "train.precision = \"%s\" with optim.name = "
				 "\"%s\": %s", clp_dtype_name(s->prec), s->cfg.optim.name,
				 s->optim->precision_why);
	s->skip = mode == CLP_SESSION_TRAIN && !strcmp(s->cfg.pipeline.schedule, "skippipe");
	if (mode == CLP_SESSION_SAMPLE && s->bert)
		return clp_error(CLP_ERR_UNSUPPORTED, "bert is an encoder (masked-LM): it does not "
				 "generate text; use clpipe eval");
	CLP_TRY(open_tokenizer(s));
	CLP_TRY(model_config(s));
	if (mode != CLP_SESSION_SAMPLE) {
		CLP_TRY(open_data(s));
		CLP_TRY(baseline(s));
	}
	CLP_TRY(open_device(s));
	s->B = mode == CLP_SESSION_SAMPLE ? 1 : (size_t)s->cfg.train.batch;
	s->T = mode == CLP_SESSION_SAMPLE ? (size_t)s->m.ctx : (size_t)s->cfg.train.seq;
	s->N = s->B * s->T;
	s->M = mode == CLP_SESSION_TRAIN ? (int)s->cfg.train.micro_batches : 1;
	s->R = mode == CLP_SESSION_TRAIN ? (int)s->cfg.pipeline.replicas : 1;
	if (*ck && mode == CLP_SESSION_TRAIN) /* train.init: what the file lacks is trained */
		CLP_TRY(sess_init_list(s, *ck, 0));
	/* before the stages: frozen tensors get no gradients (eval, sample: none has one) */
	CLP_TRY(mode == CLP_SESSION_TRAIN ? sess_freeze(s) : sess_weights_only(s));
	CLP_TRY(open_model(s));
	if (*ck && mode == CLP_SESSION_TRAIN) { /* train.init: weights only */
		CLP_TRY(sess_init_load(s, *ck));
	} else if (*ck) {
		CLP_TRY(sess_check_identity(s, *ck));
		/* a foreign file may lack the head (BertModel): initialised, and said */
		if (!clp_ckpt_meta(*ck, "config"))
			CLP_TRY(sess_load_init(s, *ck, 1));
		else
			CLP_TRY(sess_load_tensors(s, *ck, 0));
	}
	if (mode == CLP_SESSION_TRAIN && s->cfg.ckpt.resume) {
		if (!s->cfg.ckpt.dir[0])
			return clp_error(CLP_ERR_INVALID, "ckpt.resume needs ckpt.dir");
		CLP_TRY(sess_resume(s));
	}
	/* build every kernel now (PoCL takes seconds each), then start the clock on waits */
	if (mode == CLP_SESSION_TRAIN && clp_comm_size(s->comm) > 1) {
		CLP_TRY(clp_cl_warmup(s->ctx, NULL));
		CLP_TRY(clp_nn_warmup(s->ctx, NULL));
		CLP_TRY(clp_comm_barrier(s->comm, "kernels built on every rank"));
	}
	clp_comm_set_timeout(s->comm, s->cfg.pipeline.deadline);
	if (mode == CLP_SESSION_TRAIN && s->cfg.train.log[0] && sess_rank(s) == 0) {
		/* a resumed run, or a take-over of a recovery (no_init: the run goes on), appends */
		s->log = fopen(s->cfg.train.log, s->step > 0 || s->no_init ? "a" : "w");
		if (!s->log)
			return clp_error(CLP_ERR_IO, "train.log %s: cannot open for writing",
					 s->cfg.train.log);
	}
	return CLP_OK;
}

static clp_status open_as(clp_session **out, const clp_train_config *cfg,
			  enum clp_session_mode mode, clp_comm *comm, FILE *fout, int no_init)
{
	clp_session *s = calloc(1, sizeof(*s));
	clp_ckpt *ck = NULL;
	clp_status st;

	*out = NULL;
	if (!s)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	s->cfg = *cfg;
	s->mode = mode;
	s->no_init = no_init;
	s->out = fout;
	clp_session_set_logger(s, NULL, NULL);
	s->comm = comm;
	st = open_steps(s, comm, &ck);
	clp_ckpt_close(ck);
	if (st != CLP_OK) {
		clp_session_close(s);
		/* a check of one setting against another names where each was set */
		return clp_cfg_name_origins(&clp_train_schema, cfg, st);
	}
	*out = s;
	return CLP_OK;
}

clp_status clp_session_open(clp_session **out, const clp_train_config *cfg,
			    enum clp_session_mode mode, clp_comm *comm, FILE *fout)
{
	return open_as(out, cfg, mode, comm, fout, 0);
}

clp_status clp_session_open_bare(clp_session **out, const clp_train_config *cfg, clp_comm *comm,
				 FILE *fout)
{
	return open_as(out, cfg, CLP_SESSION_TRAIN, comm, fout, 1);
}

void clp_session_close(clp_session *s)
{
	if (!s)
		return;
	if (s->log)
		fclose(s->log);
	sess_report_free(s);
	clp_exec_free(s->ex);
	sess_skip_free(s);
	clp_sched_free(s->sched);
	clp_stage_free(s->st);
	clp_cl_ctx_free(s->ctx);
	clp_dataset_free(s->ds);
	clp_tok_free(s->tok);
	if (s->own_comm)
		clp_comm_free(s->comm);
	free(s->in);
	free(s->tg);
	free(s->types);
	free(s->init_fresh);
	free(s->frozen);
	free(s);
}

const clp_train_config *clp_session_config(const clp_session *s)
{
	return &s->cfg;
}

double clp_session_baseline_bpb(const clp_session *s)
{
	return s->baseline_bpb;
}
