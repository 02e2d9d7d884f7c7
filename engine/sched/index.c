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

/* Key of the data an op consumes or a receive delivers: (class, stage, pipe, mb, step). */
static uint64_t data_key(int cls, const clp_op *op)
{
	return (uint64_t)cls | (uint64_t)(op->pipe & 1) << 1 | (uint64_t)(op->step & 0xfff) << 2 |
	       (uint64_t)((uint32_t)op->stage & 0xffffff) << 14 |
	       (uint64_t)((uint32_t)op->mb & 0xffffff) << 38;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* For every FWD/BWD/BWD_B, the receive on its rank delivering its input (a hash table of the
 * rank's receives, reused across ranks). */
static clp_status link_inputs(const clp_sched *s, clp_sched_index *ix)
{
	size_t cap = 0;
	uint64_t *keys = NULL;
	int64_t *vals = NULL;
	clp_status st = CLP_OK;

	for (int r = 0; r < s->nranks && st == CLP_OK; r++) {
		const clp_rank_prog *p = &s->ranks[r];
		size_t need = 16, mask;

		while (need < 2 * (size_t)p->nops)
			need *= 2;
		if (need > cap) {
			free(keys);
			free(vals);
			keys = malloc(need * sizeof(*keys));
			vals = malloc(need * sizeof(*vals));
			cap = need;
			if (!keys || !vals) {
				st = clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory");
				break;
			}
		}
		mask = need - 1;
		for (size_t h = 0; h < need; h++)
			vals[h] = -1;
		for (int k = 0; k < p->nops; k++) {
			const clp_op *op = &p->ops[k];
			uint64_t key;
			size_t h;

			if (!clp_op_is_recv(op->kind))
				continue;
			key = data_key(op->kind == CLP_OP_RECV_GRAD, op);
			for (h = mix(key) & mask; vals[h] >= 0 && keys[h] != key; h = (h + 1) & mask)
				;
			if (vals[h] < 0) { /* a duplicate keeps the first; the validator reports it */
				keys[h] = key;
				vals[h] = ix->off[r] + k;
			}
		}
		for (int k = 0; k < p->nops; k++) {
			const clp_op *op = &p->ops[k];
			uint64_t key;
			size_t h;

			if (op->kind != CLP_OP_FWD && !clp_op_is_bwd_input(op->kind))
				continue;
			key = data_key(op->kind != CLP_OP_FWD, op);
			for (h = mix(key) & mask; vals[h] >= 0 && keys[h] != key; h = (h + 1) & mask)
				;
			ix->input[ix->off[r] + k] = vals[h];
		}
	}
	free(keys);
	free(vals);
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
	ix->coll = malloc((size_t)ix->nops * sizeof(int64_t) + 1);
	if (!ix->match || !ix->input || !ix->coll) {
		clp_sched_index_free(ix);
		return clp_error(CLP_ERR_NOMEM, "schedule index: out of host memory (%lld ops)",
				 (long long)ix->nops);
	}
	for (int64_t g = 0; g < ix->nops; g++)
		ix->match[g] = ix->input[g] = ix->coll[g] = -1;
	st = match_p2p(s, ix);
	if (st == CLP_OK)
		st = link_inputs(s, ix);
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
	free(ix->coll);
	free(ix->inst_group);
	free(ix->inst_seq);
	memset(ix, 0, sizeof(*ix));
}
