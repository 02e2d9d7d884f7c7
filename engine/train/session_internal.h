/* The session's state, shared by the session_*.c files: session.c (opening, closing),
 * session_ckpt.c (checkpoints), session_train.c (the step loop, evaluation, logging),
 * session_sample.c (sampling), session_report.c, and the pieces named below. */
#ifndef CLP_TRAIN_SESSION_INTERNAL_H
#define CLP_TRAIN_SESSION_INTERNAL_H

#include <signal.h>
#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/data/mask.h"
#include "engine/data/tokenizer.h"
#include "engine/io/checkpoint.h"
#include "engine/exec/exec.h"
#include "engine/exec/exec_kfac.h"
#include "engine/exec/exec_optim.h"
#include "engine/model/stage.h"
#include "engine/sched/sched.h"
#include "engine/train/optim_kind.h"
#include "engine/train/session.h"
#include "topology/comm/comm.h"

struct clp_session {
	clp_train_config cfg;
	enum clp_session_mode mode;
	FILE *out, *log;
	clp_model_config m;
	clp_cl_ctx *ctx;
	clp_tok *tok;
	clp_dataset *ds;
	clp_comm *comm;       /* the job's ranks (a one-rank stand-in when alone) */
	int own_comm;
	clp_sched *sched;     /* train and eval: the schedule the executor runs */
	clp_exec *ex;
	clp_stage *st;        /* sample: one stage of batch 1 */
	size_t B, T, N;       /* micro-batch */
	clp_dtype prec;       /* train.precision */
	const clp_optim_info *optim; /* optim.name's kind (sess_optim_kind) */
	float last_scale;     /* fp16: the loss scale of the last step logged (0: none yet) */
	int M;                /* micro-batches per replica per step */
	int R;                /* replicas */
	int32_t *in, *tg, *types; /* (R * M, N): the whole step, every replica */
	long step;      /* next step to run */
	long applied;   /* optimizer steps taken (skipped ones excluded) */
	double baseline_bpb, bytes_per_token;
	uint64_t eval_tokens; /* targets of the last evaluation */
	int bert, byte_level;
	void (*hook)(void *ud, long step);
	void *hook_ud;
	void (*save_hook)(void *ud, long step); /* session_ft.h: tests of a failed save */
	void *save_hook_ud;
	long completed; /* steps whose update was applied (ahead of step during its save) */
	int no_init;    /* opened for a take-over: tensors left uninitialised (session_ft.h) */
	void (*logger)(void *ud, const clp_session_step *rec); /* rank 0 */
	void *logger_ud;
	int32_t specials[8], mask_id;
	int nspecial;
	/* pipeline.schedule = "skippipe" (session_skip.c) */
	int skip;
	int *mb_div;          /* [M] micro-batches of each micro-batch's origin */
	float *inv_mb;        /* [M] this step's loss weights (clp_exec_data.inv_mb) */
	clp_stage *eval_st;   /* rank 0: the whole model, gathered for evaluation */
	struct sess_report *report; /* rank 0 of a training run: curve, summary (session_report.c) */
	/* stopping on a signal and saving by the clock (session_train.c) */
	volatile sig_atomic_t *stop_flag; /* set by the caller's signal handler (NULL: none) */
	int stopped;          /* the signal that stopped the run at a step boundary (0: none) */
	int stop_rank;        /* the rank that saw it first */
	double t_saved;       /* clp_now() of the last checkpoint (or the run's start) */
	char last_ckpt[1100]; /* the checkpoint this run saved last ("": none) */
	double build_s;       /* seconds of kernel builds during the run (a cold cache) */
	unsigned char *frozen;     /* train.freeze, LoRA: per tensor of the whole model, 1 = not
				    * trained (the stages allocate no gradient or moments for
				    * it); NULL: all trained (sess_freeze) */
	unsigned char *init_fresh; /* train.init: per tensor of the whole model, 1 = not in the
				    * file, initialised (LoRA trains these too) */
};

/* session_ckpt.c: save a checkpoint of this step (every rank; rank 0 commits it); check a
 * checkpoint's identity against the session's model; load every stage's parameters (and with
 * optim, AdamW's moments: session_load.c); resume from the latest complete checkpoint under
 * ckpt.dir (none: start fresh). */
clp_status sess_save(clp_session *s);
clp_status sess_check_identity(clp_session *s, clp_ckpt *c);
clp_status sess_resume(clp_session *s);
/* ckpt_config.c: eval and sample take the tokenizer, data, batch, sequence length, precision
 * and evaluation size of the run from base (the checkpoint's stored config) unless given, its
 * relative paths found from the checkpoint ckpt's directory or its parents; origin names it. */
clp_status sess_inherit_run(clp_session *s, const clp_train_config *base, const char *ckpt,
			    const char *origin);
/* session_load.c: open the checkpoint or model directory at path and take the model (and the
 * tokenizer; eval and sample: also the data and stage map when not given) from its stored
 * config or config.json, each setting checked against the configured one. train: for
 * train.init. */
clp_status sess_config_from(clp_session *s, const char *path, int train, clp_ckpt **cp);
/* Every stage's parameters (optim: and AdamW moments) from c, strictly. */
clp_status sess_load_tensors(clp_session *s, clp_ckpt *c, int optim);
/* train.init (and eval of a foreign file): the parameters c holds, shapes checked; those it
 * lacks keep their initialisation and are listed by name in one line, the file's tensors the
 * model does not use in another. heads_only: only head tensors may be missing. */
