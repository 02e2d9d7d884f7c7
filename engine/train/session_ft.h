/* Fault tolerance of a training session (issue 28): what a survivor needs from the session it
 * was running when a rank was lost, and how its new session (over the survivors, fewer
 * replicas) takes over the old one's state in the same process: parameters and AdamW moments
 * of every stage it holds, the step count, the optimizer's step count, the data position of
 * the last completed step, the fp16 loss scale. The step in flight is dropped. tools/train_ft.c
 * drives it (revoke, shrink, agree, the new layout). */
#ifndef CLP_TRAIN_SESSION_FT_H
#define CLP_TRAIN_SESSION_FT_H

#include <stddef.h>

#include "engine/train/session.h"

/* The data position as text (what a checkpoint stores), after the last draw. */
void clp_session_data_pos(const clp_session *s, char *buf, size_t n);
/* The schedule's ranks and a rank's data-parallel replica (-1 out of range). */
int clp_session_nranks(const clp_session *s);
int clp_session_replica(const clp_session *s, int rank);
/* Optimizer steps taken (skipped ones excluded). */
long clp_session_applied(const clp_session *s);

/* CLP_OK when a session's state can be taken over: AdamW (state in the stages' tensors) on a
 * schedule with replicas; CLP_ERR_UNSUPPORTED for K-FAC, PipeFisher and SkipPipe. */
clp_status clp_session_can_take_over(const clp_session *s);
/* dst (a new training session whose rank holds the same stages as src's rank) takes over
 * src's state as of the end of step `step` (steps done) with `applied` optimizer steps and the
 * data position data_pos. CLP_ERR_UNSUPPORTED for an optimizer with state beyond the stages'
 * tensors (K-FAC, PipeFisher) or SkipPipe; CLP_ERR_INVALID when the stages differ. */
clp_status clp_session_take_over(clp_session *dst, clp_session *src, long step, long applied,
				 const char *data_pos);

#endif
