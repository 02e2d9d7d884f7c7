/* Signals during a training run (see train_lost.h). The first SIGINT/SIGTERM (Ctrl-C; Slurm's
 * and mpirun's termination signal) only sets the session's stop flag and says so; the session
 * ends the run at the step's end with a checkpoint. A second one, or one that comes while the
 * job is being torn down, stops at once with the line of what was lost: the rank and stages,
 * the step that was running, and the checkpoint to resume from. The lines are composed after
 * every step (outside the handler), which only write()s them: async-signal-safe. */
#include "tools/train_lost.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char heads[2][800], first_tails[2][2600], tails[2][2400];
static volatile sig_atomic_t cur = -1, stop_sig;
static char role[512];
static int rank_, nranks_;
static const clp_session *sess;

static void put(const char *s)
{
	ssize_t w = write(2, s, strlen(s));

	(void)w;
}

static void on_signal(int sig)
{
	char num[16];
	int c = cur, k = (int)sizeof(num) - 1, v = sig;

	num[k] = '\0';
	do
		num[--k] = (char)('0' + v % 10);
	while ((v /= 10) && k > 0);
	if (!stop_sig) { /* the first: finish the step, save, stop */
		stop_sig = sig;
		if (c >= 0) {
			put(heads[c]);
			put("got signal ");
			put(num + k);
			put(first_tails[c]);
		}
		return;
	}
	if (c >= 0) { /* "... was stopped by signal 15 during step 4 ..." */
		put(heads[c]);
		put("was stopped by signal ");
		put(num + k);
		put(tails[c]);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void lost_update(long done)
{
	int next = cur == 0 ? 1 : 0;
	const clp_train_config *c = clp_session_config(sess);
	const char *last = clp_session_last_ckpt(sess);
	char ck[1400];

	if (last[0])
		snprintf(ck, sizeof(ck), "resume from the checkpoint %s with --resume "
			 "--ckpt.dir=%s", last, c->ckpt.dir);
	else
		snprintf(ck, sizeof(ck), "no checkpoint was saved%s", c->ckpt.dir[0] ? " yet" :
			 " (checkpoints are off: --no-ckpt)");
	if (nranks_ > 1)
		snprintf(heads[next], sizeof(heads[next]), "clpipe train: rank %d of %d, holding "
			 "%s, ", rank_, nranks_, role);
	else
		snprintf(heads[next], sizeof(heads[next]), "clpipe train: ");
	snprintf(first_tails[next], sizeof(first_tails[next]), " during step %ld (%ld steps "
		 "done): %s at the end of this step (a second signal stops at once; if the job "
		 "ends first, %s)\n", done + 1, done, c->ckpt.dir[0] ? "saving a checkpoint and "
		 "stopping" : "stopping", ck);
	snprintf(tails[next], sizeof(tails[next]), " during step %ld (%ld steps done)%s; %s\n",
		 done + 1, done, nranks_ > 1 ? " (if by mpirun: another rank of the job ended, or "
		 "mpirun was stopped; mpirun's message says which)" : "", ck);
	cur = next;
}

void lost_install(clp_session *s, int rank, int nranks, long done)
{
	struct sigaction sa;

	rank_ = rank;
	nranks_ = nranks;
	sess = s;
	clp_session_role(s, role, sizeof(role));
	lost_update(done);
	clp_session_set_stop_flag(s, &stop_sig);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART; /* a wait in progress goes on: the step finishes */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

void lost_uninstall(void)
{
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
}
