/* clpipe train, eval and sample: configuration from a file and the command line, then a session
 * (engine/train/session.h). */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/train/run_dir.h"
#include "engine/train/session.h"
#include "engine/train/session_ft.h"
#include "tools/cli.h"
#include "tools/train_ft.h"
#include "tools/train_lost.h"

/* Shortcuts for the most used fields: "--resume" is "--ckpt.resume=true", ... Each belongs to
 * the commands it means something to. */
enum { TRAIN = 1, EVAL = 2, SAMPLE = 4, ALL = 7 };
struct alias {
	const char *flag, *key, *fixed; /* fixed: value implied by the flag (no argument) */
	int cmds;
};
static const struct alias aliases[] = {
	{"--resume", "ckpt.resume", "true", TRAIN},   {"--no-ckpt", "ckpt.dir", "none", TRAIN},
	{"--device", "train.device", NULL, ALL},      {"--log", "train.log", NULL, TRAIN},
	{"--steps", "train.steps", NULL, TRAIN},      {"--data", "data.path", NULL, TRAIN | EVAL},
	{"--ckpt", "sample.ckpt", NULL, EVAL | SAMPLE},
	{"--prompt", "sample.prompt", NULL, SAMPLE},  {"--length", "sample.length", NULL, SAMPLE},
	{"--temperature", "sample.temperature", NULL, SAMPLE},
	{"--top-k", "sample.top_k", NULL, SAMPLE},    {"--preset", "model.preset", NULL, ALL},
	{"--init", "train.init", NULL, TRAIN},
};
#define NALIASES (int)(sizeof(aliases) / sizeof(aliases[0]))

static int cmd_bit(const char *cmd)
{
	return !strcmp(cmd, "train") ? TRAIN : !strcmp(cmd, "eval") ? EVAL : SAMPLE;
}

static void help(const char *cmd)
{
	int bit = cmd_bit(cmd);

	if (bit == TRAIN)
		printf("usage: clpipe train [--config FILE] [--section.key=VALUE ...] [--resume]\n"
		       "                    [--ckpt.dir DIR | --no-ckpt] [--print-config]\n\n"
		       "Trains a model (one device, or a pipeline under mpirun). Checkpoints go to\n"
		       "--ckpt.dir (default: a new runs/<date>-<time>) every ckpt.minutes (10) or\n"
		       "ckpt.every steps, at the end and on Ctrl-C/SIGTERM (a second one stops at\n"
		       "once); --resume continues the run in --ckpt.dir (--resume=auto: or starts\n"
		       "fresh when there is no checkpoint). A new run never writes into a directory\n"
		       "holding another run's checkpoints (--ckpt.overwrite=true replaces them) or\n"
		       "anything else. One line per step (a progress bar on a terminal); --log F\n"
		       "writes the same as JSON lines; --print-config prints the effective config\n"
		       "(it is stored in every checkpoint).\n");
	else if (bit == EVAL)
		printf("usage: clpipe eval --ckpt DIR [--data FILE] [--eval.batches N] [--json]\n\n"
		       "Validation loss, perplexity and bits per byte of a checkpoint (the model,\n"
		       "tokenizer, data, batch, sequence length and precision come from the\n"
		       "checkpoint's stored config unless given here, or from a Hugging Face model\n"
		       "directory's config.json; eval.batches 0 = the whole split). --json prints one\n"
		       "JSON object: loss (nats/token, full precision), perplexity, bits_per_byte,\n"
		       "tokens (targets evaluated), seq, batch and data (what was evaluated).\n");
	else
		printf("usage: clpipe sample --ckpt DIR [--prompt TEXT] [--length N]\n"
		       "                     [--temperature T] [--top-k K]\n\n"
		       "Generates text from a checkpoint or a Hugging Face model directory (its\n"
		       "config.json gives the model; gpt2 and llama). --temperature 0 is greedy.\n");
	printf("\nshortcuts:");
	for (int a = 0; a < NALIASES; a++)
		if (aliases[a].cmds & bit)
			printf(" %s", aliases[a].flag);
	printf("\n           (for %s, ...)\n\nsettings (any can be given in the file or as "
	       "--section.key=value):\n", bit == TRAIN ? "ckpt.resume, ckpt.dir=\"none\"" :
	       "sample.ckpt, data.path");
	clp_cfg_help(&clp_train_schema, stdout);
}

