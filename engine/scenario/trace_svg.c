/* SVG timelines (see trace.h): one row per rank, compute in the upper part of the row coloured by
 * what ran, communication as a thin bar below it, idle time left pale. Several traces share one
 * time axis so a measured run and its simulated prediction line up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scenario/trace.h"
#include "engine/sched/sched.h"

#define WIDTH 1200.0
#define LEFT 80.0
#define ROW 20.0
#define TITLE 24.0
#define AXIS 18.0 /* the time axis under each section */

/* A tick spacing of 1, 2 or 5 x 10^k ms giving at most about 10 ticks over span_ms. */
static double tick_ms(double span_ms)
{
	double raw = span_ms / 10, mag = pow(10, floor(log10(raw)));

	return raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static const char *colour(const clp_trace_event *e)
{
	if (e->queue == CLP_TQ_COMM)
		return "#f58518";
	switch (e->kind) {
	case CLP_OP_FWD: return "#4c78a8";
	case CLP_OP_BWD:
	case CLP_OP_BWD_B: return "#54a24b";
	case CLP_OP_BWD_W: return "#b8a300";
	case CLP_OP_OPT_STEP: return "#9d755d";
	case CLP_OP_OPT_PREP: return "#e45756";
	case CLP_OP_KFAC_CURV_A:
	case CLP_OP_KFAC_CURV_B:
	case CLP_OP_KFAC_SYNC:
	case CLP_OP_KFAC_INV:
	case CLP_OP_KFAC_PRECOND:
	case CLP_OP_KFAC_INV_SYNC:
	case CLP_OP_KFAC_PREC_SYNC: return "#b279a2";
	default: return "#888888";
	}
}

static void legend(FILE *f, double y)
{
	static const struct {
		const char *name, *colour;
	} items[] = {{"forward", "#4c78a8"},     {"backward (B)", "#54a24b"},
		     {"weight grad (W)", "#b8a300"}, {"optimizer", "#9d755d"},
		     {"optimizer prep", "#e45756"},
		     {"K-FAC", "#b279a2"},          {"communication", "#f58518"},
		     {"idle", "#f0f0f0"}};
	double x = LEFT;

	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" "
			   "stroke=\"#999\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, y,
			items[i].colour, x + 16, y + 10, items[i].name);
		x += 24 + 6.5 * (double)strlen(items[i].name);
	}
}

/* Under the rows: ticks in ms from the section's start; across them, the step boundaries. */
static void axis(FILE *f, const clp_trace *t, const clp_trace_stats *st, double y, double t0,
		 double scale)
{
	double span_ms = st->span_s * 1e3, tk = tick_ms(span_ms > 0 ? span_ms : 1);
	double ya = y + ROW * t->nranks + 2, *ends = NULL;
	size_t nopt = 0;

	fprintf(f, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		   "stroke=\"#999\"/>\n", LEFT, ya, LEFT + st->span_s * scale, ya);
	for (int i = 0; i <= (int)(span_ms / tk + 1e-9) && i < 64; i++) {
		double x = LEFT + i * tk * 1e-3 * scale;

		fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
			   "stroke=\"#999\"/><text class=\"tick\" x=\"%.2f\" y=\"%.1f\" "
			   "font-size=\"9\" text-anchor=\"middle\">%g</text>\n", x, ya, x, ya + 3,
			x, ya + 12, i * tk);
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\">ms</text>\n", LEFT - 20, ya + 12);
	if (t->steps < 1)
		return;
	/* step k ends where the k-th group of optimizer ops (in time order) ends */
	for (size_t i = 0; i < t->n; i++)
		nopt += t->ev[i].kind == CLP_OP_OPT_STEP;
	if (nopt < (size_t)t->steps || nopt % (size_t)t->steps || !(ends = malloc(nopt * 8)))
		return;
	nopt = 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->ev[i].kind == CLP_OP_OPT_STEP)
			ends[nopt++] = t->ev[i].t1;
	qsort(ends, nopt, sizeof(*ends), cmp_double);
	for (int k = 1; k <= t->steps; k++) {
		double te = ends[(size_t)k * (nopt / (size_t)t->steps) - 1];
		double x = LEFT + (te - t0) * scale;

		fprintf(f, "<line class=\"step\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" "
			   "y2=\"%.1f\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"><title>end "
			   "of step %d of the trace: %.6g ms</title></line>\n", x, y - 2, x, ya,
			k, (te - t0) * 1e3);
	}
	free(ends);
}

