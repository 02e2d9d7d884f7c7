/* clpipe train over ULFM: when a rank is lost the survivors revoke every communicator (the
 * transport does that on the first error), shrink the one the run used to its live ranks,
 * agree on the last step every survivor completed (an allgather over the survivors), drop the
 * step in flight, and go on in the same processes: the replicas that still hold every stage
 * form the new layout (fewer replicas, the same stages), a new session over them takes over
 * each rank's current weights, moments and optimizer state (session_ft.h), and training
 * continues to the planned step count. Ranks of a replica that lost a stage leave (exit 0).
 * SkipPipe: every survivor goes on, and the new session plans paths over the nodes left. A
 * plain pipeline or Chimera with no whole replica is re-planned (train_replan.c); other layouts
 * are not recovered here (the last checkpoint stays; tools/supervise.sh). */
#include "tools/train_ft.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/train/session_ft.h"
#include "tools/train_replan.h"

struct ft_info {
	int32_t old_rank, pad;
	int64_t done, applied;
	char pos[256];
};

double ft_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ft_follow(struct ft *ft, clp_session *s)
{
	ft->s = s;
	ft->done = clp_session_steps_done(s);
	ft->applied = clp_session_applied(s);
	clp_session_data_pos(s, ft->pos, sizeof(ft->pos));
}

void ft_mark(struct ft *ft, long done)
{
	if (!ft || !ft->s)
		return;
	ft->done = done;
	ft->applied = clp_session_applied(ft->s);
	clp_session_data_pos(ft->s, ft->pos, sizeof(ft->pos));
	if (ft->t_detect > 0 && ft->events > 0) {
		struct ft_event *e = &ft->ev[(ft->events - 1) % 8];

		e->seconds = clp_comm_now() - ft->t_detect;
		ft->t_detect = 0;
		printf("ft: step %ld, the first after the failure, completed %.2f s after it was "
		       "detected (at %.3f s since the epoch)\n", done, e->seconds, ft_wall());
		fflush(stdout);
	}
}

static void lost_list(const clp_comm *cur, const unsigned char *alive, char *buf, size_t n)
{
	size_t l = 0;

	buf[0] = '\0';
	for (int r = 0; r < clp_comm_size(cur) && l + 1 < n; r++)
		if (!alive[r])
			l += (size_t)snprintf(buf + l, n - l, "%srank %d (host %s)", l ? ", " : "",
					      r, clp_comm_peer_host(cur, r));
}

/* The replicas every one of whose ranks is alive; *nwhole of them. */
static void whole_replicas(const clp_session *s, const unsigned char *alive, int nranks,
			   unsigned char *whole, int *nwhole)
{
	int nrep = 0;

	for (int r = 0; r < nranks; r++)
		if (clp_session_replica(s, r) + 1 > nrep)
			nrep = clp_session_replica(s, r) + 1;
	for (int p = 0; p < nrep; p++)
		whole[p] = 1;
	for (int r = 0; r < nranks; r++)
		if (!alive[r] && clp_session_replica(s, r) >= 0)
			whole[clp_session_replica(s, r)] = 0;
	*nwhole = 0;
	for (int p = 0; p < nrep; p++)
		*nwhole += whole[p];
}

static clp_status no_replica(const char *lost, int left, const clp_train_config *cfg)
{
	return clp_error(CLP_ERR_PEER_LOST, "lost %s: no replica holds every stage any more "
			 "(re-planning the layout over the %d left is not done); the last "
			 "checkpoint under %s stays intact: resume from it (tools/supervise.sh "
			 "does)", lost, left, cfg->ckpt.dir[0] ? cfg->ckpt.dir
			 : "ckpt.dir (unset: none)");
}

