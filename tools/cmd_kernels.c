/* clpipe kernels: build (and run once) every kernel for a device, filling the caches. */
#include <stdio.h>
#include <string.h>

#include "cl/kfac.h"
#include "cl/nn.h"
#include "cl/runtime.h"
#include "cl/warmup.h"
#include "tools/cli.h"

int cmd_kernels(int argc, char **argv)
{
	const char *device = NULL;
	clp_cl_ctx *ctx;
	clp_status s;

	for (int i = 1; i < argc; i++) {
		int r;

		if (cli_is_help(argv[i])) {
			printf("usage: clpipe kernels [--device SPEC] [--list]\n\n"
			       "Builds every kernel for the device and runs each once on tiny inputs,\n"
			       "so later runs find them in the engine cache (%s)\n"
			       "and in PoCL's (POCL_CACHE_DIR). --list prints the embedded files.\n",
			       clp_cl_cache_dir());
			return 0;
		}
		if (!strcmp(argv[i], "--list")) {
			for (const char *const *f = clp_cl_kernel_files(); *f; f++)
				printf("%s\n", *f);
			return 0;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &device)) < 0)
			return cli_usage_error("kernels", "--device needs a value");
		if (r == 0)
			return cli_usage_error("kernels", "unknown option '%s'", argv[i]);
	}
	s = clp_cl_ctx_create(&ctx, device);
	if (s != CLP_OK)
		return cli_fail("kernels", s);
	printf("building kernels for %s (cache %s)\n", clp_cl_ctx_device(ctx)->name,
	       clp_cl_cache_dir());
	s = clp_cl_warmup(ctx, stdout);
	if (s == CLP_OK)
		s = clp_nn_warmup(ctx, stdout);
	if (s == CLP_OK)
		s = clp_kfac_warmup(ctx, stdout);
	clp_cl_ctx_free(ctx);
	if (s != CLP_OK)
		return cli_fail("kernels", s);
	return 0;
}
