/* The training loop: learning-rate schedule, gradient accumulation over micro-batches, clipping
 * and the non-finite skip, AdamW, one synchronisation per step, progress and JSON-lines logs,
 * periodic evaluation and checkpoints. */
#include "engine/train/session_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cl/ops.h"
#include "engine/io/trace.h"

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Linear warmup, then cosine decay from lr to min_lr at the last step. */
static double lr_at(const clp_train_config *c, long step)
{
	long warm = c->optim.warmup, total = c->train.steps;
	double p;

	if (step < warm)
		return c->optim.lr * (double)(step + 1) / (double)warm;
	if (total <= warm + 1)
		return c->optim.lr;
	p = (double)(step - warm) / (double)(total - warm - 1);
	if (p > 1)
		p = 1;
	return c->optim.min_lr + 0.5 * (c->optim.lr - c->optim.min_lr) * (1 + cos(M_PI * p));
}

static void log_json(clp_session *s, json_t *rec)
{
	if (s->log) {
		json_dumpf(rec, s->log, JSON_COMPACT);
		fputc('\n', s->log);
		fflush(s->log);
	}
	json_decref(rec);
}

static void fmt_time(double sec, char *buf, size_t n)
{
	long t = (long)(sec + 0.5);

	if (t >= 3600)
		snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else
		snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

/* The micro-batches of a step for every replica (each rank draws the same global batch and
 * runs its replica's share): inputs, targets (BERT: masked), and the count of targets. */
static clp_status draw_step(clp_session *s, long step, size_t *valid)
{
	size_t N = s->N;

	*valid = 0;
	for (int mb = 0; mb < s->R * s->M; mb++) {
		int32_t *in = s->in + (size_t)mb * N, *tg = s->tg + (size_t)mb * N;

		CLP_TRY(clp_dataset_next(s->ds, (int)s->B, 0, (int)s->B, in, tg));
		if (s->bert) {
			clp_mask_opts o = {s->cfg.data.mask_prob, s->mask_id, s->m.vocab, s->specials,
					   s->nspecial, (uint64_t)s->cfg.train.seed};

			/* an encoder predicts the tokens in place, not the next ones */
			CLP_TRY(clp_data_mask_bert(&o, (uint64_t)step, (uint64_t)mb, in, tg, N));
		}
		for (size_t i = 0; i < N; i++)
			*valid += tg[i] >= 0;
	}
	return CLP_OK;
}

/* This rank's replica's share of the step's batch. */
static clp_exec_data replica_data(const clp_session *s, size_t valid, uint32_t step)
{
	int rep = s->sched->ranks[st_rank(s)].replica;
	size_t off = (size_t)rep * (size_t)s->M * s->N;
	clp_exec_data d = {s->in + off, s->types + off, s->tg + off,
			   valid ? 1.0f / (float)valid : 0.0f, (uint64_t)s->cfg.train.seed, step, NULL};

	return d;
}

clp_status clp_session_eval(clp_session *s, long batches, double *loss, double *bpb)
{
	uint64_t nval = clp_dataset_nseq(s->ds, CLP_SPLIT_VAL);
	long per = (long)s->R * s->M; /* validation micro-batches per pass of the schedule */
	long nb = batches > 0 ? batches : (long)((nval + s->B - 1) / s->B);
	long rounds = (nb + per - 1) / per;
	size_t valid = 0;
	double sum = 0;

	nb = rounds * per;
	if (s->skip) /* the stages live on several nodes: gather the model on rank 0 */
		CLP_TRY(st_skip_eval_begin(s));
	/* count targets first: the mean is over every micro-batch of the evaluation */
	for (int pass = 0; pass < 2; pass++) {
		for (long r = 0; r < rounds; r++) {
			for (long b = 0; b < per; b++) {
				long vb = r * per + b;
				int32_t *in = s->in + (size_t)b * s->N, *tg = s->tg + (size_t)b * s->N;

				CLP_TRY(clp_dataset_val(s->ds, (uint64_t)vb * s->B, (int)s->B, in, tg));
				if (s->bert) {
					clp_mask_opts o = {s->cfg.data.mask_prob, s->mask_id, s->m.vocab,
							   s->specials, s->nspecial,
							   (uint64_t)s->cfg.train.seed + 1};

					CLP_TRY(clp_data_mask_bert(&o, (uint64_t)vb, 0, in, tg, s->N));
				}
				if (pass == 0)
					for (size_t i = 0; i < s->N; i++)
						valid += tg[i] >= 0;
			}
			if (pass == 1) {
				clp_exec_data d = replica_data(s, valid, 0);
				double part = 0;

				if (s->skip)
					CLP_TRY(st_skip_eval_forward(s, d.inv_count, &part));
				else
					CLP_TRY(clp_exec_forward(s->ex, &d, &part));
				sum += part;
			}
		}
	}
	if (s->skip)
		CLP_TRY(st_skip_eval_end(s, &sum));
	*loss = sum;
	*bpb = s->bert ? NAN : sum / log(2.0) / s->bytes_per_token;
	return CLP_OK;
}

static void progress(clp_session *s, long step, double loss, double lr, double tok_s,
		     double ms, double eta, int skipped, double norm)
{
	char e[32];
	int tty = isatty(fileno(s->out)) && !clp_comm_launched(); /* mpirun forwards through ptys */

	if (st_rank(s) != 0)
		return;
	fmt_time(eta, e, sizeof(e));
	if (tty) {
		int width = 20, done = (int)((double)width * (double)(step + 1) /
					     (double)s->cfg.train.steps);

		fprintf(s->out, "\r[%.*s%*s] ", done, "====================", width - done, "");
	}
	fprintf(s->out, "step %ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %.0f ms/step "
		"| ETA %s%s", step + 1, s->cfg.train.steps, loss, lr, norm, tok_s, ms, e,
		skipped ? " | non-finite gradient: step skipped" : "");
	fputs(tty ? "   " : "\n", s->out);
	fflush(s->out);
}

/* Evaluate, print and log; *val is the validation loss, *metric bits per byte (or the loss). */
static clp_status evaluate(clp_session *s, long step, double *val, double *metric)
{
	double loss, bpb;

	CLP_TRY(clp_session_eval(s, s->cfg.eval.batches, &loss, &bpb));
	*val = loss;
	*metric = isnan(bpb) ? loss : bpb;
	if (st_rank(s) != 0)
		return CLP_OK;
	if (isatty(fileno(s->out)))
		fputc('\n', s->out);
	if (isnan(bpb))
		fprintf(s->out, "eval at step %ld: val loss %.4f, perplexity %.2f\n", step, loss,
			exp(loss));
	else
		fprintf(s->out, "eval at step %ld: val loss %.4f, perplexity %.2f, %.3f bits/byte "
			"(unigram baseline %.3f, ratio %.3f)\n", step, loss, exp(loss), bpb,
			s->baseline_bpb, bpb / s->baseline_bpb);
	log_json(s, json_pack("{s:s, s:I, s:f, s:f, s:f}", "event", "eval", "step",
			      (json_int_t)step, "val_loss", loss, "val_bpb", isnan(bpb) ? -1.0 : bpb,
			      "baseline_bpb", s->baseline_bpb));
	return CLP_OK;
}

/* The traced steps (1-based, first..last): train.trace_steps ending with train.trace_step; by
 * default one step, or with PipeFisher the last whole cycle (every K-FAC item runs once). */
static void trace_window(const clp_session *s, long *first, long *last)
{
	const clp_train_config *c = &s->cfg;
	long K = st_pf_K(s), end = c->train.trace_step > 0 ? c->train.trace_step : c->train.steps;
	long n = c->train.trace_steps > 0 ? c->train.trace_steps : K > 1 ? K : 1;

	if (K > 1 && c->train.trace_steps == 0 && end >= K)
		end = end / K * K;
	*last = end;
	*first = end - n + 1 > 1 ? end - n + 1 : 1;
}

/* Whether to write a checkpoint after `done` steps: every ckpt.every steps; with PipeFisher at
 * the end of the cycle holding such a step (a cycle's kept data is not saved). */
static int save_now(const clp_session *s, long done)
{
	long every = s->cfg.ckpt.every, K = st_pf_K(s);

	if (!s->cfg.ckpt.dir[0] || every <= 0 || done >= s->cfg.train.steps)
		return 0;
	if (K <= 1)
		return done % every == 0;
	return done % K == 0 && done / every != (done - K) / every;
}

/* Gather the traced steps on rank 0, write them as Chrome JSON and SVG, print the utilisation. */
static clp_status write_trace(clp_session *s, long first, long step)
{
	clp_trace tr;
	clp_trace_stats ts;
	char svg[1100], label[96] = "measured";
	const clp_trace *one;
	clp_status st;

	memset(&tr, 0, sizeof(tr));
	st = clp_exec_trace_finish(s->ex, &tr);
	if (st != CLP_OK || st_rank(s) != 0)
		return st;
	snprintf(tr.title, sizeof(tr.title), "step%s %ld%s%.0ld, %s%s, %ld stages x %ld replicas",
		 first < step ? "s" : "", first, first < step ? "-" : "", first < step ? step : 0,
		 s->cfg.pipeline.schedule, st_pf_K(s) ? " + PipeFisher" : "", s->cfg.pipeline.stages,
		 s->cfg.pipeline.replicas);
	snprintf(svg, sizeof(svg), "%s.svg", s->cfg.train.trace);
	if (step > first) /* the picture's "step" is then the span of all of them */
		snprintf(label, sizeof(label), "measured, steps %ld-%ld together", first, step);
	one = &tr;
	st = clp_trace_write_chrome(&tr, s->cfg.train.trace);
	if (st == CLP_OK)
		st = clp_trace_write_svg(svg, &one, (const char *const[]){label}, 1);
	if (st == CLP_OK)
		st = clp_trace_stats_compute(&tr, 0.0, &ts);
	if (st == CLP_OK) {
		long n = step - first + 1;

		fprintf(s->out, "%strace of %s %ld%s%.0ld: %s, %s; %.1f ms per step, compute "
			"utilisation %.1f %%, busy %.1f %%, bubble %.1f %%\n",
			isatty(fileno(s->out)) ? "\n" : "", n > 1 ? "steps" : "step", first,
			n > 1 ? "-" : "", n > 1 ? step : 0, s->cfg.train.trace, svg,
			ts.span_s * 1e3 / (double)n, 100 * ts.util_mean, 100 * ts.busy_mean,
			100 * ts.bubble);
		log_json(s, json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f}", "event", "trace",
				      "first_step", (json_int_t)first, "step", (json_int_t)step,
				      "step_s", ts.span_s / (double)n, "utilisation", ts.util_mean,
				      "busy", ts.busy_mean, "bubble", ts.bubble));
		clp_trace_stats_free(&ts);
	}
	clp_trace_free(&tr);
	return st;
}

