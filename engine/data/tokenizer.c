/* Tokeniser handle, the byte tokeniser and the calls common to every kind (see tokenizer.h). */
#include "engine/data/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"

const char *const clp_tok_specials_gpt[] = {"<|endoftext|>"};
const int clp_tok_specials_gpt_n = 1;
const char *const clp_tok_specials_bert[] = {"[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"};
const int clp_tok_specials_bert_n = 5;

clp_status clp_ids_push(clp_ids *a, int32_t id)
{
	if (a->n == a->cap) {
		size_t ncap = a->cap ? 2 * a->cap : 256;
		int32_t *v = realloc(a->v, ncap * sizeof(*v));

		if (!v)
			return clp_error(CLP_ERR_NOMEM, "out of memory for %zu token ids", ncap);
		a->v = v;
		a->cap = ncap;
	}
	a->v[a->n++] = id;
	return CLP_OK;
}

void clp_ids_free(clp_ids *a)
{
	free(a->v);
	memset(a, 0, sizeof(*a));
}

clp_status clp_tok_byte_create(clp_tok **out, const char *const *specials, int nspecial)
{
	clp_tok *t;
	size_t pool = 256;

	*out = NULL;
	if (nspecial < 0 || (nspecial > 0 && !specials))
		return clp_error(CLP_ERR_INVALID, "byte tokenizer: bad special-token list");
	for (int i = 0; i < nspecial; i++) {
		if (!specials[i] || !specials[i][0])
			return clp_error(CLP_ERR_INVALID, "byte tokenizer: special token %d has no "
					 "name", i);
		for (int j = 0; j < i; j++)
			if (!strcmp(specials[i], specials[j]))
				return clp_error(CLP_ERR_INVALID, "byte tokenizer: special token "
						 "'%s' given twice", specials[i]);
		pool += strlen(specials[i]);
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	t->kind = CLP_TOK_BYTE;
	t->vocab = 256 + nspecial;
	t->nspecial = nspecial;
	t->pool = malloc(pool);
	t->off = malloc((size_t)(t->vocab + 1) * sizeof(*t->off));
	t->special = malloc((size_t)(nspecial ? nspecial : 1) * sizeof(*t->special));
	if (!t->pool || !t->off || !t->special) {
		clp_tok_free(t);
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < 256; i++) {
		t->pool[i] = (char)i;
		t->off[i] = (size_t)i;
	}
	t->off[256] = 256;
	for (int i = 0; i < nspecial; i++) {
		size_t l = strlen(specials[i]);

		memcpy(t->pool + t->off[256 + i], specials[i], l);
		t->off[257 + i] = t->off[256 + i] + l;
		t->special[i] = 256 + i;
	}
	clp_tok_roles_by_name(t);
	*out = t;
	return CLP_OK;
}

void clp_tok_free(clp_tok *t)
{
	if (!t)
		return;
	clp_tok_gpt2_release(t);
	for (int i = 0; i < t->nadded; i++)
		free(t->added[i].text);
	free(t->added);
	free(t->path);
	free(t->cps);
	free(t->wbuf);
	free(t->pool);
	free(t->off);
	free(t->special);
	free(t);
}

int clp_tok_vocab_size(const clp_tok *t)
{
	return t->vocab;
}

const char *clp_tok_kind(const clp_tok *t)
{
	static const char *const names[] = {"byte", "gpt2", "bpe", "wordpiece"};

	return names[t->kind];
}

int32_t clp_tok_role_id(const clp_tok *t, clp_tok_role role)
{
	return role >= 0 && role < CLP_TOK_NROLES ? t->role[role] : -1;
}

const char *clp_tok_path(const clp_tok *t)
{
	return t->path ? t->path : "";
}

clp_status clp_tok_set_pool(clp_tok *t, unsigned char *const *tok, const size_t *len, size_t n)
{
	size_t pool = 0;

	for (size_t i = 0; i < n; i++) {
		if (!tok[i])
			return clp_error(CLP_ERR_FORMAT, "%s: no token has id %zu (ids must run "
					 "0..%zu without gaps)", t->path ? t->path : "tokenizer", i,
					 n - 1);
		pool += len[i];
	}
	t->vocab = (int)n;
	t->pool = malloc(pool ? pool : 1);
	t->off = malloc((n + 1) * sizeof(*t->off));
	if (!t->pool || !t->off)
		return clp_error(CLP_ERR_NOMEM, "out of memory for a %zu-token vocabulary", n);
	t->off[0] = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(t->pool + t->off[i], tok[i], len[i]);
		t->off[i + 1] = t->off[i] + len[i];
	}
	return CLP_OK;
}

