/* K-FAC in the single-device training session (optim.name = "kfac"): the cycle rule of
 * engine/optim/kfac.h run serially, step by step. Kept apart from the step loop, which calls
 * these st_kfac_* hooks at five places. */
#include "engine/train/session_internal.h"

#include <string.h>

clp_status st_kfac_open(clp_session *s)
{
	const clp_train_config *c = &s->cfg;
	clp_kfac_opts o;

	if (strcmp(c->optim.name, "kfac"))
		return CLP_OK;
	clp_kfac_opts_default(&o);
	o.damping = c->kfac.damping;
	o.interval = (int)c->kfac.interval;
	o.ema = c->kfac.ema;
	o.base = strcmp(c->kfac.base, "adamw") ? CLP_KFAC_BASE_SGD : CLP_KFAC_BASE_ADAMW;
	o.momentum = c->kfac.momentum;
	o.kl_clip = c->kfac.kl_clip;
	return clp_kfac_opt_create(&s->kfac, s->st, &o);
}

/* The first step of a cycle collects factors from its micro-batches (A after each forward,
 * B through the stage's tap during each backward). */
clp_status st_kfac_step_begin(clp_session *s, long step, size_t valid, int *collect)
{
	*collect = 0;
	if (!s->kfac)
		return CLP_OK;
	return clp_kfac_opt_step_begin(s->kfac, step, (double)valid, (double)(s->N * (size_t)s->M),
				       collect);
}

clp_status st_kfac_after_forward(clp_session *s, int collect)
{
	return s->kfac && collect ? clp_kfac_opt_curv_a(s->kfac, -1, 0) : CLP_OK;
}

/* Invert in the collecting step (the inverses take over at the next cycle; step 0 also uses
 * them at once), precondition with the active inverses, then the update. */
clp_status st_kfac_update(clp_session *s, long step, int collect, const clp_nn_adamw_hp *hp)
{
	const clp_train_config *c = &s->cfg;
	float kfac_lr = c->kfac.lr > 0 && c->optim.lr > 0
				? hp->lr * (float)(c->kfac.lr / c->optim.lr)
				: hp->lr;

	if (collect) {
		CLP_TRY(clp_kfac_opt_invert(s->kfac, -1, -1));
		if (step == 0)
			CLP_TRY(clp_kfac_opt_activate(s->kfac));
	}
	CLP_TRY(clp_kfac_opt_precondition(s->kfac));
	return clp_kfac_opt_update(s->kfac, hp, kfac_lr, clp_stage_stats(s->st));
}

/* After the step's synchronisation: report a failed inversion. */
clp_status st_kfac_after_sync(clp_session *s, int collect)
{
	return s->kfac && collect ? clp_kfac_opt_check(s->kfac) : CLP_OK;
}
