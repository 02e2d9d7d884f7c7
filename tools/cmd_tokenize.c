/* clpipe tokenize: text files -> one llm.c token shard (engine/data/shard.h), with the byte
 * tokeniser or GPT-2's BPE, so users can bring their own corpus as data.format = "shards". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"
#include "tools/cli.h"

static void usage(void)
{
	printf("usage: clpipe tokenize [--tokenizer byte|gpt2] [--vocab vocab.json --merges "
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
	FILE *f = NULL;
	clp_status s = clp_shard_open(&sh, in, clp_tok_vocab_size(t));

	if (s == CLP_OK && !(ids = malloc(sh.ntok * sizeof(*ids))))
		s = clp_error(CLP_ERR_NOMEM, "out of host memory decoding %s", in);
	if (s == CLP_OK) {
		clp_shard_copy(&sh, 0, sh.ntok, ids);
		s = clp_tok_decode(t, ids, sh.ntok, &text, &len);
	}
	if (s == CLP_OK && !(f = fopen(out, "wb")))
		s = clp_error(CLP_ERR_IO, "%s: cannot create", out);
	if (s == CLP_OK && (fwrite(text, 1, len, f) != len || fflush(f)))
		s = clp_error(CLP_ERR_IO, "%s: write failed", out);
	if (f && fclose(f) && s == CLP_OK)
		s = clp_error(CLP_ERR_IO, "%s: write failed", out);
	if (s == CLP_OK)
		printf("%s: %zu tokens -> %zu bytes in %s\n", in, sh.ntok, len, out);
	free(text);
	free(ids);
	clp_shard_close(&sh);
	return s;
}

/* ids in shards of at most per tokens: PREFIX_000000.bin, ... (PREFIX = out without ".bin"). A
 * tail shorter than 2 tokens joins the shard before it (a shard with one token holds no
 * sequence); each file is written durably, in order. */
static clp_status write_shards(const char *out, const clp_ids *ids, size_t per, int version)
{
	size_t len = strlen(out), nshards = (ids->n + per - 1) / per;
	char *path = malloc(len + 16);
	clp_status s = CLP_OK;

	if (!path)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	if (len > 4 && !strcmp(out + len - 4, ".bin"))
		len -= 4;
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

int cmd_tokenize(int argc, char **argv)
{
	const char *kind = "byte", *vocab = NULL, *merges = NULL, *out = NULL, *ver = NULL;
	const char *per = NULL;
	long long shard_tokens = 0;
	const char **files = calloc((size_t)argc, sizeof(*files));
	int nfiles = 0, eot = 0, decode = 0, version = 0, rc = 1;
	clp_tok *t = NULL;
	clp_ids ids = {0};
	clp_status s = CLP_OK;
	size_t bytes = 0;

	if (!files)
		return cli_fail("tokenize", clp_error(CLP_ERR_NOMEM, "out of host memory"));
	for (int i = 1; i < argc; i++) {
		int r = 0;

		if (cli_is_help(argv[i])) {
			usage();
			free(files);
			return 0;
		}
		if (!strcmp(argv[i], "--eot")) {
			eot = 1;
			continue;
		}
		if (!strcmp(argv[i], "--decode")) {
			decode = 1;
			continue;
		}
		if (argv[i][0] != '-' || !argv[i][1]) {
			files[nfiles++] = argv[i];
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--tokenizer", &kind)) ||
		    (r = cli_value(argc, argv, &i, "--vocab", &vocab)) ||
		    (r = cli_value(argc, argv, &i, "--merges", &merges)) ||
		    (r = cli_value(argc, argv, &i, "--version", &ver)) ||
		    (r = cli_value(argc, argv, &i, "--shard-tokens", &per)) ||
		    (r = cli_value(argc, argv, &i, "--out", &out))) {
			if (r < 0) {
				free(files);
				return cli_usage_error("tokenize", "%s needs a value", argv[i]);
			}
			continue;
		}
		free(files);
		return cli_usage_error("tokenize", "unknown option '%s'", argv[i]);
	}
	if (!out || !nfiles || (decode && nfiles != 1)) {
		free(files);
		return cli_usage_error("tokenize", decode ? "--decode needs --out and one shard" :
				       "needs --out and at least one input file");
	}
	if (ver && strcmp(ver, "1") && strcmp(ver, "7")) {
		free(files);
		return cli_usage_error("tokenize", "--version is 1 (uint16) or 7 (uint32), not '%s'",
				       ver);
	}
	version = ver ? atoi(ver) : 0;
	if (per) {
		char *end;

		shard_tokens = strtoll(per, &end, 10);
		if (*end || end == per || shard_tokens < 2 || shard_tokens > INT32_MAX) {
			free(files);
			return cli_usage_error("tokenize", "--shard-tokens is a count from 2 to %d, "
					       "not '%s'", INT32_MAX, per);
		}
	}
	if (!strcmp(kind, "byte")) {
		s = clp_tok_byte_create(&t, clp_tok_specials_gpt, clp_tok_specials_gpt_n);
	} else if (!strcmp(kind, "gpt2")) {
		if (!vocab || !merges) {
			free(files);
			return cli_usage_error("tokenize", "--tokenizer gpt2 needs --vocab and "
					       "--merges");
		}
		s = clp_tok_gpt2_load(&t, vocab, merges);
	} else {
		free(files);
		return cli_usage_error("tokenize", "--tokenizer is byte or gpt2, not '%s'", kind);
	}
	if (s == CLP_OK && decode) {
		s = decode_shard(t, files[0], out);
		goto done;
	}
	for (int f = 0; s == CLP_OK && f < nfiles; f++) {
		size_t before = ids.n;
		FILE *fp;

		if (eot) {
			int32_t id = clp_tok_special_id(t, "<|endoftext|>");

			if (id < 0) {
				s = clp_error(CLP_ERR_INVALID, "--eot: the %s tokeniser has no "
					      "<|endoftext|> token", clp_tok_kind(t));
				break;
			}
			s = clp_ids_push(&ids, id);
		}
		if (s == CLP_OK)
			s = clp_tok_encode_file(t, files[f], &ids);
		if (s == CLP_OK && (fp = fopen(files[f], "rb"))) {
			if (!fseek(fp, 0, SEEK_END))
				bytes += (size_t)ftell(fp);
			fclose(fp);
		}
		if (s == CLP_OK && nfiles > 1)
			printf("%s: %zu tokens\n", files[f], ids.n - before);
	}
	if (s == CLP_OK && !version)
		version = clp_tok_vocab_size(t) <= 65536 ? 1 : 7;
	if (s == CLP_OK && !shard_tokens)
		s = clp_shard_write(out, ids.v, ids.n, version);
	if (s == CLP_OK && shard_tokens)
		s = write_shards(out, &ids, (size_t)shard_tokens, version);
	if (s == CLP_OK) {
		int len = (int)strlen(out);

		if (shard_tokens && len > 4 && !strcmp(out + len - 4, ".bin"))
			len -= 4;
		printf("%.*s%s: %zu tokens (%s tokeniser, vocabulary %d, version %d), %.3f bytes "
		       "per token\n", len, out, shard_tokens ? "_*.bin" : "", ids.n,
		       clp_tok_kind(t), clp_tok_vocab_size(t), version,
		       ids.n ? (double)bytes / (double)ids.n : 0.0);
	}
done:
	rc = s == CLP_OK ? 0 : cli_fail("tokenize", s);
	clp_ids_free(&ids);
	clp_tok_free(t);
	free(files);
	return rc;
}
