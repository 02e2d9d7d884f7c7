/* clpipe bench: dispatch to the benchmarks. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

int cmd_bench(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "gemm"))
		return cmd_bench_gemm(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "nn"))
		return cmd_bench_nn(argc - 1, argv + 1);
	/* everything else (including --help) is the device benchmark */
	return cmd_bench_device(argc, argv);
}
