/* The optimizer's own state in a take-over (session_ft.h): what lives beyond the stages'
 * tensors (Shampoo's statistics, roots and their inverses; K-FAC's factors, active and next
 * inverses and its history flag, PipeFisher's double-buffered pair included) goes from a
 * survivor's old session to its new one through the optimizer's own checkpoint code (the
 * table's save and load hooks; K-FAC's per stage, engine/optim/kfac_ckpt.c), so the copy is the
 * state a checkpoint would carry, by name. The writer writes files: they go to a private
 * directory in memory (/dev/shm; where that fails, TMPDIR, then /tmp), removed at once. For
 * the copy every rank writes all it holds (clp_exec_save_all), not only what replica 0 saves.
 * A re-plan (no holder) merges: a tensor the survivor held comes from its old session, one of
 * the lost stage's from the last checkpoint, else the new session's initial state. */
#include "engine/train/session_ft.h"
#include "engine/train/session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/base/durable.h"
#include "engine/optim/kfac.h"

/* The places tried for the copy, in order: memory first. */
static const char *base_of(int i)
{
	const char *t = getenv("TMPDIR");

	return i == 0 ? "/dev/shm" : i == 1 ? (t && t[0] ? t : "/tmp") : "/tmp";
}

/* A private directory for one copy under base i. */
static clp_status tmp_root(int i, char *buf, size_t n)
{
	snprintf(buf, n, "%s/clpipe-ft-XXXXXX", base_of(i));
	if (access(base_of(i), W_OK) != 0 || !mkdtemp(buf)) {
		buf[0] = '\0';
		return clp_error(CLP_ERR_IO, "recovery: cannot make a private directory under %s "
				 "for the optimizer's state", base_of(i));
	}
	return CLP_OK;
}

/* Remove one copy, best effort (it is private and in a temporary place): a removal that fails
 * never replaces the error being returned. */
static void drop(char *root, clp_status pending)
{
	char keep[1024];

	if (!root[0])
		return;
	snprintf(keep, sizeof(keep), "%s", pending != CLP_OK ? clp_last_error() : "");
	if (clp_io_remove_tree(root) != CLP_OK) {
		if (pending != CLP_OK)
			clp_error(pending, "%s", keep);
		else
			clp_error_clear();
	}
	root[0] = '\0';
}

/* Every optimizer state s's rank holds, as a one-rank checkpoint under root (opened in *c). */
static clp_status save_all(clp_session *s, const char *root, clp_ckpt **c)
{
	const clp_exec_optim *ops = clp_exec_optim_ops(s->ex);
	clp_ckpt_writer *w = NULL;
	clp_status st = clp_ckpt_writer_create(&w, root, s->step, 0, 1);

	if (st == CLP_OK && s->optim->curvature) {
		for (int i = 0; st == CLP_OK && i < clp_exec_nstages(s->ex); i++) {
			clp_kfac_opt *k = clp_exec_kfac_opt(s->ex, i);

			st = k ? clp_kfac_opt_save(k, w)
			       : clp_error(CLP_ERR_STATE, "recovery: local stage %d has no K-FAC "
					   "state", i);
		}
	} else if (st == CLP_OK) {
		clp_exec_save_all(s->ex, 1);
		st = ops->save(s->ex, clp_exec_optim_state(s->ex), w);
		clp_exec_save_all(s->ex, 0);
	}
	if (st == CLP_OK)
		st = clp_ckpt_writer_write(w);
	if (st == CLP_OK)
		st = clp_ckpt_writer_commit(w, 0);
	if (st == CLP_OK)
		st = clp_ckpt_open(c, clp_ckpt_writer_dir(w));
	clp_ckpt_writer_free(w);
	return st;
}

static clp_status load_all(clp_session *s, clp_ckpt *c)
{
	if (s->optim->curvature) {
		for (int i = 0; i < clp_exec_nstages(s->ex); i++) {
			clp_kfac_opt *k = clp_exec_kfac_opt(s->ex, i);

			if (!k)
				return clp_error(CLP_ERR_STATE, "recovery: local stage %d of the new "
						 "session has no K-FAC state", i);
			CLP_TRY(clp_kfac_opt_load(k, c));
		}
		return CLP_OK;
	}
	return clp_exec_optim_ops(s->ex)->load(s->ex, clp_exec_optim_state(s->ex), c);
}

