/* llm.c shards (both formats, every malformation), datasets (split rule, shuffling, positions
 * and resume, data-parallel slices, text and shard sources) and BERT masking. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/dataset.h"
#include "engine/data/mask.h"
#include "engine/data/rand.h"
#include "engine/data/shard.h"
#include "tests/data/testutil.h"

static void put32(unsigned char *p, int32_t v)
{
	for (int b = 0; b < 4; b++)
		p[b] = (unsigned char)((uint32_t)v >> (8 * b));
}

/* A raw shard: header fields as given, ntok tokens of width bytes (value i % 251). */
static void raw_shard(const char *path, int32_t magic, int32_t version, int32_t count,
		      size_t ntok, int width)
{
	size_t n = 1024 + ntok * (size_t)width;
	unsigned char *buf = calloc(1, n);

	put32(buf, magic);
	put32(buf + 4, version);
	put32(buf + 8, count);
	for (size_t i = 0; i < ntok; i++)
		for (int b = 0; b < width; b++)
			buf[1024 + i * (size_t)width + (size_t)b] =
				(unsigned char)(b == 0 ? i % 251 : 0);
	tu_write(path, buf, n);
	free(buf);
}

static void test_shards(void)
{
	int32_t tok[1000];
	clp_shard s;
	const char *p = tu_path("s.bin");

	for (int i = 0; i < 1000; i++)
		tok[i] = (i * 7919) % 50257;
	for (int v = 0; v < 2; v++) {
		int version = v ? 7 : 1;
		int32_t got[1000];

		if (version == 7)
			tok[5] = 100000; /* needs 32 bits */
		CHECK_OK(clp_shard_write(p, tok, 1000, version));
		CHECK_OK(clp_shard_open(&s, p, 0));
		CHECK(s.version == version && s.ntok == 1000, "v%d: version %d ntok %zu", version,
		      s.version, s.ntok);
		if (s.ntok == 1000) {
			clp_shard_copy(&s, 0, 1000, got);
			CHECK(!memcmp(got, tok, sizeof(tok)), "v%d contents", version);
		}
		clp_shard_close(&s);
	}
	CHECK_ERR(clp_shard_write(p, tok, 1000, 1), CLP_ERR_INVALID, "100000", "position 5");
	CHECK_ERR(clp_shard_write(p, tok, 1000, 3), CLP_ERR_INVALID, "version 3");
	CHECK_OK(clp_shard_open(&s, p, 200000));
	clp_shard_close(&s);
	CHECK_ERR(clp_shard_open(&s, p, 50257), CLP_ERR_FORMAT, "s.bin", "token 100000",
		  "position 5", "50257");
	clp_shard_close(&s);

	CHECK_ERR(clp_shard_open(&s, tu_path("none.bin"), 0), CLP_ERR_IO, "none.bin");
	clp_shard_close(&s);
	tu_write(p, "", 0);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "empty");
	clp_shard_close(&s);
	tu_write(p, "abc", 3);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "truncated", "header");
	clp_shard_close(&s);
	raw_shard(p, 12345, 1, 10, 10, 2);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "magic 12345");
	clp_shard_close(&s);
	raw_shard(p, CLP_SHARD_MAGIC_U16, 7, 10, 10, 2);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "needs version 1");
	clp_shard_close(&s);
	raw_shard(p, CLP_SHARD_MAGIC_U32, 7, 100, 60, 4);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "truncated", "100 tokens");
	clp_shard_close(&s);
	raw_shard(p, CLP_SHARD_MAGIC_U16, 1, 10, 12, 2);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "4 bytes follow");
	clp_shard_close(&s);
	raw_shard(p, CLP_SHARD_MAGIC_U16, 1, 0, 0, 2);
	CHECK_ERR(clp_shard_open(&s, p, 0), CLP_ERR_FORMAT, "s.bin", "count is 0");
	clp_shard_close(&s);
	raw_shard(p, CLP_SHARD_MAGIC_U16, 1, 60, 60, 2);
	CHECK_OK(clp_shard_open(&s, p, 251));
	clp_shard_close(&s);
}

static clp_data_opts opts(int T, double val, uint64_t seed)
{
	clp_data_opts o = {T, val, seed, 1, 0};
	return o;
}

