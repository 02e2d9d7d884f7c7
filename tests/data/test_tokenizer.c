/* Tokenisers: the byte tokeniser, GPT-2's pre-tokeniser split, BPE on a small synthetic
 * vocab.json / merges.txt written in GPT-2's formats, and malformed files. */
#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer.h"
#include "tests/data/testutil.h"

static void test_byte(void)
{
	clp_tok *t = NULL;
	clp_ids ids = {0};
	const char text[] = "h\xc3\xa9llo\xff\x00z";
	char *back = NULL;
	size_t n;
	int32_t bad[] = {65, 300};

	CHECK_OK(clp_tok_byte_create(&t, clp_tok_specials_gpt, clp_tok_specials_gpt_n));
	if (!t)
		return;
	CHECK(clp_tok_vocab_size(t) == 257, "vocab %d", clp_tok_vocab_size(t));
	CHECK(clp_tok_special_id(t, "<|endoftext|>") == 256, "eot");
	CHECK(clp_tok_special_id(t, "[MASK]") == -1, "no mask");
	CHECK(clp_tok_is_special(t, 256) && !clp_tok_is_special(t, 255), "is_special");
	CHECK_OK(clp_tok_encode(t, text, sizeof(text) - 1, &ids));
	CHECK(ids.n == sizeof(text) - 1, "%zu ids", ids.n);
	for (size_t i = 0; i < ids.n; i++)
		CHECK(ids.v[i] == (unsigned char)text[i], "id %zu", i);
	CHECK_OK(clp_ids_push(&ids, 256));
	CHECK_OK(clp_tok_decode(t, ids.v, ids.n, &back, &n));
	CHECK(back && n == sizeof(text) - 1 + 13 && !memcmp(back, text, sizeof(text) - 1) &&
	      !strcmp(back + sizeof(text) - 1, "<|endoftext|>"), "decode");
	free(back);
	CHECK_ERR(clp_tok_decode(t, bad, 2, &back, &n), CLP_ERR_INVALID, "300", "position 1");
	clp_ids_free(&ids);
	clp_tok_free(t);

	CHECK_OK(clp_tok_byte_create(&t, clp_tok_specials_bert, clp_tok_specials_bert_n));
	if (t) {
		CHECK(clp_tok_vocab_size(t) == 261 && clp_tok_special_id(t, "[PAD]") == 256 &&
		      clp_tok_special_id(t, "[MASK]") == 259 &&
		      clp_tok_special_id(t, "[UNK]") == 260, "bert specials");
		clp_tok_free(t);
	}
	{
		const char *dup[] = {"[A]", "[A]"};

		CHECK_ERR(clp_tok_byte_create(&t, dup, 2), CLP_ERR_INVALID, "[A]", "twice");
	}
	CHECK_OK(clp_tok_byte_create(&t, NULL, 0));
	if (t) {
		tu_write_str(tu_path("empty.txt"), "");
		CHECK_ERR(clp_tok_encode_file(t, tu_path("empty.txt"), &ids), CLP_ERR_FORMAT,
			  "empty.txt", "empty");
		CHECK_ERR(clp_tok_encode_file(t, tu_path("missing.txt"), &ids), CLP_ERR_NOT_FOUND,
			  "missing.txt");
		tu_write_str(tu_path("a.txt"), "abc");
		CHECK_OK(clp_tok_encode_file(t, tu_path("a.txt"), &ids));
		CHECK(ids.n == 3 && ids.v[2] == 'c', "file ids");
		clp_ids_free(&ids);
		clp_tok_free(t);
	}
}

/* The pieces of GPT-2's split joined by '|'. */
static const char *split(const char *text)
{
	static char out[1024];
	size_t n = strlen(text), o = 0;

	for (size_t i = 0; i < n;) {
		size_t e = clp_tok_gpt2_split(text, n, i);

		if (e <= i || e > n) {
			snprintf(out, sizeof(out), "(split stuck at %zu)", i);
			return out;
		}
		if (i)
			out[o++] = '|';
		memcpy(out + o, text + i, e - i);
		o += e - i;
		i = e;
	}
	out[o] = '\0';
	return out;
}

