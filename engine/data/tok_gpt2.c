/* Byte-level BPE: loading GPT-2's vocab.json and merges.txt, GPT-2's pre-tokeniser, the
 * rank-based merge loop with a cache, shared with tokenizer.json's BPE (see tokenizer.h and
 * docs/DATA.md). */
#include "engine/data/tok_internal.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/unicode.h"
#include "cl/base/durable.h"
#include "cl/base/json_util.h"

enum {
	CACHE_MAX_PIECE = 256,       /* longer pieces are merged every time */
	CACHE_MAX_ENTRIES = 1 << 16, /* then the cache starts over */
};

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
 * are mapped in order to U+0100 ... U+0143, so every token is a printable string. */
static int32_t byte_to_cp(int b)
{
	int n = 0;

	if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
		return b;
	for (int c = 0; c < b; c++)
		if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff)))
			n++;
	return 256 + n;
}

static int inv_map[324];
static pthread_once_t inv_once = PTHREAD_ONCE_INIT;

static void inv_init(void)
{
	for (int i = 0; i < 324; i++)
		inv_map[i] = -1;
	for (int b = 0; b < 256; b++)
		inv_map[byte_to_cp(b)] = b;
}

/* Inverse of byte_to_cp over GPT-2's alphabet; -1 for any other code point. */
static int cp_to_byte(int32_t cp)
{
	pthread_once(&inv_once, inv_init);
	return cp >= 0 && cp < 324 ? inv_map[cp] : -1;
}

/* Map a token string in GPT-2's alphabet to raw bytes (out holds at least len bytes). Returns the
 * byte count, or -1 with *bad set to the offending code point. */
long clp_tok_bytelevel_unmap(const char *s, size_t len, unsigned char *out, int32_t *bad)
{
	long n = 0;

	for (size_t i = 0; i < len;) {
		int32_t cp;
		int l = clp_utf8_decode((const unsigned char *)s + i, len - i, &cp);
		int b = cp_to_byte(cp);

		if (b < 0) {
			*bad = cp;
			return -1;
		}
		out[n++] = (unsigned char)b;
		i += (size_t)l;
	}
	return n;
}

