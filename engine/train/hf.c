/* Hugging Face config.json in and out, and the tensor names of every layout transformers writes
 * for GPT-2, LLaMA and BERT (see hf.h). */
#include "engine/train/hf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "cl/base/durable.h"
#include "cl/base/infile.h"

/* One model.* setting and the config.json key it comes from. kind: 'i' integer, 'f' number,
 * 'b' boolean; dflt: the class's default when the key is absent or null (NULL: required;
 * "=KEY" the value of another setting; "*4" four times d_model). */
struct hf_key {
	const char *cfg, *json;
	char kind;
	const char *dflt;
};

static const struct hf_key gpt2_keys[] = {
	{"model.n_layer", "n_layer", 'i', "12"},
	{"model.d_model", "n_embd", 'i', "768"},
	{"model.n_head", "n_head", 'i', "12"},
	{"model.n_kv_head", "n_head", 'i', "12"},
	{"model.d_ff", "n_inner", 'i', "*4"},
	{"model.vocab", "vocab_size", 'i', "50257"},
	{"model.ctx", "n_positions", 'i', "1024"},
	{"model.norm_eps", "layer_norm_epsilon", 'f', "1e-5"},
};

static const struct hf_key llama_keys[] = {
	{"model.n_layer", "num_hidden_layers", 'i', "32"},
	{"model.d_model", "hidden_size", 'i', "4096"},
	{"model.n_head", "num_attention_heads", 'i', "32"},
	{"model.n_kv_head", "num_key_value_heads", 'i', "=num_attention_heads"},
	{"model.d_ff", "intermediate_size", 'i', "11008"},
	{"model.vocab", "vocab_size", 'i', "32000"},
	{"model.ctx", "max_position_embeddings", 'i', "2048"},
	{"model.norm_eps", "rms_norm_eps", 'f', "1e-6"},
	{"model.rope_theta", "rope_theta", 'f', "10000"},
	{"model.tie_embeddings", "tie_word_embeddings", 'b', "false"},
};

static const struct hf_key bert_keys[] = {
	{"model.n_layer", "num_hidden_layers", 'i', "12"},
	{"model.d_model", "hidden_size", 'i', "768"},
	{"model.n_head", "num_attention_heads", 'i', "12"},
	{"model.n_kv_head", "num_attention_heads", 'i', "12"},
	{"model.d_ff", "intermediate_size", 'i', "3072"},
	{"model.vocab", "vocab_size", 'i', "30522"},
	{"model.ctx", "max_position_embeddings", 'i', "512"},
	{"model.norm_eps", "layer_norm_eps", 'f', "1e-12"},
};

static int is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* "FILE KEY WHY" as an origin; a long path loses its head ("...gpt2/config.json n_embd"). */
static void origin_of(char *o, size_t n, const char *file, const char *key, const char *why)
{
	char big[2400];
	size_t len;

	snprintf(big, sizeof(big), "%.1100s%s%.1000s%.200s", file, key[0] ? " " : "", key, why);
	len = strlen(big);
	if (len < n) {
		memcpy(o, big, len + 1);
	} else {
		memcpy(o, "...", 3);
		memcpy(o + 3, big + len - (n - 4), n - 3);
	}
}

/* The shortest decimal that reads back to v, as config text. */
static void fmt_double(char *b, size_t n, double v)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(b, n, "%.*g", prec, v);
		if (strtod(b, NULL) == v)
			break;
	}
	if (!strpbrk(b, ".eEn") && strlen(b) + 3 < n)
		strcat(b, ".0");
}

/* rope_theta: top level (transformers 4) or in rope_parameters (5); a scaled rope is refused. */
static clp_status rope(json_t *j, const char *file, json_t **theta)
{
	json_t *rp = json_object_get(j, "rope_parameters"), *rs = json_object_get(j, "rope_scaling");
	const char *type;

	*theta = json_object_get(j, "rope_theta");
	for (int k = 0; k < 2; k++) {
		json_t *o = k ? rs : rp;

		if (!o || json_is_null(o))
			continue;
		if (!json_is_object(o))
			return clp_error(CLP_ERR_FORMAT, "%s: %s is not an object", file,
					 k ? "rope_scaling" : "rope_parameters");
		type = json_string_value(json_object_get(o, "rope_type"));
		if (!type)
			type = json_string_value(json_object_get(o, "type"));
		if (type && strcmp(type, "default"))
			return clp_error(CLP_ERR_UNSUPPORTED, "%s: %s.rope_type = \"%s\": clpipe runs "
					 "the default rotary positions only", file,
					 k ? "rope_scaling" : "rope_parameters", type);
		if (!k && json_object_get(o, "rope_theta"))
			*theta = json_object_get(o, "rope_theta");
	}
	return CLP_OK;
}

