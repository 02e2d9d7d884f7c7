/* train.freeze: parameter-name patterns (shell globs, comma-separated) whose tensors are not
 * trained; and LoRA (model.lora_*): the linears that get adapters, the base frozen. A pattern
 * matches a tensor's name as checkpoints store it (GPT-2's with and without "transformer.");
 * each pattern must match some tensor of the model. The mask (s->frozen) goes to the stages
 * as they are made (clp_stage_opts.frozen): a frozen tensor gets no gradient, no AdamW moments
 * and no weight-gradient products, and is left out of the update and the gradient norm. */
#include "engine/train/session_internal.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/linear.h"
#include "engine/train/freeze.h"
#include "engine/train/hf.h"

/* Does tensor name match one of the n patterns (each pattern's hits counted in hits)? */
static int matches(clp_preset p, const char *name, char (*pat)[256], int n, int *hits)
{
	char saved[CLP_HF_NAME];
	int any = 0;

	clp_hf_save_name(p, name, saved, sizeof(saved));
	for (int i = 0; i < n; i++)
		if (!fnmatch(pat[i], name, 0) || !fnmatch(pat[i], saved, 0)) {
			hits[i]++;
			any = 1;
		}
	return any;
}

static clp_status parse(const char *text, char (*pat)[256], int max, int *n)
{
	const char *p = text;

	*n = 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		size_t b = 0;

		while (b < len && p[b] == ' ')
			b++;
		while (len > b && p[len - 1] == ' ')
			len--;
		if (len > b) {
			if (*n == max || len - b >= 256)
				return clp_error(CLP_ERR_INVALID, "train.freeze: at most %d patterns "
						 "of at most 255 characters", max);
			snprintf(pat[(*n)++], 256, "%.*s", (int)(len - b), p + b);
		}
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	return CLP_OK;
}

static int is_lora(clp_role r)
{
	return r >= CLP_R_LORA_A && r <= CLP_R_LORA_LAST;
}

clp_status sess_lora_mask(const clp_model_config *m, const char *targets, unsigned *mask)
{
	static const clp_role w[CLP_LIN_COUNT] = {CLP_R_QKV_W, CLP_R_ATT_O_W, CLP_R_FC_W,
						  CLP_R_PROJ_W};
	char pat[16][256];
	int n, hits[16] = {0};
	clp_model_config base = *m;
	clp_param_table t;

	*mask = 0;
	CLP_TRY(parse(targets, pat, 16, &n));
	if (n == 0) {
		*mask = (1u << CLP_LIN_COUNT) - 1;
		return CLP_OK;
	}
	base.lora_r = 0;
	CLP_TRY(clp_model_config_resolve(&base));
	CLP_TRY(clp_param_table_build(&base, 1, 1, &t));
	for (int l = 0; l < CLP_LIN_COUNT; l++) {
		int u = clp_param_unit_of(&t, w[l], 1);

		for (int i = 0; u >= 0 && i < t.ntensors; i++)
			if (t.tensors[i].unit == u &&
			    (matches(m->preset, t.tensors[i].name, pat, n, hits) ||
			     matches(m->preset, t.units[u].name, pat, n, hits)))
				*mask |= 1u << l;
	}
	clp_param_table_free(&t);
	for (int i = 0; i < n; i++)
		if (!hits[i])
			return clp_error(CLP_ERR_INVALID, "model.lora_targets: \"%s\" matches no "
					 "linear weight of layer 0 (e.g. \"*%s\")", pat[i],
					 m->preset == CLP_PRESET_GPT2 ? "c_attn*"
					 : m->preset == CLP_PRESET_LLAMA ? "q_proj*" : "query*");
	return CLP_OK;
}

clp_status clp_train_lora_mask(const clp_model_config *m, const char *targets, unsigned *mask)
{
	return sess_lora_mask(m, targets, mask);
}

