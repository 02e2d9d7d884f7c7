/* A session's checkpoints (see session.h): saving (tensors, optimizer state, the stored config,
 * transformers' config.json), resuming a training run, and the model of an eval or sample run
 * from its checkpoint (identity checked, tensors loaded by name). Opening is in session.c. */
#include "engine/train/session_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "engine/train/hf.h"

static void identity(const clp_session *s, char vals[][32], clp_ckpt_kv *kv, int *n)
{
	const clp_model_config *m = &s->m;
	long v[] = {m->n_layer, m->d_model, m->n_head, m->n_kv_head, m->d_ff, m->vocab, m->ctx};
	static const char *const keys[] = {"n_layer", "d_model", "n_head", "n_kv_head", "d_ff",
					   "vocab", "ctx"};

	*n = 0;
	kv[(*n)++] = (clp_ckpt_kv){"preset", clp_preset_name(m->preset)};
	for (int i = 0; i < 7; i++) {
		snprintf(vals[i], 32, "%ld", v[i]);
		kv[(*n)++] = (clp_ckpt_kv){keys[i], vals[i]};
	}
}

/* The hash of the names the checkpoint stores (saved: clp_hf_save_name; else the table's, as
 * clpipe wrote GPT-2 before it used GPT2LMHeadModel's names). */
static uint64_t params_hash(const clp_session *s, int saved)
{
	clp_param_table t;
	clp_ckpt_param *p;
	char (*names)[CLP_HF_NAME] = NULL;
	uint64_t h = 0;

	if (clp_param_table_build(&s->m, 0, clp_model_nblocks(&s->m) - 1, &t) != CLP_OK)
		return 0;
	p = calloc((size_t)t.ntensors, sizeof(*p));
	names = calloc((size_t)t.ntensors, sizeof(*names));
	if (p && names) {
		for (int i = 0; i < t.ntensors; i++) {
			clp_hf_save_name(s->m.preset, t.tensors[i].name, names[i], CLP_HF_NAME);
			p[i].name = saved ? names[i] : t.tensors[i].name;
			p[i].ndim = t.tensors[i].ndim;
			p[i].shape[0] = (int64_t)t.tensors[i].shape[0];
			p[i].shape[1] = (int64_t)t.tensors[i].shape[1];
		}
		h = clp_ckpt_params_hash(p, t.ntensors);
	}
	free(p);
	free(names);
	clp_param_table_free(&t);
	return h;
}

/* Add the tensors this rank saves (host copies kept in *bufs until the write). */
static clp_status add_tensors(clp_session *s, clp_ckpt_writer *w, float ***bufs, int *nbufs)
{
	int cap = 0;

	*bufs = NULL;
	*nbufs = 0;
	for (int i = 0; i < clp_exec_nstages(s->ex); i++) {
		clp_stage *st = clp_exec_stage(s->ex, i, NULL);
		const clp_param_table *t = clp_stage_table(st);

		for (int k = 0; k < t->ntensors; k++) {
			const clp_tensor_desc *d = &t->tensors[k];
			static const clp_stage_what what[3] = {CLP_ST_PARAM, CLP_ST_ADAM_M,
							       CLP_ST_ADAM_V};
			static const char *const suffix[3] = {"", ".exp_avg", ".exp_avg_sq"};
			int64_t shape[2] = {(int64_t)d->shape[0], (int64_t)d->shape[1]};

			if (!clp_exec_owns(s->ex, i, k))
				continue;
			if (*nbufs + 3 > cap) {
				float **nb = realloc(*bufs, (size_t)(cap = 2 * cap + 48) * sizeof(*nb));

				if (!nb)
					return clp_error(CLP_ERR_NOMEM, "out of host memory saving");
				*bufs = nb;
			}
			/* a frozen tensor: its weights only (it has no optimizer state) */
			for (int j = 0; j < (clp_stage_trained(st, k) ? 3 : 1); j++) {
				char name[CLP_HF_NAME + 16];
				float *h = malloc(d->numel * sizeof(float));

				if (!h)
					return clp_error(CLP_ERR_NOMEM, "out of host memory saving %s",
							 d->name);
				(*bufs)[(*nbufs)++] = h;
				CLP_TRY(clp_stage_read(st, what[j], k, h));
				clp_hf_save_name(s->m.preset, d->name, name, sizeof(name));
				strncat(name, suffix[j], sizeof(name) - strlen(name) - 1);
				CLP_TRY(clp_ckpt_writer_add(w, j ? CLP_CKPT_OPTIM : CLP_CKPT_MODEL, name,
							    h, d->ndim, shape));
			}
		}
	}
	return CLP_OK;
}

/* config.json beside the model file, for transformers' from_pretrained (fsynced with the
 * directory by the checkpoint writer, before the manifest makes the checkpoint complete). */
