/* clpipe bench: dispatch to the benchmarks. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

int cmd_bench(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "gemm"))
		return cmd_bench_gemm(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "--compare"))
		return cmd_bench_compare(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "nn"))
		return cmd_bench_nn(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "attn"))
		return cmd_bench_attn(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++) /* model-shaped profiles (tools/cmd_bench_model.c) */
		if (!strcmp(argv[i], "--model") || !strncmp(argv[i], "--model=", 8))
			return cmd_bench_model(argc, argv);
	/* everything else (including --help) is the device benchmark */
	return cmd_bench_device(argc, argv);
}
