/* clpipe tokenize: text files -> one llm.c token shard (engine/data/shard.h), with the byte
 * tokeniser, GPT-2's BPE or a Hugging Face tokenizer (a model directory or file), so users can
 * bring their own corpus as data.format = "shards". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"
#include "cl/base/durable.h"
#include "tools/cli.h"

static void usage(void)
{
	printf("usage: clpipe tokenize [--tokenizer byte|gpt2|PATH] [--vocab vocab.json --merges "
	       "merges.txt]\n"
	       "                        [--eot] [--version 1|7] [--shard-tokens N] --out SHARD FILE...\n"
	       "       clpipe tokenize [--tokenizer ...] --decode --out TEXT SHARD\n\n"
	       "Encodes the files in order into one llm.c token shard (256 x int32 header; version 1\n"
	       "stores uint16 tokens, version 7 uint32; default: 1 when the vocabulary fits). With\n"
	       "--eot every file is one document and <|endoftext|> goes before each (as llm.c's\n"
	       "data scripts do); the byte tokeniser then has 257 ids. The shard is written to a\n"
	       "temporary name and renamed, so a failed run leaves an existing SHARD as it was.\n"
	       "--shard-tokens N splits the tokens into shards of N tokens (the last one the\n"
	       "rest; a single token left over joins it) named SHARD_000000.bin, SHARD_000001.bin,\n"
	       "... (SHARD without its .bin), as llm.c's data scripts do; train on them with\n"
	       "--data.path='SHARD_*.bin'.\n"
	       "--tokenizer PATH reads a model directory (tokenizer.json, else vocab.txt, else\n"
	       "vocab.json + merges.txt) or one of those files (docs/DATA.md); --eot then puts its\n"
	       "end-of-text token (<|endoftext|>, else its eos, else [SEP]).\n"
	       "--decode instead writes the text of the shard FILE (one) to --out.\n"
	       "Prints the token count and bytes per token. Train on the result with\n"
	       "--data.format=shards --data.path=SHARD (docs/DATA.md).\n");
}

static clp_status decode_shard(clp_tok *t, const char *in, const char *out)
{
	clp_shard sh = {0};
	int32_t *ids = NULL;
	char *text = NULL;
	size_t len;
	clp_status s = clp_shard_open(&sh, in, clp_tok_vocab_size(t));

	if (s == CLP_OK && !(ids = malloc(sh.ntok * sizeof(*ids))))
		s = clp_error(CLP_ERR_NOMEM, "out of host memory decoding %s", in);
	if (s == CLP_OK) {
		clp_shard_copy(&sh, 0, sh.ntok, ids);
		s = clp_tok_decode(t, ids, sh.ntok, &text, &len);
	}
	if (s == CLP_OK)
		s = clp_io_write_file(out, text, len);
	if (s == CLP_OK)
		printf("%s: %zu tokens -> %zu bytes in %s\n", in, sh.ntok, len, out);
	free(text);
	free(ids);
	clp_shard_close(&sh);
	return s;
}

/* The length of out without a trailing ".bin": the prefix of --shard-tokens' numbered files. */
static int prefix_len(const char *out)
{
	size_t len = strlen(out);

	return (int)(len > 4 && !strcmp(out + len - 4, ".bin") ? len - 4 : len);
}

/* ids in shards of at most per tokens: PREFIX_000000.bin, ... (PREFIX = out without ".bin"). A
 * tail shorter than 2 tokens joins the shard before it (a shard with one token holds no
 * sequence); each file is written durably, in order. */
static clp_status write_shards(const char *out, const clp_ids *ids, size_t per, int version)
{
	size_t len = (size_t)prefix_len(out), nshards = (ids->n + per - 1) / per;
	char *path = malloc(len + 16);
	clp_status s = CLP_OK;

	if (!path)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (nshards > 1 && ids->n - (nshards - 1) * per < 2)
		nshards--;
	if (nshards > 1000000) {
		free(path);
		return clp_error(CLP_ERR_INVALID, "--shard-tokens %zu makes %zu shards of %s, more "
				 "than 1000000", per, nshards, out);
	}
	for (size_t k = 0; s == CLP_OK && k < nshards; k++) {
		size_t first = k * per, n = k + 1 < nshards ? per : ids->n - first;

		snprintf(path, len + 16, "%.*s_%06zu.bin", (int)len, out, k);
		s = clp_shard_write(path, ids->v + first, n, version);
		if (s == CLP_OK)
			printf("%s: %zu tokens\n", path, n);
	}
	free(path);
	return s;
}

struct tok_args {
	const char *kind, *vocab, *merges, *out;
	const char **files;
	int nfiles, eot, decode, version;
	long long shard_tokens;
};

/* Fill a from the command line; -1 when the command should run, else the exit code. Input
 * files may stand between the options. */
