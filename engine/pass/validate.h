/* The schedule validator. It checks, and names rank, op index and micro-batch in its message:
 *   - fields in range (stages, micro-batches, peers, tags < 32768, groups, layers);
 *   - every send has its receive (same source, destination and tag, in list order) and the pair
 *     agrees on kind, stage path, micro-batch, pipeline and step;
 *   - each micro-batch visits exactly the stages of its path, with one FWD and one backward (BWD,
 *     or BWD_B and BWD_W) on one rank per stage, in dependency order: FWD before B before W,
 *     activations sent after the forward that makes them and received before the one that uses
 *     them, gradients likewise backwards; the path starts at the embedding and ends at the head;
 *   - the collectives of each group appear in the same order on every member;
 *   - a dry run with unit costs in which every send is a rendezvous (completes only once its
 *     receive is posted) finishes.
 * Dataflow-mode ranks skip the order checks (their order is decided as they run); the dry run
 * covers them too. */
#ifndef CLP_SCHED_VALIDATE_H
#define CLP_SCHED_VALIDATE_H

#include "engine/sched/sched.h"

/* CLP_OK, or CLP_ERR_INVALID with the first problem found. dry_run = 0 skips the last check. */
clp_status clp_sched_validate(const clp_sched *s, int dry_run);

#endif
