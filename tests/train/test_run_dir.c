/* A run owns its directory (engine/train/run_dir.h, issue 26): what a directory holds, and
 * which runs may write into it; a fresh run with overwrite deletes only step-* directories;
 * default names are claimed, never shared. Host only: the files are made by hand. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/train/run_dir.h"
#include "tests/data/testutil.h"

/* A complete (manifest) or unfinished step directory under root. */
static void step_dir(const char *root, long step, int complete)
{
	char p[1100];

	snprintf(p, sizeof(p), "%s/step-%08ld", root, step);
	CHECK_OK(clp_io_mkdirs(p));
	if (complete) {
		strncat(p, "/manifest.json", sizeof(p) - strlen(p) - 1);
		tu_write_str(p, "{}");
	}
}

static void test_scan(void)
{
	clp_run_dir r;
	char d[1024];

	snprintf(d, sizeof(d), "%s", tu_path("scan"));

	CHECK_OK(clp_run_dir_scan(tu_path("missing"), &r));
	CHECK(!r.exists && !r.ckpts && !r.nother, "a missing directory holds nothing");
	step_dir(d, 20, 1);
	step_dir(d, 40, 1);
	step_dir(d, 60, 0);
	CHECK_OK(clp_run_dir_scan(d, &r));
	CHECK(r.exists && r.ckpts == 2 && r.partial == 1 && r.first == 20 && r.last == 40 &&
	      !r.nother && !r.hf, "2 complete (20..40), 1 unfinished: %d %d %ld %ld %d", r.ckpts,
	      r.partial, r.first, r.last, r.nother);
	tu_write_str(tu_path("scan/config.json"), "{}");
	CHECK_OK(clp_run_dir_scan(d, &r));
	CHECK(r.hf && r.nother == 1 && !strcmp(r.other, "config.json"), "a Hugging Face file: %s",
	      r.other);
	tu_write_str(tu_path("scan/notes"), "x");
	CHECK_ERR(clp_run_dir_scan(tu_path("scan/notes"), &r), CLP_ERR_INVALID, "is a file");
}

static void test_check(void)
{
	int resume = -1;
	char run[1024], hf[1024], empty[1024]; /* tu_path's buffers rotate */

	snprintf(run, sizeof(run), "%s", tu_path("run"));
	snprintf(hf, sizeof(hf), "%s", tu_path("hf"));
	snprintf(empty, sizeof(empty), "%s", tu_path("empty"));

	/* fresh: new or empty directories are fine */
	CHECK_OK(clp_run_dir_check(tu_path("new"), CLP_RUN_FRESH, 0, 1, &resume));
	CHECK(resume == 0, "fresh");
	CHECK_OK(clp_io_mkdirs(empty));
	CHECK_OK(clp_run_dir_check(empty, CLP_RUN_FRESH, 0, 1, &resume));
	/* another run's checkpoints: refused, naming them and the ways on */
	step_dir(run, 80, 1);
	step_dir(run, 120, 1);
	CHECK_ERR(clp_run_dir_check(run, CLP_RUN_FRESH, 0, 1, &resume), CLP_ERR_INVALID,
		  "another run's checkpoints (2, step 80 to 120", "--resume", "--ckpt.overwrite=true",
		  "nothing was written");
	CHECK(access(tu_path("run/step-00000120/manifest.json"), F_OK) == 0, "left as it was");
	CHECK_OK(clp_run_dir_check(run, CLP_RUN_RESUME, 0, 1, &resume));
	CHECK(resume == 1, "resume finds them");
	CHECK_OK(clp_run_dir_check(run, CLP_RUN_RESUME_AUTO, 0, 1, &resume));
	CHECK(resume == 1, "auto resumes too");
	/* overwrite: a rank that may not delete leaves them; the one that may deletes only them */
	tu_write_str(tu_path("other.txt"), "keep");
	CHECK_OK(clp_run_dir_check(run, CLP_RUN_FRESH, 1, 0, &resume));
	CHECK(access(tu_path("run/step-00000080"), F_OK) == 0, "not deleted by another rank");
	CHECK_OK(clp_run_dir_check(run, CLP_RUN_FRESH, 1, 1, &resume));
	CHECK(resume == 0 && access(tu_path("run/step-00000080"), F_OK) != 0 &&
	      access(tu_path("run/step-00000120"), F_OK) != 0 && access(run, F_OK) == 0,
	      "overwrite deletes the step directories, keeps the directory");
	/* resume without a checkpoint: an error; auto starts fresh */
	CHECK_ERR(clp_run_dir_check(tu_path("typo"), CLP_RUN_RESUME, 0, 1, &resume),
		  CLP_ERR_NOT_FOUND, "does not exist", "--resume=auto");
	CHECK_ERR(clp_run_dir_check(empty, CLP_RUN_RESUME, 0, 1, &resume), CLP_ERR_NOT_FOUND,
		  "holds no complete checkpoint");
	CHECK_OK(clp_run_dir_check(tu_path("typo"), CLP_RUN_RESUME_AUTO, 0, 1, &resume));
	CHECK(resume == 0, "auto: fresh");
	/* a Hugging Face model, or other files: refused for every mode, even with overwrite */
	CHECK_OK(clp_io_mkdirs(hf));
	tu_write_str(tu_path("hf/config.json"), "{}");
	tu_write_str(tu_path("hf/model.safetensors"), "x");
	CHECK_ERR(clp_run_dir_check(hf, CLP_RUN_FRESH, 1, 1, &resume), CLP_ERR_INVALID,
		  "holds a Hugging Face model", "clpipe eval --ckpt");
	CHECK_ERR(clp_run_dir_check(hf, CLP_RUN_RESUME, 0, 1, &resume), CLP_ERR_INVALID,
		  "--resume", "Hugging Face");
	CHECK_ERR(clp_run_dir_check(hf, CLP_RUN_RESUME_AUTO, 0, 1, &resume), CLP_ERR_INVALID,
		  "Hugging Face");
	CHECK(access(tu_path("hf/model.safetensors"), F_OK) == 0, "the model stays");
	tu_write_str(tu_path("empty/notes.txt"), "x");
	CHECK_ERR(clp_run_dir_check(empty, CLP_RUN_FRESH, 1, 1, &resume), CLP_ERR_INVALID,
		  "not clpipe checkpoints (notes.txt)");
}

