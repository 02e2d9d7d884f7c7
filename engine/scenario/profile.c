/* Importer for the per-layer GPU profiles published with PipeFisher (see
 * ../shared/profiles/pipefisher/README.md): one CSV row per micro-batch size for ONE transformer
 * block, times in ms and memory in MiB. The block's numbers times the stage's layer count give a
 * stage's costs; the boundary activation (bs x seq x hidden fp32) is what travels between
 * stages. Embedding and head costs are not in the profiles and count as zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/infile.h"
#include "engine/scenario/costs.h"

#define MIB (1024.0 * 1024.0)

typedef struct model_shape {
	const char *prefix;
	int layers, seq, hidden;
} model_shape;

/* Published shapes of the profiled models (T5: encoder and decoder blocks together). */
static const model_shape shapes[] = {
	{"bert-base", 12, 128, 768},  {"bert-large", 24, 128, 1024}, {"t5-base", 24, 512, 768},
	{"t5-large", 48, 512, 1024},  {"opt-125m", 12, 2048, 768},   {"opt-350m", 24, 2048, 1024},
};

enum { COL_BS, COL_F, COL_B, COL_KRON, COL_INV, COL_PREC, COL_PARAM, COL_ACT, COL_KMEM, NCOL };
static const char *const col_names[NCOL] = {"bs",       "time_f",    "time_b",  "time_kron",
					    "time_inv", "time_prec", "mem_param", "mem_act",
					    "mem_kron"};

static const model_shape *shape_of(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strncmp(base, shapes[i].prefix, strlen(shapes[i].prefix)) &&
		    base[strlen(shapes[i].prefix)] == '_')
			return &shapes[i];
	return NULL;
}

/* The device from "<model>_time_memory_<device>.csv", upper case. */
static void device_of(const char *path, char *out, size_t n)
{
	const char *base = strrchr(path, '/'), *u;
	size_t k = 0;

	base = base ? base + 1 : path;
	u = strrchr(base, '_');
	snprintf(out, n, "default");
	if (!u)
		return;
	for (u++; *u && *u != '.' && k + 1 < n; u++)
		out[k++] = (char)(*u >= 'a' && *u <= 'z' ? *u - 32 : *u);
	if (k)
		out[k] = '\0';
}

/* Column positions from the header; -1 where a column is absent. */
static clp_status parse_header(const char *path, char *line, int *pos)
{
	int col = 0;

	for (int i = 0; i < NCOL; i++)
		pos[i] = -1;
	for (char *tok = strtok(line, ",\r\n"); tok; tok = strtok(NULL, ",\r\n"), col++)
		for (int i = 0; i < NCOL; i++)
			if (!strcmp(tok, col_names[i]))
				pos[i] = col;
	for (int i = 0; i < NCOL; i++)
		if (pos[i] < 0 && i != COL_KRON && i != COL_INV && i != COL_PREC && i != COL_KMEM)
			return clp_error(CLP_ERR_FORMAT, "%s: line 1: missing column '%s'", path,
					 col_names[i]);
	return CLP_OK;
}

static clp_status parse_row(const char *path, int lineno, char *line, const int *pos, double *v)
{
	double cells[64];
	int n = 0;

	for (char *p = line; n < 64;) {
		char *end;

		cells[n] = strtod(p, &end);
		if (end == p)
			return clp_error(CLP_ERR_FORMAT, "%s: line %d: column %d: expected a number",
					 path, lineno, n + 1);
		n++;
		p = end;
		while (*p == ' ' || *p == '\r' || *p == '\n')
			p++;
		if (*p != ',')
			break;
		p++;
	}
	for (int i = 0; i < NCOL; i++) {
		if (pos[i] >= n)
			return clp_error(CLP_ERR_FORMAT, "%s: line %d: only %d columns (truncated?)",
					 path, lineno, n);
		v[i] = pos[i] >= 0 ? cells[pos[i]] : 0;
		/* times in ms and sizes in MiB per layer: a million of either is no real model,
		 * and the bound keeps the byte counts made from them far from overflowing */
		if (!(v[i] >= 0 && v[i] <= 1e6))
			return clp_error(CLP_ERR_FORMAT, "%s: line %d: %s = %g: expected a number "
					 "in 0 .. 1e6", path, lineno, col_names[i], v[i]);
	}
	return CLP_OK;
}

