/* Roofline plot (roofline_svg.h): log-log axes over whole decades, GFLOP/s against arithmetic
 * intensity (FLOP/byte). The plot frame is written as data-* attributes of <g class="plot"> so
 * a reader (and the test) can map coordinates back to figures. Same look as the loss curve
 * (engine/train/curve.c): white background, sans-serif 11, <title> tooltips. */
#include "topology/roofline_svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"

#define WIDTH 900.0
#define HEIGHT 600.0
#define LEFT 70.0
#define RIGHT 220.0
#define TOP 36.0
#define BOTTOM 50.0
#define MAX_LABELS 2048

static const char *const colours[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756",
				      "#b279a2", "#9d755d", "#72b7b2", "#b8a300"};

struct frame {
	double lx0, lx1, ly0, ly1; /* log10 of the axis ends */
};

static int good(double v)
{
	return isfinite(v) && v > 0;
}

static double px(const struct frame *fr, double x)
{
	return LEFT + (log10(x) - fr->lx0) / (fr->lx1 - fr->lx0) * (WIDTH - LEFT - RIGHT);
}

static double py(const struct frame *fr, double y)
{
	return HEIGHT - BOTTOM - (log10(y) - fr->ly0) / (fr->ly1 - fr->ly0) * (HEIGHT - TOP - BOTTOM);
}

static void escaped(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if ((unsigned char)*s >= 0x20)
				fputc(*s, f);
		}
	}
}

/* A peak for a label: "%.4g unit", or "no unit" when it was not measured. */
static const char *peak_text(char *buf, size_t n, double v, const char *unit)
{
	if (good(v))
		snprintf(buf, n, "%.4g %s", v, unit);
	else
		snprintf(buf, n, "no %s", unit);
	return buf;
}

static void widen(double v, double *lo, double *hi)
{
	if (!good(v))
		return;
	if (v < *lo)
		*lo = v;
	if (v > *hi)
		*hi = v;
}

static int point_ok(const clp_roof_point *p, int ndev)
{
	return p->device >= 0 && p->device < ndev && good(p->flops) && good(p->bytes) &&
	       good(p->seconds);
}

/* Whole decades around everything drawn; at least two decades each way. */
static void frame_of(struct frame *fr, const clp_roof_device *dev, int ndev,
		     const clp_roof_point *pts, int npts)
{
	double x0 = INFINITY, x1 = 0, y0 = INFINITY, y1 = 0;

	for (int i = 0; i < npts; i++) {
		if (!point_ok(&pts[i], ndev))
			continue;
		widen(pts[i].flops / pts[i].bytes, &x0, &x1);
		widen(pts[i].flops / pts[i].seconds * 1e-9, &y0, &y1);
	}
	for (int d = 0; d < ndev; d++) {
		widen(dev[d].peak_gflops, &y0, &y1);
		if (good(dev[d].peak_gflops) && good(dev[d].peak_gbps))
			widen(dev[d].peak_gflops / dev[d].peak_gbps, &x0, &x1);
	}
	if (!(x0 <= x1))
		x0 = 0.1, x1 = 10;
	if (!(y0 <= y1))
		y0 = 1, y1 = 100;
	fr->lx0 = floor(log10(x0)) - (x0 == x1 ? 1 : 0);
	fr->lx1 = ceil(log10(x1)) + (fr->lx0 + 1 >= ceil(log10(x1)) ? 1 : 0);
	fr->lx0 = fmin(fr->lx0, fr->lx1 - 2);
	/* the bandwidth slopes start at the left edge */
	for (int d = 0; d < ndev; d++)
		if (good(dev[d].peak_gbps))
			widen(dev[d].peak_gbps * pow(10, fr->lx0), &y0, &y1);
	fr->ly0 = floor(log10(y0));
	fr->ly1 = ceil(log10(y1));
	if (fr->ly1 - fr->ly0 < 2)
		fr->ly1 = fr->ly0 + 2;
	/* keep a runaway slope (a tiny intensity) from squashing everything: at most 8 decades */
	if (fr->ly1 - fr->ly0 > 8)
		fr->ly0 = fr->ly1 - 8;
}

