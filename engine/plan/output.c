/* A plan's outputs: the plan as JSON ("clpipe-plan": settings, predicted step, memory per rank,
 * the naive split's figures) and the training config `clpipe train` runs it with. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cl/base/json_util.h"
#include "engine/data/tokenizer.h"
#include "engine/plan/plan.h"
#include "engine/sched/gen.h"
#include "engine/train/freeze.h"
#include "engine/train/optim_kind.h"

static json_t *ints(const int *v, int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

static json_t *summary_base(const clp_plan *p);

static json_t *summary(const clp_plan *p)
{
	json_t *o = summary_base(p);

	/* what step_s is: the steady state's (the ranking's); with PipeFisher the cold first
	 * cycle and the base's beside it */
	json_object_set_new(o, "step_ranked_by", json_string(p->pipefisher ? "steady state: two "
							     "cycles less one" : "one step"));
	if (p->pipefisher) {
		json_object_set_new(o, "first_cycle_step_s", json_real(p->first_step_s));
		json_object_set_new(o, "base_step_s", json_real(p->base_step_s));
		json_object_set_new(o, "base_steady_step_s", json_real(p->base_steady_step_s));
		json_object_set_new(o, "pipefisher_phases", json_boolean(p->pf_phases));
	}
	return o;
}

static json_t *summary_base(const clp_plan *p)
{
	return json_pack("{s:s, s:i, s:i, s:i, s:i, s:b, s:b, s:b, s:i, s:o, s:f, s:f, s:f, s:b, "
			 "s:s}",
			 "schedule", clp_sched_kind_name(p->kind), "stages", p->depth, "replicas",
			 p->replicas, "chunks", p->chunks, "micro_batches", p->microbatches,
			 "recompute", p->recompute, "pipefisher", p->pipefisher,
			 "pipefisher_split", p->pipefisher && p->pf_split, "kfac_interval",
			 p->kfac_K, "layers", ints(p->layers, p->nstages), "step_s", p->step_s,
			 "bubble", p->bubble, "utilisation", p->util, "fits", p->over_memory == 0,
			 "note", p->note);
}

clp_status clp_plan_save(const clp_plan *p, const clp_cluster *c, const clp_plan_model *m,
			 const clp_plan *naive, const char *path)
{
	json_t *root = summary(p), *ranks = json_array();
	clp_status st;

	json_object_set_new(root, "format", json_string("clpipe-plan"));
	json_object_set_new(root, "version", json_integer(1));
	json_object_set_new(root, "model_layers", json_integer(m->cfg.n_layer));
	json_object_set_new(root, "micro_batch", json_pack("{s:I, s:I}", "batch",
							   (json_int_t)m->batch, "seq",
							   (json_int_t)m->seq));
	json_object_set_new(root, "evaluations", json_integer(p->evaluations));
	for (int r = 0; r < p->nranks; r++) {
		const clp_device *d = &c->devices[p->device[r]];
		json_t *stages = json_array();

		/* the stages the generators put on position r mod D */
		for (int s = 0; s < p->nstages; s++) {
			int pos = r % p->depth, chim = p->kind == CLP_SCHED_CHIMERA ||
							p->kind == CLP_SCHED_CHIMERA_FD;
			int held = p->kind == CLP_SCHED_INTERLEAVED ? s % p->depth == pos
				   : chim ? s == pos || s == p->depth - 1 - pos : s == pos;

			if (held)
				json_array_append_new(stages, json_integer(s));
		}
		json_array_append_new(ranks, json_pack("{s:i, s:s, s:s, s:s, s:i, s:o, s:I, s:I}",
						       "rank", r, "device", d->id, "kind", d->kind,
						       "host", c->hosts[d->host].name, "replica",
						       r / p->depth, "stages", stages, "peak_bytes",
						       (json_int_t)p->peak_bytes[r], "usable_bytes",
						       (json_int_t)p->usable_bytes[r]));
	}
	json_object_set_new(root, "ranks", ranks);
	if (naive)
		json_object_set_new(root, "naive", summary(naive));
	st = clp_json_save(path, root);
	json_decref(root);
	return st;
}

