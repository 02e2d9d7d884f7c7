/* Tokenizers from Hugging Face files, against golden ids made by `tokenizers` 0.23
 * (tests/data/make_tok_fixtures.py): all-MiniLM-L6-v2's WordPiece (tokenizer.json and vocab.txt),
 * a byte-level BPE with GPT-2's pre-tokeniser, one with LLaMA-3's Split pattern and one with
 * Qwen2's pattern and NFC, on a corpus
 * with accents, punctuation, numbers, emoji, long words and control characters; decoding; the
 * special tokens' roles; and bad inputs refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cl/base/durable.h"
#include "engine/data/tokenizer.h"
#include "tests/data/testutil.h"

#define FIX CLP_TEST_SRC_DIR "/fixtures/tok"

static char *slurp(const char *path, size_t *n)
{
	char *text = NULL;

	CHECK_OK(clp_io_read_file(path, &text, n));
	return text;
}

/* The golden ids of one tokenizer from golden.txt. */
static int golden(const char *name, clp_ids *out)
{
	size_t n, nl = strlen(name);
	char *text = slurp(FIX "/golden.txt", &n);

	for (char *p = text; p && p < text + n;) {
		char *eol = strchr(p, '\n');

		if (!strncmp(p, name, nl) && p[nl] == ' ') {
			for (char *q = p + nl; q < eol;) {
				char *e;
				long v = strtol(q, &e, 10);

				if (e == q)
					break;
				clp_ids_push(out, (int32_t)v);
				q = e;
			}
			free(text);
			return 1;
		}
		p = eol ? eol + 1 : NULL;
	}
	free(text);
	return 0;
}

static void check_golden(const char *name, const char *path, const char *kind, int lossless)
{
	clp_tok *t = NULL;
	clp_ids want = {0}, got = {0};
	size_t n, len;
	char *corpus = slurp(FIX "/corpus.txt", &n), *back = NULL;

	CHECK(golden(name, &want), "%s: no golden ids", name);
	CHECK_OK(clp_tok_open(&t, path));
	if (!t || !corpus)
		goto out;
	CHECK(!strcmp(clp_tok_kind(t), kind), "%s: kind %s", name, clp_tok_kind(t));
	CHECK_OK(clp_tok_encode(t, corpus, n, &got));
	CHECK(got.n == want.n, "%s: %zu ids, tokenizers has %zu", name, got.n, want.n);
	for (size_t i = 0; i < got.n && i < want.n; i++)
		if (got.v[i] != want.v[i]) {
			const char *b;
			size_t bl = 0;

			clp_tok_token(t, got.v[i], &b, &bl);
			CHECK(0, "%s: id %zu is %d (\"%.*s\"), tokenizers has %d", name, i, got.v[i],
			      (int)bl, b, want.v[i]);
			break;
		}
	CHECK_OK(clp_tok_decode(t, got.v, got.n, &back, &len));
	if (lossless == 2) { /* NFC: the ids decode to the text in NFC, which encodes the same */
		clp_ids again = {0};

		CHECK(back && (len != n || memcmp(back, corpus, n)), "%s: NFC changed nothing", name);
		CHECK_OK(clp_tok_encode(t, back, len, &again));
		CHECK(again.n == got.n && !memcmp(again.v, got.v, got.n * sizeof(*got.v)),
		      "%s: the decoded text encodes to other ids", name);
		clp_ids_free(&again);
	} else if (lossless) {
		CHECK(back && len == n && !memcmp(back, corpus, n), "%s: decode round trip", name);
	} else if (back) {
		size_t dn;
		char *dec = slurp(FIX "/golden_decode_minilm.txt", &dn);

		CHECK(dec && dn == len && !memcmp(dec, back, dn), "%s: decode differs from "
		      "tokenizers':\n%s\n%s", name, back, dec ? dec : "");
		free(dec);
	}
	free(back);
out:
	clp_ids_free(&want);
	clp_ids_free(&got);
	free(corpus);
	clp_tok_free(t);
}

