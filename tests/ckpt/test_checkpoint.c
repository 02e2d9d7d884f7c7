/* Checkpoints: round trips, identity and shape refusals, incomplete and damaged checkpoints,
 * several ranks, pruning, overwrites, foreign safetensors files and Hugging Face indexes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/io/checkpoint.h"
#include "tests/data/testutil.h"

/* The toy model: three parameters, optimizer state for each; values depend on the step. */
#define NP 3
static const char *const pname[NP] = {"wte.weight", "h.0.mlp.c_fc.weight", "h.1.mlp.c_fc.weight"};
static const int64_t pshape[NP][2] = {{10, 4}, {4, 8}, {4, 8}};
static float pdata[NP][40], mdata[NP][40];

static void fill(long step)
{
	for (int p = 0; p < NP; p++)
		for (int i = 0; i < 40; i++) {
			pdata[p][i] = (float)step + 0.5f * (float)i + 100.0f * (float)p;
			mdata[p][i] = -pdata[p][i];
		}
}

/* Save `step` from nranks ranks (rank r holds parameters p with p % nranks == r); commit=0
 * simulates a crash before the manifest. */
static void save(const char *root, long step, int nranks, const char *preset, int keep,
		 int commit)
{
	clp_ckpt_writer *w[4] = {0};

	fill(step);
	for (int r = nranks - 1; r >= 0; r--) { /* ranks finish in any order */
		char name[128];

		CHECK_OK(clp_ckpt_writer_create(&w[r], root, step, r, nranks));
		if (!w[r])
			return;
		CHECK_OK(clp_ckpt_writer_identity(w[r], "preset", preset));
		CHECK_OK(clp_ckpt_writer_identity(w[r], "n_layer", "2"));
		CHECK_OK(clp_ckpt_writer_meta(w[r], "data.pos", "epoch=0 index=5"));
		CHECK_OK(clp_ckpt_writer_meta(w[r], "config", "[model]\npreset = \"gpt2\"\n"));
		for (int p = 0; p < NP; p++) {
			if (p % nranks != r)
				continue;
			snprintf(name, sizeof(name), "%s.exp_avg", pname[p]);
			CHECK_OK(clp_ckpt_writer_add(w[r], CLP_CKPT_MODEL, pname[p], pdata[p], 2,
						     pshape[p]));
			CHECK_OK(clp_ckpt_writer_add(w[r], CLP_CKPT_OPTIM, name, mdata[p], 2,
						     pshape[p]));
		}
		CHECK_OK(clp_ckpt_writer_write(w[r]));
	}
	if (commit)
		CHECK_OK(clp_ckpt_writer_commit(w[0], keep));
	for (int r = 0; r < nranks; r++)
		clp_ckpt_writer_free(w[r]);
}

static uint64_t toy_hash(void)
{
	clp_ckpt_param p[NP];

	for (int i = 0; i < NP; i++) {
		p[NP - 1 - i].name = pname[i]; /* order does not matter */
		p[NP - 1 - i].ndim = 2;
		p[NP - 1 - i].shape[0] = pshape[i][0];
		p[NP - 1 - i].shape[1] = pshape[i][1];
	}
	return clp_ckpt_params_hash(p, NP);
}

/* Load everything and compare with fill(step). */
static void check_load(clp_ckpt *c, long step)
{
	float buf[40];
	char name[128];

	CHECK(clp_ckpt_step(c) == step, "step %ld, want %ld", clp_ckpt_step(c), step);
	fill(step);
	for (int p = 0; p < NP; p++) {
		memset(buf, 0, sizeof(buf));
		CHECK_OK(clp_ckpt_read(c, CLP_CKPT_MODEL, pname[p], buf, 2, pshape[p]));
		CHECK(!memcmp(buf, pdata[p], sizeof(float) * (size_t)(pshape[p][0] * pshape[p][1])),
		      "%s values", pname[p]);
		snprintf(name, sizeof(name), "%s.exp_avg", pname[p]);
		CHECK_OK(clp_ckpt_read(c, CLP_CKPT_OPTIM, name, buf, 2, pshape[p]));
		CHECK(buf[3] == mdata[p][3], "%s values", name);
	}
	CHECK(clp_ckpt_count(c, CLP_CKPT_MODEL) == NP && clp_ckpt_count(c, CLP_CKPT_OPTIM) == NP,
	      "counts");
	CHECK(clp_ckpt_meta(c, "data.pos") && !strcmp(clp_ckpt_meta(c, "data.pos"),
						      "epoch=0 index=5"), "metadata");
}