static clp_status check_file(const char *path, const char *what)
{
	struct stat st;

	if (!path || !path[0])
		return clp_error(CLP_ERR_INVALID, "gpt2 tokenizer: no %s path given", what);
	if (stat(path, &st) != 0)
		return clp_error(CLP_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(errno));
	if (!S_ISREG(st.st_mode)) /* a FIFO would block the reader, a device never end */
		return clp_error(CLP_ERR_IO, "%s: the %s is not a regular file", path, what);
	if (st.st_size == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: the %s file is empty", path, what);
	return CLP_OK;
}

static clp_status load_vocab(clp_tok *t, const char *path)
{
	json_t *root, *val;
	const char *key;
	unsigned char **tok = NULL;
	size_t *len = NULL, n, pool = 0;
	clp_status s = CLP_OK;

	CLP_TRY(check_file(path, "vocab"));
	CLP_TRY(clp_json_load(path, &root));
	if (!json_is_object(root) || json_object_size(root) == 0) {
		s = clp_error(CLP_ERR_FORMAT, "%s: expected a JSON object of token -> id", path);
		goto free_root;
	}
	n = json_object_size(root);
	if (n > (size_t)INT32_MAX / 2) {
		s = clp_error(CLP_ERR_FORMAT, "%s: %zu tokens is too many", path, n);
		goto free_root;
	}
	tok = calloc(n, sizeof(*tok));
	len = calloc(n, sizeof(*len));
	if (!tok || !len) {
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
		goto free_tok;
	}
	json_object_foreach(root, key, val) {
		size_t klen = strlen(key);
		json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
		int32_t bad = 0;
		long bl;

		if (id < 0 || (size_t)id >= n) {
			s = clp_error(CLP_ERR_FORMAT, "%s: token \"%s\" has id %s; ids must be "
				      "integers 0..%zu (the vocabulary has %zu tokens)", path, key,
				      json_is_integer(val) ? "out of range" : "that is not an integer",
				      n - 1, n);
			goto free_tok;
		}
		if (tok[id]) {
			s = clp_error(CLP_ERR_FORMAT, "%s: id %lld is given to two tokens (one is "
				      "\"%s\")", path, (long long)id, key);
			goto free_tok;
		}
		tok[id] = malloc(klen ? klen : 1);
		if (!tok[id]) {
			s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
			goto free_tok;
		}
		bl = clp_tok_bytelevel_unmap(key, klen, tok[id], &bad);
		if (bl <= 0) {
			s = bl == 0 ? clp_error(CLP_ERR_FORMAT, "%s: the empty token (id %lld) is "
						"not allowed", path, (long long)id)
				    : clp_error(CLP_ERR_FORMAT, "%s: token \"%s\" (id %lld) has the "
						"character U+%04X, which is not in GPT-2's byte "
						"alphabet", path, key, (long long)id, (unsigned)bad);
			goto free_tok;
		}
		len[id] = (size_t)bl;
		pool += (size_t)bl;
		if (!strcmp(key, "<|endoftext|>")) {
			t->special = malloc(sizeof(*t->special));
			if (!t->special) {
				s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
				goto free_tok;
			}
			t->special[0] = (int32_t)id;
			t->nspecial = 1;
		}
	}
	t->vocab = (int)n;
	t->pool = malloc(pool ? pool : 1);
	t->off = malloc((n + 1) * sizeof(*t->off));
	if (!t->pool || !t->off) {
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
		goto free_tok;
	}
	for (int b = 0; b < 256; b++)
		t->byte_id[b] = -1;
	t->off[0] = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(t->pool + t->off[i], tok[i], len[i]);
		t->off[i + 1] = t->off[i] + len[i];
		if (len[i] == 1)
			t->byte_id[tok[i][0]] = (int32_t)i;
		if (clp_smap_put(&t->tok2id, tok[i], len[i], (int64_t)i) != 0) {
			s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", path);
			goto free_tok;
		}
	}
	if (t->tok2id.n != n)
		s = clp_error(CLP_ERR_FORMAT, "%s: two tokens stand for the same bytes", path);
free_tok:
	if (tok)
		for (size_t i = 0; i < n; i++)
			free(tok[i]);
	free(tok);
	free(len);
free_root:
	json_decref(root);
	return s;
}

/* One side of a merge as a vocabulary id. */
static clp_status merge_field(clp_tok *t, const char *where, const char *f, size_t fl,
			      unsigned char *buf, int32_t *id, size_t *blen)
{
	int32_t bad = 0;
	long bl = clp_tok_bytelevel_unmap(f, fl, buf, &bad);
	int64_t v;

	if (bl < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: \"%.*s\" has the character U+%04X, which "
				 "is not in GPT-2's byte alphabet", where, (int)fl, f,
				 (unsigned)bad);
	if (!clp_smap_get(&t->tok2id, buf, (size_t)bl, &v))
		return clp_error(CLP_ERR_FORMAT, "%s: \"%.*s\" is not a token of %s", where,
				 (int)fl, f, t->vocab_path);
	*id = (int32_t)v;
	*blen = (size_t)bl;
	return CLP_OK;
}

