/* Rank layout: JSON reader/writer, derivation from a schedule and checks (see layout.h). */
#include "engine/scenario/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/json_util.h"
#include "engine/sched/sched.h"

#define LAYOUT_FORMAT "clpipe-layout"

void clp_layout_free(clp_layout *l)
{
	if (!l)
		return;
	for (int r = 0; l->ranks && r < l->nranks; r++)
		free(l->ranks[r].stages);
	free(l->ranks);
	free(l);
}

static clp_status layout_alloc(int nranks, clp_layout **out)
{
	clp_layout *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l || !(l->ranks = calloc((size_t)(nranks > 0 ? nranks : 1), sizeof(*l->ranks)))) {
		free(l);
		return clp_error(CLP_ERR_NOMEM, "layout: out of host memory");
	}
	l->nranks = nranks;
	for (int r = 0; r < nranks; r++)
		l->ranks[r].device = -1;
	*out = l;
	return CLP_OK;
}

static int has_stage(const clp_layout_rank *lr, int stage, int pipe)
{
	for (int i = 0; i < lr->nstages; i++)
		if (lr->stages[i].stage == stage && lr->stages[i].pipe == pipe)
			return 1;
	return 0;
}

static clp_status add_stage(clp_layout_rank *lr, int stage, int pipe, int chunk)
{
	clp_layout_stage *st = realloc(lr->stages, (size_t)(lr->nstages + 1) * sizeof(*st));

	if (!st)
		return clp_error(CLP_ERR_NOMEM, "layout: out of host memory");
	lr->stages = st;
	lr->stages[lr->nstages++] = (clp_layout_stage){stage, pipe, chunk};
	return CLP_OK;
}

static clp_status read_rank(const char *file, const json_t *o, int r, clp_layout_rank *lr)
{
	static const char *const keys[] = {"rank", "device", "replica", "stages", NULL};
	static const char *const skeys[] = {"stage", "pipeline", "chunk", NULL};
	char at[64];
	json_t *stages, *so;
	size_t i;
	int rank = r;

	snprintf(at, sizeof(at), "ranks[%d]", r);
	CLP_TRY(clp_json_expect_obj(file, at, o));
	CLP_TRY(clp_json_check_keys(file, at, o, keys));
	CLP_TRY(clp_json_int(file, at, o, "rank", 0, 0, 1 << 30, &rank));
	if (rank != r)
		return clp_error(CLP_ERR_FORMAT, "%s: %s.rank: %d, expected %d (ranks in order)",
				 file, at, rank, r);
	CLP_TRY(clp_json_str(file, at, o, "device", 1, lr->device_id, sizeof(lr->device_id)));
	CLP_TRY(clp_json_int(file, at, o, "replica", 0, 0, 1 << 30, &lr->replica));
	CLP_TRY(clp_json_arr(file, at, o, "stages", 1, &stages));
	json_array_foreach(stages, i, so) {
		char sat[96];
		int stage = 0, pipe = 0, chunk = 0;

		snprintf(sat, sizeof(sat), "%s.stages[%zu]", at, i);
		CLP_TRY(clp_json_expect_obj(file, sat, so));
		CLP_TRY(clp_json_check_keys(file, sat, so, skeys));
		CLP_TRY(clp_json_int(file, sat, so, "stage", 1, 0, 1 << 30, &stage));
		CLP_TRY(clp_json_int(file, sat, so, "pipeline", 0, 0, 255, &pipe));
		CLP_TRY(clp_json_int(file, sat, so, "chunk", 0, 0, 65535, &chunk));
		if (has_stage(lr, stage, pipe))
			return clp_error(CLP_ERR_FORMAT, "%s: %s: stage %d pipeline %d listed twice",
					 file, sat, stage, pipe);
		CLP_TRY(add_stage(lr, stage, pipe, chunk));
	}
	return CLP_OK;
}

clp_status clp_layout_load(const char *path, clp_layout **out)
{
	static const char *const keys[] = {"format", "version", "ranks", NULL};
	json_t *root, *ranks;
	clp_layout *l = NULL;
	clp_status st;

	*out = NULL;
	CLP_TRY(clp_json_load(path, &root));
	st = clp_json_check_format(path, root, LAYOUT_FORMAT, 1);
	if (st == CLP_OK)
		st = clp_json_check_keys(path, "", root, keys);
	if (st == CLP_OK)
		st = clp_json_arr(path, "", root, "ranks", 1, &ranks);
	if (st == CLP_OK && json_array_size(ranks) == 0)
		st = clp_error(CLP_ERR_FORMAT, "%s: ranks: needs at least one rank", path);
	if (st == CLP_OK)
		st = layout_alloc((int)json_array_size(ranks), &l);
	for (int r = 0; st == CLP_OK && r < l->nranks; r++)
		st = read_rank(path, json_array_get(ranks, (size_t)r), r, &l->ranks[r]);
	json_decref(root);
	if (st != CLP_OK) {
		clp_layout_free(l);
		return st;
	}
	snprintf(l->file, sizeof(l->file), "%s", path);
	*out = l;
	return CLP_OK;
}