static void test_round_trip(void)
{
	char root[1024];
	clp_ckpt *c = NULL;
	clp_ckpt_kv want[] = {{"preset", "gpt2"}, {"n_layer", "2"}};
	clp_ckpt_kv other[] = {{"preset", "llama"}, {"n_layer", "8"}};
	int64_t wrong[2] = {4, 9};
	float buf[64];

	snprintf(root, sizeof(root), "%s", tu_path("rt"));
	save(root, 100, 1, "gpt2", 0, 1);
	CHECK(access(tu_path("rt/step-00000100/manifest.json"), F_OK) == 0 &&
	      access(tu_path("rt/step-00000100/model.safetensors"), F_OK) == 0 &&
	      access(tu_path("rt/step-00000100/optimizer.safetensors"), F_OK) == 0, "layout");
	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (!c)
		return;
	check_load(c, 100);
	CHECK(!strcmp(clp_ckpt_notes(c), ""), "notes: %s", clp_ckpt_notes(c));
	CHECK_OK(clp_ckpt_verify(c));
	CHECK_OK(clp_ckpt_check_identity(c, want, 2, toy_hash()));
	CHECK_ERR(clp_ckpt_check_identity(c, other, 2, 0), CLP_ERR_INVALID, "step-00000100",
		  "another model", "preset is gpt2 in the checkpoint, llama in this run",
		  "n_layer is 2 in the checkpoint, 8 in this run");
	CHECK_ERR(clp_ckpt_check_identity(c, want, 2, toy_hash() + 1), CLP_ERR_INVALID,
		  "parameter names and shapes differ");
	{
		clp_ckpt_kv extra[] = {{"n_head", "12"}};

		CHECK_ERR(clp_ckpt_check_identity(c, extra, 1, 0), CLP_ERR_INVALID,
			  "n_head is (missing) in the checkpoint, 12 in this run");
	}
	CHECK_ERR(clp_ckpt_read(c, CLP_CKPT_MODEL, pname[1], buf, 2, wrong), CLP_ERR_INVALID,
		  "step-00000100", pname[1], "[4, 8] there", "[4, 9] in this run");
	CHECK_ERR(clp_ckpt_read(c, CLP_CKPT_MODEL, "lm_head.weight", buf, 2, wrong),
		  CLP_ERR_NOT_FOUND, "lm_head.weight");
	CHECK(clp_ckpt_find(c, CLP_CKPT_OPTIM, "wte.weight") == NULL, "kinds are separate");
	clp_ckpt_close(c);
	/* opening the step directory itself, and the bare model file */
	CHECK_OK(clp_ckpt_open(&c, tu_path("rt/step-00000100")));
	if (c) {
		check_load(c, 100);
		clp_ckpt_close(c);
	}
	CHECK_OK(clp_ckpt_open(&c, tu_path("rt/step-00000100/model.safetensors")));
	if (c) {
		CHECK(clp_ckpt_step(c) == 100 && !strcmp(clp_ckpt_identity(c, "preset"), "gpt2") &&
		      clp_ckpt_count(c, CLP_CKPT_MODEL) == NP &&
		      !strcmp(clp_ckpt_meta(c, "data.pos"), "epoch=0 index=5"), "self-describing file");
		CHECK_ERR(clp_ckpt_check_identity(c, other, 1, 0), CLP_ERR_INVALID, "llama");
		/* the whole identity, parameter hash included, as clpipe eval --ckpt checks it
		 * (the writer used to leave identity.params out of the file) */
		CHECK_OK(clp_ckpt_check_identity(c, want, 2, toy_hash()));
		CHECK_ERR(clp_ckpt_check_identity(c, want, 2, toy_hash() + 1), CLP_ERR_INVALID,
			  "parameter names and shapes differ");
		clp_ckpt_close(c);
	}
	CHECK_ERR(clp_ckpt_open_latest(&c, tu_path("empty-root")), CLP_ERR_NOT_FOUND,
		  "no complete checkpoint");
	CHECK_ERR(clp_ckpt_open(&c, tu_path("nowhere")), CLP_ERR_NOT_FOUND, "nowhere");
	CHECK_OK(clp_io_mkdirs(tu_path("plain")));
	CHECK_ERR(clp_ckpt_open(&c, tu_path("plain")), CLP_ERR_NOT_FOUND, "not a checkpoint");
}

