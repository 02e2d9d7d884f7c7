/* The fuzzing harness: for each format, a fixed number of seeded mutants of a valid input, each
 * consumed in a child process with a time limit; counts clean rejections (a message naming the
 * input), acceptances, crashes (a signal, or a sanitizer's report), hangs (past the time limit)
 * and unnamed rejections (a message that does not name the file), and fails on any of the last
 * three. The inputs behind failures are kept. docs/ROBUSTNESS.md shows the long pass.
 *
 *   clp_fuzz [--mutants N] [--seed S] [--timeout SEC] [--only FMT,...] [--work DIR] [--markdown]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cl/base/clock.h"
#include "cl/base/durable.h"
#include "tests/fuzz/fuzz.h"

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif

enum { R_REJECT, R_ACCEPT, R_CRASH, R_HANG, R_UNNAMED, R_COUNT };
static const char *const r_names[R_COUNT] = {"rejected", "accepted", "crashes", "hangs",
					     "unnamed"};

typedef struct opts {
	int mutants;
	uint64_t seed;
	double timeout_s;
	const char *only;
	char work[1024];
	int markdown;
} opts;

/* Copy the regular files of a directory. */
static int copy_dir(const char *from, const char *to)
{
	DIR *d = opendir(from);
	struct dirent *e;
	int bad = 0;

	if (!d || mkdir(to, 0700) != 0) {
		if (d)
			closedir(d);
		return -1;
	}
	while ((e = readdir(d)) && !bad) {
		char a[4096], b[4096];
		fz_buf buf = {0};

		if (e->d_name[0] == '.')
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
		bad = fz_read(a, &buf) || fz_write(b, &buf);
		fz_buf_free(&buf);
	}
	closedir(d);
	return bad ? -1 : 0;
}

/* Consume path in a child; the outcome, and the message (or what went wrong) in msg. */
static int run_one(const fz_format *f, const char *path, const char *label, double timeout_s,
		   char *msg, size_t len)
{
	int fd[2], status = 0, got_status = 0;
	clp_status st = CLP_OK;
	size_t used = 0;
	double end;
	pid_t pid;

	msg[0] = '\0';
	if (pipe(fd) != 0)
		return snprintf(msg, len, "harness: pipe: %s", strerror(errno)), R_CRASH;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return snprintf(msg, len, "harness: fork: %s", strerror(errno)), R_CRASH;
	if (pid == 0) {
		const char *m;
		int null = open("/dev/null", O_WRONLY);

		close(fd[0]);
		/* a consumer's prints (hwloc's warnings) are noise here; the report goes through
		 * the pipe, and a kept input reruns with CLP_FUZZ_VERBOSE=1 to see them */
		if (null >= 0) {
			dup2(null, 1);
			if (!getenv("CLP_FUZZ_VERBOSE"))
				dup2(null, 2);
		}
#ifndef FZ_ASAN
		{
			/* exhausting the machine shows as a failure, not as swapping */
			struct rlimit rl = {(rlim_t)4 << 30, (rlim_t)4 << 30};

			setrlimit(RLIMIT_AS, &rl);
		}
#endif
		st = f->eat(path);
		m = st == CLP_OK ? "" : clp_last_error();
		if (write(fd[1], &st, sizeof(st)) != (ssize_t)sizeof(st) ||
		    write(fd[1], m, strlen(m)) < 0)
			_exit(3);
		_exit(0); /* no exit handlers: LeakSanitizer runs in the harness, not per input */
	}
	close(fd[1]);
	end = clp_now() + timeout_s;
	for (;;) {
		struct pollfd p = {fd[0], POLLIN, 0};
		double left = end - clp_now();
		char chunk[1024];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			close(fd[0]);
			snprintf(msg, len, "no answer in %.0f s (killed)", timeout_s);
			return R_HANG;
		}
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		n = read(fd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (!got_status) {
				((char *)&st)[used++] = chunk[i];
				if (used == sizeof(st))
					got_status = 1, used = 0;
			} else if (used + 1 < len) {
				msg[used++] = chunk[i];
				msg[used] = '\0';
			}
		}
	}
	close(fd[0]);
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !got_status) {
		snprintf(msg, len, "%s %d%s", WIFSIGNALED(status) ? "signal" : "exit",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
			 got_status ? "" : " before reporting");
		return R_CRASH;
	}
	if (st == CLP_OK)
		return R_ACCEPT;
	return strstr(msg, label) ? R_REJECT : R_UNNAMED;
}

static int wanted(const opts *o, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = o->only; p && *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);

		if (l == n && !strncmp(p, name, n))
			return 1;
		p = c ? c + 1 : NULL;
	}
	return !o->only;
}

static int usage(void)
{
	fprintf(stderr, "usage: clp_fuzz [--mutants N] [--seed S] [--timeout SEC] [--only FMT,...] "
			"[--work DIR] [--markdown]\n");
	return 2;
}

