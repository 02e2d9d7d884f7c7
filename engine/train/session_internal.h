/* The session's state, shared by session.c (setup, checkpoints, sampling) and
 * session_train.c (the step loop, evaluation, logging). */
#ifndef CLP_TRAIN_SESSION_INTERNAL_H
#define CLP_TRAIN_SESSION_INTERNAL_H

#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/data/mask.h"
#include "engine/data/tokenizer.h"
#include "engine/io/checkpoint.h"
#include "engine/model/stage.h"
#include "engine/optim/kfac.h"
#include "engine/train/session.h"

struct clp_session {
	clp_train_config cfg;
	enum clp_session_mode mode;
	FILE *out, *log;
	clp_model_config m;
	clp_cl_ctx *ctx;
	clp_tok *tok;
	clp_dataset *ds;
	clp_stage *st;
	size_t B, T, N; /* micro-batch */
	int M;          /* micro-batches per step */
	int32_t *in, *tg, *types; /* (M, N) */
	cl_mem acc;     /* loss accumulator */
	long step;      /* next step to run */
	long applied;   /* optimizer steps taken (skipped ones excluded) */
	double baseline_bpb, bytes_per_token;
	int bert, byte_level;
	int32_t specials[8], mask_id;
	int nspecial;
	clp_kfac_opt *kfac; /* optim.name = "kfac" (session_kfac.c); NULL for AdamW */
};

clp_status st_save(clp_session *s);

/* session_kfac.c */
clp_status st_kfac_open(clp_session *s);
clp_status st_kfac_step_begin(clp_session *s, long step, size_t valid, int *collect);
clp_status st_kfac_after_forward(clp_session *s, int collect);
clp_status st_kfac_update(clp_session *s, long step, int collect, const clp_nn_adamw_hp *hp);
clp_status st_kfac_after_sync(clp_session *s, int collect);

#endif
