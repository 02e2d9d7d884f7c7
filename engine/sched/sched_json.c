/* Schedule JSON reader, writer and comparison (see sched_json.h). */
#include "engine/sched/sched_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/durable.h"
#include "cl/base/json_util.h"

#define SCHED_FORMAT "clpipe-schedule"

static json_t *op_json(const clp_op *op)
{
	int k = op->kind;
	json_t *o = json_object();

	json_object_set_new(o, "op", json_string(clp_op_kind_name(k)));
	if (clp_op_is_collective(k))
		json_object_set_new(o, "what", json_string(clp_red_what_name(op->what)));
	if (op->stage >= 0)
		json_object_set_new(o, "stage", json_integer(op->stage));
	if (op->pipe)
		json_object_set_new(o, "pipe", json_integer(op->pipe));
	if (op->chunk)
		json_object_set_new(o, "chunk", json_integer(op->chunk));
	if (op->layer >= 0)
		json_object_set_new(o, "layer", json_integer(op->layer));
	if (op->mb >= 0)
		json_object_set_new(o, "mb", json_integer(op->mb));
	if (k == CLP_OP_KFAC_INV && op->factor)
		json_object_set_new(o, "factor", json_integer(op->factor - 1));
	if (op->step)
		json_object_set_new(o, "step", json_integer(op->step));
	if (op->peer >= 0)
		json_object_set_new(o, "peer", json_integer(op->peer));
	if (clp_op_is_p2p(k))
		json_object_set_new(o, "tag", json_integer(op->tag));
	if (op->group >= 0)
		json_object_set_new(o, "group", json_integer(op->group));
	if (op->bytes)
		json_object_set_new(o, "bytes", json_integer(op->bytes));
	if (op->flags & CLP_OPF_WAIT)
		json_object_set_new(o, "wait", json_true());
	return o;
}

static void put_json(FILE *f, json_t *v)
{
	char *txt = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);

	if (txt)
		fputs(txt, f);
	free(txt);
	json_decref(v);
}

static json_t *header_json(const clp_sched *s)
{
	json_t *h = json_object(), *map = json_array(), *groups = json_array();

	json_object_set_new(h, "format", json_string(SCHED_FORMAT));
	json_object_set_new(h, "version", json_integer(1));
	json_object_set_new(h, "name", json_string(s->name));
	json_object_set_new(h, "ranks", json_integer(s->nranks));
	json_object_set_new(h, "stages", json_integer(s->nstages));
	json_object_set_new(h, "microbatches", json_integer(s->nmb));
	json_object_set_new(h, "pipelines", json_integer(s->npipes));
	json_object_set_new(h, "chunks", json_integer(s->nchunks));
	json_object_set_new(h, "replicas", json_integer(s->nreplicas));
	json_object_set_new(h, "steps", json_integer(s->nsteps));
	json_object_set_new(h, "layers", json_integer(s->nlayers));
	for (int i = 0; i < s->nstages; i++)
		json_array_append_new(map, json_pack("{s:i, s:i, s:b, s:b}", "first_layer",
						     s->stages[i].first_layer, "layers",
						     s->stages[i].nlayers, "embed", s->stages[i].embed,
						     "head", s->stages[i].head));
	json_object_set_new(h, "stage_map", map);
	for (int g = 0; g < s->ngroups; g++) {
		json_t *m = json_array();

		for (int i = 0; i < s->groups[g].n; i++)
			json_array_append_new(m, json_integer(s->groups[g].ranks[i]));
		json_array_append_new(groups, m);
	}
	json_object_set_new(h, "groups", groups);
	if (s->path_start) {
		json_t *paths = json_array();

		for (int m = 0; m < s->nmb; m++) {
			json_t *p = json_array();

			for (int i = s->path_start[m]; i < s->path_start[m + 1]; i++)
				json_array_append_new(p, json_integer(s->path_stages[i]));
			json_array_append_new(paths, p);
		}
		json_object_set_new(h, "paths", paths);
	}
	return h;
}

