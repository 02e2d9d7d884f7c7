/* The roofline plot of clpipe bench --compare --svg (topology/roofline_svg.c), read back: one
 * roofline per device with a peak, kernels inside the plot at log-scale coordinates, the ridge
 * where compute and bandwidth meet, and missing (NaN, zero) figures left out without a "nan" or
 * "inf" reaching the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "topology/roofline_svg.h"

struct plot {
	double left, top, width, height, lx0, lx1, ly0, ly1;
};

static double attr(const char *tag, const char *name)
{
	char key[48];
	const char *p;

	snprintf(key, sizeof(key), " %s=\"", name);
	p = strstr(tag, key);
	return p ? strtod(p + strlen(key), NULL) : NAN;
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static struct plot plot_of(const char *svg)
{
	const char *g = strstr(svg, "<g class=\"plot\"");
	struct plot pl = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};

	if (!g)
		return pl;
	pl.left = attr(g, "data-left");
	pl.top = attr(g, "data-top");
	pl.width = attr(g, "data-width");
	pl.height = attr(g, "data-height");
	pl.lx0 = attr(g, "data-lx0");
	pl.lx1 = attr(g, "data-lx1");
	pl.ly0 = attr(g, "data-ly0");
	pl.ly1 = attr(g, "data-ly1");
	return pl;
}

/* Structure every output must have, whatever the input. */
static void well_formed(const char *svg)
{
	size_t n = strlen(svg);

	CHECK(!strncmp(svg, "<svg ", 5), "does not start with <svg");
	CHECK(n > 7 && !strcmp(svg + n - 7, "</svg>\n"), "does not end with </svg>");
	CHECK(count(svg, "<circle") == count(svg, "</circle>"), "unclosed <circle>");
	CHECK(count(svg, "<polyline") == count(svg, "</polyline>"), "unclosed <polyline>");
	CHECK(count(svg, "<g ") == count(svg, "</g>"), "unclosed <g>");
	CHECK(count(svg, "<text") == count(svg, "</text>"), "unclosed <text>");
	CHECK(!strstr(svg, "nan") && !strstr(svg, "inf") && !strstr(svg, "NaN"),
	      "a non-finite number reached the SVG");
}

static void test_points_and_scale(void)
{
	const clp_roof_device dev[2] = {{"fast <gpu> & co", 1000, 100}, {"slow cpu", 50, 20}};
	/* intensities 0.25, 2.5, 25 FLOP/byte; 1 ms a call */
	const clp_roof_point pts[] = {
		{"add", 0, 0.25e6, 1e6, 1e-3}, {"gemm", 0, 25e6, 1e6, 1e-3},
		{"attn", 0, 2.5e6, 1e6, 1e-3}, {"add", 1, 0.25e6, 1e6, 4e-3},
		{"gemm", 1, 25e6, 1e6, 2e-3},
	};
	char *svg = clp_roofline_svg("t", dev, 2, pts, 5);
	struct plot pl;
	const char *p;
	int ncircles = 0;

	CHECK(svg != NULL, "no SVG");
	if (!svg)
		return;
	well_formed(svg);
	CHECK(strstr(svg, "fast &lt;gpu&gt; &amp; co"), "device name not escaped");
	pl = plot_of(svg);
	CHECK(isfinite(pl.lx0) && pl.lx1 - pl.lx0 >= 2 && pl.ly1 - pl.ly0 >= 2, "plot frame");
	CHECK(pl.lx0 <= log10(0.25) && pl.lx1 >= log10(25), "x axis %g..%g misses the kernels",
	      pl.lx0, pl.lx1);
	CHECK(pl.ly1 >= 3, "y axis ends at 1e%g, below the 1000 GFLOP/s peak", pl.ly1);
	CHECK(pl.lx0 == floor(pl.lx0) && pl.ly1 == floor(pl.ly1), "axes are not whole decades");
	for (p = svg; (p = strstr(p, "<circle class=\"kernel\"")); p++) {
		double cx = attr(p, "cx"), cy = attr(p, "cy");
		int d = (int)attr(p, "data-device");
		const clp_roof_point *k = &pts[ncircles];
		double ex = pl.left + (log10(k->flops / k->bytes) - pl.lx0) / (pl.lx1 - pl.lx0) *
					     pl.width;
		double ey = pl.top + pl.height - (log10(k->flops / k->seconds * 1e-9) - pl.ly0) /
							 (pl.ly1 - pl.ly0) * pl.height;

		CHECK(cx >= pl.left && cx <= pl.left + pl.width && cy >= pl.top &&
		      cy <= pl.top + pl.height, "kernel %d at (%g, %g) outside the plot", ncircles,
		      cx, cy);
		CHECK(fabs(cx - ex) < 0.01 && fabs(cy - ey) < 0.01,
		      "kernel %d at (%g, %g), log scale puts it at (%g, %g)", ncircles, cx, cy, ex, ey);
		CHECK(d == k->device, "kernel %d drawn for device %d", ncircles, d);
		ncircles++;
	}
	CHECK(ncircles == 5, "%d kernels drawn, want 5", ncircles);
	CHECK(count(svg, "<polyline class=\"roof\" data-device=\"0\"") == 1 &&
	      count(svg, "<polyline class=\"roof\" data-device=\"1\"") == 1,
	      "want one roofline per device");
	/* device 0: the ridge at 1000/100 = 10 FLOP/byte, 1000 GFLOP/s, is a vertex */
	p = strstr(svg, "<polyline class=\"roof\" data-device=\"0\"");
	if (p) {
		double rx = pl.left + (1 - pl.lx0) / (pl.lx1 - pl.lx0) * pl.width;
		double ry = pl.top + pl.height - (3 - pl.ly0) / (pl.ly1 - pl.ly0) * pl.height;
		char want[64];

		snprintf(want, sizeof(want), " %.2f,%.2f ", rx, ry);
		CHECK(strstr(p, want) && strstr(p, want) < strstr(p, "</polyline>"),
		      "ridge vertex %s missing", want);
	}
	free(svg);
}

