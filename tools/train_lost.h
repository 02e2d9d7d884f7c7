/* The message of a training rank stopped by a signal (tools/train_lost.c). */
#ifndef CLP_TOOLS_TRAIN_LOST_H
#define CLP_TOOLS_TRAIN_LOST_H

#include "engine/train/session.h"

/* Arm SIGTERM and SIGINT for this rank; done = steps already done (a resumed run's start). */
void lost_install(const clp_session *s, int rank, int nranks, long done);
/* After each completed step (done of them), compose the line a signal would print. */
void lost_update(long done);

#endif
