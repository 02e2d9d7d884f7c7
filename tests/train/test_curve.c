/* The loss-curve SVG (engine/train/curve.h), read back: one polyline point per logged step,
 * coordinates linear in step and value, non-finite losses left out without corrupting the file,
 * empty and one-point series, long runs drawn as group means, a resumed log's repeated steps
 * replaced, the title escaped, and the file written whole. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "engine/train/curve.h"
#include "tests/harness.h"

#define MAXP 5000

/* The points of the polyline of class cls in svg; -1 when there is none. */
static int points(const char *svg, const char *cls, double *x, double *y, int max)
{
	char key[64];
	const char *p = svg, *end;
	int n = 0;

	snprintf(key, sizeof(key), "<polyline class=\"%s\"", cls);
	p = strstr(svg, key);
	if (!p)
		return -1;
	CHECK(strstr(p + 1, key) == NULL, "one polyline of class %s", cls);
	p = strstr(p, "points=\"");
	end = p ? strchr(p + 8, '"') : NULL;
	if (!p || !end) {
		CHECK(0, "polyline %s has no points attribute", cls);
		return -1;
	}
	p += 8;
	while (p < end) {
		char *q;
		double a = strtod(p, &q), b;

		CHECK(q != p && *q == ',', "polyline %s: a number and a comma at '%.20s'", cls, p);
		if (q == p || *q != ',')
			return n;
		p = q + 1;
		b = strtod(p, &q);
		CHECK(q != p && (*q == ' ' || q == end), "polyline %s: 'x,y' at '%.20s'", cls, p);
		if (q == p)
			return n;
		CHECK(isfinite(a) && isfinite(b), "polyline %s: finite coordinates", cls);
		if (n < max) {
			x[n] = a;
			y[n] = b;
		}
		n++;
		p = q + (*q == ' ');
	}
	return n;
}

/* The file is one <svg> element with balanced tags, and no nan or inf text anywhere. */
static void check_wellformed(const char *svg)
{
	const char *bad[] = {"nan", "inf", "NAN", "INF"};
	int open = 0;

	CHECK(!strncmp(svg, "<svg ", 5), "starts with <svg");
	CHECK(strstr(svg, "</svg>\n") && !strcmp(strstr(svg, "</svg>\n"), "</svg>\n"),
	      "ends with </svg>");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = svg;

		/* words in the legend and labels are fine; numbers are not */
		while ((p = strstr(p, bad[i])) != NULL) {
			CHECK(p == svg || !strchr(" \",->-", p[-1]),
			      "a non-finite number in the SVG near '%.30s'", p - (p - svg > 10 ? 10 : 0));
			p++;
		}
	}
	for (const char *p = svg; *p; p++) {
		if (*p == '<' && p[1] == '/')
			open--;
		else if (*p == '<')
			open++;
		else if (*p == '/' && p[1] == '>')
			open--;
	}
	CHECK(open == 0, "balanced tags (%d left open)", open);
}

/* |(v_i - v_0) / (v_n - v_0) - (c_i - c_0) / (c_n - c_0)| small: coordinates linear in values */
static void check_linear(const char *what, const double *v, const double *c, int n)
{
	for (int i = 1; i < n - 1; i++) {
		double fv = (v[i] - v[0]) / (v[n - 1] - v[0]), fc = (c[i] - c[0]) / (c[n - 1] - c[0]);

		CHECK(fabs(fv - fc) < 2e-3, "%s: point %d at fraction %.5f of the span, value at "
		      "%.5f", what, i, fc, fv);
	}
}

