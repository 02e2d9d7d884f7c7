/* Opening a tokenizer from a model directory or a file, and the special tokens' roles (see
 * tokenizer.h): tokenizer.json first, then vocab.txt, then vocab.json + merges.txt; the roles
 * from tokenizer_config.json / special_tokens_map.json when present, else by the well-known
 * names. */
#include "engine/data/tok_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cl/base/json_util.h"

static const char *const role_key[CLP_TOK_NROLES] = {
	"unk_token", "pad_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token",
};

/* Names tried in order for each role when no tokenizer_config.json says. */
static const char *const role_names[CLP_TOK_NROLES][4] = {
	{"[UNK]", "<unk>", NULL},
	{"[PAD]", "<pad>", "<|pad|>", NULL},
	{"[CLS]", "<s>", NULL},
	{"[SEP]", "</s>", NULL},
	{"[MASK]", "<mask>", NULL},
	{"<|begin_of_text|>", "<s>", "<|endoftext|>", NULL},
	{"<|end_of_text|>", "</s>", "<|endoftext|>", NULL},
};

/* The special token spelled name, or -1. */
static int32_t special_named(const clp_tok *t, const char *name, size_t l)
{
	for (int i = 0; i < t->nspecial; i++) {
		int32_t id = t->special[i];

		if (t->off[id + 1] - t->off[id] == l && !memcmp(t->pool + t->off[id], name, l))
			return id;
	}
	return -1;
}

void clp_tok_roles_by_name(clp_tok *t)
{
	for (int r = 0; r < CLP_TOK_NROLES; r++) {
		t->role[r] = -1;
		for (int k = 0; role_names[r][k] && t->role[r] < 0; k++)
			t->role[r] = special_named(t, role_names[r][k], strlen(role_names[r][k]));
	}
}

static int is_kind(const char *path, int dir)
{
	struct stat st;

	return stat(path, &st) == 0 && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/* Any token spelled name: a special or added token, else the vocabulary's. */
static int32_t token_named(const clp_tok *t, const char *name)
{
	size_t l = strlen(name);
	int32_t id = special_named(t, name, l);
	int64_t v;

	for (int i = 0; id < 0 && i < t->nadded; i++)
		if (t->added[i].len == l && !memcmp(t->added[i].text, name, l))
			id = t->added[i].id;
	if (id < 0 && clp_smap_get(&t->tok2id, name, l, &v))
		id = (int32_t)v;
	return id;
}

/* tokenizer_config.json or special_tokens_map.json in dir: "mask_token": "[MASK]" or
 * {"content": "[MASK]", ...}; null or absent leaves the role as it is. */
static clp_status roles_from(clp_tok *t, const char *dir, const char *name)
{
	char path[1200];
	json_t *root;
	clp_status s = CLP_OK;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!is_kind(path, 0))
		return CLP_OK;
	CLP_TRY(clp_json_load(path, &root));
	for (int r = 0; s == CLP_OK && r < CLP_TOK_NROLES; r++) {
		const json_t *v = json_is_object(root) ? json_object_get(root, role_key[r]) : NULL;
		const char *c;
		int32_t id;

		if (json_is_object(v))
			v = json_object_get(v, "content");
		if (!json_is_string(v))
			continue;
		c = json_string_value(v);
		id = token_named(t, c);
		if (id < 0)
			s = clp_error(CLP_ERR_FORMAT, "%s: %s: \"%s\" is not a token of %s", path,
				      role_key[r], c, clp_tok_path(t));
		else
			t->role[r] = id;
	}
	json_decref(root);
	return s;
}

static clp_status open_file(clp_tok **t, const char *path, const char *dir)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t bl = strlen(base);
	char other[1200];

	if (!strcmp(base, "vocab.json") || !strcmp(base, "merges.txt")) {
		int vocab = base[0] == 'v';

		snprintf(other, sizeof(other), "%s/%s", dir, vocab ? "merges.txt" : "vocab.json");
		if (!is_kind(other, 0))
			return clp_error(CLP_ERR_NOT_FOUND, "%s: GPT-2's BPE needs %s beside it; %s "
					 "is missing", path, vocab ? "merges.txt" : "vocab.json",
					 other);
		return vocab ? clp_tok_gpt2_load(t, path, other) : clp_tok_gpt2_load(t, other, path);
	}
	if (bl > 5 && !strcmp(base + bl - 5, ".json"))
		return clp_tok_json_load(t, path);
	if (bl > 4 && !strcmp(base + bl - 4, ".txt"))
		return clp_tok_vocab_txt_load(t, path);
	return clp_error(CLP_ERR_INVALID, "%s: not a tokenizer file clpipe reads (tokenizer.json, "
			 "vocab.txt, or vocab.json with merges.txt)", path);
}

clp_status clp_tok_open(clp_tok **t, const char *path)
{
	static const char *const names[] = {"tokenizer.json", "vocab.txt", "vocab.json"};
	char dir[1100], file[1200];
	clp_status s;

	*t = NULL;
	if (!path || !path[0])
		return clp_error(CLP_ERR_INVALID, "no tokenizer path given");
	if (strlen(path) >= sizeof(dir))
		return clp_error(CLP_ERR_INVALID, "%.64s...: the tokenizer path is too long", path);
	if (is_kind(path, 1)) {
		snprintf(dir, sizeof(dir), "%s", path);
		file[0] = '\0';
		for (int i = 0; i < 3 && !file[0]; i++) {
			snprintf(file, sizeof(file), "%s/%s", path, names[i]);
			if (!is_kind(file, 0))
				file[0] = '\0';
		}
		if (!file[0])
			return clp_error(CLP_ERR_NOT_FOUND, "%s: no tokenizer here (looked for "
					 "tokenizer.json, vocab.txt, and vocab.json with "
					 "merges.txt)", path);
	} else if (is_kind(path, 0)) {
		const char *sl = strrchr(path, '/');

		snprintf(dir, sizeof(dir), "%.*s", sl ? (int)(sl - path) : 1, sl ? path : ".");
		snprintf(file, sizeof(file), "%s", path);
	} else {
		return clp_error(errno == ENOENT ? CLP_ERR_NOT_FOUND : CLP_ERR_IO, "%s: cannot open "
				 "the tokenizer: %s", path, strerror(errno));
	}
	CLP_TRY(open_file(t, file, dir));
	s = roles_from(*t, dir, "special_tokens_map.json");
	if (s == CLP_OK)
		s = roles_from(*t, dir, "tokenizer_config.json");
	if (s != CLP_OK) {
		clp_tok_free(*t);
		*t = NULL;
	}
	return s;
}