static clp_status set_alias(clp_train_config *cfg, const struct alias *a, const char *v)
{
	char origin[64];

	snprintf(origin, sizeof(origin), "command line %s", a->flag);
	return clp_cfg_set_arg(&clp_train_schema, cfg, a->key, v, origin);
}

static int starts(const char *a, const char *prefix)
{
	return !strncmp(a, prefix, strlen(prefix));
}

/* The flag or key of another command: an error naming the one meant (0: not such a flag). */
static int wrong_command(const char *cmd, const char *arg)
{
	int bit = cmd_bit(cmd);
	char flag[64];

	snprintf(flag, sizeof(flag), "%.*s", (int)strcspn(arg, "="), arg);
	if (bit == TRAIN && (!strcmp(flag, "--ckpt") || !strcmp(flag, "--sample.ckpt")))
		return cli_usage_error(cmd, "%s names the checkpoint clpipe eval and sample read; a "
				       "training run's directory is --ckpt.dir DIR (with --resume "
				       "to continue the run there); to start from another "
				       "checkpoint's or a Hugging Face model's weights (fine-tuning), "
				       "give --init PATH", flag);
	if (bit != TRAIN && (!strcmp(flag, "--ckpt.dir") || !strcmp(flag, "--resume") ||
			     !strcmp(flag, "--ckpt.resume")))
		return cli_usage_error(cmd, "%s is for clpipe train; clpipe %s reads the checkpoint "
				       "given by --ckpt DIR (a checkpoint, or a run's directory: "
				       "its newest complete checkpoint)", flag, cmd);
	for (int a = 0; a < NALIASES; a++)
		if (!strcmp(flag, aliases[a].flag) && !(aliases[a].cmds & bit))
			return cli_usage_error(cmd, "%s is a flag of clpipe %s, not of clpipe %s",
					       flag, aliases[a].cmds & TRAIN ? "train"
					       : aliases[a].cmds & SAMPLE ? "sample" : "eval", cmd);
	return 0;
}

/* An unknown argument, with the closest flag or key when there is one. */
static int unknown(const char *cmd, const char *arg)
{
	static const char *const plain[] = {"--print-config", "--config", "--json", "--help"};
	char name[128];
	const char *best = NULL, *key;
	int bd = 1 << 20, bit = cmd_bit(cmd);

	snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
	for (int a = 0; a < NALIASES; a++) {
		int d = clp_cfg_distance(name, aliases[a].flag);

		if ((aliases[a].cmds & bit) && d < bd) {
			bd = d;
			best = aliases[a].flag;
		}
	}
	for (int i = 0; i < 4; i++)
		if (clp_cfg_distance(name, plain[i]) < bd) {
			bd = clp_cfg_distance(name, plain[i]);
			best = plain[i];
		}
	if (bd > (int)strlen(name) / 4 + 1 || bd > 3)
		best = NULL;
	if (starts(name, "--") && (key = clp_cfg_nearest(&clp_train_schema, name + 2)) &&
	    (!best || strchr(name, '.') || !strchr(key, '.') ||
	     clp_cfg_distance(name + 2, key) < bd)) {
		static char buf[160];

		snprintf(buf, sizeof(buf), "--%s", key);
		best = buf;
	}
	if (best)
		return cli_usage_error(cmd, "unknown argument '%s': did you mean %s?", arg, best);
	return cli_usage_error(cmd, "unknown argument '%s'", arg);
}

/* Check the aliases, then the config file and --section.key overrides, then the aliases again:
 * a value on the command line wins over the file's in either form. */
