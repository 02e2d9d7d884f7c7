/* WordPiece as BERT and Hugging Face `tokenizers` do it: BertNormalizer (clean text, space
 * around Chinese characters, NFD with the nonspacing marks removed, lowercase), BertPreTokenizer
 * (split at whitespace, each punctuation character a word of its own), then greedy
 * longest-match-first pieces with the "##" continuation prefix, a word with no split or longer
 * than max_input_chars_per_word being [UNK]; vocab.txt; the WordPiece decoder. */
#include "engine/data/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "engine/data/unicode.h"

enum { CHUNK = 1 << 16 }; /* text is normalised this many bytes at a time, cut at a space */

typedef struct cpbuf {
	int32_t *v;
	size_t n, cap;
} cpbuf;

static int cp_push(cpbuf *b, int32_t c)
{
	if (b->n == b->cap) {
		size_t ncap = b->cap ? 2 * b->cap : 1024;
		int32_t *v = realloc(b->v, ncap * sizeof(*v));

		if (!v)
			return -1;
		b->v = v;
		b->cap = ncap;
	}
	b->v[b->n++] = c;
	return 0;
}

void clp_tok_wp_defaults(clp_tok *t)
{
	t->kind = CLP_TOK_WORDPIECE;
	t->clean_text = t->chinese = t->strip_accents = t->lowercase = 1;
	t->max_chars = 100;
	t->cleanup = 1;
	strcpy(t->prefix, "##");
}