static void test_split(void)
{
	/* expected pieces, checked against Python's regex module with GPT-2's pattern */
	static const char *const cases[][2] = {
		{"Hello world", "Hello| world"},
		{"I'm you'll they've it's don't we'd I've he're",
		 "I|'m| you|'ll| they|'ve| it|'s| don|'t| we|'d| I|'ve| he|'re"},
		{"'S 'sup", "'|S| '|sup"},
		{"'sup", "'s|up"},
		{"abc123def 42", "abc|123|def| 42"},
		{"hello!!! ok?!", "hello|!!!| ok|?!"},
		{"a  b", "a| | b"},
		{"a\n\nb", "a|\n|\n|b"},
		{"end   ", "end|   "},
		{"x \t y", "x| \t| y"},
		{"  hello", " | hello"},
		{"it''s ?'s", "it|''|s| ?'|s"},
		{"na\xc3\xafve caf\xc3\xa9", "na\xc3\xafve| caf\xc3\xa9"},
		{"\xe6\x97\xa5\xe6\x9c\xac \xe3\x83\x86\xe3\x82\xb9",
		 "\xe6\x97\xa5\xe6\x9c\xac| \xe3\x83\x86\xe3\x82\xb9"},
		{"\xd9\xa3\xd9\xa4" "abc", "\xd9\xa3\xd9\xa4|abc"},
		{"e\xcc\x81x", "e|\xcc\x81|x"},
		{"a\xc2\xa0" "b", "a|\xc2\xa0|b"},
		{"ab\xff\xfe" "cd", "ab|\xff\xfe|cd"},
		{"x'", "x|'"},
		{" ", " "},
		{"\n", "\n"},
		{"a \n b", "a| \n| b"},
		{"3.14 -2", "3|.|14| -|2"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = split(cases[i][0]);

		CHECK(!strcmp(got, cases[i][1]), "split \"%s\": got \"%s\", want \"%s\"",
		      cases[i][0], got, cases[i][1]);
	}
}

/* GPT-2's bytes_to_unicode, written independently of the library's, as UTF-8. */
static void gpt2_char(int b, char *out)
{
	int cp = b, n = 0;

	if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))) {
		for (int c = 0; c < b; c++)
			if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) ||
			      (c >= 0xae && c <= 0xff)))
				n++;
		cp = 256 + n;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = 0;
	} else {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = 0;
	}
}

/* Token string (raw bytes) in GPT-2's alphabet, JSON-escaped for '"' and '\\'. */
static void gpt2_str(const char *raw, char *out)
{
	out[0] = 0;
	for (const char *p = raw; *p; p++) {
		char c[4];

		gpt2_char((unsigned char)*p, c);
		if (c[0] == '"' || c[0] == '\\')
			strcat(out, "\\");
		strcat(out, c);
	}
}

/* merges (raw "a b" with '_' standing for a space) -> vocab.json and merges.txt; every byte gets
 * a token except those in `missing`. Returns the id of the first merge result. */
static int write_bpe(const char *const *merges, int nm, const char *missing)
{
	static char vocab[65536], mtext[8192];
	char s[64];
	int id = 0;

	strcpy(vocab, "{");
	for (int b = 0; b < 256; b++) {
		char raw[2] = {(char)b, 0};

		if (b == 0 || (missing && strchr(missing, b)))
			continue; /* byte 0 handled below: it cannot be in a C string */
		gpt2_str(raw, s);
		sprintf(vocab + strlen(vocab), "%s\"%s\": %d", id ? ", " : "", s, id);
		id++;
	}
	sprintf(vocab + strlen(vocab), ", \"\\u0100\": %d", id++); /* byte 0 is U+0100 */
	strcpy(mtext, "#version: 0.2\n");
	for (int i = 0; i < nm; i++) {
		char a[32], b[32], ab[64], ea[64], eb[64], eab[128];
		const char *sp = strchr(merges[i], ' ');

		snprintf(a, sizeof(a), "%.*s", (int)(sp - merges[i]), merges[i]);
		snprintf(b, sizeof(b), "%s", sp + 1);
		for (char *q = a; *q; q++)
			*q = *q == '_' ? ' ' : *q;
		for (char *q = b; *q; q++)
			*q = *q == '_' ? ' ' : *q;
		snprintf(ab, sizeof(ab), "%s%s", a, b);
		gpt2_str(a, ea);
		gpt2_str(b, eb);
		gpt2_str(ab, eab);
		sprintf(mtext + strlen(mtext), "%s %s\n", ea, eb);
		sprintf(vocab + strlen(vocab), ", \"%s\": %d", eab, id++);
	}
	sprintf(vocab + strlen(vocab), ", \"<|endoftext|>\": %d}", id);
	tu_write_str(tu_path("vocab.json"), vocab);
	tu_write_str(tu_path("merges.txt"), mtext);
	return id - nm;
}

