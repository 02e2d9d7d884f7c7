/* Cross-references of a schedule (see index.h). Sends and receives are paired by sorting both on
 * (source, destination, tag) with a stable radix sort, which keeps list order within a key; the
 * whole index is O(ops) so the simulator stays fast at 10^6 ranks x micro-batches. */
#include "engine/sched/index.h"

#include <stdlib.h>
#include <string.h>

typedef struct keyed {
	uint64_t key;
	int64_t idx;
} keyed;

/* Stable LSD radix sort on key, 8 bits a pass; passes whose digit is constant are skipped. */
static clp_status radix_sort(keyed *a, size_t n)
{
	keyed *tmp;
	uint64_t all_or = 0, all_and = ~(uint64_t)0;

	for (size_t i = 0; i < n; i++) {
		all_or |= a[i].key;
		all_and &= a[i].key;
	}
	if (n < 2)
		return CLP_OK;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		return clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
	for (int shift = 0; shift < 64; shift += 8) {
		size_t count[257] = {0};

		if ((((all_or ^ all_and) >> shift) & 0xff) == 0)
			continue;
		for (size_t i = 0; i < n; i++)
			count[((a[i].key >> shift) & 0xff) + 1]++;
		for (int d = 0; d < 256; d++)
			count[d + 1] += count[d];
		for (size_t i = 0; i < n; i++)
			tmp[count[(a[i].key >> shift) & 0xff]++] = a[i];
		memcpy(a, tmp, n * sizeof(*a));
	}
	free(tmp);
	return CLP_OK;
}