int clp_train_frozen(const clp_model_config *m, const char *patterns, const clp_tensor_desc *d)
{
	char (*pat)[256];
	int n = 0, hits[64] = {0}, out;

	if (m->lora_r > 0 && !is_lora(d->role))
		return 1;
	if (!patterns[0] || !(pat = calloc(64, sizeof(*pat))))
		return 0;
	out = parse(patterns, pat, 64, &n) == CLP_OK && matches(m->preset, d->name, pat, n, hits);
	free(pat);
	return out;
}

/* LoRA freezes the base: every tensor but the adapters and those train.init did not find in its
 * file (a BertModel's masked-LM head: initialised, so trained). */
static int lora_frozen(const clp_session *s, const clp_param_table *full, const char *name,
		       clp_role role)
{
	int i = clp_param_find(full, name);

	return s->m.lora_r > 0 && !is_lora(role) && !(s->init_fresh && i >= 0 && s->init_fresh[i]);
}

clp_status sess_freeze(clp_session *s)
{
	char (*pat)[256] = NULL;
	int n = 0, *hits = NULL, nfrozen = 0;
	size_t frozen = 0;
	clp_param_table t;
	clp_status st;

	if (!s->cfg.train.freeze[0] && s->m.lora_r == 0)
		return CLP_OK;
	if (s->optim->kind != CLP_OPTIM_ADAMW)
		return clp_error(CLP_ERR_UNSUPPORTED, "%s with optim.name = \"%s\": frozen "
				 "tensors are left out by AdamW only", s->cfg.train.freeze[0]
				 ? "train.freeze" : "model.lora_r (the base is frozen)",
				 s->cfg.optim.name);
	pat = calloc(64, sizeof(*pat));
	hits = calloc(64, sizeof(int));
	st = pat && hits ? parse(s->cfg.train.freeze, pat, 64, &n)
			 : clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (st == CLP_OK)
		st = clp_param_table_build(&s->m, 0, clp_model_nblocks(&s->m) - 1, &t);
	if (st != CLP_OK) {
		free(pat);
		free(hits);
		return st;
	}
	free(s->frozen);
	s->frozen = calloc((size_t)t.ntensors + 1, 1);
	if (!s->frozen)
		st = clp_error(CLP_ERR_NOMEM, "out of host memory");
	for (int i = 0; st == CLP_OK && i < t.ntensors; i++)
		if (matches(s->m.preset, t.tensors[i].name, pat, n, hits) ||
		    lora_frozen(s, &t, t.tensors[i].name, t.tensors[i].role)) {
			s->frozen[i] = 1;
			nfrozen++;
			frozen += t.tensors[i].numel;
		}
	for (int i = 0; st == CLP_OK && i < n; i++)
		if (!hits[i])
			st = clp_error(CLP_ERR_INVALID, "train.freeze: \"%s\" matches no parameter of "
				       "the model (names as checkpoints store them, e.g. \"%s\")",
				       pat[i], t.tensors[t.ntensors > 2 ? 2 : 0].name);
	if (st == CLP_OK && sess_rank(s) == 0)
		fprintf(s->out, "freeze: %d of %d tensors frozen (%zu of %zu parameters); %zu "
			"trained%s\n", nfrozen, t.ntensors, frozen, t.numel, t.numel - frozen,
			s->m.lora_r > 0 ? " (the LoRA adapters, and what train.init initialised)"
					: "");
	clp_param_table_free(&t);
	free(pat);
	free(hits);
	return st;
}

clp_status sess_all_frozen(const clp_model_config *m, unsigned char **out)
{
	clp_param_table t;

	*out = NULL;
	CLP_TRY(clp_param_table_build(m, 0, clp_model_nblocks(m) - 1, &t));
	*out = malloc((size_t)t.ntensors + 1);
	if (*out)
		memset(*out, 1, (size_t)t.ntensors + 1);
	clp_param_table_free(&t);
	return *out ? CLP_OK : clp_error(CLP_ERR_NOMEM, "out of host memory");
}

clp_status sess_weights_only(clp_session *s)
{
	free(s->frozen);
	return sess_all_frozen(&s->m, &s->frozen);
}
