/* clpipe train, eval and sample: configuration from a file and the command line, then a session
 * (engine/train/session.h). */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/session.h"
#include "tools/cli.h"
#include "tools/train_lost.h"

/* Shortcuts for the most used fields: "--resume" is "--ckpt.resume=true", ... */
struct alias {
	const char *flag, *key, *fixed; /* fixed: value implied by the flag (no argument) */
};
static const struct alias aliases[] = {
	{"--resume", "ckpt.resume", "true"}, {"--device", "train.device", NULL},
	{"--log", "train.log", NULL},        {"--steps", "train.steps", NULL},
	{"--data", "data.path", NULL},       {"--ckpt", "sample.ckpt", NULL},
	{"--prompt", "sample.prompt", NULL}, {"--length", "sample.length", NULL},
	{"--temperature", "sample.temperature", NULL}, {"--top-k", "sample.top_k", NULL},
	{"--preset", "model.preset", NULL}, {"--init", "train.init", NULL},
};

static void help(const char *cmd)
{
	if (!strcmp(cmd, "train"))
		printf("usage: clpipe train [--config FILE] [--section.key=VALUE ...] [--resume]\n"
		       "                    [--print-config]\n\n"
		       "Trains a model on one device. The effective config is printed first and stored\n"
		       "in every checkpoint. One line per step (a progress bar on a terminal); --log F\n"
		       "writes the same as JSON lines.\n");
	else if (!strcmp(cmd, "eval"))
		printf("usage: clpipe eval --ckpt DIR [--data FILE] [--eval.batches N] [--json]\n\n"
		       "Validation loss, perplexity and bits per byte of a checkpoint (the model\n"
		       "and tokenizer come from the checkpoint, or from a Hugging Face model\n"
		       "directory's config.json; eval.batches 0 = the whole split). --json prints one\n"
		       "JSON object: loss (nats/token, full precision), perplexity, bits_per_byte,\n"
		       "tokens (targets evaluated), sequences.\n");
	else
		printf("usage: clpipe sample --ckpt DIR [--prompt TEXT] [--length N]\n"
		       "                     [--temperature T] [--top-k K]\n\n"
		       "Generates text from a checkpoint or a Hugging Face model directory (its\n"
		       "config.json gives the model; gpt2 and llama). --temperature 0 is greedy.\n");
	printf("\nshortcuts: --resume --device --log --steps --data --ckpt --prompt --length\n"
	       "           --temperature --top-k --preset --init (for ckpt.resume, train.device,\n"
	       "           ..., train.init)\n\n"
	       "settings (any can be given in the file or as --section.key=value):\n");
	clp_cfg_help(&clp_train_schema, stdout);
}

static clp_status set_alias(clp_train_config *cfg, const struct alias *a, const char *v)
{
	char origin[64];

	snprintf(origin, sizeof(origin), "command line %s", a->flag);
	return clp_cfg_set_arg(&clp_train_schema, cfg, a->key, v, origin);
}

/* Check the aliases, then the config file and --section.key overrides, then the aliases again:
 * a value on the command line wins over the file's in either form. */
static int parse(const char *cmd, int argc, char **argv, clp_train_config *cfg, int *print_only,
		 int *json)
{
	clp_status s = clp_cfg_defaults(&clp_train_schema, cfg);
	struct {
		const struct alias *a;
		const char *v;
	} given[64];
	int ngiven = 0;

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
		if (!strcmp(argv[i], "--json") && !strcmp(cmd, "eval")) {
			*json = 1;
			argv[i] = "";
			continue;
		}
		for (size_t a = 0; !matched && a < sizeof(aliases) / sizeof(aliases[0]); a++) {
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
			return cli_usage_error(cmd, "unknown argument '%s'", argv[1]);
		for (int k = 0; s == CLP_OK && k < ngiven; k++) /* over --config's values */
			s = set_alias(cfg, given[k].a, given[k].v);
	}
	return s == CLP_OK ? 0 : cli_fail(cmd, s);
}

/* CLPIPE_FAULT="die|stop:RANK:STEP" makes that rank kill or stop itself after that step, to
 * test how the job handles a rank that dies or stops answering. */
