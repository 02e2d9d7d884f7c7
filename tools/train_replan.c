/* A lost stage with no other holder under ULFM (train_replan.h): the survivors of a plain
 * pipeline re-plan the layout over themselves. Each run of lost stages goes to the survivors
 * either side of it (a split point inside the run), so every survivor keeps the layers it
 * holds, in memory; the candidate splits are tried from the most even (fewest layers on the
 * fullest stage), each survivor checks its new stage against its device's memory (the
 * planner's model, before anything is allocated) and one allgather picks the first split every
 * survivor can hold. The new session over the survivors takes the tensors this rank held from
 * its old session and the lost stage's from the last complete checkpoint. */
#include "tools/train_replan.h"

#include <stdlib.h>
#include <string.h>

#include "engine/train/session_ft.h"

#define MAXC 256 /* candidate splits tried */

struct plan {
	int n, ns;           /* old ranks (= stages), survivors */
	int nl[CLP_CFG_MAX_INTS], first[CLP_CFG_MAX_INTS];
	int runs, ra[CLP_CFG_MAX_INTS], rb[CLP_CFG_MAX_INTS]; /* runs of lost stages a..b */
	int ncand;
	long lay[MAXC][CLP_CFG_MAX_INTS]; /* layers per new stage, per candidate */
	int worst[MAXC];
	int chimera;     /* old rank r's twin (its up pipeline's copy of stage r) is rank n-1-r */
	int twin[MAXC];  /* Chimera: lost layers that go to the survivor holding their twin */
};

/* The survivor holding old stage r's layers in candidate split p[] (p[k]: the first stage of
 * run k that goes right); its new rank. */
static int holder_old(const struct plan *pl, const int *p, int r)
{
	int to = r;

	for (int k = 0; k < pl->runs; k++)
		if (r >= pl->ra[k] && r <= pl->rb[k])
			to = r < p[k] ? pl->ra[k] - 1 : pl->rb[k] + 1;
	return to;
}

static int holder(const struct plan *pl, const unsigned char *alive, const int *p, int r)
{
	int to = holder_old(pl, p, r), nr = 0;

	for (int q = 0; q < to; q++)
		nr += alive[q];
	return nr;
}

static void add_candidate(struct plan *pl, const unsigned char *alive, const int *p)
{
	long *lay = pl->lay[pl->ncand];
	int w = 0;

	memset(lay, 0, sizeof(pl->lay[0]));
	pl->twin[pl->ncand] = 0;
	for (int r = 0; r < pl->n; r++) {
		lay[holder(pl, alive, p, r)] += pl->nl[r];
		if (pl->chimera && !alive[r] && holder_old(pl, p, r) == pl->n - 1 - r)
			pl->twin[pl->ncand] += pl->nl[r];
	}
	for (int i = 0; i < pl->ns; i++)
		w = lay[i] > w ? (int)lay[i] : w;
	pl->worst[pl->ncand++] = w;
}

/* Every split of every run (the product, at most MAXC). */
static void enumerate(struct plan *pl, const unsigned char *alive, int k, int *p)
{
	int lo, hi;

	if (pl->ncand >= MAXC)
		return;
	if (k == pl->runs) {
		add_candidate(pl, alive, p);
		return;
	}
	/* p[k] = ra: all of the run goes right, rb + 1: all left */
	lo = pl->rb[k] == pl->n - 1 ? pl->rb[k] + 1 : pl->ra[k]; /* no survivor right of it */
	hi = pl->ra[k] == 0 ? pl->ra[k] : pl->rb[k] + 1;         /* none left of it */
	for (p[k] = lo; p[k] <= hi; p[k]++)
		enumerate(pl, alive, k + 1, p);
}

