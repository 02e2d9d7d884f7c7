/* The run summary of `clpipe train` (engine/train/summary.h): its content for a run stopped at
 * the target, a finished schedule, a resumed run, no checkpoint, an encoder; the commands it
 * prints quote their arguments for the shell. Timing goes in as numbers: nothing here is
 * measured. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/summary.h"
#include "tests/harness.h"

static char *print(const clp_train_summary *s, int argc, char *const *argv)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f) {
		CHECK(0, "open_memstream");
		return NULL;
	}
	clp_train_summary_print(f, s, "build/tools/clpipe", argc, argv);
	fclose(f);
	return buf;
}

static void has(const char *text, const char *want)
{
	CHECK(text && strstr(text, want), "the summary has \"%s\":\n%s", want, text ? text : "");
}

static void lacks(const char *text, const char *bad)
{
	CHECK(text && !strstr(text, bad), "the summary has no \"%s\":\n%s", bad, text ? text : "");
}

static clp_train_summary quickstart(void)
{
	clp_train_summary s;

	memset(&s, 0, sizeof(s));
	s.first_step = 0;
	s.steps = 400;
	s.planned = 1500;
	s.tokens = 400.0 * 2048;
	s.wall_s = 252.4;
	s.best_step = 400;
	s.best_loss = 1.5;
	s.best_bpb = 2.1640;
	s.baseline_bpb = 4.778;
	s.target_ratio = 0.65;
	s.can_sample = 1;
	snprintf(s.ckpt, sizeof(s.ckpt), ".cache/q-ckpt/step-00000400");
	snprintf(s.ckpt_dir, sizeof(s.ckpt_dir), ".cache/q-ckpt");
	snprintf(s.curve, sizeof(s.curve), ".cache/q.svg");
	snprintf(s.log, sizeof(s.log), ".cache/q.jsonl");
	snprintf(s.prompt, sizeof(s.prompt), "The meaning of life is");
	return s;
}

static void test_stopped_at_target(void)
{
	clp_train_summary s = quickstart();
	char *argv[] = {"--config", "tools/quickstart.toml", "--resume", "--data", "my file.txt",
			"--ckpt.resume=true", "--prompt", "it's"};
	char *t = print(&s, 8, argv);

	has(t, "steps:       400 of 1500, stopped at the target (0.65 x the unigram baseline)");
	has(t, "tokens:      819.2 k in this run");
	has(t, "wall time:   4m12s, 3246 tokens/s on average");
	has(t, "best val:    1.5000 nats/token, 2.164 bits/byte at step 400 (0.453 x the unigram "
	       "baseline 4.778)");
	has(t, "checkpoint:  .cache/q-ckpt/step-00000400\n");
	has(t, "loss curve:  .cache/q.svg\n");
	has(t, "log:         .cache/q.jsonl\n");
	/* the run's own checkpoint, not the directory's newest (another run's, maybe) */
	has(t, "sample:      build/tools/clpipe sample --ckpt .cache/q-ckpt/step-00000400 --prompt "
	       "'The meaning of life is'\n");
	/* the run's arguments, quoted, its --resume forms dropped, the target lifted, the run's
	 * directory named (it was not among them) */
	has(t, "resume:      build/tools/clpipe train --config tools/quickstart.toml --data "
	       "'my file.txt' --prompt 'it'\\''s' --ckpt.dir=.cache/q-ckpt --resume "
	       "--eval.target_ratio=0\n");
	lacks(t, "ckpt.resume");
	lacks(t, "resumed at");
	free(t);
}

static void test_schedule_done(void)
{
	clp_train_summary s = quickstart();
	char *argv[] = {"--steps", "1500", "--train.steps=1500", "--log", "x.jsonl", "--steps=9"};
	char *t;

	s.steps = s.planned = 1500;
	s.first_step = 1000;
	s.tokens = 500.0 * 2048;
	s.wall_s = 3725;
	s.prompt[0] = '\0';
	t = print(&s, 6, argv);
	has(t, "steps:       1500 of 1500 (500 in this run, resumed at step 1000)\n");
	has(t, "tokens:      1.02 M in this run");
	has(t, "wall time:   1h02m05s, 275 tokens/s");
	lacks(t, "stopped at the target");
	has(t, "--prompt 'The '\n");
	/* a longer schedule: the old step counts are dropped, not contradicted */
	has(t, "train on:    build/tools/clpipe train --log x.jsonl --ckpt.dir=.cache/q-ckpt "
	       "--resume --train.steps=3000");
	lacks(t, "--steps");
	lacks(t, "1500 --");
	free(t);
}