static void write_sched(FILE *f, const clp_sched *s)
{
	json_t *h = header_json(s);
	const char *key;
	json_t *v;
	int first = 1;

	fputs("{\n", f);
	json_object_foreach(h, key, v) {
		fprintf(f, "%s  \"%s\": ", first ? "" : ",\n", key);
		put_json(f, json_incref(v));
		first = 0;
	}
	json_decref(h);
	fputs(",\n  \"programs\": [\n", f);
	for (int r = 0; r < s->nranks; r++) {
		const clp_rank_prog *p = &s->ranks[r];

		fprintf(f, "    {\"rank\": %d, \"replica\": %d, ", r, p->replica);
		if (p->mode == CLP_RANK_DATAFLOW)
			fprintf(f, "\"mode\": \"dataflow\", \"mem_cap\": %d, ", p->mem_cap);
		fputs("\"ops\": [\n", f);
		for (int i = 0; i < p->nops; i++) {
			fputs("      ", f);
			put_json(f, op_json(&p->ops[i]));
			fputs(i + 1 < p->nops ? ",\n" : "\n", f);
		}
		fprintf(f, "    ]}%s\n", r + 1 < s->nranks ? "," : "");
	}
	fputs("  ]\n}\n", f);
}

clp_status clp_sched_save(const clp_sched *s, const char *path)
{
	return clp_io_write_text(path, clp_sched_to_json(s), "format the schedule");
}

char *clp_sched_to_json(const clp_sched *s)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int err;

	if (!f)
		return NULL;
	write_sched(f, s);
	err = ferror(f);
	if (fclose(f) || err) {
		free(buf);
		return NULL;
	}
	return buf;
}

static clp_status read_op(const char *file, const char *at, const json_t *o, clp_op *op)
{
	static const char *const keys[] = {"op", "what", "stage", "pipe", "chunk", "layer", "mb",
					   "step", "peer", "tag", "group", "bytes", "wait", "factor",
					   NULL};
	char name[32], what[16] = "NONE";
	int k, w, pipe = 0, chunk = 0, step = 0, wait = 0, factor = -1;

	CLP_TRY(clp_json_expect_obj(file, at, o));
	CLP_TRY(clp_json_check_keys(file, at, o, keys));
	CLP_TRY(clp_json_str(file, at, o, "op", 1, name, sizeof(name)));
	if ((k = clp_op_kind_parse(name)) < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.op: unknown op \"%s\"", file, at, name);
	*op = clp_op_make((clp_op_kind)k, -1, 0, 0, -1);
	CLP_TRY(clp_json_str(file, at, o, "what", 0, what, sizeof(what)));
	if ((w = clp_red_what_parse(what)) < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.what: unknown \"%s\"", file, at, what);
	op->what = (uint8_t)w;
	CLP_TRY(clp_json_int(file, at, o, "factor", 0, 0, 254, &factor));
	if (factor >= 0 && k != CLP_OP_KFAC_INV)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.factor: only KFAC_INV names a factor", file,
				 at);
	if (factor >= 0)
		op->factor = (uint8_t)(factor + 1);
	CLP_TRY(clp_json_int(file, at, o, "stage", 0, 0, 1 << 30, &op->stage));
	CLP_TRY(clp_json_int(file, at, o, "pipe", 0, 0, 255, &pipe));
	CLP_TRY(clp_json_int(file, at, o, "chunk", 0, 0, 65535, &chunk));
	CLP_TRY(clp_json_int(file, at, o, "layer", 0, 0, 1 << 30, &op->layer));
	CLP_TRY(clp_json_int(file, at, o, "mb", 0, 0, 1 << 30, &op->mb));
	CLP_TRY(clp_json_int(file, at, o, "step", 0, 0, 65535, &step));
	CLP_TRY(clp_json_int(file, at, o, "peer", 0, 0, 1 << 30, &op->peer));
	CLP_TRY(clp_json_int(file, at, o, "tag", 0, 0, CLP_TAG_LIMIT - 1, &op->tag));
	CLP_TRY(clp_json_int(file, at, o, "group", 0, 0, 1 << 30, &op->group));
	CLP_TRY(clp_json_i64(file, at, o, "bytes", 0, 0, INT64_MAX, &op->bytes));
	CLP_TRY(clp_json_bool(file, at, o, "wait", 0, &wait));
	op->pipe = (uint8_t)pipe;
	op->chunk = (uint16_t)chunk;
	op->step = (uint16_t)step;
	op->flags = wait ? CLP_OPF_WAIT : 0;
	if (clp_op_is_p2p(k) && op->peer < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.peer: missing (required for %s)", file, at,
				 name);
	if (clp_op_is_p2p(k) && op->tag < 0 && op->mb >= 0)
		op->tag = clp_sched_tag(k == CLP_OP_SEND_ACT || k == CLP_OP_RECV_ACT ? CLP_TAG_ACT
										: CLP_TAG_GRAD,
					op->pipe, op->chunk, op->mb);
	if (clp_op_is_collective(k) && op->group < 0)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.group: missing (required for %s)", file, at,
				 name);
	return CLP_OK;
}