static void test_split_and_sequences(void)
{
	enum { N = 1000, T = 8 };
	int32_t tok[N], seq[T + 1], in[3 * T], tg[3 * T];
	clp_dataset *ds = NULL;
	clp_data_opts o = opts(T, 0.1, 1);

	for (int i = 0; i < N; i++)
		tok[i] = i;
	CHECK_OK(clp_dataset_from_tokens(&ds, tok, N, &o, "tokens"));
	if (!ds)
		return;
	/* last ceil(0.1 * 1000) = 100 tokens are validation */
	CHECK(clp_dataset_ntok(ds, CLP_SPLIT_TRAIN) == 900 && clp_dataset_ntok(ds, CLP_SPLIT_VAL) == 100,
	      "split tokens %llu/%llu", (unsigned long long)clp_dataset_ntok(ds, CLP_SPLIT_TRAIN),
	      (unsigned long long)clp_dataset_ntok(ds, CLP_SPLIT_VAL));
	CHECK(clp_dataset_nseq(ds, CLP_SPLIT_TRAIN) == 112 && clp_dataset_nseq(ds, CLP_SPLIT_VAL) == 12,
	      "sequences");
	CHECK_OK(clp_dataset_seq(ds, CLP_SPLIT_TRAIN, 111, seq));
	CHECK(seq[0] == 888 && seq[T] == 896, "last train sequence %d..%d", seq[0], seq[T]);
	CHECK_OK(clp_dataset_seq(ds, CLP_SPLIT_VAL, 0, seq));
	CHECK(seq[0] == 900 && seq[T] == 908, "first val sequence %d", seq[0]);
	CHECK_ERR(clp_dataset_seq(ds, CLP_SPLIT_VAL, 12, seq), CLP_ERR_INVALID, "tokens", "12");
	CHECK_OK(clp_dataset_val(ds, 11, 3, in, tg)); /* wraps: 11, 0, 1 */
	CHECK(in[0] == 988 && tg[T - 1] == 996 && in[T] == 900 && in[2 * T] == 908, "val batch");
	for (int i = 0; i < 3 * T; i++)
		CHECK(tg[i] == in[i] + 1, "targets are inputs shifted by one");
	clp_dataset_free(ds);

	o = opts(T, 0.0, 1);
	CHECK_OK(clp_dataset_from_tokens(&ds, tok, N, &o, "tokens"));
	if (ds) {
		CHECK(clp_dataset_nseq(ds, CLP_SPLIT_VAL) == 0 &&
		      clp_dataset_nseq(ds, CLP_SPLIT_TRAIN) == 124, "no validation");
		CHECK_ERR(clp_dataset_val(ds, 0, 1, in, tg), CLP_ERR_INVALID, "no validation");
		clp_dataset_free(ds);
	}
	o = opts(T, 0.1, 1);
	CHECK_ERR(clp_dataset_from_tokens(&ds, tok, 12, &o, "tiny corpus"), CLP_ERR_FORMAT,
		  "tiny corpus", "too few", "seq_len + 1 = 9");
	o = opts(0, 0.1, 1);
	CHECK_ERR(clp_dataset_from_tokens(&ds, tok, N, &o, "x"), CLP_ERR_INVALID, "seq_len 0");
	o = opts(T, 0.7, 1);
	CHECK_ERR(clp_dataset_from_tokens(&ds, tok, N, &o, "x"), CLP_ERR_INVALID, "val_frac 0.7");
	o = opts(T, 0.1, 1);
	o.vocab_size = 500;
	CHECK_ERR(clp_dataset_from_tokens(&ds, tok, N, &o, "x"), CLP_ERR_FORMAT, "token 500",
		  "position 500");
}

/* The first token of each drawn sequence identifies it (token i at position i). */
static void draw(clp_dataset *ds, int B, int nb, int32_t *firsts)
{
	int T = clp_dataset_seq_len(ds);
	int32_t *in = malloc((size_t)B * (size_t)T * sizeof(*in));
	int32_t *tg = malloc((size_t)B * (size_t)T * sizeof(*tg));

	for (int b = 0; b < nb; b++) {
		CHECK_OK(clp_dataset_next(ds, B, 0, B, in, tg));
		for (int r = 0; r < B; r++)
			firsts[b * B + r] = in[r * T];
	}
	free(in);
	free(tg);
}