static int is_chinese(int32_t c)
{
	return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) ||
	       (c >= 0x20000 && c <= 0x2a6df) || (c >= 0x2a700 && c <= 0x2b73f) ||
	       (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
	       (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

static int is_ws(int32_t c)
{
	return c == '\t' || c == '\n' || c == '\r' || clp_uni_is_space(c);
}

static int is_punct(int32_t c)
{
	if (c < 0x80)
		return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
		       (c >= 123 && c <= 126);
	return clp_uni_is_punct(c);
}

/* BertNormalizer over text[0..len) into *b (a, c are scratch). */
static int normalize(const clp_tok *t, const char *text, size_t len, cpbuf *b, cpbuf *a)
{
	const unsigned char *s = (const unsigned char *)text;

	a->n = 0;
	for (size_t i = 0; i < len;) {
		int32_t c;

		i += (size_t)clp_utf8_decode(s + i, len - i, &c);
		if (c < 0)
			c = 0xfffd; /* what a lossy UTF-8 reading gives */
		if (t->clean_text) {
			if (c == 0 || c == 0xfffd || (c != '\t' && c != '\n' && c != '\r' &&
						      clp_uni_is_other(c)))
				continue;
			if (is_ws(c))
				c = ' ';
		}
		if (t->chinese && is_chinese(c)) {
			if (cp_push(a, ' ') || cp_push(a, c) || cp_push(a, ' '))
				return -1;
		} else if (cp_push(a, c)) {
			return -1;
		}
	}
	b->n = 0;
	if (t->strip_accents) {
		size_t need = clp_uni_nfd(a->v, a->n, b->v, b->cap);

		if (need > b->cap) {
			int32_t *v = realloc(b->v, need * sizeof(*v));

			if (!v)
				return -1;
			b->v = v;
			b->cap = need;
			clp_uni_nfd(a->v, a->n, b->v, b->cap);
		}
		b->n = 0;
		for (size_t i = 0; i < need; i++)
			if (!clp_uni_is_mark(b->v[i]))
				b->v[b->n++] = b->v[i];
	} else {
		for (size_t i = 0; i < a->n; i++)
			if (cp_push(b, a->v[i]))
				return -1;
	}
	if (t->lowercase) {
		a->n = 0;
		for (size_t i = 0; i < b->n; i++) {
			int32_t lo[2];
			int k = clp_uni_lower(b->v[i], lo);

			for (int j = 0; j < k; j++)
				if (cp_push(a, lo[j]))
					return -1;
		}
		cpbuf tmp = *a;

		*a = *b;
		*b = tmp;
	}
	return 0;
}

/* WordPiece of one word (n code points). */
static clp_status word(clp_tok *t, const int32_t *w, size_t n, clp_ids *out)
{
	int32_t unk = t->role[CLP_TOK_UNK];
	size_t saved = out->n, pl = strlen(t->prefix), *boff, nb = 0;
	unsigned char *bytes, *key;

	if (unk < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: the WordPiece vocabulary has no unknown "
				 "token (unk_token)", clp_tok_path(t));
	if (n > (size_t)t->max_chars)
		return clp_ids_push(out, unk);
	/* scratch: byte offsets (n + 1), the word's bytes (4n), a key (prefix + 4n) */
	if (t->nwbuf < (n + 1) * sizeof(size_t) + 8 * n + pl) {
		size_t need = (n + 1) * sizeof(size_t) + 8 * n + pl + 64;
		unsigned char *p = realloc(t->wbuf, need);

		if (!p)
			return clp_error(CLP_ERR_NOMEM, "out of memory");
		t->wbuf = p;
		t->nwbuf = need;
	}
	boff = (size_t *)(void *)t->wbuf;
	bytes = t->wbuf + (n + 1) * sizeof(size_t);
	key = bytes + 4 * n;
	for (size_t i = 0; i < n; i++) {
		boff[i] = nb;
		nb += (size_t)clp_utf8_encode(w[i], bytes + nb);
	}
	boff[n] = nb;
	for (size_t start = 0; start < n;) {
		int64_t id = -1;
		size_t end;

		for (end = n; end > start; end--) {
			size_t kl = 0, bl = boff[end] - boff[start];

			if (start > 0) {
				memcpy(key, t->prefix, pl);
				kl = pl;
			}
			memcpy(key + kl, bytes + boff[start], bl);
			if (clp_smap_get(&t->tok2id, key, kl + bl, &id))
				break;
		}
		if (end == start) { /* no piece: the whole word is unknown */
			out->n = saved;
			return clp_ids_push(out, unk);
		}
		CLP_TRY(clp_ids_push(out, (int32_t)id));
		start = end;
	}
	return CLP_OK;
}

static clp_status encode_chunk(clp_tok *t, const char *text, size_t len, cpbuf *b, cpbuf *a,
			       clp_ids *out)
{
	size_t i = 0;

	if (normalize(t, text, len, b, a))
		return clp_error(CLP_ERR_NOMEM, "out of memory normalising %zu bytes", len);
	while (i < b->n) {
		size_t j;

		if (is_ws(b->v[i])) {
			i++;
			continue;
		}
		if (is_punct(b->v[i])) {
			CLP_TRY(word(t, b->v + i, 1, out));
			i++;
			continue;
		}
		for (j = i; j < b->n && !is_ws(b->v[j]) && !is_punct(b->v[j]); j++)
			;
		CLP_TRY(word(t, b->v + i, j - i, out));
		i = j;
	}
	return CLP_OK;
}

clp_status clp_tok_wp_encode(clp_tok *t, const char *text, size_t len, clp_ids *out)
{
	cpbuf a = {0}, b = {0};
	clp_status s = CLP_OK;

	/* normalisation and splitting never look across an ASCII space or newline */
	for (size_t i = 0; s == CLP_OK && i < len;) {
		size_t e = len - i > CHUNK ? i + CHUNK : len;

		while (e < len && text[e] != ' ' && text[e] != '\n')
			e++;
		s = encode_chunk(t, text + i, e - i, &b, &a, out);
		i = e;
	}
	free(a.v);
	free(b.v);
	return s;
}

/* tokenizers' WordPiece decoder cleanup, applied to each token with its leading space. */
static size_t cleanup(char *s, size_t n)
{
	static const char *const rep[][2] = {
		{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
		{" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"},
		{" 're", "'re"},
	};

	for (size_t r = 0; r < sizeof(rep) / sizeof(rep[0]); r++) {
		size_t fl = strlen(rep[r][0]), tl = strlen(rep[r][1]), w = 0;

		for (size_t i = 0; i < n;) { /* replacements are never longer than the text */
			if (i + fl <= n && !memcmp(s + i, rep[r][0], fl)) {
				memmove(s + w, rep[r][1], tl);
				w += tl;
				i += fl;
			} else {
				s[w++] = s[i++];
			}
		}
		n = w;
	}
	return n;
}

clp_status clp_tok_wp_decode(const clp_tok *t, const int32_t *ids, size_t n, char **text,
			     size_t *len)
{
	size_t total = 1, pl = strlen(t->prefix), w = 0;
	char *buf;

	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->vocab)
			return clp_error(CLP_ERR_INVALID, "token id %d at position %zu is outside "
					 "the %s vocabulary [0, %d)", (int)ids[i], i,
					 clp_tok_kind(t), t->vocab);
		total += t->off[ids[i] + 1] - t->off[ids[i]] + 1;
	}
	buf = malloc(total);
	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "out of memory decoding %zu tokens", n);
	for (size_t i = 0; i < n; i++) {
		const char *p = t->pool + t->off[ids[i]];
		size_t l = t->off[ids[i] + 1] - t->off[ids[i]], at = w;

		if (i > 0 && l >= pl && !memcmp(p, t->prefix, pl)) {
			p += pl;
			l -= pl;
		} else if (i > 0) {
			buf[w++] = ' ';
		}
		memcpy(buf + w, p, l);
		w += l;
		if (t->cleanup)
			w = at + cleanup(buf + at, w - at);
	}
	buf[w] = '\0';
	*text = buf;
	*len = w;
	return CLP_OK;
}