static void axes(FILE *f, const struct frame *fr)
{
	double w = WIDTH - LEFT - RIGHT, h = HEIGHT - TOP - BOTTOM;

	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		   "stroke=\"#999\"/>\n", LEFT, TOP, w, h);
	for (double e = fr->lx0; e <= fr->lx1 + 1e-9; e++) {
		double x = px(fr, pow(10, e));

		fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>"
			   "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, TOP, x,
			TOP + h, x, TOP + h + 14, pow(10, e));
	}
	for (double e = fr->ly0; e <= fr->ly1 + 1e-9; e++) {
		double y = py(fr, pow(10, e));

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#e6e6e6\"/>"
			   "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\">%g</text>\n", LEFT, y,
			LEFT + w, y, LEFT - 4, y + 4, pow(10, e));
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">arithmetic intensity "
		   "(FLOP/byte)</text>\n", LEFT + w / 2, HEIGHT - 12);
	fprintf(f, "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" "
		   "text-anchor=\"middle\">GFLOP/s</text>\n", TOP + h / 2, TOP + h / 2);
}

/* min(peak, bw * x) across the frame: the left end, the ridge when inside, the right end. */
static void roof(FILE *f, const struct frame *fr, const clp_roof_device *d, int i)
{
	double xa = pow(10, fr->lx0), xb = pow(10, fr->lx1), ylo = pow(10, fr->ly0);
	double xs[3], ys[3];
	char a[48], b[48];
	int n = 0;

	if (good(d->peak_gflops) && good(d->peak_gbps)) {
		double ridge = d->peak_gflops / d->peak_gbps;

		xs[n] = xa, ys[n++] = fmin(d->peak_gflops, d->peak_gbps * xa);
		if (ridge > xa && ridge < xb)
			xs[n] = ridge, ys[n++] = d->peak_gflops;
		xs[n] = xb, ys[n++] = fmin(d->peak_gflops, d->peak_gbps * xb);
	} else if (good(d->peak_gflops)) {
		xs[n] = xa, ys[n++] = d->peak_gflops;
		xs[n] = xb, ys[n++] = d->peak_gflops;
	} else if (good(d->peak_gbps)) {
		xs[n] = xa, ys[n++] = d->peak_gbps * xa;
		xs[n] = xb, ys[n++] = d->peak_gbps * xb;
	} else {
		return;
	}
	/* a slope starting below the frame enters it where it crosses the bottom */
	if (ys[0] < ylo && good(d->peak_gbps)) {
		xs[0] = ylo / d->peak_gbps;
		ys[0] = ylo;
	}
	fprintf(f, "<polyline class=\"roof\" data-device=\"%d\" fill=\"none\" stroke=\"%s\" "
		   "stroke-width=\"2\" points=\"", i, colours[i % 8]);
	for (int k = 0; k < n; k++)
		fprintf(f, "%s%.2f,%.2f", k ? " " : "", px(fr, xs[k]), py(fr, ys[k]));
	fputs("\"><title>", f);
	escaped(f, d->name);
	fprintf(f, ": %s, %s</title></polyline>\n", peak_text(a, sizeof(a), d->peak_gflops, "GFLOP/s"),
		peak_text(b, sizeof(b), d->peak_gbps, "GB/s"));
}