static int parse(const char *cmd, int argc, char **argv, clp_train_config *cfg, int *print_only,
		 int *json, int *resume_auto)
{
	clp_status s = clp_cfg_defaults(&clp_train_schema, cfg);
	struct {
		const struct alias *a;
		const char *v;
	} given[64];
	int ngiven = 0, bit = cmd_bit(cmd), rc;

	for (int i = 1; s == CLP_OK && i < argc; i++) {
		int matched = 0;

		if (cli_is_help(argv[i])) {
			help(cmd);
			return -1;
		}
		if (!strcmp(argv[i], "--print-config")) {
			*print_only = 1;
			argv[i] = "";
			continue;
		}
		if (!strcmp(argv[i], "--json") && bit == EVAL) {
			*json = 1;
			argv[i] = "";
			continue;
		}
		if ((rc = wrong_command(cmd, argv[i])) != 0)
			return rc;
		if (bit == TRAIN && !strcmp(argv[i], "--resume=auto")) {
			*resume_auto = 1;
			argv[i] = "--resume";
		}
		for (int a = 0; !matched && a < NALIASES; a++) {
			const char *v = NULL;
			int r;

			if (aliases[a].fixed) {
				if (strcmp(argv[i], aliases[a].flag) != 0)
					continue;
				v = aliases[a].fixed;
				argv[i] = "";
				r = 1;
			} else {
				int j = i;

				r = cli_value(argc, argv, &j, aliases[a].flag, &v);
				if (r < 0)
					return cli_usage_error(cmd, "%s needs a value", aliases[a].flag);
				if (r > 0)
					for (int k = i; k <= j; k++)
						argv[k] = "";
				i = j;
			}
			if (r > 0) {
				if (ngiven == (int)(sizeof(given) / sizeof(given[0])))
					return cli_usage_error(cmd, "more than %d shortcut flags",
							       ngiven);
				given[ngiven].a = &aliases[a];
				given[ngiven++].v = v;
				s = set_alias(cfg, &aliases[a], v);
				matched = 1;
			}
		}
	}
	if (s == CLP_OK) {
		int n = 0;

		/* drop the consumed arguments, then the generic parser */
		for (int i = 0; i < argc; i++)
			if (i == 0 || argv[i][0])
				argv[n++] = argv[i];
		argc = n;
		s = clp_cfg_args(&clp_train_schema, cfg, &argc, argv);
		if (s == CLP_OK && argc > 1)
			return unknown(cmd, argv[1]);
		for (int k = 0; s == CLP_OK && k < ngiven; k++) /* over --config's values */
			s = set_alias(cfg, given[k].a, given[k].v);
	}
	return s == CLP_OK ? 0 : cli_fail(cmd, s);
}

/* CLPIPE_FAULT="KIND:RANK:STEP[,...]" makes that rank (of the job as started) act after that
 * step, to test how the job handles it: die (SIGKILL), stop (SIGSTOP: stops answering), int or
 * term (raises SIGINT or SIGTERM, as Ctrl-C or a scheduler would: the run stops at the next
 * step's end with a checkpoint), intint (two SIGINTs: the second stops at once), diesave
 * (SIGKILL while saving the checkpoint of that step: after this rank's files, before the
 * manifest), dierec (SIGKILL in its STEP-th recovery under ULFM, once the survivors' shrink
 * has counted it: tools/train_ft.c). */
struct fault {
	int kind, rank; /* kind 1 die, 2 stop, 3 int, 4 term, 5 intint, 6 diesave, 7 dierec */
	long step;
	struct ft *ft; /* ULFM: what a recovery goes on from (train_ft.h) */
};

