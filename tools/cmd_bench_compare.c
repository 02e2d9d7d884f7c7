/* clpipe bench --compare A.json B.json ...: device profiles (clpipe bench --json) side by side,
 * as clpeak's compare mode does. Every figure a profile holds as {"median": ...} is one row,
 * named by its path ("bandwidth.read.float16"); one column per device of each file, and the
 * ratio of each column to the first; the "gemm" shapes as rows gemm.MxNxK.gflops.
 *
 * --svg F draws each device's roofline (compute peak: the fastest run of any compute.*
 * GFLOP/s figure, host FMA loop included; bandwidth peak: the best bandwidth.* median) on one log-log plot, with the profile's own GEMM shapes
 * and, with --kernels K.json (clpipe bench nn --json, one per device, matched by device name),
 * the model's kernels placed on it (docs/DEVICE_PROFILE.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"
#include "tools/cli.h"
#include "topology/roofline_svg.h"

#define MAX_COLS 16
#define MAX_ROWS 512
#define MAX_POINTS 1024

struct table {
	char rows[MAX_ROWS][96];
	double v[MAX_ROWS][MAX_COLS];
	int nrows, ncols;
	char cols[MAX_COLS][64];
	/* the roofline: each column's peaks, and the kernels placed on it */
	clp_roof_device dev[MAX_COLS];
	clp_roof_point pts[MAX_POINTS];
	char labels[MAX_POINTS][48];
	int npts, has_kernels[MAX_COLS];
	char names[MAX_COLS][256]; /* the devices' whole names, which kernel profiles match */
};

static int row_of(struct table *t, const char *name);

/* The largest {key: x} under j (key "median" or "max"), or NaN when there is none. */
static double max_of(json_t *j, const char *what)
{
	const char *key;
	json_t *val, *m = json_object_get(j, what);
	double best = NAN;

	if (json_is_number(m))
		return json_number_value(m);
	json_object_foreach(j, key, val) {
		double v = json_is_object(val) ? max_of(val, what) : NAN;

		if (isfinite(v) && !(v <= best))
			best = v;
	}
	return best;
}

static double max_median(json_t *j)
{
	return max_of(j, "median");
}

static void point(struct table *t, int col, const char *label, double flops, double bytes,
		  double seconds)
{
	clp_roof_point *p;

	if (t->npts == MAX_POINTS)
		return;
	snprintf(t->labels[t->npts], sizeof(t->labels[0]), "%s", label);
	p = &t->pts[t->npts];
	*p = (clp_roof_point){t->labels[t->npts], col, flops, bytes, seconds};
	t->npts++;
}

/* The largest "max" of the compute section's GFLOP/s figures (ratios left out). */
static double compute_peak(json_t *comp)
{
	const char *key;
	json_t *val;
	double best = NAN;

	json_object_foreach(comp, key, val) {
		json_t *g = json_object_get(val, "gflops");
		double v = max_of(json_is_object(g) ? g : val, "max");

		if (json_is_object(val) && isfinite(v) && !(v <= best))
			best = v;
	}
	return best;
}

/* Peaks of one device of a profile, and its "gemm" shapes as points. */
static void roof_of(struct table *t, int col, json_t *d)
{
	json_t *g, *e;
	size_t i;

	t->dev[col].name = t->cols[col];
	/* the compute roof: the fastest run of any formulation (load only slows a run down, so
	 * the fastest is the nearest to what the cores can do; the device-vs-host ratios are
	 * not rates and never the largest) */
	t->dev[col].peak_gflops = compute_peak(json_object_get(d, "compute"));
	t->dev[col].peak_gbps = max_median(json_object_get(d, "bandwidth"));
	g = json_object_get(d, "gemm");
	json_array_foreach(g, i, e) {
		double m = json_number_value(json_object_get(e, "m"));
		double n = json_number_value(json_object_get(e, "n"));
		double k = json_number_value(json_object_get(e, "k"));
		double ms = json_number_value(json_object_get(json_object_get(e, "ms"), "median"));

		double gf = json_number_value(json_object_get(json_object_get(e, "gflops"),
							      "median"));
		char label[48];
		int r;

		snprintf(label, sizeof(label), "gemm.%.0fx%.0fx%.0f.gflops", m, n, k);
		if (json_is_object(json_object_get(e, "gflops")) && (r = row_of(t, label)) >= 0)
			t->v[r][col] = gf;
		snprintf(label, sizeof(label), "gemm %.0fx%.0fx%.0f", m, n, k);
		point(t, col, label, 2 * m * n * k, 4 * (m * k + k * n + m * n), ms * 1e-3);
	}
}

