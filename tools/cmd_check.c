/* clpipe check: correctness of every op on the user's own device (cl/check/check.h holds the
 * table and the runner; this file parses options and prints). One line per checked quantity,
 * a summary, exit status 1 naming the failing ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cl/check/check.h"
#include "cl/base/durable.h"
#include "tools/cli.h"

struct out {
	json_t *lines; /* NULL without --json */
	int verbose;   /* every line, not only failures (default on) */
};

static void emit(const clp_check_line *l, void *ud)
{
	struct out *o = ud;

	if (o->verbose || !l->ok) {
		printf("%-17s %-16s %-3s %-15s %-28s %-9s %9.3g %9.3g  %s\n", l->op, l->variant,
		       l->geom, l->dtype, l->sizes, l->what, l->err, l->tol,
		       l->skipped ? "skip" : l->ok ? "ok" : "FAIL");
		if ((!l->ok || l->skipped) && l->message[0])
			printf("    %s\n", l->message);
		fflush(stdout);
	}
	if (o->lines) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:f, s:f}", "op", l->op,
				      "variant", l->variant, "geometry", l->geom, "dtype", l->dtype,
				      "sizes", l->sizes, "what", l->what, "ok", l->ok, "flops",
				      l->flops, "bytes", l->bytes);

		if (j && l->skipped)
			json_object_set_new(j, "skipped", json_true());

		if (j) {
			/* JSON has no infinity or NaN: null */
			json_object_set_new(j, "max_error", isfinite(l->err) ? json_real(l->err)
									  : json_null());
			json_object_set_new(j, "tolerance", isfinite(l->tol) ? json_real(l->tol)
									   : json_null());
			if (l->message[0])
				json_object_set_new(j, "message", json_string(l->message));
			json_array_append_new(o->lines, j);
		}
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: clpipe check [--device SPEC] [--quick] [--only OP,...] [--json FILE]\n"
		"                    [--failures] [--list]\n\n"
		"Runs every op the engine uses (GEMM on each backend, attention in both kernel\n"
		"shapes, norms, activations, embeddings, RoPE, cross-entropy, AdamW, K-FAC) on this\n"
		"device in fp32, bf16 and fp16 storage, on random inputs of sizes that are no multiple\n"
		"of any tile, against the built-in C references, and the backward passes against\n"
		"finite differences. Needs nothing but this binary.\n\n"
		"  --device SPEC  the device (clpipe devices --help); default CLPIPE_DEVICE or the first\n"
		"  --quick        a few shapes per op (seconds)\n"
		"  --only OPS     only these ops (comma-separated; --list names them)\n"
		"  --json FILE    every line as JSON, with the summary\n"
		"  --failures     print only the failing lines and the summary\n"
		"  --list         the ops of the table with their tolerances' reasons, and exit\n\n"
		"Columns: op, variant, kernel shape (cpu/gpu forced, - for one), storage, sizes, the\n"
		"quantity checked, its worst error and that element's tolerance (finite differences:\n"
		"RMS difference and its limit), verdict. Exit status 0 when every line passes, 1 when\n"
		"one fails (the failing ops are named), 2 for a usage error.\n");
}

int cmd_check(int argc, char **argv)
{
	const char *device = NULL, *json = NULL, *only = NULL, *inject = getenv("CLPIPE_CHECK_INJECT");
	int quick = 0, list = 0, r;
	struct out o = {NULL, 1};
	clp_check_opts opts;
	clp_check_summary sum;
	clp_cl_ctx *ctx;
	clp_status s;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--quick")) {
			quick = 1;
			continue;
		}
		if (!strcmp(argv[i], "--list")) {
			list = 1;
			continue;
		}
		if (!strcmp(argv[i], "--failures")) {
			o.verbose = 0;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &device)) ||
		    (r = cli_value(argc, argv, &i, "--json", &json)) ||
		    (r = cli_value(argc, argv, &i, "--only", &only)) ||
		    (r = cli_value(argc, argv, &i, "--inject", &inject))) {
			if (r < 0)
				return cli_usage_error("check", "%s needs a value", argv[i]);
			continue;
		}
		return cli_usage_error("check", "unknown option '%s'", argv[i]);
	}
	if (list) {
		for (int i = 0; i < clp_check_nops(); i++)
			printf("%-18s %s\n", clp_check_op_name(i), clp_check_op_why(i));
		return 0;
	}
	if ((s = clp_check_ops_valid(only)) != CLP_OK)
		return cli_fail("check", s);
	s = clp_cl_ctx_create(&ctx, device);
	if (s != CLP_OK)
		return cli_fail("check", s);
	{
		const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);

		printf("clpipe check on %s (%s, driver %s)%s%s%s\n", d->name, d->platform, d->driver,
		       quick ? ", quick set" : "", inject ? ", injected fault in " : "",
		       inject ? inject : "");
	}
	printf("%-17s %-16s %-3s %-15s %-28s %-9s %9s %9s  %s\n", "op", "variant", "geo", "dtype",
	       "sizes", "quantity", "error", "tolerance", "verdict");
	if (json && !(o.lines = json_array()))
		return cli_fail("check", clp_error(CLP_ERR_NOMEM, "out of memory"));
	opts = (clp_check_opts){quick, only, inject, emit, &o};
	s = clp_check_run(ctx, &opts, &sum);
	if (s != CLP_OK) {
		json_decref(o.lines);
		clp_cl_ctx_free(ctx);
		return cli_fail("check", s);
	}
	printf("\n%d cases, %d checks: %d passed, %d failed (%d cases)", sum.cases, sum.lines,
	       sum.lines - sum.failed_lines - sum.skipped_cases, sum.failed_lines,
	       sum.failed_cases);
	if (sum.skipped_cases)
		printf(", %d cases skipped (not supported by the device)", sum.skipped_cases);
	printf("\n");
	if (json) {
		const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
		json_t *doc = json_pack("{s:s, s:s, s:s, s:b, s:i, s:i, s:i, s:i, s:i, s:s, s:o}",
					"device", d->name, "platform", d->platform, "driver",
					d->driver, "quick", quick, "cases", sum.cases, "checks",
					sum.lines, "failed_checks", sum.failed_lines, "failed_cases",
					sum.failed_cases, "skipped_cases", sum.skipped_cases,
					"failed_ops", sum.failed_ops, "lines", o.lines);

		s = doc ? clp_io_write_json(json, doc, JSON_INDENT(1), 1, 0)
			: clp_error(CLP_ERR_NOMEM, "out of memory");
		json_decref(doc);
		if (s != CLP_OK) {
			clp_cl_ctx_free(ctx);
			return cli_fail("check", s);
		}
	}
	clp_cl_ctx_free(ctx);
	if (sum.failed_lines) {
		fprintf(stderr, "clpipe check: FAILED ops: %s\n", sum.failed_ops);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