/* A string setting must be one of the values clpipe computes (absent: the class's default). */
static clp_status want_str(json_t *j, const char *file, const char *key, const char *ok1,
			   const char *ok2)
{
	json_t *v = json_object_get(j, key);
	const char *s = json_string_value(v);

	if (!v || json_is_null(v))
		return CLP_OK;
	if (!s || (strcmp(s, ok1) && (!ok2 || strcmp(s, ok2))))
		return clp_error(CLP_ERR_UNSUPPORTED, "%s: %s = %s: clpipe computes %s", file, key,
				 s ? s : "(not a string)", ok1);
	return CLP_OK;
}

/* A boolean setting that must have one value (absent: the class's default). */
static clp_status want_bool(json_t *j, const char *file, const char *key, int want)
{
	json_t *v = json_object_get(j, key);

	if (!v || json_is_null(v))
		return CLP_OK;
	if (!json_is_boolean(v) || json_is_true(v) != want)
		return clp_error(CLP_ERR_UNSUPPORTED, "%s: %s = %s: clpipe runs %s only", file, key,
				 json_is_true(v) ? "true" : "false", want ? "true" : "false");
	return CLP_OK;
}

/* What else the file says that clpipe must agree with. */
static clp_status check_family(json_t *j, const char *file, clp_preset p, json_t **theta)
{
	*theta = NULL;
	switch (p) {
	case CLP_PRESET_GPT2:
		CLP_TRY(want_str(j, file, "activation_function", "gelu_new", "gelu_pytorch_tanh"));
		CLP_TRY(want_bool(j, file, "scale_attn_by_inverse_layer_idx", 0));
		CLP_TRY(want_bool(j, file, "scale_attn_weights", 1));
		CLP_TRY(want_bool(j, file, "add_cross_attention", 0));
		return want_bool(j, file, "tie_word_embeddings", 1);
	case CLP_PRESET_LLAMA: {
		json_t *hd = json_object_get(j, "head_dim");
		json_int_t C = json_integer_value(json_object_get(j, "hidden_size"));
		json_int_t H = json_integer_value(json_object_get(j, "num_attention_heads"));

		CLP_TRY(want_str(j, file, "hidden_act", "silu", NULL));
		CLP_TRY(want_bool(j, file, "attention_bias", 0));
		CLP_TRY(want_bool(j, file, "mlp_bias", 0));
		if (hd && !json_is_null(hd) && H > 0 && json_integer_value(hd) != C / H)
			return clp_error(CLP_ERR_UNSUPPORTED, "%s: head_dim = %lld: clpipe's head size "
					 "is hidden_size / num_attention_heads = %lld", file,
					 (long long)json_integer_value(hd), (long long)(C / H));
		return rope(j, file, theta);
	}
	case CLP_PRESET_BERT: {
		json_t *tv = json_object_get(j, "type_vocab_size");

		CLP_TRY(want_str(j, file, "hidden_act", "gelu", NULL));
		CLP_TRY(want_str(j, file, "position_embedding_type", "absolute", NULL));
		CLP_TRY(want_bool(j, file, "is_decoder", 0));
		CLP_TRY(want_bool(j, file, "tie_word_embeddings", 1));
		if (tv && json_integer_value(tv) != 2)
			return clp_error(CLP_ERR_UNSUPPORTED, "%s: type_vocab_size = %lld: clpipe's "
					 "bert has 2 token types", file,
					 (long long)json_integer_value(tv));
		return CLP_OK;
	}
	}
	return CLP_OK;
}

