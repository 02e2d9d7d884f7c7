/* Cross-references of a schedule, shared by the validator and the simulator: which receive each
 * send matches (same source, destination and tag, in list order: MPI's non-overtaking rule),
 * what each op waits for on its own rank, and which instance of its group's collectives each
 * collective op joins. Ops are numbered globally: rank r's op i is off[r] + i. */
#ifndef CLP_SCHED_INDEX_H
#define CLP_SCHED_INDEX_H

#include "engine/sched/sched.h"

typedef struct clp_sched_index {
	int nranks;
	int64_t nops;
	int64_t *off;       /* [nranks + 1] */
	int64_t *match;     /* [nops] the partner of a send or receive; -1 if none */
	int64_t *input;     /* [nops] where the op's data comes from, on its rank: FWD its RECV_ACT
			     * (or the FWD of the previous stage on the path, if local), BWD/BWD_B
			     * its RECV_GRAD (or the next stage's backward), SEND_ACT/SEND_GRAD the
			     * FWD/backward making what it sends; -1 if none */
	int64_t *dep;       /* [nops] the op on its rank it must follow: BWD/BWD_B its FWD, BWD_W
			     * its BWD_B, KFAC_CURV_A/B the FWD/backward they record; -1 */
	int64_t *coll;      /* [nops] collective instance; -1 for other ops */
	int64_t ninst;      /* collective instances */
	int32_t *inst_group; /* [ninst] */
	int32_t *inst_seq;   /* [ninst] position of the instance among its group's collectives */
} clp_sched_index;

clp_status clp_sched_index_build(const clp_sched *s, clp_sched_index *ix);
void clp_sched_index_free(clp_sched_index *ix);

/* The rank of global op g. */
int clp_sched_index_rank(const clp_sched_index *ix, int64_t g);

static inline const clp_op *clp_sched_index_op(const clp_sched *s, const clp_sched_index *ix,
					       int64_t g)
{
	int r = clp_sched_index_rank(ix, g);

	return &s->ranks[r].ops[g - ix->off[r]];
}

#endif