static void test_crash_and_damage(void)
{
	char root[1024];
	clp_ckpt *c = NULL;
	float buf[64];

	snprintf(root, sizeof(root), "%s", tu_path("crash"));
	save(root, 100, 1, "gpt2", 0, 1);
	/* crash after the files, before the manifest */
	save(root, 200, 1, "gpt2", 0, 0);
	/* crash in the middle of a file: only a temporary */
	CHECK_OK(clp_io_mkdirs(tu_path("crash/step-00000300")));
	tu_write_str(tu_path("crash/step-00000300/model.safetensors.tmp"), "half a fil");
	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (c) {
		check_load(c, 100);
		CHECK(strstr(clp_ckpt_notes(c), "step-00000300") &&
		      strstr(clp_ckpt_notes(c), "step-00000200") &&
		      strstr(clp_ckpt_notes(c), "no manifest.json"), "notes: %s", clp_ckpt_notes(c));
		clp_ckpt_close(c);
	}
	CHECK_ERR(clp_ckpt_open(&c, tu_path("crash/step-00000200")), CLP_ERR_FORMAT,
		  "step-00000200", "incomplete");
	/* the next save completes 400 and clears the older leftovers, not the good 100 */
	save(root, 400, 1, "gpt2", 0, 1);
	CHECK(access(tu_path("crash/step-00000200"), F_OK) != 0 &&
	      access(tu_path("crash/step-00000300"), F_OK) != 0 &&
	      access(tu_path("crash/step-00000100/manifest.json"), F_OK) == 0, "leftovers");
	/* a truncated tensor file under a manifest is refused, naming the file */
	tu_truncate(tu_path("crash/step-00000400/model.safetensors"), 10);
	CHECK_ERR(clp_ckpt_open_latest(&c, root), CLP_ERR_FORMAT, "step-00000400", "damaged",
		  "model.safetensors", "truncated?");
	/* a flipped byte of the same size: found by the CRC on the first read */
	save(root, 500, 1, "gpt2", 0, 1);
	{
		FILE *f = fopen(tu_path("crash/step-00000500/optimizer.safetensors"), "r+b");

		CHECK(f != NULL, "open");
		if (f) {
			fseek(f, -3, SEEK_END);
			fputc(0x55, f);
			fclose(f);
		}
	}
	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (c) {
		CHECK_OK(clp_ckpt_read(c, CLP_CKPT_MODEL, pname[0], buf, 2, pshape[0]));
		CHECK_ERR(clp_ckpt_read(c, CLP_CKPT_OPTIM, "wte.weight.exp_avg", buf, 2, pshape[0]),
			  CLP_ERR_FORMAT, "damaged", "optimizer.safetensors", "CRC-32");
		CHECK_ERR(clp_ckpt_verify(c), CLP_ERR_FORMAT, "CRC-32");
		clp_ckpt_close(c);
	}
	/* a garbage manifest is an error, not silently skipped */
	tu_write_str(tu_path("crash/step-00000500/manifest.json"), "{\"format\": ");
	CHECK_ERR(clp_ckpt_open_latest(&c, root), CLP_ERR_FORMAT, "step-00000500", "malformed");
}

static void test_ranks_and_pruning(void)
{
	char root[1024];
	clp_ckpt *c = NULL;
	clp_ckpt_writer *w = NULL;

	snprintf(root, sizeof(root), "%s", tu_path("ranks"));
	save(root, 10, 2, "gpt2", 0, 1);
	CHECK(access(tu_path("ranks/step-00000010/model-rank0.safetensors"), F_OK) == 0 &&
	      access(tu_path("ranks/step-00000010/model-rank1.safetensors"), F_OK) == 0 &&
	      access(tu_path("ranks/step-00000010/optimizer-rank1.safetensors"), F_OK) == 0,
	      "per-rank files");
	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (c) {
		check_load(c, 10); /* gathered by name from both ranks' files */
		CHECK_OK(clp_ckpt_check_identity(c, NULL, 0, toy_hash())); /* same model, 2 ranks */
		clp_ckpt_close(c);
	}
	/* three ranks: rank 0 commits before rank 2 wrote */
	fill(20);
	CHECK_OK(clp_ckpt_writer_create(&w, root, 20, 0, 3));
	if (w) {
		CHECK_OK(clp_ckpt_writer_add(w, CLP_CKPT_MODEL, pname[0], pdata[0], 2, pshape[0]));
		CHECK_ERR(clp_ckpt_writer_commit(w, 0), CLP_ERR_STATE, "not written");
		CHECK_OK(clp_ckpt_writer_write(w));
		CHECK_ERR(clp_ckpt_writer_commit(w, 0), CLP_ERR_STATE, "rank 1", "part-rank1.json");
		clp_ckpt_writer_free(w);
	}
	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (c) {
		CHECK(clp_ckpt_step(c) == 10, "uncommitted 20 ignored");
		clp_ckpt_close(c);
	}
	/* keep the newest two */
	for (long s = 30; s <= 60; s += 10)
		save(root, s, 1, "gpt2", 2, 1);
	CHECK(access(tu_path("ranks/step-00000060"), F_OK) == 0 &&
	      access(tu_path("ranks/step-00000050"), F_OK) == 0 &&
	      access(tu_path("ranks/step-00000040"), F_OK) != 0 &&
	      access(tu_path("ranks/step-00000010"), F_OK) != 0 &&
	      access(tu_path("ranks/step-00000020"), F_OK) != 0, "pruned to two");
	/* re-saving an existing step: its manifest goes first */
	CHECK_OK(clp_ckpt_writer_create(&w, root, 60, 0, 1));
	CHECK(access(tu_path("ranks/step-00000060/manifest.json"), F_OK) != 0,
	      "old manifest still there while overwriting");
	clp_ckpt_writer_free(w);
	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (c) {
		CHECK(clp_ckpt_step(c) == 50, "falls back to 50");
		clp_ckpt_close(c);
	}
	CHECK_ERR(clp_ckpt_writer_create(&w, root, 1, 2, 2), CLP_ERR_INVALID, "rank 2 of 2");
	CHECK_OK(clp_ckpt_writer_create(&w, root, 70, 0, 1));
	if (w) {
		CHECK_ERR(clp_ckpt_writer_meta(w, "format", "x"), CLP_ERR_INVALID, "reserved");
		CHECK_ERR(clp_ckpt_writer_meta(w, "clpipe.step", "x"), CLP_ERR_INVALID, "reserved");
		clp_ckpt_writer_free(w);
	}
}