clp_status sess_load_init(clp_session *s, clp_ckpt *c, int heads_only);
/* Its two halves: the tensors the file lacks (s->init_fresh) and has unused, listed (before
 * the stages exist: sess_freeze needs init_fresh); then the load into the stages. */
clp_status sess_init_list(clp_session *s, clp_ckpt *c, int heads_only);
clp_status sess_init_load(clp_session *s, clp_ckpt *c);
/* session_freeze.c: train.freeze and LoRA's frozen base as s->frozen (each pattern must match
 * a tensor; AdamW only), before the stages are made (after sess_init_list); says how many
 * parameters remain trained. */
clp_status sess_freeze(clp_session *s);
/* eval and sample: every tensor frozen, so the stages hold weights only (no gradients, no
 * optimizer moments), as the memory check counts them. */
clp_status sess_weights_only(clp_session *s);
/* A mask (clp_stage_opts.frozen) freezing every tensor of model m, to free(). */
clp_status sess_all_frozen(const clp_model_config *m, unsigned char **out);
/* model.lora_targets as linears (bit l: clp_stage_linear l) of model m ("": all four). */
clp_status sess_lora_mask(const clp_model_config *m, const char *targets, unsigned *mask);
/* CLP_ERR_STATE naming the call unless the session was opened in mode a or b (-1: none). */
clp_status sess_check_mode(const clp_session *s, int a, int b, const char *call);

/* optim_kind.c's table for this session's optim.name (s->optim), parsed once at opening. */
clp_status sess_optim_kind(clp_session *s);
/* session_kfac.c: optim.name = "kfac" (the executor runs it and saves its state) */
void sess_kfac_opts(const clp_session *s, clp_kfac_opts *o);
clp_status sess_kfac_open(clp_session *s);
/* session_pf.c: pipeline.pipefisher. sess_pf_plan replaces the one-step schedule s->sched by
 * the K-step cycle (and sets kfac.interval); st_pf_K is K (0: PipeFisher off); the cycle goes
 * into checkpoints; a resumed run must start at a cycle boundary. */
clp_status sess_pf_plan(clp_session *s);
int st_pf_K(const clp_session *s);
clp_status sess_pf_save(clp_session *s, clp_ckpt_writer *w);
clp_status sess_pf_resumed(const clp_session *s);
/* session_ft_optim.c: the optimizer's own state (the table's save hook; K-FAC's per stage) of
 * src's rank into dst's, for a take-over in the same process. replan 0: the same stages, all
 * from src; 1: by name from src, else from checkpoint ck (NULL: none), else dst's initial
 * state; counts[0..2] say how many tensors came from each. */
/* session_ft.c: CLP_ERR_UNSUPPORTED unless step ends a PipeFisher cycle of src and dst. */
clp_status sess_pf_aligned(const clp_session *dst, const clp_session *src, long step);
clp_status sess_ft_optim_copy(clp_session *dst, clp_session *src, int replan, clp_ckpt *ck,
			      int counts[3]);
/* train.precision as a storage type (the schema allows only fp32, bf16 and fp16). */
clp_dtype sess_precision(const clp_train_config *c);
/* Rank 0 prints; the others are quiet. */
int sess_rank(const clp_session *s);
/* session_mem.c: refuse, before any device allocation, stages that cannot fit on the device
 * (the planner's memory model against the device's memory), naming the setting to lower */
clp_status sess_check_memory(clp_session *s);
/* The same for rank `rank` of schedule sched (a layout the session may move to: ft re-plan). */
clp_status sess_check_memory_at(clp_session *s, const clp_sched *sched, int rank);
/* The schedule of config c over nranks ranks (s gives the model and the micro-batches). */
clp_status sess_make_schedule(const clp_session *s, const clp_train_config *c, int nranks,
			      clp_sched **out);

/* session_skip.c: the path set and its schedule (sets s->sched, s->M = all micro-batches of a
 * step, s->R = 1); the step's per-micro-batch loss weights from its targets; evaluation of the
 * whole model, gathered on rank 0 (every rank gets the loss); freeing. */
clp_status sess_skip_schedule(clp_session *s);
void sess_skip_scales(clp_session *s);
clp_status sess_skip_eval_begin(clp_session *s);
clp_status sess_skip_eval_forward(clp_session *s, float inv_count, double *loss);
clp_status sess_skip_eval_end(clp_session *s, double *loss);
void sess_skip_free(clp_session *s);

/* session_report.c: what a training run shows besides its log, on rank 0 (others: no-ops).
 * begin at the start of clp_session_train (a resumed run's curve starts from its log); step
 * after each step; eval after each evaluation (rewrites the loss curve); end after the last
 * checkpoint (the summary's facts); free from close. */
clp_status sess_report_begin(clp_session *s);
void sess_report_step(clp_session *s, long step, double loss, double tok_s);
void sess_report_eval(clp_session *s, long step, double loss, double bpb);
void sess_report_end(clp_session *s);
/* The terminal width for the status line (progress.h); 0: plain lines (a pipe, a file, a rank
 * other than 0, or a job under mpirun, which forwards output through ptys). */
int sess_tty(const clp_session *s);
void sess_report_free(clp_session *s);
/* The end of a take-over (session_ft.c, session_replan.c): the survivors' data position, fp16
 * loss scale and step counters into dst. */
clp_status sess_take_over_rest(clp_session *dst, const clp_session *src, long step,
			       long applied, const char *data_pos);

#endif
