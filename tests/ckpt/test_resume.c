/* Resume end to end on the host: a bigram model trained with Adam on a shuffled text dataset,
 * with counter-based noise, checkpointed every 3 steps (the save at step 9 "crashes" before its
 * manifest, so the restart resumes from step 6). A run resumed from the latest complete checkpoint must produce exactly the losses
 * of the uninterrupted run: weights, optimizer moments, step, and data position all restored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/dataset.h"
#include "engine/data/rand.h"
#include "engine/io/checkpoint.h"
#include "tests/data/testutil.h"

enum { V = 256, B = 4, T = 32, STEPS = 12 };

typedef struct run {
	clp_tok *tok;
	clp_dataset *ds;
	float *w, *m, *v, *g; /* (V, V) each */
	long step;
} run;

static const int64_t shape[2] = {V, V};

static void run_init(run *r, const char *corpus)
{
	clp_data_opts o = {T, 0.1, 7, 1, 0};

	memset(r, 0, sizeof(*r));
	CHECK_OK(clp_tok_byte_create(&r->tok, NULL, 0));
	CHECK_OK(clp_dataset_open_text(&r->ds, corpus, r->tok, &o));
	r->w = calloc(V * V, sizeof(float));
	r->m = calloc(V * V, sizeof(float));
	r->v = calloc(V * V, sizeof(float));
	r->g = calloc(V * V, sizeof(float));
	for (int i = 0; i < V * V; i++) /* deterministic init from the counter generator */
		r->w[i] = (float)(0.02 * (clp_data_unit(clp_data_rand(1, 3, 0, 0, (uint64_t)i)) - 0.5));
}

static void run_free(run *r)
{
	clp_dataset_free(r->ds);
	clp_tok_free(r->tok);
	free(r->w);
	free(r->m);
	free(r->v);
	free(r->g);
}

/* One step: loss of the batch (with multiplicative logit noise keyed by step and position),
 * gradient, Adam update. Returns the loss. */
static double train_step(run *r)
{
	int32_t in[B * T], tg[B * T];
	double loss = 0, lr = 0.05 * (1.0 - (double)r->step / (2.0 * STEPS));
	float p[V];

	CHECK_OK(clp_dataset_next(r->ds, B, 0, B, in, tg));
	memset(r->g, 0, V * V * sizeof(float));
	for (int i = 0; i < B * T; i++) {
		const float *row = r->w + (size_t)in[i] * V;
		float *grow = r->g + (size_t)in[i] * V;
		float noise = (float)(1.0 + 0.1 * (clp_data_unit(clp_data_rand(
							  11, 99, (uint64_t)r->step, 0, (uint64_t)i)) - 0.5));
		double mx = -1e30, sum = 0;

		for (int k = 0; k < V; k++)
			mx = fmax(mx, row[k] * noise);
		for (int k = 0; k < V; k++)
			sum += (p[k] = (float)exp(row[k] * noise - mx));
		loss += log(sum) + mx - row[tg[i]] * noise;
		for (int k = 0; k < V; k++)
			grow[k] += (float)((p[k] / sum - (k == tg[i])) * noise / (B * T));
	}
	r->step++;
	for (int i = 0; i < V * V; i++) {
		double mh, vh;

		r->m[i] = 0.9f * r->m[i] + 0.1f * r->g[i];
		r->v[i] = 0.999f * r->v[i] + 0.001f * r->g[i] * r->g[i];
		mh = r->m[i] / (1 - pow(0.9, (double)r->step));
		vh = r->v[i] / (1 - pow(0.999, (double)r->step));
		r->w[i] -= (float)(lr * mh / (sqrt(vh) + 1e-8));
	}
	return loss / (B * T);
}