struct fault {
	int kind, rank; /* kind 1 die, 2 stop */
	long step;
};

static void fault_hook(void *ud, long step)
{
	const struct fault *f = ud;

	lost_update(step); /* what a signal would now report */
	if (!f->kind || step != f->step)
		return;
	fprintf(stderr, "CLPIPE_FAULT: rank %d %s after step %ld\n", f->rank,
		f->kind == 1 ? "dies" : "stops", step);
	fflush(stderr);
	raise(f->kind == 1 ? SIGKILL : SIGSTOP);
}

static void install_fault(clp_session *s, int rank, struct fault *f)
{
	const char *e = getenv("CLPIPE_FAULT");
	char kind[8];

	clp_session_set_hook(s, fault_hook, f);
	if (!e || sscanf(e, "%7[a-z]:%d:%ld", kind, &f->rank, &f->step) != 3 || f->rank != rank)
		return;
	f->kind = !strcmp(kind, "die") ? 1 : !strcmp(kind, "stop") ? 2 : 0;
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
	json_t *o = json_pack("{s:f,s:f,s:o,s:o,s:I,s:s,s:I}", "loss", loss, "perplexity",
			      exp(loss), "bits_per_byte", bpb == bpb ? json_real(bpb) : json_null(),
			      "baseline_bits_per_byte", bpb == bpb
			      ? json_real(clp_session_baseline_bpb(s)) : json_null(), "tokens",
			      (json_int_t)clp_session_eval_tokens(s), "preset", c->model.preset,
			      "seq", (json_int_t)c->train.seq);

	if (o) {
		json_dumpf(o, stdout, JSON_REAL_PRECISION(17));
		fputc('\n', stdout);
	}
	json_decref(o);
}

/* The summary at the end of a run, with the run's own arguments in its resume command. */
static void summary(const clp_session *s, int argc, char *const *args)
{
	clp_train_summary sum;
	char program[4096];

	if (clp_session_summary(s, &sum) != CLP_OK)
		return;
	clp_train_summary_program(program, sizeof(program));
	clp_train_summary_print(stdout, &sum, program, argc - 1, args + 1);
}

static int run(const char *cmd, enum clp_session_mode mode, int argc, char **argv)
{
	clp_train_config cfg;
	clp_session *s = NULL;
	clp_comm *comm = NULL;
	int print_only = 0, json = 0, rc, rank = 0, nargs = argc <= 512 ? argc : -1;
	char *args[512]; /* the arguments as given: parse() consumes argv */
	clp_status st;

	memcpy(args, argv, (size_t)(nargs > 0 ? nargs : 0) * sizeof(*args));
	rc = parse(cmd, argc, argv, &cfg, &print_only, &json);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (mode == CLP_SESSION_TRAIN) {
		st = clp_comm_world(&argc, &argv, &comm);
		if (st != CLP_OK)
			return cli_fail(cmd, st);
		rank = clp_comm_rank(comm);
	}
	st = clp_session_open(&s, &cfg, mode, comm, stdout);
	if (st != CLP_OK)
		return fail(cmd, comm, st);
	if ((mode == CLP_SESSION_TRAIN || print_only) && rank == 0) {
		printf("# effective config (clpipe %s)\n", cmd);
		clp_cfg_write(&clp_train_schema, clp_session_config(s), stdout, CLP_CFG_ORIGINS);
		printf("\n");
	}
	if (print_only) {
		clp_session_close(s);
		clp_comm_free(comm);
		return 0;
	}
	if (mode == CLP_SESSION_TRAIN) {
		struct fault f = {0, -1, 0};

		lost_install(s, rank, comm ? clp_comm_size(comm) : 1, clp_session_steps_done(s));
		install_fault(s, rank, &f);
		st = clp_session_train(s, NULL);
		if (st == CLP_OK && rank == 0)
			summary(s, nargs, args);
	} else if (mode == CLP_SESSION_EVAL) {
		double loss, bpb;

		st = clp_session_eval(s, clp_session_config(s)->eval.batches, &loss, &bpb);
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
	return 0;
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
