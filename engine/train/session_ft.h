/* Fault tolerance of a training session (issue 28): what a survivor needs from the session it
 * was running when a rank was lost, and how its new session (over the survivors, fewer
 * replicas or SkipPipe nodes) takes over the old one's state in the same process: parameters
 * and moments of every stage it holds, the optimizer's own state (session_ft_optim.c), the
 * step count, the optimizer's step count, the data position of the last completed step, the
 * fp16 loss scale. The step in flight is dropped. tools/train_ft.c
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

/* Steps whose update every stage of this rank applied: one ahead of clp_session_steps_done
 * while that step's evaluation or checkpoint is under way (a failure there ends the run after
 * the update). */
long clp_session_completed(const clp_session *s);
/* Called on every rank after it wrote its files of the checkpoint of `step` (steps done) and
 * before the barrier and the manifest that make it complete; for tests of a failed save. */
void clp_session_set_save_hook(clp_session *s, void (*fn)(void *ud, long step), void *ud);

/* A training session for a take-over (clp_session_take_over, _take_over_lost): as
 * clp_session_open, but its parameters are not initialised (on a large model the random fill
 * is most of the opening); the take-over writes every tensor, or initialises the session
 * first when it cannot. Until then the session must not train. */
clp_status clp_session_open_bare(clp_session **out, const clp_train_config *cfg, clp_comm *comm,
				 FILE *fout);

/* CLP_OK when a session's state can be taken over (every optimizer: the stages' tensors and
 * the optimizer's own state, session_ft_optim.c; SkipPipe too). */
clp_status clp_session_can_take_over(const clp_session *s);
/* dst (a new training session whose rank holds the same stages as src's rank) takes over
 * src's state as of the end of step `step` (steps done) with `applied` optimizer steps and the
 * data position data_pos: the stages' tensors and the optimizer's own state (Shampoo's, K-FAC's).
 * CLP_ERR_UNSUPPORTED with PipeFisher when step ends no cycle of both sessions (the data kept
 * for deferred factors is not carried over); CLP_ERR_INVALID when the stages differ. */
clp_status clp_session_take_over(clp_session *dst, clp_session *src, long step, long applied,
				 const char *data_pos);

/* SkipPipe (issue 28): a stage with several nodes has other holders. clp_session_skip: 1 for a
 * SkipPipe run. clp_session_skip_survivors: the nodes per stage of the survivors (alive[r]:
 * rank r of the schedule is left), in stage order, for skip.stage_nodes of the new session,
 * whose path scheduler plans paths over them (rank i is node i, nodes in stage order: every
 * survivor keeps its stage). CLP_ERR_UNSUPPORTED when a stage has no node left (the message
 * names it and its layers) or a skip.paths file does not put the nodes in stage order. */
int clp_session_skip(const clp_session *s);
clp_status clp_session_skip_survivors(const clp_session *s, const unsigned char *alive,
				      clp_cfg_ints *nodes);

/* A lost stage with no other holder (session_replan.c). The survivors re-plan a plain
 * pipeline (one stage per rank, one replica: GPipe, 1F1B, ZB-H1) over the ranks left. */
int clp_session_plain_pipeline(const clp_session *s);
/* Layers of stage `stage` of the schedule (*first the first one); -1 out of range. */
int clp_session_stage_layers(const clp_session *s, int stage, int *first);
int clp_session_tied(const clp_session *s); /* the head's weight is the token embedding */
/* The memory check (the planner's model of a stage against this rank's device) of rank
 * `rank` of training config c over nranks ranks, before anything is allocated: CLP_OK or
 * CLP_ERR_NOMEM with what it needs and what to lower. */
clp_status clp_session_layout_fits(clp_session *s, const clp_train_config *c, int nranks,
				   int rank);

typedef struct clp_ft_reload {
	int from_memory, from_ckpt, from_init; /* tensors (parameters with their moments) */
	int optim[3]; /* the optimizer's own tensors (Shampoo's, K-FAC's): from memory, the
		       * checkpoint, initial */
	long ckpt_step;                        /* the checkpoint's step; -1: none */
	char ckpt[1024];                       /* its directory */
} clp_ft_reload;

/* dst (the re-planned layout's session) takes over as clp_session_take_over does, by tensor
 * name: each tensor src holds comes from src (current weights and moments); the others (the
 * lost stage's) from the last complete checkpoint under ckpt.dir, or keep their
 * initialisation with zero moments when there is none. */
clp_status clp_session_take_over_lost(clp_session *dst, clp_session *src, long step,
				      long applied, const char *data_pos, clp_ft_reload *r);
/* A tied embedding's two copies (stage 0's rank and the head's) made equal to rank from's
 * (parameters and moments), when only that one held it before the re-plan. A collective of
 * the two holders; CLP_OK at once on the others and for untied models. */
clp_status clp_session_tied_sync(clp_session *s, int from);

#endif