static clp_tok *load_bpe(void)
{
	clp_tok *t = NULL;

	CHECK_OK(clp_tok_gpt2_load(&t, tu_path("vocab.json"), tu_path("merges.txt")));
	return t;
}

/* Encode and return the tokens as text joined by '|'. */
static const char *enc(clp_tok *t, const char *text)
{
	static char out[1024];
	clp_ids ids = {0};
	size_t o = 0;

	out[0] = 0;
	if (clp_tok_encode(t, text, strlen(text), &ids) != CLP_OK) {
		snprintf(out, sizeof(out), "(error: %s)", clp_last_error());
		return out;
	}
	for (size_t i = 0; i < ids.n; i++) {
		const char *b;
		size_t l;

		if (clp_tok_token(t, ids.v[i], &b, &l) != CLP_OK)
			break;
		if (i)
			out[o++] = '|';
		memcpy(out + o, b, l);
		o += l;
	}
	out[o] = 0;
	clp_ids_free(&ids);
	return out;
}

static void test_bpe(void)
{
	static const char *const merges[] = {
		"h e", "l l", "he ll", "hell o", "_ w", "o r", "_w or", "l d", "_wor ld", "a a",
	};
	clp_tok *t;
	clp_ids ids = {0};
	unsigned char all[512];
	char *back = NULL;
	size_t n;
	int first = write_bpe(merges, 10, NULL);

	t = load_bpe();
	if (!t)
		return;
	CHECK(!strcmp(clp_tok_kind(t), "gpt2"), "kind");
	CHECK(clp_tok_vocab_size(t) == 256 + 10 + 1, "vocab %d", clp_tok_vocab_size(t));
	CHECK(clp_tok_special_id(t, "<|endoftext|>") == 266, "eot %d",
	      clp_tok_special_id(t, "<|endoftext|>"));
	CHECK(!strcmp(enc(t, "hello world"), "hello| world"), "got %s", enc(t, "hello world"));
	CHECK_OK(clp_tok_encode(t, "hello world", 11, &ids));
	CHECK(ids.n == 2 && ids.v[0] == first + 3 && ids.v[1] == first + 8, "ids %d %d",
	      ids.n ? ids.v[0] : -1, ids.n > 1 ? ids.v[1] : -1);
	clp_ids_free(&ids);
	/* the cache gives the same answer the second time */
	for (int rep = 0; rep < 2; rep++)
		CHECK(!strcmp(enc(t, "hello hello hello"), "hello| |hello| |hello"), "%s",
		      enc(t, "hello hello hello"));
	CHECK(!strcmp(enc(t, "hellohello"), "hello|hello"), "%s", enc(t, "hellohello"));
	CHECK(!strcmp(enc(t, "aaa"), "aa|a"), "aaa: %s", enc(t, "aaa"));
	CHECK(!strcmp(enc(t, "aaaa"), "aa|aa"), "aaaa: %s", enc(t, "aaaa"));
	CHECK(!strcmp(enc(t, " world's"), " world|'|s"), "%s", enc(t, " world's"));
	CHECK(!strcmp(enc(t, "<|endoftext|>"), "<|||e|n|d|o|f|t|e|x|t|||>"),
	      "specials from text: %s", enc(t, "<|endoftext|>"));
	/* every byte value (invalid UTF-8 included) round-trips */
	for (int i = 0; i < 512; i++)
		all[i] = (unsigned char)(i * 7 + 3);
	CHECK_OK(clp_tok_encode(t, (const char *)all, sizeof(all), &ids));
	CHECK_OK(clp_tok_decode(t, ids.v, ids.n, &back, &n));
	CHECK(back && n == sizeof(all) && !memcmp(back, all, n), "byte round trip");
	free(back);
	clp_ids_free(&ids);
	clp_tok_free(t);

	/* merge priority: the lower rank wins whatever the position */
	{
		static const char *const ab_first[] = {"a b", "b c"}, *const bc_first[] = {"b c", "a b"};

		write_bpe(ab_first, 2, NULL);
		if ((t = load_bpe())) {
			CHECK(!strcmp(enc(t, "abc"), "ab|c"), "ab first: %s", enc(t, "abc"));
			clp_tok_free(t);
		}
		write_bpe(bc_first, 2, NULL);
		if ((t = load_bpe())) {
			CHECK(!strcmp(enc(t, "abc"), "a|bc"), "bc first: %s", enc(t, "abc"));
			clp_tok_free(t);
		}
	}
	/* a byte without a token */
	write_bpe(merges, 0, "\xff");
	if ((t = load_bpe())) {
		CHECK_ERR(clp_tok_encode(t, "ok\xff", 3, &ids), CLP_ERR_INVALID, "0xff",
			  "offset 2", "vocab.json");
		clp_ids_free(&ids);
		clp_tok_free(t);
	}
}

