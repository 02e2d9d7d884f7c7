/* K-FAC in the training session (optim.name = "kfac"; docs/KFAC.md): the executor runs the
 * cycle rule (engine/exec/exec_kfac.c) and puts its state into checkpoints
 * (clp_exec_optim_save); the session sets it up (sess_kfac_open is K-FAC's `open` in the
 * table of optimizer kinds, optim_kind.c). */
#include "engine/train/session_internal.h"

#include <string.h>

void sess_kfac_opts(const clp_session *s, clp_kfac_opts *o)
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

clp_status sess_kfac_open(clp_session *s)
{
	const clp_train_config *c = &s->cfg;
	clp_kfac_opts o;

	sess_kfac_opts(s, &o);
	return clp_exec_kfac(s->ex, &o, c->kfac.lr > 0 && c->optim.lr > 0
						? (float)(c->kfac.lr / c->optim.lr)
						: 1.0f);
}
