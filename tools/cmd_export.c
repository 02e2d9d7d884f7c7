/* clpipe export: a checkpoint's model as a 16-bit (or fp32) Hugging Face model directory
 * (clp_ckpt_export, engine/io/checkpoint.h; docs/CHECKPOINTS.md). A subcommand rather than a
 * training option: it works on any checkpoint after the fact (a pipeline's several rank files
 * become one file), and training's own checkpoints stay fp32 masters with their optimizer
 * state, so resuming is unchanged. */
#include <stdio.h>
#include <string.h>

#include "engine/io/checkpoint.h"
#include "tools/cli.h"

static void help(void)
{
	printf("usage: clpipe export [--dtype bf16|fp16|fp32] [--merge-lora] CKPT OUT\n\n"
	       "Writes the model of checkpoint CKPT (a step directory, a root of them (the latest\n"
	       "complete one), a Hugging Face model directory or a .safetensors file) into the\n"
	       "directory OUT as transformers loads it: OUT/model.safetensors with every weight in\n"
	       "--dtype (default bf16: each fp32 master rounded to nearest even; fp16 likewise;\n"
	       "fp32 as stored), OUT/config.json from beside CKPT with dtype / torch_dtype set,\n"
	       "and its tokenizer files. The optimizer state is left behind. OUT is created; a\n"
	       "checkpoint directory is refused. --merge-lora writes each weight with LoRA\n"
	       "adapters as W + (alpha / r) B A and leaves the adapters out.\n");
}

int cmd_export(int argc, char **argv)
{
	const char *dtype = "bf16", *pos[2] = {NULL, NULL}, *v;
	clp_dtype dt;
	int npos = 0, n = 0, got, merge = 0;
	clp_status st;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			help();
			return 0;
		}
		if ((got = cli_value(argc, argv, &i, "--dtype", &v)) != 0) {
			if (got < 0)
				return cli_usage_error("export", "--dtype needs a value");
			dtype = v;
		} else if (!strcmp(argv[i], "--merge-lora")) {
			merge = 1;
		} else if (!strncmp(argv[i], "--", 2)) {
			return cli_usage_error("export", "unknown option '%s'", argv[i]);
		} else if (npos < 2) {
			pos[npos++] = argv[i];
		} else {
			return cli_usage_error("export", "unexpected argument '%s'", argv[i]);
		}
	}
	if (npos != 2)
		return cli_usage_error("export", "needs a checkpoint and an output directory");
	if (!strcmp(dtype, "bf16"))
		dt = CLP_BF16;
	else if (!strcmp(dtype, "fp16"))
		dt = CLP_F16;
	else if (!strcmp(dtype, "fp32"))
		dt = CLP_F32;
	else
		return cli_usage_error("export", "--dtype %s: expected bf16, fp16 or fp32", dtype);
	st = clp_ckpt_export_lora(pos[0], pos[1], dt, merge, &n);
	if (st != CLP_OK)
		return cli_fail("export", st);
	printf("exported %d tensors of %s as %s into %s%s\n", n, pos[0], clp_dtype_name(dt), pos[1],
	       merge ? " (LoRA merged)" : "");
	return 0;
}
