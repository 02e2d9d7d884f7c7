/* Hugging Face tokenizer.json: byte-level BPE (GPT-2, LLaMA-3, Qwen2 pre-tokenisers; no
 * normaliser or NFC) and
 * WordPiece (BertNormalizer, BertPreTokenizer). Whatever else the file names (a Unigram model,
 * an NFKC normaliser, a Metaspace pre-tokeniser, a Split pattern not known here, ...) is refused
 * with the field and the value, never approximated. The post-processor is not read: clpipe
 * inserts [CLS]/[SEP] or end-of-text ids itself. */
#include "engine/data/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"

static const char PAT_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
			       "\\s+(?!\\S)|\\s+";
static const char PAT_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
				 "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
				 "\\s+(?!\\S)|\\s+";
static const char PAT_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
				"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
				"\\s+(?!\\S)|\\s+";

static clp_status refuse(const char *file, const char *field, const char *value,
			 const char *what)
{
	return clp_error(CLP_ERR_UNSUPPORTED, "%s: %s: \"%s\" is not supported (clpipe reads %s)",
			 file, field, value, what);
}

/* obj.type as a string ("" when obj is null). */
static clp_status type_of(const char *file, const char *at, const json_t *obj, char *out,
			  size_t cap)
{
	out[0] = '\0';
	if (!obj || json_is_null(obj))
		return CLP_OK;
	if (!json_is_object(obj))
		return clp_error(CLP_ERR_FORMAT, "%s: %s: expected an object or null", file, at);
	return clp_json_str(file, at, obj, "type", 1, out, cap);
}

static clp_status byte_level(clp_tok *t, const char *file, const char *at, const json_t *o,
			     int *use_regex)
{
	*use_regex = 1;
	t->add_prefix_space = 1;
	CLP_TRY(clp_json_bool(file, at, o, "add_prefix_space", 0, &t->add_prefix_space));
	return clp_json_bool(file, at, o, "use_regex", 0, use_regex);
}

static clp_status bpe_pre(clp_tok *t, const char *file, const json_t *root)
{
	const json_t *pre = json_object_get(root, "pre_tokenizer");
	const json_t *list, *sp, *bl;
	char type[64], btype[64], behavior[32] = "", pat[512] = "";
	const json_t *pobj;
	int use_regex, invert = 0;

	CLP_TRY(type_of(file, "pre_tokenizer", pre, type, sizeof(type)));
	if (!strcmp(type, "ByteLevel")) {
		CLP_TRY(byte_level(t, file, "pre_tokenizer", pre, &use_regex));
		t->split = use_regex ? CLP_SPLIT_GPT2 : CLP_SPLIT_NONE;
		return CLP_OK;
	}
	if (strcmp(type, "Sequence"))
		return refuse(file, "pre_tokenizer.type", type[0] ? type : "null",
			      "ByteLevel, or a Sequence of Split and ByteLevel, for BPE");
	list = json_object_get(pre, "pretokenizers");
	if (!json_is_array(list) || json_array_size(list) != 2)
		return refuse(file, "pre_tokenizer.pretokenizers", "a sequence other than "
			      "[Split, ByteLevel]", "[Split, ByteLevel] for BPE");
	sp = json_array_get(list, 0);
	bl = json_array_get(list, 1);
	CLP_TRY(type_of(file, "pre_tokenizer.pretokenizers[0]", sp, type, sizeof(type)));
	CLP_TRY(type_of(file, "pre_tokenizer.pretokenizers[1]", bl, btype, sizeof(btype)));
	if (strcmp(type, "Split"))
		return refuse(file, "pre_tokenizer.pretokenizers[0].type", type, "Split there");
	if (strcmp(btype, "ByteLevel"))
		return refuse(file, "pre_tokenizer.pretokenizers[1].type", btype, "ByteLevel there");
	CLP_TRY(clp_json_str(file, "pre_tokenizer.pretokenizers[0]", sp, "behavior", 1, behavior,
			     sizeof(behavior)));
	CLP_TRY(clp_json_bool(file, "pre_tokenizer.pretokenizers[0]", sp, "invert", 0, &invert));
	if (strcmp(behavior, "Isolated"))
		return refuse(file, "pre_tokenizer.pretokenizers[0].behavior", behavior,
			      "Isolated");
	if (invert)
		return refuse(file, "pre_tokenizer.pretokenizers[0].invert", "true", "false");
	CLP_TRY(clp_json_obj(file, "pre_tokenizer.pretokenizers[0]", sp, "pattern", 1,
			     (json_t **)&pobj));
	if (!json_is_string(json_object_get(pobj, "Regex")))
		return refuse(file, "pre_tokenizer.pretokenizers[0].pattern", "a String pattern",
			      "a Regex pattern");
	CLP_TRY(clp_json_str(file, "pre_tokenizer.pretokenizers[0].pattern", pobj, "Regex", 1, pat,
			     sizeof(pat)));
	if (!strcmp(pat, PAT_LLAMA3))
		t->split = CLP_SPLIT_LLAMA3;
	else if (!strcmp(pat, PAT_QWEN2))
		t->split = CLP_SPLIT_QWEN2;
	else if (!strcmp(pat, PAT_GPT2))
		t->split = CLP_SPLIT_GPT2;
	else
		return refuse(file, "pre_tokenizer.pretokenizers[0].pattern.Regex", pat,
			      "the GPT-2, LLaMA-3 and Qwen2 patterns, implemented by hand");
	CLP_TRY(byte_level(t, file, "pre_tokenizer.pretokenizers[1]", bl, &use_regex));
	if (use_regex)
		return refuse(file, "pre_tokenizer.pretokenizers[1].use_regex", "true",
			      "false after a Split");
	return CLP_OK;
}