static void test_shuffle_and_resume(void)
{
	enum { N = 801, T = 8, S = 100, B = 7 };
	int32_t tok[N], a[30 * B], b[30 * B], c[S];
	clp_dataset *d1 = NULL, *d2 = NULL;
	clp_data_opts o = opts(T, 0, 42);
	char pos[128];
	int seen[S] = {0}, same = 0;

	for (int i = 0; i < N; i++)
		tok[i] = i;
	CHECK_OK(clp_dataset_from_tokens(&d1, tok, N, &o, "tokens"));
	CHECK_OK(clp_dataset_from_tokens(&d2, tok, N, &o, "tokens"));
	if (!d1 || !d2)
		goto done;
	CHECK(clp_dataset_nseq(d1, CLP_SPLIT_TRAIN) == S, "nseq");
	/* epoch 0 visits every sequence once, not in order */
	draw(d1, 1, S, c);
	for (int i = 0; i < S; i++) {
		CHECK(c[i] % T == 0 && c[i] / T < S, "start %d", c[i]);
		if (c[i] % T == 0 && c[i] / T < S)
			seen[c[i] / T]++;
		same += c[i] == i * T;
	}
	for (int i = 0; i < S; i++)
		CHECK(seen[i] == 1, "sequence %d drawn %d times in an epoch", i, seen[i]);
	CHECK(same < 10, "%d of %d sequences in place: not shuffled", same, S);
	CHECK(clp_dataset_pos(d1).epoch == 1 && clp_dataset_pos(d1).index == 0, "epoch rolled");
	/* epoch 1 has another order */
	draw(d1, 1, S, a);
	same = 0;
	for (int i = 0; i < S; i++)
		same += a[i] == c[i];
	CHECK(same < 10, "epoch 1 repeats epoch 0's order (%d equal)", same);

	/* uninterrupted: 30 batches from the start; resumed: 11 batches, save, restore into a
	 * fresh dataset, 19 more. Batches cross epoch boundaries (7 does not divide 100). */
	CHECK_OK(clp_dataset_set_pos(d1, (clp_data_pos){0, 0}));
	draw(d1, B, 30, a);
	draw(d2, B, 11, b);
	clp_dataset_pos_str(d2, pos, sizeof(pos));
	CHECK(!strcmp(pos, "epoch=0 index=77 nseq=100 seed=42 shuffle=1"), "pos %s", pos);
	clp_dataset_free(d2);
	d2 = NULL;
	CHECK_OK(clp_dataset_from_tokens(&d2, tok, N, &o, "tokens"));
	if (!d2)
		goto done;
	CHECK_OK(clp_dataset_restore(d2, pos));
	draw(d2, B, 19, b + 11 * B);
	CHECK(!memcmp(a, b, sizeof(a)), "resumed batches differ from the uninterrupted run");

	/* data-parallel: replicas taking slices of one global batch see exactly its rows */
	CHECK_OK(clp_dataset_set_pos(d1, (clp_data_pos){3, 50}));
	CHECK_OK(clp_dataset_set_pos(d2, (clp_data_pos){3, 50}));
	{
		int32_t in1[6 * T], tg1[6 * T], in2[2 * T], tg2[2 * T];

		CHECK_OK(clp_dataset_next(d1, 6, 0, 6, in1, tg1));
		CHECK_OK(clp_dataset_next(d2, 6, 2, 2, in2, tg2));
		CHECK(!memcmp(in1 + 2 * T, in2, sizeof(in2)) && !memcmp(tg1 + 2 * T, tg2, sizeof(tg2)),
		      "slice");
		CHECK(clp_dataset_pos(d2).index == 56, "slice advances the whole batch");
		CHECK_ERR(clp_dataset_next(d2, 6, 5, 2, in2, tg2), CLP_ERR_INVALID, "slice");
	}
	/* positions from another dataset are refused, naming what differs */
	CHECK_ERR(clp_dataset_restore(d2, "epoch=0 index=3 nseq=99 seed=42 shuffle=1"),
		  CLP_ERR_INVALID, "99 training sequences", "has 100");
	CHECK_ERR(clp_dataset_restore(d2, "epoch=0 index=3 nseq=100 seed=7 shuffle=1"),
		  CLP_ERR_INVALID, "seed 7");
	CHECK_ERR(clp_dataset_restore(d2, "epoch=0 index=300 nseq=100 seed=42 shuffle=1"),
		  CLP_ERR_INVALID, "index 300");
	CHECK_ERR(clp_dataset_restore(d2, "epoch=0 index=3"), CLP_ERR_FORMAT, "not of the form");
	clp_dataset_free(d2);
	d2 = NULL;
	/* another seed, another order; no shuffle, in order */
	o = opts(T, 0, 43);
	CHECK_OK(clp_dataset_from_tokens(&d2, tok, N, &o, "tokens"));
	if (d2) {
		draw(d2, 1, S, b);
		same = 0;
		for (int i = 0; i < S; i++)
			same += b[i] == c[i];
		CHECK(same < 10, "seeds 42 and 43 give the same order");
		clp_dataset_free(d2);
		d2 = NULL;
	}
	o.shuffle = 0;
	CHECK_OK(clp_dataset_from_tokens(&d2, tok, N, &o, "tokens"));
	if (d2) {
		draw(d2, 1, S + 1, b);
		for (int i = 0; i <= S; i++)
			CHECK(b[i] == (i % S) * T, "in order at %d", i);
	}
done:
	clp_dataset_free(d1);
	clp_dataset_free(d2);
}

