/* K-FAC in the training session (optim.name = "kfac"): the loss of a tiny model falls, a run
 * resumed mid-cycle from a checkpoint continues with exactly the uninterrupted run's losses
 * (factors, both inverse sets and momentum are restored), and a K-FAC resume refuses an AdamW
 * checkpoint with a clear message. Shampoo under PipeFisher on one device equals its serial stale
 * roots and refuses what it does not do. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/train/session.h"
#include "tests/harness.h"
#include "tests/train_util.h"

static void base_config(clp_train_config *c)
{
	tu_tiny_config(c, "gpt2");
	c->train.steps = 8;
	snprintf(c->optim.name, sizeof(c->optim.name), "kfac");
	c->kfac.interval = 3;
	c->kfac.lr = 0.1;
	c->kfac.damping = 0.01;
}

static int train(const clp_train_config *c, double *losses, int max)
{
	return tu_train(c, NULL, losses, max, NULL);
}

static void test_train_and_resume(void)
{
	clp_train_config c;
	double full[8], part[8];
	char cmd[8400];
	int n1, n2;

	base_config(&c);
	snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck", tu_dir());
	snprintf(c.train.log, sizeof(c.train.log), "%s/full.jsonl", tu_dir());
	c.ckpt.every = 4;
	n1 = train(&c, full, 8);
	CHECK(n1 == 8, "8 steps logged, got %d", n1);
	CHECK(n1 == 8 && full[7] < full[0] - 0.5, "the loss falls (%g -> %g)", full[0], full[7]);
	/* resume at step 4, inside the cycle of steps 3..5, from the checkpoint of step 4 */
	snprintf(cmd, sizeof(cmd), "rm -rf %s/ck/step-00000008", tu_dir());
	CHECK(system(cmd) == 0, "%s", cmd);
	c.ckpt.resume = 1;
	snprintf(c.train.log, sizeof(c.train.log), "%s/part.jsonl", tu_dir());
	n2 = train(&c, part, 8);
	CHECK(n2 == 4, "the resumed run ran 4 steps, got %d", n2);
	for (int i = 0; i < 4 && n1 == 8 && n2 == 4; i++)
		CHECK(part[i] == full[4 + i], "step %d loss %.17g after resume, %.17g "
		      "uninterrupted", 5 + i, part[i], full[4 + i]);
}

static void test_refuse_adamw_checkpoint(void)
{
	clp_train_config c;
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w");
	double l[4];

	base_config(&c);
	snprintf(c.optim.name, sizeof(c.optim.name), "adamw");
	snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck-adamw", tu_dir());
	snprintf(c.train.log, sizeof(c.train.log), "%s/adamw.jsonl", tu_dir());
	c.train.steps = 1;
	train(&c, l, 4);
	snprintf(c.optim.name, sizeof(c.optim.name), "kfac");
	c.ckpt.resume = 1;
	c.train.steps = 2;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_NOT_FOUND,
		  "no K-FAC state", "ck-adamw");
	CHECK(s == NULL, "no session");
	fclose(devnull);
}

/* Opens a session of c (its report to FILE name under the test directory) and reads the cost
 * table it prints ("pipefisher: costs measured at start-up ...; stage 0: F f ms, B b ms,
 * factors A a ms + B b ms per micro-batch, inversion i ms, preconditioning p ms") into t (F, B,
 * A, B factors, inversion, preconditioning; -1 where not printed); *K the session's K; whether
 * the table's line names who (NULL: not asked). Returns whether the table was printed. */
static int measured_table(clp_train_config *c, const char *name, const char *who, double t[6],
			  int *K, int *named)
{
	char path[600], line[1024];
	FILE *f;
	clp_session *s = NULL;
	int seen = 0;

	for (int i = 0; i < 6; i++)
		t[i] = -1;
	*K = 0, *named = 0;
	snprintf(path, sizeof(path), "%s/%s", tu_dir(), name);
	f = fopen(path, "w+");
	CHECK(f != NULL, "%s", path);
	if (!f)
		return 0;
	CHECK_OK(clp_session_open(&s, c, CLP_SESSION_TRAIN, NULL, f));
	if (s)
		*K = (int)clp_session_config(s)->kfac.interval;
	clp_session_close(s);
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "pipefisher: costs measured at start-up");
		const char *q = p ? strstr(p, "stage 0: F ") : NULL;

		*named |= p && who && strstr(p, who);
		if (q && sscanf(q, "stage 0: F %lf ms, B %lf ms, factors A %lf ms + B %lf ms per "
				   "micro-batch, inversion %lf ms, preconditioning %lf ms", &t[0],
				&t[1], &t[2], &t[3], &t[4], &t[5]) == 6)
			seen = 1;
	}
	fclose(f);
	CHECK(seen, "the session prints a table measured at start-up (%s)", path);
	return seen;
}