static clp_status wp_norm(clp_tok *t, const char *file, const json_t *root)
{
	const json_t *n = json_object_get(root, "normalizer"), *sa;
	char type[64];

	CLP_TRY(type_of(file, "normalizer", n, type, sizeof(type)));
	if (!type[0]) {
		t->clean_text = t->chinese = t->strip_accents = t->lowercase = 0;
		return CLP_OK;
	}
	if (strcmp(type, "BertNormalizer"))
		return refuse(file, "normalizer.type", type, "BertNormalizer or null for WordPiece");
	CLP_TRY(clp_json_bool(file, "normalizer", n, "clean_text", 0, &t->clean_text));
	CLP_TRY(clp_json_bool(file, "normalizer", n, "handle_chinese_chars", 0, &t->chinese));
	CLP_TRY(clp_json_bool(file, "normalizer", n, "lowercase", 0, &t->lowercase));
	sa = json_object_get(n, "strip_accents");
	t->strip_accents = t->lowercase; /* null: follow lowercase */
	if (sa && !json_is_null(sa))
		CLP_TRY(clp_json_bool(file, "normalizer", n, "strip_accents", 0, &t->strip_accents));
	return CLP_OK;
}

/* One vocabulary entry: the id's bytes (byte-level BPE tokens are unmapped). */
static clp_status put_tok(clp_tok *t, const char *file, const char *key, json_int_t id,
			  unsigned char **tok, size_t *len, size_t V, int bpe)
{
	size_t kl = strlen(key);
	int32_t bad = 0;
	long bl;

	if (id < 0 || (size_t)id >= V)
		return clp_error(CLP_ERR_FORMAT, "%s: model.vocab: token \"%s\" has id %lld, "
				 "outside [0, %zu)", file, key, (long long)id, V);
	if (tok[id])
		return clp_error(CLP_ERR_FORMAT, "%s: model.vocab: id %lld is given to two tokens "
				 "(one is \"%s\")", file, (long long)id, key);
	tok[id] = malloc(kl ? kl : 1);
	if (!tok[id])
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", file);
	if (!bpe) {
		memcpy(tok[id], key, kl);
		len[id] = kl;
	} else if ((bl = clp_tok_bytelevel_unmap(key, kl, tok[id], &bad)) < 0) {
		return clp_error(CLP_ERR_FORMAT, "%s: model.vocab: token \"%s\" has the character "
				 "U+%04X, which is not in the byte-level alphabet", file, key,
				 (unsigned)bad);
	} else {
		len[id] = (size_t)bl;
	}
	if (clp_smap_put(&t->tok2id, tok[id], len[id], (int64_t)id) != 0)
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", file);
	if (bpe && len[id] == 1)
		t->byte_id[tok[id][0]] = (int32_t)id;
	return CLP_OK;
}