static void fault_hook(void *ud, long step)
{
	static const int sigs[] = {0, SIGKILL, SIGSTOP, SIGINT, SIGTERM, SIGINT};
	static const char *const what[] = {"", "dies", "stops", "raises SIGINT", "raises SIGTERM",
					   "raises SIGINT twice"};
	const struct fault *f = ud;

	lost_update(step); /* what a signal would now report */
	ft_mark(f->ft, step);
	if (!f->kind || f->kind >= 6 || step != f->step)
		return;
	fprintf(stderr, "CLPIPE_FAULT: rank %d %s after step %ld (at %.3f s since the epoch)\n",
		f->rank, what[f->kind], step, ft_wall());
	fflush(stderr);
	raise(sigs[f->kind]);
	if (f->kind == 5) /* a second Ctrl-C: at once */
		raise(SIGINT);
}

static void save_fault(void *ud, long step)
{
	const struct fault *f = ud;

	if (f->kind != 6 || step != f->step)
		return;
	fprintf(stderr, "CLPIPE_FAULT: rank %d dies while saving the checkpoint of step %ld "
		"(at %.3f s since the epoch)\n", f->rank, step, ft_wall());
	fflush(stderr);
	raise(SIGKILL);
}

static void install_fault(clp_session *s, int rank, struct fault *f)
{
	const char *e = getenv("CLPIPE_FAULT");
	char kind[8];

	clp_session_set_hook(s, fault_hook, f);
	for (; e && *e; e = strchr(e, ',') ? strchr(e, ',') + 1 : "") /* this rank's entry */
		if (sscanf(e, "%7[a-z]:%d:%ld", kind, &f->rank, &f->step) == 3 && f->rank == rank) {
			f->kind = !strcmp(kind, "die") ? 1 : !strcmp(kind, "stop") ? 2
				  : !strcmp(kind, "int") ? 3 : !strcmp(kind, "term") ? 4
				  : !strcmp(kind, "intint") ? 5 : !strcmp(kind, "diesave") ? 6
				  : !strcmp(kind, "dierec") ? 7 : 0;
			clp_session_set_save_hook(s, save_fault, f);
			return;
		}
}

/* The newest entry of runs/ (for the message of --resume without a directory). */
static void newest_run(char *out, size_t n)
{
	DIR *d = opendir("runs");
	struct dirent *de;

	out[0] = '\0';
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && strcmp(de->d_name, out) > 0)
			snprintf(out, n, "%s", de->d_name);
	if (d)
		closedir(d);
}

/* The run directory's lock, held until the process exits (run_dir.h, CLP_RUN_DIR_LOCK). */
static int run_lock = -1;
static int run_dir_made; /* the lock made the directory (rank 0) */

/* A run that ends before writing anything leaves no directory it made (nor its lock file). */
static void drop_run_dir(const char *dir)
{
	char path[4200];

	clp_run_dir_unlock(run_lock);
	run_lock = -1;
	if (!run_dir_made)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, CLP_RUN_DIR_LOCK);
	unlink(path);
	rmdir(dir);
}

/* Rank 0 takes the directory (no process of another job may hold it; before it deletes
 * anything there), checks it and, with ckpt.overwrite, deletes the old checkpoints; then every
 * other rank checks it and holds it too. */
static clp_status take_run_dir(const clp_train_config *cfg, clp_comm *comm,
			       enum clp_run_mode mode, int *resume)
{
	const char *dir = cfg->ckpt.dir;
	int rank = clp_comm_rank(comm), n = clp_comm_size(comm), ok = 1, *all;
	clp_status st = CLP_OK;
	struct stat sb;

	if (rank == 0) {
		/* checked first (a directory that is not ours gets no lock file), then held,
		 * then checked again and the old checkpoints deleted under the lock */
		run_dir_made = stat(dir, &sb) != 0;
		st = clp_run_dir_check(dir, mode, cfg->ckpt.overwrite, 0, resume);
		if (st == CLP_OK)
			st = clp_run_dir_lock(dir, 1, &run_lock);
		if (st == CLP_OK)
			st = clp_run_dir_check(dir, mode, cfg->ckpt.overwrite, 1, resume);
		ok = st == CLP_OK;
	}
	if (n > 1) {
		clp_status sg;

		all = calloc((size_t)n, sizeof(*all));
		if (!all)
			return st != CLP_OK ? st : clp_error(CLP_ERR_NOMEM, "out of host memory");
		sg = clp_comm_allgather(comm, &ok, sizeof(ok), all, "the run directory taken");
		ok = all[0];
		free(all);
		if (st != CLP_OK)
			return st;
		CLP_TRY(sg);
	}
	if (rank == 0)
		return st;
	if (!ok)
		return clp_error(CLP_ERR_STATE, "rank 0 could not take ckpt.dir %s (its message says "
				 "why): nothing was written", dir);
	CLP_TRY(clp_run_dir_check(dir, mode, cfg->ckpt.overwrite, 0, resume));
	return clp_run_dir_lock(dir, 0, &run_lock);
}

