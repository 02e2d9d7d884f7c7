/* Weights from files: the model config a checkpoint or Hugging Face directory gives (eval,
 * sample and train.init), and its tensors into the stages (resume, eval, train.init), under any
 * of the names transformers' layouts use (clp_hf_read). train.init and a foreign file in eval
 * load leniently: tensors the file lacks keep their initialisation and are listed in one line,
 * with the file's tensors the model does not use (docs/TRAINING.md "fine-tuning"). */
#include "engine/train/session_internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/train/hf.h"

/* The model.* settings (and tokenizer) of a checkpoint's stored config, each set strictly. A
 * train.init run takes the model and tokenizer only; eval and sample also its data and stage
 * map when not given. */
static clp_status from_stored(clp_session *s, clp_ckpt *c, const char *text, int train)
{
	clp_train_config base;
	char origin[CLP_CFG_ORIGIN_LEN];
	clp_status st;

	CLP_TRY(clp_cfg_defaults(&clp_train_schema, &base));
	st = clp_cfg_load_string(&clp_train_schema, &base, text, clp_ckpt_path(c));
	if (st != CLP_OK)
		return clp_error_context(st, "the config stored in the checkpoint: ");
	snprintf(origin, sizeof(origin), "%s (stored config)", clp_ckpt_path(c));
	for (int i = 0; i < clp_train_schema.nfields; i++) {
		const char *key = clp_train_schema.fields[i].key;
		char v[256];

		if (strncmp(key, "model.", 6))
			continue;
		clp_cfg_get(&clp_train_schema, &base, key, v, sizeof(v));
		CLP_TRY(clp_cfg_set_strict(&clp_train_schema, &s->cfg, key, v, origin));
	}
	if (!train) { /* the run's tokenizer, data, batch, precision (ckpt_config.c) */
		CLP_TRY(sess_inherit_run(s, &base, clp_ckpt_path(c), origin));
		if (s->cfg.pipeline.stages == 1 && s->cfg.pipeline.layers.n == 0) {
			/* the stage map the model was trained with, for sample.skip_stages */
			s->cfg.pipeline.stages = base.pipeline.stages;
			s->cfg.pipeline.layers = base.pipeline.layers;
		}
		return CLP_OK;
	}
	/* train.init: the model's tokenizer unless one is given */
	if (!strcmp(clp_cfg_origin_of(&clp_train_schema, &s->cfg, "data.tokenizer"), "default"))
		memcpy(s->cfg.data.tokenizer, base.data.tokenizer, sizeof(base.data.tokenizer));
	if (!s->cfg.data.tokenizer_path[0])
		memcpy(s->cfg.data.tokenizer_path, base.data.tokenizer_path,
		       sizeof(base.data.tokenizer_path));
	if (!s->cfg.data.bpe_vocab[0])
		memcpy(s->cfg.data.bpe_vocab, base.data.bpe_vocab, sizeof(base.data.bpe_vocab));
	if (!s->cfg.data.bpe_merges[0])
		memcpy(s->cfg.data.bpe_merges, base.data.bpe_merges, sizeof(base.data.bpe_merges));
	return CLP_OK;
}

clp_status sess_config_from(clp_session *s, const char *path, int train, clp_ckpt **cp)
{
	const char *text;
	clp_status st = clp_ckpt_open(cp, path);

	if (st != CLP_OK)
		return train ? clp_error_context(st, "train.init: ") : st;
	text = clp_ckpt_meta(*cp, "config");
	if (!text) { /* a foreign file: its config.json, else the command line, gives the model */
		int found;

		return clp_hf_config_apply(clp_ckpt_path(*cp), &s->cfg, &found);
	}
	return from_stored(s, *cp, text, train);
}

static void shape_of(const clp_tensor_desc *d, int64_t *shape)
{
	shape[0] = (int64_t)d->shape[0];
	shape[1] = (int64_t)d->shape[1];
}

/* The name the file holds a parameter under (NULL: none of its names). */
static const char *file_name(clp_ckpt *c, clp_preset p, const char *name)
{
	static _Thread_local char names[4][CLP_HF_NAME];
	int n = clp_hf_load_names(p, name, names, 4);

	for (int i = 0; i < n; i++)
		if (clp_ckpt_find(c, CLP_CKPT_MODEL, names[i]))
			return names[i];
	return NULL;
}

/* Parameters (and with optim, AdamW state) of a stage from a checkpoint, by name. lenient: a
 * tensor the file lacks keeps its initialisation (the caller has listed it). */
static clp_status load_stage(clp_stage *stage, clp_ckpt *c, clp_preset p, int optim,
			     int lenient)
{
	const clp_param_table *t = clp_stage_table(stage);
	clp_status st = CLP_OK;

	for (int i = 0; st == CLP_OK && i < t->ntensors; i++) {
		const clp_tensor_desc *d = &t->tensors[i];
		float *buf;
		int64_t shape[2];

		if (lenient && !file_name(c, p, d->name))
			continue;
		buf = malloc(d->numel * sizeof(float));
		if (!buf)
			return clp_error(CLP_ERR_NOMEM, "out of host memory loading %s", d->name);
		shape_of(d, shape);
		st = clp_hf_read(c, CLP_CKPT_MODEL, p, d->name, "", buf, d->ndim, shape);
		if (st == CLP_OK)
			st = clp_stage_write(stage, CLP_ST_PARAM, i, buf);
		/* a frozen tensor has no optimizer state (its checkpoint holds none) */
		for (int k = 1; optim && clp_stage_trained(stage, i) && st == CLP_OK && k < 3; k++) {
			st = clp_hf_read(c, CLP_CKPT_OPTIM, p, d->name,
					 k == 1 ? ".exp_avg" : ".exp_avg_sq", buf, d->ndim, shape);
			if (st == CLP_OK)
				st = clp_stage_write(stage, k == 1 ? CLP_ST_ADAM_M : CLP_ST_ADAM_V, i,
						     buf);
		}
		free(buf);
	}
	return st;
}

