/* K-FAC in the executor (optim.name = "kfac"; docs/KFAC.md): the optimizer of
 * engine/optim/kfac.h installed as the executor's optimizer (exec_optim.h), written on the
 * executor's services (exec_env.h). Its per-step settings (clp_exec_step) are a
 * clp_nn_adamw_hp: its base optimizer's; the K-FAC layers' learning rate is hp->lr x lr_ratio. */
#ifndef CLP_EXEC_EXEC_KFAC_H
#define CLP_EXEC_EXEC_KFAC_H

#include "engine/exec/exec.h"
#include "engine/optim/kfac.h"

/* K-FAC instead of AdamW: one optimizer per local stage running the cycle rule serially, or
 * the schedule's K-FAC items where a PipeFisher pass put them. Before the first step. */
clp_status clp_exec_kfac(clp_exec *e, const clp_kfac_opts *o, float lr_ratio);
/* The K-FAC optimizer of local stage i (checkpoints, cost measurements), or NULL (another
 * optimizer runs). */
clp_kfac_opt *clp_exec_kfac_opt(const clp_exec *e, int i);

#endif