static clp_status added(clp_tok *t, const char *file, const json_t *list)
{
	size_t n = json_is_array(list) ? json_array_size(list) : 0;

	if (list && !json_is_null(list) && !json_is_array(list))
		return clp_error(CLP_ERR_FORMAT, "%s: added_tokens: expected an array", file);
	t->added = calloc(n ? n : 1, sizeof(*t->added));
	t->special = malloc((n ? n : 1) * sizeof(*t->special));
	if (!t->added || !t->special)
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", file);
	for (size_t i = 0; i < n; i++) {
		const json_t *a = json_array_get(list, i);
		char at[48], content[512];
		int64_t id;
		clp_tok_added *d = &t->added[i];

		snprintf(at, sizeof(at), "added_tokens[%zu]", i);
		CLP_TRY(clp_json_expect_obj(file, at, a));
		CLP_TRY(clp_json_i64(file, at, a, "id", 1, 0, INT32_MAX - 1, &id));
		CLP_TRY(clp_json_str(file, at, a, "content", 1, content, sizeof(content)));
		CLP_TRY(clp_json_bool(file, at, a, "special", 0, &d->special));
		d->id = (int32_t)id;
		d->len = strlen(content);
		d->text = strdup(content);
		if (!d->text)
			return clp_error(CLP_ERR_NOMEM, "%s: out of memory", file);
		t->nadded++;
		if (d->special) {
			t->special[t->nspecial++] = d->id;
			continue;
		}
		/* matched in text: only exactly as written, before any normaliser */
		for (int f = 0; f < 4; f++) {
			static const char *const flag[] = {"lstrip", "rstrip", "single_word",
							   "normalized"};
			int on = 0;
			char field[80];

			CLP_TRY(clp_json_bool(file, at, a, flag[f], 0, &on));
			if (on && (f < 3 || t->nfc || t->clean_text || t->chinese || t->lowercase ||
				   t->strip_accents)) {
				snprintf(field, sizeof(field), "%s.%s", at, flag[f]);
				return refuse(file, field, "true", "non-special added tokens matched "
					      "exactly as written");
			}
		}
		t->nmatch += d->len > 0;
	}
	return CLP_OK;
}

static clp_status merges(clp_tok *t, const char *file, const json_t *model)
{
	const json_t *m = json_object_get(model, "merges");
	size_t n = json_is_array(m) ? json_array_size(m) : 0;

	if (!json_is_array(m))
		return clp_error(CLP_ERR_FORMAT, "%s: model.merges: expected an array", file);
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(m, i);
		const char *a, *b, *sp;
		size_t la, lb;
		char where[1100];

		snprintf(where, sizeof(where), "%s: model.merges[%zu]", file, i);
		if (json_is_string(e) && (sp = strchr(json_string_value(e), ' '))) {
			a = json_string_value(e);
			la = (size_t)(sp - a);
			b = sp + 1;
			lb = strlen(b);
		} else if (json_is_array(e) && json_array_size(e) == 2 &&
			   json_is_string(json_array_get(e, 0)) &&
			   json_is_string(json_array_get(e, 1))) {
			a = json_string_value(json_array_get(e, 0));
			b = json_string_value(json_array_get(e, 1));
			la = strlen(a);
			lb = strlen(b);
		} else {
			return clp_error(CLP_ERR_FORMAT, "%s: expected \"a b\" or [\"a\", \"b\"]",
					 where);
		}
		CLP_TRY(clp_tok_bpe_add_merge(t, where, a, la, b, lb, (uint64_t)i));
	}
	return CLP_OK;
}