int32_t clp_tok_special_id(const clp_tok *t, const char *name)
{
	size_t l = strlen(name);

	for (int i = 0; i < t->nspecial; i++) {
		int32_t id = t->special[i];

		if (t->off[id + 1] - t->off[id] == l && !memcmp(t->pool + t->off[id], name, l))
			return id;
	}
	return -1;
}

int clp_tok_is_special(const clp_tok *t, int32_t id)
{
	for (int i = 0; i < t->nspecial; i++)
		if (t->special[i] == id)
			return 1;
	return 0;
}

static clp_status encode_plain(clp_tok *t, const char *text, size_t len, clp_ids *out)
{
	if (len == 0)
		return CLP_OK;
	if (t->kind == CLP_TOK_GPT2 || t->kind == CLP_TOK_BPE)
		return clp_tok_gpt2_encode(t, text, len, out);
	if (t->kind == CLP_TOK_WORDPIECE)
		return clp_tok_wp_encode(t, text, len, out);
	for (size_t i = 0; i < len; i++)
		CLP_TRY(clp_ids_push(out, (unsigned char)text[i]));
	return CLP_OK;
}

/* The longest matched (non-special) added token at text[i], or -1. */
static int added_at(const clp_tok *t, const char *text, size_t len, size_t i)
{
	int best = -1;

	for (int k = 0; k < t->nadded; k++) {
		const clp_tok_added *a = &t->added[k];

		if (a->special || !a->len || a->len > len - i || memcmp(text + i, a->text, a->len))
			continue;
		if (best < 0 || a->len > t->added[best].len)
			best = k;
	}
	return best;
}

clp_status clp_tok_encode(clp_tok *t, const char *text, size_t len, clp_ids *out)
{
	size_t start = 0;

	if (!t->nmatch)
		return encode_plain(t, text, len, out);
	/* the text between matched added tokens goes through the normaliser and model */
	for (size_t i = 0; i < len;) {
		int k = added_at(t, text, len, i);

		if (k < 0) {
			i++;
			continue;
		}
		CLP_TRY(encode_plain(t, text + start, i - start, out));
		CLP_TRY(clp_ids_push(out, t->added[k].id));
		i += t->added[k].len;
		start = i;
	}
	return encode_plain(t, text + start, len - start, out);
}

clp_status clp_tok_encode_file(clp_tok *t, const char *path, clp_ids *out)
{
	char *text;
	size_t len;
	clp_status s;

	CLP_TRY(clp_io_read_file(path, &text, &len));
	if (len == 0) {
		free(text);
		return clp_error(CLP_ERR_FORMAT, "%s: the file is empty (no text to train on)", path);
	}
	s = clp_tok_encode(t, text, len, out);
	free(text);
	if (s != CLP_OK)
		return clp_error_context(s, "%s: ", path);
	return CLP_OK;
}

clp_status clp_tok_token(const clp_tok *t, int32_t id, const char **bytes, size_t *len)
{
	if (id < 0 || id >= t->vocab)
		return clp_error(CLP_ERR_INVALID, "token id %d is outside the %s vocabulary "
				 "[0, %d)", (int)id, clp_tok_kind(t), t->vocab);
	*bytes = t->pool + t->off[id];
	*len = t->off[id + 1] - t->off[id];
	return CLP_OK;
}

clp_status clp_tok_decode(const clp_tok *t, const int32_t *ids, size_t n, char **text,
			  size_t *len)
{
	size_t total = 0;
	char *buf;

	*text = NULL;
	*len = 0;
	if (t->kind == CLP_TOK_WORDPIECE)
		return clp_tok_wp_decode(t, ids, n, text, len);
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->vocab)
			return clp_error(CLP_ERR_INVALID, "token id %d at position %zu is outside "
					 "the %s vocabulary [0, %d)", (int)ids[i], i,
					 clp_tok_kind(t), t->vocab);
		total += t->off[ids[i] + 1] - t->off[ids[i]];
	}
	buf = malloc(total + 1);
	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "out of memory decoding %zu tokens", n);
	total = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = t->off[ids[i] + 1] - t->off[ids[i]];

		memcpy(buf + total, t->pool + t->off[ids[i]], l);
		total += l;
	}
	buf[total] = '\0';
	*text = buf;
	*len = total;
	return CLP_OK;
}
