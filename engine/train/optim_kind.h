/* What each optimizer kind (clp_optim_kind, optim.name) provides to training: one table, read
 * by the session (installing the optimizer, its per-step settings, the schedules, precisions
 * and pipelines it runs with), the session's memory check and the planner. Nothing above this
 * table asks which optimizer runs: a new optimizer is an entry here (optim_kind.c) and a hooks
 * file in engine/exec (exec_optim.h, written on exec_env.h). docs/DESIGN.md has the recipe. */
#ifndef CLP_TRAIN_OPTIM_KIND_H
#define CLP_TRAIN_OPTIM_KIND_H

#include "cl/nn.h"
#include "engine/exec/exec_muon.h"
#include "engine/exec/exec_shampoo.h"
#include "engine/train/session.h"
#include "engine/train/train_config.h"

/* One step's settings of an optimizer, as its hooks read them (clp_exec_step's settings): a
 * member per kind of settings. */
typedef union clp_optim_step {
	clp_nn_adamw_hp adamw; /* AdamW, and K-FAC's base optimizer */
	clp_exec_muon_step muon; /* Muon: its matrices' rate, AdamW's settings for the rest */
	clp_exec_shampoo_step shampoo; /* Shampoo: the same */
	clp_exec_soap_step soap; /* SOAP: the same and its matrices' weight decay */
} clp_optim_step;

typedef struct clp_optim_info {
	clp_optim_kind kind;
	const char *label; /* for messages: "AdamW", "K-FAC" */
	/* Install the optimizer in an opened training session's executor (NULL: the executor's
	 * default, AdamW). */
	clp_status (*open)(clp_session *s);
	/* This step's settings from the config, the scheduled learning rate and the 1-based count
	 * of optimizer steps taken. */
	void (*step)(const clp_train_config *c, double lr, long t, clp_optim_step *out);
	/* Device bytes of optimizer state per parameter (the memory model: the stage's blocks
	 * keep AdamW's two fp32 moments for every optimizer, so 8 for both kinds today). */
	int state_bytes;
	/* Device bytes of the optimizer's own buffers beyond those (Shampoo's statistics and
	 * roots, Muon's and Shampoo's scratch) on a rank whose local stages hold the tables
	 * tabs[0..n-1], exactly as its installer allocates them (NULL: none). The session's
	 * memory check, `clpipe plan` and `clpipe bench --memory` add it. */
	int64_t (*own_bytes)(const clp_param_table *const *tabs, int n);
	/* Also the K-FAC factors and inverses of its layers (clp_model_mem.kfac_bytes), and the
	 * factor and inversion work the planner's costs and the serial cycle rule count. */
	int curvature;
	/* Extra work of its step per layer, as a multiple of the layer's forward and backward
	 * of one micro-batch of `tokens` tokens (the planner's optimizer-step cost; NULL: none
	 * beyond the elementwise update the block tables time). */
	double (*layer_work)(const clp_train_config *c, const clp_model_config *m, size_t tokens);
	int pipefisher;       /* its work can go into the bubbles (pipeline.pipefisher) */
	int prep;             /* its step has an early part (the hooks' prep) the training
			       * schedule places where the gradients are final (OPT_PREP,
			       * clp_sched_place_prep): in a pipeline's cool-down bubbles */
	int skippipe;         /* runs pipeline.schedule = "skippipe" (dataflow ranks) */
	unsigned precisions;  /* the train.precision values it runs with: 1u << clp_dtype */
	const char *precision_why; /* why not the others, for the message */
} clp_optim_info;

/* The entry of kind k (from clp_train_optim_kind); NULL for a value that is not a kind. */
const clp_optim_info *clp_optim_info_of(clp_optim_kind k);

#endif
