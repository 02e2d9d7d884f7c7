/* A lost stage with no other holder (session_ft.h): the survivors' new layout checked against
 * each device's memory before anything is allocated, and the new session's tensors taken from
 * the old session where this rank held them, else from the last complete checkpoint (else
 * their initialisation: the state of step 0). */
#include "engine/train/session_ft.h"
#include "engine/train/session_internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/sched/gen.h"
#include "engine/train/hf.h"

int clp_session_plain_pipeline(const clp_session *s)
{
	const clp_sched *sc = s->sched;
	int kind = clp_sched_kind_parse(s->cfg.pipeline.schedule);

	if (s->mode != CLP_SESSION_TRAIN || s->skip || !sc || sc->nreplicas != 1 ||
	    sc->nchunks != 1 || sc->nstages != sc->nranks)
		return 0;
	/* Chimera: stage k on rank k (the down pipeline) and its twin on rank D - 1 - k; re-planned
	 * over the down pipeline's order as 1F1B, a lost stage's layers from a survivor's twin copy
	 * when the survivor they go to holds it */
	return kind == CLP_SCHED_GPIPE || kind == CLP_SCHED_1F1B || kind == CLP_SCHED_ZBH1 ||
	       kind == CLP_SCHED_CHIMERA;
}

int clp_session_stage_layers(const clp_session *s, int stage, int *first)
{
	if (!s->sched || stage < 0 || stage >= s->sched->nstages)
		return -1;
	*first = s->sched->stages[stage].first_layer;
	return s->sched->stages[stage].nlayers;
}

int clp_session_tied(const clp_session *s)
{
	return s->m.tied;
}

clp_status clp_session_layout_fits(clp_session *s, const clp_train_config *c, int nranks,
				   int rank)
{
	clp_sched *sc = NULL;
	clp_status st = sess_make_schedule(s, c, nranks, &sc);

	if (st == CLP_OK)
		st = sess_check_memory_at(s, sc, rank);
	clp_sched_free(sc);
	return st;
}

/* The local stage and tensor of src with that name (0: none). */
static int find_tensor(const clp_session *src, const char *name, clp_stage **st, int *k)
{
	for (int i = 0; i < clp_exec_nstages(src->ex); i++) {
		const clp_param_table *t = clp_stage_table(clp_exec_stage(src->ex, i, NULL));

		for (int j = 0; j < t->ntensors; j++)
			if (!strcmp(t->tensors[j].name, name)) {
				*st = clp_exec_stage(src->ex, i, NULL);
				*k = j;
				return 1;
			}
	}
	return 0;
}

static const clp_stage_what what[3] = {CLP_ST_PARAM, CLP_ST_ADAM_M, CLP_ST_ADAM_V};

/* Tensor k of stage `to`: from src's stage `from` (its tensor j), else from checkpoint c. */
static clp_status fill(clp_session *dst, clp_stage *to, int k, clp_stage *from, int j,
		       clp_ckpt *c, float *h)
{
	const clp_tensor_desc *d = &clp_stage_table(to)->tensors[k];
	int64_t shape[2] = {(int64_t)d->shape[0], (int64_t)d->shape[1]};
	static const char *const suffix[3] = {"", ".exp_avg", ".exp_avg_sq"};

	for (int w = 0; w < 3; w++) {
		if (from)
			CLP_TRY(clp_stage_read(from, what[w], j, h));
		else
			CLP_TRY(clp_hf_read(c, w ? CLP_CKPT_OPTIM : CLP_CKPT_MODEL, dst->m.preset,
					    d->name, suffix[w], h, d->ndim, shape));
		CLP_TRY(clp_stage_write(to, what[w], k, h));
	}
	return CLP_OK;
}

static clp_status take_steps(clp_session *dst, clp_session *src, clp_ckpt *c, clp_ft_reload *r)
{
	for (int i = 0; i < clp_exec_nstages(dst->ex); i++) {
		clp_stage *to = clp_exec_stage(dst->ex, i, NULL);
		const clp_param_table *t = clp_stage_table(to);

		for (int k = 0; k < t->ntensors; k++) {
			const clp_tensor_desc *d = &t->tensors[k];
			clp_stage *from = NULL;
			int j = 0;
			float *h;
			clp_status st;

			if (find_tensor(src, d->name, &from, &j)) {
				r->from_memory++;
			} else if (c) {
				from = NULL;
				r->from_ckpt++;
			} else { /* no checkpoint yet: the initialisation, zero moments (step 0) */
				r->from_init++;
				continue;
			}
			h = malloc(d->numel * sizeof(float) + 1);
			if (!h)
				return clp_error(CLP_ERR_NOMEM, "out of host memory taking over %s",
						 d->name);
			st = fill(dst, to, k, from, j, c, h);
			free(h);
			CLP_TRY(st);
		}
	}
	return CLP_OK;
}