static void test_points_and_mapping(void)
{
	clp_curve *c = NULL;
	double steps[40], loss[40], x[MAXP], y[MAXP], vx[8], vy[8], vs[8], vl[8];
	char *svg;
	int n, nv;

	CHECK_OK(clp_curve_new(&c));
	if (!c)
		return;
	for (int i = 0; i < 40; i++) {
		steps[i] = i + 1;
		loss[i] = 5.5 * exp(-0.05 * i) + 1.0 + 0.1 * sin(i);
		CHECK_OK(clp_curve_add_step(c, i + 1, loss[i], 1000 + 10 * i));
	}
	for (int k = 0; k < 4; k++) {
		vs[k] = 10 * (k + 1);
		vl[k] = loss[10 * k + 9] + 0.05;
		CHECK_OK(clp_curve_add_eval(c, 10 * (k + 1), vl[k], vl[k] / log(2) / 1.0));
	}
	svg = clp_curve_svg(c, "a <run> & \"its\" title");
	CHECK(svg != NULL, "drawn");
	if (svg) {
		check_wellformed(svg);
		n = points(svg, "train", x, y, MAXP);
		CHECK(n == 40, "one training point per step: %d", n);
		if (n == 40) {
			check_linear("train x", steps, x, n);
			check_linear("train y", loss, y, n);
			for (int i = 1; i < n; i++)
				CHECK(x[i] > x[i - 1], "steps left to right");
			/* a higher loss is higher up (smaller y) */
			CHECK(y[0] < y[n - 1], "the first (higher) loss above the last");
		}
		nv = points(svg, "val", vx, vy, 8);
		CHECK(nv == 4, "one validation point per evaluation: %d", nv);
		if (nv == 4 && n == 40) {
			double ax[5] = {steps[0], vs[0], vs[1], vs[2], vs[3]};
			double cx[5] = {x[0], vx[0], vx[1], vx[2], vx[3]};

			/* one axis for both: validation at step 10 shares x with train step 10, and
			 * its y follows the same map as the training losses */
			check_linear("val x on the step axis", ax, cx, 5);
			for (int k = 0; k < 4; k++) {
				double want = y[0] + (vl[k] - loss[0]) / (loss[39] - loss[0]) *
							     (y[39] - y[0]);

				CHECK(fabs(vy[k] - want) < 0.05, "val %d: y %.3f, the loss map gives "
				      "%.3f", k, vy[k], want);
				CHECK(fabs(vx[k] - x[10 * k + 9]) < 0.01, "val %d at step %g's x", k,
				      vs[k]);
			}
		}
		CHECK(points(svg, "tok_s", x, y, MAXP) == 40, "one tokens/s point per step");
		CHECK(strstr(svg, "a &lt;run&gt; &amp; &quot;its&quot; title") != NULL,
		      "the title is escaped");
		CHECK(strstr(svg, "<run>") == NULL, "no raw markup from the title");
		CHECK(strstr(svg, "step 20: validation loss") != NULL, "evaluation tooltips");
	}
	free(svg);
	clp_curve_free(c);
}

static void test_non_finite(void)
{
	clp_curve *c = NULL;
	double x[64], y[64], lo = 1e9, hi = -1e9;
	char *svg;
	int n;

	CHECK_OK(clp_curve_new(&c));
	if (!c)
		return;
	for (int i = 0; i < 20; i++) {
		double v = i == 3 ? NAN : i == 7 ? INFINITY : i == 11 ? -INFINITY : 3.0 - 0.1 * i;

		CHECK_OK(clp_curve_add_step(c, i + 1, v, i == 5 ? NAN : 500.0));
	}
	CHECK_OK(clp_curve_add_eval(c, 10, NAN, NAN));
	CHECK_OK(clp_curve_add_eval(c, 20, 1.5, INFINITY));
	svg = clp_curve_svg(c, "non-finite");
	CHECK(svg != NULL, "drawn");
	if (svg) {
		check_wellformed(svg);
		n = points(svg, "train", x, y, 64);
		CHECK(n == 17, "the 17 finite steps drawn, %d", n);
		for (int i = 0; i < n && i < 64; i++) {
			lo = fmin(lo, y[i]);
			hi = fmax(hi, y[i]);
		}
		/* the plot box: y from 50 to 404 in an SVG 460 high (curve.c) */
		CHECK(lo >= 50 && hi <= 404, "inside the plot box: y %.1f..%.1f", lo, hi);
		CHECK(points(svg, "val", x, y, 64) == 1, "one finite evaluation");
		CHECK(points(svg, "tok_s", x, y, 64) == 19, "19 finite tokens/s");
	}
	free(svg);
	clp_curve_free(c);
}

static void test_empty_and_one(void)
{
	clp_curve *c = NULL;
	double x[4], y[4];
	char *svg;

	CHECK_OK(clp_curve_new(&c));
	if (!c)
		return;
	svg = clp_curve_svg(c, "");
	CHECK(svg != NULL, "an empty curve is drawn");
	if (svg) {
		check_wellformed(svg);
		CHECK(points(svg, "train", x, y, 4) == -1, "no training line");
		CHECK(points(svg, "val", x, y, 4) == -1, "no validation line");
	}
	free(svg);
	CHECK_OK(clp_curve_add_step(c, 7, 2.5, 100));
	svg = clp_curve_svg(c, NULL);
	CHECK(svg != NULL, "a one-point curve is drawn");
	if (svg) {
		check_wellformed(svg);
		CHECK(points(svg, "train", x, y, 4) == 1, "one training point");
		CHECK(x[0] >= 70 && x[0] <= 820 && y[0] >= 50 && y[0] <= 404,
		      "the point inside the box (%.1f, %.1f)", x[0], y[0]);
	}
	free(svg);
	/* all values NaN: still a picture, no line */
	clp_curve_free(c);
	CHECK_OK(clp_curve_new(&c));
	CHECK_OK(clp_curve_add_step(c, 1, NAN, NAN));
	svg = c ? clp_curve_svg(c, "x") : NULL;
	if (svg) {
		check_wellformed(svg);
		CHECK(points(svg, "train", x, y, 4) == -1, "no line from NaN alone");
	}
	free(svg);
	clp_curve_free(c);
}

/* Past CLP_CURVE_MAX_POINTS steps the line is group means: no more points than the cap, and a
 * constant loss stays at one y. */
