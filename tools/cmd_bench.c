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
	if (argc >= 2 && cli_is_help(argv[1])) {
		printf("usage: clpipe bench gemm [options]   GEMM backends against OpenBLAS\n"
		       "       clpipe bench nn [options]     transformer kernels at a model shape\n");
		return 0;
	}
	return cli_usage_error("bench", "expected a benchmark name (gemm, nn)");
}