static int parse_args(int argc, char **argv, struct tok_args *a)
{
	const char *ver = NULL, *per = NULL;

	for (int i = 1; i < argc; i++) {
		int r = 0;

		if (cli_is_help(argv[i])) {
			usage();
			return 0;
		}
		if (!strcmp(argv[i], "--eot")) {
			a->eot = 1;
			continue;
		}
		if (!strcmp(argv[i], "--decode")) {
			a->decode = 1;
			continue;
		}
		if (argv[i][0] != '-' || !argv[i][1]) {
			a->files[a->nfiles++] = argv[i];
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--tokenizer", &a->kind)) ||
		    (r = cli_value(argc, argv, &i, "--vocab", &a->vocab)) ||
		    (r = cli_value(argc, argv, &i, "--merges", &a->merges)) ||
		    (r = cli_value(argc, argv, &i, "--version", &ver)) ||
		    (r = cli_value(argc, argv, &i, "--shard-tokens", &per)) ||
		    (r = cli_value(argc, argv, &i, "--out", &a->out))) {
			if (r < 0)
				return cli_usage_error("tokenize", "%s needs a value", argv[i]);
			continue;
		}
		return cli_usage_error("tokenize", "unknown option '%s'", argv[i]);
	}
	if (!a->out || !a->nfiles || (a->decode && a->nfiles != 1))
		return cli_usage_error("tokenize", a->decode ? "--decode needs --out and one shard"
							     : "needs --out and at least one input file");
	if (ver && strcmp(ver, "1") && strcmp(ver, "7"))
		return cli_usage_error("tokenize", "--version is 1 (uint16) or 7 (uint32), not '%s'",
				       ver);
	a->version = ver ? atoi(ver) : 0;
	if (per) {
		char *end;

		a->shard_tokens = strtoll(per, &end, 10);
		if (*end || end == per || a->shard_tokens < 2 || a->shard_tokens > INT32_MAX)
			return cli_usage_error("tokenize", "--shard-tokens is a count from 2 to %d, "
					       "not '%s'", INT32_MAX, per);
	}
	if (!strcmp(a->kind, "gpt2") && (!a->vocab || !a->merges))
		return cli_usage_error("tokenize", "--tokenizer gpt2 needs --vocab and --merges");
	return -1;
}

/* The files in order, each after <|endoftext|> with eot, appended to ids; *bytes their size. */
static clp_status encode_files(clp_tok *t, const struct tok_args *a, clp_ids *ids,
			       size_t *bytes)
{
	int32_t eot = clp_tok_special_id(t, "<|endoftext|>");

	if (eot < 0)
		eot = clp_tok_role_id(t, CLP_TOK_EOS);
	if (eot < 0)
		eot = clp_tok_role_id(t, CLP_TOK_SEP);
	if (a->eot && eot < 0)
		return clp_error(CLP_ERR_INVALID, "--eot: the %s tokeniser has no <|endoftext|>, "
				 "eos or [SEP] token", clp_tok_kind(t));
	*bytes = 0;
	for (int f = 0; f < a->nfiles; f++) {
		size_t before = ids->n;
		struct stat st;

		if (a->eot)
			CLP_TRY(clp_ids_push(ids, eot));
		CLP_TRY(clp_tok_encode_file(t, a->files[f], ids));
		if (!stat(a->files[f], &st))
			*bytes += (size_t)st.st_size;
		if (a->nfiles > 1)
			printf("%s: %zu tokens\n", a->files[f], ids->n - before);
	}
	return CLP_OK;
}

int cmd_tokenize(int argc, char **argv)
{
	struct tok_args a = {.kind = "byte", .files = calloc((size_t)argc, sizeof(char *))};
	clp_tok *t = NULL;
	clp_ids ids = {0};
	clp_status s;
	size_t bytes = 0;
	int rc;

	if (!a.files)
		return cli_fail("tokenize", clp_error(CLP_ERR_NOMEM, "out of host memory"));
	if ((rc = parse_args(argc, argv, &a)) >= 0) {
		free(a.files);
		return rc;
	}
	s = !strcmp(a.kind, "gpt2")   ? clp_tok_gpt2_load(&t, a.vocab, a.merges)
	    : !strcmp(a.kind, "byte") ? clp_tok_byte_create(&t, clp_tok_specials_gpt,
							    clp_tok_specials_gpt_n)
				      : clp_tok_open(&t, a.kind);
	if (s == CLP_OK && a.decode) {
		s = decode_shard(t, a.files[0], a.out);
		goto done;
	}
	if (s == CLP_OK)
		s = encode_files(t, &a, &ids, &bytes);
	if (s == CLP_OK && !a.version)
		a.version = clp_tok_vocab_size(t) <= 65536 ? 1 : 7;
	if (s == CLP_OK)
		s = a.shard_tokens ? write_shards(a.out, &ids, (size_t)a.shard_tokens, a.version)
				   : clp_shard_write(a.out, ids.v, ids.n, a.version);
	if (s == CLP_OK)
		printf("%.*s%s: %zu tokens (%s tokeniser, vocabulary %d, version %d), %.3f bytes "
		       "per token\n", a.shard_tokens ? prefix_len(a.out) : (int)strlen(a.out), a.out,
		       a.shard_tokens ? "_*.bin" : "", ids.n, clp_tok_kind(t),
		       clp_tok_vocab_size(t), a.version, ids.n ? (double)bytes / (double)ids.n : 0.0);
done:
	rc = s == CLP_OK ? 0 : cli_fail("tokenize", s);
	clp_ids_free(&ids);
	clp_tok_free(t);
	free(a.files);
	return rc;
}
