/* When a training rank is stopped by a signal (mpirun's SIGTERM to the surviving ranks after one
 * died, or Ctrl-C), it says what was lost before it goes: its rank and stages, the step that was
 * running, and the checkpoint to resume from. The line is composed after every step (outside the
 * handler) and the handler only write()s it, which is async-signal-safe. */
#include "tools/train_lost.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char heads[2][800], tails[2][2400];
static volatile sig_atomic_t cur = -1;
static long last_ckpt = -1;
static char role[512], ckdir[1024];
static int rank_, nranks_;

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
	if (c >= 0) { /* "... was stopped by signal 15 during step 4 ..." */
		put(heads[c]);
		put(num + k);
		put(tails[c]);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void lost_update(long done)
{
	int next = cur == 0 ? 1 : 0;
	char path[1200], ck[1200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/step-%08ld/manifest.json", ckdir, done);
	if (ckdir[0] && stat(path, &st) == 0)
		last_ckpt = done;
	if (last_ckpt >= 0)
		snprintf(ck, sizeof(ck), "resume from the checkpoint %s/step-%08ld with "
			 "--ckpt.resume=true (it takes the newest complete one)", ckdir, last_ckpt);
	else
		snprintf(ck, sizeof(ck), "no checkpoint was saved%s", ckdir[0] ? " yet" :
			 " (set ckpt.dir and ckpt.every to keep progress)");
	snprintf(heads[next], sizeof(heads[next]), "clpipe train: rank %d of %d, holding %s, was "
		 "stopped by signal ", rank_, nranks_, role);
	snprintf(tails[next], sizeof(tails[next]), " during step %ld (%ld steps done)%s; %s\n",
		 done + 1, done, nranks_ > 1 ? " (if by mpirun: another rank of the job ended; "
		 "mpirun's message names it)" : "", ck);
	cur = next;
}

void lost_install(const clp_session *s, int rank, int nranks, long done)
{
	const clp_train_config *c = clp_session_config(s);

	rank_ = rank;
	nranks_ = nranks;
	clp_session_role(s, role, sizeof(role));
	snprintf(ckdir, sizeof(ckdir), "%s", c->ckpt.dir);
	last_ckpt = -1;
	lost_update(done);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
}