static clp_status make_plan(clp_session *s, const unsigned char *alive, struct plan *pl)
{
	int p[CLP_CFG_MAX_INTS];

	memset(pl, 0, sizeof(*pl));
	pl->n = clp_session_nranks(s);
	pl->chimera = !strcmp(clp_session_config(s)->pipeline.schedule, "chimera");
	if (pl->n > CLP_CFG_MAX_INTS)
		return clp_error(CLP_ERR_UNSUPPORTED, "re-planning a pipeline of %d stages (at most "
				 "%d)", pl->n, CLP_CFG_MAX_INTS);
	for (int r = 0; r < pl->n; r++) {
		pl->nl[r] = clp_session_stage_layers(s, r, &pl->first[r]);
		pl->ns += alive[r];
		if (!alive[r] && (r == 0 || alive[r - 1])) {
			pl->ra[pl->runs] = r;
			pl->rb[pl->runs++] = r;
		} else if (!alive[r]) {
			pl->rb[pl->runs - 1] = r;
		}
	}
	enumerate(pl, alive, 0, p);
	/* Chimera: the most lost layers kept from twin copies first (their steps are not
	 * lost); then the most even; stable (insertion sort on a few candidates) */
	for (int i = 1; i < pl->ncand; i++)
		for (int j = i; j > 0 && (pl->twin[j] > pl->twin[j - 1] ||
					  (pl->twin[j] == pl->twin[j - 1] &&
					   pl->worst[j] < pl->worst[j - 1])); j--) {
			long t[CLP_CFG_MAX_INTS];
			int w = pl->worst[j], tw = pl->twin[j];

			memcpy(t, pl->lay[j], sizeof(t));
			memcpy(pl->lay[j], pl->lay[j - 1], sizeof(t));
			memcpy(pl->lay[j - 1], t, sizeof(t));
			pl->worst[j] = pl->worst[j - 1];
			pl->worst[j - 1] = w;
			pl->twin[j] = pl->twin[j - 1];
			pl->twin[j - 1] = tw;
		}
	return CLP_OK;
}

static void config_of(const struct plan *pl, int c, const clp_train_config *cfg,
		      clp_train_config *c2)
{
	*c2 = *cfg;
	c2->pipeline.stages = pl->ns;
	c2->pipeline.replicas = 1;
	c2->pipeline.layers.n = pl->ns;
	for (int i = 0; i < pl->ns; i++)
		c2->pipeline.layers.v[i] = pl->lay[c][i];
	c2->pipeline.layout[0] = '\0'; /* a plan's layout names the old ranks' devices */
	if (!strcmp(c2->pipeline.schedule, "chimera")) /* its twins are gone: one pipeline */
		snprintf(c2->pipeline.schedule, sizeof(c2->pipeline.schedule), "1f1b");
	c2->ckpt.resume = 0;
}

static void lost_stages(const struct plan *pl, const unsigned char *alive, char *buf, size_t n)
{
	size_t l = 0;

	buf[0] = '\0';
	for (int r = 0; r < pl->n && l + 1 < n; r++)
		if (!alive[r])
			l += (size_t)snprintf(buf + l, n - l, "%s%d (layers %d-%d)", l ? ", " : "", r,
					      pl->first[r], pl->first[r] + pl->nl[r] - 1);
}

clp_status ft_replan(clp_session *s, const clp_train_config *cfg, clp_comm **nc,
		     const unsigned char *alive, const struct ft_agreed *a, FILE *out,
		     struct ft_replanned *res)
{
	struct plan *pl = calloc(1, sizeof(*pl));
	int me = 0, ns, chosen = -1;
	unsigned char *fits = NULL, *all = NULL;
	char why[1024] = "", stages[256];
	clp_train_config c2;
	clp_ft_reload r;
	clp_status st;