clp_status clp_tok_bpe_add_merge(clp_tok *t, const char *where, const char *a, size_t la,
				 const char *b, size_t lb, uint64_t rank)
{
	unsigned char sbuf[512], *buf = la + lb <= sizeof(sbuf) ? sbuf : malloc(la + lb);
	int32_t ia = -1, ib = -1; /* set by merge_field on success (GCC -O3 cannot see it) */
	size_t ba = 0, bb = 0;
	int64_t merged;
	uint64_t old;
	clp_status s;

	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "%s: out of memory", where);
	s = merge_field(t, where, a, la, buf, &ia, &ba);
	if (s == CLP_OK)
		s = merge_field(t, where, b, lb, buf + ba, &ib, &bb);
	if (s == CLP_OK && !clp_smap_get(&t->tok2id, buf, ba + bb, &merged))
		s = clp_error(CLP_ERR_FORMAT, "%s: the merge of \"%.*s\" and \"%.*s\" is not a "
			      "token of %s", where, (int)la, a, (int)lb, b, t->vocab_path);
	if (s == CLP_OK && clp_umap_get(&t->merges, (uint64_t)ia << 32 | (uint32_t)ib, &old))
		s = clp_error(CLP_ERR_FORMAT, "%s: the pair \"%.*s %.*s\" was listed before "
			      "(rank %llu)", where, (int)la, a, (int)lb, b,
			      (unsigned long long)(old >> 32));
	if (s == CLP_OK && clp_umap_put(&t->merges, (uint64_t)ia << 32 | (uint32_t)ib,
					rank << 32 | (uint64_t)merged) != 0)
		s = clp_error(CLP_ERR_NOMEM, "%s: out of memory", where);
	if (buf != sbuf)
		free(buf);
	return s;
}

static clp_status load_merges(clp_tok *t, const char *path)
{
	char *text, *p;
	size_t n;
	int line = 0;
	uint64_t rank = 0;
	clp_status s;

	CLP_TRY(check_file(path, "merges"));
	CLP_TRY(clp_io_read_file(path, &text, &n));
	s = CLP_OK;
	for (p = text; s == CLP_OK && p < text + n;) {
		char *eol = memchr(p, '\n', (size_t)(text + n - p));
		char *end = eol ? eol : text + n;
		const char *f[3];
		size_t fl[3];
		int nf = 0;
		char where[1100];

		line++;
		if (end > p && end[-1] == '\r')
			end--;
		if (line == 1 && end - p >= 8 && !memcmp(p, "#version", 8))
			goto next;
		for (char *q = p; q < end && nf < 3;) {
			while (q < end && (*q == ' ' || *q == '\t'))
				q++;
			if (q == end)
				break;
			f[nf] = q;
			while (q < end && *q != ' ' && *q != '\t')
				q++;
			fl[nf] = (size_t)(q - f[nf]);
			nf++;
		}
		if (nf == 0)
			goto next;
		if (nf != 2) {
			s = clp_error(CLP_ERR_FORMAT, "%s:%d: expected two tokens separated by a "
				      "space, found \"%.*s\"", path, line, (int)(end - p), p);
			break;
		}
		snprintf(where, sizeof(where), "%s:%d", path, line);
		s = clp_tok_bpe_add_merge(t, where, f[0], fl[0], f[1], fl[1], rank);
		if (s != CLP_OK)
			break;
		rank++;
next:
		p = eol ? eol + 1 : text + n;
	}
	free(text);
	return s;
}

clp_status clp_tok_gpt2_load(clp_tok **out, const char *vocab_path, const char *merges_path)
{
	clp_tok *t = calloc(1, sizeof(*t));
	clp_status s;

	*out = NULL;
	if (!t)
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	t->kind = CLP_TOK_GPT2;
	t->vocab_path = strdup(vocab_path ? vocab_path : "");
	t->path = strdup(vocab_path ? vocab_path : "");
	if (!t->vocab_path || !t->path) {
		clp_tok_free(t);
		return clp_error(CLP_ERR_NOMEM, "out of memory");
	}
	s = load_vocab(t, vocab_path);
	if (s == CLP_OK)
		s = load_merges(t, merges_path);
	if (s != CLP_OK) {
		clp_tok_free(t);
		return s;
	}
	clp_tok_roles_by_name(t);
	*out = t;
	return CLP_OK;
}

void clp_tok_gpt2_release(clp_tok *t)
{
	free(t->vocab_path);
	clp_smap_clear(&t->tok2id);
	clp_umap_clear(&t->merges);
	clp_smap_clear(&t->cache);
	clp_ids_free(&t->cache_ids);
	clp_ids_free(&t->word);
	clp_ids_free(&t->next);
}

enum { C_SPACE, C_LETTER, C_NUMBER, C_OTHER };

