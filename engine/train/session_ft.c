/* A survivor's new session takes over the old one's state (session_ft.h). */
#include "engine/train/session_ft.h"
#include "engine/train/session_internal.h"

#include <stdlib.h>
#include <string.h>

void clp_session_data_pos(const clp_session *s, char *buf, size_t n)
{
	if (s->ds)
		clp_dataset_pos_str(s->ds, buf, n);
	else if (n)
		buf[0] = '\0';
}

int clp_session_nranks(const clp_session *s)
{
	return s->sched ? s->sched->nranks : 1;
}

int clp_session_replica(const clp_session *s, int rank)
{
	if (!s->sched || rank < 0 || rank >= s->sched->nranks)
		return -1;
	return s->sched->ranks[rank].replica;
}

long clp_session_applied(const clp_session *s)
{
	return s->applied;
}

long clp_session_completed(const clp_session *s)
{
	return s->completed > s->step ? s->completed : s->step;
}

void clp_session_set_save_hook(clp_session *s, void (*fn)(void *ud, long step), void *ud)
{
	s->save_hook = fn;
	s->save_hook_ud = ud;
}

/* The local stage of src holding global stage id `id` (-1: none). */
static int find_stage(const clp_exec *e, int id)
{
	for (int i = 0; i < clp_exec_nstages(e); i++)
		if (clp_exec_stage_id(e, i) == id)
			return i;
	return -1;
}

static clp_status copy_stage(clp_stage *to, clp_stage *from)
{
	const clp_param_table *t = clp_stage_table(from);
	static const clp_stage_what what[3] = {CLP_ST_PARAM, CLP_ST_ADAM_M, CLP_ST_ADAM_V};
	clp_status st = CLP_OK;

	if (clp_stage_table(to)->ntensors != t->ntensors)
		return clp_error(CLP_ERR_INVALID, "taking over a stage: %d tensors, the new one has "
				 "%d", t->ntensors, clp_stage_table(to)->ntensors);
	for (int k = 0; st == CLP_OK && k < t->ntensors; k++) {
		float *h = malloc(t->tensors[k].numel * sizeof(float) + 1);

		if (!h)
			return clp_error(CLP_ERR_NOMEM, "out of host memory taking over %s",
					 t->tensors[k].name);
		for (int j = 0; st == CLP_OK && j < 3; j++) {
			st = clp_stage_read(from, what[j], k, h);
			if (st == CLP_OK)
				st = clp_stage_write(to, what[j], k, h);
		}
		free(h);
	}
	return st;
}

clp_status clp_session_can_take_over(const clp_session *s)
{
	CLP_TRY(sess_check_mode(s, CLP_SESSION_TRAIN, -1, "clp_session_can_take_over"));
	return CLP_OK;
}

/* PipeFisher: the inputs and output gradients kept for a cycle's deferred factors live in the
 * old executor and are not carried over (nor saved: checkpoints fall at cycle ends), so the
 * agreed step must end a cycle of the old session and start one of the new. */
clp_status sess_pf_aligned(const clp_session *dst, const clp_session *src, long step)
{
	int K = st_pf_K(src), K2 = st_pf_K(dst);

	if ((K > 1 && step % K) || (K2 > 1 && step % K2))
		return clp_error(CLP_ERR_UNSUPPORTED, "the agreed step %ld lies inside a PipeFisher "
				 "cycle (K = %d, the new layout's K = %d): the data kept for its "
				 "deferred factors is not carried over; resume from the last "
				 "checkpoint (tools/supervise.sh does)", step, K, K2);
	return CLP_OK;
}

clp_status sess_take_over_rest(clp_session *dst, const clp_session *src, long step,
			       long applied, const char *data_pos)
{
	if (data_pos && data_pos[0])
		CLP_TRY(clp_dataset_restore(dst->ds, data_pos));
	if (dst->prec == CLP_F16) {
		float scale;
		long good;

		clp_exec_loss_scale(src->ex, &scale, &good);
		clp_exec_restore_loss_scale(dst->ex, scale, good);
	}
	dst->step = dst->completed = step;
	dst->applied = applied;
	return CLP_OK;
}

