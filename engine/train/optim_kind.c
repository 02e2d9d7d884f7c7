/* The table of optimizer kinds (optim_kind.h). */
#include "engine/train/optim_kind.h"

#include "engine/train/session_internal.h"

/* AdamW's hyperparameters for the step (K-FAC's base optimizer reads the same). */
static void adamw_step(const clp_train_config *c, double lr, long t, clp_optim_step *out)
{
	out->adamw = (clp_nn_adamw_hp){
		.lr = (float)lr,
		.beta1 = (float)c->optim.beta1,
		.beta2 = (float)c->optim.beta2,
		.eps = (float)c->optim.eps,
		.weight_decay = (float)c->optim.weight_decay,
		.step = t,
	};
}

/* Muon: AdamW's settings for the other tensors, and its matrices' rate on the same schedule
 * (muon.lr / optim.lr times the scheduled rate). */
static void muon_step(const clp_train_config *c, double lr, long t, clp_optim_step *out)
{
	clp_nn_adamw_hp a;

	adamw_step(c, lr, t, out);
	a = out->adamw;
	out->muon = (clp_exec_muon_step){
		.adamw = a,
		.lr = (float)(c->muon.lr > 0 && c->optim.lr > 0 ? lr * (c->muon.lr / c->optim.lr)
								   : lr),
	};
}

static clp_status muon_open(clp_session *s)
{
	const clp_exec_muon_opts o = {
		.momentum = (float)s->cfg.muon.momentum,
		.nesterov = s->cfg.muon.nesterov,
		.ns_steps = (int)s->cfg.muon.ns_steps,
		.delay = s->cfg.muon.delay,
	};

	return clp_exec_muon(s->ex, &o);
}

static double muon_layer_work(const clp_train_config *c, const clp_model_config *m,
			      size_t tokens)
{
	return clp_exec_muon_layer_work(m, tokens, (int)c->muon.ns_steps);
}

/* Shampoo: AdamW's settings for the other tensors, its matrices' rate shampoo.lr / optim.lr
 * times the scheduled rate. */
static void shampoo_step(const clp_train_config *c, double lr, long t, clp_optim_step *out)
{
	clp_nn_adamw_hp a;

	adamw_step(c, lr, t, out);
	a = out->adamw;
	out->shampoo = (clp_exec_shampoo_step){
		.adamw = a,
		.lr = (float)(c->shampoo.lr > 0 && c->optim.lr > 0
				      ? lr * (c->shampoo.lr / c->optim.lr)
				      : lr),
	};
}

static clp_status shampoo_open(clp_session *s)
{
	const clp_exec_shampoo_opts o = {
		.momentum = (float)s->cfg.shampoo.momentum,
		.eps = (float)s->cfg.shampoo.eps,
		.interval = (int)s->cfg.shampoo.interval,
		.iters = (int)s->cfg.shampoo.iters,
		.graft = s->cfg.shampoo.graft,
		.warmup = (int)s->cfg.shampoo.warmup,
		.stat_beta = (float)s->cfg.shampoo.beta2,
		/* the bubbles' refreshes compute the stale roots (one device: shampoo.stale) */
		.stale = s->cfg.shampoo.stale || s->cfg.pipeline.pipefisher,
	};

	return clp_exec_shampoo(s->ex, &o);
}

static double shampoo_layer_work(const clp_train_config *c, const clp_model_config *m,
				 size_t tokens)
{
	return clp_exec_shampoo_layer_work(m, tokens, (int)c->shampoo.iters,
					   (int)c->shampoo.interval);
}

/* SOAP: AdamW's settings for the other tensors, its matrices' rate soap.lr / optim.lr times the
 * scheduled rate; soap.weight_decay < 0 is optim.weight_decay (one decay for the run, as Shampoo
 * and Muon, so that a comparison with AdamW changes the optimizer only). */
static void soap_step(const clp_train_config *c, double lr, long t, clp_optim_step *out)
{
	clp_nn_adamw_hp a;

	adamw_step(c, lr, t, out);
	a = out->adamw;
	out->soap = (clp_exec_soap_step){
		.adamw = a,
		.lr = (float)(c->soap.lr > 0 && c->optim.lr > 0 ? lr * (c->soap.lr / c->optim.lr)
								   : lr),
		.weight_decay = (float)(c->soap.weight_decay >= 0 ? c->soap.weight_decay
								  : c->optim.weight_decay),
	};
}