static clp_status which_preset(json_t *j, const char *file, clp_preset *p)
{
	const char *type = json_string_value(json_object_get(j, "model_type"));
	const char *arch = json_string_value(json_array_get(json_object_get(j, "architectures"), 0));

	if (!type && arch)
		type = !strncmp(arch, "GPT2", 4) ? "gpt2" : !strncmp(arch, "Llama", 5) ? "llama"
			: !strncmp(arch, "Bert", 4) ? "bert" : arch;
	if (!type)
		return clp_error(CLP_ERR_FORMAT, "%s: no model_type (nor architectures)", file);
	if (clp_preset_parse(type, p) != CLP_OK) {
		clp_error_clear();
		return clp_error(CLP_ERR_UNSUPPORTED, "%s: model_type \"%s\"%s%s%s: clpipe runs gpt2, "
				 "llama and bert", file, type, arch ? " (" : "", arch ? arch : "",
				 arch ? ")" : "");
	}
	return CLP_OK;
}

/* One setting: the file's value (or the class's default) as config text. */
static clp_status value_of(json_t *j, const char *file, const struct hf_key *k, json_int_t C,
			   json_t *theta, char *text, size_t n, const char **why)
{
	json_t *v = !strcmp(k->json, "rope_theta") ? theta : json_object_get(j, k->json);

	*why = "";
	if (!v || json_is_null(v)) {
		if (!k->dflt)
			return clp_error(CLP_ERR_FORMAT, "%s: no %s", file, k->json);
		*why = " (absent: the default)";
		if (k->dflt[0] == '=') { /* as another key (GQA off: as many key/value heads) */
			v = json_object_get(j, k->dflt + 1);
			*why = " (absent: as num_attention_heads)";
			if (!v || json_is_null(v))
				return clp_error(CLP_ERR_FORMAT, "%s: neither %s nor %s", file, k->json,
						 k->dflt + 1);
		}
		if (k->dflt[0] == '*') {
			snprintf(text, n, "%lld", (long long)(C * atoi(k->dflt + 1)));
			*why = " (null: 4 x n_embd)";
			return CLP_OK;
		}
		if (!v || json_is_null(v)) {
			snprintf(text, n, "%s", k->dflt);
			return CLP_OK;
		}
	}
	switch (k->kind) {
	case 'i':
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return clp_error(CLP_ERR_FORMAT, "%s: %s is not a non-negative integer", file,
					 k->json);
		snprintf(text, n, "%lld", (long long)json_integer_value(v));
		return CLP_OK;
	case 'f':
		if (!json_is_number(v) || !isfinite(json_number_value(v)))
			return clp_error(CLP_ERR_FORMAT, "%s: %s is not a number", file, k->json);
		fmt_double(text, n, json_number_value(v));
		return CLP_OK;
	default:
		if (!json_is_boolean(v))
			return clp_error(CLP_ERR_FORMAT, "%s: %s is not true or false", file, k->json);
		snprintf(text, n, "%s", json_is_true(v) ? "true" : "false");
		return CLP_OK;
	}
}

/* The tokenizer beside a model, unless one is configured: vocab.json + merges.txt beside a GPT-2
 * model is GPT-2's BPE; otherwise tokenizer.json or vocab.txt is read as data.tokenizer = "hf". */
static clp_status tokenizer(clp_train_config *cfg, const char *dir, int gpt2)
{
	char v[1100], m[1100], origin[CLP_CFG_ORIGIN_LEN];
	const char *o = clp_cfg_origin_of(&clp_train_schema, cfg, "data.tokenizer");

	if ((o[0] && strcmp(o, "default")) || cfg->data.tokenizer_path[0])
		return CLP_OK;
	snprintf(v, sizeof(v), "%s/vocab.json", dir);
	snprintf(m, sizeof(m), "%s/merges.txt", dir);
	if (!gpt2 || !is_file(v) || !is_file(m)) {
		snprintf(v, sizeof(v), "%s/tokenizer.json", dir);
		snprintf(m, sizeof(m), "%s/vocab.txt", dir);
		if (!is_file(v) && !is_file(m))
			return CLP_OK;
		origin_of(origin, sizeof(origin), dir, "", is_file(v) ? "/tokenizer.json"
								       : "/vocab.txt");
		CLP_TRY(clp_cfg_set(&clp_train_schema, cfg, "data.tokenizer", "hf", origin));
		return clp_cfg_set_arg(&clp_train_schema, cfg, "data.tokenizer_path", dir, origin);
	}
	origin_of(origin, sizeof(origin), dir, "", "/vocab.json and merges.txt");
	CLP_TRY(clp_cfg_set(&clp_train_schema, cfg, "data.tokenizer", "gpt2", origin));
	if (!cfg->data.bpe_vocab[0])
		CLP_TRY(clp_cfg_set_arg(&clp_train_schema, cfg, "data.bpe_vocab", v, origin));
	if (!cfg->data.bpe_merges[0])
		CLP_TRY(clp_cfg_set_arg(&clp_train_schema, cfg, "data.bpe_merges", m, origin));
	return CLP_OK;
}