static clp_status read_program(const char *file, const json_t *o, int r, clp_sched *s)
{
	static const char *const keys[] = {"rank", "replica", "mode", "mem_cap", "ops", NULL};
	clp_rank_prog *p = &s->ranks[r];
	char at[64], mode[16] = "ordered";
	json_t *ops, *jo;
	int rank = r;
	size_t i;

	snprintf(at, sizeof(at), "programs[%d]", r);
	CLP_TRY(clp_json_expect_obj(file, at, o));
	CLP_TRY(clp_json_check_keys(file, at, o, keys));
	CLP_TRY(clp_json_int(file, at, o, "rank", 0, 0, 1 << 30, &rank));
	if (rank != r)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.rank: %d, expected %d (programs in rank "
				 "order)", file, at, rank, r);
	CLP_TRY(clp_json_int(file, at, o, "replica", 0, 0, 1 << 30, &p->replica));
	CLP_TRY(clp_json_str(file, at, o, "mode", 0, mode, sizeof(mode)));
	if (strcmp(mode, "ordered") && strcmp(mode, "dataflow"))
		return clp_error(CLP_ERR_FORMAT, "%s: %s.mode: expected \"ordered\" or \"dataflow\"",
				 file, at);
	p->mode = strcmp(mode, "dataflow") ? CLP_RANK_ORDERED : CLP_RANK_DATAFLOW;
	CLP_TRY(clp_json_int(file, at, o, "mem_cap", 0, 0, 1 << 30, &p->mem_cap));
	CLP_TRY(clp_json_arr(file, at, o, "ops", 1, &ops));
	json_array_foreach(ops, i, jo) {
		char oat[96];
		clp_op op;

		snprintf(oat, sizeof(oat), "%s.ops[%zu]", at, i);
		CLP_TRY(read_op(file, oat, jo, &op));
		CLP_TRY(clp_sched_push(s, r, &op));
	}
	return CLP_OK;
}

static clp_status read_stage_map(const char *file, const json_t *root, clp_sched *s)
{
	static const char *const keys[] = {"first_layer", "layers", "embed", "head", NULL};
	json_t *map, *o;
	size_t i;

	CLP_TRY(clp_json_arr(file, "", root, "stage_map", 0, &map));
	if (!map)
		return CLP_OK;
	if ((int)json_array_size(map) != s->nstages)
		return clp_error(CLP_ERR_FORMAT, "%s: stage_map: %zu entries for %d stages", file,
				 json_array_size(map), s->nstages);
	json_array_foreach(map, i, o) {
		clp_stage_info *st = &s->stages[i];
		int embed = 0, head = 0;
		char at[64];

		snprintf(at, sizeof(at), "stage_map[%zu]", i);
		CLP_TRY(clp_json_expect_obj(file, at, o));
		CLP_TRY(clp_json_check_keys(file, at, o, keys));
		CLP_TRY(clp_json_int(file, at, o, "first_layer", 1, 0, 1 << 30, &st->first_layer));
		CLP_TRY(clp_json_int(file, at, o, "layers", 1, 0, 1 << 30, &st->nlayers));
		CLP_TRY(clp_json_bool(file, at, o, "embed", 0, &embed));
		CLP_TRY(clp_json_bool(file, at, o, "head", 0, &head));
		st->embed = (uint8_t)embed;
		st->head = (uint8_t)head;
	}
	return CLP_OK;
}

