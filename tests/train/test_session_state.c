/* A session does what its mode opened it for: a call of another mode is refused with
 * CLP_ERR_STATE naming the call (clp_session_sample on a training session used to dereference
 * NULL), and step records go through the logger callback instead of the default output. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/train/session.h"
#include "tests/harness.h"
#include "tests/train_util.h"

typedef struct seen {
	int n;
	long last;
	int ordered, finite;
} seen;

static void logger(void *ud, const clp_session_step *r)
{
	seen *k = ud;

	k->ordered &= r->step == k->last + 1 && r->steps == 3;
	k->finite &= isfinite(r->loss) && r->lr > 0 && r->ms > 0 && r->tok_s > 0;
	k->last = r->step;
	k->n++;
}

static void test_modes_and_logger(void)
{
	clp_train_config c;
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w");
	seen k = {0, 0, 1, 1};
	double loss, bpb, losses[8];

	tu_tiny_config(&c, "gpt2");
	c.train.steps = 3;
	snprintf(c.ckpt.dir, sizeof(c.ckpt.dir), "%s/ck-state", tu_dir());
	snprintf(c.train.log, sizeof(c.train.log), "%s/state.jsonl", tu_dir());
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_TRAIN, NULL, devnull));
	if (s) {
		CHECK_ERR(clp_session_sample(s, devnull), CLP_ERR_STATE, "clp_session_sample",
			  "training");
		clp_session_set_logger(s, logger, &k);
		CHECK_OK(clp_session_train(s, NULL));
		CHECK(k.n == 3 && k.ordered && k.finite, "the logger saw %d records (ordered %d, "
		      "finite %d)", k.n, k.ordered, k.finite);
		/* the callback replaced the default: no step records in train.log */
		CHECK(tu_losses(c.train.log, losses, 8) == 0, "train.log has no step records");
		CHECK_OK(clp_session_eval(s, 1, &loss, &bpb)); /* a training session evaluates */
	}
	clp_session_close(s);

	snprintf(c.sample.ckpt, sizeof(c.sample.ckpt), "%s/ck-state", tu_dir());
	s = NULL;
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_EVAL, NULL, devnull));
	if (s) {
		CHECK_ERR(clp_session_train(s, NULL), CLP_ERR_STATE, "clp_session_train",
			  "evaluation");
		CHECK_ERR(clp_session_sample(s, devnull), CLP_ERR_STATE, "clp_session_sample",
			  "evaluation");
	}
	clp_session_close(s);
	s = NULL;
	c.sample.length = 2;
	CHECK_OK(clp_session_open(&s, &c, CLP_SESSION_SAMPLE, NULL, devnull));
	if (s) {
		CHECK_ERR(clp_session_eval(s, 1, &loss, &bpb), CLP_ERR_STATE, "clp_session_eval",
			  "sampling");
		CHECK_ERR(clp_session_train(s, NULL), CLP_ERR_STATE, "clp_session_train",
			  "sampling");
		CHECK_OK(clp_session_sample(s, devnull));
	}
	clp_session_close(s);
	CHECK_ERR(clp_session_train(NULL, NULL), CLP_ERR_INVALID, "no session");
	fclose(devnull);
}

static void cleanup(void)
{
	tu_cleanup();
}

TH_MAIN(TH_TEST(test_modes_and_logger), TH_TEST(cleanup))