/* A kernel profile (clpipe bench nn --json) on the first column of its device without one. */
static int kernels_of(struct table *t, const char *path)
{
	json_t *root, *ks, *k;
	const char *name, *fmt;
	int col = -1;
	size_t i;
	clp_status s = clp_json_load(path, &root);

	if (s != CLP_OK)
		return cli_fail("bench", s);
	fmt = json_string_value(json_object_get(root, "format"));
	name = json_string_value(json_object_get(root, "device"));
	ks = json_object_get(root, "kernels");
	if (!fmt || strcmp(fmt, "clpipe-kernel-profile") || !name || !json_is_array(ks)) {
		fprintf(stderr, "clpipe bench: error: %s: not a kernel profile (clpipe bench nn "
			"--json): needs \"format\": \"clpipe-kernel-profile\", \"device\" and "
			"\"kernels\"\n", path);
		json_decref(root);
		return 1;
	}
	for (int c = 0; c < t->ncols && col < 0; c++)
		if (!t->has_kernels[c] && !strcmp(t->names[c], name))
			col = c;
	if (col < 0) {
		fprintf(stderr, "clpipe bench: error: %s: device \"%s\" is in none of the device "
			"profiles (or already has its kernels)\n", path, name);
		json_decref(root);
		return 1;
	}
	t->has_kernels[col] = 1;
	json_array_foreach(ks, i, k) {
		const char *label = json_string_value(json_object_get(k, "label"));

		point(t, col, label ? label : "?", json_number_value(json_object_get(k, "flops")),
		      json_number_value(json_object_get(k, "bytes")),
		      json_number_value(json_object_get(k, "ms")) * 1e-3);
	}
	json_decref(root);
	return 0;
}

static int row_of(struct table *t, const char *name)
{
	for (int i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i], name))
			return i;
	if (t->nrows == MAX_ROWS)
		return -1;
	snprintf(t->rows[t->nrows], sizeof(t->rows[0]), "%s", name);
	for (int c = 0; c < MAX_COLS; c++)
		t->v[t->nrows][c] = -1;
	return t->nrows++;
}

/* Every {"median": x} under j, named by its path. */
static void walk(struct table *t, int col, json_t *j, const char *path)
{
	const char *key;
	json_t *val, *m = json_object_get(j, "median");

	if (json_is_number(m)) {
		int r = row_of(t, path);

		if (r >= 0)
			t->v[r][col] = json_number_value(m);
		return;
	}
	json_object_foreach(j, key, val) {
		char sub[96];

		if (!json_is_object(val))
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key);
		walk(t, col, val, sub);
	}
}

int cmd_bench_compare(int argc, char **argv)
{
	struct table *t = calloc(1, sizeof(*t));
	const char *svg = NULL, *kernels[MAX_COLS];
	int rc = 0, nk = 0;

	if (!t)
		return cli_usage_error("bench", "out of host memory");
	for (int i = 2; i < argc; i++) {
		json_t *root, *devs, *d;
		size_t k;
		clp_status s;

		if (!strcmp(argv[i], "--svg") || !strcmp(argv[i], "--kernels")) {
			if (i + 1 >= argc) {
				rc = cli_usage_error("bench", "%s needs a file name", argv[i]);
				goto out;
			}
			if (argv[i][2] == 's')
				svg = argv[++i];
			else if (nk < MAX_COLS)
				kernels[nk++] = argv[++i];
			continue;
		}
		s = clp_json_load(argv[i], &root);
		if (s != CLP_OK) {
			rc = cli_fail("bench", s);
			goto out;
		}
		devs = json_object_get(root, "devices");
		if (!json_is_array(devs) || !json_array_size(devs)) {
			fprintf(stderr, "clpipe bench: error: %s: no \"devices\" array (not a device "
				"profile of clpipe bench --json)\n", argv[i]);
			json_decref(root);
			rc = 1;
			goto out;
		}
		json_array_foreach(devs, k, d) {
			const char *name = json_string_value(json_object_get(d, "name"));

			if (t->ncols == MAX_COLS)
				break;
			snprintf(t->cols[t->ncols], sizeof(t->cols[0]), "%.40s", name ? name : argv[i]);
			snprintf(t->names[t->ncols], sizeof(t->names[0]), "%s", name ? name : "");
			roof_of(t, t->ncols, d);
			walk(t, t->ncols++, d, "");
		}
		json_decref(root);
	}
	if (t->ncols < 1) {
		rc = cli_usage_error("bench", "--compare needs device profiles (clpipe bench --json F)");
		goto out;
	}
	printf("%-44s", "figure (median)");
	for (int c = 0; c < t->ncols; c++)
		printf(" | %-24.24s", t->cols[c]);
	printf("\n");
	for (int r = 0; r < t->nrows; r++) {
		printf("%-44.44s", t->rows[r]);
		for (int c = 0; c < t->ncols; c++) {
			double v = t->v[r][c], base = t->v[r][0];

			if (v < 0)
				printf(" | %-24s", "-");
			else if (c == 0 || base <= 0)
				printf(" | %-24.4g", v);
			else
				printf(" | %-12.4g (x%-7.3g)  ", v, v / base);
		}
		printf("\n");
	}
	if (nk && !svg)
		rc = cli_usage_error("bench", "--kernels goes with --svg F (the roofline it is drawn on)");
	for (int i = 0; i < nk && !rc; i++)
		rc = kernels_of(t, kernels[i]);
	if (svg && !rc) {
		char title[256];
		int n = snprintf(title, sizeof(title), "roofline:");
		clp_status s;

		for (int c = 0; c < t->ncols && n < (int)sizeof(title); c++)
			n += snprintf(title + n, sizeof(title) - (size_t)n, "%s %s", c ? " vs" : "",
				      t->cols[c]);
		s = clp_roofline_write(svg, title, t->dev, t->ncols, t->pts, t->npts);
		if (s != CLP_OK)
			rc = cli_fail("bench", s);
		else
			printf("\nwrote %s (%d device%s, %d kernel point%s)\n", svg, t->ncols,
			       t->ncols == 1 ? "" : "s", t->npts, t->npts == 1 ? "" : "s");
	}
out:
	free(t);
	return rc;
}
