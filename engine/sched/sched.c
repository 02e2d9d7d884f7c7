/* The schedule IR: lifecycle, groups, paths, names and the tag encoding (see sched.h). */
#include "engine/sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CLP_OP_KIND_COUNT] = {
	"FWD",       "BWD",       "BWD_B",     "BWD_W",       "SEND_ACT",     "RECV_ACT",
	"SEND_GRAD", "RECV_GRAD", "ALLREDUCE", "REDUCE",      "OPT_STEP",     "KFAC_CURV_A",
	"KFAC_CURV_B", "KFAC_SYNC", "KFAC_INV", "KFAC_PRECOND", "KFAC_INV_SYNC", "KFAC_PREC_SYNC",
	"OPT_PREP",
};

static const char *const what_names[CLP_RED_COUNT] = {"NONE", "GRADS", "TIED", "NORM", "LOSS"};

const char *clp_op_kind_name(int kind)
{
	return kind >= 0 && kind < CLP_OP_KIND_COUNT ? kind_names[kind] : "?";
}

int clp_op_kind_parse(const char *name)
{
	for (int k = 0; k < CLP_OP_KIND_COUNT; k++)
		if (!strcmp(name, kind_names[k]))
			return k;
	return -1;
}

const char *clp_red_what_name(int what)
{
	return what >= 0 && what < CLP_RED_COUNT ? what_names[what] : "?";
}

int clp_red_what_parse(const char *name)
{
	for (int k = 0; k < CLP_RED_COUNT; k++)
		if (!strcmp(name, what_names[k]))
			return k;
	return -1;
}

int clp_sched_tag(int kind, int pipe, int chunk, int mb)
{
	return ((mb & 1023) << 5) | ((chunk & 3) << 3) | ((pipe & 1) << 2) | (kind & 3);
}

clp_op clp_op_make(clp_op_kind kind, int stage, int pipe, int chunk, int mb)
{
	clp_op op = {0};

	op.kind = (uint8_t)kind;
	op.pipe = (uint8_t)pipe;
	op.chunk = (uint16_t)chunk;
	op.stage = stage;
	op.mb = mb;
	op.peer = -1;
	op.group = -1;
	op.layer = -1;
	op.tag = -1;
	return op;
}

clp_status clp_sched_stage_map_even(clp_sched *s, int nlayers)
{
	int at = 0;

	if (nlayers < s->nstages)
		return clp_error(CLP_ERR_INVALID, "stage map: %d layers cannot fill %d stages",
				 nlayers, s->nstages);
	s->nlayers = nlayers;
	for (int i = 0; i < s->nstages; i++) {
		clp_stage_info *st = &s->stages[i];

		st->first_layer = at;
		st->nlayers = clp_even_layers(nlayers, s->nstages, i);
		st->embed = i == 0;
		st->head = i == s->nstages - 1;
		at += st->nlayers;
	}
	return CLP_OK;
}

clp_status clp_sched_create(clp_sched **out, int nranks, int nstages, int nmb, int nlayers)
{
	clp_sched *s;

	*out = NULL;
	if (nranks < 1 || nstages < 1 || nmb < 1)
		return clp_error(CLP_ERR_INVALID, "schedule: need at least one rank, stage and "
				 "micro-batch (got %d, %d, %d)", nranks, nstages, nmb);
	s = calloc(1, sizeof(*s));
	if (!s)
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	snprintf(s->name, sizeof(s->name), "custom");
	s->nranks = nranks;
	s->nstages = nstages;
	s->nmb = nmb;
	s->npipes = 1;
	s->nchunks = 1;
	s->nreplicas = 1;
	s->nsteps = 1;
	s->stages = calloc((size_t)nstages, sizeof(*s->stages));
	s->ranks = calloc((size_t)nranks, sizeof(*s->ranks));
	if (!s->stages || !s->ranks) {
		clp_sched_free(s);
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	}
	if (clp_sched_stage_map_even(s, nlayers > 0 ? nlayers : nstages) != CLP_OK) {
		clp_sched_free(s);
		return CLP_ERR_INVALID;
	}
	*out = s;
	return CLP_OK;
}

void clp_sched_free(clp_sched *s)
{
	if (!s)
		return;
	for (int r = 0; s->ranks && r < s->nranks; r++)
		free(s->ranks[r].ops);
	for (int g = 0; g < s->ngroups; g++)
		free(s->groups[g].ranks);
	free(s->groups);
	free(s->ranks);
	free(s->stages);
	free(s->path_start);
	free(s->path_stages);
	free(s);
}

clp_status clp_sched_push(clp_sched *s, int rank, const clp_op *op)
{
	clp_rank_prog *p;

	if (rank < 0 || rank >= s->nranks)
		return clp_error(CLP_ERR_INVALID, "schedule: rank %d out of range [0, %d)", rank,
				 s->nranks);
	p = &s->ranks[rank];
	if (p->nops == p->cap) {
		int cap = p->cap ? p->cap * 2 : 64;
		clp_op *ops = realloc(p->ops, (size_t)cap * sizeof(*ops));

		if (!ops)
			return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory (rank %d, "
					 "%d ops)", rank, p->nops);
		p->ops = ops;
		p->cap = cap;
	}
	p->ops[p->nops++] = *op;
	return CLP_OK;
}

