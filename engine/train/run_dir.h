/* A training run owns its directory of checkpoints: before anything is written, a fresh run
 * refuses a directory holding another run's checkpoints (unless told to replace them), a
 * Hugging Face model or anything else that is not clpipe's; a resumed run needs a checkpoint
 * there. The messages name what is there and the flags that go on. */
#ifndef CLP_TRAIN_RUN_DIR_H
#define CLP_TRAIN_RUN_DIR_H

#include <stddef.h>

#include "cl/base/status.h"

/* What a directory holds. */
typedef struct clp_run_dir {
	int exists;
	int ckpts;            /* complete clpipe checkpoints (step-NNNNNNNN/manifest.json) */
	int partial;          /* step-* directories without a manifest */
	long first, last;     /* the complete ones' lowest and highest steps */
	char model[256];      /* the newest one's model in words ("gpt2, 2 layers x 128") */
	int hf;               /* a Hugging Face model at the top (config.json, *.safetensors, ...) */
	int nother;           /* entries that are not clpipe's */
	char other[512];      /* the first few of their names, comma-separated */
} clp_run_dir;

clp_status clp_run_dir_scan(const char *dir, clp_run_dir *out);

enum clp_run_mode {
	CLP_RUN_FRESH,       /* a new run: the directory must be new, empty or (overwrite) ours */
	CLP_RUN_RESUME,      /* --resume: a complete checkpoint must be there */
	CLP_RUN_RESUME_AUTO, /* --resume=auto: resume when one is there, else a fresh run */
};

/* Check dir for a run of this mode; *resume says whether the run resumes (auto: whether a
 * checkpoint was found). A fresh run with overwrite deletes the checkpoints there when
 * may_delete (one rank of a job does). Errors name what is there and what to do. */
clp_status clp_run_dir_check(const char *dir, enum clp_run_mode mode, int overwrite,
			     int may_delete, int *resume);

/* The lock file in a run directory (".clpipe-lock"): every process of the job writing there
 * holds a shared flock on it for its lifetime, so that a second job (or tools/supervise.sh,
 * through flock(1)) sees while any process of the first still runs, including ranks left
 * running by a launcher that has gone. */
#define CLP_RUN_DIR_LOCK ".clpipe-lock"

/* Hold dir (created when missing) for this process until it exits or clp_run_dir_unlock:
 * first (one rank of a job, before the others): the directory must be free (no process of
 * another job holds it), else CLP_ERR_STATE naming it; then a shared hold like the others'.
 * *fd gets the lock's descriptor. */
clp_status clp_run_dir_lock(const char *dir, int first, int *fd);
void clp_run_dir_unlock(int fd);

/* A new run directory under root, created (empty): root/YYYYMMDD-HHMMSS (with -2, -3, ... when
 * taken). */
void clp_run_dir_default(const char *root, char *out, size_t n);

#endif
