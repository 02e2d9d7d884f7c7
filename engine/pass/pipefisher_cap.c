/* PipeFisher's memory cap (opts.mem_cap): deferred factors keep their data from the backward
 * until they run; over the cap, factors become immediate. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/pass/pipefisher_internal.h"

/* Kept data over time on each rank: from the backward's end to the deferred factor. Where
 * adding an item's data would push a rank over the cap, that item becomes immediate (computed
 * right after its forward / backward). Returns how many were marked; *peak the most kept. */
int pf_apply_cap(pf *P, int64_t *peak)
{
	uint8_t *ev = calloc((size_t)P->nit + 1, 1); /* bit 1: added, bit 2: removed */
	int marked = 0;

	*peak = 0;
	if (!ev)
		return 0;
	for (int r = 0; r < P->base->nranks; r++) {
		int64_t now = 0;

		for (;;) { /* the earliest event left; removals first at equal times */
			double best = INFINITY;
			int bi = -1, add = 0;

			for (int i = 0; i < P->nit; i++) {
				const pf_item *x = &P->it[i];

				if (x->rank != r || x->immediate || !x->placed || x->keep <= 0 ||
				    (x->op.kind != CLP_OP_KFAC_CURV_A && x->op.kind != CLP_OP_KFAC_CURV_B) ||
				    (x->step == 0 && x->j <= x->bwd))
					continue; /* not kept: before the backward, activations hold it */
				if (!(ev[i] & 1) && P->bwd_end[i] < best)
					best = P->bwd_end[i], bi = i, add = 1;
				if ((ev[i] & 1) && !(ev[i] & 2) && x->t_place <= best)
					best = x->t_place, bi = i, add = 0;
			}
			if (bi < 0)
				break;
			ev[bi] |= add ? 1 : 2;
			if (!add) {
				now -= P->it[bi].keep;
			} else if (P->o->mem_cap >= 0 && now + P->it[bi].keep > P->o->mem_cap) {
				P->it[bi].immediate = 1;
				ev[bi] |= 2;
				marked++;
			} else {
				now += P->it[bi].keep;
				*peak = now > *peak ? now : *peak;
			}
		}
	}
	free(ev);
	return marked;
}