static clp_status apply(json_t *j, const char *file, const char *dir, clp_train_config *cfg)
{
	const struct hf_key *keys;
	size_t nkeys;
	clp_preset p;
	json_t *theta;
	json_int_t C;
	char origin[CLP_CFG_ORIGIN_LEN];

	if (!json_is_object(j))
		return clp_error(CLP_ERR_FORMAT, "%s: not a JSON object", file);
	CLP_TRY(which_preset(j, file, &p));
	CLP_TRY(check_family(j, file, p, &theta));
	keys = p == CLP_PRESET_GPT2 ? gpt2_keys : p == CLP_PRESET_LLAMA ? llama_keys : bert_keys;
	nkeys = p == CLP_PRESET_GPT2 ? sizeof(gpt2_keys) / sizeof(gpt2_keys[0])
		: p == CLP_PRESET_LLAMA ? sizeof(llama_keys) / sizeof(llama_keys[0])
					: sizeof(bert_keys) / sizeof(bert_keys[0]);
	C = json_integer_value(json_object_get(j, p == CLP_PRESET_GPT2 ? "n_embd" : "hidden_size"));
	origin_of(origin, sizeof(origin), file, "model_type", "");
	CLP_TRY(clp_cfg_set_strict(&clp_train_schema, cfg, "model.preset", clp_preset_name(p),
				   origin));
	for (size_t i = 0; i < nkeys; i++) {
		char text[64];
		const char *why;

		CLP_TRY(value_of(j, file, &keys[i], C, theta, text, sizeof(text), &why));
		origin_of(origin, sizeof(origin), file, keys[i].json, why);
		if (p == CLP_PRESET_LLAMA && !strcmp(keys[i].cfg, "model.ctx") &&
		    strcmp(clp_cfg_origin_of(&clp_train_schema, cfg, "model.ctx"), "default") &&
		    cfg->model.ctx <= atol(text))
			continue; /* a shorter context of a rotary model: only the sequence is bounded */
		CLP_TRY(clp_cfg_set_strict(&clp_train_schema, cfg, keys[i].cfg, text, origin));
	}
	return tokenizer(cfg, dir, p == CLP_PRESET_GPT2);
}

clp_status clp_hf_config_apply(const char *path, clp_train_config *cfg, int *found)
{
	char dir[1024], file[1100];
	struct stat st;
	json_error_t je;
	json_t *j;
	clp_status s;

	*found = 0;
	snprintf(dir, sizeof(dir), "%s", path);
	if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) { /* a file: its directory */
		char *slash = strrchr(dir, '/');

		if (slash)
			*slash = '\0';
		else
			snprintf(dir, sizeof(dir), ".");
	}
	snprintf(file, sizeof(file), "%s/%s", dir, CLP_HF_CONFIG);
	if (!is_file(file))
		return CLP_OK;
	*found = 1;
	{
		char *text = NULL;
		size_t n = 0;

		CLP_TRY(clp_infile_read("config", file, CLP_INFILE_TEXT_MAX, &text, &n));
		j = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
		free(text);
	}
	if (!j)
		return clp_error(CLP_ERR_FORMAT, "%s:%d: malformed JSON: %s", file, je.line, je.text);
	s = apply(j, file, dir, cfg);
	json_decref(j);
	return s;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static void set_int(json_t *o, const char *key, long v)
{
	json_object_set_new(o, key, json_integer(v));
}

static void set_num(json_t *o, const char *key, double v)
{
	json_object_set_new(o, key, json_real(v));
}

