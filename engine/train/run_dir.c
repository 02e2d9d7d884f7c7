/* A run's directory of checkpoints: what is there, and whether a run may write into it (see
 * run_dir.h). */
#include "engine/train/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cl/base/durable.h"
#include "engine/io/checkpoint.h"

static int ends(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* step- followed by digits only: the checkpoint writer's directories */
static int is_step_dir(const char *name)
{
	const char *p = name + 5;

	if (strncmp(name, "step-", 5) != 0 || !*p)
		return 0;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

static void describe_model(const char *dir, clp_run_dir *r)
{
	clp_ckpt *c = NULL;
	const char *pre, *nl, *dm;

	if (clp_ckpt_open_latest(&c, dir) != CLP_OK) {
		clp_error_clear();
		return;
	}
	pre = clp_ckpt_identity(c, "preset");
	nl = clp_ckpt_identity(c, "n_layer");
	dm = clp_ckpt_identity(c, "d_model");
	if (pre && nl && dm)
		snprintf(r->model, sizeof(r->model), "%s, %s layers x %s", pre, nl, dm);
	clp_ckpt_close(c);
}

clp_status clp_run_dir_scan(const char *dir, clp_run_dir *r)
{
	DIR *d;
	struct dirent *de;
	clp_ckpt_entry *e = NULL;
	int n = 0;

	memset(r, 0, sizeof(*r));
	r->first = r->last = -1;
	d = opendir(dir);
	if (!d) {
		struct stat st;

		if (errno == ENOENT)
			return CLP_OK;
		if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
			return clp_error(CLP_ERR_INVALID, "ckpt.dir %s is a file, not a directory",
					 dir);
		return clp_error(CLP_ERR_IO, "ckpt.dir %s: cannot list: %s", dir, strerror(errno));
	}
	r->exists = 1;
	while ((de = readdir(d))) {
		const char *p = de->d_name;

		if (!strcmp(p, ".") || !strcmp(p, "..") || is_step_dir(p) ||
		    !strcmp(p, CLP_RUN_DIR_LOCK))
			continue;
		if (!strcmp(p, "config.json") || ends(p, ".safetensors") ||
		    !strcmp(p, "pytorch_model.bin") || !strcmp(p, "model.safetensors.index.json"))
			r->hf = 1;
		if (r->nother++ < 6 && strlen(r->other) + strlen(p) + 8 < sizeof(r->other))
			snprintf(r->other + strlen(r->other), sizeof(r->other) - strlen(r->other),
				 "%s%s", r->other[0] ? ", " : "", p);
	}
	closedir(d);
	if (r->nother > 6)
		snprintf(r->other + strlen(r->other), sizeof(r->other) - strlen(r->other),
			 ", ... (%d entries)", r->nother);
	CLP_TRY(clp_ckpt_list(dir, &e, &n));
	for (int i = 0; i < n; i++) { /* newest first */
		if (!e[i].complete) {
			r->partial++;
			continue;
		}
		if (r->last < 0)
			r->last = e[i].step;
		r->first = e[i].step;
		r->ckpts++;
	}
	clp_ckpt_list_free(e, n);
	if (r->ckpts)
		describe_model(dir, r);
	return CLP_OK;
}

static clp_status foreign(const char *dir, const clp_run_dir *r, const char *what)
{
	if (r->hf)
		return clp_error(CLP_ERR_INVALID, "%s: ckpt.dir %s holds a Hugging Face model (%s), "
				 "not clpipe checkpoints: nothing was written. Give the run a "
				 "directory of its own (--ckpt.dir=NEW); to score that model, clpipe "
				 "eval --ckpt %s", what, dir, r->other, dir);
	return clp_error(CLP_ERR_INVALID, "%s: ckpt.dir %s holds files that are not clpipe "
			 "checkpoints (%s): nothing was written. Give the run a directory of its own "
			 "(--ckpt.dir=NEW, or an empty one)", what, dir, r->other);
}

static clp_status remove_ckpts(const char *dir)
{
	clp_ckpt_entry *e = NULL;
	int n = 0;
	clp_status st;

	CLP_TRY(clp_ckpt_list(dir, &e, &n));
	st = CLP_OK;
	for (int i = 0; i < n && st == CLP_OK; i++)
		st = clp_io_remove_tree(e[i].dir);
	clp_ckpt_list_free(e, n);
	return st;
}

clp_status clp_run_dir_check(const char *dir, enum clp_run_mode mode, int overwrite,
			     int may_delete, int *resume)
{
	clp_run_dir r;

	*resume = 0;
	CLP_TRY(clp_run_dir_scan(dir, &r));
	if (mode != CLP_RUN_FRESH && r.ckpts) {
		*resume = 1;
		return CLP_OK;
	}
	if (mode == CLP_RUN_RESUME) {
		if (!r.exists)
			return clp_error(CLP_ERR_NOT_FOUND, "--resume: ckpt.dir %s does not exist: "
					 "there is no run to continue (check the name; without "
					 "--resume a new run starts there; --resume=auto resumes when "
					 "there is a checkpoint and starts fresh when not)", dir);
		if (r.nother)
			return foreign(dir, &r, "--resume");
		return clp_error(CLP_ERR_NOT_FOUND, "--resume: ckpt.dir %s holds no complete "
				 "checkpoint%s: there is no run to continue (without --resume a new "
				 "run starts there; --resume=auto starts fresh when there is none)", dir,
				 r.partial ? " (only unfinished ones, a run stopped while saving)" : "");
	}
	if (r.nother) /* fresh (or auto without a checkpoint): never into someone else's files */
		return foreign(dir, &r, "a new run");
	if (!r.ckpts)
		return CLP_OK;
	if (!overwrite)
		return clp_error(CLP_ERR_INVALID, "a new run: ckpt.dir %s holds another run's "
				 "checkpoints (%d, step %ld%s%.0ld%s%s%s): nothing was written. To "
				 "continue that run add --resume; to keep it, give this run a new "
				 "--ckpt.dir; to delete them and start over there, add "
				 "--ckpt.overwrite=true", dir, r.ckpts, r.first,
				 r.ckpts > 1 ? " to " : "", r.ckpts > 1 ? r.last : 0,
				 r.model[0] ? ": " : "", r.model, "");
	return may_delete ? remove_ckpts(dir) : CLP_OK;
}

clp_status clp_run_dir_lock(const char *dir, int first, int *fd)
{
	char path[4200];
	int f;

	*fd = -1;
	CLP_TRY(clp_io_mkdirs(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, CLP_RUN_DIR_LOCK);
	f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0)
		return clp_error(CLP_ERR_IO, "ckpt.dir %s: cannot create the lock file %s: %s", dir,
				 path, strerror(errno));
	if (first && flock(f, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		close(f);
		if (e == EWOULDBLOCK)
			return clp_error(CLP_ERR_STATE, "ckpt.dir %s is in use: a process of another "
					 "clpipe job still runs there (it holds %s; ranks can "
					 "outlive a launcher that has gone). Nothing was written: "
					 "wait for it to end (flock %s true waits), stop it, or "
					 "give this run another --ckpt.dir", dir, path, path);
		return clp_error(CLP_ERR_IO, "ckpt.dir %s: cannot lock %s: %s", dir, path,
				 strerror(e));
	}
	if (flock(f, LOCK_SH | (first ? 0 : LOCK_NB)) != 0) {
		int e = errno;

		close(f);
		return clp_error(e == EWOULDBLOCK ? CLP_ERR_STATE : CLP_ERR_IO, "ckpt.dir %s: "
				 "cannot hold %s: %s", dir, path, e == EWOULDBLOCK ?
				 "another job is taking the directory" : strerror(e));
	}
	*fd = f;
	return CLP_OK;
}

void clp_run_dir_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

void clp_run_dir_default(const char *root, char *out, size_t n)
{
	time_t t = time(NULL);
	struct tm tm;
	char stamp[32];

	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(out, n, "%s/%s", root, stamp);
	if (clp_io_mkdirs(root) != CLP_OK) { /* the run's first save will say why */
		clp_error_clear();
		return;
	}
	/* claimed by mkdir: two runs started in the same second get different names */
	for (int k = 2; mkdir(out, 0777) != 0 && errno == EEXIST && k < 1000; k++)
		snprintf(out, n, "%s/%s-%d", root, stamp, k);
}
