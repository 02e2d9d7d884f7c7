/* clpipe: the command line. Git-style subcommands, each with --help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/nn.h"
#include "tools/cli.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{"devices", cmd_devices, "list OpenCL devices"},
	{"train", cmd_train, "train a model (config file + --section.key overrides)"},
	{"eval", cmd_eval, "validation loss, perplexity, bits per byte of a checkpoint"},
	{"sample", cmd_sample, "generate text from a checkpoint"},
	{"export", cmd_export, "a checkpoint's model as a bf16/fp16 Hugging Face model directory"},
	{"tokenize", cmd_tokenize, "text files -> an llm.c token shard (byte or GPT-2 BPE)"},
	{"bench", cmd_bench, "measure devices and kernels (bench gemm, ...)"},
	{"tune", cmd_tune, "search kernel parameters for the device at hand (tune gemm)"},
	{"kernels", cmd_kernels, "build every kernel for a device into the cache"},
	{"check", cmd_check, "every op against the C references on this device"},
	{"sim", cmd_sim, "simulate a pipeline schedule on a cost table and a cluster"},
	{"skip", cmd_skip, "SkipPipe: schedule, simulate and check per-micro-batch paths"},
	{"plan", cmd_plan, "placement and schedule for a cluster of mixed devices"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: clpipe <command> [options]   (clpipe <command> --help for details)\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nenvironment:\n"
		   "  CLPIPE_DEVICE       default device selector (see clpipe devices --help)\n"
		   "  CLPIPE_CACHE_DIR    engine cache (compiled kernels, tuning files)\n"
		   "  CLPIPE_KERNEL_DIR   read kernel sources from here instead of the embedded ones\n"
		   "  CLPIPE_SHAPE        cpu or gpu: every kernel family in that geometry, not the one\n"
		   "                      the device has (docs/OPENCL.md)\n");
}

/* CLPIPE_SHAPE=cpu|gpu forces the kernel geometry (the tests' CLPIPE_TEST_SHAPE, for a user
 * comparing the two on a device); 1 on a value that is neither */
static int force_shape(void)
{
	const char *e = getenv("CLPIPE_SHAPE");

	if (!e || !*e)
		return 0;
	if (strcmp(e, "cpu") && strcmp(e, "gpu")) {
		fprintf(stderr, "clpipe: CLPIPE_SHAPE = \"%s\": give cpu or gpu (or leave it unset: "
			"the device's shape)\n", e);
		return 1;
	}
	clp_cl_set_shape(!strcmp(e, "gpu"));
	clp_nn_set_shape(!strcmp(e, "gpu") ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("clpipe %s\n", CLPIPE_VERSION);
		return 0;
	}
	if (force_shape())
		return 2;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "clpipe: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
