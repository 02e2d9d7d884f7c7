/* The hand-off graph of a path set: node u -> v when some micro-batch's forward goes from u to
 * v. With a memory cap, a cycle in it is a possible deadlock (every node of the cycle full of
 * micro-batches that wait for the next one), so the validator rejects cycles and the planner
 * and the search keep the graph acyclic. Edges carry counts so that paths can be removed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/skip/skip_internal.h"
#include "cl/base/clock.h"

clp_status skip_graph_init(skip_graph *g, int n)
{
	memset(g, 0, sizeof(*g));
	g->n = n;
	g->adj = calloc((size_t)n, sizeof(*g->adj));
	g->deg = calloc((size_t)n, sizeof(int));
	g->cap = calloc((size_t)n, sizeof(int));
	g->mark = calloc((size_t)n, sizeof(int));
	g->stack = malloc((size_t)n * sizeof(int));
	g->it = malloc((size_t)n * sizeof(int));
	g->parent = malloc((size_t)n * sizeof(int));
	if (!g->adj || !g->deg || !g->cap || !g->mark || !g->stack || !g->it || !g->parent) {
		skip_graph_free(g);
		return clp_error(CLP_ERR_NOMEM, "skip: out of host memory (hand-off graph)");
	}
	return CLP_OK;
}

void skip_graph_free(skip_graph *g)
{
	for (int i = 0; g->adj && i < g->n; i++)
		free(g->adj[i]);
	free(g->adj);
	free(g->deg);
	free(g->cap);
	free(g->mark);
	free(g->stack);
	free(g->it);
	free(g->parent);
	memset(g, 0, sizeof(*g));
}

static skip_edge *find_edge(const skip_graph *g, int u, int v)
{
	for (int i = 0; i < g->deg[u]; i++)
		if (g->adj[u][i].v == v)
			return &g->adj[u][i];
	return NULL;
}

clp_status skip_graph_add(skip_graph *g, int u, int v, int mb)
{
	skip_edge *e = find_edge(g, u, v);

	if (e) {
		if (e->count++ == 0)
			e->mb = mb;
		return CLP_OK;
	}
	if (g->deg[u] == g->cap[u]) {
		int cap = g->cap[u] ? 2 * g->cap[u] : 4;
		skip_edge *a = realloc(g->adj[u], (size_t)cap * sizeof(*a));

		if (!a)
			return clp_error(CLP_ERR_NOMEM, "skip: out of host memory (hand-off graph)");
		g->adj[u] = a;
		g->cap[u] = cap;
	}
	g->adj[u][g->deg[u]++] = (skip_edge){v, 1, mb};
	return CLP_OK;
}

void skip_graph_remove(skip_graph *g, int u, int v)
{
	skip_edge *e = find_edge(g, u, v);

	if (e && e->count > 0)
		e->count--;
}

int skip_graph_edge_mb(const skip_graph *g, int u, int v)
{
	const skip_edge *e = find_edge(g, u, v);

	return e ? e->mb : -1;
}

int skip_graph_reaches(skip_graph *g, int a, int b)
{
	int top = 0;

	if (a == b)
		return 1;
	g->stamp++;
	g->mark[a] = g->stamp;
	g->stack[top++] = a;
	while (top) {
		int u = g->stack[--top];

		for (int i = 0; i < g->deg[u]; i++) {
			int v = g->adj[u][i].v;

			if (!g->adj[u][i].count || g->mark[v] == g->stamp)
				continue;
			if (v == b)
				return 1;
			g->mark[v] = g->stamp;
			g->stack[top++] = v;
		}
	}
	return 0;
}

/* Iterative DFS with colours (mark: 0 new, 1 on the stack, 2 done). */
int skip_graph_find_cycle(skip_graph *g, int *cyc, int max, int *len)
{
	memset(g->mark, 0, (size_t)g->n * sizeof(int));
	g->stamp = 0;
	for (int r = 0; r < g->n; r++) {
		int top = 0;

		if (g->mark[r])
			continue;
		g->stack[top++] = r;
		g->it[r] = 0;
		g->mark[r] = 1;
		g->parent[r] = -1;
		while (top) {
			int u = g->stack[top - 1];

			if (g->it[u] >= g->deg[u]) {
				g->mark[u] = 2;
				top--;
				continue;
			}
			{
				skip_edge *e = &g->adj[u][g->it[u]++];
				int v = e->v, n = 0;

				if (!e->count || g->mark[v] == 2)
					continue;
				if (g->mark[v] == 0) {
					g->mark[v] = 1;
					g->parent[v] = u;
					g->it[v] = 0;
					g->stack[top++] = v;
					continue;
				}
				/* v is on the stack: the cycle is v -> ... -> u -> v. */
				for (int x = u; x != v && x >= 0; x = g->parent[x])
					n++;
				n++;
				*len = n < max ? n : max;
				for (int x = u, i = n - 1; x >= 0; x = g->parent[x], i--) {
					if (i < max)
						cyc[i] = x;
					if (x == v)
						break;
				}
				return 1;
			}
		}
	}
	return 0;
}

clp_status skip_graph_add_path(skip_graph *g, const clp_skip_paths *p, int m)
{
	for (int i = p->hop_start[m]; i + 1 < p->hop_start[m + 1]; i++)
		CLP_TRY(skip_graph_add(g, p->hops[i].node, p->hops[i + 1].node, m));
	return CLP_OK;
}

int skip_graph_try_path(skip_graph *g, const clp_skip_hop *h, int n, int mb, int *bad)
{
	for (int i = 0; i + 1 < n; i++) {
		if (skip_graph_reaches(g, h[i + 1].node, h[i].node)) {
			for (int j = 0; j < i; j++)
				skip_graph_remove(g, h[j].node, h[j + 1].node);
			if (bad) {
				bad[0] = h[i].node;
				bad[1] = h[i + 1].node;
			}
			return 0;
		}
		if (skip_graph_add(g, h[i].node, h[i + 1].node, mb) != CLP_OK) {
			for (int j = 0; j < i; j++)
				skip_graph_remove(g, h[j].node, h[j + 1].node);
			return -1;
		}
	}
	return 1;
}

void skip_graph_remove_path(skip_graph *g, const clp_skip_paths *p, int m)
{
	for (int i = p->hop_start[m]; i + 1 < p->hop_start[m + 1]; i++)
		skip_graph_remove(g, p->hops[i].node, p->hops[i + 1].node);
}