static clp_status read_int_list(const char *file, const char *at, const json_t *a, int lo,
				int hi, int *out)
{
	size_t i;
	json_t *x;

	json_array_foreach(a, i, x) {
		if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) >= hi)
			return clp_error(CLP_ERR_FORMAT, "%s: %s[%zu]: expected an integer in [%d, %d)",
					 file, at, i, lo, hi);
		out[i] = (int)json_integer_value(x);
	}
	return CLP_OK;
}

static clp_status read_groups_paths(const char *file, const json_t *root, clp_sched *s)
{
	json_t *groups, *paths, *g;
	size_t i;
	int *buf = malloc(((size_t)s->nranks + (size_t)s->nstages) * sizeof(int));
	clp_status st = CLP_OK;

	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
	st = clp_json_arr(file, "", root, "groups", 0, &groups);
	json_array_foreach(groups, i, g) {
		char at[64];
		int idx;

		snprintf(at, sizeof(at), "groups[%zu]", i);
		if (st != CLP_OK)
			break;
		if (!json_is_array(g) || json_array_size(g) < 1 ||
		    json_array_size(g) > (size_t)s->nranks) {
			st = clp_error(CLP_ERR_FORMAT, "%s: %s: expected an array of 1 to %d ranks",
				       file, at, s->nranks);
			break;
		}
		st = read_int_list(file, at, g, 0, s->nranks, buf);
		if (st == CLP_OK)
			st = clp_sched_group(s, buf, (int)json_array_size(g), &idx);
		if (st == CLP_OK && idx != (int)i)
			st = clp_error(CLP_ERR_FORMAT, "%s: %s: the same ranks as groups[%d]", file,
				       at, idx);
	}
	if (st == CLP_OK)
		st = clp_json_arr(file, "", root, "paths", 0, &paths);
	if (st == CLP_OK && paths) {
		int *start = calloc((size_t)s->nmb + 1, sizeof(int)), *stages;
		size_t total = 0;

		if ((int)json_array_size(paths) != s->nmb)
			st = clp_error(CLP_ERR_FORMAT, "%s: paths: %zu entries for %d micro-batches",
				       file, json_array_size(paths), s->nmb);
		json_array_foreach(paths, i, g)
			total += json_is_array(g) ? json_array_size(g) : 0;
		stages = malloc((total + 1) * sizeof(int));
		if (st == CLP_OK && (!start || !stages))
			st = clp_error(CLP_ERR_NOMEM, "%s: out of host memory", file);
		json_array_foreach(paths, i, g) {
			char at[64];

			snprintf(at, sizeof(at), "paths[%zu]", i);
			if (st != CLP_OK)
				break;
			if (!json_is_array(g) || json_array_size(g) < 1)
				st = clp_error(CLP_ERR_FORMAT, "%s: %s: expected a non-empty array of "
					       "stages", file, at);
			else
				st = read_int_list(file, at, g, 0, s->nstages, stages + start[i]);
			start[i + 1] = start[i] + (int)json_array_size(g);
		}
		if (st == CLP_OK)
			st = clp_sched_set_paths(s, start, stages);
		free(start);
		free(stages);
	}
	free(buf);
	return st;
}

static clp_status load_root(const char *path, json_t *root, clp_sched **out);

clp_status clp_sched_load(const char *path, clp_sched **out)
{
	json_t *root;

	*out = NULL;
	CLP_TRY(clp_json_load(path, &root));
	return load_root(path, root, out);
}

clp_status clp_sched_from_json(const char *text, const char *name, clp_sched **out)
{
	json_t *root;

	*out = NULL;
	CLP_TRY(clp_json_parse(name, text, strlen(text), &root));
	return load_root(name, root, out);
}