/* The run's directory: "none" (no checkpoints), the one given, or a new runs/<date>-<time>
 * (rank 0 names it for the job), checked before anything is written (run_dir.h). */
static clp_status resolve_run_dir(clp_train_config *cfg, clp_comm *comm, int resume_auto,
				  int *made)
{
	int rank = clp_comm_rank(comm), n = clp_comm_size(comm), resume = 0;
	enum clp_run_mode mode;

	if (!strcmp(cfg->ckpt.dir, "none")) {
		if (cfg->ckpt.resume)
			return clp_error(CLP_ERR_INVALID, "--resume with --no-ckpt (ckpt.dir = "
					 "\"none\"): there is no directory to resume from");
		cfg->ckpt.dir[0] = '\0';
		return CLP_OK;
	}
	if (!cfg->ckpt.dir[0]) {
		char name[256] = "", *all;
		clp_status st = CLP_OK;

		if (cfg->ckpt.resume) {
			newest_run(name, sizeof(name));
			return clp_error(CLP_ERR_INVALID, "--resume needs the run's directory: "
					 "--ckpt.dir DIR%s%s%s", name[0] ? " (the newest under runs/ is "
					 "runs/" : "", name, name[0] ? ")" : "");
		}
		if (rank == 0) {
			clp_run_dir_default("runs", name, sizeof(name));
			*made = 1;
		}
		if (n > 1) { /* every rank writes into rank 0's choice */
			all = calloc((size_t)n, sizeof(name));
			if (!all)
				return clp_error(CLP_ERR_NOMEM, "out of host memory");
			st = clp_comm_allgather(comm, name, sizeof(name), all, "the run directory");
			memcpy(name, all, sizeof(name));
			free(all);
			CLP_TRY(st);
		}
		snprintf(cfg->ckpt.dir, sizeof(cfg->ckpt.dir), "%s", name);
		clp_cfg_set_origin(&clp_train_schema, cfg, "ckpt.dir", "a new run directory");
	}
	mode = !cfg->ckpt.resume ? CLP_RUN_FRESH : resume_auto ? CLP_RUN_RESUME_AUTO
							       : CLP_RUN_RESUME;
	CLP_TRY(take_run_dir(cfg, comm, mode, &resume));
	cfg->ckpt.resume = resume;
	return CLP_OK;
}

/* The run's file settings as absolute paths, so that the config stored in its checkpoints
 * works from any directory (clpipe eval --ckpt ... elsewhere). */
static void absolute_paths(clp_train_config *cfg)
{
	char *paths[] = {cfg->data.path, cfg->data.val_path, cfg->data.bpe_vocab,
			 cfg->data.bpe_merges, cfg->data.tokenizer_path};
	char cwd[2048], buf[4096];

	if (!getcwd(cwd, sizeof(cwd)))
		return;
	for (int i = 0; i < 5; i++) {
		size_t len;

		if (!paths[i][0] || paths[i][0] == '/')
			continue;
		snprintf(buf, sizeof(buf), "%s/%s", cwd, paths[i]);
		len = strlen(buf);
		if (len < sizeof(cfg->data.path)) /* every path field has data.path's size */
			memcpy(paths[i], buf, len + 1);
	}
}

