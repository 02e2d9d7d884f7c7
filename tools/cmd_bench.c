/* clpipe bench: placeholder dispatch; subcommands follow. */
#include <stdio.h>

#include "tools/cli.h"

int cmd_bench(int argc, char **argv)
{
	return cli_usage_error("bench", "not built yet");
}

int cmd_tune(int argc, char **argv)
{
	return cli_usage_error("tune", "not built yet");
}