/* Hugging Face's sharded layout: an index naming which file holds which tensor. */
static void test_hf_index(void)
{
	float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, buf[4];
	int64_t sa[1] = {4}, sb[1] = {2};
	clp_st_writer *w = NULL;
	clp_ckpt *c = NULL;

	CHECK_OK(clp_io_mkdirs(tu_path("hf")));
	CHECK_OK(clp_st_writer_create(&w, tu_path("hf/model-00001-of-00002.safetensors")));
	if (w) {
		CHECK_OK(clp_st_writer_add(w, "model.embed_tokens.weight", a, 1, sa));
		CHECK_OK(clp_st_writer_finish(w, NULL, NULL));
		clp_st_writer_free(w);
	}
	CHECK_OK(clp_st_writer_create(&w, tu_path("hf/model-00002-of-00002.safetensors")));
	if (w) {
		CHECK_OK(clp_st_writer_add(w, "lm_head.weight", b, 1, sb));
		CHECK_OK(clp_st_writer_finish(w, NULL, NULL));
		clp_st_writer_free(w);
	}
	tu_write_str(tu_path("hf/model.safetensors.index.json"),
		     "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {"
		     "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\", "
		     "\"lm_head.weight\": \"model-00002-of-00002.safetensors\"}}");
	CHECK_OK(clp_ckpt_open(&c, tu_path("hf")));
	if (!c)
		return;
	CHECK(clp_ckpt_step(c) == -1 && clp_ckpt_count(c, CLP_CKPT_MODEL) == 2, "index");
	CHECK_OK(clp_ckpt_check_identity(c, NULL, 0, 12345)); /* foreign: nothing to compare */
	CHECK_OK(clp_ckpt_read(c, CLP_CKPT_MODEL, "lm_head.weight", buf, 1, sb));
	CHECK(buf[0] == 5 && buf[1] == 6, "from the second file");
	clp_ckpt_close(c);
}

/* Issue 26, case 1: a run saving step 15 into a root holding another run's steps 80..120 must
 * not prune its own checkpoint (keep counts it; the newer ones stay). */
static void test_prune_keeps_own(void)
{
	const char *root = tu_path("own");

	for (long s = 80; s <= 120; s += 20)
		save(root, s, 1, "gpt2", 3, 1);
	save(root, 15, 1, "gpt2", 3, 1);
	CHECK(access(tu_path("own/step-00000015/manifest.json"), F_OK) == 0,
	      "the checkpoint just written survives its own pruning");
	CHECK(access(tu_path("own/step-00000080"), F_OK) == 0 &&
	      access(tu_path("own/step-00000120"), F_OK) == 0, "the newer ones stay");
	save(root, 16, 1, "gpt2", 3, 1);
	CHECK(access(tu_path("own/step-00000016"), F_OK) == 0 &&
	      access(tu_path("own/step-00000015"), F_OK) != 0, "older than keep allows: pruned");
}

TH_MAIN(TH_TEST(test_round_trip), TH_TEST(test_crash_and_damage), TH_TEST(test_ranks_and_pruning),
	TH_TEST(test_hf_index), TH_TEST(test_prune_keeps_own))