/* The first lines of a run: where its checkpoints go, and the settings not at their defaults. */
static void announce(const clp_train_config *cfg)
{
	int changed = 0;

	if (cfg->ckpt.dir[0]) {
		printf("run directory: %s (checkpoints", cfg->ckpt.dir);
		if (cfg->ckpt.every > 0)
			printf(" every %ld steps,", cfg->ckpt.every);
		if (cfg->ckpt.minutes > 0)
			printf(" every %g min,", cfg->ckpt.minutes);
		printf(" at the end and on Ctrl-C; --no-ckpt: none)\n");
	} else {
		printf("run directory: none (--no-ckpt: no checkpoints; Ctrl-C loses the run)\n");
	}
	for (int i = 0; i < clp_train_schema.nfields; i++)
		changed += strcmp(clp_cfg_origin_of(&clp_train_schema, cfg,
						    clp_train_schema.fields[i].key), "default") != 0;
	printf("config: %d setting%s not at the default (--print-config shows the effective "
	       "config; %severy checkpoint store%s it)\n", changed, changed == 1 ? "" : "s",
	       cfg->train.log[0] ? "train.log and " : "", cfg->train.log[0] ? "" : "s");
}

/* A fatal error on one rank ends the whole job (Open MPI has no way to carry on without it). */
static int fail(const char *cmd, clp_comm *comm, clp_status st)
{
	int rc = cli_fail(cmd, st);

	if (comm && clp_comm_size(comm) > 1) {
		fprintf(stderr, "clpipe %s: rank %d stops the job\n", cmd, clp_comm_rank(comm));
		fflush(stderr);
		clp_comm_abort(comm, rc);
	}
	clp_comm_free(comm);
	return rc;
}

/* clpipe eval --json: full precision, null where a figure does not apply (BERT's bits/byte). */
static void print_json(const clp_session *s, double loss, double bpb)
{
	const clp_train_config *c = clp_session_config(s);
	json_t *o = json_pack("{s:f,s:f,s:o,s:o,s:I,s:s,s:I,s:I,s:s}", "loss", loss, "perplexity",
			      exp(loss), "bits_per_byte", bpb == bpb ? json_real(bpb) : json_null(),
			      "baseline_bits_per_byte", bpb == bpb
			      ? json_real(clp_session_baseline_bpb(s)) : json_null(), "tokens",
			      (json_int_t)clp_session_eval_tokens(s), "preset", c->model.preset,
			      "seq", (json_int_t)c->train.seq, "batch", (json_int_t)c->train.batch,
			      "data", c->data.path);

	if (o) {
		json_dumpf(o, stdout, JSON_REAL_PRECISION(17));
		fputc('\n', stdout);
	}
	json_decref(o);
}

/* The summary at the end of a run, with the run's own arguments in its resume command. */
static void summary(const clp_session *s, int argc, char *const *args, const struct ft *ft)
{
	clp_train_summary sum;
	char program[4096];

	if (clp_session_summary(s, &sum) != CLP_OK)
		return;
	if (ft && ft->events) { /* the commands go on in the layout the run went on in */
		const clp_train_config *c = clp_session_config(s);
		const struct ft_event *e = &ft->ev[(ft->events - 1) % 8];
		int skip = clp_session_skip(s);
		size_t l = skip ? (size_t)snprintf(sum.relayout, sizeof(sum.relayout),
						   "--skip.stage_nodes=")
				: (size_t)snprintf(sum.relayout, sizeof(sum.relayout),
						   "--pipeline.schedule=%s --pipeline.stages=%ld "
						   "--pipeline.replicas=%ld", c->pipeline.schedule,
						   (long)c->pipeline.stages,
						   (long)c->pipeline.replicas);

		for (int i = 0; skip && i < c->skip.stage_nodes.n && l < sizeof(sum.relayout); i++)
			l += (size_t)snprintf(sum.relayout + l, sizeof(sum.relayout) - l, "%s%ld%s",
					      i ? "," : "[", (long)c->skip.stage_nodes.v[i],
					      i + 1 == c->skip.stage_nodes.n ? "]" : "");
		for (int i = 0; !skip && i < c->pipeline.layers.n && l < sizeof(sum.relayout); i++)
			l += (size_t)snprintf(sum.relayout + l, sizeof(sum.relayout) - l, "%s%ld%s",
					      i ? "," : " --pipeline.layers=[", (long)c->pipeline
					      .layers.v[i], i + 1 == c->pipeline.layers.n ? "]" : "");
		snprintf(sum.relayout_why, sizeof(sum.relayout_why), "after step %ld: %s", e->step,
			 e->layout);
	}
	clp_train_summary_program(program, sizeof(program));
	clp_train_summary_print(stdout, &sum, program, argc - 1, args + 1);
}

