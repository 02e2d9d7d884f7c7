/* clpipe bench: placeholder dispatch; subcommands follow. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

int cmd_bench(int argc, char **argv)
{
	/* TEMPORARY (topo branch): the lead's dispatch sends `bench gemm` to the GEMM benchmark
	 * and everything else to the device benchmark. */
	if (argc > 1 && !strcmp(argv[1], "gemm"))
		return cli_usage_error("bench", "gemm: not built yet");
	return cmd_bench_device(argc, argv);
}

int cmd_tune(int argc, char **argv)
{
	return cli_usage_error("tune", "not built yet");
}