	memset(res, 0, sizeof(*res));
	if (!pl)
		return clp_error(CLP_ERR_NOMEM, "out of host memory re-planning");
	st = make_plan(s, alive, pl);
	ns = pl->ns;
	for (int q = 0; q < a->old_rank; q++)
		me += alive[q];
	lost_stages(pl, alive, stages, sizeof(stages));
	fits = calloc(MAXC, 1);
	all = calloc((size_t)MAXC * (size_t)ns, 1);
	if (st == CLP_OK && (!fits || !all))
		st = clp_error(CLP_ERR_NOMEM, "out of host memory re-planning");
	for (int c = 0; st == CLP_OK && c < pl->ncand; c++) { /* this rank's device, each split */
		config_of(pl, c, cfg, &c2);
		fits[c] = clp_session_layout_fits(s, &c2, ns, me) == CLP_OK;
		if (!fits[c] && !why[0])
			snprintf(why, sizeof(why), "%s", clp_last_error());
		clp_error_clear();
	}
	if (st == CLP_OK && ns > 1)
		st = clp_comm_allgather(*nc, fits, MAXC, all, "recovery: which layouts fit");
	else if (st == CLP_OK)
		memcpy(all, fits, MAXC);
	for (int c = 0; st == CLP_OK && chosen < 0 && c < pl->ncand; c++) {
		int ok = 1;

		for (int q = 0; q < ns; q++)
			ok &= all[(size_t)q * MAXC + (size_t)c];
		if (ok)
			chosen = c;
	}
	if (st == CLP_OK && chosen < 0)
		st = clp_error(CLP_ERR_NOMEM, "lost %s: no replica holds stage%s %s, and the %d "
			       "survivor%s cannot hold the model in any of %d layout%s (%s); the last "
			       "checkpoint under %s stays intact", a->lost, strchr(stages, ',') ? "s"
			       : "", stages, ns, ns == 1 ? "" : "s", pl->ncand, pl->ncand == 1 ? ""
			       : "s", why[0] ? why : "another survivor's device is too small: see "
			       "its message", cfg->ckpt.dir[0] ? cfg->ckpt.dir : "ckpt.dir (unset: "
			       "none)");
	if (st == CLP_OK && ns == 1) /* alone: no shrink (Open MPI 5.0.11's to one rank hangs) */
		st = clp_comm_self(&res->cont);
	else if (st == CLP_OK) {
		res->cont = *nc;
		*nc = NULL;
	}
	if (st == CLP_OK) {
		config_of(pl, chosen, cfg, &c2);
		st = clp_session_open_bare(&res->sess, &c2, res->cont, out);
	}
	if (st == CLP_OK)
		st = clp_session_take_over_lost(res->sess, s, a->step, a->applied, a->pos, &r);
	/* a tied embedding's two copies: when only one of its old holders (stage 0, the head)
	 * survived, the other new holder took it from the checkpoint: the survivor's goes over */
	if (st == CLP_OK && clp_session_tied(s) && ns > 1 && alive[0] != alive[pl->n - 1])
		st = clp_session_tied_sync(res->sess, alive[0] ? 0 : ns - 1);
	if (st == CLP_OK) {
		size_t l = (size_t)snprintf(res->layout, sizeof(res->layout), "%d stage%s x 1 "
					    "replica over %d rank%s, layers [", ns, ns == 1 ? ""
					    : "s", ns, ns == 1 ? "" : "s");

		for (int i = 0; i < ns && l + 8 < sizeof(res->layout); i++)
			l += (size_t)snprintf(res->layout + l, sizeof(res->layout) - l, "%s%ld",
					      i ? ", " : "", pl->lay[chosen][i]);
		snprintf(res->layout + l, sizeof(res->layout) - l, "]");
		if (!r.from_ckpt && !r.from_init && !strcmp(cfg->pipeline.schedule, "chimera"))
			snprintf(res->note, sizeof(res->note), "stage%s %s re-planned; this rank "
				 "held all its %d tensors of the new layout in memory (step %ld, "
				 "Chimera's twin copies): none of their steps lost",
				 strchr(stages, ',') ? "s" : "", stages, r.from_memory, a->step);
		else if (r.ckpt_step >= 0)
			snprintf(res->note, sizeof(res->note), "no other holder of stage%s %s: "
				 "re-planned; this rank's %d tensors it held from memory (step %ld), "
				 "%d from %.900s (step %ld: %ld step%s of theirs lost)",
				 strchr(stages, ',') ? "s" : "", stages, r.from_memory, a->step,
				 r.from_ckpt, r.ckpt, r.ckpt_step, a->step - r.ckpt_step,
				 a->step - r.ckpt_step == 1 ? "" : "s");
		else
			snprintf(res->note, sizeof(res->note), "no other holder of stage%s %s: "
				 "re-planned; this rank's %d tensors it held from memory (step %ld), "
				 "%d initialised (no checkpoint yet: the lost layers start again)",
				 strchr(stages, ',') ? "s" : "", stages, r.from_memory, a->step,
				 r.from_init);
		if (r.optim[0] + r.optim[1] + r.optim[2]) {
			size_t e = strlen(res->note);

			snprintf(res->note + e, sizeof(res->note) - e, "; the optimizer's own "
				 "state: %d tensors from memory, %d from the checkpoint, %d "
				 "initialised", r.optim[0], r.optim[1], r.optim[2]);
		}
	}
	if (st != CLP_OK) {
		clp_session_close(res->sess);
		res->sess = NULL;
		clp_comm_free(res->cont);
		res->cont = NULL;
	}
	free(fits);
	free(all);
	free(pl);
	return st;
}