/* The delayed Muon under PipeFisher without pipeline.pipefisher_costs (c as given): the session
 * measures the pass's table at start-up as K-FAC's, its Newton-Schulz items (kfac_inv_s: every
 * phase of every Muon matrix of the stage, clp_muon_ns_phase) timed on the device instead of
 * counted from flops, no factors or per-step item; K = 1. */
static void muon_delay_measured(clp_train_config *c)
{
	double t[6];
	int K, named;

	measured_table(c, "muon-delay-costs.out", NULL, t, &K, &named);
	printf("delayed Muon, measured at start-up: F %g ms, B %g ms, Newton-Schulz %g ms a "
	       "stage, K %d\n", t[0], t[1], t[4], K);
	CHECK(t[0] > 0 && t[1] > 0 && t[4] > 0, "F %g, B %g and the Newton-Schulz %g ms measured",
	      t[0], t[1], t[4]);
	CHECK(t[2] == 0 && t[3] == 0 && t[5] == 0, "no factor or per-step item (%g, %g, %g ms)",
	      t[2], t[3], t[5]);
	CHECK(K == 1, "K = %d", K);
}

/* Shampoo or SOAP under PipeFisher without pipeline.pipefisher_costs (c as given): the session
 * measures the table at start-up, its refreshes (kfac_inv_s: both sides of every matrix of the
 * stage) and per-step update (kfac_precond_s) timed on the device, no factors; its source
 * names them (who). */
static void sides_measured(clp_train_config *c, const char *who)
{
	double t[6];
	int K, named;

	measured_table(c, "sides-costs.out", who, t, &K, &named);
	printf("%s: measured at start-up: F %g ms, B %g ms, refreshes %g ms, step %g ms a stage\n",
	       c->optim.name, t[0], t[1], t[4], t[5]);
	CHECK(named, "the table measured at start-up names %s", who);
	CHECK(t[0] > 0 && t[1] > 0 && t[4] > 0 && t[5] > 0, "F %g, B %g, refreshes %g and step %g "
	      "ms measured", t[0], t[1], t[4], t[5]);
	CHECK(t[2] == 0 && t[3] == 0, "no factor items (%g, %g ms)", t[2], t[3]);
}

/* pipeline.pipefisher on one device: the pass runs on costs measured at start-up and sets
 * kfac.interval to its K; checkpoints fall at cycle ends; the final one, inside a cycle, is
 * refused for resuming; and bad settings are refused by name. */
static void test_pipefisher_settings(void)
{
	clp_train_config c;
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w");
	double l[16];
	int K = 0, n;

	base_config(&c);
	c.pipeline.pipefisher = 1;
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull));
	if (s)
		K = (int)clp_session_config(s)->kfac.interval;
	clp_session_close(s);
	s = NULL;
	CHECK(K >= 1 && K <= 256, "K = %d", K);
	printf("one device, measured costs: PipeFisher K = %d\n", K);
	snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck-pf", tu_dir());
	snprintf(c.train.log, sizeof(c.train.log), "%s/pf.jsonl", tu_dir());
	c.ckpt.every = 1;
	c.ckpt.keep = 0;
	c.train.steps = K + 1;
	c.kfac.interval = 1; /* the pass's K replaces it */
	n = train(&c, l, 16);
	CHECK(n == K + 1 && isfinite(l[n - 1]), "%d steps, last loss %g", n, n ? l[n - 1] : 0);
	if (K > 1) { /* the run resumes from the final checkpoint, inside the second cycle */
		c.ckpt.resume = 1;
		c.train.steps = K + 2;
		CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull),
			  CLP_ERR_INVALID, "inside a PipeFisher cycle", "multiple of");
		clp_session_close(s);
		s = NULL;
		c.ckpt.resume = 0;
	}
	snprintf(c.optim.name, sizeof(c.optim.name), "adamw");
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_INVALID,
		  "optim.name = \"kfac\"");
	snprintf(c.optim.name, sizeof(c.optim.name), "kfac");
	snprintf(c.pipeline.pipefisher_costs, sizeof(c.pipeline.pipefisher_costs), "%s/none.json",
		 tu_dir());
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_IO,
		  "pipeline.pipefisher_costs", "none.json");
	c.pipeline.pipefisher = 0;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_INVALID,
		  "pipeline.pipefisher_costs is set but pipeline.pipefisher is off");
	c.pipeline.pipefisher_costs[0] = 0;
	c.pipeline.pipefisher_split = 1;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_INVALID,
		  "pipeline.pipefisher_split is set but pipeline.pipefisher is off");
	CHECK(s == NULL, "no session");
	fclose(devnull);
}

/* Shampoo under PipeFisher on one device (the pass on a cost table whose slow refreshes need
 * K > 1 steps): trains, equals shampoo.stale serially with the same K bitwise, and refuses
 * what it does not do, saying why; without the table the session measures Shampoo's (and
 * SOAP's) costs at start-up. */
