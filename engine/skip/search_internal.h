/* The path scheduler's state, shared by search.c (starts, annealing, clp_skip_schedule) and
 * search_moves.c (the moves). */
#ifndef CLP_SKIP_SEARCH_INTERNAL_H
#define CLP_SKIP_SEARCH_INTERNAL_H

#include "engine/skip/skip_internal.h"

typedef struct search {
	const skip_ctx *c;
	clp_skip_paths *p;
	skip_graph g;
	int use_graph;
	skip_build_w w;
	uint64_t rng;
	double *mb_end, *load, *ncost;
	int *cap, *order;
	int norig, *orig, *ofirst, *omb; /* origins; their mbs: omb[ofirst[k] .. ofirst[k + 1]) */
	int *mb_orig;                    /* [N] index of mb's origin in orig */
	clp_skip_hop *old, *nw;          /* [N * H] undo and new hops of the moved micro-batches */
	int *moved, nmoved;
	unsigned char *in_graph; /* the moved one's current hops are in the hand-off graph */
	int flipped;             /* a node whose priority the move flipped, or -1 */
	double iter, energy;
	double noise;
	/* the best seen over all starts */
	clp_skip_paths *best;
	double best_iter, best_e;
} search;

/* search_moves.c: the annealing energy of an iteration time and the micro-batches' end times;
 * the node loads of the current paths; undo the last move; re-plan micro-batches from their
 * pooled stages (0: no valid re-plan, 1: one, 2: one as chains); gather the micro-batches of
 * origins (returns how many); make one random move (0: none was possible). */
double search_energy(const search *z, double iter, const double *end);
void search_load(search *z);
void search_undo(search *z);
int search_replan(search *z, const int *mbs, int n, const int *cnt, int ngroups, int chain,
		  double load_w);
int search_gather(search *z, int *ks, int n, int *mbs, int *cnt);
int search_try_move(search *z);

#endif
