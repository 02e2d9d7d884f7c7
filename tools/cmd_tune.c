/* clpipe tune gemm: search GEMM parameters for the device at hand. Each candidate runs in its own
 * child process (a fresh exec of this binary) under a time limit: some settings crash PoCL or
 * hang, and a crash must cost only that candidate. A candidate is checked against the reference
 * before it is timed, and only verified entries are saved. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cl/base/json_util.h"
#include "cl/gemm.h"
#include "cl/gemm_tune.h"
#include "tools/cli.h"
#include "tools/stats.h"

extern char **environ;

struct tshape {
	int ta, tb;
	size_t m, n, k;
};
static const struct tshape score_shapes[] = {
	{0, 1, 1024, 768, 768}, {0, 0, 1024, 768, 768}, {1, 0, 768, 768, 1024}};
#define NSCORE 3

static void help(void)
{
	printf("usage: clpipe tune gemm [--device SPEC] [--backend packed|tiled|clblast]\n"
	       "                        [--candidates N] [--timeout S] [--seed N] [--dry-run]\n\n"
	       "Tries N parameter sets (default 40) of the backend (default: the one the table picks)\n"
	       "on the device. Each runs in a child process with a time limit (default 180 s), is\n"
	       "checked against the double-precision reference on odd shapes and all transposes,\n"
	       "and only then timed (geometric mean GFLOP/s over 1024x768x768 NT, NN and\n"
	       "768x768x1024 TN). The best verified set per backend is written to the device's\n"
	       "tuning file, which clpipe consults before its built-in table:\n"
	       "  CLPIPE_CACHE_DIR/gemm-tuning-<device>_<driver>.json\n"
	       "Set CLPIPE_GEMM_TUNING=FILE to use another file.\n");
}

/* ---- the child: evaluate one candidate --------------------------------------------------------- */

static int eval_child(const char *device, const char *path)
{
	json_t *e = NULL, *res;
	clp_gemm_tuning t;
	clp_cl_ctx *ctx = NULL;
	clp_status s = clp_json_load(path, &e);
	double logsum = 0;

	if (s == CLP_OK)
		s = clp_gemm_tuning_from_json(e, path, &t);
	if (s == CLP_OK)
		s = clp_cl_ctx_create(&ctx, device);
	if (s == CLP_OK)
		s = clp_cl_gemm_set_tuning(ctx, &t);
	if (s == CLP_OK)
		s = clp_gemm_verify(ctx);
	for (int i = 0; i < NSCORE && s == CLP_OK; i++) {
		const struct tshape *sh = &score_shapes[i];
		size_t lda = sh->ta ? sh->m : sh->k, ldb = sh->tb ? sh->k : sh->n;
		cl_mem a = NULL, b = NULL, c = NULL;
		double tms[5];

		if ((s = clp_cl_buffer(ctx, sh->m * sh->k * 4, "A", &a)) == CLP_OK &&
		    (s = clp_cl_buffer(ctx, sh->k * sh->n * 4, "B", &b)) == CLP_OK)
			s = clp_cl_buffer(ctx, sh->m * sh->n * 4, "C", &c);
		for (int r = -1; r < 5 && s == CLP_OK; r++) {
			double t0 = clp_comm_now();

			s = clp_cl_gemm(ctx, (clp_trans)sh->ta, (clp_trans)sh->tb, sh->m, sh->n, sh->k,
					1.0f, clp_buf_at(a, 0), lda, clp_buf_at(b, 0), ldb, 0.0f,
					clp_buf_at(c, 0), sh->n);
			if (s == CLP_OK)
				s = clp_cl_finish(ctx);
			if (r >= 0)
				tms[r] = clp_comm_now() - t0;
		}
		if (s == CLP_OK)
			logsum += log(2.0 * sh->m * sh->n * sh->k / clp_stats_of(tms, 5).median * 1e-9);
		if (a)
			clReleaseMemObject(a);
		if (b)
			clReleaseMemObject(b);
		if (c)
			clReleaseMemObject(c);
	}
	if (s == CLP_OK)
		res = json_pack("{s:b, s:f}", "ok", 1, "gflops", exp(logsum / NSCORE));
	else
		res = json_pack("{s:b, s:s}", "ok", 0, "error", clp_last_error());
	printf("\n");
	json_dumpf(res, stdout, JSON_COMPACT);
	printf("\n");
	json_decref(res);
	json_decref(e);
	clp_cl_ctx_free(ctx);
	return 0;
}

