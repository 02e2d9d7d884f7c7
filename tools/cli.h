/* Shared helpers of the clpipe subcommands: option parsing and error reporting. */
#ifndef CLP_TOOLS_CLI_H
#define CLP_TOOLS_CLI_H

#include <stdio.h>

#include "cl/base/status.h"
#include "engine/io/config.h"

/* If argv[*i] is "--name" (value in argv[*i+1]) or "--name=value", store the value, advance *i
 * past it and return 1; return -1 if the value is missing; 0 if argv[*i] is another option. */
int cli_value(int argc, char **argv, int *i, const char *name, const char **value);
/* argv[i] is "-h" or "--help". */
int cli_is_help(const char *arg);
/* Print "clpipe <cmd>: <message from the library>" and return the exit code 1. */
int cli_fail(const char *cmd, clp_status s);
/* Print a usage error and return exit code 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The short forms of a schema's fields: --x-y V, --x-y=V (--section.x_y), booleans without a
 * value, --no-x for false; into cfg. 0, or the usage error's exit code naming cmd. */
int cli_parse_short(const char *cmd, const clp_cfg_schema *schema, const char *section, void *cfg,
		    int argc, char **argv);

int cmd_devices(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_gemm(int argc, char **argv);
/* `clpipe bench` without a subcommand: the device benchmark (tools/cmd_bench_device.c). */
int cmd_bench_device(int argc, char **argv);
/* `clpipe bench --model CONFIG`: model-shaped profiles, the planner's block costs. */
int cmd_bench_model(int argc, char **argv);
/* `clpipe bench --compare A.json B.json ...`: device profiles side by side. */
int cmd_bench_compare(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
/* `clpipe check`: every op against the C references on this device (tools/cmd_check.c). */
int cmd_check(int argc, char **argv);
int cmd_bench_nn(int argc, char **argv);
/* `clpipe bench attn`: attention with 16-bit values against fp32 (tools/cmd_bench_attn.c). */
int cmd_bench_attn(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_skip(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