static void save(run *r, const char *root, int commit)
{
	clp_ckpt_writer *w = NULL;
	char pos[128], step[32];

	clp_dataset_pos_str(r->ds, pos, sizeof(pos));
	snprintf(step, sizeof(step), "%ld", r->step);
	CHECK_OK(clp_ckpt_writer_create(&w, root, r->step, 0, 1));
	if (!w)
		return;
	CHECK_OK(clp_ckpt_writer_identity(w, "preset", "bigram"));
	CHECK_OK(clp_ckpt_writer_meta(w, "data.pos", pos));
	CHECK_OK(clp_ckpt_writer_meta(w, "train.step", step));
	CHECK_OK(clp_ckpt_writer_add(w, CLP_CKPT_MODEL, "wte.weight", r->w, 2, shape));
	CHECK_OK(clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, "wte.weight.exp_avg", r->m, 2, shape));
	CHECK_OK(clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, "wte.weight.exp_avg_sq", r->v, 2, shape));
	CHECK_OK(clp_ckpt_writer_write(w));
	if (commit)
		CHECK_OK(clp_ckpt_writer_commit(w, 2));
	clp_ckpt_writer_free(w);
}

static void resume(run *r, const char *root)
{
	clp_ckpt *c = NULL;
	clp_ckpt_kv id[] = {{"preset", "bigram"}};
	const char *pos, *step;

	CHECK_OK(clp_ckpt_open_latest(&c, root));
	if (!c)
		return;
	CHECK(strstr(clp_ckpt_notes(c), "step-00000009") != NULL, "the crashed save is reported");
	CHECK_OK(clp_ckpt_check_identity(c, id, 1, 0));
	CHECK_OK(clp_ckpt_read(c, CLP_CKPT_MODEL, "wte.weight", r->w, 2, shape));
	CHECK_OK(clp_ckpt_read(c, CLP_CKPT_OPTIM, "wte.weight.exp_avg", r->m, 2, shape));
	CHECK_OK(clp_ckpt_read(c, CLP_CKPT_OPTIM, "wte.weight.exp_avg_sq", r->v, 2, shape));
	pos = clp_ckpt_meta(c, "data.pos");
	step = clp_ckpt_meta(c, "train.step");
	CHECK(pos && step, "progress metadata");
	if (pos && step) {
		CHECK_OK(clp_dataset_restore(r->ds, pos));
		r->step = strtol(step, NULL, 10);
	}
	clp_ckpt_close(c);
}

static void test_resume_equals_uninterrupted(void)
{
	char corpus[4096], root[1024];
	double full[STEPS], resumed[STEPS];
	run a, b;

	for (int i = 0; i < (int)sizeof(corpus); i++) /* a little structure to learn */
		corpus[i] = "the quick brown fox jumps over the lazy dog. "[(i * 7 + i / 45) % 45];
	tu_write(tu_path("corpus.txt"), corpus, sizeof(corpus));
	snprintf(root, sizeof(root), "%s", tu_path("ckpt"));

	run_init(&a, tu_path("corpus.txt"));
	if (!a.ds)
		return;
	for (int s = 0; s < STEPS; s++) {
		full[s] = train_step(&a);
		/* saves every 3 steps; the process "dies" while saving step 9 (files written, no
		 * manifest), and the steps after it only give the reference losses */
		if (a.step % 3 == 0 && a.step <= 9)
			save(&a, root, a.step != 9);
	}
	run_free(&a);
	CHECK(full[STEPS - 1] < full[0] - 0.1, "the model learns: %.4f -> %.4f", full[0],
	      full[STEPS - 1]);

	/* restart: the latest complete checkpoint is step 6 */
	run_init(&b, tu_path("corpus.txt"));
	if (!b.ds)
		return;
	resume(&b, root);
	CHECK(b.step == 6, "resumed at step %ld", b.step);
	for (long s = b.step; s < STEPS; s++)
		resumed[s] = train_step(&b);
	for (int s = 6; s < STEPS; s++)
		CHECK(resumed[s] == full[s], "step %d: resumed loss %.17g, uninterrupted %.17g", s,
		      resumed[s], full[s]);
	run_free(&b);
}

TH_MAIN(TH_TEST(test_resume_equals_uninterrupted))