static void test_missing_figures(void)
{
	const clp_roof_device dev[3] = {{"no peaks", NAN, 0}, {"compute only", 100, NAN},
					{"ok", 10, 1}};
	const clp_roof_point pts[] = {
		{"nan flops", 0, NAN, 1e6, 1e-3}, {"zero bytes", 1, 1e6, 0, 1e-3},
		{"zero time", 2, 1e6, 1e6, 0},    {"bad device", 7, 1e6, 1e6, 1e-3},
		{"inf", 2, INFINITY, 1, 1},       {"good", 2, 1e6, 1e6, 1e-3},
	};
	char *svg = clp_roofline_svg(NULL, dev, 3, pts, 6);

	CHECK(svg != NULL, "no SVG");
	if (!svg)
		return;
	well_formed(svg);
	CHECK(count(svg, "<circle class=\"kernel\"") == 1, "only the good kernel is drawn");
	CHECK(count(svg, "<polyline class=\"roof\"") == 2, "no roofline without a peak");
	CHECK(!strstr(svg, "data-device=\"0\""), "device without peaks has a roofline");
	CHECK(strstr(svg, "no peaks measured"), "the legend says a device has no peaks");
	CHECK(strstr(svg, "5 kernel figure(s)"), "the skipped kernels are counted");
	free(svg);
	/* nothing at all: still an empty, valid plot */
	svg = clp_roofline_svg("empty", NULL, 0, NULL, 0);
	CHECK(svg != NULL, "no SVG for an empty plot");
	if (svg)
		well_formed(svg);
	free(svg);
}

static void test_write(void)
{
	const clp_roof_device dev = {"d", 10, 1};
	char path[] = "/tmp/clpipe-roofline-XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	char buf[16] = {0};

	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	CHECK_OK(clp_roofline_write(path, "w", &dev, 1, NULL, 0));
	f = fopen(path, "r");
	CHECK(f && fread(buf, 1, 5, f) == 5 && !strcmp(buf, "<svg "), "%s not written", path);
	if (f)
		fclose(f);
	remove(path);
	CHECK_ERR(clp_roofline_write("/nonexistent-dir/x.svg", "w", &dev, 1, NULL, 0), CLP_ERR_IO,
		  "/nonexistent-dir/x.svg");
}

/* Labels of points drawn close together do not overlap (boxes of 5.2 px a character, 10 px
 * high, as placed); a point above its device's roof is marked and the legend says why. */
static void test_labels_and_above_roof(void)
{
	const clp_roof_device dev = {"cpu", 100, 20};
	clp_roof_point pts[13];
	char names[13][16];
	double x[13], y[13], w[13];
	int n = 0;
	char *svg;
	const char *p;

	for (int i = 0; i < 12; i++) { /* twelve kernels within a few pixels of each other */
		snprintf(names[i], sizeof(names[i]), "kernel_%d", i);
		pts[i] = (clp_roof_point){names[i], 0, 10e6 * (1 + 0.01 * i), 1e6, 1e-3};
	}
	pts[12] = (clp_roof_point){"gemm_fast", 0, 300e6, 1e6, 1e-3}; /* 300 GFLOP/s > 100 */
	svg = clp_roofline_svg("labels", &dev, 1, pts, 13);
	CHECK(svg != NULL, "no SVG");
	if (!svg)
		return;
	well_formed(svg);
	for (p = svg; (p = strstr(p, "<text class=\"label\"")) && n < 13; p++, n++) {
		const char *gt = strchr(p, '>'), *end = strstr(p, "</text>");

		x[n] = attr(p, "x"), y[n] = attr(p, "y");
		w[n] = gt && end ? 5.2 * (double)(end - gt - 1) + 2 : 0;
	}
	CHECK(n == 13, "%d labels drawn, want 13", n);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			CHECK(!(x[i] < x[j] + w[j] && x[j] < x[i] + w[i] && y[i] - 9 < y[j] &&
				y[j] - 9 < y[i]), "labels %d (%g, %g) and %d (%g, %g) overlap", i, x[i],
			      y[i], j, x[j], y[j]);
	CHECK(count(svg, "(above the measured roof)") == 1, "the point above the roof is marked");
	CHECK(strstr(svg, "gemm_fast *") && strstr(svg, "1 point(s) above their roof"),
	      "the legend says a point is above its roof");
	free(svg);
}

TH_MAIN(TH_TEST(test_points_and_scale), TH_TEST(test_missing_figures), TH_TEST(test_write),
	TH_TEST(test_labels_and_above_roof))