static void test_bpe_errors(void)
{
	static const char *const merges[] = {"h e", "l l"};
	clp_tok *t = NULL;
	char v[1024], m[1024];

	snprintf(v, sizeof(v), "%s", tu_path("vocab.json"));
	snprintf(m, sizeof(m), "%s", tu_path("merges.txt"));
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("nope.json"), m), CLP_ERR_IO, "nope.json");
	tu_write_str(tu_path("bad.json"), "");
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("bad.json"), m), CLP_ERR_FORMAT, "bad.json",
		  "empty");
	tu_write_str(tu_path("bad.json"), "{\"a\": 0,\n \"b\": }");
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("bad.json"), m), CLP_ERR_FORMAT,
		  "bad.json: line 2 column 7", "not valid JSON"); /* the one JSON message format */
	tu_write_str(tu_path("bad.json"), "{\"a\": 0, \"b\": 0}");
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("bad.json"), m), CLP_ERR_FORMAT, "bad.json",
		  "id 0");
	tu_write_str(tu_path("bad.json"), "{\"a\": 0, \"b\": 5}");
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("bad.json"), m), CLP_ERR_FORMAT, "bad.json",
		  "\"b\"", "out of range");
	tu_write_str(tu_path("bad.json"), "{\"a b\": 0}");
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("bad.json"), m), CLP_ERR_FORMAT, "bad.json",
		  "U+0020");
	tu_write_str(tu_path("bad.json"), "[1, 2]");
	CHECK_ERR(clp_tok_gpt2_load(&t, tu_path("bad.json"), m), CLP_ERR_FORMAT, "bad.json",
		  "object");

	write_bpe(merges, 2, NULL);
	tu_write_str(m, "#version: 0.2\nh e\nl l l\n");
	CHECK_ERR(clp_tok_gpt2_load(&t, v, m), CLP_ERR_FORMAT, "merges.txt:3", "two tokens");
	tu_write_str(m, "h e\nx yz\n");
	CHECK_ERR(clp_tok_gpt2_load(&t, v, m), CLP_ERR_FORMAT, "merges.txt:2", "\"yz\"",
		  "not a token");
	tu_write_str(m, "h e\nl l\nx y\n");
	CHECK_ERR(clp_tok_gpt2_load(&t, v, m), CLP_ERR_FORMAT, "merges.txt:3", "merge of",
		  "not a token");
	tu_write_str(m, "h e\r\nl l\r\nh e\r\n");
	CHECK_ERR(clp_tok_gpt2_load(&t, v, m), CLP_ERR_FORMAT, "merges.txt:3", "listed before");
	tu_write_str(m, "");
	CHECK_ERR(clp_tok_gpt2_load(&t, v, m), CLP_ERR_FORMAT, "merges.txt", "empty");
	tu_write_str(m, "h e\n\nl l\n"); /* blank lines are skipped; CRLF and LF both fine */
	CHECK_OK(clp_tok_gpt2_load(&t, v, m));
	clp_tok_free(t);
}

TH_MAIN(TH_TEST(test_byte), TH_TEST(test_split), TH_TEST(test_bpe), TH_TEST(test_bpe_errors))
