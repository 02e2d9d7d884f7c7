/* clpipe train over ULFM (tools/train_ft.c): a lost rank no longer ends the run. */
#ifndef CLP_TOOLS_TRAIN_FT_H
#define CLP_TOOLS_TRAIN_FT_H

#include <stdio.h>

#include "engine/train/session.h"
#include "topology/comm/comm.h"

struct ft_event {
	long step;       /* steps every survivor completed (the next one was dropped) */
	char lost[256];  /* "rank 3 (host h)" */
	char layout[160]; /* "2 stages x 1 replica over 2 ranks" */
	double seconds;  /* from the failure's detection to the new session's first step */
};

struct ft {
	clp_session *s;      /* the session running now */
	clp_comm *cont;      /* its communicator when not the world (after a recovery) */
	long done, applied;  /* as of the last completed step */
	char pos[256];       /* the data position then */
	int events;
	struct ft_event ev[8];
	double t_detect;     /* of the last recovery (clp_comm_now), 0 when none is pending */
	long first_step;     /* the first step the new session runs */
	int retry;           /* the last recovery failed because another rank was lost during it */
	int die_in;          /* CLPIPE_FAULT=dierec: SIGKILL in this recovery (1st, ...), 0 none */
};

/* Start following session s (its state at opening). */
void ft_follow(struct ft *ft, clp_session *s);
/* After each completed step (steps done): the state a recovery would go on from. */
void ft_mark(struct ft *ft, long done);
/* After clp_session_train returned CLP_ERR_PEER_LOST on communicator `cur` (the world or
 * ft->cont): shrink, agree, make the new layout and the new session (*s replaced; the old one
 * closed). *idle = 1 when this rank has no part in the new layout (*s NULL; it leaves, exit
 * 0). cfg: the run's config as parsed. On failure *s is the old session, and ft->retry = 1
 * when a peer was lost in the recovery's own calls (then it may be called again). */
clp_status ft_recover(struct ft *ft, clp_session **s, const clp_train_config *cfg, clp_comm *cur,
		      FILE *out, int *idle);
/* "failures survived: ..." (rank 0 of the final layout, after the summary). */
void ft_summary(const struct ft *ft, FILE *out);
void ft_free(struct ft *ft);
/* Wall-clock seconds since the epoch (for the kill-to-step time across processes). */
double ft_wall(void);

#endif