int main(int argc, char **argv)
{
	opts o = {50, 1, 20.0, NULL, "", 0};
	const fz_format *fmts;
	int nf, total[R_COUNT] = {0}, failed = 0;
	double t0 = clp_now();

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--markdown"))
			o.markdown = 1;
		else if (!v)
			return usage();
		else if (!strcmp(a, "--mutants") && ++i)
			o.mutants = atoi(v);
		else if (!strcmp(a, "--seed") && ++i)
			o.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--timeout") && ++i)
			o.timeout_s = atof(v);
		else if (!strcmp(a, "--only") && ++i)
			o.only = v;
		else if (!strcmp(a, "--work") && ++i)
			snprintf(o.work, sizeof(o.work), "%s", v);
		else
			return usage();
	}
	if (o.mutants < 1 || !(o.timeout_s > 0))
		return usage();
	if (!o.work[0]) {
		snprintf(o.work, sizeof(o.work), "%s/clp-fuzz-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(o.work))
			return fprintf(stderr, "fuzz: mkdtemp: %s\n", strerror(errno)), 1;
	} else if (clp_io_mkdirs(o.work) != CLP_OK) {
		return fprintf(stderr, "fuzz: %s\n", clp_last_error()), 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((nf = fz_formats(o.work, &fmts)) < 0)
		return 1;
	printf(o.markdown ? "| format | mutants | rejected (named) | accepted | crashes | hangs | "
			    "unnamed | slowest (s) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
			  : "%-14s %7s %9s %9s %8s %6s %8s %8s\n",
	       "format", "mutants", "rejected", "accepted", "crashes", "hangs", "unnamed",
	       "slowest");
	for (int fi = 0; fi < nf; fi++) {
		const fz_format *f = &fmts[fi];
		fz_buf seed = {0}, b = {0};
		int count[R_COUNT] = {0};
		double slowest = 0;
		uint64_t rng = o.seed * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(fi + 1) * 0xd1b54a32d192ed03ULL;
		char seed_path[2048];

		if (!wanted(&o, f->name))
			continue;
		snprintf(seed_path, sizeof(seed_path), "%s%s%s", f->seed_dir ? f->seed_dir : "",
			 f->seed_dir ? "/" : "", f->seed);
		if (fz_read(seed_path, &seed) || seed.n == 0) {
			fprintf(stderr, "fuzz: %s: cannot read the seed %s\n", f->name, seed_path);
			return 1;
		}
		for (int i = 0; i < o.mutants; i++) {
			char label[64], path[2048], target[4096], how[128], msg[4096];
			double t;
			int r;

			snprintf(label, sizeof(label), "%s-%05d", f->name, i);
			snprintf(path, sizeof(path), "%s/%s%s", o.work, label, f->ext);
			if (fz_buf_set(&b, seed.p, seed.n) || fz_mutate(&b, &rng, how, sizeof(how))) {
				fprintf(stderr, "fuzz: out of memory\n");
				return 1;
			}
			if (f->seed_dir) { /* path is the copied checkpoint directory */
				snprintf(target, sizeof(target), "%s/%s", path, f->seed);
				if (copy_dir(f->seed_dir, path) || fz_write(target, &b)) {
					fprintf(stderr, "fuzz: cannot write %s\n", target);
					return 1;
				}
			} else if (fz_write(path, &b)) {
				fprintf(stderr, "fuzz: cannot write %s\n", path);
				return 1;
			}
			t = clp_now();
			r = run_one(f, path, label, o.timeout_s, msg, sizeof(msg));
			t = clp_now() - t;
			slowest = t > slowest ? t : slowest;
			count[r]++;
			if (r >= R_CRASH) {
				fprintf(stderr, "FAIL %s (%s, kept: %s): %s: %s\n", label, how, path,
					r_names[r], msg);
			} else {
				if (getenv("CLP_FUZZ_VERBOSE"))
					fprintf(stderr, "%s %s (%s): %s\n", label, r_names[r], how, msg);
				clp_io_remove_tree(path);
			}
		}
		printf(o.markdown ? "| %s | %d | %d | %d | %d | %d | %d | %.2f |\n"
				  : "%-14s %7d %9d %9d %8d %6d %8d %8.2f\n",
		       f->name, o.mutants, count[R_REJECT], count[R_ACCEPT], count[R_CRASH],
		       count[R_HANG], count[R_UNNAMED], slowest);
		fflush(stdout);
		for (int k = 0; k < R_COUNT; k++)
			total[k] += count[k];
		fz_buf_free(&seed);
		fz_buf_free(&b);
	}
	failed = total[R_CRASH] + total[R_HANG] + total[R_UNNAMED];
	printf("%s%d inputs: %d rejected with a message naming the input, %d accepted, %d crashes, "
	       "%d hangs, %d unnamed rejections (seed %llu, %.0f s)\n", o.markdown ? "\n" : "",
	       total[R_REJECT] + total[R_ACCEPT] + failed, total[R_REJECT], total[R_ACCEPT],
	       total[R_CRASH], total[R_HANG], total[R_UNNAMED], (unsigned long long)o.seed,
	       clp_now() - t0);
	if (!failed)
		clp_io_remove_tree(o.work);
	else
		printf("failing inputs kept under %s\n", o.work);
	return failed ? 1 : 0;
}