static clp_status bpe_model(clp_tok *t, const char *file, const json_t *model)
{
	int fallback = 0;
	double dropout = 0;
	char s[64] = "";

	CLP_TRY(clp_json_bool(file, "model", model, "byte_fallback", 0, &fallback));
	if (fallback)
		return refuse(file, "model.byte_fallback", "true", "byte-level BPE");
	CLP_TRY(clp_json_num(file, "model", model, "dropout", 0, 0, 1, &dropout));
	if (dropout > 0)
		return refuse(file, "model.dropout", "non-zero", "deterministic BPE");
	CLP_TRY(clp_json_str(file, "model", model, "continuing_subword_prefix", 0, s, sizeof(s)));
	if (s[0])
		return refuse(file, "model.continuing_subword_prefix", s, "byte-level BPE");
	CLP_TRY(clp_json_str(file, "model", model, "end_of_word_suffix", 0, s, sizeof(s)));
	if (s[0])
		return refuse(file, "model.end_of_word_suffix", s, "byte-level BPE");
	return clp_json_bool(file, "model", model, "ignore_merges", 0, &t->ignore_merges);
}

static clp_status wp_model(clp_tok *t, const char *file, const json_t *model)
{
	char unk[128] = "[UNK]";
	int64_t id;

	CLP_TRY(clp_json_str(file, "model", model, "continuing_subword_prefix", 0, t->prefix,
			     sizeof(t->prefix)));
	CLP_TRY(clp_json_int(file, "model", model, "max_input_chars_per_word", 0, 1, 1 << 20,
			     &t->max_chars));
	CLP_TRY(clp_json_str(file, "model", model, "unk_token", 0, unk, sizeof(unk)));
	if (!clp_smap_get(&t->tok2id, unk, strlen(unk), &id))
		return clp_error(CLP_ERR_FORMAT, "%s: model.unk_token: \"%s\" is not in "
				 "model.vocab", file, unk);
	t->role[CLP_TOK_UNK] = (int32_t)id;
	return CLP_OK;
}

static clp_status decoder(clp_tok *t, const char *file, const json_t *root)
{
	const json_t *d = json_object_get(root, "decoder");
	char type[64];

	CLP_TRY(type_of(file, "decoder", d, type, sizeof(type)));
	if (!type[0])
		return CLP_OK;
	if (t->kind == CLP_TOK_BPE && !strcmp(type, "ByteLevel"))
		return CLP_OK;
	if (t->kind == CLP_TOK_WORDPIECE && !strcmp(type, "WordPiece")) {
		CLP_TRY(clp_json_bool(file, "decoder", d, "cleanup", 0, &t->cleanup));
		return CLP_OK;
	}
	return refuse(file, "decoder.type", type, t->kind == CLP_TOK_BPE
		      ? "ByteLevel or null for BPE" : "WordPiece or null for WordPiece");
}

