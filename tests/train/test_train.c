/* Training end to end on a tiny model: the loss falls, a resumed run continues with exactly the
 * uninterrupted run's losses, a checkpoint of another model is refused, evaluation and sampling
 * work from a checkpoint, and bad settings give messages that name the field or file. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/base/durable.h"
#include "engine/train/session.h"
#include "engine/train/session_internal.h"
#include "tests/harness.h"
#include "tests/train_util.h"

static int train(const clp_train_config *c, double *losses, int max, double *val)
{
	return tu_train(c, NULL, losses, max, val);
}

static void test_resume_exact(void)
{
	clp_train_config c;
	double full[8], part[8], val;
	char cmd[8400];
	int n1, n2;

	for (int p = 0; p < 3; p++) {
		const char *preset = p == 0 ? "gpt2" : p == 1 ? "llama" : "bert";

		tu_tiny_config(&c, preset);
		if (p == 1)
			c.model.n_kv_head = 2;
		snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck-%s", tu_dir(), preset);
		snprintf(c.train.log, sizeof(c.train.log), "%s/full-%s.jsonl", tu_dir(), preset);
		c.ckpt.every = 3;
		n1 = train(&c, full, 8, &val);
		CHECK(n1 == 6, "%s: 6 steps logged, got %d", preset, n1);
		if (p != 2)
			CHECK(full[5] < full[0], "%s: the loss falls (%g -> %g)", preset, full[0],
			      full[5]);
		/* keep only step 3: the resumed run must equal steps 4..6 bit for bit */
		snprintf(cmd, sizeof(cmd), "rm -rf %s/ck-%s/step-00000006", tu_dir(), preset);
		CHECK(system(cmd) == 0, "%s", cmd);
		c.ckpt.resume = 1;
		snprintf(c.train.log, sizeof(c.train.log), "%s/part-%s.jsonl", tu_dir(), preset);
		n2 = train(&c, part, 8, &val);
		CHECK(n2 == 3, "%s: the resumed run ran 3 steps, got %d", preset, n2);
		for (int i = 0; i < 3 && n1 == 6 && n2 == 3; i++)
			CHECK(part[i] == full[3 + i], "%s: step %d loss %.17g after resume, %.17g "
			      "uninterrupted", preset, 4 + i, part[i], full[3 + i]);
	}
}

/* Recomputing activations in the backward changes memory, not arithmetic. */
static void test_recompute_exact(void)
{
	clp_train_config c;
	double a[8], b[8], val;
	int na, nb;

	tu_tiny_config(&c, "llama");
	c.model.n_kv_head = 2;
	c.train.steps = 3;
	c.model.dropout = 0.1;
	snprintf(c.train.log, sizeof(c.train.log), "%s/norecompute.jsonl", tu_dir());
	na = train(&c, a, 8, &val);
	c.train.recompute = 1;
	snprintf(c.train.log, sizeof(c.train.log), "%s/recompute.jsonl", tu_dir());
	nb = train(&c, b, 8, &val);
	CHECK(na == 3 && nb == 3, "3 steps each (%d, %d)", na, nb);
	for (int i = 0; i < na && i < nb; i++)
		CHECK(a[i] == b[i], "step %d: loss %.17g with recomputation, %.17g without", i + 1,
		      b[i], a[i]);
}

static void test_refuse_other_model(void)
{
	clp_train_config c;
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w");

	tu_tiny_config(&c, "gpt2");
	snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck-gpt2", tu_dir());
	c.ckpt.resume = 1;
	c.model.n_layer = 3;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_INVALID,
		  "n_layer", "ck-gpt2");
	CHECK(s == NULL, "no session");
	fclose(devnull);
}

/* An eval or sample stage holds weights only: no tensor has a gradient or moments. */
static void check_weights_only(const char *what, clp_stage *st)
{
	const clp_param_table *t;
	int bad = 0;

	CHECK(st != NULL, "%s: a stage", what);
	if (!st)
		return;
	t = clp_stage_table(st);
	for (int k = 0; k < t->ntensors; k++)
		bad += clp_stage_trained(st, k) || clp_stage_tensor(st, CLP_ST_GRAD, k).mem ||
		       clp_stage_tensor(st, CLP_ST_ADAM_M, k).mem ||
		       clp_stage_tensor(st, CLP_ST_ADAM_V, k).mem;
	CHECK(t->ntensors > 0 && bad == 0, "%s: %d of %d tensors have a gradient or moments",
	      what, bad, t->ntensors);
}