static clp_status write_hf_config(const clp_session *s, const char *dir)
{
	int32_t eos = s->bert ? -1 : clp_tok_role_id(s->tok, CLP_TOK_EOS);
	int32_t pad = s->bert ? clp_tok_role_id(s->tok, CLP_TOK_PAD) : -1;
	char *text = clp_hf_config_json(&s->m, s->cfg.model.norm_eps, s->cfg.model.rope_theta,
					 s->cfg.model.dropout, eos, pad);
	char path[1200];
	clp_status st;

	if (!text)
		return clp_error(CLP_ERR_NOMEM, "out of host memory saving a checkpoint");
	snprintf(path, sizeof(path), "%s/%s", dir, CLP_HF_CONFIG);
	st = clp_io_write_file(path, text, strlen(text));
	free(text);
	return st;
}

/* The steps of sess_save, returning at the first failure: *w is the writer and *bufs the host
 * copies of the tensors (both freed by the caller). */
static clp_status save_steps(clp_session *s, const char *cfgtext, clp_ckpt_writer **w,
			     float ***bufs, int *nbufs)
{
	int nkv;
	char vals[8][32], pos[256], num[64];
	clp_ckpt_kv kv[8];

	CLP_TRY(clp_ckpt_writer_create(w, s->cfg.ckpt.dir, s->step, sess_rank(s),
				       clp_comm_size(s->comm)));
	identity(s, vals, kv, &nkv);
	for (int i = 0; i < nkv; i++)
		CLP_TRY(clp_ckpt_writer_identity(*w, kv[i].key, kv[i].value));
	CLP_TRY(clp_ckpt_writer_meta(*w, "config", cfgtext));
	clp_dataset_pos_str(s->ds, pos, sizeof(pos));
	CLP_TRY(clp_ckpt_writer_meta(*w, "data.pos", pos));
	snprintf(num, sizeof(num), "%ld", s->step);
	CLP_TRY(clp_ckpt_writer_meta(*w, "train.step", num));
	snprintf(num, sizeof(num), "%ld", s->applied);
	CLP_TRY(clp_ckpt_writer_meta(*w, "train.applied", num));
	if (s->m.lora_r > 0) { /* the adapters' scale, as the stage computes it */
		snprintf(num, sizeof(num), "%.9g", (double)(s->m.lora_alpha / (float)s->m.lora_r));
		CLP_TRY(clp_ckpt_writer_meta(*w, "lora.scale", num));
	}
	if (s->prec == CLP_F16) { /* the dynamic loss scale and its count of good steps */
		float scale;
		long good;

		clp_exec_loss_scale(s->ex, &scale, &good);
		snprintf(num, sizeof(num), "%.9g %ld", (double)scale, good);
		CLP_TRY(clp_ckpt_writer_meta(*w, "train.loss_scale", num));
	}
	CLP_TRY(add_tensors(s, *w, bufs, nbufs));
	if (sess_rank(s) == 0)
		CLP_TRY(write_hf_config(s, clp_ckpt_writer_dir(*w)));
	CLP_TRY(clp_exec_optim_save(s->ex, *w));
	CLP_TRY(sess_pf_save(s, *w));
	CLP_TRY(clp_ckpt_writer_write(*w));
	if (s->save_hook) /* this rank's files are durable; the manifest is not there yet */
		s->save_hook(s->save_hook_ud, s->step);
	/* every rank's files are durable before rank 0 writes the manifest */
	if (clp_comm_size(s->comm) > 1)
		CLP_TRY(clp_comm_barrier(s->comm, "checkpoint files written"));
	/* transformers reads several model files by their weight map */
	if (sess_rank(s) == 0 && clp_comm_size(s->comm) > 1)
		CLP_TRY(clp_hf_write_index(clp_ckpt_writer_dir(*w)));
	if (sess_rank(s) == 0) {
		CLP_TRY(clp_ckpt_writer_commit(*w, (int)s->cfg.ckpt.keep));
		fprintf(s->out, "checkpoint: %s\n", clp_ckpt_writer_dir(*w));
	}
	return CLP_OK;
}

clp_status sess_save(clp_session *s)
{
	clp_ckpt_writer *w = NULL;
	float **bufs = NULL;
	int nbufs = 0;
	char *cfgtext = clp_cfg_to_string(&clp_train_schema, &s->cfg);
	clp_status st;

	if (!cfgtext)
		return clp_error(CLP_ERR_NOMEM, "out of host memory saving a checkpoint");
	st = save_steps(s, cfgtext, &w, &bufs, &nbufs);
	if (st != CLP_OK)
		clp_error_context(st, "rank %d saving checkpoint of step %ld: ", sess_rank(s), s->step);
	for (int i = 0; i < nbufs; i++)
		free(bufs[i]);
	free(bufs);
	free(cfgtext);
	clp_ckpt_writer_free(w);
	return st;
}