static void test_golden(void)
{
	check_golden("minilm", FIX "/minilm", "wordpiece", 0);
	check_golden("minilm_vocab_txt", FIX "/minilm/vocab.txt", "wordpiece", 0);
	check_golden("bpe_gpt2", FIX "/bpe_gpt2", "bpe", 1);
	check_golden("bpe_llama3", FIX "/bpe_llama3/tokenizer.json", "bpe", 1);
	check_golden("bpe_qwen2", FIX "/bpe_qwen2", "bpe", 2);
}

static void test_roles(void)
{
	clp_tok *t = NULL;

	CHECK_OK(clp_tok_open(&t, FIX "/minilm"));
	if (t) {
		CHECK(clp_tok_vocab_size(t) == 30522, "vocab %d", clp_tok_vocab_size(t));
		CHECK(clp_tok_role_id(t, CLP_TOK_PAD) == 0 && clp_tok_role_id(t, CLP_TOK_UNK) == 100 &&
		      clp_tok_role_id(t, CLP_TOK_CLS) == 101 &&
		      clp_tok_role_id(t, CLP_TOK_SEP) == 102 &&
		      clp_tok_role_id(t, CLP_TOK_MASK) == 103 && clp_tok_role_id(t, CLP_TOK_BOS) < 0,
		      "minilm roles");
		CHECK(clp_tok_is_special(t, 103) && !clp_tok_is_special(t, 1996), "specials");
		clp_tok_free(t);
	}
	CHECK_OK(clp_tok_open(&t, FIX "/bpe_llama3"));
	if (t) {
		int32_t bos = clp_tok_role_id(t, CLP_TOK_BOS), eos = clp_tok_role_id(t, CLP_TOK_EOS);

		CHECK(bos >= 0 && eos == bos + 1 && clp_tok_vocab_size(t) == bos + 3 &&
		      clp_tok_role_id(t, CLP_TOK_MASK) < 0, "llama3 roles %d %d", bos, eos);
		clp_tok_free(t);
	}
	CHECK_OK(clp_tok_open(&t, FIX "/bpe_gpt2"));
	if (t) {
		int32_t e = clp_tok_special_id(t, "<|endoftext|>");

		CHECK(e >= 0 && clp_tok_role_id(t, CLP_TOK_EOS) == e &&
		      clp_tok_role_id(t, CLP_TOK_BOS) == e, "gpt2 roles");
		clp_tok_free(t);
	}
}

/* A copy of the BPE fixture with one text replaced. */
static const char *variant(const char *name, const char *from, const char *to)
{
	size_t n = 0, off;
	char *text = NULL, *at, *out;
	const char *path = tu_path(name);

	/* read here, not through slurp: GCC 12 at -O3 takes the inlined slurp's result for the
	 * address of its local (-Wdangling-pointer) */
	CHECK_OK(clp_io_read_file(FIX "/bpe_gpt2/tokenizer.json", &text, &n));

	at = text ? strstr(text, from) : NULL;
	CHECK(at, "%s not in the fixture", from);
	out = at ? malloc(n + strlen(to) + 1) : NULL;
	if (!out) {
		free(text);
		return path;
	}
	off = (size_t)(at - text);
	memcpy(out, text, off);
	strcpy(out + off, to);
	strcat(out, text + off + strlen(from));
	tu_write_str(path, out);
	free(out);
	free(text);
	return path;
}

