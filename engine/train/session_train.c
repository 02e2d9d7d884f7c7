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

#include "cl/nn.h"
#include "cl/ops.h"
#include "cl/warmup.h"
#include "engine/scenario/trace.h"
#include "cl/base/clock.h"
#include "cl/base/durable.h"
#include "engine/train/progress.h"

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

/* x as a JSON number, or null when it is NaN or infinite. */
static json_t *json_finite(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
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

/* BERT's masking of the session's data, keyed by seed. */
static clp_mask_opts mask_opts(const clp_session *s, uint64_t seed)
{
	return (clp_mask_opts){
		.prob = s->cfg.data.mask_prob,
		.mask_id = s->mask_id,
		.vocab_size = s->m.vocab,
		.special = s->specials,
		.nspecial = s->nspecial,
		.seed = seed,
	};
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
			clp_mask_opts o = mask_opts(s, (uint64_t)s->cfg.train.seed);

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
	int rep = s->sched->ranks[sess_rank(s)].replica;
	size_t off = (size_t)rep * (size_t)s->M * s->N;

	return (clp_exec_data){
		.tokens = s->in + off,
		.types = s->types + off,
		.targets = s->tg + off,
		.inv_count = valid ? 1.0f / (float)valid : 0.0f,
		.seed = (uint64_t)s->cfg.train.seed,
		.step = step,
		.mb_base = (uint32_t)rep * (uint32_t)s->M,
	};
}

/* eval.dump: every evaluated micro-batch as rows of inputs and targets (-1: no target). */
static clp_status dump_rows(json_t *d, const clp_session *s, const int32_t *in, const int32_t *tg)
{
	json_t *ins = json_object_get(d, "inputs"), *tgs = json_object_get(d, "targets");

	for (size_t b = 0; b < s->B; b++) {
		json_t *ri = json_array(), *rt = json_array();

		for (size_t t = 0; ri && rt && t < s->T; t++) {
			json_array_append_new(ri, json_integer(in[b * s->T + t]));
			json_array_append_new(rt, json_integer(tg[b * s->T + t]));
		}
		if (!ri || !rt || json_array_append_new(ins, ri) || json_array_append_new(tgs, rt)) {
			json_decref(rt);
			return clp_error(CLP_ERR_NOMEM, "out of host memory for eval.dump");
		}
	}
	return CLP_OK;
}

static clp_status dump_write(json_t *d, const clp_session *s, double loss)
{
	json_object_set_new(d, "loss", json_real(loss));
	json_object_set_new(d, "preset", json_string(clp_preset_name(s->m.preset)));
	return clp_io_write_json(s->cfg.eval.dump, d, JSON_COMPACT, 0, 0);
}

uint64_t clp_session_eval_tokens(const clp_session *s)
{
	return s->eval_tokens;
}

clp_status clp_session_eval(clp_session *s, long batches, double *loss, double *bpb)
{
	uint64_t nval;
	long per, nb, rounds;
	size_t valid = 0;
	double sum = 0;
	json_t *dump = NULL;
	clp_status st = CLP_OK;

	CLP_TRY(sess_check_mode(s, CLP_SESSION_TRAIN, CLP_SESSION_EVAL, "clp_session_eval"));
	nval = clp_dataset_nseq(s->ds, CLP_SPLIT_VAL);
	per = (long)s->R * s->M; /* validation micro-batches per pass of the schedule */
	nb = batches > 0 ? batches : (long)((nval + s->B - 1) / s->B);
	rounds = (nb + per - 1) / per;
	nb = rounds * per;
	if (s->mode == CLP_SESSION_EVAL && s->cfg.eval.dump[0] &&
	    !(dump = json_pack("{s:[],s:[]}", "inputs", "targets")))
		return clp_error(CLP_ERR_NOMEM, "out of host memory for eval.dump");
	if (s->skip) /* the stages live on several nodes: gather the model on rank 0 */
		CLP_TRY(sess_skip_eval_begin(s));
	/* count targets first: the mean is over every micro-batch of the evaluation */
	for (int pass = 0; pass < 2 && st == CLP_OK; pass++) {
		for (long r = 0; r < rounds && st == CLP_OK; r++) {
			for (long b = 0; b < per && st == CLP_OK; b++) {
				long vb = r * per + b;
				int32_t *in = s->in + (size_t)b * s->N, *tg = s->tg + (size_t)b * s->N;

				st = clp_dataset_val(s->ds, (uint64_t)vb * s->B, (int)s->B, in, tg);
				if (st == CLP_OK && s->bert) {
					clp_mask_opts o = mask_opts(s, (uint64_t)s->cfg.train.seed + 1);

					st = clp_data_mask_bert(&o, (uint64_t)vb, 0, in, tg, s->N);
				}
				/* the whole split: each sequence once (the last batch's extra rows,
				 * which wrap around, predict nothing) */
				for (size_t q = 0; batches <= 0 && q < s->B; q++)
					if ((uint64_t)vb * s->B + q >= nval)
						for (size_t t = 0; t < s->T; t++)
							tg[q * s->T + t] = -1;
				if (pass == 0)
					for (size_t i = 0; i < s->N; i++)
						valid += tg[i] >= 0;
				if (st == CLP_OK && pass == 1 && dump)
					st = dump_rows(dump, s, in, tg);
			}
			if (st == CLP_OK && pass == 1) {
				clp_exec_data d = replica_data(s, valid, 0);
				double part = 0;

				if (s->skip)
					st = sess_skip_eval_forward(s, d.inv_count, &part);
				else
					st = clp_exec_forward(s->ex, &d, &part);
				sum += part;
			}
		}
	}
	if (st == CLP_OK && s->skip)
		st = sess_skip_eval_end(s, &sum);
	if (st == CLP_OK && dump)
		st = dump_write(dump, s, sum);
	json_decref(dump);
	CLP_TRY(st);
	s->eval_tokens = valid;
	*loss = sum;
	*bpb = s->bert ? NAN : sum / log(2.0) / s->bytes_per_token;
	return CLP_OK;
}

static void progress(clp_session *s, long step, double loss, double lr, double tok_s,
		     double ms, double eta, int skipped, double norm, double scale)
{
	clp_progress p = {step + 1, s->cfg.train.steps, loss, lr, norm, tok_s, ms, eta, skipped,
			  scale};
	char line[1024];

	if (sess_rank(s) != 0)
		return;
	clp_progress_format(line, sizeof(line), &p, sess_tty(s));
	fputs(line, s->out);
	fflush(s->out);
}

/* Evaluate, print and log; *val is the validation loss, *metric bits per byte (or the loss). */
static clp_status evaluate(clp_session *s, long step, double *val, double *metric)
{
	double loss, bpb;

	CLP_TRY(clp_session_eval(s, s->cfg.eval.batches, &loss, &bpb));
	*val = loss;
	*metric = isnan(bpb) ? loss : bpb;
	if (sess_rank(s) != 0)
		return CLP_OK;
	clp_progress_clear(s->out, sess_tty(s));
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
	sess_report_eval(s, step, loss, bpb);
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

/* Whether a checkpoint after `done` steps is due by ckpt.every: every ckpt.every steps; with
 * PipeFisher at the end of the cycle holding such a step (a cycle's kept data is not saved). */
static int save_due_steps(const clp_session *s, long done)
{
	long every = s->cfg.ckpt.every, K = st_pf_K(s);

	if (every <= 0)
		return 0;
	if (K <= 1)
		return done % every == 0;
	return done % K == 0 && done / every != (done - K) / every;
}

/* By ckpt.minutes since the last checkpoint (rank 0's clock decides for the whole job), at a
 * PipeFisher cycle's end. */
static int save_due_clock(const clp_session *s, long done)
{
	long K = st_pf_K(s);

	if (s->cfg.ckpt.minutes <= 0 || (K > 1 && done % K) || sess_rank(s) != 0)
		return 0;
	return clp_now() - s->t_saved >= s->cfg.ckpt.minutes * 60.0;
}

/* After each step: whether the run stops (a signal on any rank; with PipeFisher at the cycle's
 * end) and whether a checkpoint is due by the clock; one small all-gather on a job of several
 * ranks, so that every rank decides the same at the same step. */
static clp_status step_decisions(clp_session *s, long done, int *stop, int *clock)
{
	int mine[2] = {s->stop_flag ? (int)*s->stop_flag : 0, save_due_clock(s, done)};
	int n = clp_comm_size(s->comm), *all, K = st_pf_K(s);
	clp_status st;

	*stop = *clock = 0;
	if (K > 1 && done % K) /* PipeFisher resumes at a cycle's end: the flag waits for it */
		mine[0] = 0;
	if (n == 1) {
		*stop = mine[0];
		*clock = mine[1];
		s->stop_rank = 0;
		return CLP_OK;
	}
	if (!s->stop_flag && s->cfg.ckpt.minutes <= 0)
		return CLP_OK;
	all = calloc((size_t)n * 2, sizeof(int));
	if (!all)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	st = clp_comm_allgather(s->comm, mine, sizeof(mine), all, "stop and save decisions");
	for (int r = 0; st == CLP_OK && r < n; r++) {
		if (all[2 * r] && !*stop) {
			*stop = all[2 * r];
			s->stop_rank = r;
		}
		*clock |= all[2 * r + 1];
	}
	free(all);
	return st;
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
	if (st != CLP_OK || sess_rank(s) != 0)
		return st;
	snprintf(tr.title, sizeof(tr.title), "step%s %ld%s%.0ld, %s%s, %ld stages x %ld replicas",
		 first < step ? "s" : "", first, first < step ? "-" : "", first < step ? step : 0,
		 s->cfg.pipeline.schedule, st_pf_K(s) ? " + PipeFisher" : "", s->cfg.pipeline.stages,
		 s->cfg.pipeline.replicas);
	snprintf(svg, sizeof(svg), "%s.svg", s->cfg.train.trace);
	tr.steps = (int)(step - first + 1); /* the picture's header then agrees with the line below */
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

		clp_progress_clear(s->out, sess_tty(s));
		fprintf(s->out, "trace of %s %ld%s%.0ld: %s, %s; %.1f ms per step, compute "
			"utilisation %.1f %%, busy %.1f %%, bubble %.1f %%\n",
			n > 1 ? "steps" : "step", first,
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
static clp_status print_profile(clp_session *s, long steps)
{
	clp_cl_timing *t = NULL;
	int n = 0;
	double total = 0;
	uint64_t launches = 0;

	CLP_TRY(clp_cl_profile_stop(s->ctx, &t, &n));
	for (int i = 0; i < n; i++)
		total += t[i].total_ms, launches += t[i].count;
	if (steps < 1)
		steps = 1;
	if (sess_rank(s) == 0) {
		fprintf(s->out, "device time per kernel (rank 0, all steps but the first): %.1f ms%s\n",
			total, clp_cl_ctx_caps(s->ctx)->timestamps ? "" :
			" (host clock, each kernel run alone: this device's event timestamps read zero)");
		fprintf(s->out, "launches per step (rank 0): %.1f (%llu in %ld steps, %d kernels)\n",
			(double)launches / (double)steps, (unsigned long long)launches, steps, n);
		fprintf(s->out, "  %-24s %8s %9s %12s %7s\n", "kernel", "calls", "per step",
			"total ms", "share");
		for (int i = 0; i < n; i++)
			fprintf(s->out, "  %-24s %8llu %9.1f %12.1f %6.1f%%\n", t[i].label,
				(unsigned long long)t[i].count, (double)t[i].count / (double)steps,
				t[i].total_ms, 100 * t[i].total_ms / (total > 0 ? total : 1));
	}
	free(t);
	return CLP_OK;
}

/* One step of the algorithm: the batch, forward and backward through the schedule, the
 * reductions, clipping and the optimizer step (the executor runs the last four); the traced
 * steps (first..last, 1-based) are recorded. */
static clp_status train_step(clp_session *s, long step, long tr_first, long tr_last,
			     clp_session_step *rec)
{
	const clp_train_config *c = &s->cfg;
	int trace = c->train.trace[0] && step + 1 >= tr_first && step + 1 <= tr_last;
	double lr = lr_at(c, step);
	clp_optim_step os;
	clp_exec_result res;
	clp_exec_data d;
	size_t valid;

	s->optim->step(c, lr, s->applied + 1, &os);
	CLP_TRY(draw_step(s, step, &valid));
	d = replica_data(s, valid, (uint32_t)step);
	if (s->skip) { /* each micro-batch's loss over its targets and its origin's count */
		sess_skip_scales(s);
		d.inv_mb = s->inv_mb;
	}
	if (trace && step + 1 == tr_first)
		CLP_TRY(clp_exec_trace_start(s->ex));
	CLP_TRY(clp_exec_step(s->ex, &d, &os, (float)c->optim.grad_clip, &res));
	if (trace && step + 1 == tr_last)
		CLP_TRY(write_trace(s, tr_first, step + 1));
	if (!res.skipped)
		s->applied++;
	*rec = (clp_session_step){
		.step = step + 1,
		.steps = c->train.steps,
		.loss = res.loss,
		.lr = lr,
		.grad_norm = res.grad_norm,
		.skipped = res.skipped,
		.loss_scale = s->prec == CLP_F16 ? res.loss_scale : 0.0,
	};
	return CLP_OK;
}

/* The default logger: a progress line on out and a "step" record in train.log. */
static void log_step(void *ud, const clp_session_step *r)
{
	clp_session *s = ud;

	json_t *rec;
	double shown = 0;

	/* fp16: the loss scale on the progress line where it changed (and on the first step) */
	if (r->loss_scale > 0 && (float)r->loss_scale != s->last_scale) {
		shown = r->loss_scale;
		s->last_scale = (float)r->loss_scale;
	}
	progress(s, r->step - 1, r->loss, r->lr, r->tok_s, r->ms, r->eta_s, r->skipped,
		 r->grad_norm, shown);
	/* a skipped step's norm is not finite: JSON has no NaN or inf, so it is null (a record
	 * packed with one would be lost) */
	rec = json_pack("{s:s, s:I, s:o, s:f, s:o, s:f, s:f, s:b}", "event", "step", "step",
			(json_int_t)r->step, "loss", json_finite(r->loss), "lr", r->lr, "grad_norm",
			json_finite(r->grad_norm), "tok_s", r->tok_s, "ms", r->ms, "skipped",
			r->skipped);
	if (rec && r->loss_scale > 0)
		json_object_set_new(rec, "loss_scale", json_real(r->loss_scale));
	log_json(s, rec);
}

/* Seconds spent building (not loading) kernel programs since build record `from`: a cold
 * cache's first step, which the throughput and ETA leave out. */
static double kernel_builds(const clp_session *s, int from)
{
	double t = 0;

	for (int i = from; i < clp_cl_ctx_nbuilds(s->ctx); i++) {
		const clp_cl_build_info *b = clp_cl_ctx_build(s->ctx, i);

		if (b && !b->cached && !b->remembered)
			t += b->seconds;
	}
	return t;
}

/* One process: build the common kernels before the clock starts, saying so when the cache is
 * cold (the small set first tells; a failure here is left to the step to report). */
static void warm_kernels(clp_session *s)
{
	int nb = clp_cl_ctx_nbuilds(s->ctx), cold;
	double t0 = clp_now();

	if (clp_comm_size(s->comm) > 1)
		return;
	if (clp_cl_warmup(s->ctx, NULL) != CLP_OK) {
		clp_error_clear();
		return;
	}
	cold = kernel_builds(s, nb) > 0;
	if (cold && sess_rank(s) == 0) {
		fprintf(s->out, "building kernels (first run on this device; cached for later "
			"runs) ...\n");
		fflush(s->out);
	}
	if (clp_nn_warmup(s->ctx, NULL) != CLP_OK)
		clp_error_clear();
	if (cold && sess_rank(s) == 0)
		fprintf(s->out, "built kernels in %.1f s\n", clp_now() - t0);
}

/* The evaluations of a run: the last one's loss and metric, and when it ran. */
struct evals {
	double val, metric;
	long at;
};

/* Every eval.every steps but the last (the run's end evaluates); *stop when the metric
 * reached eval.target_ratio x the unigram baseline. */
static clp_status periodic_eval(clp_session *s, long done, struct evals *ev, int *stop)
{
	const clp_train_config *c = &s->cfg;

	*stop = 0;
	if (c->eval.every <= 0 || done % c->eval.every != 0 || done >= c->train.steps)
		return CLP_OK;
	CLP_TRY(evaluate(s, done, &ev->val, &ev->metric));
	ev->at = done;
	if (c->eval.target_ratio > 0 && !s->bert &&
	    ev->metric <= c->eval.target_ratio * s->baseline_bpb) {
		if (sess_rank(s) == 0)
			fprintf(s->out, "reached %.3f x the unigram baseline: stopping at step %ld\n",
				c->eval.target_ratio, done);
		*stop = 1;
	}
	return CLP_OK;
}

/* A checkpoint of the state after `done` steps (s->step is the step just run). */
static clp_status save_after(clp_session *s, long done)
{
	clp_status st;

	clp_progress_clear(s->out, sess_tty(s));
	s->step = done; /* the checkpoint holds the next step to run */
	st = sess_save(s);
	s->step = done - 1;
	if (st == CLP_OK) {
		snprintf(s->last_ckpt, sizeof(s->last_ckpt), "%s/step-%08ld", s->cfg.ckpt.dir, done);
		s->t_saved = clp_now();
	}
	return st;
}

static clp_status periodic_save(clp_session *s, long done, int clock)
{
	if (!s->cfg.ckpt.dir[0] || done >= s->cfg.train.steps ||
	    !(clock || save_due_steps(s, done)))
		return CLP_OK;
	return save_after(s, done);
}

/* The end of a run: the profile, the last evaluation and checkpoint (a run stopped by a signal
 * skips the evaluation, and saves unless its last periodic checkpoint is of this step). */
static clp_status finish_run(clp_session *s, long first, struct evals *ev)
{
	const clp_train_config *c = &s->cfg;
	char path[1100];

	clp_progress_clear(s->out, sess_tty(s));
	if (c->train.profile && s->step > first + 1)
		CLP_TRY(print_profile(s, s->step - first - 1));
	if (ev->at != s->step && !s->stopped)
		CLP_TRY(evaluate(s, s->step, &ev->val, &ev->metric));
	if (c->eval.target_ratio > 0 && !s->bert && s->byte_level && sess_rank(s) == 0 &&
	    !s->stopped && ev->metric > c->eval.target_ratio * s->baseline_bpb)
		fprintf(s->out, "the %ld steps ended at %.3f x the unigram baseline (the early stop "
			"at %.3f was not reached)\n", s->step, ev->metric / s->baseline_bpb,
			c->eval.target_ratio);
	if (c->ckpt.dir[0] && st_pf_K(s) > 1 && s->step % st_pf_K(s) && sess_rank(s) == 0)
		fprintf(s->out, "note: step %ld is inside a PipeFisher cycle (K = %d): a run can "
			"resume from this checkpoint only at a cycle's end\n", s->step, st_pf_K(s));
	snprintf(path, sizeof(path), "%s/step-%08ld", c->ckpt.dir, s->step);
	if (c->ckpt.dir[0] && strcmp(path, s->last_ckpt) != 0) {
		CLP_TRY(sess_save(s));
		snprintf(s->last_ckpt, sizeof(s->last_ckpt), "%s", path);
	}
	return CLP_OK;
}

clp_status clp_session_train(clp_session *s, double *val_loss)
{
	const clp_train_config *c;
	long first, tr_first, tr_last;
	double t_start = clp_now();
	int nb0;
	struct evals ev = {.val = NAN, .metric = NAN, .at = -1};
	size_t tokens;

	CLP_TRY(sess_check_mode(s, CLP_SESSION_TRAIN, -1, "clp_session_train"));
	c = &s->cfg;
	if (!strcmp(s->cfg.ckpt.dir, "none")) /* clpipe train's --no-ckpt */
		s->cfg.ckpt.dir[0] = '\0';
	first = s->step;
	s->stopped = 0;
	s->t_saved = clp_now();
	s->build_s = 0;
	warm_kernels(s); /* a job of several ranks did this before its start-up barrier */
	t_start = clp_now();
	nb0 = clp_cl_ctx_nbuilds(s->ctx);
	tokens = (size_t)s->R * (size_t)s->M * s->N;
	if (s->log) { /* the effective config goes into the log, not onto the screen */
		char *text = clp_cfg_to_string(&clp_train_schema, &s->cfg);

		if (text)
			log_json(s, json_pack("{s:s, s:I, s:s}", "event", "config", "step",
					      (json_int_t)first, "config", text));
		free(text);
	}
	if (s->byte_level && !s->bert && sess_rank(s) == 0)
		fprintf(s->out, "unigram baseline: %.3f bits per byte\n", s->baseline_bpb);
	CLP_TRY(sess_report_begin(s));
	trace_window(s, &tr_first, &tr_last);
	if (tr_first < first + 1) /* a resumed run starts inside the window */
		tr_first = first + 1;
	for (; s->step < c->train.steps; s->step++) {
		long step = s->step;
		double t0 = clp_now();
		clp_session_step rec;
		int stop, sig, clock;
		double built;
		int nbs;

		s->build_s = kernel_builds(s, nb0); /* so far, evaluations' included */
		nbs = clp_cl_ctx_nbuilds(s->ctx);
		CLP_TRY(train_step(s, step, tr_first, tr_last, &rec));
		s->completed = step + 1;
		built = kernel_builds(s, nbs);
		if (built > 0.5 && sess_rank(s) == 0) {
			clp_progress_clear(s->out, sess_tty(s));
			fprintf(s->out, "building kernels (first run on this device): %.1f s in step %ld "
				"(cached for later runs; not counted in tok/s and ETA)\n", built,
				step + 1);
		}
		s->build_s += built;
		rec.ms = (clp_now() - t0 - built) * 1e3;
		rec.tok_s = (double)tokens / (rec.ms * 1e-3);
		rec.eta_s = (clp_now() - t_start - s->build_s) / (double)(step - first + 1) *
			    (double)(c->train.steps - step - 1);
		if (sess_rank(s) == 0)
			s->logger(s->logger_ud, &rec);
		sess_report_step(s, step + 1, rec.loss, rec.tok_s);
		CLP_TRY(periodic_eval(s, step + 1, &ev, &stop));
		if (stop) {
			s->step++;
			break;
		}
		CLP_TRY(step_decisions(s, step + 1, &sig, &clock));
		CLP_TRY(periodic_save(s, step + 1, clock && !sig));
		if (s->hook)
			s->hook(s->hook_ud, step + 1);
		if (sig) {
			s->stopped = sig;
			s->step++;
			break;
		}
		if (c->train.profile && step == first) /* the first step builds kernels */
			clp_cl_profile_start(s->ctx);
	}
	CLP_TRY(finish_run(s, first, &ev));
	s->build_s = kernel_builds(s, nb0);
	sess_report_end(s);
	if (val_loss)
		*val_loss = ev.val;
	return CLP_OK;
}

void clp_session_set_logger(clp_session *s, void (*fn)(void *ud, const clp_session_step *rec),
			    void *ud)
{
	s->logger = fn ? fn : log_step;
	s->logger_ud = fn ? ud : s;
}

void clp_session_set_stop_flag(clp_session *s, volatile sig_atomic_t *flag)
{
	s->stop_flag = flag;
}

int clp_session_stopped(const clp_session *s, int *rank)
{
	if (rank)
		*rank = s->stop_rank;
	return s->stopped;
}

const char *clp_session_last_ckpt(const clp_session *s)
{
	return s->last_ckpt;
}

void clp_session_set_hook(clp_session *s, void (*fn)(void *ud, long step), void *ud)
{
	s->hook = fn;
	s->hook_ud = ud;
}
