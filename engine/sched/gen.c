/* Schedule generators (see gen.h and docs/SCHEDULES.md): the order of compute items on each rank
 * of one replica and the placement of stages; clp_sched_lower() does the rest. */
#include "engine/sched/gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CLP_SCHED_KIND_COUNT] = {
	"gpipe", "1f1b", "interleaved", "chimera", "chimera-fd", "zbh1",
};

const char *clp_sched_kind_name(int kind)
{
	return kind >= 0 && kind < CLP_SCHED_KIND_COUNT ? kind_names[kind] : "?";
}

int clp_sched_kind_parse(const char *name)
{
	for (int k = 0; k < CLP_SCHED_KIND_COUNT; k++)
		if (!strcmp(name, kind_names[k]))
			return k;
	return -1;
}

const char *clp_sched_kind_list(void)
{
	return "gpipe|1f1b|interleaved|chimera|chimera-fd|zbh1";
}

void clp_gen_opts_default(clp_gen_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->kind = CLP_SCHED_1F1B;
	o->depth = 4;
	o->microbatches = 8;
	o->chunks = 1;
	o->replicas = 1;
	o->prefetch = 1;
	o->opt_step = 1;
}

/* A growing list of compute items. */
typedef struct order {
	clp_work *w;
	int n, cap;
} order;

static clp_status put(order *o, int kind, int stage, int pipe, int chunk, int mb)
{
	if (o->n == o->cap) {
		int cap = o->cap ? o->cap * 2 : 32;
		clp_work *w = realloc(o->w, (size_t)cap * sizeof(*w));

		if (!w)
			return clp_error(CLP_ERR_NOMEM, "schedule generator: out of host memory");
		o->w = w;
		o->cap = cap;
	}
	o->w[o->n++] = (clp_work){(uint8_t)kind, (uint8_t)pipe, (uint16_t)chunk, stage, mb};
	return CLP_OK;
}

/* GPipe: all forwards, then all backwards, both in micro-batch order. */
static clp_status order_gpipe(order *o, int d, int n)
{
	for (int m = 0; m < n; m++)
		CLP_TRY(put(o, CLP_OP_FWD, d, 0, 0, m));
	for (int m = 0; m < n; m++)
		CLP_TRY(put(o, CLP_OP_BWD, d, 0, 0, m));
	return CLP_OK;
}

/* 1F1B: D - 1 - d warm-up forwards, then one forward and one backward in turn, then the rest of
 * the backwards. bwd is BWD, or BWD_B for ZB-H1 (whose W items are added by order_zbh1). */
static clp_status order_1f1b(order *o, int d, int depth, int n, int bwd)
{
	int warm = depth - 1 - d < n ? depth - 1 - d : n, f = 0, b = 0;

	while (f < warm)
		CLP_TRY(put(o, CLP_OP_FWD, d, 0, 0, f++));
	while (f < n) {
		CLP_TRY(put(o, CLP_OP_FWD, d, 0, 0, f++));
		CLP_TRY(put(o, bwd, d, 0, 0, b++));
	}
	while (b < n)
		CLP_TRY(put(o, bwd, d, 0, 0, b++));
	return CLP_OK;
}

/* ZB-H1: 1F1B with B and W split; on rank d, W of micro-batch m follows B of m + d, the last d
 * W items close the step. W then fills the cool-down bubble while no rank holds more than D
 * micro-batches of activations, the most 1F1B holds (on its first rank). W stays in micro-batch
 * order per stage, so gradients accumulate in the single-device order. */
static clp_status order_zbh1(order *o, int d, int depth, int n)
{
	order tmp = {0};
	int w = 0;
	clp_status st = order_1f1b(&tmp, d, depth, n, CLP_OP_BWD_B);

	for (int i = 0; i < tmp.n && st == CLP_OK; i++) {
		st = put(o, tmp.w[i].kind, d, 0, 0, tmp.w[i].mb);
		if (st == CLP_OK && tmp.w[i].kind == CLP_OP_BWD_B && tmp.w[i].mb - d >= 0)
			st = put(o, CLP_OP_BWD_W, d, 0, 0, w++);
	}
	while (st == CLP_OK && w < n)
		st = put(o, CLP_OP_BWD_W, d, 0, 0, w++);
	free(tmp.w);
	return st;
}

/* Interleaved 1F1B (Megatron-LM): rank d holds stages d, d + D, ...; micro-batches go through
 * the chunks in groups of D. Item k of the forward sequence is chunk (k / D) % v of micro-batch
 * (k / (D v)) D + k % D; backwards walk the chunks in reverse. */
static void inter_item(int k, int depth, int v, int fwd, int *chunk, int *mb)
{
	int g = k % (depth * v);

	*chunk = fwd ? g / depth : v - 1 - g / depth;
	*mb = k / (depth * v) * depth + g % depth;
}