static void legend(FILE *f, const clp_roof_device *dev, int ndev, int skipped, int above)
{
	double x = WIDTH - RIGHT + 12, y = TOP + 4;
	char a[48], b[48];

	for (int i = 0; i < ndev; i++, y += 34) {
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\">", x, y, colours[i % 8], x + 16, y + 10);
		if (dev[i].name && strlen(dev[i].name) > 30) { /* the margin holds about 30 */
			char cut[32];

			snprintf(cut, sizeof(cut), "%.27s...", dev[i].name);
			escaped(f, cut);
			fputs("<title>", f);
			escaped(f, dev[i].name);
			fputs("</title>", f);
		} else {
			escaped(f, dev[i].name);
		}
		fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\">", x + 16, y + 23);
		if (good(dev[i].peak_gflops) || good(dev[i].peak_gbps))
			fprintf(f, "%s, %s", peak_text(a, sizeof(a), dev[i].peak_gflops, "GFLOP/s"),
				peak_text(b, sizeof(b), dev[i].peak_gbps, "GB/s"));
		else
			fputs("no peaks measured: no roofline", f);
		fputs("</text>\n", f);
	}
	if (skipped)
		fprintf(f, "<text class=\"note\" x=\"%.1f\" y=\"%.1f\" font-size=\"9\">%d kernel "
			   "figure(s) not drawn</text>\n<text x=\"%.1f\" y=\"%.1f\" "
			   "font-size=\"9\">(no flops, bytes or time)</text>\n", x, y + 10, skipped, x,
			y + 22);
	if (above) /* the roof is the best compute figure the benchmark found, not a datasheet's */
		fprintf(f, "<text class=\"note\" x=\"%.1f\" y=\"%.1f\" font-size=\"9\" "
			   "fill=\"#d00\">* %d point(s) above their roof:</text>\n<text x=\"%.1f\" "
			   "y=\"%.1f\" font-size=\"9\">no compute run saw idle cores,</text>\n"
			   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\">or none found the peak"
			   "</text>\n", x, y + 40, above, x, y + 52, x, y + 64);
}

/* Placed labels, so that a new one goes where it overlaps none (font-size 9: about 5.2 px a
 * character, 10 px high); the circles count as taken. */
struct boxes {
	double x[MAX_LABELS], y[MAX_LABELS], w[MAX_LABELS];
	int n;
};

static int overlaps(const struct boxes *b, double x, double y, double w)
{
	if (x < LEFT || x + w > WIDTH - RIGHT + 8 || y - 9 < TOP || y > HEIGHT - BOTTOM)
		return 1;
	for (int i = 0; i < b->n; i++)
		if (x < b->x[i] + b->w[i] && b->x[i] < x + w && y - 9 < b->y[i] && b->y[i] - 9 < y)
			return 1;
	return 0;
}

/* A label for the point at (cx, cy): right or left of it, nearest free row first, with a
 * leader line when it had to move away. */
static void label_at(FILE *f, struct boxes *b, double cx, double cy, const char *text)
{
	double w = 5.2 * (double)strlen(text) + 2, x = cx + 6, y = cy - 4;
	int found = 0;

	for (int d = 0; d < 40 && !found; d++) {
		double dy = (d % 2 ? -1 : 1) * 11.0 * ((d + 1) / 2);

		for (int side = 0; side < 2 && !found; side++) {
			x = side ? cx - 6 - w : cx + 6;
			y = cy - 4 + dy;
			found = !overlaps(b, x, y, w);
		}
	}
	if (!found)
		x = cx + 6, y = cy - 4;
	if (b->n < MAX_LABELS)
		b->x[b->n] = x, b->y[b->n] = y, b->w[b->n] = w, b->n++;
	if (fabs(y - (cy - 4)) > 12)
		fprintf(f, "<line class=\"leader\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
			   "stroke=\"#bbb\" stroke-width=\"0.7\"/>\n", cx, cy, x < cx ? x + w : x,
			y - 3);
	fprintf(f, "<text class=\"label\" x=\"%.2f\" y=\"%.2f\" font-size=\"9\" fill=\"#444\">", x,
		y);
	escaped(f, text);
	fputs("</text>\n", f);
}

/* The device's roof at intensity ai: min(peak, bw x ai), +inf where it has neither. */
static double roof_at(const clp_roof_device *d, double ai)
{
	double r = HUGE_VAL;

	if (good(d->peak_gflops))
		r = d->peak_gflops;
	if (good(d->peak_gbps))
		r = fmin(r, d->peak_gbps * ai);
	return r;
}

