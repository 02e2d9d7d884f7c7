/* Path sets as JSON ("clpipe-skip-paths", docs/SKIPPIPE.md). The writer puts one node and one
 * micro-batch per line so that two path sets diff line by line. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/durable.h"
#include "cl/json_util.h"
#include "engine/skip/skip_internal.h"

static void put(FILE *f, json_t *v)
{
	char *txt = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));

	if (txt)
		fputs(txt, f);
	free(txt);
	json_decref(v);
}

static json_t *rules_json(const clp_skip_rules *r)
{
	return json_pack("{s:i, s:i, s:i, s:i, s:b, s:b}", "path_len", r->path_len, "max_jump",
			 r->max_jump, "max_swaps", r->max_swaps, "memory", r->memory, "balance",
			 r->balance, "deadlock_free", r->deadlock_free);
}

clp_status clp_skip_save(const clp_skip_paths *p, const clp_skip_rules *r, double iter_s,
			 const char *path)
{
	char *txt = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&txt, &len);
	clp_status st;
	int ok;

	if (!f)
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
	fprintf(f, "{\n  \"format\": \"%s\", \"version\": 1,\n  \"stages\": %d,\n", CLP_SKIP_FORMAT,
		p->nstages);
	if (r) {
		fputs("  \"rules\": ", f);
		put(f, rules_json(r));
		fputs(",\n", f);
	}
	if (iter_s > 0)
		fprintf(f, "  \"iteration_s\": %.9g,\n", iter_s);
	fputs("  \"nodes\": [\n", f);
	for (int n = 0; n < p->nnodes; n++) {
		json_t *o = json_pack("{s:i, s:i}", "node", n, "stage", p->node_stage[n]);

		if (p->node_device[n][0])
			json_object_set_new(o, "device", json_string(p->node_device[n]));
		if (p->node_prio[n] == CLP_SKIP_FORWARD_FIRST)
			json_object_set_new(o, "priority", json_string("forward"));
		fputs("    ", f);
		put(f, o);
		fputs(n + 1 < p->nnodes ? ",\n" : "\n", f);
	}
	fputs("  ],\n  \"microbatches\": [\n", f);
	for (int m = 0; m < p->nmb; m++) {
		json_t *hops = json_array();

		for (int i = p->hop_start[m]; i < p->hop_start[m + 1]; i++)
			json_array_append_new(hops, json_pack("[i, i]", p->hops[i].stage,
							      p->hops[i].node));
		fputs("    ", f);
		put(f, json_pack("{s:i, s:i, s:o}", "mb", m, "origin", p->origin[m], "hops", hops));
		fputs(m + 1 < p->nmb ? ",\n" : "\n", f);
	}
	fputs("  ]\n}\n", f);
	ok = !ferror(f);
	ok &= fclose(f) == 0;
	st = ok ? clp_io_write_file(path, txt, len)
		: clp_error(CLP_ERR_NOMEM, "%s: out of host memory", path);
	free(txt);
	return st;
}

static clp_status read_rules(const char *file, const json_t *root, clp_skip_rules *r)
{
	static const char *const keys[] = {"path_len", "max_jump", "max_swaps", "memory", "balance",
					   "deadlock_free", NULL};
	json_t *o;

	CLP_TRY(clp_json_obj(file, "", root, "rules", 0, &o));
	if (!o || !r)
		return CLP_OK;
	CLP_TRY(clp_json_check_keys(file, "rules", o, keys));
	CLP_TRY(clp_json_int(file, "rules", o, "path_len", 0, 1, 1 << 20, &r->path_len));
	CLP_TRY(clp_json_int(file, "rules", o, "max_jump", 0, 1, 1 << 20, &r->max_jump));
	CLP_TRY(clp_json_int(file, "rules", o, "max_swaps", 0, 0, 1 << 20, &r->max_swaps));
	CLP_TRY(clp_json_int(file, "rules", o, "memory", 0, 0, 1 << 20, &r->memory));
	CLP_TRY(clp_json_bool(file, "rules", o, "balance", 0, &r->balance));
	return clp_json_bool(file, "rules", o, "deadlock_free", 0, &r->deadlock_free);
}

static clp_status read_nodes(const char *file, const json_t *nodes, clp_skip_paths *p)
{
	static const char *const keys[] = {"node", "stage", "device", "priority", NULL};
	size_t i;
	json_t *o;

	json_array_foreach(nodes, i, o) {
		char at[48], prio[16];
		int id = (int)i;

		snprintf(at, sizeof(at), "nodes[%zu]", i);
		CLP_TRY(clp_json_expect_obj(file, at, o));
		CLP_TRY(clp_json_check_keys(file, at, o, keys));
		CLP_TRY(clp_json_int(file, at, o, "node", 0, 0, p->nnodes - 1, &id));
		if (id != (int)i)
			return clp_error(CLP_ERR_FORMAT, "%s: %s.node: %d, expected %zu (nodes are "
					 "listed in order)", file, at, id, i);
		CLP_TRY(clp_json_int(file, at, o, "stage", 1, 0, p->nstages - 1, &p->node_stage[i]));
		CLP_TRY(clp_json_str(file, at, o, "device", 0, p->node_device[i],
				     sizeof(p->node_device[i])));
		prio[0] = '\0';
		CLP_TRY(clp_json_str(file, at, o, "priority", 0, prio, sizeof(prio)));
		if (prio[0] && strcmp(prio, "forward") && strcmp(prio, "backward"))
			return clp_error(CLP_ERR_FORMAT, "%s: %s.priority: \"%s\", expected \"forward\" "
					 "or \"backward\"", file, at, prio);
		p->node_prio[i] = !strcmp(prio, "forward") ? CLP_SKIP_FORWARD_FIRST
							   : CLP_SKIP_BACKWARD_FIRST;
	}
	return CLP_OK;
}

static clp_status read_hops(const char *file, const char *at, const json_t *hops,
			    clp_skip_hop *h)
{
	size_t i;
	json_t *x;

	json_array_foreach(hops, i, x) {
		json_int_t v[2];

		if (!json_is_array(x) || json_array_size(x) != 2 ||
		    !json_is_integer(json_array_get(x, 0)) || !json_is_integer(json_array_get(x, 1)))
			return clp_error(CLP_ERR_FORMAT, "%s: %s.hops[%zu]: expected [stage, node]",
					 file, at, i);
		v[0] = json_integer_value(json_array_get(x, 0));
		v[1] = json_integer_value(json_array_get(x, 1));
		if (v[0] < 0 || v[0] > (1 << 24) || v[1] < 0 || v[1] > (1 << 24))
			return clp_error(CLP_ERR_FORMAT, "%s: %s.hops[%zu]: [%lld, %lld] out of range",
					 file, at, i, (long long)v[0], (long long)v[1]);
		h[i] = (clp_skip_hop){(int)v[0], (int)v[1]};
	}
	return CLP_OK;
}

static clp_status read_mbs(const char *file, const json_t *mbs, clp_skip_paths *p)
{
	static const char *const keys[] = {"mb", "origin", "hops", NULL};
	size_t i, total = 0;
	json_t *o, *hops;
	char *seen = calloc((size_t)p->nmb + 1, 1);
	clp_status st = CLP_OK;

	if (!seen)
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
	json_array_foreach(mbs, i, o) {
		char at[48];
		int mb = (int)i;

		snprintf(at, sizeof(at), "microbatches[%zu]", i);
		if ((st = clp_json_expect_obj(file, at, o)) != CLP_OK ||
		    (st = clp_json_check_keys(file, at, o, keys)) != CLP_OK ||
		    (st = clp_json_int(file, at, o, "mb", 0, 0, p->nmb - 1, &mb)) != CLP_OK ||
		    (st = clp_json_arr(file, at, o, "hops", 1, &hops)) != CLP_OK)
			break;
		if (seen[mb]) {
			st = clp_error(CLP_ERR_FORMAT, "%s: %s.mb: micro-batch %d is listed twice", file,
				       at, mb);
			break;
		}
		seen[mb] = 1;
		if ((st = clp_json_int(file, at, o, "origin", 1, 0, p->nnodes - 1,
				       &p->origin[mb])) != CLP_OK)
			break;
		p->hop_start[mb + 1] = (int)json_array_size(hops);
		total += json_array_size(hops);
	}
	if (st == CLP_OK && !(p->hops = malloc((total + 1) * sizeof(*p->hops))))
		st = clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
	for (int m = 0; st == CLP_OK && m < p->nmb; m++)
		p->hop_start[m + 1] += p->hop_start[m];
	json_array_foreach(mbs, i, o) {
		char at[48];
		int mb = (int)i;

		if (st != CLP_OK)
			break;
		snprintf(at, sizeof(at), "microbatches[%zu]", i);
		clp_json_int(file, at, o, "mb", 0, 0, p->nmb - 1, &mb);
		st = read_hops(file, at, json_object_get(o, "hops"), p->hops + p->hop_start[mb]);
	}
	free(seen);
	return st;
}

/* A path file's root into *pp (created here, freed by the caller) and, when r, its rules. */
static clp_status read_paths(const char *path, json_t *root, clp_skip_paths **pp,
			     clp_skip_rules *r)
{
	static const char *const keys[] = {"format", "version", "stages", "rules", "iteration_s",
					   "nodes", "microbatches", NULL};
	json_t *nodes = NULL, *mbs = NULL;
	int nstages = 0;

	CLP_TRY(clp_json_check_format(path, root, CLP_SKIP_FORMAT, 1));
	CLP_TRY(clp_json_check_keys(path, "", root, keys));
	CLP_TRY(clp_json_int(path, "", root, "stages", 1, 1, CLP_SKIP_MAX_STAGES, &nstages));
	CLP_TRY(clp_json_arr(path, "", root, "nodes", 1, &nodes));
	CLP_TRY(clp_json_arr(path, "", root, "microbatches", 1, &mbs));
	if (json_array_size(nodes) == 0)
		return clp_error(CLP_ERR_FORMAT, "%s: nodes: empty", path);
	CLP_TRY(clp_skip_paths_create(pp, nstages, (int)json_array_size(nodes),
				      (int)json_array_size(mbs)));
	if (r) {
		r->nstages = nstages;
		CLP_TRY(read_rules(path, root, r));
	}
	CLP_TRY(read_nodes(path, nodes, *pp));
	return read_mbs(path, mbs, *pp);
}

clp_status clp_skip_load(const char *path, clp_skip_paths **out, clp_skip_rules *r)
{
	json_t *root;
	clp_skip_paths *p = NULL;
	clp_status st;

	*out = NULL;
	CLP_TRY(clp_json_load(path, &root));
	st = read_paths(path, root, &p, r);
	json_decref(root);
	if (st != CLP_OK) {
		clp_skip_paths_free(p);
		return st;
	}
	snprintf(p->file, sizeof(p->file), "%s", path);
	*out = p;
	return CLP_OK;
}