/* The row for micro-batch size bs, into v (the message lists the sizes present). */
static clp_status read_row(const char *path, int bs, double *v)
{
	FILE *f;
	char line[4096], have[512] = "";
	int pos[NCOL], lineno = 1, found = 0;
	clp_status st = CLP_OK;

	CLP_TRY(clp_infile_open(NULL, path, CLP_INFILE_TEXT_MAX, &f, NULL));
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return clp_error(CLP_ERR_FORMAT, "%s: empty file", path);
	}
	st = parse_header(path, line, pos);
	while (st == CLP_OK && !found && fgets(line, sizeof(line), f)) {
		double row[NCOL];
		size_t hl = strlen(have);

		lineno++;
		if (line[0] == '\n' || line[0] == '\r')
			continue;
		st = parse_row(path, lineno, line, pos, row);
		if (st != CLP_OK)
			break;
		snprintf(have + hl, sizeof(have) - hl, "%s%g", hl ? ", " : "", row[COL_BS]);
		if ((int)row[COL_BS] == bs) {
			memcpy(v, row, sizeof(row));
			found = 1;
		}
	}
	fclose(f);
	if (st == CLP_OK && !found)
		st = clp_error(CLP_ERR_NOT_FOUND, "%s: no row for micro-batch size %d (rows: %s)",
			       path, bs, have[0] ? have : "none");
	return st;
}

int clp_profile_shape(const char *csv_path, int *layers, int *seq, int *hidden)
{
	const model_shape *m = shape_of(csv_path);

	if (!m)
		return 0;
	*layers = m->layers;
	*seq = m->seq;
	*hidden = m->hidden;
	return 1;
}

clp_status clp_costs_from_profile(const char *csv_path, const clp_profile_opts *o, clp_costs **out)
{
	const model_shape *m = shape_of(csv_path);
	int layers = o->nlayers, seq = o->seq, hidden = o->hidden;
	double v[NCOL];
	clp_costs *c;

	*out = NULL;
	if (m) {
		layers = layers > 0 ? layers : m->layers;
		seq = seq > 0 ? seq : m->seq;
		hidden = hidden > 0 ? hidden : m->hidden;
	}
	if (layers <= 0 || seq <= 0 || hidden <= 0)
		return clp_error(CLP_ERR_INVALID, "%s: unknown model; give the number of layers, the "
				 "sequence length and the hidden size", csv_path);
	if (o->nstages < 1 || layers < o->nstages)
		return clp_error(CLP_ERR_INVALID, "%s: %d layers cannot fill %d stages", csv_path,
				 layers, o->nstages);
	if (o->batch < 1)
		return clp_error(CLP_ERR_INVALID, "%s: micro-batch size must be >= 1", csv_path);
	CLP_TRY(read_row(csv_path, o->batch, v));
	CLP_TRY(clp_costs_create(o->nstages, &c));
	device_of(csv_path, c->device_kind, sizeof(c->device_kind));
	c->micro_batch_size = o->batch;
	snprintf(c->source, sizeof(c->source), "%s, bs %d, %d layers over %d stages",
		 strrchr(csv_path, '/') ? strrchr(csv_path, '/') + 1 : csv_path, o->batch, layers,
		 o->nstages);
	for (int s = 0; s < o->nstages; s++) {
		clp_stage_cost *sc = &c->stages[s];
		int n = layers / o->nstages + (s < layers % o->nstages);

		sc->nlayers = n;
		sc->t[CLP_COST_FWD] = n * v[COL_F] * 1e-3;
		sc->t[CLP_COST_BWD] = n * v[COL_B] * 1e-3;
		sc->t[CLP_COST_BWD_B] = sc->t[CLP_COST_BWD_W] = sc->t[CLP_COST_BWD] / 2;
		sc->t[CLP_COST_KFAC_CURV_A] = sc->t[CLP_COST_KFAC_CURV_B] = n * v[COL_KRON] * 1e-3 / 2;
		sc->t[CLP_COST_KFAC_INV] = n * v[COL_INV] * 1e-3;
		sc->t[CLP_COST_KFAC_PRECOND] = n * v[COL_PREC] * 1e-3;
		sc->act_bytes = (int64_t)(n * v[COL_ACT] * MIB);
		sc->act_w_bytes = sc->act_bytes;
		sc->param_bytes = (int64_t)(n * v[COL_PARAM] * MIB);
		sc->opt_bytes = 2 * sc->param_bytes;
		sc->kfac_bytes = (int64_t)(n * v[COL_KMEM] * MIB);
		sc->out_bytes = (int64_t)o->batch * seq * hidden * 4;
	}
	{
		/* a block's factors as the optimizer orders them (qkv A, Q/K/V B; output A, B;
		 * MLP in A, B; MLP out A, B), the MLP 4 x hidden as in all the profiled models */
		int h = hidden, dims[10] = {h, h, h, h, h, h, h, 4 * h, 4 * h, h};
		clp_status st = clp_costs_set_kfac_factors(c, dims, 10);

		if (st != CLP_OK) {
			clp_costs_free(c);
			return st;
		}
	}
	*out = c;
	return CLP_OK;
}
