/* SkipPipe path sets: lifecycle and the rule validator (see skip.h and docs/SKIPPIPE.md). Each
 * rule is checked in one pass over the hops; messages name the micro-batch, its origin and the
 * rule with its parameter. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skip/skip_internal.h"

void clp_skip_rules_default(clp_skip_rules *r, int nstages)
{
	memset(r, 0, sizeof(*r));
	r->nstages = nstages;
	r->path_len = nstages;
	r->max_jump = 4;
	r->max_swaps = 2;
	r->balance = 1;
	r->deadlock_free = 1;
}

clp_status clp_skip_paths_create(clp_skip_paths **out, int nstages, int nnodes, int nmb)
{
	clp_skip_paths *p;

	*out = NULL;
	if (nstages < 1 || nnodes < 1 || nmb < 0)
		return clp_error(CLP_ERR_INVALID, "skip paths: need at least one stage and node "
				 "(got %d stages, %d nodes, %d micro-batches)", nstages, nnodes, nmb);
	p = calloc(1, sizeof(*p));
	if (!p)
		return clp_error(CLP_ERR_NOMEM, "skip paths: out of host memory");
	p->nstages = nstages;
	p->nnodes = nnodes;
	p->nmb = nmb;
	p->node_stage = calloc((size_t)nnodes, sizeof(int));
	p->node_prio = calloc((size_t)nnodes, 1);
	p->node_device = calloc((size_t)nnodes, sizeof(*p->node_device));
	p->origin = malloc(((size_t)nmb + 1) * sizeof(int));
	p->hop_start = calloc((size_t)nmb + 1, sizeof(int));
	if (!p->node_stage || !p->node_prio || !p->node_device || !p->origin || !p->hop_start) {
		clp_skip_paths_free(p);
		return clp_error(CLP_ERR_NOMEM, "skip paths: out of host memory");
	}
	for (int m = 0; m < nmb; m++)
		p->origin[m] = -1;
	*out = p;
	return CLP_OK;
}

void clp_skip_paths_free(clp_skip_paths *p)
{
	if (!p)
		return;
	free(p->node_stage);
	free(p->node_prio);
	free(p->node_device);
	free(p->origin);
	free(p->hop_start);
	free(p->hops);
	free(p);
}

clp_status clp_skip_paths_copy(const clp_skip_paths *p, clp_skip_paths **out)
{
	clp_skip_paths *q;
	int nh = p->hop_start[p->nmb];

	CLP_TRY(clp_skip_paths_create(&q, p->nstages, p->nnodes, p->nmb));
	q->hops = malloc(((size_t)nh + 1) * sizeof(*q->hops));
	if (!q->hops) {
		clp_skip_paths_free(q);
		return clp_error(CLP_ERR_NOMEM, "skip paths: out of host memory");
	}
	memcpy(q->file, p->file, sizeof(q->file));
	memcpy(q->node_stage, p->node_stage, (size_t)p->nnodes * sizeof(int));
	memcpy(q->node_prio, p->node_prio, (size_t)p->nnodes);
	memcpy(q->node_device, p->node_device, (size_t)p->nnodes * sizeof(*p->node_device));
	memcpy(q->origin, p->origin, (size_t)p->nmb * sizeof(int));
	memcpy(q->hop_start, p->hop_start, ((size_t)p->nmb + 1) * sizeof(int));
	if (nh)
		memcpy(q->hops, p->hops, (size_t)nh * sizeof(*q->hops));
	*out = q;
	return CLP_OK;
}

clp_status clp_skip_set_hops(clp_skip_paths *p, int mb, const clp_skip_hop *h, int n)
{
	int total = p->hop_start[p->nmb], old = p->hop_start[mb + 1] - p->hop_start[mb];
	int d = n - old;
	clp_skip_hop *hops = p->hops;

	if (mb < 0 || mb >= p->nmb || n < 0)
		return clp_error(CLP_ERR_INVALID, "skip paths: micro-batch %d out of range [0, %d)",
				 mb, p->nmb);
	if (d > 0 || !hops) {
		hops = realloc(p->hops, ((size_t)(total + d) + 1) * sizeof(*hops));
		if (!hops)
			return clp_error(CLP_ERR_NOMEM, "skip paths: out of host memory");
		p->hops = hops;
	}
	memmove(hops + p->hop_start[mb + 1] + d, hops + p->hop_start[mb + 1],
		(size_t)(total - p->hop_start[mb + 1]) * sizeof(*hops));
	if (n)
		memcpy(hops + p->hop_start[mb], h, (size_t)n * sizeof(*h));
	for (int m = mb + 1; m <= p->nmb; m++)
		p->hop_start[m] += d;
	return CLP_OK;
}

int clp_skip_mb_of_origin(const clp_skip_paths *p, int node)
{
	int n = 0;

	for (int m = 0; m < p->nmb; m++)
		n += p->origin[m] == node;
	return n;
}

clp_status clp_skip_set_origins(clp_skip_paths *p, int per_origin)
{
	int n0 = 0, k = 0, *orig;

	for (int i = 0; i < p->nnodes; i++)
		n0 += p->node_stage[i] == 0;
	if (n0 == 0 || per_origin < 1)
		return clp_error(CLP_ERR_INVALID, "skip paths: %s", n0 ? "need at least one "
				 "micro-batch per stage-0 node" : "no node serves stage 0");
	orig = realloc(p->origin, ((size_t)n0 * (size_t)per_origin + 1) * sizeof(int));
	if (!orig)
		return clp_error(CLP_ERR_NOMEM, "skip paths: out of host memory");
	p->origin = orig;
	free(p->hop_start);
	p->hop_start = calloc((size_t)n0 * (size_t)per_origin + 1, sizeof(int));
	if (!p->hop_start)
		return clp_error(CLP_ERR_NOMEM, "skip paths: out of host memory");
	p->nmb = n0 * per_origin;
	for (int r = 0; r < per_origin; r++)
		for (int i = 0; i < p->nnodes; i++)
			if (p->node_stage[i] == 0)
				p->origin[k++] = i;
	return CLP_OK;
}

/* "mb 7 (origin node 2): <message>" */
static clp_status mb_fail(const clp_skip_paths *p, int mb, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static clp_status mb_fail(const clp_skip_paths *p, int mb, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return clp_error(CLP_ERR_INVALID, "skip paths%s%s: mb %d (origin node %d): %s",
			 p->file[0] ? " " : "", p->file, mb, p->origin[mb], msg);
}

clp_status clp_skip_check_config(const clp_skip_rules *r, const clp_skip_paths *p)
{
	int S = r->nstages, P = r->path_len, *count;
	clp_status st = CLP_OK;

	if (S < 1 || P < 1 || P > S)
		return clp_error(CLP_ERR_INVALID, "skip rules: path length P = %d must be in [1, S = "
				 "%d]", P, S);
	if (r->max_jump < 1 || r->max_swaps < 0 || r->memory < 0)
		return clp_error(CLP_ERR_INVALID, "skip rules: max_jump J = %d must be >= 1, "
				 "max_swaps W = %d and memory M = %d >= 0", r->max_jump,
				 r->max_swaps, r->memory);
	if (p && p->nstages != S)
		return clp_error(CLP_ERR_INVALID, "skip paths: %d stages, the rules are for %d",
				 p->nstages, S);
	if (r->balance && S > 1 && P > 1 && (r->max_jump * (P - 1) < S - 1))
		return clp_error(CLP_ERR_INVALID, "skip rules: balance: stage %d cannot be reached "
				 "in P - 1 = %d hops of at most J = %d stages", S - 1, P - 1,
				 r->max_jump);
	if (!p)
		return CLP_OK;
	if (r->balance && S > 1 && ((int64_t)p->nmb * (P - 1)) % (S - 1))
		return clp_error(CLP_ERR_INVALID, "skip rules: balance: %d micro-batches x %d stages "
				 "each cannot be spread evenly over the %d stages after stage 0 "
				 "(N (P-1) / (S-1) = %d x %d / %d is not an integer)", p->nmb, P - 1,
				 S - 1, p->nmb, P - 1, S - 1);
	count = calloc((size_t)S, sizeof(int));
	if (!count)
		return clp_error(CLP_ERR_NOMEM, "skip rules: out of host memory");
	for (int i = 0; i < p->nnodes && st == CLP_OK; i++)
		if (p->node_stage[i] < 0 || p->node_stage[i] >= S)
			st = clp_error(CLP_ERR_INVALID, "skip paths: node %d serves stage %d, out of "
				       "range [0, %d)", i, p->node_stage[i], S);
		else
			count[p->node_stage[i]]++;
	for (int s = 0; s < S && st == CLP_OK; s++)
		if (!count[s] && (s == 0 || (r->balance && P > 1 && p->nmb > 0)))
			st = clp_error(CLP_ERR_INVALID, "skip paths: no node serves stage %d", s);
	free(count);
	return st;
}

clp_status clp_skip_check_path(const clp_skip_rules *r, const clp_skip_paths *p, int m)
{
	const clp_skip_hop *h = p->hops + p->hop_start[m];
	int n = p->hop_start[m + 1] - p->hop_start[m], o = p->origin[m], far = 0, swaps = 0;
	int sorted[CLP_SKIP_MAX_STAGES];

	if (o < 0 || o >= p->nnodes)
		return clp_error(CLP_ERR_INVALID, "skip paths: mb %d: origin node %d out of range "
				 "[0, %d)", m, o, p->nnodes);
	if (p->node_stage[o] != 0)
		return mb_fail(p, m, "rule origin: stage 0 starts and ends every path, node %d "
			       "serves stage %d", o, p->node_stage[o]);
	if (n != r->path_len - 1)
		return mb_fail(p, m, "rule path_len (P = %d): visits %d stages besides stage 0, "
			       "needs %d", r->path_len, n, r->path_len - 1);
	for (int i = 0; i < n; i++) {
		int s = h[i].stage, nd = h[i].node;

		if (s == 0)
			return mb_fail(p, m, "rule origin: hop %d visits stage 0 in the middle of the "
				       "path", i);
		if (s < 0 || s >= p->nstages)
			return mb_fail(p, m, "hop %d: stage %d out of range [1, %d)", i, s, p->nstages);
		if (nd < 0 || nd >= p->nnodes)
			return mb_fail(p, m, "hop %d: node %d out of range [0, %d)", i, nd, p->nnodes);
		if (p->node_stage[nd] != s)
			return mb_fail(p, m, "hop %d: node %d serves stage %d, not %d", i, nd,
				       p->node_stage[nd], s);
		for (int j = 0; j < i; j++)
			if (h[j].stage == s)
				return mb_fail(p, m, "rule no_repeat: stage %d is visited twice (hops "
					       "%d and %d)", s, j, i);
		if (s - far > r->max_jump)
			return mb_fail(p, m, "rule max_jump (J = %d): hop %d goes to stage %d, %d "
				       "stages past stage %d, the furthest reached", r->max_jump, i,
				       s, s - far, far);
		if (s > far)
			far = s;
		sorted[i] = s;
	}
	/* Undo swaps of adjacent stages (k + 1 visited just before k); what is left must be in
	 * increasing order. */
	for (int i = 0; i + 1 < n; i++)
		if (sorted[i] > sorted[i + 1]) {
			if (sorted[i] != sorted[i + 1] + 1 || (i + 2 < n && sorted[i + 2] < sorted[i]))
				return mb_fail(p, m, "rule reorder: hops %d and %d visit stages %d then "
					       "%d; only two adjacent stages may change places", i,
					       i + 1, sorted[i], sorted[i + 1]);
			sorted[i + 1] = sorted[i];
			sorted[i] = sorted[i] - 1;
			swaps++;
			i++;
		}
	for (int i = 0; i + 1 < n; i++)
		if (sorted[i] > sorted[i + 1])
			return mb_fail(p, m, "rule reorder: stages out of order around hop %d; only "
				       "two adjacent stages may change places", i + 1);
	if (swaps > r->max_swaps)
		return mb_fail(p, m, "rule max_swaps (W = %d): %d swaps of adjacent stages",
			       r->max_swaps, swaps);
	return CLP_OK;
}

/* The hand-off graph: node u -> v when a micro-batch's forward goes from u to v (stage-0 nodes
 * excluded: nothing is handed to them but the loss, which never waits for memory). With a cap
 * on every node, a cycle can deadlock: each node full of micro-batches waiting for the next. */
static clp_status check_cycles(const clp_skip_rules *r, const clp_skip_paths *p)
{
	skip_graph g;
	int cyc[8], ncyc = 0;
	clp_status st;

	CLP_TRY(skip_graph_init(&g, p->nnodes));
	st = CLP_OK;
	for (int m = 0; m < p->nmb && st == CLP_OK; m++)
		for (int i = p->hop_start[m]; i + 1 < p->hop_start[m + 1] && st == CLP_OK; i++)
			st = skip_graph_add(&g, p->hops[i].node, p->hops[i + 1].node, m);
	if (st == CLP_OK && skip_graph_find_cycle(&g, cyc, 8, &ncyc)) {
		char buf[256];
		int len = 0;

		for (int i = 0; i < ncyc && len < (int)sizeof(buf) - 16; i++)
			len += snprintf(buf + len, sizeof(buf) - (size_t)len, "%d -> ", cyc[i]);
		snprintf(buf + len, sizeof(buf) - (size_t)len, "%d", cyc[0]);
		st = clp_error(CLP_ERR_INVALID, "skip paths: rule deadlock_free (M = %d): nodes %s "
			       "hand forwards to each other in a cycle (mb %d goes %d -> %d): when "
			       "all are full they wait for each other for ever", r->memory, buf,
			       skip_graph_edge_mb(&g, cyc[0], cyc[1 % ncyc]), cyc[0], cyc[1 % ncyc]);
	}
	skip_graph_free(&g);
	return st;
}

static clp_status validate(const clp_skip_rules *r, const clp_skip_paths *p)
{
	int S = r->nstages, *visits;
	clp_status st = CLP_OK;

	CLP_TRY(clp_skip_check_config(r, p));
	if (S > CLP_SKIP_MAX_STAGES)
		return clp_error(CLP_ERR_INVALID, "skip rules: %d stages, at most %d", S,
				 CLP_SKIP_MAX_STAGES);
	for (int m = 0; m < p->nmb; m++)
		CLP_TRY(clp_skip_check_path(r, p, m));
	visits = calloc((size_t)S, sizeof(int));
	if (!visits)
		return clp_error(CLP_ERR_NOMEM, "skip rules: out of host memory");
	for (int i = 0; i < p->hop_start[p->nmb]; i++)
		visits[p->hops[i].stage]++;
	for (int s = 1; r->balance && s < S && st == CLP_OK; s++) {
		int want = (int)((int64_t)p->nmb * (r->path_len - 1) / (S - 1));

		if (visits[s] != want)
			st = clp_error(CLP_ERR_INVALID, "skip paths: rule balance: stage %d is visited "
				       "by %d micro-batches, every stage after 0 needs %d (N (P-1) / "
				       "(S-1) = %d x %d / %d)", s, visits[s], want, p->nmb,
				       r->path_len - 1, S - 1);
	}
	free(visits);
	if (st == CLP_OK && r->memory > 0 && r->deadlock_free)
		st = check_cycles(r, p);
	return st;
}

clp_status clp_skip_validate(const clp_skip_rules *r, const clp_skip_paths *p)
{
	clp_status st = validate(r, p);

	/* the rules and paths of a file: its name leads (once) */
	if (st != CLP_OK && p->file[0] && !strstr(clp_last_error(), p->file))
		return clp_error_context(st, "%s: ", p->file);
	return st;
}