clp_status clp_layout_save(const clp_layout *l, const char *path)
{
	json_t *root = json_object(), *ranks = json_array();
	clp_status st;

	json_object_set_new(root, "format", json_string(LAYOUT_FORMAT));
	json_object_set_new(root, "version", json_integer(1));
	for (int r = 0; r < l->nranks; r++) {
		const clp_layout_rank *lr = &l->ranks[r];
		json_t *stages = json_array();

		for (int i = 0; i < lr->nstages; i++)
			json_array_append_new(stages, json_pack("{s:i, s:i, s:i}", "stage",
								lr->stages[i].stage, "pipeline",
								lr->stages[i].pipe, "chunk",
								lr->stages[i].chunk));
		json_array_append_new(ranks, json_pack("{s:i, s:s, s:i, s:o}", "rank", r, "device",
						       lr->device_id, "replica", lr->replica,
						       "stages", stages));
	}
	json_object_set_new(root, "ranks", ranks);
	st = clp_json_save(path, root);
	json_decref(root);
	return st;
}

clp_status clp_layout_from_sched(const clp_sched *s, const clp_cluster *c, clp_layout **out)
{
	clp_layout *l;

	if (c && c->ndevices < s->nranks)
		return clp_error(CLP_ERR_INVALID, "layout: the cluster has %d devices, the schedule "
				 "needs %d ranks (give a layout)", c->ndevices, s->nranks);
	CLP_TRY(layout_alloc(s->nranks, &l));
	for (int r = 0; r < s->nranks; r++) {
		clp_layout_rank *lr = &l->ranks[r];

		lr->replica = s->ranks[r].replica;
		if (c) {
			lr->device = r;
			snprintf(lr->device_id, sizeof(lr->device_id), "%s", c->devices[r].id);
		} else {
			snprintf(lr->device_id, sizeof(lr->device_id), "dev%d", r);
		}
		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *op = &s->ranks[r].ops[i];

			if (op->kind != CLP_OP_FWD || has_stage(lr, op->stage, op->pipe))
				continue;
			if (add_stage(lr, op->stage, op->pipe, op->chunk) != CLP_OK) {
				clp_layout_free(l);
				return CLP_ERR_NOMEM;
			}
		}
	}
	*out = l;
	return CLP_OK;
}

clp_status clp_layout_resolve(clp_layout *l, const clp_cluster *c, const char *file)
{
	for (int r = 0; r < l->nranks; r++) {
		l->ranks[r].device = clp_cluster_find_device(c, l->ranks[r].device_id);
		if (l->ranks[r].device < 0)
			return clp_error(CLP_ERR_NOT_FOUND, "%s: ranks[%d].device: \"%s\" is not a "
					 "device of the cluster", file, r, l->ranks[r].device_id);
	}
	return CLP_OK;
}

clp_status clp_layout_check(const clp_layout *l, const clp_sched *s, const char *file)
{
	if (l->nranks != s->nranks)
		return clp_error(CLP_ERR_INVALID, "%s: %d ranks, the schedule has %d", file,
				 l->nranks, s->nranks);
	for (int r = 0; r < s->nranks; r++) {
		const clp_layout_rank *lr = &l->ranks[r];

		for (int i = 0; i < s->ranks[r].nops; i++) {
			const clp_op *op = &s->ranks[r].ops[i];

			if (clp_op_is_compute(op->kind) && op->kind != CLP_OP_OPT_STEP &&
			    op->stage >= 0 && !has_stage(lr, op->stage, op->pipe))
				return clp_error(CLP_ERR_INVALID, "%s: ranks[%d]: the schedule runs "
						 "stage %d pipeline %d there (op %d), the layout "
						 "does not list it", file, r, op->stage, op->pipe, i);
		}
		for (int i = 0; i < lr->nstages; i++) {
			int used = 0;

			/* A SkipPipe node no micro-batch visits still holds its stage: it takes
			 * part in the all-reduce and steps the optimizer. */
			for (int k = 0; k < s->ranks[r].nops && !used; k++)
				used = (s->ranks[r].ops[k].kind == CLP_OP_FWD ||
					s->ranks[r].ops[k].kind == CLP_OP_OPT_STEP) &&
				       s->ranks[r].ops[k].stage == lr->stages[i].stage &&
				       s->ranks[r].ops[k].pipe == lr->stages[i].pipe;
			if (!used)
				return clp_error(CLP_ERR_INVALID, "%s: ranks[%d].stages[%d]: stage %d "
						 "pipeline %d is not run there by the schedule", file,
						 r, i, lr->stages[i].stage, lr->stages[i].pipe);
		}
	}
	return CLP_OK;
}