static clp_status order_interleaved(order *o, int d, int depth, int n, int v)
{
	int total = n * v, f = 0, b = 0, c, m;
	int warm = n == depth ? total : (depth - d - 1) * 2 + (v - 1) * depth;

	if (warm > total)
		warm = total;
	for (; f < warm; f++) {
		inter_item(f, depth, v, 1, &c, &m);
		CLP_TRY(put(o, CLP_OP_FWD, c * depth + d, 0, c, m));
	}
	for (; f < total; f++, b++) {
		inter_item(f, depth, v, 1, &c, &m);
		CLP_TRY(put(o, CLP_OP_FWD, c * depth + d, 0, c, m));
		inter_item(b, depth, v, 0, &c, &m);
		CLP_TRY(put(o, CLP_OP_BWD, c * depth + d, 0, c, m));
	}
	for (; b < total; b++) {
		inter_item(b, depth, v, 0, &c, &m);
		CLP_TRY(put(o, CLP_OP_BWD, c * depth + d, 0, c, m));
	}
	return CLP_OK;
}

/* Chimera. Rank d holds stage d of the down pipeline (0) and stage D-1-d of the up pipeline (1).
 * One basic unit has D micro-batches, D/2 per pipeline; units are concatenated directly, the
 * backwards of one unit interleaving with the forwards of the next (the order of the PipeFisher
 * release of Chimera). Each pipeline's micro-batches run F and B in order. Forward doubling runs
 * every item twice in a row, on two micro-batches (units of 2D). */
typedef struct chim {
	order *o;
	int d, depth, per_unit, twice;
	int next[2][2]; /* next local index per [pipe][0 = F, 1 = B] */
} chim;

static clp_status chim_item(chim *c, int kind, int rel_pipe)
{
	int pipe = c->d < c->depth / 2 ? rel_pipe : 1 - rel_pipe;
	int stage = pipe == 0 ? c->d : c->depth - 1 - c->d;
	int *next = &c->next[pipe][kind != CLP_OP_FWD];

	for (int t = 0; t <= c->twice; t++, (*next)++) {
		int j = *next, h = c->per_unit;
		int mb = j / h * 2 * h + pipe * h + j % h;

		CLP_TRY(put(c->o, kind, stage, pipe, 0, mb));
	}
	return CLP_OK;
}

static clp_status order_chimera(order *o, int d, int depth, int n, int twice)
{
	int half = depth / 2, a = half - d, b, units = n / (depth * (twice + 1));
	chim c = {o, d, depth, half * (twice + 1), twice, {{0}}};

	if (a <= 0)
		a = 1 - a;
	b = half - a;
	for (int u = 0; u < units; u++) {
		for (int i = 0; i < a; i++) {
			if (u > 0)
				CLP_TRY(chim_item(&c, CLP_OP_BWD, 0));
			CLP_TRY(chim_item(&c, CLP_OP_FWD, 0));
		}
		for (int i = 0; i < b; i++) {
			CLP_TRY(chim_item(&c, CLP_OP_FWD, 1));
			CLP_TRY(chim_item(&c, CLP_OP_FWD, 0));
		}
		for (int i = 0; i < a; i++) {
			CLP_TRY(chim_item(&c, CLP_OP_FWD, 1));
			CLP_TRY(chim_item(&c, CLP_OP_BWD, 1));
		}
		for (int i = 0; i < b; i++) {
			CLP_TRY(chim_item(&c, CLP_OP_BWD, 0));
			CLP_TRY(chim_item(&c, CLP_OP_BWD, 1));
		}
	}
	for (int i = 0; i < a; i++)
		CLP_TRY(chim_item(&c, CLP_OP_BWD, 0));
	return CLP_OK;
}

static clp_status check_opts(const clp_gen_opts *o)
{
	const char *name = clp_sched_kind_name(o->kind);
	int d = o->depth, n = o->microbatches;

	if (o->kind < 0 || o->kind >= CLP_SCHED_KIND_COUNT)
		return clp_error(CLP_ERR_INVALID, "schedule: unknown kind %d (expected %s)",
				 o->kind, clp_sched_kind_list());
	if (d < 1 || n < 1 || o->replicas < 1 || o->chunks < 1 || o->prefetch < 0)
		return clp_error(CLP_ERR_INVALID, "%s: stages (%d), microbatches (%d), replicas (%d) "
				 "and chunks (%d) must be >= 1, prefetch (%d) >= 0", name, d, n,
				 o->replicas, o->chunks, o->prefetch);
	if (n > 1000000 || (int64_t)d * o->replicas * o->chunks > 1000000)
		return clp_error(CLP_ERR_INVALID, "%s: %d ranks x %d chunks x %d micro-batches is "
				 "past the limits (10^6 each)", name, d * o->replicas, o->chunks, n);
	if (o->chunks > 1 && o->kind != CLP_SCHED_INTERLEAVED)
		return clp_error(CLP_ERR_INVALID, "%s: chunks = %d needs the interleaved schedule",
				 name, o->chunks);
	if (o->kind == CLP_SCHED_INTERLEAVED && o->chunks > 1 && n % d)
		return clp_error(CLP_ERR_INVALID, "interleaved: microbatches (%d) must be a multiple "
				 "of stages (%d)", n, d);
	if (o->kind == CLP_SCHED_CHIMERA || o->kind == CLP_SCHED_CHIMERA_FD) {
		int unit = o->kind == CLP_SCHED_CHIMERA ? d : 2 * d;

		if (d % 2)
			return clp_error(CLP_ERR_INVALID, "%s: stages (%d) must be even", name, d);
		if (n % unit)
			return clp_error(CLP_ERR_INVALID, "%s: microbatches (%d) must be a multiple "
					 "of %d (%s)", name, n, unit,
					 unit == d ? "stages" : "2 x stages");
	}
	return CLP_OK;
}