static void test_refused(void)
{
	clp_tok *t = NULL;
	const char *dirs[] = {"empty", "bad", "v", "g"};

	for (int i = 0; i < 4; i++)
		mkdir(tu_path(dirs[i]), 0755);
	tu_write_str(tu_path("empty/README"), "no tokenizer here");
	CHECK_ERR(clp_tok_open(&t, tu_path("empty")), CLP_ERR_NOT_FOUND, "empty",
		  "tokenizer.json", "vocab.txt");
	CHECK_ERR(clp_tok_open(&t, tu_path("nowhere")), CLP_ERR_NOT_FOUND, "nowhere");
	CHECK_ERR(clp_tok_open(&t, tu_path("empty/README")), CLP_ERR_INVALID, "README",
		  "not a tokenizer file");
	CHECK_ERR(clp_tok_open(&t, variant("unigram.json", "\"type\": \"BPE\"",
					   "\"type\": \"Unigram\"")),
		  CLP_ERR_UNSUPPORTED, "unigram.json", "model.type", "Unigram");
	CHECK_ERR(clp_tok_open(&t, variant("nfkc.json", "\"normalizer\": null",
					   "\"normalizer\": {\"type\": \"NFKC\"}")),
		  CLP_ERR_UNSUPPORTED, "nfkc.json", "normalizer.type", "NFKC");
	CHECK_ERR(clp_tok_open(&t, variant("meta.json", "\"type\": \"ByteLevel\"",
					   "\"type\": \"Metaspace\"")),
		  CLP_ERR_UNSUPPORTED, "meta.json", "pre_tokenizer.type", "Metaspace");
	CHECK_ERR(clp_tok_open(&t, variant("fallback.json", "\"byte_fallback\": false",
					   "\"byte_fallback\": true")),
		  CLP_ERR_UNSUPPORTED, "fallback.json", "model.byte_fallback");
	CHECK_ERR(clp_tok_open(&t, variant("lstrip.json", "\"lstrip\": false,\n      \"rstrip\": "
					   "false,\n      \"normalized\": false,\n      \"special\": true",
					   "\"lstrip\": true, \"special\": false")),
		  CLP_ERR_UNSUPPORTED, "lstrip.json", "added_tokens[0].lstrip");
	CHECK_ERR(clp_tok_open(&t, variant("merge.json", "\"merges\": [",
					   "\"merges\": [\"zz\\u0100 q\", ")),
		  CLP_ERR_FORMAT, "merge.json", "model.merges[0]");
	tu_write_str(tu_path("bad/tokenizer.json"), "{\"model\": {\"type\": \"WordPiece\", "
		     "\"vocab\": {\"a\": 0}, \"unk_token\": \"[UNK]\"}, "
		     "\"pre_tokenizer\": {\"type\": \"Whitespace\"}}");
	CHECK_ERR(clp_tok_open(&t, tu_path("bad")), CLP_ERR_UNSUPPORTED, "tokenizer.json",
		  "pre_tokenizer.type", "Whitespace");
	tu_write_str(tu_path("bad/tokenizer.json"), "{\"model\": {\"type\": \"WordPiece\", "
		     "\"vocab\": {\"a\": 0}, \"unk_token\": \"[UNK]\"}, "
		     "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}");
	CHECK_ERR(clp_tok_open(&t, tu_path("bad")), CLP_ERR_FORMAT, "unk_token", "[UNK]");
	tu_write_str(tu_path("v/vocab.txt"), "a\nb\n");
	CHECK_ERR(clp_tok_open(&t, tu_path("v")), CLP_ERR_FORMAT, "vocab.txt", "[UNK]");
	tu_write_str(tu_path("v/vocab.txt"), "[UNK]\n[MASK]\na\n##b\n");
	tu_write_str(tu_path("v/tokenizer_config.json"), "{\"mask_token\": \"<mask>\"}");
	CHECK_ERR(clp_tok_open(&t, tu_path("v")), CLP_ERR_FORMAT, "tokenizer_config.json",
		  "mask_token", "<mask>");
	tu_write_str(tu_path("v/tokenizer_config.json"), "{\"mask_token\": {\"content\": "
		     "\"[MASK]\"}, \"pad_token\": null}");
	CHECK_OK(clp_tok_open(&t, tu_path("v")));
	if (t) {
		clp_ids ids = {0};

		CHECK(clp_tok_role_id(t, CLP_TOK_MASK) == 1 && clp_tok_role_id(t, CLP_TOK_PAD) < 0,
		      "vocab.txt roles");
		CHECK_OK(clp_tok_encode(t, "AB a c", 6, &ids));
		CHECK(ids.n == 4 && ids.v[0] == 2 && ids.v[1] == 3 && ids.v[2] == 2 && ids.v[3] == 0,
		      "AB a c -> a ##b a [UNK]: %zu ids", ids.n);
		clp_ids_free(&ids);
		clp_tok_free(t);
	}
	tu_write_str(tu_path("g/vocab.json"), "{\"a\": 0}");
	CHECK_ERR(clp_tok_open(&t, tu_path("g")), CLP_ERR_NOT_FOUND, "merges.txt");
}

TH_MAIN(TH_TEST(test_golden), TH_TEST(test_roles), TH_TEST(test_refused))