static void test_shampoo_pipefisher(void)
{
	clp_train_config c;
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w"), *f;
	char costs[600];
	double a[32], b[32];
	int K = 0, na, nb;

	tu_tiny_config(&c, "gpt2");
	snprintf(c.optim.name, sizeof(c.optim.name), "shampoo");
	c.shampoo.graft = 1;
	c.shampoo.lr = 3e-3;
	c.shampoo.eps = 1e-4;
	c.pipeline.pipefisher = 1;
	sides_measured(&c, "Shampoo's roots and steps on random gradients");
	snprintf(costs, sizeof(costs), "%s/shampoo-costs.json", tu_dir());
	f = fopen(costs, "w");
	CHECK(f != NULL, "%s", costs);
	if (!f)
		return;
	fprintf(f, "{\"format\": \"clpipe-costs\", \"version\": 1, \"stages\": [{\"fwd_s\": 1, "
		"\"bwd_s\": 2, \"opt_s\": 0.1, \"kfac_inv_s\": 20, \"kfac_precond_s\": 0.2, "
		"\"layers\": 2}]}\n");
	fclose(f);
	snprintf(c.pipeline.pipefisher_costs, sizeof(c.pipeline.pipefisher_costs), "%s", costs);
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull));
	if (s)
		K = (int)clp_session_config(s)->shampoo.interval;
	clp_session_close(s);
	s = NULL;
	/* one device has no bubbles: every refresh is forced to the end of the cycle's first step,
	 * K = 1 (roots one step stale) */
	CHECK(K >= 1 && K <= 8, "one device: K = %d", K);
	c.train.steps = 3 * K + 1;
	snprintf(c.train.log, sizeof(c.train.log), "%s/shampoo-pf.jsonl", tu_dir());
	na = train(&c, a, 32);
	snprintf(c.train.log, sizeof(c.train.log), "%s/shampoo-stale.jsonl", tu_dir());
	c.pipeline.pipefisher = 0;
	c.pipeline.pipefisher_costs[0] = 0;
	c.shampoo.stale = 1;
	c.shampoo.interval = K;
	nb = train(&c, b, 32);
	CHECK(na == 3 * K + 1 && nb == 3 * K + 1 && b[nb - 1] < b[0] - 0.1, "%d and %d steps, loss %g -> %g",
	      na, nb, nb ? b[0] : 0, nb ? b[nb - 1] : 0);
	for (int i = 0; i < na && i < nb; i++)
		CHECK(a[i] == b[i], "step %d: %.17g in the bubbles, %.17g serially", i + 1, a[i], b[i]);
	c.shampoo.stale = 0;
	c.pipeline.pipefisher = 1;
	snprintf(c.pipeline.pipefisher_costs, sizeof(c.pipeline.pipefisher_costs), "%s", costs);
	c.pipeline.pipefisher_split = 1;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_UNSUPPORTED,
		  "pipeline.pipefisher_split shares K-FAC's", "leave it off");
	c.pipeline.pipefisher_split = 0;
	c.shampoo.warmup = 3;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_INVALID,
		  "shampoo.warmup = 3");
	c.shampoo.warmup = 0;
	snprintf(c.pipeline.schedule, sizeof(c.pipeline.schedule), "skippipe");
	c.skip.stage_nodes.n = 2;
	c.skip.stage_nodes.v[0] = c.skip.stage_nodes.v[1] = 1;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_UNSUPPORTED,
		  "SkipPipe's ranks run theirs in dataflow order", "turn pipeline.pipefisher off");
	snprintf(c.pipeline.schedule, sizeof(c.pipeline.schedule), "1f1b");
	c.skip.stage_nodes.n = 0;
	snprintf(c.optim.name, sizeof(c.optim.name), "muon");
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_INVALID,
		  "with optim.name = \"muon\" needs muon.delay = true");
	CHECK(s == NULL, "no session");
	c.muon.delay = 1; /* the delayed Muon's items: not split, costs given */
	c.pipeline.pipefisher_split = 1;
	CHECK_ERR(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull), CLP_ERR_UNSUPPORTED,
		  "shares the delayed Muon's Newton-Schulz", "leave it off");
	c.pipeline.pipefisher_split = 0;
	c.pipeline.pipefisher_costs[0] = 0;
	muon_delay_measured(&c);
	c.muon.delay = 0;
	snprintf(c.optim.name, sizeof(c.optim.name), "soap"); /* measured as Shampoo's */
	sides_measured(&c, "SOAP's refreshes and steps on random gradients");
	fclose(devnull);
}

static void cleanup(void)
{
	tu_cleanup();
}

static void test_cleanup(void)
{
	cleanup();
}

TH_MAIN(TH_TEST(test_train_and_resume), TH_TEST(test_refuse_adamw_checkpoint),
	TH_TEST(test_pipefisher_settings), TH_TEST(test_shampoo_pipefisher), TH_TEST(test_cleanup))
