/* The summary at the end of `clpipe train` (see summary.h). */
#include "engine/train/summary.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fmt_duration(double sec, char *buf, size_t n)
{
	long t = (long)(sec + 0.5);

	if (t >= 3600)
		snprintf(buf, n, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
	else if (t >= 60)
		snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, n, "%.1f s", sec);
}

static void fmt_count(double v, char *buf, size_t n)
{
	if (v >= 1e9)
		snprintf(buf, n, "%.2f G", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, n, "%.2f M", v / 1e6);
	else if (v >= 1e4)
		snprintf(buf, n, "%.1f k", v / 1e3);
	else
		snprintf(buf, n, "%.0f", v);
}

/* One word for a POSIX shell: as is when it is plain, else in single quotes. */
static void shell_word(FILE *out, const char *w)
{
	int plain = *w != '\0';

	for (const char *p = w; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "_-./=:,+@%", *p))
			plain = 0;
	if (plain) {
		fputs(w, out);
		return;
	}
	fputc('\'', out);
	for (const char *p = w; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", out);
		else
			fputc(*p, out);
	}
	fputc('\'', out);
}

static int starts(const char *a, const char *prefix)
{
	return !strncmp(a, prefix, strlen(prefix));
}

/* a names a key that one of the words of over ("--k=v ...") sets: 1 "--k=v", 2 "--k" (its
 * value follows) */
static int overridden(const char *a, const char *over)
{
	for (const char *w = over; w && *w;) {
		const char *eq = strchr(w, '='), *end = strchr(w, ' ');
		size_t k;

		if (!end)
			end = w + strlen(w);
		k = eq && eq < end ? (size_t)(eq - w) : (size_t)(end - w);
		if (!strncmp(a, w, k) && (a[k] == '=' || a[k] == '\0'))
			return a[k] == '=' ? 1 : 2;
		w = *end ? end + 1 : end;
	}
	return 0;
}

/* The run's arguments less those the resume command sets itself, with the run's directory and
 * over's words in place of the settings they replace. */
static void args(FILE *out, int argc, char *const *argv, int drop_steps, const char *dir,
		 const char *over)
{
	int has_dir = 0;

	if (argc < 0)
		fputs(" <this run's arguments>", out);
	for (int i = 0; i < argc; i++)
		has_dir |= starts(argv[i], "--ckpt.dir");
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		int o = overridden(a, over);

		if (!strcmp(a, "--resume") || starts(a, "--resume=") || starts(a, "--ckpt.resume"))
			continue;
		if (o) {
			i += o == 2; /* and its value */
			continue;
		}
		if (drop_steps && (!strcmp(a, "--steps") || !strcmp(a, "--train.steps"))) {
			i++; /* and its value */
			continue;
		}
		if (drop_steps && (starts(a, "--steps=") || starts(a, "--train.steps=")))
			continue;
		fputc(' ', out);
		shell_word(out, a);
	}
	for (const char *w = over; w && *w;) { /* one word each (a value may hold ", ") */
		const char *next = strstr(w + 2, " --");
		char word[256];
		size_t n = next ? (size_t)(next - w) : strlen(w);

		snprintf(word, sizeof(word), "%.*s", (int)(n < sizeof(word) ? n : sizeof(word) - 1),
			 w);
		fputc(' ', out);
		shell_word(out, word);
		w = next ? next + 1 : w + n;
	}
	if (argc >= 0 && !has_dir && dir[0]) { /* a default run directory, or the file's */
		fputs(" --ckpt.dir=", out);
		shell_word(out, dir);
	}
}