/* After a run stopped by a signal: the same line on every rank. */
static void say_stopped(const clp_session *s, int rank, int nranks)
{
	int from, sig = clp_session_stopped(s, &from);
	const char *ck = clp_session_last_ckpt(s);

	fprintf(stderr, "clpipe train: ");
	if (nranks > 1)
		fprintf(stderr, "rank %d of %d: the job ", rank, nranks);
	fprintf(stderr, "stopped by signal %d", sig);
	if (nranks > 1)
		fprintf(stderr, " (on rank %d)", from);
	fprintf(stderr, " after step %ld; ", clp_session_steps_done(s));
	if (ck[0])
		fprintf(stderr, "checkpoint %s saved: continue with --resume --ckpt.dir=%s\n", ck,
			clp_session_config(s)->ckpt.dir);
	else
		fprintf(stderr, "no checkpoint (--no-ckpt)\n");
	fflush(stderr);
}

static int run(const char *cmd, enum clp_session_mode mode, int argc, char **argv)
{
	clp_train_config cfg;
	clp_session *s = NULL;
	clp_comm *comm = NULL;
	int print_only = 0, json = 0, rc, rank = 0, nranks = 1, resume_auto = 0, made_dir = 0;
	int nargs = argc <= 512 ? argc : -1;
	char *args[512]; /* the arguments as given: parse() consumes argv */
	clp_status st;

	memcpy(args, argv, (size_t)(nargs > 0 ? nargs : 0) * sizeof(*args));
	rc = parse(cmd, argc, argv, &cfg, &print_only, &json, &resume_auto);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (mode == CLP_SESSION_TRAIN) {
		st = clp_comm_world(&argc, &argv, &comm);
		if (st != CLP_OK)
			return cli_fail(cmd, st);
		rank = clp_comm_rank(comm);
		nranks = clp_comm_size(comm);
		if (!print_only &&
		    (st = resolve_run_dir(&cfg, comm, resume_auto, &made_dir)) != CLP_OK)
			return fail(cmd, comm, st);
		if (!print_only)
			absolute_paths(&cfg);
		if (!print_only && rank == 0) {
			announce(&cfg);
			fflush(stdout);
		}
	}
	st = clp_session_open(&s, &cfg, mode, comm, stdout);
	if (st != CLP_OK) {
		if (mode == CLP_SESSION_TRAIN && !print_only)
			drop_run_dir(cfg.ckpt.dir);
		if (made_dir && !rmdir(cfg.ckpt.dir)) /* the new run directory, still empty */
			rmdir("runs");
		return fail(cmd, comm, st);
	}
	if (print_only && rank == 0) {
		printf("# effective config (clpipe %s)\n", cmd);
		clp_cfg_write(&clp_train_schema, clp_session_config(s), stdout, CLP_CFG_ORIGINS);
		printf("\n");
	}
	if (print_only) {
		clp_session_close(s);
		clp_comm_free(comm);
		return 0;
	}
	if (mode == CLP_SESSION_TRAIN && clp_session_steps_done(s) >= cfg.train.steps) {
		if (rank == 0)
			printf("nothing to train: the checkpoint is at step %ld and train.steps = %ld "
			       "(to train on, give --steps above %ld; the learning rate then follows "
			       "the longer schedule)\n", clp_session_steps_done(s), cfg.train.steps,
			       clp_session_steps_done(s));
		clp_session_close(s);
		clp_comm_free(comm);
		return 0;
	}
	if (mode == CLP_SESSION_TRAIN) {
		struct ft ft = {0};
		struct fault f = {0, -1, 0, &ft};
		int idle = 0;

		lost_install(s, rank, nranks, clp_session_steps_done(s));
		install_fault(s, rank, &f);
		ft.die_in = f.kind == 7 ? (int)f.step : 0;
		ft_follow(&ft, s);
		st = clp_session_train(s, NULL);
		while (st == CLP_ERR_PEER_LOST && clp_comm_ft(comm) && !idle) { /* ULFM: go on */
			for (int tries = 1;; tries++) {
				st = ft_recover(&ft, &s, &cfg, ft.cont ? ft.cont : comm, stdout, &idle);
				if (st == CLP_OK || !ft.retry || tries == 8)
					break;
				/* another rank lost while recovering: the old session stands, again */
				printf("ft: rank %d: another rank was lost during the recovery (%s); "
				       "recovering again\n", rank, clp_last_error());
				fflush(stdout);
			}
			if (st != CLP_OK || idle)
				break; /* a recovery that failed otherwise is not tried again */
			clp_session_set_hook(s, fault_hook, &f);
			clp_session_set_save_hook(s, save_fault, &f);
			st = clp_session_train(s, NULL);
		}
		if (st == CLP_OK && !idle) {
			clp_comm *live = ft.cont ? ft.cont : comm; /* the survivors' after a recovery */
			int lrank = clp_comm_rank(live), lsize = clp_comm_size(live);

			if (clp_session_stopped(s, NULL))
				say_stopped(s, lrank, lsize);
			if (lrank == 0) {
				summary(s, nargs, args, &ft);
				ft_summary(&ft, stdout);
			}
			if (clp_session_stopped(s, NULL)) {
				rc = 128 + clp_session_stopped(s, NULL);
				lost_uninstall();
				/* no rank exits (mpirun then ends the others) before rank 0 has said all */
				if (lsize > 1)
					st = clp_comm_barrier(live, "the end of a stopped run");
			}
		}
		clp_session_close(s);
		s = NULL;
		ft_free(&ft);
	} else if (mode == CLP_SESSION_EVAL) {
		double loss, bpb;

		const clp_train_config *c = clp_session_config(s);

		if (!json && c->eval.batches > 0)
			printf("eval of %s on %s: %ld batches x %ld sequences of %ld tokens, %s\n",
			       c->sample.ckpt, c->data.path, c->eval.batches, c->train.batch,
			       c->train.seq, c->train.precision);
		else if (!json)
			printf("eval of %s on %s: the whole validation split, batches of %ld "
			       "sequences of %ld tokens, %s\n", c->sample.ckpt, c->data.path,
			       c->train.batch, c->train.seq, c->train.precision);
		st = clp_session_eval(s, c->eval.batches, &loss, &bpb);
		if (st == CLP_OK && json) {
			print_json(s, loss, bpb);
		} else if (st == CLP_OK) {
			printf("val loss %.4f nats/token, perplexity %.3f", loss, exp(loss));
			if (bpb == bpb)
				printf(", %.4f bits/byte (unigram baseline %.4f)", bpb,
				       clp_session_baseline_bpb(s));
			printf("\n");
		}
	} else {
		st = clp_session_sample(s, stdout);
	}
	clp_session_close(s);
	if (st != CLP_OK)
		return fail(cmd, comm, st);
	clp_comm_free(comm);
	return rc;
}

int cmd_train(int argc, char **argv)
{
	return run("train", CLP_SESSION_TRAIN, argc, argv);
}

int cmd_eval(int argc, char **argv)
{
	return run("eval", CLP_SESSION_EVAL, argc, argv);
}

int cmd_sample(int argc, char **argv)
{
	return run("sample", CLP_SESSION_SAMPLE, argc, argv);
}