/* The per-kernel device time of the steps run (train.profile), from profiling events. */
static clp_status print_profile(clp_session *s)
{
	clp_cl_timing *t = NULL;
	int n = 0;
	double total = 0;

	CLP_TRY(clp_cl_profile_stop(s->ctx, &t, &n));
	for (int i = 0; i < n; i++)
		total += t[i].total_ms;
	if (st_rank(s) == 0) {
		fprintf(s->out, "device time per kernel (rank 0, all steps but the first): %.1f ms%s\n",
			total, clp_cl_ctx_caps(s->ctx)->timestamps ? "" :
			" (host clock, each kernel run alone: this device's event timestamps read zero)");
		fprintf(s->out, "  %-24s %8s %12s %7s\n", "kernel", "calls", "total ms", "share");
		for (int i = 0; i < n; i++)
			fprintf(s->out, "  %-24s %8llu %12.1f %6.1f%%\n", t[i].label,
				(unsigned long long)t[i].count, t[i].total_ms,
				100 * t[i].total_ms / (total > 0 ? total : 1));
	}
	free(t);
	return CLP_OK;
}

clp_status clp_session_train(clp_session *s, double *val_loss)
{
	const clp_train_config *c = &s->cfg;
	long first = s->step;
	double t_start = now_s(), last_val = NAN, metric = NAN;
	long evaluated_at = -1;
	size_t tokens = (size_t)s->R * (size_t)s->M * s->N;
	long tr_first, tr_last;

	if (s->byte_level && !s->bert && st_rank(s) == 0)
		fprintf(s->out, "unigram baseline: %.3f bits per byte\n", s->baseline_bpb);
	trace_window(s, &tr_first, &tr_last);
	if (tr_first < first + 1) /* a resumed run starts inside the window */
		tr_first = first + 1;
	for (; s->step < c->train.steps; s->step++) {
		long step = s->step;
		double t0 = now_s(), lr = lr_at(c, step), ms, eta, loss;
		clp_nn_adamw_hp hp = {(float)lr, (float)c->optim.beta1, (float)c->optim.beta2,
				      (float)c->optim.eps, (float)c->optim.weight_decay,
				      s->applied + 1};
		clp_exec_result res;
		clp_exec_data d;
		size_t valid;
		int skipped;

		int trace = c->train.trace[0] && step + 1 >= tr_first && step + 1 <= tr_last;

		CLP_TRY(draw_step(s, step, &valid));
		d = replica_data(s, valid, (uint32_t)step);
		if (s->skip) { /* each micro-batch's loss over its targets and its origin's count */
			st_skip_scales(s);
			d.inv_mb = s->inv_mb;
		}
		if (trace && step + 1 == tr_first)
			CLP_TRY(clp_exec_trace_start(s->ex));
		CLP_TRY(clp_exec_step(s->ex, &d, &hp, (float)c->optim.grad_clip, &res));
		if (trace && step + 1 == tr_last)
			CLP_TRY(write_trace(s, tr_first, step + 1));
		loss = res.loss;
		skipped = res.skipped;
		if (!skipped)
			s->applied++;
		ms = (now_s() - t0) * 1e3;
		eta = (now_s() - t_start) / (double)(step - first + 1) *
		      (double)(c->train.steps - step - 1);
		progress(s, step, loss, lr, (double)tokens / (ms * 1e-3), ms, eta, skipped,
			 res.grad_norm);
		log_json(s, json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:b}", "event", "step",
				      "step", (json_int_t)step + 1, "loss", loss, "lr", lr,
				      "grad_norm", res.grad_norm, "tok_s",
				      (double)tokens / (ms * 1e-3), "ms", ms, "skipped", skipped));
		if (c->eval.every > 0 && (step + 1) % c->eval.every == 0 && step + 1 < c->train.steps) {
			CLP_TRY(evaluate(s, step + 1, &last_val, &metric));
			evaluated_at = step + 1;
			if (c->eval.target_ratio > 0 && !s->bert &&
			    metric <= c->eval.target_ratio * s->baseline_bpb) {
				if (st_rank(s) == 0)
					fprintf(s->out, "reached %.3f x the unigram baseline: stopping at "
						"step %ld\n", c->eval.target_ratio, step + 1);
				s->step++;
				break;
			}
		}
		if (save_now(s, step + 1)) {
			s->step++; /* the checkpoint holds the next step to run */
			CLP_TRY(st_save(s));
			s->step--;
		}
		if (s->hook)
			s->hook(s->hook_ud, step + 1);
		if (c->train.profile && step == first) /* the first step builds kernels */
			clp_cl_profile_start(s->ctx);
	}
	if (isatty(fileno(s->out)) && st_rank(s) == 0)
		fputc('\n', s->out);
	if (c->train.profile && s->step > first + 1)
		CLP_TRY(print_profile(s));
	if (evaluated_at != s->step)
		CLP_TRY(evaluate(s, s->step, &last_val, &metric));
	if (c->eval.target_ratio > 0 && !s->bert && s->byte_level && st_rank(s) == 0 &&
	    metric > c->eval.target_ratio * s->baseline_bpb)
		fprintf(s->out, "did not reach %.3f x the unigram baseline in %ld steps (%.3f)\n",
			c->eval.target_ratio, s->step, metric / s->baseline_bpb);
	if (c->ckpt.dir[0] && st_pf_K(s) > 1 && s->step % st_pf_K(s) && st_rank(s) == 0)
		fprintf(s->out, "note: step %ld is inside a PipeFisher cycle (K = %d): a run can "
			"resume from this checkpoint only at a cycle's end\n", s->step, st_pf_K(s));
	if (c->ckpt.dir[0])
		CLP_TRY(st_save(s));
	if (val_loss)
		*val_loss = last_val;
	return CLP_OK;
}

void clp_session_set_hook(clp_session *s, void (*fn)(void *ud, long step), void *ud)
{
	s->hook = fn;
	s->hook_ud = ud;
}