void clp_train_summary_print(FILE *out, const clp_train_summary *s, const char *program,
			     int argc, char *const *argv)
{
	char wall[32], tok[32], mpi[48] = "";
	long run = s->steps - s->first_step;

	if (s->ranks > 1)
		snprintf(mpi, sizeof(mpi), "mpirun -np %d ", s->ranks);
	fmt_duration(s->wall_s, wall, sizeof(wall));
	fmt_count(s->tokens, tok, sizeof(tok));
	fprintf(out, "== run summary\n");
	fprintf(out, "steps:       %ld of %ld", s->steps, s->planned);
	if (s->first_step > 0 && s->relayout_why[0]) /* the session of the last recovery's */
		fprintf(out, " (%ld in the layout the run went on in, from step %ld: the tokens "
			"and wall time below count from there)", run, s->first_step);
	else if (s->first_step > 0)
		fprintf(out, " (%ld in this run, resumed at step %ld)", run, s->first_step);
	if (s->stopped)
		fprintf(out, ", stopped by signal %d", s->stopped);
	else if (s->steps < s->planned && s->target_ratio > 0)
		fprintf(out, ", stopped at the target (%.3g x the unigram baseline)",
			s->target_ratio);
	fprintf(out, "\ntokens:      %s in this run\n", tok);
	fprintf(out, "wall time:   %s, %.0f tokens/s on average (evaluations and checkpoints "
		"included", wall, s->wall_s - s->build_s > 0 ? s->tokens / (s->wall_s - s->build_s)
		: 0.0);
	if (s->build_s >= 0.05)
		fprintf(out, "; %.1f s of first-run kernel builds not", s->build_s);
	fprintf(out, ")\n");
	if (s->precision[0]) {
		fprintf(out, "precision:   %s", s->precision);
		if (strcmp(s->precision, "fp32"))
			fprintf(out, " values, fp32 masters, gradients and optimizer state");
		if (s->loss_scale > 0)
			fprintf(out, "; loss scale %g at the end", s->loss_scale);
		if (s->skipped > 0)
			fprintf(out, "; %ld step(s) skipped (non-finite gradients)", s->skipped);
		fputc('\n', out);
	}
	if (s->best_step >= 0) {
		fprintf(out, "best val:    %.4f nats/token", s->best_loss);
		if (isfinite(s->best_bpb))
			fprintf(out, ", %.3f bits/byte", s->best_bpb);
		fprintf(out, " at step %ld", s->best_step);
		if (isfinite(s->best_bpb) && isfinite(s->baseline_bpb) && s->baseline_bpb > 0)
			fprintf(out, " (%.3f x the unigram baseline %.3f)",
				s->best_bpb / s->baseline_bpb, s->baseline_bpb);
		fputc('\n', out);
	} else {
		fprintf(out, "best val:    no evaluation ran\n");
	}
	fprintf(out, "checkpoint:  %s\n", s->ckpt[0] ? s->ckpt : "none (--no-ckpt)");
	if (s->curve[0])
		fprintf(out, "loss curve:  %s\n", s->curve);
	if (s->log[0])
		fprintf(out, "log:         %s\n", s->log);
	if (!s->ckpt[0])
		return;
	if (s->can_sample) {
		fprintf(out, "sample:      %s sample --ckpt ", program);
		shell_word(out, s->ckpt);
		fputs(" --prompt ", out);
		shell_word(out, s->prompt[0] ? s->prompt : "The ");
		fputc('\n', out);
	} else {
		fprintf(out, "evaluate:    %s eval --ckpt ", program);
		shell_word(out, s->ckpt);
		fputc('\n', out);
	}
	if (s->steps < s->planned) { /* stopped early: go on with the same schedule */
		fprintf(out, "resume:      %s%s train", mpi, program);
		args(out, argc, argv, 0, s->ckpt_dir, s->relayout);
		fprintf(out, " --resume%s", s->target_ratio > 0 ? " --eval.target_ratio=0" : "");
		if (s->relayout_why[0])
			fprintf(out, "   (the layout the run went on in %s)", s->relayout_why);
		fputc('\n', out);
	} else { /* the schedule is done: train further on a longer one */
		fprintf(out, "train on:    %s%s train", mpi, program);
		args(out, argc, argv, 1, s->ckpt_dir, s->relayout);
		fprintf(out, " --resume --train.steps=%ld   (the learning rate follows the longer "
			"schedule%s%s)\n", 2 * s->planned, s->relayout_why[0] ?
			"; the layout the run went on in " : "", s->relayout_why);
	}
}

void clp_train_summary_program(char *out, size_t n)
{
	char exe[PATH_MAX], cwd[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t c;

	if (len <= 0) {
		snprintf(out, n, "clpipe");
		return;
	}
	exe[len] = '\0';
	if (len > 10 && !strcmp(exe + len - 10, " (deleted)")) /* rebuilt while it ran */
		exe[len - 10] = '\0';
	if (getcwd(cwd, sizeof(cwd)) && (c = strlen(cwd)) > 0 && !strncmp(exe, cwd, c) &&
	    exe[c] == '/')
		snprintf(out, n, "%s", exe + c + 1);
	else
		snprintf(out, n, "%s", exe);
}