int clp_sched_index_rank(const clp_sched_index *ix, int64_t g)
{
	int lo = 0, hi = ix->nranks - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;

		if (ix->off[mid] <= g)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static clp_status match_p2p(const clp_sched *s, clp_sched_index *ix)
{
	keyed *snd = malloc((size_t)ix->nops * sizeof(*snd) + 1);
	keyed *rcv = malloc((size_t)ix->nops * sizeof(*rcv) + 1);
	size_t ns = 0, nr = 0, i = 0, j = 0;
	uint64_t nr64 = (uint64_t)s->nranks;
	clp_status st = CLP_OK;

	if (!snd || !rcv) {
		st = clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
		goto out_free;
	}
	for (int r = 0; r < s->nranks; r++)
		for (int k = 0; k < s->ranks[r].nops; k++) {
			const clp_op *op = &s->ranks[r].ops[k];
			int64_t g = ix->off[r] + k;
			uint64_t src, dst;

			if (!clp_op_is_p2p(op->kind) || op->peer < 0 || op->peer >= s->nranks ||
			    op->tag < 0 || op->tag >= CLP_TAG_LIMIT)
				continue;
			src = clp_op_is_send(op->kind) ? (uint64_t)r : (uint64_t)op->peer;
			dst = clp_op_is_send(op->kind) ? (uint64_t)op->peer : (uint64_t)r;
			if (clp_op_is_send(op->kind))
				snd[ns++] = (keyed){(src * nr64 + dst) * CLP_TAG_LIMIT + (uint64_t)op->tag, g};
			else
				rcv[nr++] = (keyed){(src * nr64 + dst) * CLP_TAG_LIMIT + (uint64_t)op->tag, g};
		}
	st = radix_sort(snd, ns);
	if (st == CLP_OK)
		st = radix_sort(rcv, nr);
	while (st == CLP_OK && i < ns && j < nr) {
		if (snd[i].key < rcv[j].key) {
			i++;
		} else if (snd[i].key > rcv[j].key) {
			j++;
		} else {
			ix->match[snd[i].idx] = rcv[j].idx;
			ix->match[rcv[j].idx] = snd[i].idx;
			i++;
			j++;
		}
	}
out_free:
	free(snd);
	free(rcv);
	return st;
}

/* Classes of the ops an op may depend on, on its own rank. */
enum { K_RECV_ACT, K_RECV_GRAD, K_FWD, K_BWD, K_BWD_W };

/* Key of (class, stage, pipe, mb, step): 3 + 20 + 2 + 22 + 16 bits, unique within the
 * generators' limits (10^6 stages and micro-batches). */
static uint64_t local_key(int cls, int stage, const clp_op *op)
{
	return (uint64_t)cls | (uint64_t)((uint32_t)stage & 0xfffff) << 3 |
	       (uint64_t)(op->pipe & 3) << 23 | (uint64_t)((uint32_t)op->mb & 0x3fffff) << 25 |
	       (uint64_t)op->step << 47;
}

static int class_of(int kind)
{
	switch (kind) {
	case CLP_OP_RECV_ACT: return K_RECV_ACT;
	case CLP_OP_RECV_GRAD: return K_RECV_GRAD;
	case CLP_OP_FWD: return K_FWD;
	case CLP_OP_BWD:
	case CLP_OP_BWD_B: return K_BWD;
	case CLP_OP_BWD_W: return K_BWD_W;
	}
	return -1;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* A rank's ops by key (open addressing, reused across ranks). */
typedef struct table {
	uint64_t *keys;
	int64_t *vals;
	size_t cap, mask;
} table;

static int64_t table_find(const table *t, uint64_t key)
{
	size_t h;

	for (h = mix(key) & t->mask; t->vals[h] >= 0 && t->keys[h] != key; h = (h + 1) & t->mask)
		;
	return t->vals[h];
}

static void table_put(table *t, uint64_t key, int64_t val)
{
	size_t h;

	for (h = mix(key) & t->mask; t->vals[h] >= 0 && t->keys[h] != key; h = (h + 1) & t->mask)
		;
	if (t->vals[h] < 0) { /* a duplicate keeps the first; the validator reports it */
		t->keys[h] = key;
		t->vals[h] = val;
	}
}

static clp_status table_reset(table *t, size_t n)
{
	size_t need = 16;

	while (need < 2 * n)
		need *= 2;
	if (need > t->cap) {
		free(t->keys);
		free(t->vals);
		t->keys = malloc(need * sizeof(*t->keys));
		t->vals = malloc(need * sizeof(*t->vals));
		t->cap = need;
		if (!t->keys || !t->vals)
			return clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
	}
	t->mask = need - 1;
	for (size_t h = 0; h < need; h++)
		t->vals[h] = -1;
	return CLP_OK;
}

/* input: where an op's data comes from (its receive, or the op on this rank that makes it);
 * dep: the op on this rank it must follow (BWD after its FWD, W after its B, K-FAC factors
 * after the pass that records them). */
static void link_op(const clp_sched *s, const table *t, const clp_op *op, int64_t *input,
		    int64_t *dep)
{
	int prev, next;
	int64_t x;

	switch (op->kind) {
	case CLP_OP_FWD:
		x = table_find(t, local_key(K_RECV_ACT, op->stage, op));
		if (x < 0) {
			clp_sched_neighbours(s, op->mb, op->stage, &prev, &next);
			x = prev >= 0 ? table_find(t, local_key(K_FWD, prev, op)) : -1;
		}
		*input = x;
		break;
	case CLP_OP_BWD:
	case CLP_OP_BWD_B:
		x = table_find(t, local_key(K_RECV_GRAD, op->stage, op));
		if (x < 0) {
			clp_sched_neighbours(s, op->mb, op->stage, &prev, &next);
			x = next >= 0 ? table_find(t, local_key(K_BWD, next, op)) : -1;
		}
		*input = x;
		*dep = table_find(t, local_key(K_FWD, op->stage, op));
		break;
	case CLP_OP_BWD_W:
	case CLP_OP_KFAC_CURV_B:
	case CLP_OP_SEND_GRAD:
		x = table_find(t, local_key(K_BWD, op->stage, op));
		*(op->kind == CLP_OP_SEND_GRAD ? input : dep) = x;
		break;
	case CLP_OP_KFAC_CURV_A:
	case CLP_OP_SEND_ACT:
		x = table_find(t, local_key(K_FWD, op->stage, op));
		*(op->kind == CLP_OP_SEND_ACT ? input : dep) = x;
		break;
	}
}

static clp_status link_local(const clp_sched *s, clp_sched_index *ix)
{
	table t = {0};
	clp_status st = CLP_OK;

	for (int r = 0; r < s->nranks && st == CLP_OK; r++) {
		const clp_rank_prog *p = &s->ranks[r];

		st = table_reset(&t, (size_t)p->nops);
		for (int k = 0; k < p->nops && st == CLP_OK; k++) {
			int cls = class_of(p->ops[k].kind);

			if (cls >= 0)
				table_put(&t, local_key(cls, p->ops[k].stage, &p->ops[k]), ix->off[r] + k);
		}
		for (int k = 0; k < p->nops && st == CLP_OK; k++)
			link_op(s, &t, &p->ops[k], &ix->input[ix->off[r] + k], &ix->dep[ix->off[r] + k]);
	}
	free(t.keys);
	free(t.vals);
	return st;
}

/* The k-th collective of group g on any rank joins instance base[g] + k. */
static clp_status number_collectives(const clp_sched *s, clp_sched_index *ix)
{
	int64_t *base = calloc((size_t)s->ngroups + 1, sizeof(*base));
	int64_t *seen = calloc((size_t)s->ngroups + 1, sizeof(*seen));
	int64_t *count = calloc((size_t)s->ngroups + 1, sizeof(*count));
	clp_status st = CLP_OK;

	if (!base || !seen || !count) {
		st = clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
		goto out_free;
	}
	for (int r = 0; r < s->nranks; r++) {
		memset(seen, 0, (size_t)s->ngroups * sizeof(*seen));
		for (int k = 0; k < s->ranks[r].nops; k++) {
			const clp_op *op = &s->ranks[r].ops[k];

			if (clp_op_is_collective(op->kind) && op->group >= 0 &&
			    op->group < s->ngroups && ++seen[op->group] > count[op->group])
				count[op->group] = seen[op->group];
		}
	}
	for (int g = 0; g < s->ngroups; g++)
		base[g + 1] = base[g] + count[g];
	ix->ninst = base[s->ngroups];
	ix->inst_group = malloc((size_t)ix->ninst * sizeof(int32_t) + 1);
	ix->inst_seq = malloc((size_t)ix->ninst * sizeof(int32_t) + 1);
	if (!ix->inst_group || !ix->inst_seq) {
		st = clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
		goto out_free;
	}
	for (int g = 0; g < s->ngroups; g++)
		for (int64_t k = 0; k < count[g]; k++) {
			ix->inst_group[base[g] + k] = g;
			ix->inst_seq[base[g] + k] = (int32_t)k;
		}
	for (int r = 0; r < s->nranks; r++) {
		memset(seen, 0, (size_t)s->ngroups * sizeof(*seen));
		for (int k = 0; k < s->ranks[r].nops; k++) {
			const clp_op *op = &s->ranks[r].ops[k];

			if (clp_op_is_collective(op->kind) && op->group >= 0 && op->group < s->ngroups)
				ix->coll[ix->off[r] + k] = base[op->group] + seen[op->group]++;
		}
	}
out_free:
	free(base);
	free(seen);
	free(count);
	return st;
}

clp_status clp_sched_index_build(const clp_sched *s, clp_sched_index *ix)
{
	clp_status st;

	memset(ix, 0, sizeof(*ix));
	ix->nranks = s->nranks;
	ix->off = malloc(((size_t)s->nranks + 1) * sizeof(*ix->off));
	if (!ix->off)
		return clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
	ix->off[0] = 0;
	for (int r = 0; r < s->nranks; r++)
		ix->off[r + 1] = ix->off[r] + s->ranks[r].nops;
	ix->nops = ix->off[s->nranks];
	ix->match = malloc((size_t)ix->nops * sizeof(int64_t) + 1);
	ix->input = malloc((size_t)ix->nops * sizeof(int64_t) + 1);
	ix->dep = malloc((size_t)ix->nops * sizeof(int64_t) + 1);
	ix->coll = malloc((size_t)ix->nops * sizeof(int64_t) + 1);
	if (!ix->match || !ix->input || !ix->dep || !ix->coll) {
		clp_sched_index_free(ix);
		return clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory (%lld ops)",
				 (long long)ix->nops);
	}
	for (int64_t g = 0; g < ix->nops; g++)
		ix->match[g] = ix->input[g] = ix->dep[g] = ix->coll[g] = -1;
	st = match_p2p(s, ix);
	if (st == CLP_OK)
		st = link_local(s, ix);
	if (st == CLP_OK)
		st = number_collectives(s, ix);
	if (st != CLP_OK)
		clp_sched_index_free(ix);
	return st;
}

void clp_sched_index_free(clp_sched_index *ix)
{
	free(ix->off);
	free(ix->match);
	free(ix->input);
	free(ix->dep);
	free(ix->coll);
	free(ix->inst_group);
	free(ix->inst_seq);
	memset(ix, 0, sizeof(*ix));
}
