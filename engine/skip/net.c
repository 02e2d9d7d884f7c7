/* Clusters from wide-area network tables (the .tsv files of ../shared/networks): one host of one device per
 * node, node i in region regions[i mod nregions]; every pair of nodes in different regions gets
 * a link with the table's latency and bandwidth (both directions), pairs inside one region the
 * default inter-host link `intra`. Each pair of nodes is its own link resource. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/infile.h"
#include "engine/skip/skip_internal.h"

typedef struct row {
	char a[CLP_NAME_MAX], b[CLP_NAME_MAX];
	double lat_ms, bw_gib;
} row;

static clp_status read_table(const char *path, row **out, int *n)
{
	FILE *f;
	char line[512];
	int cap = 0, lineno = 0;
	row *rows = NULL;

	*out = NULL;
	*n = 0;
	CLP_TRY(clp_infile_open(NULL, path, CLP_INFILE_TEXT_MAX, &f, NULL));
	while (fgets(line, sizeof(line), f)) {
		row r;
		char extra[8];

		lineno++;
		if (line[0] == '#' || line[0] == '\n' || !strncmp(line, "region_a", 8))
			continue;
		if (sscanf(line, "%63s %63s %lf %lf %7s", r.a, r.b, &r.lat_ms, &r.bw_gib, extra) != 4 ||
		    !(r.lat_ms >= 0) || !(r.bw_gib > 0)) {
			fclose(f);
			free(rows);
			return clp_error(CLP_ERR_FORMAT, "%s: line %d: expected region_a region_b "
					 "latency_ms bandwidth_GiBps (latency >= 0, bandwidth > 0)",
					 path, lineno);
		}
		if (*n == cap) {
			row *g = realloc(rows, (size_t)(cap = cap ? 2 * cap : 64) * sizeof(*g));

			if (!g) {
				fclose(f);
				free(rows);
				return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
			}
			rows = g;
		}
		rows[(*n)++] = r;
	}
	fclose(f);
	*out = rows;
	return CLP_OK;
}

static const row *find(const row *rows, int n, const char *a, const char *b)
{
	for (int i = 0; i < n; i++)
		if ((!strcmp(rows[i].a, a) && !strcmp(rows[i].b, b)) ||
		    (!strcmp(rows[i].a, b) && !strcmp(rows[i].b, a)))
			return &rows[i];
	return NULL;
}

clp_status clp_skip_cluster_from_table(const char *tsv, const char *const *regions,
				       int nregions, int nnodes, clp_link_spec intra,
				       clp_cluster **out)
{
	row *rows = NULL;
	int nrows = 0, k = 0;
	clp_cluster *c = NULL;
	const row **pair = NULL;
	clp_status st;

	*out = NULL;
	if (nregions < 1 || nnodes < 1)
		return clp_error(CLP_ERR_INVALID, "network table: need regions and nodes");
	CLP_TRY(read_table(tsv, &rows, &nrows));
	pair = calloc((size_t)nregions * (size_t)nregions, sizeof(*pair));
	st = pair ? CLP_OK : clp_error(CLP_ERR_NOMEM, "network table: out of host memory");
	for (int i = 0; i < nregions && st == CLP_OK; i++)
		for (int j = 0; j < nregions && st == CLP_OK; j++) {
			if (i == j)
				continue;
			pair[i * nregions + j] = find(rows, nrows, regions[i], regions[j]);
			if (!pair[i * nregions + j])
				st = clp_error(CLP_ERR_NOT_FOUND, "%s: no row for regions %s and %s", tsv,
					       regions[i], regions[j]);
		}
	if (st == CLP_OK && !(c = calloc(1, sizeof(*c))))
		st = clp_error(CLP_ERR_NOMEM, "network table: out of host memory");
	if (st == CLP_OK) {
		int64_t nl = 0;

		for (int u = 0; u < nnodes; u++)
			for (int v = u + 1; v < nnodes; v++)
				nl += u % nregions != v % nregions;
		c->hosts = calloc((size_t)nnodes, sizeof(*c->hosts));
		c->devices = calloc((size_t)nnodes, sizeof(*c->devices));
		c->links = calloc((size_t)nl + 1, sizeof(*c->links));
		if (!c->hosts || !c->devices || !c->links)
			st = clp_error(CLP_ERR_NOMEM, "network table: out of host memory (%lld links)",
				       (long long)nl);
	}
	for (int u = 0; u < nnodes && st == CLP_OK; u++) {
		snprintf(c->hosts[u].name, CLP_NAME_MAX, "%.40s-%d", regions[u % nregions], u);
		c->hosts[u].first_device = u;
		c->hosts[u].ndevices = 1;
		snprintf(c->devices[u].id, CLP_NAME_MAX, "%s", c->hosts[u].name);
		snprintf(c->devices[u].kind, CLP_NAME_MAX, "default");
		c->devices[u].host = u;
		c->devices[u].speed = 1;
	}
	for (int u = 0; u < nnodes && st == CLP_OK; u++)
		for (int v = u + 1; v < nnodes; v++) {
			const row *r = pair[(u % nregions) * nregions + v % nregions];

			if (u % nregions == v % nregions)
				continue;
			c->links[k++] = (clp_link){u, -1, v, -1, 0,
						   {r->lat_ms * 1e-3, r->bw_gib * 1073741824.0}};
		}
	if (c) {
		c->nhosts = c->ndevices = nnodes;
		c->nlinks = k;
		c->intra = intra;
		c->inter = intra;
		c->eager_bytes = 65536;
	}
	if (st == CLP_OK)
		st = clp_cluster_index(c);
	free(rows);
	free(pair);
	if (st != CLP_OK) {
		clp_cluster_free(c);
		return st;
	}
	*out = c;
	return CLP_OK;
}
