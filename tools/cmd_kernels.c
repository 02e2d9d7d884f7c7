/* clpipe kernels: build (and run once) every kernel for one or more devices, filling the caches,
 * then print each program's build status per device. Exits 1 naming the programs that failed,
 * even where the engine fell back to a portable variant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/kfac.h"
#include "cl/nn.h"
#include "cl/runtime.h"
#include "cl/warmup.h"
#include "tools/cli.h"

#define MAX_DEVICES 16

/* One line per program: status, seconds, defines; failures with their message. */
static int report(clp_cl_ctx *ctx, char *failed, size_t n)
{
	const clp_cl_devinfo *d = clp_cl_ctx_device(ctx);
	int nfail = 0;
	size_t used = 0;

	printf("programs on %s (%s, driver %s):\n", d->name, d->platform, d->driver);
	for (int i = 0; i < clp_cl_ctx_nbuilds(ctx); i++) {
		const clp_cl_build_info *b = clp_cl_ctx_build(ctx, i);
		char defs[80];
		size_t dl = 0;

		for (const char *p = b->defines; *p && dl + 1 < sizeof(defs); p++) {
			if (!strncmp(p, "#define ", 8)) {
				p += 7;
				continue;
			}
			defs[dl++] = *p == '\n' ? ' ' : *p == ' ' ? '=' : *p;
		}
		while (dl && defs[dl - 1] == ' ')
			dl--;
		defs[dl] = '\0';
		printf("  %-18s %-9s %6.2f s  %s\n", b->program,
		       b->ok ? (b->cached ? "ok cached" : "ok built")
			     : (b->remembered ? "FAILED(r)" : "FAILED"),
		       b->seconds, defs);
		if (!b->ok) {
			nfail++;
			if (!strstr(failed, b->program))
				used += (size_t)snprintf(failed + used, used < n ? n - used : 0,
							 "%s%s", used ? ", " : "", b->program);
		}
	}
	for (int i = 0; i < clp_cl_ctx_nbuilds(ctx); i++) {
		const clp_cl_build_info *b = clp_cl_ctx_build(ctx, i);

		if (!b->ok)
			printf("  %s\n", b->message);
	}
	return nfail;
}

/* Build everything for one device. Returns the number of failed programs, or -1 when the
 * kernels could not run at all (no fallback). */
static int one_device(const char *sel, int *runfail)
{
	clp_cl_ctx *ctx;
	clp_status s;
	char failed[1024] = "";
	int nfail;

	s = clp_cl_ctx_create(&ctx, sel);
	if (s != CLP_OK) {
		fprintf(stderr, "clpipe kernels: error: %s [%s]\n", clp_last_error(),
			clp_status_str(s));
		*runfail = 1;
		return 0;
	}
	printf("building kernels for %s (cache %s)\n", clp_cl_ctx_device(ctx)->name,
	       clp_cl_cache_dir());
	/* each family on its own, so one that fails does not hide the others */
	if ((s = clp_cl_warmup(ctx, stdout)) != CLP_OK ||
	    ((s = clp_nn_warmup(ctx, stdout)) != CLP_OK) ||
	    ((s = clp_kfac_warmup(ctx, stdout)) != CLP_OK)) {
		fprintf(stderr, "clpipe kernels: error: %s [%s]\n", clp_last_error(),
			clp_status_str(s));
		*runfail = 1;
	}
	nfail = report(ctx, failed, sizeof(failed));
	if (nfail)
		fprintf(stderr, "clpipe kernels: error: %d program build(s) failed on device '%s' "
			"(driver %s): %s\n", nfail, clp_cl_ctx_device(ctx)->name,
			clp_cl_ctx_device(ctx)->driver, failed);
	clp_cl_ctx_free(ctx);
	return nfail;
}

int cmd_kernels(int argc, char **argv)
{
	const char *devices[MAX_DEVICES];
	int ndev = 0, all = 0, bad = 0, runfail = 0;
	char idx[MAX_DEVICES][8];

	for (int i = 1; i < argc; i++) {
		const char *v;
		int r;

		if (cli_is_help(argv[i])) {
			printf("usage: clpipe kernels [--device SPEC]... [--all] [--list]\n\n"
			       "Builds every kernel for the device (each --device, or every device\n"
			       "with --all) and runs each once on tiny inputs, so later runs find them\n"
			       "in the engine cache (%s), PoCL's (POCL_CACHE_DIR)\n"
			       "and Mesa's (MESA_SHADER_CACHE_DIR). Prints each program's status per\n"
			       "device; exits 1 naming the programs that failed to build (even where\n"
			       "the engine falls back to a portable variant). --list prints the\n"
			       "embedded files.\n",
			       clp_cl_cache_dir());
			return 0;
		}
		if (!strcmp(argv[i], "--list")) {
			for (const char *const *f = clp_cl_kernel_files(); *f; f++)
				printf("%s\n", *f);
			return 0;
		}
		if (!strcmp(argv[i], "--all")) {
			all = 1;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &v)) < 0)
			return cli_usage_error("kernels", "--device needs a value");
		if (r == 0)
			return cli_usage_error("kernels", "unknown option '%s'", argv[i]);
		if (ndev == MAX_DEVICES)
			return cli_usage_error("kernels", "at most %d --device options", MAX_DEVICES);
		devices[ndev++] = v;
	}
	if (all) {
		clp_cl_devinfo *devs = NULL;
		int n = 0;
		clp_status s = clp_cl_devices(&devs, &n);

		if (s != CLP_OK)
			return cli_fail("kernels", s);
		free(devs);
		for (ndev = 0; ndev < n && ndev < MAX_DEVICES; ndev++) {
			snprintf(idx[ndev], sizeof(idx[ndev]), "%d", ndev);
			devices[ndev] = idx[ndev];
		}
	}
	if (ndev == 0)
		devices[ndev++] = NULL; /* CLPIPE_DEVICE, else the default device */
	for (int i = 0; i < ndev; i++)
		bad += one_device(devices[i], &runfail);
	return bad || runfail ? 1 : 0;
}
