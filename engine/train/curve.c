/* The loss curve of a training run as SVG (see curve.h). Drawing follows the SVG timelines
 * (engine/io/trace_svg.c): white background, sans-serif 11 px, the same blue and orange. */
#include "engine/train/curve.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"

#define WIDTH 900.0
#define HEIGHT 460.0
#define LEFT 70.0
#define RIGHT 80.0
#define TOP 50.0
#define BOTTOM 56.0
#define TRAIN_COLOUR "#4c78a8"
#define VAL_COLOUR "#f58518"
#define SPEED_COLOUR "#9a9a9a"

struct pt {
	long step;
	double a, b; /* step: loss, tokens/s; eval: loss, bits per byte */
};

struct series {
	struct pt *p;
	size_t n, cap;
};

struct clp_curve {
	struct series steps, evals;
};

clp_status clp_curve_new(clp_curve **c)
{
	*c = calloc(1, sizeof(**c));
	return *c ? CLP_OK : clp_error(CLP_ERR_NOMEM, "loss curve: out of host memory");
}

void clp_curve_free(clp_curve *c)
{
	if (!c)
		return;
	free(c->steps.p);
	free(c->evals.p);
	free(c);
}

static clp_status add(struct series *s, long step, double a, double b)
{
	while (s->n > 0 && s->p[s->n - 1].step >= step) /* a resumed run repeats these */
		s->n--;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct pt *p = realloc(s->p, cap * sizeof(*p));

		if (!p)
			return clp_error(CLP_ERR_NOMEM, "loss curve: out of host memory");
		s->p = p;
		s->cap = cap;
	}
	s->p[s->n++] = (struct pt){step, a, b};
	return CLP_OK;
}

clp_status clp_curve_add_step(clp_curve *c, long step, double loss, double tok_s)
{
	return add(&c->steps, step, loss, tok_s);
}

clp_status clp_curve_add_eval(clp_curve *c, long step, double val_loss, double bpb)
{
	return add(&c->evals, step, val_loss, bpb);
}

/* A logged number; a non-finite one is written as null (left out of the curve). */
static double number_or_nan(const json_t *v)
{
	return json_is_number(v) ? json_number_value(v) : NAN;
}

clp_status clp_curve_load_log(clp_curve *c, const char *log, long upto)
{
	char line[4096];
	FILE *f = fopen(log, "r");
	clp_status st = CLP_OK;

	if (!f)
		return CLP_OK;
	while (st == CLP_OK && fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		const char *ev = json_string_value(json_object_get(j, "event"));
		long step = (long)json_integer_value(json_object_get(j, "step"));

		if (ev && step > 0 && step <= upto) {
			if (!strcmp(ev, "step"))
				st = add(&c->steps, step, number_or_nan(json_object_get(j, "loss")),
					 json_number_value(json_object_get(j, "tok_s")));
			else if (!strcmp(ev, "eval")) {
				double bpb = json_number_value(json_object_get(j, "val_bpb"));

				st = add(&c->evals, step,
					 json_number_value(json_object_get(j, "val_loss")),
					 bpb >= 0 ? bpb : NAN);
			}
		}
		json_decref(j);
	}
	fclose(f);
	return st;
}

void clp_curve_path(const char *log, char *out, size_t n)
{
	static const char *const ext[] = {".jsonl", ".json", ".log"};
	size_t len = strlen(log);

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);

		if (len > e && !strcmp(log + len - e, ext[i])) {
			len -= e;
			break;
		}
	}
	snprintf(out, n, "%.*s%s", (int)len, log, len ? ".svg" : "");
}