static void test_no_checkpoint_no_eval(void)
{
	clp_train_summary s = quickstart();
	char *t;

	s.ckpt[0] = s.ckpt_dir[0] = s.curve[0] = s.log[0] = '\0';
	s.best_step = -1;
	s.wall_s = 12.34;
	t = print(&s, 0, NULL);
	has(t, "best val:    no evaluation ran\n");
	has(t, "checkpoint:  none (--no-ckpt)\n");
	has(t, "wall time:   12.3 s");
	lacks(t, "loss curve:");
	lacks(t, "sample:");
	lacks(t, "resume:");
	free(t);
}

static void test_encoder_and_unknown_args(void)
{
	clp_train_summary s = quickstart();
	char *t;

	s.can_sample = 0;
	s.best_bpb = NAN;
	s.baseline_bpb = NAN;
	t = print(&s, -1, NULL);
	has(t, "best val:    1.5000 nats/token at step 400\n");
	lacks(t, "bits/byte");
	lacks(t, "nan");
	has(t, "evaluate:    build/tools/clpipe eval --ckpt .cache/q-ckpt/step-00000400\n");
	lacks(t, "sample:");
	has(t, "train <this run's arguments> --resume");
	free(t);
}

/* A pipeline's commands start with mpirun (issue 26: "need 2 ranks; this job has 1"); a run
 * stopped by Ctrl-C says so and offers to resume; a directory given keeps its flag. */
static void test_pipeline_stopped(void)
{
	clp_train_summary s = quickstart();
	char *argv[] = {"--pipeline.stages=2", "--ckpt.dir", "ck", "--resume=auto"};
	char *t;

	s.ranks = 2;
	s.stopped = 2;
	s.target_ratio = 0;
	t = print(&s, 4, argv);
	has(t, "steps:       400 of 1500, stopped by signal 2\n");
	has(t, "resume:      mpirun -np 2 build/tools/clpipe train --pipeline.stages=2 --ckpt.dir ck "
	       "--resume\n");
	lacks(t, "--ckpt.dir=");
	s.steps = s.planned;
	s.stopped = 0;
	free(t);
	t = print(&s, 3, argv);
	has(t, "train on:    mpirun -np 2 build/tools/clpipe train");
	free(t);
}

/* After a recovery (issue 28) the commands go on in the layout the run went on in: the run's
 * own settings of those keys (as "--k=v" or "--k v") give way to the new ones. */
static void test_relayout(void)
{
	clp_train_summary s = quickstart();
	char *argv[] = {"--pipeline.replicas=2", "--pipeline.stages", "2", "--optim.name=muon",
			"--pipeline.layers=[1, 1]"};
	char *t;

	s.steps = s.planned = 1500;
	s.ranks = 2;
	snprintf(s.relayout, sizeof(s.relayout), "--pipeline.schedule=1f1b --pipeline.stages=1 "
		 "--pipeline.replicas=1 --pipeline.layers=[2]");
	snprintf(s.relayout_why, sizeof(s.relayout_why), "after step 3: 1 stage x 1 replica over "
		 "1 rank, layers [2]");
	s.first_step = 3;
	t = print(&s, 5, argv);
	has(t, "steps:       1500 of 1500 (1497 in the layout the run went on in, from step 3: the "
	       "tokens and wall time below count from there)\n");
	lacks(t, "resumed at step");
	has(t, "train on:    mpirun -np 2 build/tools/clpipe train --optim.name=muon "
	       "--pipeline.schedule=1f1b --pipeline.stages=1 --pipeline.replicas=1 "
	       "'--pipeline.layers=[2]' --ckpt.dir=.cache/q-ckpt --resume --train.steps=3000   (the "
	       "learning rate follows the longer schedule; the layout the run went on in after "
	       "step 3: 1 stage x 1 replica over 1 rank, layers [2])\n");
	lacks(t, "replicas=2");
	lacks(t, "[1, 1]");
	free(t);
	s.steps = 1000; /* stopped early: the resume command too */
	t = print(&s, 5, argv);
	has(t, "resume:      mpirun -np 2 build/tools/clpipe train --optim.name=muon "
	       "--pipeline.schedule=1f1b");
	has(t, " --resume --eval.target_ratio=0   (the layout the run went on in after step 3");
	free(t);
}

static void test_program(void)
{
	char p[4096];

	clp_train_summary_program(p, sizeof(p));
	CHECK(strlen(p) >= 12 && !strcmp(p + strlen(p) - 12, "test_summary"),
	      "this program is %s", p);
}

TH_MAIN(TH_TEST(test_stopped_at_target), TH_TEST(test_schedule_done),
	TH_TEST(test_no_checkpoint_no_eval), TH_TEST(test_encoder_and_unknown_args),
	TH_TEST(test_pipeline_stopped), TH_TEST(test_relayout), TH_TEST(test_program))