static clp_status soap_open(clp_session *s)
{
	const clp_exec_soap_opts o = {
		.beta1 = (float)s->cfg.soap.beta1,
		.beta2 = (float)s->cfg.soap.beta2,
		.shampoo_beta = (float)(s->cfg.soap.shampoo_beta >= 0 ? s->cfg.soap.shampoo_beta
								       : s->cfg.soap.beta2),
		.eps = (float)s->cfg.soap.eps,
		.frequency = (int)s->cfg.soap.frequency,
		.init_iters = (int)s->cfg.soap.init_iters,
		.correct_bias = s->cfg.soap.correct_bias,
		/* the bubbles' refreshes compute the stale bases (one device: soap.stale) */
		.stale = s->cfg.soap.stale || s->cfg.pipeline.pipefisher,
	};

	return clp_exec_soap(s->ex, &o);
}

static double soap_layer_work(const clp_train_config *c, const clp_model_config *m,
			      size_t tokens)
{
	return clp_exec_soap_layer_work(m, tokens, (int)c->soap.frequency);
}

#define ALL_PRECISIONS (1u << CLP_F32 | 1u << CLP_BF16 | 1u << CLP_F16)

static const clp_optim_info kinds[CLP_OPTIM_NKINDS] = {
	[CLP_OPTIM_ADAMW] = {
		.kind = CLP_OPTIM_ADAMW,
		.label = "AdamW",
		.step = adamw_step,
		.state_bytes = 8,
		.skippipe = 1,
		.precisions = ALL_PRECISIONS,
	},
	[CLP_OPTIM_KFAC] = {
		.kind = CLP_OPTIM_KFAC,
		.label = "K-FAC",
		.open = sess_kfac_open,
		.step = adamw_step,
		.state_bytes = 8,
		.curvature = 1,
		.pipefisher = 1,
		.precisions = 1u << CLP_F32 | 1u << CLP_BF16,
		.precision_why = "K-FAC's factors would see the loss scale; use bf16 (no scaling) or "
				 "AdamW",
	},
	[CLP_OPTIM_MUON] = {
		.kind = CLP_OPTIM_MUON,
		.label = "Muon",
		.open = muon_open,
		.step = muon_step,
		.layer_work = muon_layer_work,
		.state_bytes = 8, /* the momentum in AdamW's m; v: muon.delay's pending direction */
		.own_bytes = clp_exec_muon_bytes, /* its scratch */
		.prep = 1, /* momentum and Newton-Schulz where the gradients are final */
		.pipefisher = 1, /* muon.delay only: the delayed Newton-Schulz (session_pf.c) */
		.skippipe = 1,
		.precisions = ALL_PRECISIONS,
	},
	[CLP_OPTIM_SHAMPOO] = {
		.kind = CLP_OPTIM_SHAMPOO,
		.label = "Shampoo",
		.open = shampoo_open,
		.step = shampoo_step,
		.layer_work = shampoo_layer_work,
		/* the momentum in AdamW's m (graft: v in AdamW's v) */
		.state_bytes = 8,
		/* L, R and their roots, 8 (rows^2 + cols^2) bytes a matrix, and its scratch */
		.own_bytes = clp_exec_shampoo_bytes,
		.skippipe = 1,
		.pipefisher = 1, /* the root refreshes (stale roots; docs/OPTIMIZERS.md) */
		.precisions = ALL_PRECISIONS,
	},
	[CLP_OPTIM_SOAP] = {
		.kind = CLP_OPTIM_SOAP,
		.label = "SOAP",
		.open = soap_open,
		.step = soap_step,
		.layer_work = soap_layer_work,
		.state_bytes = 8, /* Adam's m in AdamW's m, v (rotated) in AdamW's v */
		/* L, R, QL, QR, 8 (rows^2 + cols^2) bytes a matrix, and its scratch */
		.own_bytes = clp_exec_soap_bytes,
		.skippipe = 1,
		.pipefisher = 1, /* the eigenbases' refreshes (stale bases; docs/OPTIMIZERS.md) */
		.precisions = ALL_PRECISIONS,
	},
};

const clp_optim_info *clp_optim_info_of(clp_optim_kind k)
{
	return (unsigned)k < CLP_OPTIM_NKINDS ? &kinds[k] : NULL;
}

clp_status sess_optim_kind(clp_session *s)
{
	clp_optim_kind k;

	CLP_TRY(clp_train_optim_kind(&s->cfg, &k));
	s->optim = clp_optim_info_of(k);
	return CLP_OK;
}
