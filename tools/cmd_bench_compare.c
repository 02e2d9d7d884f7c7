/* clpipe bench --compare A.json B.json ...: device profiles (clpipe bench --json) side by side,
 * as clpeak's compare mode does. Every figure a profile holds as {"median": ...} is one row,
 * named by its path ("bandwidth.read.float16"); one column per device of each file, and the
 * ratio of each column to the first. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

#define MAX_COLS 16
#define MAX_ROWS 512

struct table {
	char rows[MAX_ROWS][96];
	double v[MAX_ROWS][MAX_COLS];
	int nrows, ncols;
	char cols[MAX_COLS][64];
};

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
	int rc = 0;

	if (!t)
		return cli_usage_error("bench", "out of host memory");
	for (int i = 2; i < argc; i++) {
		json_error_t err;
		json_t *root = json_load_file(argv[i], 0, &err), *devs, *d;
		size_t k;

		if (!root) {
			fprintf(stderr, "clpipe bench: error: %s: %s (line %d)\n", argv[i], err.text,
				err.line);
			rc = 1;
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
out:
	free(t);
	return rc;
}
