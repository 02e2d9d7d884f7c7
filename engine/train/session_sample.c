/* Sampling from a session opened with CLP_SESSION_SAMPLE: the model of sample.ckpt on one
 * stage of batch 1, tokens drawn with temperature and top-k from a counter-based stream. */
#include "engine/train/session_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/rng.h"

static int32_t draw(const float *logits, size_t V, double temperature, long top_k,
		    const clp_rng_stream *rs, uint64_t index, float *work)
{
	size_t best = 0;
	double u, acc = 0, total = 0, thresh = -INFINITY;

	for (size_t v = 1; v < V; v++)
		if (logits[v] > logits[best])
			best = v;
	if (temperature <= 0)
		return (int32_t)best;
	if (top_k > 0 && (size_t)top_k < V) { /* the k-th largest logit, by partial selection */
		memcpy(work, logits, V * sizeof(float));
		for (long k = 0; k < top_k; k++) {
			size_t m = (size_t)k;

			for (size_t v = (size_t)k + 1; v < V; v++)
				if (work[v] > work[m])
					m = v;
			float tmp = work[k];
			work[k] = work[m];
			work[m] = tmp;
		}
		thresh = work[top_k - 1];
	}
	for (size_t v = 0; v < V; v++)
		if (logits[v] >= thresh)
			total += exp((logits[v] - logits[best]) / temperature);
	u = clp_rng_uniform(rs, index) * total;
	for (size_t v = 0; v < V; v++)
		if (logits[v] >= thresh) {
			acc += exp((logits[v] - logits[best]) / temperature);
			if (acc >= u)
				return (int32_t)v;
		}
	return (int32_t)best;
}

clp_status clp_session_sample(clp_session *s, FILE *out)
{
	const char *prompt;
	size_t V, T;
	clp_ids ids = {0};
	float *logits, *work;
	int32_t *tg, *win;
	cl_mem dl = NULL;
	clp_rng_stream rs;
	clp_status st;

	CLP_TRY(sess_check_mode(s, CLP_SESSION_SAMPLE, -1, "clp_session_sample"));
	prompt = s->cfg.sample.prompt[0] ? s->cfg.sample.prompt : "\n";
	V = (size_t)s->m.vocab;
	T = s->T;
	logits = malloc(V * sizeof(float));
	work = malloc(V * sizeof(float));
	tg = malloc(T * sizeof(int32_t));
	win = calloc(T, sizeof(int32_t));
	if (!logits || !work || !tg || !win) {
		st = clp_error(CLP_ERR_NOMEM, "out of host memory for sampling");
		goto out;
	}
	if (s->bert) {
		st = clp_error(CLP_ERR_UNSUPPORTED, "bert does not generate text");
		goto out;
	}
	for (size_t t = 0; t < T; t++)
		tg[t] = -1;
	st = clp_tok_encode(s->tok, prompt, strlen(prompt), &ids);
	if (st == CLP_OK && ids.n == 0)
		st = clp_error(CLP_ERR_INVALID, "sample.prompt encodes to no tokens");
	if (st == CLP_OK)
		st = clp_cl_buffer(s->ctx, V * sizeof(float), "sample logits", &dl);
	if (st == CLP_OK)
		st = clp_rng_stream_init(&rs, (uint64_t)s->cfg.train.seed, 0, 0, 0, CLP_RNG_SAMPLE);
	fputs(prompt, out);
	for (long i = 0; st == CLP_OK && i < s->cfg.sample.length; i++) {
		size_t len = ids.n < T ? ids.n : T;
		clp_stage_mb mb = {.seed = (uint64_t)s->cfg.train.seed, .tokens = win, .targets = tg};
		const char *bytes;
		size_t nb;
		int32_t next;

		memset(win, 0, T * sizeof(int32_t));
		memcpy(win, ids.v + ids.n - len, len * sizeof(int32_t));
		st = clp_stage_forward(s->st, &mb, 1.0f);
		if (st == CLP_OK)
			st = clp_stage_logits(s->st, 0, len - 1, 1, clp_buf_at(dl, 0));
		if (st == CLP_OK)
			st = clp_cl_read(s->ctx, dl, 0, V * sizeof(float), logits);
		if (st != CLP_OK)
			break;
		next = draw(logits, V, s->cfg.sample.temperature, s->cfg.sample.top_k, &rs,
			    (uint64_t)i, work);
		st = clp_ids_push(&ids, next);
		if (st == CLP_OK && clp_tok_token(s->tok, next, &bytes, &nb) == CLP_OK) {
			fwrite(bytes, 1, nb, out);
			fflush(out);
		}
	}
	fputc('\n', out);
out:
	if (dl)
		clReleaseMemObject(dl);
	clp_ids_free(&ids);
	free(logits);
	free(work);
	free(tg);
	free(win);
	return st;
}