static void test_sources(void)
{
	enum { T = 16 };
	int32_t s1[100], s2[50], s3[200], seq[T + 1];
	clp_dataset *ds = NULL;
	clp_data_opts o = opts(T, 0, 1);
	clp_tok *tok = NULL;
	char text[3000];

	/* shards concatenate in sorted order and sequences cross their boundaries */
	for (int i = 0; i < 100; i++)
		s1[i] = i;
	for (int i = 0; i < 50; i++)
		s2[i] = 100 + i;
	for (int i = 0; i < 200; i++)
		s3[i] = 150 + i;
	CHECK_OK(clp_io_mkdirs(tu_path("shards")));
	CHECK_OK(clp_shard_write(tu_path("shards/train_000.bin"), s1, 100, 1));
	CHECK_OK(clp_shard_write(tu_path("shards/train_001.bin"), s2, 50, 7));
	CHECK_OK(clp_shard_write(tu_path("shards/val_000.bin"), s3, 200, 1));
	CHECK_OK(clp_dataset_open_shards(&ds, tu_path("shards/train_*.bin"),
					 tu_path("shards/val_*.bin"), &o));
	if (ds) {
		CHECK(clp_dataset_ntok(ds, CLP_SPLIT_TRAIN) == 150 &&
		      clp_dataset_ntok(ds, CLP_SPLIT_VAL) == 200, "shard split");
		CHECK_OK(clp_dataset_seq(ds, CLP_SPLIT_TRAIN, 6, seq)); /* tokens 96..112 */
		for (int i = 0; i <= T; i++)
			CHECK(seq[i] == 96 + i, "across shards [%d] = %d", i, seq[i]);
		CHECK_OK(clp_dataset_seq(ds, CLP_SPLIT_VAL, 0, seq));
		CHECK(seq[0] == 150, "val shard");
		clp_dataset_free(ds);
		ds = NULL;
	}
	o.val_frac = 0.2;
	CHECK_OK(clp_dataset_open_shards(&ds, tu_path("shards/*.bin"), NULL, &o));
	if (ds) {
		CHECK(clp_dataset_ntok(ds, CLP_SPLIT_VAL) == 70, "fraction over shards");
		clp_dataset_free(ds);
		ds = NULL;
	}
	CHECK_ERR(clp_dataset_open_shards(&ds, tu_path("shards/nothing_*.bin"), NULL, &o),
		  CLP_ERR_IO, "nothing_*.bin", "no training shard");
	CHECK_ERR(clp_dataset_open_shards(&ds, tu_path("shards/missing.bin"), NULL, &o),
		  CLP_ERR_IO, "missing.bin");
	o.vocab_size = 120;
	CHECK_ERR(clp_dataset_open_shards(&ds, tu_path("shards/train_*.bin"), NULL, &o),
		  CLP_ERR_FORMAT, "train_001.bin", "token 120");

	/* a text file through the byte tokeniser */
	for (int i = 0; i < 3000; i++)
		text[i] = (char)('a' + i % 26);
	tu_write(tu_path("corpus.txt"), text, sizeof(text));
	CHECK_OK(clp_tok_byte_create(&tok, NULL, 0));
	o = opts(T, 0.1, 1);
	CHECK_OK(clp_dataset_open_text(&ds, tu_path("corpus.txt"), tok, &o));
	if (ds) {
		CHECK(clp_dataset_ntok(ds, CLP_SPLIT_TRAIN) == 2700, "text split");
		CHECK_OK(clp_dataset_seq(ds, CLP_SPLIT_VAL, 1, seq));
		CHECK(seq[0] == text[2700 + T], "text tokens");
		clp_dataset_free(ds);
		ds = NULL;
	}
	CHECK_ERR(clp_dataset_open_text(&ds, tu_path("nope.txt"), tok, &o), CLP_ERR_NOT_FOUND,
		  "nope.txt");
	clp_tok_free(tok);
}