static int char_class(const unsigned char *s, size_t n, size_t i, size_t *next)
{
	int32_t cp;

	*next = i + (size_t)clp_utf8_decode(s + i, n - i, &cp);
	if (clp_uni_is_letter(cp))
		return C_LETTER;
	if (clp_uni_is_number(cp))
		return C_NUMBER;
	if (cp >= 0 && clp_uni_is_space(cp))
		return C_SPACE;
	return C_OTHER;
}

size_t clp_tok_gpt2_split(const char *text, size_t n, size_t i)
{
	static const char *const contr[] = {"s", "t", "re", "ve", "m", "ll", "d"};
	const unsigned char *s = (const unsigned char *)text;
	size_t j, k, last;
	int cls;

	if (s[i] == '\'')
		for (int c = 0; c < 7; c++) {
			size_t l = strlen(contr[c]);

			if (n - i - 1 >= l && !memcmp(s + i + 1, contr[c], l))
				return i + 1 + l;
		}
	cls = char_class(s, n, i, &j);
	if (s[i] == ' ' && j < n) { /* " ?X+": a single leading space joins the run after it */
		size_t after;
		int c2 = char_class(s, n, j, &after);

		if (c2 != C_SPACE) {
			cls = c2;
			j = after;
		}
	}
	if (cls != C_SPACE) {
		for (k = j; k < n;) {
			size_t after;

			if (char_class(s, n, k, &after) != cls)
				break;
			k = after;
		}
		return k;
	}
	/* "\s+(?!\S)|\s+": a whitespace run, less its last character when a non-space follows
	 * (that character then leads the next piece), unless the run is a single character */
	last = i;
	for (k = j; k < n;) {
		size_t after;

		if (char_class(s, n, k, &after) != C_SPACE)
			break;
		last = k;
		k = after;
	}
	if (k == n || last == i)
		return k;
	return last;
}

static clp_status bpe_piece(clp_tok *t, const unsigned char *p, size_t n, size_t at,
			    clp_ids *out)
{
	int64_t v;

	if (n <= CACHE_MAX_PIECE && clp_smap_get(&t->cache, p, n, &v)) {
		for (int64_t k = 0; k < (v & 0xffff); k++)
			CLP_TRY(clp_ids_push(out, t->cache_ids.v[(v >> 16) + k]));
		return CLP_OK;
	}
	if (t->ignore_merges && clp_smap_get(&t->tok2id, p, n, &v)) /* a whole-word token */
		return clp_ids_push(out, (int32_t)v);
	t->word.n = 0;
	for (size_t k = 0; k < n; k++) {
		if (t->byte_id[p[k]] < 0)
			return clp_error(CLP_ERR_INVALID, "byte 0x%02x at offset %zu has no token in "
					 "%s", p[k], at + k, t->vocab_path);
		CLP_TRY(clp_ids_push(&t->word, t->byte_id[p[k]]));
	}
	for (;;) {
		uint64_t best = UINT64_MAX, m;
		size_t bi = 0;
		int32_t *w = t->word.v, a, b;
		clp_ids tmp;

		for (size_t k = 0; k + 1 < t->word.n; k++)
			if (clp_umap_get(&t->merges, (uint64_t)w[k] << 32 | (uint32_t)w[k + 1], &m) &&
			    m < best) {
				best = m;
				bi = k;
			}
		if (best == UINT64_MAX)
			break;
		a = w[bi];
		b = w[bi + 1];
		t->next.n = 0;
		for (size_t k = 0; k < t->word.n;) {
			if (k + 1 < t->word.n && w[k] == a && w[k + 1] == b) {
				CLP_TRY(clp_ids_push(&t->next, (int32_t)(best & 0xffffffffu)));
				k += 2;
			} else {
				CLP_TRY(clp_ids_push(&t->next, w[k++]));
			}
		}
		tmp = t->word;
		t->word = t->next;
		t->next = tmp;
	}
	for (size_t k = 0; k < t->word.n; k++)
		CLP_TRY(clp_ids_push(out, t->word.v[k]));
	if (n <= CACHE_MAX_PIECE) {
		if (t->cache.n >= CACHE_MAX_ENTRIES) {
			clp_smap_clear(&t->cache);
			t->cache_ids.n = 0;
		}
		v = (int64_t)t->cache_ids.n << 16 | (int64_t)t->word.n;
		for (size_t k = 0; k < t->word.n; k++)
			CLP_TRY(clp_ids_push(&t->cache_ids, t->word.v[k]));
		if (clp_smap_put(&t->cache, p, n, v) != 0)
			return clp_error(CLP_ERR_NOMEM, "out of memory in the BPE cache");
	}
	return CLP_OK;
}

