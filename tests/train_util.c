/* Helpers of the training tests (see train_util.h). */
#include "tests/train_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

static char dir[] = "/tmp/clpipe-test-XXXXXX";
static char corpus[512];

const char *tu_dir(void)
{
	tu_corpus();
	return dir;
}

void tu_tiny_config(clp_train_config *c, const char *preset)
{
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, c));
	snprintf(c->model.preset, sizeof(c->model.preset), "%s", preset);
	c->model.n_layer = 2;
	c->model.d_model = 32;
	c->model.n_head = 4;
	c->model.ctx = 16;
	c->train.batch = 4;
	c->train.micro_batches = 2;
	c->train.steps = 6;
	c->optim.warmup = 2;
	c->optim.lr = 3e-3;
	c->eval.every = 0;
	c->eval.batches = 2;
	snprintf(c->data.path, sizeof(c->data.path), "%s", tu_corpus());
}

const char *tu_corpus(void)
{
	static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog",
					     "ran", "to", "big", "red", "house", "in", "town"};
	th_rng r = th_rng_seed(5);
	FILE *f;

	if (corpus[0])
		return corpus;
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp %s", dir);
		return "";
	}
	snprintf(corpus, sizeof(corpus), "%s/corpus.txt", dir);
	f = fopen(corpus, "w");
	for (int i = 0; f && i < 6000; i++)
		fprintf(f, "%s%s", words[th_next(&r) % 15], i % 9 == 8 ? ".\n" : " ");
	CHECK(f != NULL, "writing %s", corpus);
	if (f)
		fclose(f);
	return corpus;
}

void tu_cleanup(void)
{
	char cmd[600];

	if (!corpus[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int tu_losses(const char *path, double *out, int max)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	int n = 0;

	while (f && fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		const char *ev = j ? json_string_value(json_object_get(j, "event")) : NULL;

		if (ev && !strcmp(ev, "step") && n < max)
			out[n++] = json_real_value(json_object_get(j, "loss"));
		json_decref(j);
	}
	if (f)
		fclose(f);
	return n;
}

int tu_train(const clp_train_config *c, clp_comm *comm, double *losses, int max, double *val)
{
	clp_session *s = NULL;
	FILE *devnull = fopen("/dev/null", "w");

	CHECK_OK(clp_session_open(&s, c, CLP_SESSION_TRAIN, comm, devnull));
	if (s)
		CHECK_OK(clp_session_train(s, val));
	clp_session_close(s);
	if (devnull)
		fclose(devnull);
	return tu_losses(c->train.log, losses, max);
}