clp_status clp_plan_apply_config(const clp_plan *p, const char *layout_path,
				 clp_train_config *cfg)
{
	if (p->nstages > CLP_CFG_MAX_INTS)
		return clp_error(CLP_ERR_INVALID, "plan: %d stages; pipeline.layers holds at most %d",
				 p->nstages, CLP_CFG_MAX_INTS);
	if (layout_path && strlen(layout_path) >= sizeof(cfg->pipeline.layout))
		return clp_error(CLP_ERR_INVALID, "plan: layout path too long: %s", layout_path);
	snprintf(cfg->pipeline.schedule, sizeof(cfg->pipeline.schedule), "%s",
		 clp_sched_kind_name(p->kind));
	cfg->pipeline.stages = p->depth;
	cfg->pipeline.replicas = p->replicas;
	cfg->pipeline.chunks = p->chunks;
	cfg->pipeline.layers.n = p->nstages;
	for (int s = 0; s < p->nstages; s++)
		cfg->pipeline.layers.v[s] = p->layers[s];
	snprintf(cfg->pipeline.layout, sizeof(cfg->pipeline.layout), "%s",
		 layout_path ? layout_path : "");
	cfg->train.micro_batches = p->microbatches;
	cfg->train.recompute = p->recompute;
	cfg->pipeline.pipefisher = p->pipefisher > 0; /* the executor runs the plan's cycle */
	if (p->pipefisher && p->kfac_K > 0)
		cfg->kfac.interval = cfg->shampoo.interval = cfg->soap.frequency = p->kfac_K;
	if (p->pipefisher && p->pf_split)
		cfg->pipeline.pipefisher = cfg->pipeline.pipefisher_split = 1;
	return CLP_OK;
}

clp_status clp_plan_model_from_config(const clp_train_config *c, clp_plan_model *m)
{
	clp_model_config *mc = &m->cfg;
	clp_optim_kind kind;

	memset(m, 0, sizeof(*m));
	CLP_TRY(clp_preset_parse(c->model.preset, &mc->preset));
	mc->n_layer = (int)c->model.n_layer;
	mc->d_model = (int)c->model.d_model;
	mc->n_head = (int)c->model.n_head;
	mc->n_kv_head = (int)c->model.n_kv_head;
	mc->d_ff = (int)c->model.d_ff;
	mc->ctx = (int)c->model.ctx;
	mc->vocab = (int)c->model.vocab;
	if (!mc->vocab && (c->data.tokenizer_path[0] || !strcmp(c->data.tokenizer, "hf"))) {
		clp_tok *t = NULL; /* a Hugging Face tokenizer: its size, read from the files */

		CLP_TRY(clp_tok_open(&t, c->data.tokenizer_path));
		mc->vocab = clp_tok_vocab_size(t);
		clp_tok_free(t);
	}
	if (!mc->vocab) /* the tokenizer's: bytes and specials, or GPT-2's BPE */
		mc->vocab = !strcmp(c->data.tokenizer, "gpt2") ? 50257
			    : 256 + (mc->preset == CLP_PRESET_BERT ? 5 : 1);
	mc->rope_theta = (float)c->model.rope_theta;
	mc->dropout = (float)c->model.dropout;
	mc->lora_r = (int)c->model.lora_r; /* LoRA: the base counts as weights only */
	mc->lora_alpha = (float)c->model.lora_alpha;
	mc->lora_dropout = (float)c->model.lora_dropout;
	if (mc->lora_r > 0)
		CLP_TRY(clp_train_lora_mask(mc, c->model.lora_targets, &mc->lora_mask));
	snprintf(m->freeze, sizeof(m->freeze), "%s", c->train.freeze);
	CLP_TRY(clp_model_config_resolve(mc));
	m->batch = (size_t)c->train.batch;
	m->seq = (size_t)(c->train.seq ? c->train.seq : mc->ctx);
	if (m->seq > (size_t)mc->ctx)
		return clp_error(CLP_ERR_INVALID, "train.seq = %zu is longer than model.ctx = %d",
				 m->seq, mc->ctx);
	m->micro_batches = (int)(c->train.micro_batches * c->pipeline.replicas);
	CLP_TRY(clp_train_optim_kind(c, &kind));
	m->kfac = clp_optim_info_of(kind)->curvature; /* K-FAC's work: its memory, PipeFisher */
	m->kfac_interval = (int)c->kfac.interval;
	m->shampoo = kind == CLP_OPTIM_SHAMPOO;
	m->shampoo_iters = (int)c->shampoo.iters;
	m->soap = kind == CLP_OPTIM_SOAP;
	m->muon_delay = kind == CLP_OPTIM_MUON && c->muon.delay;
	m->muon_ns_steps = (int)c->muon.ns_steps;
	m->opt_own_bytes = clp_optim_info_of(kind)->own_bytes;
	if (clp_optim_info_of(kind)->layer_work)
		m->opt_layer_work = clp_optim_info_of(kind)->layer_work(c, mc, m->batch * m->seq);
	CLP_TRY(clp_costs_precision_parse(c->train.precision, "train.precision", &m->precision));
	return CLP_OK;
}