static clp_status build_order(order *o, const clp_gen_opts *g, int d)
{
	int depth = g->depth, n = g->microbatches;

	switch (g->kind) {
	case CLP_SCHED_GPIPE: return order_gpipe(o, d, n);
	case CLP_SCHED_1F1B: return order_1f1b(o, d, depth, n, CLP_OP_BWD);
	case CLP_SCHED_INTERLEAVED: return order_interleaved(o, d, depth, n, g->chunks);
	case CLP_SCHED_CHIMERA: return order_chimera(o, d, depth, n, 0);
	case CLP_SCHED_CHIMERA_FD: return order_chimera(o, d, depth, n, 1);
	case CLP_SCHED_ZBH1: return order_zbh1(o, d, depth, n);
	}
	return clp_error(CLP_ERR_INVALID, "schedule: unknown kind %d", g->kind);
}

static void place(clp_sched *s, const clp_gen_opts *g, int *rank_of, int *chunk_of)
{
	int depth = g->depth;

	for (int rep = 0; rep < g->replicas; rep++)
		for (int p = 0; p < s->npipes; p++)
			for (int st = 0; st < s->nstages; st++) {
				int pos = p == 0 ? st % depth : depth - 1 - st;

				rank_of[((size_t)rep * (size_t)s->npipes + (size_t)p) *
						(size_t)s->nstages + (size_t)st] = rep * depth + pos;
				chunk_of[p * s->nstages + st] = st / depth;
			}
}

clp_status clp_sched_generate(clp_sched **out, const clp_gen_opts *g)
{
	int depth = g->depth, nranks, nstages, npipes;
	clp_sched *s = NULL;
	order *orders = NULL;
	clp_work **all = NULL;
	int *lens = NULL, *rank_of = NULL, *chunk_of = NULL;
	clp_status st;

	*out = NULL;
	CLP_TRY(check_opts(g));
	nranks = depth * g->replicas;
	nstages = depth * g->chunks;
	npipes = g->kind == CLP_SCHED_CHIMERA || g->kind == CLP_SCHED_CHIMERA_FD ? 2 : 1;
	CLP_TRY(clp_sched_create(&s, nranks, nstages, g->microbatches,
				 g->layers > 0 ? g->layers : nstages));
	snprintf(s->name, sizeof(s->name), "%s", clp_sched_kind_name(g->kind));
	s->npipes = npipes;
	s->nchunks = g->chunks;
	s->nreplicas = g->replicas;
	for (int r = 0; r < nranks; r++)
		s->ranks[r].replica = r / depth;
	orders = calloc((size_t)depth, sizeof(*orders));
	all = calloc((size_t)nranks, sizeof(*all));
	lens = calloc((size_t)nranks, sizeof(*lens));
	rank_of = malloc((size_t)g->replicas * (size_t)npipes * (size_t)nstages * sizeof(int));
	chunk_of = malloc((size_t)npipes * (size_t)nstages * sizeof(int));
	if (!orders || !all || !lens || !rank_of || !chunk_of) {
		st = clp_error(CLP_ERR_NOMEM, "schedule generator: out of host memory");
		goto out_free;
	}
	for (int d = 0; d < depth; d++) {
		st = build_order(&orders[d], g, d);
		if (st != CLP_OK)
			goto out_free;
	}
	for (int r = 0; r < nranks; r++) {
		all[r] = orders[r % depth].w;
		lens[r] = orders[r % depth].n;
	}
	place(s, g, rank_of, chunk_of);
	st = clp_sched_lower(s, all, lens, &(clp_placement){rank_of, chunk_of}, g);
out_free:
	for (int d = 0; orders && d < depth; d++)
		free(orders[d].w);
	free(orders);
	free(all);
	free(lens);
	free(rank_of);
	free(chunk_of);
	if (st != CLP_OK)
		clp_sched_free(s);
	else
		*out = s;
	return st;
}