static void set_id(json_t *o, const char *key, int id)
{
	json_object_set_new(o, key, id >= 0 ? json_integer(id) : json_null());
}

char *clp_hf_config_json(const clp_model_config *m, double norm_eps, double rope_theta,
			 double dropout, int eos_id, int pad_id)
{
	static const char *const arch[] = {"GPT2LMHeadModel", "LlamaForCausalLM", "BertForMaskedLM"};
	json_t *o = json_object();
	char *text;

	if (!o)
		return NULL;
	json_object_set_new(o, "architectures", json_pack("[s]", arch[m->preset]));
	json_object_set_new(o, "model_type", json_string(clp_preset_name(m->preset)));
	set_int(o, "vocab_size", m->vocab);
	switch (m->preset) {
	case CLP_PRESET_GPT2:
		set_int(o, "n_layer", m->n_layer);
		set_int(o, "n_embd", m->d_model);
		set_int(o, "n_head", m->n_head);
		set_int(o, "n_inner", m->d_ff);
		set_int(o, "n_positions", m->ctx);
		set_int(o, "n_ctx", m->ctx);
		json_object_set_new(o, "activation_function", json_string("gelu_new"));
		set_num(o, "layer_norm_epsilon", norm_eps);
		set_num(o, "resid_pdrop", dropout);
		set_num(o, "embd_pdrop", dropout);
		set_num(o, "attn_pdrop", 0);
		json_object_set_new(o, "scale_attn_weights", json_true());
		set_id(o, "bos_token_id", eos_id);
		set_id(o, "eos_token_id", eos_id);
		break;
	case CLP_PRESET_LLAMA:
		set_int(o, "num_hidden_layers", m->n_layer);
		set_int(o, "hidden_size", m->d_model);
		set_int(o, "num_attention_heads", m->n_head);
		set_int(o, "num_key_value_heads", m->n_kv_head);
		set_int(o, "head_dim", m->d_model / m->n_head);
		set_int(o, "intermediate_size", m->d_ff);
		set_int(o, "max_position_embeddings", m->ctx);
		json_object_set_new(o, "hidden_act", json_string("silu"));
		set_num(o, "rms_norm_eps", norm_eps);
		/* transformers 4 reads rope_theta, 5 rope_parameters */
		set_num(o, "rope_theta", rope_theta);
		json_object_set_new(o, "rope_parameters", json_pack("{s:s,s:f}", "rope_type",
								     "default", "rope_theta",
								     rope_theta));
		json_object_set_new(o, "rope_scaling", json_null());
		json_object_set_new(o, "attention_bias", json_false());
		json_object_set_new(o, "mlp_bias", json_false());
		set_num(o, "attention_dropout", 0);
		set_id(o, "bos_token_id", eos_id);
		set_id(o, "eos_token_id", eos_id);
		break;
	case CLP_PRESET_BERT:
		set_int(o, "num_hidden_layers", m->n_layer);
		set_int(o, "hidden_size", m->d_model);
		set_int(o, "num_attention_heads", m->n_head);
		set_int(o, "intermediate_size", m->d_ff);
		set_int(o, "max_position_embeddings", m->ctx);
		set_int(o, "type_vocab_size", m->n_types);
		json_object_set_new(o, "hidden_act", json_string("gelu"));
		json_object_set_new(o, "position_embedding_type", json_string("absolute"));
		set_num(o, "layer_norm_eps", norm_eps);
		set_num(o, "hidden_dropout_prob", dropout);
		set_num(o, "attention_probs_dropout_prob", 0);
		if (pad_id >= 0)
			set_int(o, "pad_token_id", pad_id);
		break;
	}
	json_object_set_new(o, "tie_word_embeddings", json_boolean(m->tied));
	json_object_set_new(o, "dtype", json_string("float32"));
	set_num(o, "initializer_range", 0.02);
	/* 15 digits: the decimals a user configured (1e-05, not 1.0000000000000001e-05) */
	text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	json_decref(o);
	return text;
}

/* Every model*.safetensors file of dir (not model.safetensors.index.json, not temporaries). */
static int is_model_file(const char *name)
{
	size_t n = strlen(name), ext = strlen(".safetensors");

	return !strncmp(name, "model", 5) && n > ext && !strcmp(name + n - ext, ".safetensors");
}