static void draw(FILE *f, const char *title, const clp_roof_device *dev, int ndev,
		 const clp_roof_point *pts, int npts)
{
	struct frame fr;
	struct boxes *bx = calloc(1, sizeof(*bx));
	int skipped = 0, above = 0;

	frame_of(&fr, dev, ndev, pts, npts);
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"11\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH, HEIGHT);
	fputs("<text x=\"4\" y=\"18\" font-weight=\"bold\">", f);
	escaped(f, title ? title : "roofline");
	fputs("</text>\n", f);
	fprintf(f, "<g class=\"plot\" data-left=\"%.1f\" data-top=\"%.1f\" data-width=\"%.1f\" "
		   "data-height=\"%.1f\" data-lx0=\"%g\" data-lx1=\"%g\" data-ly0=\"%g\" "
		   "data-ly1=\"%g\">\n", LEFT, TOP, WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM,
		fr.lx0, fr.lx1, fr.ly0, fr.ly1);
	axes(f, &fr);
	for (int i = 0; i < ndev; i++)
		roof(f, &fr, &dev[i], i);
	for (int i = 0; bx && i < npts; i++) /* the circles first: labels keep off them */
		if (point_ok(&pts[i], ndev) && bx->n < MAX_LABELS) {
			double ai = pts[i].flops / pts[i].bytes;
			double gf = pts[i].flops / pts[i].seconds * 1e-9;
			double cy = fmax(TOP, fmin(HEIGHT - BOTTOM, py(&fr, gf)));

			bx->x[bx->n] = px(&fr, ai) - 4, bx->y[bx->n] = cy + 5, bx->w[bx->n++] = 8;
		}
	for (int i = 0; i < npts; i++) {
		const clp_roof_point *p = &pts[i];
		double ai, gf, cy;
		int first = 1, over;

		if (!point_ok(p, ndev)) {
			skipped++;
			continue;
		}
		ai = p->flops / p->bytes;
		gf = p->flops / p->seconds * 1e-9;
		over = gf > roof_at(&dev[p->device], ai) * 1.0001;
		above += over;
		cy = fmax(TOP, fmin(HEIGHT - BOTTOM, py(&fr, gf)));
		fprintf(f, "<circle class=\"kernel\" data-device=\"%d\" cx=\"%.2f\" cy=\"%.2f\" "
			   "r=\"4\" fill=\"%s\" fill-opacity=\"0.8\"%s><title>", p->device,
			px(&fr, ai), cy, colours[p->device % 8],
			over ? " stroke=\"#d00\" stroke-width=\"1.5\"" : "");
		escaped(f, p->label);
		fputs(" on ", f);
		escaped(f, dev[p->device].name);
		fprintf(f, ": %.4g FLOP/byte, %.4g GFLOP/s, %.4g ms%s</title></circle>\n", ai, gf,
			p->seconds * 1e3, over ? " (above the measured roof)" : "");
		/* each kernel's name once, next to its first point */
		for (int j = 0; j < i && first; j++)
			if (point_ok(&pts[j], ndev) && pts[j].label && p->label &&
			    !strcmp(pts[j].label, p->label))
				first = 0;
		if (first && bx) {
			char text[80];

			snprintf(text, sizeof(text), "%s%s", p->label ? p->label : "", over ? " *" : "");
			label_at(f, bx, px(&fr, ai), cy, text);
		}
	}
	fputs("</g>\n", f);
	legend(f, dev, ndev, skipped, above);
	fputs("</svg>\n", f);
	free(bx);
}

char *clp_roofline_svg(const char *title, const clp_roof_device *dev, int ndev,
		       const clp_roof_point *pts, int npts)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int err;

	if (!f)
		return NULL;
	draw(f, title, dev, ndev, pts, npts);
	err = ferror(f);
	if (fclose(f) || err) {
		free(buf);
		return NULL;
	}
	return buf;
}

clp_status clp_roofline_write(const char *path, const char *title, const clp_roof_device *dev,
			      int ndev, const clp_roof_point *pts, int npts)
{
	return clp_io_write_text(path, clp_roofline_svg(title, dev, ndev, pts, npts),
				 "draw the roofline");
}