static clp_status load_all(clp_session *s, clp_ckpt *c, int optim, int lenient)
{
	if (s->st)
		return load_stage(s->st, c, s->m.preset, optim, lenient);
	for (int i = 0; i < clp_exec_nstages(s->ex); i++)
		CLP_TRY(load_stage(clp_exec_stage(s->ex, i, NULL), c, s->m.preset, optim,
				   lenient));
	return CLP_OK;
}

clp_status sess_load_tensors(clp_session *s, clp_ckpt *c, int optim)
{
	return load_all(s, c, optim, 0);
}

/* Append ", name" (or "name") to a list of at most cap bytes; "..." once it is full. */
static void list_add(char *list, size_t cap, size_t *len, const char *name)
{
	if (*len + strlen(name) + 8 >= cap) {
		if (*len + 5 < cap && strcmp(list + *len - 3, "..."))
			*len += (size_t)snprintf(list + *len, cap - *len, ", ...");
		return;
	}
	*len += (size_t)snprintf(list + *len, cap - *len, "%s%s", *len ? ", " : "", name);
}

/* Is role a head tensor (what a base model's file, BertModel's, does not hold)? */
static int head_role(clp_role r)
{
	return r == CLP_R_HEAD_W || r == CLP_R_HEAD_DENSE_W || r == CLP_R_HEAD_DENSE_B ||
	       r == CLP_R_HEAD_LN_W || r == CLP_R_HEAD_LN_B || r == CLP_R_HEAD_BIAS;
}

/* The whole model's tensors against the file's: *missing those the file lacks (heads_only:
 * any other missing one is an error, as a strict load gives), *unused the file's model tensors
 * that no parameter reads. Shapes are checked when the tensors are read. */
static clp_status compare(clp_session *s, clp_ckpt *c, int heads_only, char *missing,
			  char *unused, size_t cap, int *nmissing, int *nunused)
{
	clp_param_table t;
	size_t lm = 0, lu = 0;
	int nf = clp_ckpt_count(c, CLP_CKPT_MODEL);
	char *used = calloc((size_t)nf + 1, 1);
	clp_status st;

	missing[0] = unused[0] = '\0';
	*nmissing = *nunused = 0;
	if (!used)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	st = clp_param_table_build(&s->m, 0, clp_model_nblocks(&s->m) - 1, &t);
	free(s->init_fresh);
	s->init_fresh = st == CLP_OK ? calloc((size_t)t.ntensors + 1, 1) : NULL;
	if (st == CLP_OK && !s->init_fresh)
		st = clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int i = 0; st == CLP_OK && i < t.ntensors; i++) {
		const clp_tensor_desc *d = &t.tensors[i];
		const char *fn = file_name(c, s->m.preset, d->name);

		if (fn) {
			for (int k = 0; k < nf; k++)
				if (!strcmp(clp_ckpt_tensor(c, CLP_CKPT_MODEL, k)->name, fn))
					used[k] = 1;
			continue;
		}
		if (heads_only && !head_role(d->role)) /* the strict read's message */
			st = clp_hf_read(c, CLP_CKPT_MODEL, s->m.preset, d->name, "", NULL, 0, NULL);
		list_add(missing, cap, &lm, d->name);
		++*nmissing;
		s->init_fresh[i] = 1;
	}
	for (int k = 0; st == CLP_OK && k < nf; k++)
		if (!used[k]) {
			list_add(unused, cap, &lu, clp_ckpt_tensor(c, CLP_CKPT_MODEL, k)->name);
			++*nunused;
		}
	clp_param_table_free(&t);
	free(used);
	return st;
}

clp_status sess_init_list(clp_session *s, clp_ckpt *c, int heads_only)
{
	enum { CAP = 4096 };
	char *missing = malloc(CAP), *unused = malloc(CAP);
	int nm = 0, nu = 0;
	clp_status st = missing && unused ? CLP_OK
					  : clp_error(CLP_ERR_NOMEM, "out of host memory");

	if (st == CLP_OK)
		st = compare(s, c, heads_only, missing, unused, CAP, &nm, &nu);
	if (st == CLP_OK && sess_rank(s) == 0 && (s->mode == CLP_SESSION_TRAIN || nm || nu)) {
		FILE *o = s->mode == CLP_SESSION_TRAIN ? s->out : stderr; /* eval --json: stdout */

		fprintf(o, "init: weights from %s", clp_ckpt_path(c));
		if (s->mode == CLP_SESSION_TRAIN)
			fprintf(o, " (optimizer state, step and data position start fresh)");
		fprintf(o, "\n");
		if (nm)
			fprintf(o, "init: %d tensor%s not in the file, initialised: %s\n", nm,
				nm == 1 ? "" : "s", missing);
		if (nu)
			fprintf(o, "init: %d tensor%s of the file not used: %s\n", nu,
				nu == 1 ? "" : "s", unused);
		if (nm && s->mode == CLP_SESSION_EVAL)
			fprintf(o, "init: the loss is that of an untrained head\n");
	}
	free(missing);
	free(unused);
	return st;
}

clp_status sess_init_load(clp_session *s, clp_ckpt *c)
{
	return load_all(s, c, 0, 1);
}

clp_status sess_load_init(clp_session *s, clp_ckpt *c, int heads_only)
{
	CLP_TRY(sess_init_list(s, c, heads_only));
	return sess_init_load(s, c);
}