/* Axis range [lo, hi] and tick spacing for values in [mn, mx]: round numbers, about 5 ticks. */
static void nice_axis(double mn, double mx, double *lo, double *hi, double *tick)
{
	double r, m;

	if (!(mx > mn)) {
		double pad = mn != 0 ? 0.1 * fabs(mn) : 0.5;

		mn -= pad;
		mx += pad;
	}
	r = (mx - mn) / 5;
	m = pow(10, floor(log10(r)));
	*tick = r <= m ? m : r <= 2 * m ? 2 * m : r <= 5 * m ? 5 * m : 10 * m;
	*lo = floor(mn / *tick) * *tick;
	*hi = ceil(mx / *tick) * *tick;
}

struct frame {
	double x0, x1, y0, y1, s0, s1; /* step range, loss range, tokens/s range */
};

static double px(const struct frame *fr, double step)
{
	return LEFT + (step - fr->x0) / (fr->x1 - fr->x0) * (WIDTH - LEFT - RIGHT);
}

static double py(double v, double lo, double hi)
{
	return HEIGHT - BOTTOM - (v - lo) / (hi - lo) * (HEIGHT - TOP - BOTTOM);
}

static void escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, f);
		}
	}
}

/* A series as a polyline: every finite point, or means of groups of consecutive points when
 * there are more than max. which: 0 the loss, 1 the second value (on the tokens/s axis). */
static void polyline(FILE *f, const struct frame *fr, const struct series *s, int which,
		     size_t max, const char *cls, const char *colour, double width)
{
	size_t group = (s->n + max - 1) / max;
	int any = 0;

	if (group < 1)
		group = 1;
	for (size_t i = 0; i < s->n; i += group) {
		double sum = 0, n = 0;
		long step = s->p[i].step;

		for (size_t k = i; k < i + group && k < s->n; k++) {
			double v = which ? s->p[k].b : s->p[k].a;

			if (isfinite(v)) {
				sum += v;
				n++;
				step = s->p[k].step;
			}
		}
		if (n == 0)
			continue;
		if (!any)
			fprintf(f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" "
				   "stroke-width=\"%.1f\" points=\"", cls, colour, width);
		else
			fputc(' ', f);
		any = 1;
		fprintf(f, "%.2f,%.2f", px(fr, (double)step),
			which ? py(sum / n, fr->s0, fr->s1) : py(sum / n, fr->y0, fr->y1));
	}
	if (any)
		fputs("\"/>\n", f);
}

static void range(const struct series *s, int which, double *mn, double *mx)
{
	for (size_t i = 0; i < s->n; i++) {
		double v = which ? s->p[i].b : s->p[i].a;

		if (isfinite(v)) {
			*mn = fmin(*mn, v);
			*mx = fmax(*mx, v);
		}
	}
}

static void axes(FILE *f, const struct frame *fr, double ytick, double stick, double xtick)
{
	double bottom = HEIGHT - BOTTOM, right = WIDTH - RIGHT;

	for (double v = fr->y0; v <= fr->y1 + 1e-9 * ytick; v += ytick) {
		double y = py(v, fr->y0, fr->y1);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>"
			   "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\">%.4g</text>\n", LEFT, y,
			right, y, LEFT - 6, y + 4, fabs(v) < 1e-12 * ytick ? 0.0 : v);
	}
	for (double v = fr->s0; v <= fr->s1 + 1e-9 * stick; v += stick)
		fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" fill=\"%s\">%.4g%s</text>\n", right + 6,
			py(v, fr->s0, fr->s1) + 4, SPEED_COLOUR,
			v >= 1e6 ? v / 1e6 : v >= 1e3 ? v / 1e3 : v, v >= 1e6 ? "M" : v >= 1e3 ? "k" : "");
	for (double v = ceil(fr->x0 / xtick) * xtick; v <= fr->x1 + 1e-9 * xtick; v += xtick) {
		double x = px(fr, v);

		fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
			   "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x, TOP,
			x, bottom, x, bottom + 16, v);
	}
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		   "stroke=\"#999\"/>\n", LEFT, TOP, right - LEFT, bottom - TOP);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n",
		(LEFT + right) / 2, bottom + 32);
	fprintf(f, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">"
		   "loss (nats per token)</text>\n", (TOP + bottom) / 2);
	fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(90)\" text-anchor=\"middle\" "
		   "fill=\"%s\">tokens/s</text>\n", WIDTH - 14, (TOP + bottom) / 2, SPEED_COLOUR);
}