/* One tensor from the first of a, b, d that has it into the writer (host copy in *keep). */
static clp_status pick(clp_ckpt_writer *w, const clp_st_tensor *t, clp_ckpt *const from[3],
		       float **keep, int *which)
{
	if (!(*keep = malloc((size_t)t->numel * sizeof(float) + 1)))
		return clp_error(CLP_ERR_NOMEM, "out of host memory recovering %s", t->name);
	for (int i = 0; i < 3; i++) {
		const clp_st_tensor *f = from[i] ? clp_ckpt_find(from[i], CLP_CKPT_OPTIM, t->name)
						 : NULL;
		int same = f && f->ndim == t->ndim;

		for (int j = 0; same && j < t->ndim; j++)
			same = f->shape[j] == t->shape[j];
		if (!same)
			continue;
		*which = i;
		CLP_TRY(clp_ckpt_read(from[i], CLP_CKPT_OPTIM, t->name, *keep, t->ndim, t->shape));
		return clp_ckpt_writer_add(w, CLP_CKPT_OPTIM, t->name, *keep, t->ndim, t->shape);
	}
	return clp_error(CLP_ERR_NOT_FOUND, "recovery: optimizer tensor %s", t->name);
}

/* The merged state (from[0]: the survivor's old session, [1]: the last checkpoint or NULL, [2]:
 * the new session's initial state, which names every tensor it needs) under root. */
static clp_status merge(clp_session *dst, clp_ckpt *const from[3], const char *root,
			clp_ckpt **out, int counts[3])
{
	int n = clp_ckpt_count(from[2], CLP_CKPT_OPTIM);
	float **keep = calloc((size_t)n + 1, sizeof(float *));
	clp_ckpt_writer *w = NULL;
	const char *hist = clp_ckpt_meta(from[0], "kfac.has_history");
	clp_status st = keep ? clp_ckpt_writer_create(&w, root, dst->step, 0, 1)
			     : clp_error(CLP_ERR_NOMEM, "out of host memory recovering");

	if (st == CLP_OK && hist)
		st = clp_ckpt_writer_meta(w, "kfac.has_history", hist);
	for (int i = 0; st == CLP_OK && i < n; i++) {
		int which = 2;

		st = pick(w, clp_ckpt_tensor(from[2], CLP_CKPT_OPTIM, i), from, &keep[i], &which);
		counts[which]++;
	}
	if (st == CLP_OK)
		st = clp_ckpt_writer_write(w);
	if (st == CLP_OK)
		st = clp_ckpt_writer_commit(w, 0);
	if (st == CLP_OK)
		st = clp_ckpt_open(out, clp_ckpt_writer_dir(w));
	clp_ckpt_writer_free(w);
	for (int i = 0; keep && i < n; i++)
		free(keep[i]);
	free(keep);
	return st;
}

clp_status sess_ft_optim_copy(clp_session *dst, clp_session *src, int replan, clp_ckpt *ck,
			      int counts[3])
{
	const clp_exec_optim *ops = clp_exec_optim_ops(src->ex);
	char ra[1100] = "", rb[1100] = "", rc[1100] = "";
	clp_ckpt *a = NULL, *c = NULL, *m = NULL;
	clp_status st;
	int base;

	counts[0] = counts[1] = counts[2] = 0;
	if (!ops->save)
		return CLP_OK;
	if (clp_exec_optim_ops(dst->ex) != ops || !ops->load)
		return clp_error(CLP_ERR_STATE, "recovery: the new session's optimizer is %s, the "
				 "old one's %s", clp_exec_optim_ops(dst->ex)->name, ops->name);
	/* /dev/shm first; where it is missing or too small (a container's 64 MiB), TMPDIR, /tmp */
	for (base = 0; base < 3; base++) {
		st = tmp_root(base, ra, sizeof(ra));
		if (st == CLP_OK)
			st = save_all(src, ra, &a);
		if (st == CLP_OK)
			break;
		clp_ckpt_close(a);
		a = NULL;
		drop(ra, st);
		if (base < 2)
			clp_error_clear();
	}
	if (st == CLP_OK && !replan) { /* the same stages: the survivor's state as it is */
		st = load_all(dst, a);
		counts[0] = a ? clp_ckpt_count(a, CLP_CKPT_OPTIM) : 0;
		goto done;
	}
	/* a re-plan: what the new session needs, by name, from the old one, the checkpoint or
	 * its initialisation */
	if (st == CLP_OK)
		st = tmp_root(base, rc, sizeof(rc));
	if (st == CLP_OK)
		st = save_all(dst, rc, &c);
	if (st == CLP_OK)
		st = tmp_root(base, rb, sizeof(rb));
	if (st == CLP_OK) {
		clp_ckpt *const from[3] = {a, ck, c};

		st = merge(dst, from, rb, &m, counts);
	}
	if (st == CLP_OK)
		st = load_all(dst, m);
done:
	clp_ckpt_close(a);
	clp_ckpt_close(c);
	clp_ckpt_close(m);
	drop(ra, st);
	drop(rb, st);
	drop(rc, st);
	if (st != CLP_OK)
		clp_error_context(st, "recovery: the %s state: ", ops->name);
	return st;
}