static void test_default_names(void)
{
	char a[256], b[256];
	struct stat st;

	clp_run_dir_default(tu_path("runs"), a, sizeof(a));
	clp_run_dir_default(tu_path("runs"), b, sizeof(b));
	CHECK(strcmp(a, b) != 0, "two names in the same second differ: %s %s", a, b);
	CHECK(stat(a, &st) == 0 && S_ISDIR(st.st_mode) && stat(b, &st) == 0, "both claimed");
	CHECK(strstr(a, "/runs/20") != NULL, "runs/<date>-<time>: %s", a);
}

/* One job holds a directory: the first rank's exclusive probe fails while any process (any open
 * file description: flock's unit) holds it, shared holds coexist, and the lock file is not
 * "another file" to a later scan. */
static void test_lock(void)
{
	char d[1024];
	int a = -1, b = -1, c = -1;
	clp_run_dir r;

	snprintf(d, sizeof(d), "%s", tu_path("locked/run"));
	CHECK_OK(clp_run_dir_lock(d, 1, &a)); /* made on the way */
	CHECK(a >= 0, "a descriptor");
	CHECK_OK(clp_run_dir_lock(d, 0, &b)); /* another rank of the same job */
	CHECK_ERR(clp_run_dir_lock(d, 1, &c), CLP_ERR_STATE, "is in use", "another clpipe job",
		  CLP_RUN_DIR_LOCK, "another --ckpt.dir");
	CHECK(c == -1, "no descriptor on failure");
	clp_run_dir_unlock(a);
	CHECK_ERR(clp_run_dir_lock(d, 1, &c), CLP_ERR_STATE, "is in use"); /* b still holds it */
	clp_run_dir_unlock(b);
	CHECK_OK(clp_run_dir_lock(d, 1, &c)); /* the job has gone */
	CHECK_OK(clp_run_dir_scan(d, &r));
	CHECK(r.exists && r.nother == 0 && r.ckpts == 0, "the lock file is not another file (%d: %s)",
	      r.nother, r.other);
	clp_run_dir_unlock(c);
	tu_write_str(tu_path("locked/file"), "x");
	CHECK_ERR(clp_run_dir_lock(tu_path("locked/file"), 1, &c), CLP_ERR_IO, "locked/file");
}

TH_MAIN(TH_TEST(test_scan), TH_TEST(test_check), TH_TEST(test_default_names), TH_TEST(test_lock))
