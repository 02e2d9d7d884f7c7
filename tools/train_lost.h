/* Ctrl-C and SIGTERM during clpipe train (tools/train_lost.c): the first signal asks the session
 * to stop at the end of the step and save a checkpoint (every rank of a pipeline stops at the
 * same step); a second one stops the process at once, saying what is lost. */
#ifndef CLP_TOOLS_TRAIN_LOST_H
#define CLP_TOOLS_TRAIN_LOST_H

#include "engine/train/session.h"

/* Arm SIGTERM and SIGINT for this rank (and give the session the stop flag); done = steps
 * already done (a resumed run's start). */
void lost_install(clp_session *s, int rank, int nranks, long done);
/* After each completed step (done of them), compose the lines a signal would print. */
void lost_update(long done);
/* The default action again (after a stopped run, while it ends). */
void lost_uninstall(void);

#endif