clp_status clp_tok_vocab_txt_load(clp_tok **out, const char *path)
{
	static const char *const names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
	char *text;
	size_t n, ntok = 0, k = 0;
	unsigned char **tok;
	size_t *len;
	clp_tok *t;
	clp_status s = CLP_OK;

	*out = NULL;
	CLP_TRY(clp_io_read_file(path, &text, &n));
	for (size_t i = 0; i < n; i++)
		ntok += text[i] == '\n';
	ntok += n > 0 && text[n - 1] != '\n';
	if (ntok == 0 || ntok > (size_t)INT32_MAX / 2) {
		free(text);
		return clp_error(CLP_ERR_FORMAT, "%s: %s", path, ntok ? "too many lines for a "
				 "vocabulary" : "the vocabulary is empty");
	}
	t = calloc(1, sizeof(*t));
	tok = calloc(ntok, sizeof(*tok));
	len = calloc(ntok, sizeof(*len));
	if (!t || !tok || !len || !(t->path = strdup(path))) {
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
		goto done;
	}
	clp_tok_wp_defaults(t);
	for (char *p = text; k < ntok; k++) { /* one token a line; trailing whitespace dropped */
		char *eol = memchr(p, '\n', (size_t)(text + n - p)), *e = eol ? eol : text + n;

		while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		tok[k] = (unsigned char *)p;
		len[k] = (size_t)(e - p);
		if (clp_smap_put(&t->tok2id, p, len[k], (int64_t)k) != 0) {
			s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
			goto done;
		}
		p = eol ? eol + 1 : text + n;
	}
	s = clp_tok_set_pool(t, tok, len, ntok);
	t->special = malloc(5 * sizeof(*t->special));
	if (s == CLP_OK && !t->special)
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
	for (int i = 0; s == CLP_OK && i < 5; i++) {
		int64_t id;

		if (clp_smap_get(&t->tok2id, names[i], strlen(names[i]), &id))
			t->special[t->nspecial++] = (int32_t)id;
	}
	if (s == CLP_OK)
		clp_tok_roles_by_name(t);
	if (s == CLP_OK && t->role[CLP_TOK_UNK] < 0)
		s = clp_error(CLP_ERR_FORMAT, "%s: a WordPiece vocabulary needs the unknown token "
			      "[UNK] (BERT's default); it has none", path);
done:
	free(tok);
	free(len);
	free(text);
	if (s != CLP_OK) {
		clp_tok_free(t);
		return s;
	}
	*out = t;
	return CLP_OK;
}