/* ---- the parent: one child per candidate ------------------------------------------------------- */

/* Run a candidate; on return *gflops > 0 if verified and timed, else why holds the reason. */
static void run_candidate(const char *device, const clp_gemm_tuning *t, double timeout,
			  double *gflops, char *why, size_t whylen)
{
	char path[] = "/tmp/clpipe-tune-XXXXXX";
	int fd = mkstemp(path), pfd[2];
	json_t *e = clp_gemm_tuning_to_json(t, "candidate");
	char *argv[8];
	char out[65536];
	size_t used = 0;
	pid_t pid;
	posix_spawn_file_actions_t fa;
	int status = 0, timed_out = 0;
	double t0 = clp_comm_now();

	*gflops = 0;
	snprintf(why, whylen, "?");
	if (fd < 0 || pipe(pfd) != 0) {
		snprintf(why, whylen, "cannot create temp file or pipe: %s", strerror(errno));
		json_decref(e);
		return;
	}
	json_dumpfd(e, fd, 0);
	close(fd);
	json_decref(e);
	argv[0] = "clpipe";
	argv[1] = "tune";
	argv[2] = "gemm";
	argv[3] = "--eval";
	argv[4] = path;
	argv[5] = "--device";
	argv[6] = (char *)(device ? device : "");
	argv[7] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ) != 0) {
		snprintf(why, whylen, "cannot start a child: %s", strerror(errno));
		posix_spawn_file_actions_destroy(&fa);
		close(pfd[0]);
		close(pfd[1]);
		unlink(path);
		return;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	for (;;) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		double left = timeout - (clp_comm_now() - t0);
		ssize_t r;

		if (left <= 0) {
			timed_out = 1;
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		r = read(pfd[0], out + used, sizeof(out) - 1 - used);
		if (r <= 0)
			break;
		used += (size_t)r;
		if (used >= sizeof(out) - 1)
			used = 0; /* keep only the tail: the result is the last line */
	}
	out[used] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	unlink(path);
	if (timed_out) {
		snprintf(why, whylen, "timed out after %.0f s", timeout);
	} else if (WIFSIGNALED(status)) {
		snprintf(why, whylen, "crashed (signal %d, %s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	} else {
		char *last = strrchr(out, '{');
		json_t *res = last ? json_loads(last, 0, NULL) : NULL;

		if (res && json_is_true(json_object_get(res, "ok")))
			*gflops = json_real_value(json_object_get(res, "gflops"));
		else
			snprintf(why, whylen, "%s",
				 res ? json_string_value(json_object_get(res, "error"))
				     : "no result (child exited without one)");
		json_decref(res);
	}
}

static void describe(const clp_gemm_tuning *t, char *buf, size_t n)
{
	size_t used = 0;
	const clp_gemm_param *p = t->backend == CLP_GEMM_CLBLAST ? t->clblast : t->params;
	int np = t->backend == CLP_GEMM_CLBLAST ? t->nclblast : t->nparams;

	buf[0] = '\0';
	for (int i = 0; i < np && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s%s=%ld", i ? " " : "", p[i].name,
					 p[i].value);
	if (np == 0)
		snprintf(buf, n, "(defaults)");
}

static int save(const clp_cl_devinfo *dev, const clp_gemm_tuning *best, double gflops)
{
	char path[4096];

	if (clp_gemm_tuning_save(dev, best, gflops, path, sizeof(path)) != CLP_OK) {
		fprintf(stderr, "clpipe tune gemm: cannot save the tuning: %s\n", clp_last_error());
		return 1;
	}
	printf("saved to %s\n", path);
	return 0;
}

int cmd_tune(int argc, char **argv)
{
	const char *device = NULL, *eval = NULL, *backend = NULL, *ncand_arg = NULL;
	const char *timeout_arg = NULL, *seed_arg = NULL;
	int dry = 0, ncand = 40, nd = 0, n, best = -1;
	double timeout = 180, best_gf = 0;
	clp_cl_devinfo *devs = NULL;
	clp_cl_selection sel;
	clp_gemm_backend be = CLP_GEMM_AUTO;
	clp_gemm_tuning *cands;
	clp_status s;

	if (argc < 2 || strcmp(argv[1], "gemm") != 0) {
		if (argc >= 2 && cli_is_help(argv[1])) {
			help();
			return 0;
		}
		return cli_usage_error("tune", "expected 'gemm'");
	}
	for (int i = 2; i < argc; i++) {
		int r;

		if (cli_is_help(argv[i])) {
			help();
			return 0;
		}
		if (!strcmp(argv[i], "--dry-run")) {
			dry = 1;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &device)) ||
		    (r = cli_value(argc, argv, &i, "--eval", &eval)) ||
		    (r = cli_value(argc, argv, &i, "--backend", &backend)) ||
		    (r = cli_value(argc, argv, &i, "--candidates", &ncand_arg)) ||
		    (r = cli_value(argc, argv, &i, "--timeout", &timeout_arg)) ||
		    (r = cli_value(argc, argv, &i, "--seed", &seed_arg))) {
			if (r < 0)
				return cli_usage_error("tune gemm", "%s needs a value", argv[i]);
			continue;
		}
		return cli_usage_error("tune gemm", "unknown option '%s'", argv[i]);
	}
	if (device && !*device)
		device = NULL;
	if (eval)
		return eval_child(device, eval);
	if (ncand_arg && (ncand = atoi(ncand_arg)) < 1)
		return cli_usage_error("tune gemm", "--candidates must be >= 1");
	if (timeout_arg && (timeout = atof(timeout_arg)) <= 0)
		return cli_usage_error("tune gemm", "--timeout must be > 0");
	if ((s = clp_cl_devices(&devs, &nd)) != CLP_OK ||
	    (s = clp_cl_select(devs, nd, device, &sel)) != CLP_OK) {
		free(devs);
		return cli_fail("tune gemm", s);
	}
	if (backend && (s = clp_gemm_backend_parse(backend, &be)) != CLP_OK) {
		free(devs);
		return cli_fail("tune gemm", s);
	}
	if (be == CLP_GEMM_AUTO) {
		clp_gemm_tuning t;

		if ((s = clp_gemm_tuning_lookup(&devs[sel.index], CLP_GEMM_AUTO, &t)) != CLP_OK) {
			free(devs);
			return cli_fail("tune gemm", s);
		}
		be = t.backend;
	}
	cands = calloc((size_t)ncand, sizeof(*cands));
	if (!cands) {
		free(devs);
		return cli_fail("tune gemm", clp_error(CLP_ERR_NOMEM, "out of host memory"));
	}
	n = clp_gemm_candidates(be, &devs[sel.index], seed_arg ? (unsigned)atoi(seed_arg) : 1,
				cands, ncand);
	printf("tuning %s GEMM on %s: %d candidates, %.0f s limit each\n",
	       clp_gemm_backend_name(be), devs[sel.index].name, n, timeout);
	for (int i = 0; i < n; i++) {
		char desc[512], why[1024];
		double gf;

		describe(&cands[i], desc, sizeof(desc));
		run_candidate(device, &cands[i], timeout, &gf, why, sizeof(why));
		if (gf > 0)
			printf("%3d  %8.1f GFLOP/s  %s\n", i, gf, desc);
		else
			printf("%3d  rejected: %s\n     %s\n", i, why, desc);
		fflush(stdout);
		if (gf > best_gf) {
			best_gf = gf;
			best = i;
		}
	}
	if (best < 0) {
		printf("no candidate passed verification; nothing saved\n");
		free(cands);
		free(devs);
		return 1;
	}
	{
		char desc[512];

		describe(&cands[best], desc, sizeof(desc));
		printf("best: %.1f GFLOP/s (candidate %d: %s)\n", best_gf, best, desc);
	}
	if (!dry && save(&devs[sel.index], &cands[best], best_gf) != 0) {
		free(cands);
		free(devs);
		return 1;
	}
	free(cands);
	free(devs);
	return 0;
}