clp_status ft_recover(struct ft *ft, clp_session **s, const clp_train_config *cfg, clp_comm *cur,
		      FILE *out, int *idle)
{
	int me = clp_comm_rank(cur), n = clp_comm_size(cur), nwhole = 0, ns_ = 0, from = -1;
	double t0 = clp_comm_now();
	clp_comm *nc = NULL, *cont = NULL;
	struct ft_info mine = {0}, *all = NULL;
	unsigned char *alive = calloc((size_t)n, 1), *whole = calloc((size_t)n + 1, 1);
	char why[512], lost[256], layout[160] = "", note[1408] = "";
	clp_train_config c2;
	clp_session *nsess = NULL;
	long agreed = -1;
	clp_status st = CLP_OK;
	int replan = 0, alone = 0, skip = 0;
	clp_cfg_ints nodes; /* SkipPipe: the survivors' nodes per stage */
	/* lost after this rank applied the step (during its evaluation or checkpoint) */
	int after = clp_session_completed(*s) > clp_session_steps_done(*s);

	int final = 0; /* a failure that another try would meet again (no replica holds ...) */

	*idle = 0;
	ft->retry = 0;
	snprintf(why, sizeof(why), "%s", clp_last_error());
	if (clp_session_completed(*s) > ft->done) { /* lost during the evaluation or save after a step */
		ft->done = clp_session_completed(*s);
		ft->applied = clp_session_applied(*s);
		clp_session_data_pos(*s, ft->pos, sizeof(ft->pos));
	}
	if (!alive || !whole) {
		free(alive);
		free(whole);
		return clp_error(CLP_ERR_NOMEM, "out of host memory recovering");
	}
	st = clp_session_can_take_over(*s); /* refused before anything is built */
	/* a plain pipeline (no replicas) re-plans over the survivors when no replica is whole */
	replan = st == CLP_OK && cfg->pipeline.replan && clp_session_plain_pipeline(*s);
	/* SkipPipe: a stage with several nodes has other holders; paths over the nodes left */
	skip = st == CLP_OK && clp_session_skip(*s);
	/* what this rank already knows: with no replica left whole there is nothing to agree
	 * on (and Open MPI 5.0.11's shrink to a single survivor does not return) */
	{
		int failed[64], nf = clp_comm_failed_ranks(cur, failed, 64);

		memset(alive, 1, (size_t)n);
		for (int i = 0; i < nf; i++)
			if (failed[i] >= 0 && failed[i] < n)
				alive[failed[i]] = 0;
		whole_replicas(*s, alive, n, whole, &nwhole);
		if (st == CLP_OK && nf > 0 && nwhole == 0 && !replan && !skip) {
			lost_list(cur, alive, lost, sizeof(lost));
			st = no_replica(lost, n - nf, cfg), final = 1;
		}
		alone = replan && nf == n - 1; /* every other rank is lost: no one to agree with */
		if (!alone)
			memset(alive, 0, (size_t)n);
	}
	if (st == CLP_OK && !alone)
		st = clp_comm_shrink(cur, &nc);
	if (st == CLP_OK && ft->die_in == ft->events + 1) { /* a test's second failure */
		fprintf(stderr, "CLPIPE_FAULT: rank %d dies in recovery %d, after the shrink (at %.3f "
			"s since the epoch)\n", me, ft->die_in, ft_wall());
		fflush(stderr);
		raise(SIGKILL);
	}
	if (st == CLP_OK)
		all = calloc(alone ? 1 : (size_t)clp_comm_size(nc), sizeof(*all));
	mine.old_rank = me;
	mine.done = ft->done;
	mine.applied = ft->applied;
	snprintf(mine.pos, sizeof(mine.pos), "%s", ft->pos);
	if (st == CLP_OK && !all)
		st = clp_error(CLP_ERR_NOMEM, "out of host memory recovering");
	/* who is left and what each completed: every survivor gets the same table */
	if (st == CLP_OK && alone)
		all[0] = mine;
	else if (st == CLP_OK)
		st = clp_comm_allgather(nc, &mine, sizeof(mine), all, "recovery: survivors' steps");
	if (st == CLP_OK) {
		ns_ = alone ? 1 : clp_comm_size(nc);
		for (int i = 0; i < ns_; i++) {
			alive[all[i].old_rank] = 1;
			if (agreed < 0 || all[i].done < agreed)
				agreed = all[i].done, from = i;
		}
		lost_list(cur, alive, lost, sizeof(lost));
		whole_replicas(*s, alive, n, whole, &nwhole);
		if (nwhole == 0 && !replan && !skip)
			st = no_replica(lost, ns_, cfg), final = 1;
	}
	if (st == CLP_OK && skip) { /* every survivor goes on, keeping its stage */
		st = clp_session_skip_survivors(*s, alive, &nodes);
		if (st != CLP_OK) {
			char msg[640];

			snprintf(msg, sizeof(msg), "%s", clp_last_error());
			final = 1;
			st = clp_error(st, "lost %s: %s; the last checkpoint under %s stays intact: "
				       "resume from it (tools/supervise.sh does)", lost, msg,
				       cfg->ckpt.dir[0] ? cfg->ckpt.dir : "ckpt.dir (unset: none)");
		} else {
			size_t l = (size_t)snprintf(layout, sizeof(layout), "SkipPipe, %d stages over "
						    "%d nodes [", nodes.n, ns_);

			for (int k = 0; k < nodes.n && l < sizeof(layout); k++)
				l += (size_t)snprintf(layout + l, sizeof(layout) - l, "%s%ld",
						      k ? ", " : "", nodes.v[k]);
			if (l < sizeof(layout))
				snprintf(layout + l, sizeof(layout) - l, "] per stage");
			cont = nc;
			nc = NULL;
		}
	} else if (st == CLP_OK && nwhole == 0) { /* no other holder: re-plan, reload the lost stage */
		struct ft_agreed a = {me, agreed, (long)all[from].applied, all[from].pos, lost};
		struct ft_replanned *res = calloc(1, sizeof(*res));

		st = res ? ft_replan(*s, cfg, &nc, alive, &a, out, res)
			 : clp_error(CLP_ERR_NOMEM, "out of host memory recovering");
		if (st == CLP_OK) {
			nsess = res->sess;
			cont = res->cont;
			snprintf(layout, sizeof(layout), "%s", res->layout);
			snprintf(note, sizeof(note), "; %s", res->note);
		}
		free(res);
	} else if (st == CLP_OK) {
		int mine_whole = whole[clp_session_replica(*s, me)];

		st = clp_comm_split(nc, mine_whole ? 0 : -1, me, &cont);
		if (st == CLP_OK && !cont) {
			printf("ft: rank %d (host %s): lost %s during step %ld; %d survivors agreed on "
			       "step %ld; this rank's replica lost a stage, so it leaves the run\n",
			       me, clp_comm_host(cur), lost, agreed + 1, ns_, agreed);
			fflush(stdout);
			clp_session_close(*s);
			*s = NULL;
			*idle = 1;
		}
	}
	if (st == CLP_OK && cont && !nsess) {
		c2 = *cfg;
		c2.pipeline.replicas = skip ? 1 : nwhole;
		if (skip) /* the new session's path scheduler plans over the nodes left */
			c2.skip.stage_nodes = nodes;
		c2.ckpt.resume = 0;
		c2.pipeline.pipefisher_schedule[0] = '\0'; /* a saved cycle is the old layout's */
		st = clp_session_open_bare(&nsess, &c2, cont, out);
		if (st == CLP_OK)
			st = clp_session_take_over(nsess, *s, agreed, (long)all[from].applied,
						   all[from].pos);
		if (st == CLP_OK && mine.done > agreed)
			printf("ft: rank %d had completed step %ld, which another survivor had not: "
			       "its update of that step is kept\n", me, (long)mine.done);
	}
	if (st == CLP_OK && cont) {
		struct ft_event *e = &ft->ev[ft->events % 8];

		clp_session_close(*s);
		*s = nsess;
		nsess = NULL;
		e->step = agreed;
		snprintf(e->lost, sizeof(e->lost), "%s", lost);
		if (layout[0])
			snprintf(e->layout, sizeof(e->layout), "%s", layout);
		else
			snprintf(e->layout, sizeof(e->layout), "%ld stages x %d replica%s over %d "
				 "ranks", cfg->pipeline.stages, nwhole, nwhole == 1 ? "" : "s",
				 clp_comm_size(cont));
		e->seconds = clp_comm_now() - t0;
		printf("ft: rank %d (host %s), now rank %d: lost %s during step %ld (%s); %d "
		       "survivor%s agreed on step %ld, step %ld is %s; new layout %s%s; "
		       "recovered in %.2f s\n", me, clp_comm_host(cur), clp_comm_rank(cont), lost,
		       agreed + 1, why, ns_, ns_ == 1 ? "" : "s", agreed, agreed + 1,
		       after && agreed == ft->done ? "next" : "redone", e->layout, note, e->seconds);
		fflush(stdout);
		ft->events++;
		ft->t_detect = t0;
		if (ft->cont)
			clp_comm_free(ft->cont);
		ft->cont = cont;
		cont = NULL;
		ft_follow(ft, *s);
	}
	if (st != CLP_OK) {
		/* a peer lost in the recovery's own calls (shrink, allgather, the new session) */
		ft->retry = st == CLP_ERR_PEER_LOST && !final;
		clp_error_context(st, "rank %d recovering from a lost rank (%s): ", me, why);
	}
	clp_session_close(nsess);
	clp_comm_free(cont);
	clp_comm_free(nc);
	free(all);
	free(alive);
	free(whole);
	return st;
}

void ft_summary(const struct ft *ft, FILE *out)
{
	if (!ft->events)
		return;
	fprintf(out, "failures survived: %d\n", ft->events);
	for (int i = 0; i < ft->events && i < 8; i++)
		fprintf(out, "  after step %ld: lost %s; went on as %s; first step %.2f s after "
			"the failure was detected\n", ft->ev[i].step, ft->ev[i].lost,
			ft->ev[i].layout, ft->ev[i].seconds);
}

void ft_free(struct ft *ft)
{
	clp_comm_free(ft->cont);
	ft->cont = NULL;
}