static void test_eval_and_sample(void)
{
	clp_train_config c;
	clp_session *s = NULL;
	double loss = 0, bpb = 0;
	char path[8400], text[4096];
	FILE *f;
	size_t n;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
	snprintf(c.sample.ckpt, sizeof(c.sample.ckpt), "%s/ck-gpt2", tu_dir());
	c.eval.batches = 2;
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_EVAL, NULL, stdout));
	if (s) {
		check_weights_only("eval", clp_exec_stage(s->ex, 0, NULL));
		CHECK_OK(clp_session_eval(s, 2, &loss, &bpb));
		CHECK(loss > 0 && loss < 10 && bpb > 0, "eval from a checkpoint: loss %g bpb %g",
		      loss, bpb);
		CHECK(clp_session_config(s)->model.n_layer == 2, "the model comes from the "
		      "checkpoint");
	}
	clp_session_close(s);
	s = NULL;
	/* partial inference: half the layers removed (stage 1 of a 2-stage split) */
	c.pipeline.stages = 2;
	c.sample.skip_stages.n = 1;
	c.sample.skip_stages.v[0] = 1;
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_EVAL, NULL, stdout));
	if (s) {
		double l2, b2;

		CHECK_OK(clp_session_eval(s, 2, &l2, &b2));
		CHECK(isfinite(l2) && l2 != loss, "without layer 1 the loss changes: %g vs %g", l2,
		      loss);
	}
	clp_session_close(s);
	s = NULL;
	c.pipeline.stages = 1;
	c.sample.skip_stages.n = 0;
	c.sample.skip_layers.n = 1;
	c.sample.skip_layers.v[0] = 7;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_EVAL, NULL, stdout), CLP_ERR_INVALID,
		  "skip layer 7");
	c.sample.skip_layers.n = 0;
	snprintf(c.sample.prompt, sizeof(c.sample.prompt), "the cat");
	c.sample.length = 20;
	snprintf(path, sizeof(path), "%s/sample.txt", tu_dir());
	f = fopen(path, "w+");
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_SAMPLE, NULL, stdout));
	if (s)
		check_weights_only("sample", s->st);
	if (s && f) {
		CHECK_OK(clp_session_sample(s, f));
		rewind(f);
		n = fread(text, 1, sizeof(text) - 1, f);
		text[n] = '\0';
		CHECK(n >= 7 + 20 && !strncmp(text, "the cat", 7), "sample: '%s'", text);
	}
	if (f)
		fclose(f);
	clp_session_close(s);
	/* bert does not generate */
	snprintf(c.sample.ckpt, sizeof(c.sample.ckpt), "%s/ck-bert", tu_dir());
	s = NULL;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_SAMPLE, NULL, stdout), CLP_ERR_UNSUPPORTED,
		  "bert");
}

/* A run's summary and loss curve: the facts of the run (not its timing), the last checkpoint,
 * and a curve next to the log with one point per step and per evaluation. */
static void test_summary_and_curve(void)
{
	clp_train_config c;
	clp_train_summary sum;
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w");
	char curve[8400], *svg = NULL, *p;
	size_t len = 0;
	int npts = 0;

	tu_tiny_config(&c, "gpt2");
	c.eval.every = 2;
	snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck-summary", tu_dir());
	snprintf(c.train.log, sizeof(c.train.log), "%s/summary.jsonl", tu_dir());
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull));
	if (s) {
		CHECK_ERR(clp_session_summary(s, &sum), CLP_ERR_STATE, "after training");
		CHECK_OK(clp_session_train(s, NULL));
		CHECK_OK(clp_session_summary(s, &sum));
		CHECK(sum.first_step == 0 && sum.steps == 6 && sum.planned == 6, "steps %ld..%ld "
		      "of %ld", sum.first_step, sum.steps, sum.planned);
		CHECK(sum.tokens == 6.0 * 2 * 4 * 16, "tokens %g", sum.tokens);
		CHECK(sum.wall_s > 0, "a wall time");
		CHECK(sum.best_step > 0 && sum.best_step % 2 == 0 && sum.best_loss > 0 &&
		      sum.best_loss < 10 && isfinite(sum.best_bpb) && sum.best_bpb > 0,
		      "best val %g (%g bits/byte) at step %ld", sum.best_loss, sum.best_bpb,
		      sum.best_step);
		CHECK(strstr(sum.ckpt, "ck-summary/step-") != NULL, "checkpoint %s", sum.ckpt);
		CHECK(sum.can_sample, "gpt2 samples");
	}
	clp_session_close(s);
	fclose(devnull);
	snprintf(curve, sizeof(curve), "%s/summary.svg", tu_dir());
	CHECK(!strcmp(sum.curve, curve), "curve %s next to the log (%s)", sum.curve, curve);
	CHECK_OK(clp_io_read_file(curve, &svg, &len));
	p = svg ? strstr(svg, "<polyline class=\"train\"") : NULL;
	p = p ? strstr(p, "points=\"") : NULL;
	for (p = p ? p + 8 : NULL; p && *p && *p != '"'; p++)
		npts += *p == ',';
	CHECK(npts == 6, "one training point per step in the curve: %d", npts);
	CHECK(svg && strstr(svg, "step 6: validation loss"), "the last evaluation in the curve");
	free(svg);
}

static void test_bad_settings(void)
{
	clp_train_config c;
	clp_session *s = NULL;

	tu_tiny_config(&c, "gpt2");
	snprintf(c.data.path, sizeof(c.data.path), "%s/no-such-file.txt", tu_dir());
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, stdout), CLP_ERR_NOT_FOUND,
		  "no-such-file.txt");
	tu_tiny_config(&c, "gpt2");
	c.model.d_model = 30;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, stdout), CLP_ERR_INVALID,
		  "model.d_model = 30", "model.n_head = 4");
	tu_tiny_config(&c, "gpt2");
	c.train.seq = 64;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, stdout), CLP_ERR_INVALID,
		  "train.seq = 64", "model.ctx = 16");
	CHECK(s == NULL, "no session after errors");
}

static void cleanup(void)
{
	tu_cleanup();
}

TH_MAIN(TH_TEST(test_resume_exact), TH_TEST(test_recompute_exact), TH_TEST(test_refuse_other_model),
	TH_TEST(test_eval_and_sample), TH_TEST(test_summary_and_curve), TH_TEST(test_bad_settings),
	TH_TEST(cleanup))