static void section(FILE *f, const clp_trace *t, const clp_trace_stats *st, const char *label,
		    double y, double t0, double scale)
{
	char per[64] = "";

	if (t->steps > 1)
		snprintf(per, sizeof(per), " (%d steps, %.1f ms per step)", t->steps,
			 st->span_s * 1e3 / t->steps);
	fprintf(f, "<text x=\"4\" y=\"%.1f\" font-weight=\"bold\">%s: %.6g ms%s, compute "
		   "utilisation %.1f%%, busy %.1f%%, bubble %.1f%%%s</text>\n", y + 16,
		label ? label : "", st->span_s * 1e3, per, 100 * st->util_mean,
		100 * st->busy_mean, 100 * st->bubble, t->dropped ? " (first events only)" : "");
	y += TITLE;
	axis(f, t, st, y, t0, scale);
	for (int r = 0; r < t->nranks; r++) {
		fprintf(f, "<text x=\"4\" y=\"%.1f\">rank %d</text>\n", y + r * ROW + 13, r);
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			   "fill=\"#f0f0f0\"/>\n", LEFT, y + r * ROW + 1, st->span_s * scale,
			ROW - 2);
	}
	for (size_t i = 0; i < t->n; i++) {
		const clp_trace_event *e = &t->ev[i];
		double x = LEFT + (e->t0 - t0) * scale, w = (e->t1 - e->t0) * scale;
		double ry = y + e->rank * ROW + (e->queue == CLP_TQ_COMM ? ROW - 6 : 1);
		double h = e->queue == CLP_TQ_COMM ? 5 : ROW - 8;
		char text[32];

		if (e->rank < 0 || e->rank >= t->nranks)
			continue;
		fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
			   "fill=\"%s\" stroke=\"white\" stroke-width=\"0.5\"><title>rank %d %s "
			   "stage %d mb %d: %.6g-%.6g ms</title>"
			   "</rect>\n", x, ry, w > 0.3 ? w : 0.3, h, colour(e), e->rank,
			clp_op_kind_name(e->kind), e->stage, e->mb, e->t0 * 1e3, e->t1 * 1e3);
		clp_trace_event_label(e, text, sizeof(text));
		if (e->queue == CLP_TQ_COMPUTE && w > 7.0 * (double)(1 + (e->mb > 9) + (e->mb > 99)))
			fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"white\" font-size=\"9\">%s"
				   "</text>\n", x + 2, ry + 9, text);
	}
}

clp_status clp_trace_write_svg(const char *path, const clp_trace *const *traces,
			       const char *const *labels, int ntraces)
{
	clp_trace_stats *st = calloc((size_t)(ntraces > 0 ? ntraces : 1), sizeof(*st));
	double span = 0, height = 40, y = 4;
	clp_status s = CLP_OK;
	FILE *f = NULL;

	if (!st)
		return clp_error(CLP_ERR_NOMEM, "svg: out of host memory");
	for (int i = 0; i < ntraces && s == CLP_OK; i++) {
		/* a trace of training steps from time 0, as the console measures it */
		s = clp_trace_stats_compute(traces[i], traces[i]->steps > 0 ? 0.0 : -1, &st[i]);
		if (s == CLP_OK && st[i].span_s > span)
			span = st[i].span_s;
		height += TITLE + ROW * traces[i]->nranks + AXIS + 10;
	}
	if (s == CLP_OK && !(f = fopen(path, "w")))
		s = clp_error(CLP_ERR_IO, "%s: cannot open for writing", path);
	if (s == CLP_OK) {
		double scale = span > 0 ? (WIDTH - LEFT - 10) / span : 1;

		fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
			   "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
			   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH,
			height);
		for (int i = 0; i < ntraces; i++) {
			section(f, traces[i], &st[i], labels ? labels[i] : traces[i]->title, y,
				st[i].t_begin, scale);
			y += TITLE + ROW * traces[i]->nranks + AXIS + 10;
		}
		legend(f, y + 4);
		fprintf(f, "</svg>\n");
		if (ferror(f))
			s = clp_error(CLP_ERR_IO, "%s: write failed", path);
		if (fclose(f) && s == CLP_OK)
			s = clp_error(CLP_ERR_IO, "%s: write failed", path);
	}
	for (int i = 0; i < ntraces; i++)
		clp_trace_stats_free(&st[i]);
	free(st);
	return s;
}