static void legend(FILE *f)
{
	static const struct {
		const char *name, *colour;
	} items[] = {{"training loss", TRAIN_COLOUR},
		     {"validation loss", VAL_COLOUR},
		     {"tokens/s (right axis)", SPEED_COLOUR}};
	double x = LEFT, y = TOP - 12;

	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"4\" fill=\"%s\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, y - 6, items[i].colour, x + 16,
			y, items[i].name);
		x += 30 + 6.5 * (double)strlen(items[i].name);
	}
}

static void draw(FILE *f, const clp_curve *c, const char *title)
{
	const struct series *st = &c->steps, *ev = &c->evals;
	double mn = INFINITY, mx = -INFINITY, smn = 0, smx = -INFINITY, ytick, stick, xtick, l, h;
	long first = st->n ? st->p[0].step : ev->n ? ev->p[0].step : 0;
	long last = first;
	struct frame fr;

	for (size_t i = 0; i < st->n; i++)
		last = st->p[i].step > last ? st->p[i].step : last;
	for (size_t i = 0; i < ev->n; i++) {
		first = ev->p[i].step < first ? ev->p[i].step : first;
		last = ev->p[i].step > last ? ev->p[i].step : last;
	}
	range(st, 0, &mn, &mx);
	range(ev, 0, &mn, &mx);
	range(st, 1, &smn, &smx);
	if (!(mn <= mx))
		mn = 0, mx = 1;
	if (!(smx > 0))
		smx = 1;
	nice_axis(mn, mx, &fr.y0, &fr.y1, &ytick);
	nice_axis(0, smx, &fr.s0, &fr.s1, &stick);
	fr.s0 = 0;
	fr.x0 = (double)first;
	fr.x1 = (double)(last > first ? last : first + 1);
	nice_axis(fr.x0, fr.x1, &l, &h, &xtick);
	xtick = fmax(1, xtick);

	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"11\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH, HEIGHT);
	fputs("<text x=\"4\" y=\"18\" font-weight=\"bold\">", f);
	escaped(f, title ? title : "");
	fputs("</text>\n", f);
	axes(f, &fr, ytick, stick, xtick);
	/* tokens/s is noisy step to step (and on a shared machine very much so): a smoother line
	 * keeps it from hiding the losses */
	polyline(f, &fr, st, 1, CLP_CURVE_SPEED_POINTS, "tok_s", SPEED_COLOUR, 1);
	polyline(f, &fr, st, 0, CLP_CURVE_MAX_POINTS, "train", TRAIN_COLOUR, 1.5);
	polyline(f, &fr, ev, 0, CLP_CURVE_MAX_POINTS, "val", VAL_COLOUR, 2);
	for (size_t i = 0; i < ev->n; i++) {
		const struct pt *p = &ev->p[i];

		if (!isfinite(p->a))
			continue;
		fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"><title>step %ld: "
			   "validation loss %.4f", px(&fr, (double)p->step), py(p->a, fr.y0, fr.y1),
			VAL_COLOUR, p->step, p->a);
		if (isfinite(p->b))
			fprintf(f, ", %.3f bits/byte", p->b);
		fputs("</title></circle>\n", f);
	}
	legend(f);
	fputs("</svg>\n", f);
}

char *clp_curve_svg(const clp_curve *c, const char *title)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int err;

	if (!f)
		return NULL;
	draw(f, c, title);
	err = ferror(f);
	if (fclose(f) || err) {
		free(buf);
		return NULL;
	}
	return buf;
}

clp_status clp_curve_write(const clp_curve *c, const char *path, const char *title)
{
	return clp_io_write_text(path, clp_curve_svg(c, title), "draw the loss curve");
}