clp_status clp_session_take_over_lost(clp_session *dst, clp_session *src, long step,
				      long applied, const char *data_pos, clp_ft_reload *r)
{
	clp_ckpt *c = NULL;
	clp_status st;

	memset(r, 0, sizeof(*r));
	r->ckpt_step = -1;
	CLP_TRY(sess_check_mode(dst, CLP_SESSION_TRAIN, -1, "clp_session_take_over_lost"));
	CLP_TRY(clp_session_can_take_over(src));
	CLP_TRY(clp_session_can_take_over(dst));
	CLP_TRY(sess_pf_aligned(dst, src, step));
	if (dst->cfg.ckpt.dir[0]) {
		st = clp_ckpt_open_latest(&c, dst->cfg.ckpt.dir);
		if (st == CLP_ERR_NOT_FOUND) {
			clp_error_clear();
			c = NULL;
		} else if (st == CLP_OK) {
			st = sess_check_identity(dst, c);
		}
		if (st != CLP_OK && st != CLP_ERR_NOT_FOUND) {
			clp_ckpt_close(c);
			return clp_error_context(st, "loading the lost stage: ");
		}
	}
	if (c) {
		r->ckpt_step = clp_ckpt_step(c);
		snprintf(r->ckpt, sizeof(r->ckpt), "%s", clp_ckpt_path(c));
	}
	st = CLP_OK;
	if (!c && dst->no_init) /* the lost layers keep their initialisation: make it */
		st = clp_exec_init_params(dst->ex, (uint64_t)dst->cfg.train.seed);
	else if (dst->no_init) /* every tensor is written below: the rest of what init does */
		for (int i = 0; st == CLP_OK && i < clp_exec_nstages(dst->ex); i++)
			st = clp_stage_zero_grads(clp_exec_stage(dst->ex, i, NULL));
	dst->no_init = 0;
	if (st == CLP_OK)
		st = take_steps(dst, src, c, r);
	if (st == CLP_OK) /* the optimizer's own state by name, the same way */
		st = sess_ft_optim_copy(dst, src, 1, c, r->optim);
	clp_ckpt_close(c);
	CLP_TRY(st);
	return sess_take_over_rest(dst, src, step, applied, data_pos);
}

/* This rank's token embedding (stage, tensor), 0 when it holds none. */
static int tok_emb(clp_session *s, clp_stage **st, int *k)
{
	for (int i = 0; i < clp_exec_nstages(s->ex); i++) {
		const clp_param_table *t = clp_stage_table(clp_exec_stage(s->ex, i, NULL));

		for (int j = 0; j < t->ntensors; j++)
			if (t->tensors[j].role == CLP_R_TOK_EMB) {
				*st = clp_exec_stage(s->ex, i, NULL);
				*k = j;
				return 1;
			}
	}
	return 0;
}

clp_status clp_session_tied_sync(clp_session *s, int from)
{
	int me = sess_rank(s), n = clp_comm_size(s->comm), other = from == 0 ? n - 1 : 0, k = 0;
	clp_stage *st = NULL;
	clp_status e = CLP_OK;
	float *h;
	size_t numel;

	if (!s->m.tied || n < 2 || (me != from && me != other) || !tok_emb(s, &st, &k))
		return CLP_OK;
	numel = clp_stage_table(st)->tensors[k].numel;
	h = malloc(3 * numel * sizeof(float) + 1);
	if (!h)
		return clp_error(CLP_ERR_NOMEM, "out of host memory for the tied embedding");
	for (int w = 0; me == from && e == CLP_OK && w < 3; w++)
		e = clp_stage_read(st, what[w], k, h + w * numel);
	if (e == CLP_OK) {
		clp_comm_req *rq = NULL;

		e = me == from ? clp_comm_isend(s->comm, h, 3 * numel * sizeof(float), other, 0,
						"recovery: the tied embedding", &rq)
			       : clp_comm_irecv(s->comm, h, 3 * numel * sizeof(float), from, 0,
						"recovery: the tied embedding", &rq);
		if (e == CLP_OK)
			e = clp_comm_wait(s->comm, &rq, 0);
	}
	for (int w = 0; me != from && e == CLP_OK && w < 3; w++)
		e = clp_stage_write(st, what[w], k, h + w * numel);
	free(h);
	return e;
}