static void test_mask(void)
{
	enum { N = 1 << 18, V = 261 };
	static int32_t tok[N], orig[N], tg[N], tok2[N], tg2[N];
	static const int32_t special[] = {256, 257, 258, 259, 260};
	clp_mask_opts o = {0.15, 259, V, special, 5, 1234};
	size_t nonspecial = 0, chosen = 0, masked = 0, random = 0, kept = 0;

	for (int i = 0; i < N; i++)
		orig[i] = tok[i] = i % 10 == 0 ? 256 + i % 3 : (int32_t)((i * 2654435761u) >> 24);
	CHECK_OK(clp_data_mask_bert(&o, 7, 2, tok, tg, N));
	for (int i = 0; i < N; i++) {
		int sp = orig[i] >= 256;

		nonspecial += !sp;
		if (tg[i] < 0) {
			CHECK(tok[i] == orig[i], "unchosen position %d changed", i);
			continue;
		}
		CHECK(!sp, "special at %d chosen", i);
		CHECK(tg[i] == orig[i], "target at %d is not the original", i);
		chosen++;
		if (tok[i] == 259)
			masked++;
		else if (tok[i] != orig[i])
			random++;
		else
			kept++;
		CHECK(tok[i] == 259 || tok[i] < 256, "replacement %d is special", tok[i]);
	}
	/* binomial standard deviations: chosen 0.0007, masked 0.0025, others 0.0019 */
	CHECK(chosen > 0.145 * nonspecial && chosen < 0.155 * nonspecial, "chosen %.4f",
	      (double)chosen / nonspecial);
	CHECK(masked > 0.79 * chosen && masked < 0.81 * chosen, "masked %.4f",
	      (double)masked / chosen);
	CHECK(random > 0.09 * chosen && random < 0.11 * chosen, "random %.4f",
	      (double)random / chosen);
	CHECK(kept > 0.09 * chosen && kept < 0.11 * chosen, "kept %.4f", (double)kept / chosen);
	/* reproducible from (seed, step, micro); another micro-batch masks differently */
	memcpy(tok2, orig, sizeof(tok2));
	CHECK_OK(clp_data_mask_bert(&o, 7, 2, tok2, tg2, N));
	CHECK(!memcmp(tok, tok2, sizeof(tok)) && !memcmp(tg, tg2, sizeof(tg)), "determinism");
	memcpy(tok2, orig, sizeof(tok2));
	CHECK_OK(clp_data_mask_bert(&o, 7, 3, tok2, tg2, N));
	CHECK(memcmp(tg, tg2, sizeof(tg)) != 0, "micro-batch 3 masks like micro-batch 2");
	tok2[5] = V;
	CHECK_ERR(clp_data_mask_bert(&o, 0, 0, tok2, tg2, N), CLP_ERR_INVALID, "token 261",
		  "position 5");
	o.mask_id = V;
	CHECK_ERR(clp_data_mask_bert(&o, 0, 0, tok2, tg2, N), CLP_ERR_INVALID, "mask id");
}

/* Keyed permutations are bijections for any n, differ by key, and clp_data_below stays below. */
static void test_perm(void)
{
	static const uint64_t sizes[] = {1, 2, 3, 7, 100, 1000, 65537};
	static unsigned char seen[65537];

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k], fixed = 0;
		clp_data_perm p, q;
		int differ = 0;

		clp_data_perm_init(&p, n, 5, CLP_DATA_PURPOSE_SHUFFLE, 0);
		clp_data_perm_init(&q, n, 5, CLP_DATA_PURPOSE_SHUFFLE, 1);
		memset(seen, 0, sizeof(seen));
		for (uint64_t i = 0; i < n; i++) {
			uint64_t j = clp_data_perm_at(&p, i);

			CHECK(j < n && !seen[j], "n=%llu: %llu -> %llu repeated or out of range",
			      (unsigned long long)n, (unsigned long long)i, (unsigned long long)j);
			if (j < n)
				seen[j] = 1;
			fixed += j == i;
			differ |= j != clp_data_perm_at(&q, i);
		}
		CHECK(n < 100 || (fixed < n / 10 && differ), "n=%llu: %llu fixed points",
		      (unsigned long long)n, (unsigned long long)fixed);
	}
	for (uint64_t i = 0; i < 10000; i++) {
		uint64_t r = clp_data_rand(1, 2, 3, 4, i);

		CHECK(clp_data_below(r, 7) < 7 && clp_data_below(r, 1) == 0, "below");
		CHECK(clp_data_below(UINT64_MAX, 1000) == 999, "top of the range");
	}
}

TH_MAIN(TH_TEST(test_perm), TH_TEST(test_shards), TH_TEST(test_split_and_sequences), TH_TEST(test_shuffle_and_resume),
	TH_TEST(test_sources), TH_TEST(test_mask))