clp_status clp_session_take_over(clp_session *dst, clp_session *src, long step, long applied,
				 const char *data_pos)
{
	CLP_TRY(sess_check_mode(dst, CLP_SESSION_TRAIN, -1, "clp_session_take_over"));
	CLP_TRY(clp_session_can_take_over(src));
	CLP_TRY(sess_pf_aligned(dst, src, step));
	for (int i = 0; i < clp_exec_nstages(dst->ex); i++) {
		int id = clp_exec_stage_id(dst->ex, i), j = find_stage(src->ex, id);

		if (j < 0)
			return clp_error(CLP_ERR_INVALID, "rank %d: the new layout gives it stage %d, "
					 "which it did not hold", sess_rank(dst), id);
		CLP_TRY(copy_stage(clp_exec_stage(dst->ex, i, NULL), clp_exec_stage(src->ex, j,
										    NULL)));
		if (dst->no_init) /* every tensor is written: the rest of what init does */
			CLP_TRY(clp_stage_zero_grads(clp_exec_stage(dst->ex, i, NULL)));
	}
	dst->no_init = 0;
	{
		int counts[3];

		CLP_TRY(sess_ft_optim_copy(dst, src, 0, NULL, counts));
	}
	return sess_take_over_rest(dst, src, step, applied, data_pos);
}

int clp_session_skip(const clp_session *s)
{
	return s->skip;
}

/* The stage of the schedule's rank r: the lowest IR stage its list runs (a SkipPipe origin
 * runs stage 0 and the head); -1 when none. */
static int rank_stage(const clp_sched *sc, int r)
{
	int k = -1;

	for (int i = 0; i < sc->ranks[r].nops; i++) {
		const clp_op *op = &sc->ranks[r].ops[i];

		if (op->kind == CLP_OP_FWD && (k < 0 || op->stage < k))
			k = op->stage;
	}
	return k;
}

clp_status clp_session_skip_survivors(const clp_session *s, const unsigned char *alive,
				      clp_cfg_ints *nodes)
{
	const clp_sched *sc = s->sched;
	int S, prev = 0;

	if (!s->skip || !sc)
		return clp_error(CLP_ERR_STATE, "clp_session_skip_survivors: not a SkipPipe run");
	S = sc->nstages - 1; /* the head stage S is the origins' */
	if (S < 1 || S > CLP_CFG_MAX_INTS)
		return clp_error(CLP_ERR_STATE, "skippipe: %d stages", S);
	memset(nodes, 0, sizeof(*nodes));
	nodes->n = S;
	for (int r = 0; r < sc->nranks; r++) {
		int k = rank_stage(sc, r);

		if (k < 0 || k >= S)
			return clp_error(CLP_ERR_STATE, "skippipe: rank %d runs no stage", r);
		if (k < prev && s->cfg.skip.paths[0])
			return clp_error(CLP_ERR_UNSUPPORTED, "skippipe: the path set %s gives rank "
					 "%d stage %d after a rank of stage %d; paths over the nodes "
					 "left are planned for nodes in stage order (skip.stage_nodes)",
					 s->cfg.skip.paths, r, k, prev);
		prev = k;
		nodes->v[k] += alive[r] != 0;
	}
	for (int k = 0; k < S; k++)
		if (!nodes->v[k]) {
			int first = sc->stages[k].first_layer, nl = sc->stages[k].nlayers;

			return clp_error(CLP_ERR_UNSUPPORTED, "no node of SkipPipe stage %d (layers "
					 "%d-%d) is left: the survivors cannot hold the model", k,
					 first, first + nl - 1);
		}
	return CLP_OK;
}