clp_status sess_check_identity(clp_session *s, clp_ckpt *c)
{
	char vals[8][32];
	clp_ckpt_kv kv[8];
	int n;

	uint64_t h = params_hash(s, 1), old = params_hash(s, 0);
	const char *have = clp_ckpt_identity(c, "params");
	char hex[32];

	snprintf(hex, sizeof(hex), "%016" PRIx64, old);
	if (have && !strcmp(have, hex)) /* written before GPT-2 got GPT2LMHeadModel's names */
		h = old;
	if (!have) /* a model file copied out without its hash: the tensors' shapes still count */
		h = 0;
	identity(s, vals, kv, &n);
	return clp_ckpt_check_identity(c, kv, n, h);
}

/* 1 when config c runs the one-step-delayed Muon (the stages' AdamW v of its matrices hold
 * the pending direction, not a second moment). */
static int delayed_muon(const clp_train_config *c)
{
	clp_optim_kind k;

	return c->muon.delay && clp_train_optim_kind(c, &k) == CLP_OK && k == CLP_OPTIM_MUON;
}

/* The checkpoint's AdamW second moments mean what this run reads in them: with the
 * one-step-delayed Muon they hold its matrices' pending directions, so a run resumes one only
 * with muon.delay as it was saved (a stored config the schema cannot read is not compared). */
static clp_status check_delay(clp_session *s, clp_ckpt *c)
{
	const char *text = clp_ckpt_meta(c, "config");
	clp_train_config base;
	int was, now = delayed_muon(&s->cfg);

	if (!text || clp_cfg_defaults(&clp_train_schema, &base) != CLP_OK ||
	    clp_cfg_load_string(&clp_train_schema, &base, text, clp_ckpt_path(c)) != CLP_OK) {
		clp_error_clear();
		return CLP_OK;
	}
	was = delayed_muon(&base);
	if (was == now)
		return CLP_OK;
	return clp_error(CLP_ERR_INVALID, "resume: %s was saved %s the one-step-delayed Muon "
			 "(optim.name = \"%s\", muon.delay = %s) and this run has muon.delay = %s "
			 "with optim.name = \"%s\": the delayed Muon keeps its matrices' pending "
			 "directions where AdamW keeps its second moments (exp_avg_sq), so the two "
			 "cannot resume each other; set muon.delay = %s", clp_ckpt_path(c),
			 was ? "by" : "without", base.optim.name, base.muon.delay ? "true" : "false",
			 s->cfg.muon.delay ? "true" : "false", s->cfg.optim.name,
			 was ? "true (and optim.name = \"muon\")" : "false");
}

/* Resume from the open checkpoint c: notes, identity, tensors, optimizer state, data position,
 * step counts, fp16's loss scale. */
static clp_status resume_from(clp_session *s, clp_ckpt *c)
{
	const char *v;

	if (clp_ckpt_notes(c)[0] && sess_rank(s) == 0)
		fprintf(s->out, "%s", clp_ckpt_notes(c));
	CLP_TRY(sess_check_identity(s, c));
	CLP_TRY(check_delay(s, c));
	CLP_TRY(sess_load_tensors(s, c, 1));
	CLP_TRY(clp_exec_optim_load(s->ex, c));
	if ((v = clp_ckpt_meta(c, "data.pos")))
		CLP_TRY(clp_dataset_restore(s->ds, v));
	v = clp_ckpt_meta(c, "train.step");
	s->step = v ? atol(v) : clp_ckpt_step(c);
	v = clp_ckpt_meta(c, "train.applied");
	s->applied = v ? atol(v) : s->step;
	v = clp_ckpt_meta(c, "train.loss_scale");
	if (v && s->prec == CLP_F16) {
		double scale = 0;
		long good = 0;

		if (sscanf(v, "%lf %ld", &scale, &good) == 2)
			clp_exec_restore_loss_scale(s->ex, (float)scale, good);
	}
	if (sess_rank(s) == 0)
		fprintf(s->out, "resumed from %s at step %ld\n", clp_ckpt_path(c), s->step);
	return sess_pf_resumed(s);
}

clp_status sess_resume(clp_session *s)
{
	clp_ckpt *c = NULL;
	clp_status st = clp_ckpt_open_latest(&c, s->cfg.ckpt.dir);

	if (st == CLP_ERR_NOT_FOUND) {
		if (sess_rank(s) == 0)
			fprintf(s->out, "resume: no complete checkpoint under %s; starting fresh\n",
				s->cfg.ckpt.dir);
		clp_error_clear();
		return CLP_OK;
	}
	if (st != CLP_OK)
		return st;
	st = resume_from(s, c);
	clp_ckpt_close(c);
	return st;
}
