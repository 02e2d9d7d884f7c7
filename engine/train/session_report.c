/* What a training run shows besides its step lines and log, on rank 0: the loss curve next to
 * the log (curve.h), rewritten at every evaluation, and the facts of the summary printed at the
 * end (summary.h). A curve that cannot be written is reported once and training goes on: a
 * picture is not worth a run. */
#include "cl/base/clock.h"
#include "engine/train/session_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "engine/train/curve.h"
#include "engine/train/progress.h"

struct sess_report {
	clp_curve *curve;
	char curve_path[1100];
	int curve_failed;
	double t_start;
	clp_train_summary sum;
};

clp_status sess_report_begin(clp_session *s)
{
	struct sess_report *r;

	if (sess_rank(s) != 0)
		return CLP_OK;
	sess_report_free(s);
	r = calloc(1, sizeof(*r));
	if (!r)
		return clp_error(CLP_ERR_NOMEM, "out of host memory");
	s->report = r;
	r->t_start = clp_now();
	r->sum.first_step = r->sum.steps = s->step;
	r->sum.skipped = s->applied; /* skipped = steps run - (applied at the end - this) */
	r->sum.best_step = -1;
	r->sum.best_loss = r->sum.best_bpb = NAN;
	clp_curve_path(s->cfg.train.log, r->curve_path, sizeof(r->curve_path));
	if (r->curve_path[0]) {
		CLP_TRY(clp_curve_new(&r->curve));
		if (s->step > 0) /* resumed: the earlier steps come from the log */
			CLP_TRY(clp_curve_load_log(r->curve, s->cfg.train.log, s->step));
		fprintf(s->out, "loss curve: %s (updated at every evaluation)\n", r->curve_path);
	}
	return CLP_OK;
}

void sess_report_step(clp_session *s, long step, double loss, double tok_s)
{
	struct sess_report *r = s->report;

	if (r && r->curve && clp_curve_add_step(r->curve, step, loss, tok_s) != CLP_OK)
		r->curve_failed = 1;
}

static void write_curve(clp_session *s, long step)
{
	struct sess_report *r = s->report;
	const clp_train_config *c = &s->cfg;
	char title[512];

	snprintf(title, sizeof(title), "clpipe train: %s, %ld layers x %ld, context %ld, batch %zu "
		 "x %zu; step %ld of %ld", c->model.preset, c->model.n_layer, c->model.d_model,
		 c->model.ctx, s->B * (size_t)s->M * (size_t)s->R, s->T, step, c->train.steps);
	if (clp_curve_write(r->curve, r->curve_path, title) != CLP_OK) {
		fprintf(s->out, "warning: loss curve %s not written: %s (training goes on)\n",
			r->curve_path, clp_last_error());
		r->curve_failed = 1;
	}
}

void sess_report_eval(clp_session *s, long step, double loss, double bpb)
{
	struct sess_report *r = s->report;

	if (!r)
		return;
	if (r->sum.best_step < 0 || loss < r->sum.best_loss) {
		r->sum.best_step = step;
		r->sum.best_loss = loss;
		r->sum.best_bpb = bpb;
	}
	if (!r->curve || r->curve_failed)
		return;
	if (clp_curve_add_eval(r->curve, step, loss, bpb) != CLP_OK)
		r->curve_failed = 1;
	else
		write_curve(s, step);
}

void sess_report_end(clp_session *s)
{
	struct sess_report *r = s->report;
	clp_train_summary *m = r ? &r->sum : NULL;
	clp_ckpt *ck = NULL;

	if (!r)
		return;
	m->steps = s->step;
	m->planned = s->cfg.train.steps;
	m->tokens = (double)(s->step - m->first_step) * (double)s->R * (double)s->M * (double)s->N;
	m->wall_s = clp_now() - r->t_start;
	m->baseline_bpb = s->byte_level && !s->bert ? s->baseline_bpb : NAN;
	m->target_ratio = s->bert ? 0 : s->cfg.eval.target_ratio;
	m->can_sample = !s->bert;
	snprintf(m->ckpt_dir, sizeof(m->ckpt_dir), "%s", s->cfg.ckpt.dir);
	/* this run's own last checkpoint, never another run's newer one in the same directory */
	if (s->last_ckpt[0] && clp_ckpt_open(&ck, s->last_ckpt) == CLP_OK)
		snprintf(m->ckpt, sizeof(m->ckpt), "%s", s->last_ckpt);
	else
		clp_error_clear();
	clp_ckpt_close(ck);
	m->ranks = clp_comm_size(s->comm);
	m->build_s = s->build_s;
	m->stopped = s->stopped;
	snprintf(m->curve, sizeof(m->curve), "%s", r->curve && !r->curve_failed ? r->curve_path : "");
	snprintf(m->log, sizeof(m->log), "%s", s->cfg.train.log);
	snprintf(m->prompt, sizeof(m->prompt), "%s", s->cfg.sample.prompt);
	snprintf(m->precision, sizeof(m->precision), "%s", s->cfg.train.precision);
	m->skipped += (s->step - m->first_step) - s->applied;
	m->loss_scale = 0;
	if (s->prec == CLP_F16) {
		float scale;
		long good;

		clp_exec_loss_scale(s->ex, &scale, &good);
		m->loss_scale = scale;
	}
}

clp_status clp_session_summary(const clp_session *s, clp_train_summary *out)
{
	if (!s->report)
		return clp_error(CLP_ERR_STATE, "a run summary exists on rank 0 after training");
	*out = s->report->sum;
	return CLP_OK;
}

int sess_tty(const clp_session *s)
{
	return sess_rank(s) == 0 && !clp_comm_launched() ? clp_progress_width(s->out) : 0;
}

void sess_report_free(clp_session *s)
{
	if (!s->report)
		return;
	clp_curve_free(s->report->curve);
	free(s->report);
	s->report = NULL;
}