static size_t split(const clp_tok *t, const char *text, size_t len, size_t i)
{
	switch (t->split) {
	case CLP_SPLIT_LLAMA3:
		return clp_tok_llama3_split(text, len, i, 3);
	case CLP_SPLIT_QWEN2:
		return clp_tok_llama3_split(text, len, i, 1);
	case CLP_SPLIT_NONE:
		return len;
	default:
		return clp_tok_gpt2_split(text, len, i);
	}
}

/* tokenizer.json's NFC normaliser: text[0..len) in NFC into a malloc()ed *out. Invalid UTF-8
 * bytes pass through unchanged (as starters that compose with nothing). Composition never
 * crosses two ASCII bytes in a row, so the text is normalised in chunks cut there. */
static clp_status nfc_text(const char *text, size_t len, char **out, size_t *olen)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t cap = 0, ocap = len + 16, w = 0;
	int32_t *cps = NULL;
	char *o = malloc(ocap);

	if (!o)
		return clp_error(CLP_ERR_NOMEM, "out of memory normalising %zu bytes", len);
	for (size_t i = 0; i < len;) {
		size_t e = len - i > 65536 ? i + 65536 : len, n = 0;

		while (e < len && !(s[e] < 0x80 && s[e - 1] < 0x80))
			e++;
		if (cap < e - i) {
			free(cps);
			cap = e - i;
			if (!(cps = malloc(cap * sizeof(*cps))))
				break;
		}
		for (size_t k = i; k < e;) {
			int32_t c;
			int l = clp_utf8_decode(s + k, e - k, &c);

			cps[n++] = c < 0 ? -1 - (int32_t)s[k] : c;
			k += (size_t)l;
		}
		n = clp_uni_nfc(&cps, n, &cap);
		if (n == (size_t)-1)
			break;
		if (w + 4 * n > ocap) {
			char *g = realloc(o, 2 * (w + 4 * n));

			if (!g)
				break;
			o = g;
			ocap = 2 * (w + 4 * n);
		}
		for (size_t k = 0; k < n; k++) {
			if (cps[k] < 0)
				o[w++] = (char)(-1 - cps[k]);
			else
				w += (size_t)clp_utf8_encode(cps[k], (unsigned char *)o + w);
		}
		i = e;
		if (i == len) {
			free(cps);
			*out = o;
			*olen = w;
			return CLP_OK;
		}
	}
	free(cps);
	free(o);
	return clp_error(CLP_ERR_NOMEM, "out of memory normalising %zu bytes", len);
}

clp_status clp_tok_gpt2_encode(clp_tok *t, const char *text, size_t len, clp_ids *out)
{
	char *tmp = NULL, *norm = NULL;
	clp_status s = CLP_OK;

	if (t->nfc) {
		CLP_TRY(nfc_text(text, len, &norm, &len));
		text = norm;
	}
	if (t->add_prefix_space && len > 0 && text[0] != ' ') { /* ByteLevel(add_prefix_space) */
		tmp = malloc(len + 1);
		if (!tmp) {
			free(norm);
			return clp_error(CLP_ERR_NOMEM, "out of memory encoding %zu bytes", len);
		}
		tmp[0] = ' ';
		memcpy(tmp + 1, text, len);
		text = tmp;
		len++;
	}
	for (size_t i = 0; s == CLP_OK && i < len;) {
		size_t e = split(t, text, len, i);

		s = bpe_piece(t, (const unsigned char *)text + i, e - i, i - (tmp ? 1 : 0), out);
		i = e;
	}
	free(tmp);
	free(norm);
	return s;
}
