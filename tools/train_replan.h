/* clpipe train over ULFM, a lost stage with no other holder (tools/train_replan.c): the
 * survivors of a plain pipeline re-plan the layout over themselves and go on in the same
 * processes; the lost stage's layers come from the last checkpoint. */
#ifndef CLP_TOOLS_TRAIN_REPLAN_H
#define CLP_TOOLS_TRAIN_REPLAN_H

#include <stdio.h>

#include "engine/train/session.h"
#include "topology/comm/comm.h"

struct ft_agreed {
	int old_rank;     /* this rank in the layout that lost a stage */
	long step;        /* steps every survivor completed */
	long applied;     /* optimizer steps then */
	const char *pos;  /* the data position then */
	const char *lost; /* "rank 1 (host h)" */
};

struct ft_replanned {
	clp_session *sess; /* over cont, holding the new layout's stage of this rank */
	clp_comm *cont;    /* the survivors' communicator (this rank's own when alone) */
	char layout[160];  /* "1 stage x 1 replica over 1 rank, layers [2]" */
	char note[1400];   /* where the tensors came from, what the lost stage lost */
};

/* s: the session that lost a stage (clp_session_plain_pipeline); alive[r]: old rank r
 * survived; *nc: the survivors' communicator (shrunk; NULL when this rank is the only one; on
 * success it may be moved into res->cont and set NULL). CLP_ERR_NOMEM, naming what was lost,
 * when no layout fits the survivors' devices (nothing then changes on disk). */
clp_status ft_replan(clp_session *s, const clp_train_config *cfg, clp_comm **nc,
		     const unsigned char *alive, const struct ft_agreed *a, FILE *out,
		     struct ft_replanned *res);

#endif