static void test_long_run(void)
{
	clp_curve *c = NULL;
	static double x[MAXP], y[MAXP];
	char *svg;
	int n;

	CHECK_OK(clp_curve_new(&c));
	if (!c)
		return;
	for (long i = 1; i <= 3 * CLP_CURVE_MAX_POINTS + 1; i++)
		CHECK_OK(clp_curve_add_step(c, i, i % 2 ? 2.0 : 4.0, 10));
	CHECK_OK(clp_curve_add_step(c, 3 * CLP_CURVE_MAX_POINTS + 2, 4.0, 10));
	svg = clp_curve_svg(c, "long");
	n = svg ? points(svg, "train", x, y, MAXP) : 0;
	CHECK(n > 0 && n <= CLP_CURVE_MAX_POINTS, "at most %d points, %d", CLP_CURVE_MAX_POINTS,
	      n);
	for (int i = 1; i < n && i < MAXP; i++)
		CHECK(fabs(y[i] - y[0]) < 0.01, "group means of 2,4,2,4 are all 3: y %g vs %g", y[i],
		      y[0]);
	n = svg ? points(svg, "tok_s", x, y, MAXP) : 0;
	CHECK(n > 0 && n <= CLP_CURVE_SPEED_POINTS, "tokens/s: at most %d points, %d",
	      CLP_CURVE_SPEED_POINTS, n);
	free(svg);
	clp_curve_free(c);
}

/* A resumed run: the log's steps up to the checkpoint, then the new run replaces the rest. */
static void test_resume_log(void)
{
	char dir[] = "/tmp/clpipe-curve-XXXXXX", log[300], path[300], cmd[400];
	clp_curve *c = NULL;
	double x[64], y[64];
	FILE *f;
	char *txt = NULL;
	size_t len = 0;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(log, sizeof(log), "%s/run.jsonl", dir);
	f = fopen(log, "w");
	CHECK(f != NULL, "%s", log);
	if (!f)
		return;
	for (int i = 1; i <= 10; i++) {
		fprintf(f, "{\"event\":\"step\",\"step\":%d,\"loss\":%g,\"tok_s\":100.0}\n", i,
			5.0 - 0.1 * i);
		if (i % 5 == 0)
			fprintf(f, "{\"event\":\"eval\",\"step\":%d,\"val_loss\":%g,\"val_bpb\":-1.0}\n",
				i, 5.0 - 0.1 * i);
	}
	fputs("not json\n{\"event\":\"step\"}\n", f);
	fclose(f);
	CHECK_OK(clp_curve_new(&c));
	if (!c)
		return;
	CHECK_OK(clp_curve_load_log(c, log, 6)); /* the checkpoint was at step 6 */
	CHECK_OK(clp_curve_add_step(c, 7, 1.0, 100));
	CHECK_OK(clp_curve_load_log(c, "/nonexistent/run.jsonl", 100));
	clp_curve_path(log, path, sizeof(path));
	CHECK(strlen(path) > 4 && !strcmp(path + strlen(path) - 8, "/run.svg"), "path %s", path);
	CHECK_OK(clp_curve_write(c, path, "resumed"));
	CHECK_OK(clp_io_read_file(path, &txt, &len));
	if (txt) {
		check_wellformed(txt);
		CHECK(points(txt, "train", x, y, 64) == 7, "steps 1-6 from the log and 7");
		CHECK(points(txt, "val", x, y, 64) == 1, "the evaluation at step 5 only");
	}
	free(txt);
	/* a step at or before the last replaces what follows it */
	CHECK_OK(clp_curve_add_step(c, 3, 9.0, 100));
	txt = clp_curve_svg(c, "");
	CHECK(txt && points(txt, "train", x, y, 64) == 3, "steps 1, 2 and the new 3");
	free(txt);
	clp_curve_free(c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "%s", cmd);
}

static void test_path(void)
{
	char p[64];

	clp_curve_path("a/b.jsonl", p, sizeof(p));
	CHECK(!strcmp(p, "a/b.svg"), "%s", p);
	clp_curve_path("x.json", p, sizeof(p));
	CHECK(!strcmp(p, "x.svg"), "%s", p);
	clp_curve_path("x.log", p, sizeof(p));
	CHECK(!strcmp(p, "x.svg"), "%s", p);
	clp_curve_path("train", p, sizeof(p));
	CHECK(!strcmp(p, "train.svg"), "%s", p);
	clp_curve_path("", p, sizeof(p));
	CHECK(!strcmp(p, ""), "no log, no curve: '%s'", p);
	clp_curve_path(".jsonl", p, sizeof(p));
	CHECK(!strcmp(p, ".jsonl.svg"), "%s", p);
}

TH_MAIN(TH_TEST(test_points_and_mapping), TH_TEST(test_non_finite), TH_TEST(test_empty_and_one),
	TH_TEST(test_long_run), TH_TEST(test_resume_log), TH_TEST(test_path))
