/* K-FAC in the training session (optim.name = "kfac"; docs/KFAC.md): the executor runs the
 * cycle rule (engine/exec/exec_kfac.c); the session sets it up and puts its state into
 * checkpoints. Three calls from session.c. */
#include "engine/train/session_internal.h"

#include <string.h>

void st_kfac_opts(const clp_session *s, clp_kfac_opts *o)
{
	const clp_train_config *c = &s->cfg;

	clp_kfac_opts_default(o);
	o->damping = c->kfac.damping;
	o->interval = (int)c->kfac.interval;
	o->ema = c->kfac.ema;
	o->base = strcmp(c->kfac.base, "adamw") ? CLP_KFAC_BASE_SGD : CLP_KFAC_BASE_ADAMW;
	o->momentum = c->kfac.momentum;
	o->kl_clip = c->kfac.kl_clip;
}

clp_status st_kfac_open(clp_session *s)
{
	const clp_train_config *c = &s->cfg;
	clp_kfac_opts o;

	if (strcmp(c->optim.name, "kfac"))
		return CLP_OK;
	st_kfac_opts(s, &o);
	return clp_exec_kfac(s->ex, &o, c->kfac.lr > 0 && c->optim.lr > 0
						? (float)(c->kfac.lr / c->optim.lr)
						: 1.0f);
}

/* Factors and inverses of the stages this rank saves. */
clp_status st_kfac_save(clp_session *s, clp_ckpt_writer *w)
{
	for (int i = 0; i < clp_exec_nstages(s->ex); i++) {
		int owner = 0;
		clp_kfac_opt *k = clp_exec_kfac_opt(s->ex, i);

		clp_exec_stage(s->ex, i, &owner);
		if (k && owner)
			CLP_TRY(clp_kfac_opt_save(k, w));
	}
	return CLP_OK;
}

clp_status st_kfac_load(clp_session *s, clp_ckpt *c)
{
	for (int i = 0; i < clp_exec_nstages(s->ex); i++) {
		clp_kfac_opt *k = clp_exec_kfac_opt(s->ex, i);

		if (k)
			CLP_TRY(clp_kfac_opt_load(k, c));
	}
	return CLP_OK;
}