static clp_status index_file(json_t *map, const char *dir, const char *name, uint64_t *total)
{
	char path[1400];
	clp_st_file *f = NULL;

	snprintf(path, sizeof(path), "%.1023s/%.255s", dir, name);
	CLP_TRY(clp_st_open(&f, path));
	for (int i = 0; i < clp_st_count(f); i++) {
		const clp_st_tensor *t = clp_st_at(f, i);

		json_object_set_new(map, t->name, json_string(name));
		*total += t->end - t->begin;
	}
	clp_st_close(f);
	return CLP_OK;
}

clp_status clp_hf_write_index(const char *dir)
{
	DIR *d = opendir(dir);
	json_t *map = json_object(), *idx = NULL;
	struct dirent *e;
	uint64_t total = 0;
	char path[1100], *text = NULL;
	clp_status st = CLP_OK;

	if (!d || !map) {
		json_decref(map);
		if (d)
			closedir(d);
		return clp_error(CLP_ERR_IO, "%s: cannot list the checkpoint's files", dir);
	}
	while (st == CLP_OK && (e = readdir(d)))
		if (is_model_file(e->d_name))
			st = index_file(map, dir, e->d_name, &total);
	closedir(d);
	if (st == CLP_OK) {
		idx = json_pack("{s:{s:I},s:O}", "metadata", "total_size", (json_int_t)total,
				"weight_map", map);
		text = idx ? json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
		if (!text)
			st = clp_error(CLP_ERR_NOMEM, "out of host memory writing the weight map");
	}
	snprintf(path, sizeof(path), "%.1023s/model.safetensors.index.json", dir);
	if (st == CLP_OK)
		st = clp_io_write_file(path, text, strlen(text));
	free(text);
	json_decref(idx);
	json_decref(map);
	return st;
}

/* ---- tensor names ----------------------------------------------------------------------------- */

void clp_hf_save_name(clp_preset p, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s%s", p == CLP_PRESET_GPT2 ? "transformer." : "", name);
}

int clp_hf_load_names(clp_preset p, const char *name, char (*out)[CLP_HF_NAME], int max)
{
	int k = 0;

#define ADD(...)                                                                                   \
	do {                                                                                       \
		if (k < max)                                                                       \
			snprintf(out[k++], CLP_HF_NAME, __VA_ARGS__);                              \
	} while (0)
	switch (p) {
	case CLP_PRESET_GPT2: /* GPT2LMHeadModel; GPT2Model and the Hub's gpt2 */
		ADD("transformer.%s", name);
		ADD("%s", name);
		break;
	case CLP_PRESET_LLAMA: /* LlamaForCausalLM; LlamaModel */
		ADD("%s", name);
		if (!strncmp(name, "model.", 6))
			ADD("%s", name + 6);
		break;
	case CLP_PRESET_BERT: /* BertForMaskedLM (older files: the decoder's copy of the bias) */
		ADD("%s", name);
		if (!strcmp(name, "cls.predictions.bias"))
			ADD("cls.predictions.decoder.bias");
		else if (!strncmp(name, "bert.", 5))
			ADD("%s", name + 5);
		break;
	}
#undef ADD
	return k;
}

clp_status clp_hf_read(clp_ckpt *c, clp_ckpt_kind kind, clp_preset p, const char *name,
		       const char *suffix, float *dst, int ndim, const int64_t *shape)
{
	char names[4][CLP_HF_NAME], tried[4 * CLP_HF_NAME + 16] = "";
	int n = clp_hf_load_names(p, name, names, 4);
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		char full[CLP_HF_NAME + 32];

		snprintf(full, sizeof(full), "%s%s", names[i], suffix);
		if (clp_ckpt_find(c, kind, full))
			return clp_ckpt_read(c, kind, full, dst, ndim, shape);
		if (len < sizeof(tried))
			len += (size_t)snprintf(tried + len, sizeof(tried) - len, "%s\"%s\"",
						i ? ", " : "", full);
	}
	return clp_error(CLP_ERR_NOT_FOUND, "checkpoint %s has no %s tensor %s%s (looked for %s)",
			 clp_ckpt_path(c), kind == CLP_CKPT_MODEL ? "model" : "optimizer", name, suffix,
			 tried);
}