static clp_status load(clp_tok *t, const char *file, const json_t *root)
{
	const json_t *model, *vocab, *val;
	char type[32] = "", pre[64];
	const char *key;
	size_t V = 0, n;
	unsigned char **tok = NULL;
	size_t *len = NULL;
	clp_status s = CLP_OK;
	int bpe;

	if (!json_is_object(root))
		return clp_error(CLP_ERR_FORMAT, "%s: expected a JSON object at the top", file);
	CLP_TRY(clp_json_obj(file, "", root, "model", 1, (json_t **)&model));
	CLP_TRY(clp_json_str(file, "model", model, "type", 0, type, sizeof(type)));
	if (!type[0]) /* older files leave the model's type out */
		snprintf(type, sizeof(type), "%s", json_object_get(model, "merges") ? "BPE"
			 : "WordPiece");
	if (strcmp(type, "BPE") && strcmp(type, "WordPiece"))
		return refuse(file, "model.type", type, "BPE and WordPiece");
	bpe = !strcmp(type, "BPE");
	if (bpe) {
		t->kind = CLP_TOK_BPE;
		CLP_TRY(type_of(file, "normalizer", json_object_get(root, "normalizer"), pre,
				sizeof(pre)));
		if (!strcmp(pre, "NFC"))
			t->nfc = 1;
		else if (pre[0])
			return refuse(file, "normalizer.type", pre, "NFC or null for BPE");
		CLP_TRY(bpe_pre(t, file, root));
		CLP_TRY(bpe_model(t, file, model));
	} else {
		clp_tok_wp_defaults(t);
		CLP_TRY(wp_norm(t, file, root));
		CLP_TRY(type_of(file, "pre_tokenizer", json_object_get(root, "pre_tokenizer"), pre,
				sizeof(pre)));
		if (strcmp(pre, "BertPreTokenizer"))
			return refuse(file, "pre_tokenizer.type", pre[0] ? pre : "null",
				      "BertPreTokenizer for WordPiece");
	}
	CLP_TRY(decoder(t, file, root));
	CLP_TRY(added(t, file, json_object_get(root, "added_tokens")));
	CLP_TRY(clp_json_obj(file, "model", model, "vocab", 1, (json_t **)&vocab));
	json_object_foreach((json_t *)vocab, key, val) {
		if (!json_is_integer(val) || json_integer_value(val) < 0 ||
		    json_integer_value(val) >= INT32_MAX / 2)
			return clp_error(CLP_ERR_FORMAT, "%s: model.vocab: token \"%s\": expected an "
					 "id (an integer from 0)", file, key);
		if ((size_t)json_integer_value(val) + 1 > V)
			V = (size_t)json_integer_value(val) + 1;
	}
	for (int i = 0; i < t->nadded; i++)
		if ((size_t)t->added[i].id + 1 > V)
			V = (size_t)t->added[i].id + 1;
	if (V == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: model.vocab is empty", file);
	tok = calloc(V, sizeof(*tok));
	len = calloc(V, sizeof(*len));
	if (!tok || !len) {
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory for %zu tokens", file, V);
		goto done;
	}
	for (int b = 0; b < 256; b++)
		t->byte_id[b] = -1;
	json_object_foreach((json_t *)vocab, key, val)
		if (s == CLP_OK)
			s = put_tok(t, file, key, json_integer_value(val), tok, len, V, bpe);
	for (int i = 0; s == CLP_OK && i < t->nadded; i++) { /* added tokens show their content */
		clp_tok_added *a = &t->added[i];
		unsigned char *c = malloc(a->len ? a->len : 1);

		if (!c) {
			s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", file);
			break;
		}
		memcpy(c, a->text, a->len);
		free(tok[a->id]);
		tok[a->id] = c;
		len[a->id] = a->len;
	}
	if (s == CLP_OK)
		s = clp_tok_set_pool(t, tok, len, V);
	if (s == CLP_OK && bpe)
		s = merges(t, file, model);
	if (s == CLP_OK && !bpe)
		s = wp_model(t, file, model);
done:
	n = V;
	if (tok)
		for (size_t i = 0; i < n; i++)
			free(tok[i]);
	free(tok);
	free(len);
	return s;
}

clp_status clp_tok_json_load(clp_tok **out, const char *path)
{
	clp_tok *t = calloc(1, sizeof(*t));
	json_t *root = NULL;
	clp_status s;

	*out = NULL;
	if (!t || !(t->path = strdup(path)) || !(t->vocab_path = strdup(path))) {
		clp_tok_free(t);
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	}
	for (int r = 0; r < CLP_TOK_NROLES; r++)
		t->role[r] = -1;
	s = clp_json_load(path, &root);
	if (s == CLP_OK)
		s = load(t, path, root);
	json_decref(root);
	if (s == CLP_OK) {
		int32_t unk = t->role[CLP_TOK_UNK];

		clp_tok_roles_by_name(t);
		if (unk >= 0)
			t->role[CLP_TOK_UNK] = unk;
	}
	if (s != CLP_OK) {
		clp_tok_free(t);
		return s;
	}
	*out = t;
	return CLP_OK;
}