/* The schedule of a parsed document into *out (made here; the caller frees it on failure). */
static clp_status read_root(const char *path, json_t *root, clp_sched **out)
{
	static const char *const keys[] = {"format",   "version", "name",     "ranks",
					   "stages",   "microbatches", "pipelines", "chunks",
					   "replicas", "steps",   "layers",   "stage_map",
					   "groups",   "paths",   "programs", NULL};
	json_t *progs;
	clp_sched *s;
	int nranks = 0, nstages = 0, nmb = 0, nlayers = 0;

	CLP_TRY(clp_json_check_format(path, root, SCHED_FORMAT, 1));
	CLP_TRY(clp_json_check_keys(path, "", root, keys));
	CLP_TRY(clp_json_int(path, "", root, "ranks", 1, 1, 1 << 24, &nranks));
	CLP_TRY(clp_json_int(path, "", root, "stages", 1, 1, 1 << 24, &nstages));
	CLP_TRY(clp_json_int(path, "", root, "microbatches", 1, 1, 1 << 24, &nmb));
	/* Fewer layers than stages only with a stage map (SkipPipe's head stage has none). */
	CLP_TRY(clp_json_int(path, "", root, "layers", 0,
			     json_object_get(root, "stage_map") ? 1 : nstages, 1 << 24, &nlayers));
	CLP_TRY(clp_sched_create(out, nranks, nstages, nmb, nlayers > nstages ? nlayers : nstages));
	s = *out;
	if (nlayers > 0)
		s->nlayers = nlayers;
	CLP_TRY(clp_json_str(path, "", root, "name", 0, s->name, sizeof(s->name)));
	CLP_TRY(clp_json_int(path, "", root, "pipelines", 0, 1, 255, &s->npipes));
	CLP_TRY(clp_json_int(path, "", root, "chunks", 0, 1, 65535, &s->nchunks));
	CLP_TRY(clp_json_int(path, "", root, "replicas", 0, 1, 1 << 24, &s->nreplicas));
	CLP_TRY(clp_json_int(path, "", root, "steps", 0, 1, 65535, &s->nsteps));
	CLP_TRY(read_stage_map(path, root, s));
	CLP_TRY(read_groups_paths(path, root, s));
	CLP_TRY(clp_json_arr(path, "", root, "programs", 1, &progs));
	if ((int)json_array_size(progs) != nranks)
		return clp_error(CLP_ERR_FORMAT, "%s: programs: %zu entries for %d ranks", path,
				 json_array_size(progs), nranks);
	for (int r = 0; r < nranks; r++)
		CLP_TRY(read_program(path, json_array_get(progs, (size_t)r), r, s));
	return CLP_OK;
}

/* Takes the reference to root. */
static clp_status load_root(const char *path, json_t *root, clp_sched **out)
{
	clp_sched *s = NULL;
	clp_status st = read_root(path, root, &s);

	json_decref(root);
	if (st != CLP_OK) {
		clp_sched_free(s);
		return st;
	}
	snprintf(s->file, sizeof(s->file), "%s", path);
	*out = s;
	return CLP_OK;
}

clp_status clp_sched_compare(const clp_sched *a, const clp_sched *b)
{
	if (a->nranks != b->nranks || a->nstages != b->nstages || a->nmb != b->nmb ||
	    a->npipes != b->npipes || a->ngroups != b->ngroups)
		return clp_error(CLP_ERR_INVALID, "schedules differ in shape: ranks %d/%d, stages "
				 "%d/%d, micro-batches %d/%d, pipelines %d/%d, groups %d/%d",
				 a->nranks, b->nranks, a->nstages, b->nstages, a->nmb, b->nmb,
				 a->npipes, b->npipes, a->ngroups, b->ngroups);
	for (int g = 0; g < a->ngroups; g++)
		if (a->groups[g].n != b->groups[g].n ||
		    memcmp(a->groups[g].ranks, b->groups[g].ranks, (size_t)a->groups[g].n * sizeof(int)))
			return clp_error(CLP_ERR_INVALID, "schedules differ in group %d", g);
	for (int r = 0; r < a->nranks; r++) {
		const clp_rank_prog *p = &a->ranks[r], *q = &b->ranks[r];

		for (int i = 0; i < p->nops || i < q->nops; i++) {
			char x[200] = "(end)", y[200] = "(end)";

			if (i < p->nops && i < q->nops && !memcmp(&p->ops[i], &q->ops[i], sizeof(clp_op)))
				continue;
			if (i < p->nops)
				clp_op_describe(&p->ops[i], x, sizeof(x));
			if (i < q->nops)
				clp_op_describe(&q->ops[i], y, sizeof(y));
			return clp_error(CLP_ERR_INVALID, "schedules differ at rank %d op %d: %s vs %s",
					 r, i, x, y);
		}
	}
	return CLP_OK;
}