clp_status clp_sched_group(clp_sched *s, const int *ranks, int n, int *index)
{
	clp_group *g;

	for (int i = 0; i < s->ngroups; i++)
		if (s->groups[i].n == n && !memcmp(s->groups[i].ranks, ranks, (size_t)n * sizeof(int))) {
			*index = i;
			return CLP_OK;
		}
	for (int i = 0; i < n; i++)
		if (ranks[i] < 0 || ranks[i] >= s->nranks)
			return clp_error(CLP_ERR_INVALID, "schedule: group member %d out of range "
					 "[0, %d)", ranks[i], s->nranks);
	g = realloc(s->groups, (size_t)(s->ngroups + 1) * sizeof(*g));
	if (!g)
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	s->groups = g;
	g = &s->groups[s->ngroups];
	g->ranks = malloc((size_t)n * sizeof(int));
	if (!g->ranks)
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	memcpy(g->ranks, ranks, (size_t)n * sizeof(int));
	g->n = n;
	*index = s->ngroups++;
	return CLP_OK;
}

int clp_sched_path(const clp_sched *s, int mb, const int **stages)
{
	if (!s->path_start) {
		*stages = NULL;
		return s->nstages;
	}
	*stages = s->path_stages + s->path_start[mb];
	return s->path_start[mb + 1] - s->path_start[mb];
}

void clp_sched_neighbours(const clp_sched *s, int mb, int stage, int *prev, int *next)
{
	const int *path;
	int n = clp_sched_path(s, mb >= 0 && mb < s->nmb ? mb : 0, &path);

	*prev = *next = -1;
	if (!path) {
		if (stage >= 0 && stage < n) {
			*prev = stage - 1;
			*next = stage + 1 < n ? stage + 1 : -1;
		}
		return;
	}
	for (int i = 0; i < n; i++)
		if (path[i] == stage) {
			*prev = i > 0 ? path[i - 1] : -1;
			*next = i + 1 < n ? path[i + 1] : -1;
			return;
		}
}

clp_status clp_sched_set_paths(clp_sched *s, const int *start, const int *stages)
{
	int total = start[s->nmb];
	int *st = malloc((size_t)(s->nmb + 1) * sizeof(int));
	int *sg = malloc((size_t)(total > 0 ? total : 1) * sizeof(int));

	if (!st || !sg) {
		free(st);
		free(sg);
		return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
	}
	memcpy(st, start, (size_t)(s->nmb + 1) * sizeof(int));
	memcpy(sg, stages, (size_t)total * sizeof(int));
	free(s->path_start);
	free(s->path_stages);
	s->path_start = st;
	s->path_stages = sg;
	return CLP_OK;
}

clp_status clp_sched_repeat(clp_sched *s, int k)
{
	if (k < 1 || s->nsteps * k > 65535)
		return clp_error(CLP_ERR_INVALID, "schedule: cannot repeat %d steps %d times",
				 s->nsteps, k);
	for (int r = 0; r < s->nranks; r++) {
		clp_rank_prog *p = &s->ranks[r];
		clp_op *ops;
		int n = p->nops;

		if (n == 0)
			continue;
		ops = realloc(p->ops, (size_t)n * (size_t)k * sizeof(*ops));
		if (!ops)
			return clp_error(CLP_ERR_NOMEM, "schedule: out of host memory");
		for (int c = 1; c < k; c++)
			for (int i = 0; i < n; i++) {
				ops[c * n + i] = ops[i];
				ops[c * n + i].step = (uint16_t)(ops[i].step + c * s->nsteps);
			}
		p->ops = ops;
		p->nops = p->cap = n * k;
	}
	s->nsteps *= k;
	return CLP_OK;
}

int64_t clp_sched_nops(const clp_sched *s)
{
	int64_t n = 0;

	for (int r = 0; r < s->nranks; r++)
		n += s->ranks[r].nops;
	return n;
}

void clp_op_describe(const clp_op *op, char *buf, size_t n)
{
	int k = op->kind;
	int len = snprintf(buf, n, "%s", clp_op_kind_name(k));

	if (len < 0 || (size_t)len >= n)
		return;
	if (clp_op_is_collective(k))
		len += snprintf(buf + len, n - (size_t)len, " %s", clp_red_what_name(op->what));
	if (op->stage >= 0 && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " stage %d", op->stage);
	if (op->pipe && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " pipe %d", op->pipe);
	if (op->layer >= 0 && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " layer %d", op->layer);
	if (k == CLP_OP_KFAC_INV && op->factor && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " factor %d", op->factor - 1);
	if (op->mb >= 0 && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " mb %d", op->mb);
	if (op->step && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " step %d", op->step);
	if (clp_op_is_p2p(k) && (size_t)len < n)
		len += snprintf(buf + len, n - (size_t)len, " %s rank %d tag %d",
				clp_op_is_send(k) ? "to" : "from", op->peer, op->tag);
	if (clp_op_is_collective(k) && (size_t)len < n)
		snprintf(buf + len, n - (size_t)len, " group %d", op->group);
}
