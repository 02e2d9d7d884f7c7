/* Program builds: embedded sources with per-device defines prepended, an on-disk binary cache
 * keyed by (platform, device, driver, source, defines, options), and kernels cached per context. */
#include "cl/base/clock.h"
#include "cl/runtime_internal.h"

#include "cl/base/durable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUILD_OPTIONS "-cl-std=CL1.2 -cl-mad-enable"

/* Generated at build time from cl/kernels/ (cmake/embed_kernels.cmake). */
struct clp_embedded_source {
	const char *name;
	const char *text;
	size_t len;
};
extern const struct clp_embedded_source clp_embedded_sources[];
extern const int clp_embedded_nsources;

static char *dev_sources[64]; /* sources read from CLPIPE_KERNEL_DIR, kept for the process */

const char *clp_cl_kernel_source(const char *file, size_t *len)
{
	const char *dir = getenv("CLPIPE_KERNEL_DIR");

	if (dir && *dir) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, file);
		f = fopen(path, "rb");
		if (f) {
			char *buf = NULL;
			long n;

			if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
			    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
			    fread(buf, 1, (size_t)n, f) == (size_t)n) {
				buf[n] = '\0';
				fclose(f);
				for (int i = 0; i < 64; i++)
					if (!dev_sources[i]) {
						dev_sources[i] = buf;
						break;
					}
				if (len)
					*len = (size_t)n;
				return buf;
			}
			free(buf);
			fclose(f);
		}
	}
	for (int i = 0; i < clp_embedded_nsources; i++)
		if (strcmp(clp_embedded_sources[i].name, file) == 0) {
			if (len)
				*len = clp_embedded_sources[i].len;
			return clp_embedded_sources[i].text;
		}
	return NULL;
}

const char *const *clp_cl_kernel_files(void)
{
	static const char *names[128];

	if (!names[0])
		for (int i = 0; i < clp_embedded_nsources && i < 127; i++)
			names[i] = clp_embedded_sources[i].name;
	return names;
}

/* ---- the on-disk cache ---------------------------------------------------------------------- */

static int mkdir_p(const char *path)
{
	char tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

const char *clp_cl_cache_dir(void)
{
	static char dir[4096];
	const char *e;

	if (dir[0])
		return dir;
	if ((e = getenv("CLPIPE_CACHE_DIR")) && *e)
		snprintf(dir, sizeof(dir), "%s", e);
	else if ((e = getenv("XDG_CACHE_HOME")) && *e)
		snprintf(dir, sizeof(dir), "%s/clpipe", e);
	else if ((e = getenv("HOME")) && *e)
		snprintf(dir, sizeof(dir), "%s/.cache/clpipe", e);
	else
		snprintf(dir, sizeof(dir), "/tmp/clpipe-cache");
	mkdir_p(dir);
	return dir;
}

/* Two independent 64-bit FNV-1a streams give a 128-bit key. */
struct hash128 {
	uint64_t a, b;
};

static void hash_add(struct hash128 *h, const void *data, size_t n)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < n; i++) {
		h->a = (h->a ^ p[i]) * 0x100000001b3ULL;
		h->b = (h->b ^ p[i]) * 0x100000001b3ULL ^ (h->b >> 29);
	}
	/* separator so ("ab","c") and ("a","bc") differ */
	h->a = (h->a ^ 0xff) * 0x100000001b3ULL;
	h->b = (h->b ^ 0xfe) * 0x100000001b3ULL;
}

static void key_path(const clp_cl_ctx *ctx, const char *src, const char *opts, const char *ext,
		     char *path, size_t n)
{
	struct hash128 h = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
	const clp_cl_devinfo *d = &ctx->info;

	hash_add(&h, d->platform, strlen(d->platform));
	hash_add(&h, d->platform_version, strlen(d->platform_version));
	hash_add(&h, d->name, strlen(d->name));
	hash_add(&h, d->vendor, strlen(d->vendor));
	hash_add(&h, d->driver, strlen(d->driver));
	hash_add(&h, d->version, strlen(d->version));
	hash_add(&h, &d->compute_units, sizeof(d->compute_units));
	hash_add(&h, src, strlen(src));
	hash_add(&h, opts, strlen(opts));
	snprintf(path, n, "%s/%016llx%016llx%s", clp_cl_cache_dir(), (unsigned long long)h.a,
		 (unsigned long long)h.b, ext);
}

static void cache_path(const clp_cl_ctx *ctx, const char *src, const char *opts, char *path,
		       size_t n)
{
	key_path(ctx, src, opts, ".clbin", path, n);
}

void clp_cl_cache_key_path(const clp_cl_ctx *ctx, const char *what, const char *ext, char *path,
			   size_t n)
{
	key_path(ctx, what, "", ext, path, n);
}

static unsigned char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)len);
		if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
			free(buf);
			buf = NULL;
		}
		*n = (size_t)len;
	}
	fclose(f);
	return buf;
}

static uint64_t le_bytes(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* PoCL (binary format 9, PoCL 1.6 to 3.1 at least) serialises its own cache directory of the
 * program into the binary: a header ("poclbin\0", device id u64, version u32, kernels u32,
 * flags u64, root entries u32, a 41-byte build hash), then each root entry (program.bc) as its
 * size (u64, little-endian) and files. When two processes build the same program into one
 * POCL_CACHE_DIR at once, one can serialise before program.bc is there: an entry of size 0, on
 * which PoCL's loader asserts (pocl_binary.c, pocl_binary_get_kernels_metadata: `len > 0`) and
 * aborts the process that loads it, in every later run (seen: plan.cli_bench_model aborted in
 * a tools/test.sh run, and every `clpipe kernels` after it). Such a binary is not cached, and
 * one found in the cache is deleted and rebuilt. 0: a binary PoCL would abort on; 1: anything
 * else (other implementations' formats and other PoCL versions are not inspected). */
static int pocl_binary_sane(const unsigned char *b, size_t n)
{
	size_t off = 8 + 8 + 4 + 4 + 8 + 4 + 41;
	uint64_t entries;

	if (n < 8 || memcmp(b, "poclbin", 8) != 0)
		return 1;
	if (n < off)
		return 0;
	if (le_bytes(b + 16, 4) != 9)
		return 1;
	entries = le_bytes(b + 32, 4);
	for (uint64_t i = 0; i < entries; i++) {
		uint64_t len;

		if (n - off < 8)
			return 0;
		len = le_bytes(b + off, 8);
		off += 8;
		if (len == 0 || len > n - off)
			return 0;
		off += (size_t)len;
	}
	return 1;
}

/* Durably (cl/base/durable.h): a crash never leaves a half-written binary; ranks and test processes
 * building the same program each write their own temporary. An unwritable cache only costs
 * time, so a failure is not reported. */
static void write_cache(const char *path, const unsigned char *data, size_t n)
{
	(void)clp_io_write_file_flags(path, data, n, CLP_IO_SHARED);
}

/* "#define A 1\n#define B 2\n" -> "A=1 B=2" for messages. */
static void defines_summary(const char *defines, char *out, size_t n)
{
	size_t used = 0;
	const char *p = defines;

	out[0] = '\0';
	while (p && *p && used + 1 < n) {
		char name[64], value[64] = "";
		int got = sscanf(p, "#define %63s %63[^\n]", name, value);
		const char *nl = strchr(p, '\n');

		if (got >= 1)
			used += (size_t)snprintf(out + used, n - used, "%s%s%s%s", used ? " " : "",
						 name, got == 2 ? "=" : "", got == 2 ? value : "");
		if (!nl)
			break;
		p = nl + 1;
	}
	if (used >= n && n > 4)
		snprintf(out + n - 4, 4, "...");
}

/* The first lines of a compiler log, each indented, at most maxl lines. */
static void log_head(const char *log, int maxl, char *out, size_t n)
{
	size_t used = 0;
	int lines = 0, total = 0;

	out[0] = '\0';
	for (const char *p = log; *p; p++)
		total += *p == '\n' || (p[1] == '\0');
	for (const char *p = log; *p && lines < maxl && used + 8 < n;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		if (len > 200)
			len = 200;
		used += (size_t)snprintf(out + used, n - used, "\n    %.*s", len, p);
		lines++;
		if (!nl)
			break;
		p = nl + 1;
	}
	if (!lines)
		snprintf(out, n, "\n    (the compiler left no log here; it may have printed to stderr)");
	else if (total > lines && used + 40 < n)
		snprintf(out + used, n - used, "\n    ... (%d more lines)", total - lines);
}

/* The name of a program in messages: "gemm_packed.cl [VW=16 MR=8]" on device (platform, driver). */
static void program_where(const clp_cl_ctx *ctx, const char *label, const char *defines,
			  char *out, size_t n)
{
	char defs[256];

	defines_summary(defines, defs, sizeof(defs));
	snprintf(out, n, "program %s%s%s%s for device '%s' (%s, driver %s)", label,
		 defs[0] ? " [" : "", defs, defs[0] ? "]" : "", ctx->info.name, ctx->info.platform,
		 ctx->info.driver);
}

static clp_status build_log_error(clp_cl_ctx *ctx, cl_program p, const char *label,
				  const char *defines, cl_int err)
{
	size_t n = 0;
	char *log;
	char where[768], head[2048];

	clGetProgramBuildInfo(p, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
	log = malloc(n + 1);
	if (log) {
		log[0] = '\0';
		clGetProgramBuildInfo(p, ctx->device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
		log[n] = '\0';
	}
	program_where(ctx, label, defines, where, sizeof(where));
	log_head(log ? log : "", 12, head, sizeof(head));
	free(log);
	return clp_error(CLP_ERR_BUILD, "building %s failed (%s); compiler log:%s", where,
			 clp_cl_errname(err), head);
}

/* A failure remembered for this key: the message of the run that failed, in *msg. */
static int remembered_failure(const char *failed, char *msg, size_t n)
{
	size_t len = 0;
	unsigned char *text = read_file(failed, &len);

	if (!text)
		return 0;
	snprintf(msg, n, "%.*s", (int)(len < n ? len : n - 1), (const char *)text);
	free(text);
	return 1;
}

/* A marker "pid tries" left by a process that is gone: the build ended it (or it was killed,
 * e.g. by a timeout: hence a failure only once two processes in a row died building). Returns
 * the dead pid (0: none, or still running) and the tries so far in *tries. */
static long dead_builder(const char *marker, int *tries)
{
	size_t len = 0;
	unsigned char *text = read_file(marker, &len);
	long pid = 0;
	char buf[64];

	*tries = 0;
	if (!text)
		return 0;
	snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1),
		 (const char *)text);
	free(text);
	if (sscanf(buf, "%ld %d", &pid, tries) < 1 || pid <= 0 || pid == (long)getpid())
		return *tries = 0;
	if (kill((pid_t)pid, 0) == 0 || errno == EPERM)
		return *tries = 0; /* still running: another process builds the same program */
	return pid;
}

static clp_status build(clp_cl_ctx *ctx, const char *label, const char *defines, const char *full,
			cl_program *out, clp_cl_build_info *rec, char *path)
{
	char failed[4320], marker[4320], msg[3072], where[768];
	unsigned char *bin;
	size_t nbin = 0;
	cl_program p;
	cl_int err, st;
	long pid;
	int tries;

	cache_path(ctx, full, BUILD_OPTIONS, path, 4300);
	snprintf(failed, sizeof(failed), "%s.failed", path);
	snprintf(marker, sizeof(marker), "%s.building", path);
	bin = read_file(path, &nbin);
	if (bin && !pocl_binary_sane(bin, nbin)) {
		free(bin);
		bin = NULL;
		unlink(path); /* PoCL would abort loading it: rebuild from source */
	}
	if (bin) {
		const unsigned char *bp = bin;

		p = clCreateProgramWithBinary(ctx->context, 1, &ctx->device, &nbin, &bp, &st, &err);
		free(bin);
		if (err == CL_SUCCESS && st == CL_SUCCESS &&
		    clBuildProgram(p, 1, &ctx->device, BUILD_OPTIONS, NULL, NULL) == CL_SUCCESS) {
			rec->cached = 1;
			*out = p;
			return CLP_OK;
		}
		if (err == CL_SUCCESS)
			clReleaseProgram(p);
		unlink(path); /* stale or corrupt: rebuild from source */
	}
	if (remembered_failure(failed, msg, sizeof(msg))) {
		rec->remembered = 1;
		return clp_error(CLP_ERR_BUILD, "%s\n  (remembered from an earlier run in %s; delete "
				 "that file to retry)", msg, failed);
	}
	program_where(ctx, label, defines, where, sizeof(where));
	if ((pid = dead_builder(marker, &tries)) != 0 && tries >= 2) {
		clp_status s = clp_error(CLP_ERR_BUILD, "building %s failed: the compiler ended "
					 "the process (%d runs in a row, last pid %ld; see their "
					 "stderr)", where, tries, pid);

		write_cache(failed, (const unsigned char *)clp_last_error(),
			    strlen(clp_last_error()));
		unlink(marker);
		return s;
	}
	p = clCreateProgramWithSource(ctx->context, 1, &full, NULL, &err);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "creating %s", where);
	snprintf(msg, sizeof(msg), "%ld %d\n", (long)getpid(), pid ? tries + 1 : 1);
	write_cache(marker, (const unsigned char *)msg, strlen(msg));
	err = clBuildProgram(p, 1, &ctx->device, BUILD_OPTIONS, NULL, NULL);
	unlink(marker);
	if (err != CL_SUCCESS) {
		clp_status s = build_log_error(ctx, p, label, defines, err);

		clReleaseProgram(p);
		if (err == CL_BUILD_PROGRAM_FAILURE) /* not for transient errors (out of memory) */
			write_cache(failed, (const unsigned char *)clp_last_error(),
				    strlen(clp_last_error()));
		return s;
	}
	if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof(nbin), &nbin, NULL) == CL_SUCCESS &&
	    nbin > 0 && (bin = malloc(nbin))) {
		unsigned char *bins[1] = {bin};

		if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) ==
			    CL_SUCCESS &&
		    pocl_binary_sane(bin, nbin))
			write_cache(path, bin, nbin);
		free(bin);
	}
	*out = p;
	return CLP_OK;
}

static char *dupstr(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);

	if (d)
		memcpy(d, s, n);
	return d;
}

/* Replace lines `#include "name.clh"` with the embedded header of that name (recursively, each
 * header once), so kernels can share code such as the counter-based generator. The result is
 * what gets hashed for the cache, so editing a header rebuilds its users. */
static clp_status expand_into(const char *label, const char *src, char **buf, size_t *len,
			      size_t *cap, const char **seen, int *nseen, int depth)
{
	const char *p = src;

	if (depth > 8)
		return clp_error(CLP_ERR_BUILD, "%s: #include nested too deeply", label);
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p + 1) : strlen(p);
		const char *q = p;
		char name[128];

		while (*q == ' ' || *q == '\t')
			q++;
		if (!strncmp(q, "#include \"", 10) && sscanf(q + 10, "%127[^\"]", name) == 1) {
			const char *inc = clp_cl_kernel_source(name, NULL);
			int dup = 0;

			if (!inc)
				return clp_error(CLP_ERR_BUILD, "%s: #include \"%s\": no such embedded "
						 "kernel header", label, name);
			for (int i = 0; i < *nseen; i++)
				dup |= !strcmp(seen[i], inc);
			if (!dup && *nseen < 32) {
				seen[(*nseen)++] = inc;
				CLP_TRY(expand_into(name, inc, buf, len, cap, seen, nseen, depth + 1));
			}
			p += ll;
			continue;
		}
		if (*len + ll + 1 > *cap) {
			size_t nc = (*cap + ll + 1) * 2;
			char *nb = realloc(*buf, nc);

			if (!nb)
				return clp_error(CLP_ERR_NOMEM, "out of host memory expanding %s",
						 label);
			*buf = nb;
			*cap = nc;
		}
		memcpy(*buf + *len, p, ll);
		*len += ll;
		(*buf)[*len] = '\0';
		p += ll;
	}
	return CLP_OK;
}

static clp_status expand_includes(const char *label, const char *src, char **out)
{
	const char *seen[32];
	int nseen = 0;
	size_t len = 0, cap = strlen(src) + 1;
	char *buf = malloc(cap);
	clp_status s;

	*out = NULL;
	if (!buf)
		return clp_error(CLP_ERR_NOMEM, "out of host memory expanding %s", label);
	buf[0] = '\0';
	s = expand_into(label, src, &buf, &len, &cap, seen, &nseen, 0);
	if (s != CLP_OK) {
		free(buf);
		return s;
	}
	*out = buf;
	return CLP_OK;
}

/* CLPIPE_FAIL_BUILD=a.cl,b.cl (tests): those programs get an #error line, so their build fails
 * in the real compiler and every fallback path can be exercised on any device. */
static int fail_injected(const char *label)
{
	const char *e = getenv("CLPIPE_FAIL_BUILD");
	size_t n = strlen(label);

	for (const char *p = e; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && !strncmp(p, label, n))
			return 1;
		if (!c)
			break;
		p = c + 1;
	}
	return 0;
}

static clp_status program_get(clp_cl_ctx *ctx, const char *label, const char *source,
			      const char *defines, int *index)
{
	char *full, *expanded = NULL; /* set by expand_includes; GCC 12 -O3 cannot see it */
	size_t n;
	cl_program p;
	clp_status s;

	if (!defines)
		defines = "";
	for (int i = 0; i < ctx->nprograms; i++)
		if (!strcmp(ctx->programs[i].file, label) && !strcmp(ctx->programs[i].defines, defines)) {
			*index = i;
			return CLP_OK;
		}
	for (int i = 0; i < ctx->nbuilds; i++) { /* failed before in this process: not again */
		struct clp_build_rec *r = &ctx->builds[i];

		if (!r->info.ok && !strcmp(r->program, label) && !strcmp(r->defines, defines))
			return clp_error(CLP_ERR_BUILD, "%s", r->message);
	}
	if (ctx->nprograms == CLP_MAX_PROGRAMS || ctx->nbuilds == CLP_MAX_PROGRAMS * 2)
		return clp_error(CLP_ERR_NOMEM, "too many programs in one context (%d)",
				 CLP_MAX_PROGRAMS);
	CLP_TRY(expand_includes(label, source, &expanded));
	n = strlen(ctx->defines) + strlen(defines) + strlen(expanded) + 128;
	full = malloc(n);
	if (!full) {
		free(expanded);
		return clp_error(CLP_ERR_NOMEM, "out of host memory building %s", label);
	}
	snprintf(full, n, "%s%s#line 1\n%s%s", ctx->defines, defines, expanded,
		 fail_injected(label) ? "\n#error \"build failure injected by CLPIPE_FAIL_BUILD\"\n"
				      : "");
	free(expanded);
	{
		struct clp_build_rec *r = &ctx->builds[ctx->nbuilds];
		double t0 = clp_now();

		memset(r, 0, sizeof(*r));
		s = build(ctx, label, defines, full, &p, &r->info, r->cache_file);
		r->info.seconds = clp_now() - t0;
		r->info.ok = s == CLP_OK;
		r->program = dupstr(label);
		r->defines = dupstr(defines);
		r->message = s == CLP_OK ? NULL : dupstr(clp_last_error());
		r->info.program = r->program;
		r->info.defines = r->defines;
		r->info.message = r->message;
		r->info.cache_file = r->cache_file;
		ctx->nbuilds++;
	}
	free(full);
	if (s != CLP_OK)
		return s;
	ctx->programs[ctx->nprograms].file = dupstr(label);
	ctx->programs[ctx->nprograms].defines = dupstr(defines);
	ctx->programs[ctx->nprograms].program = p;
	*index = ctx->nprograms++;
	return CLP_OK;
}

clp_status clp_cl_program_source(clp_cl_ctx *ctx, const char *label, const char *source,
				 const char *defines, cl_program *out)
{
	int i;

	CLP_TRY(program_get(ctx, label, source, defines, &i));
	*out = ctx->programs[i].program;
	return CLP_OK;
}

/* The number of arguments kernel k takes (-1 if the driver does not say). */
static int kernel_nargs(cl_kernel k)
{
	cl_uint n = 0;

	return clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof(n), &n, NULL) == CL_SUCCESS ? (int)n
											  : -1;
}

clp_status clp_cl_kernel(clp_cl_ctx *ctx, const char *file, const char *defines, const char *name,
			 cl_kernel *out)
{
	const char *src;
	int pi = -1;
	cl_int err;
	cl_kernel k;

	if (!defines)
		defines = "";
	for (int i = 0; i < ctx->nkernels; i++) {
		struct clp_program_entry *pe = &ctx->programs[ctx->kernels[i].program];

		if (!strcmp(ctx->kernels[i].name, name) && !strcmp(pe->file, file) &&
		    !strcmp(pe->defines, defines)) {
			*out = ctx->kernels[i].kernel;
			return CLP_OK;
		}
	}
	src = clp_cl_kernel_source(file, NULL);
	if (!src)
		return clp_error(CLP_ERR_NOT_FOUND, "no kernel file '%s' is embedded in clpipe", file);
	CLP_TRY(program_get(ctx, file, src, defines, &pi));
	if (ctx->nkernels == CLP_MAX_KERNELS)
		return clp_error(CLP_ERR_NOMEM, "too many kernels in one context (%d)",
				 CLP_MAX_KERNELS);
	k = clCreateKernel(ctx->programs[pi].program, name, &err);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "creating kernel '%s' from %s", name, file);
	ctx->kernels[ctx->nkernels].program = pi;
	ctx->kernels[ctx->nkernels].name = dupstr(name);
	ctx->kernels[ctx->nkernels].kernel = k;
	ctx->kernels[ctx->nkernels].nargs = kernel_nargs(k);
	ctx->kernels[ctx->nkernels].nset = 0;
	ctx->kernels[ctx->nkernels].checked = 0;
	ctx->nkernels++;
	*out = k;
	return CLP_OK;
}

int clp_cl_ctx_nbuilds(const clp_cl_ctx *ctx)
{
	return ctx->nbuilds;
}

const clp_cl_build_info *clp_cl_ctx_build(const clp_cl_ctx *ctx, int i)
{
	return i >= 0 && i < ctx->nbuilds ? &ctx->builds[i].info : NULL;
}

int clp_cl_fell_back(const clp_cl_ctx *ctx, const char *what)
{
	char key[64];

	snprintf(key, sizeof(key), "%s;", what);
	return strstr(ctx->fallbacks, key) != NULL;
}

clp_status clp_cl_fallback(clp_cl_ctx *ctx, clp_status s, const char *what, const char *from,
			   const char *to)
{
	char line[1024], first[256];
	const char *err = clp_last_error();
	size_t used;

	if (s != CLP_ERR_BUILD)
		return s;
	if (clp_cl_fell_back(ctx, what))
		return CLP_OK;
	used = strlen(ctx->fallbacks);
	snprintf(ctx->fallbacks + used, sizeof(ctx->fallbacks) - used, "%s;", what);
	/* the first compiler error, else the message's first line */
	{
		const char *e = strstr(err, "error:");
		const char *l = e ? e : err;

		snprintf(first, sizeof(first), "%.*s", (int)strcspn(l, "\n"), l);
	}
	snprintf(line, sizeof(line), "clpipe: warning: %s does not build on device '%s' "
		 "(driver %s); falling back to %s [%s]\n", from, ctx->info.name,
		 ctx->info.driver, to, first);
	fputs(line, stderr);
	used = strlen(ctx->warnings);
	snprintf(ctx->warnings + used, sizeof(ctx->warnings) - used, "%s", line);
	clp_error_clear();
	return CLP_OK;
}

const char *clp_cl_ctx_warnings(const clp_cl_ctx *ctx)
{
	return ctx->warnings;
}

void clp_cl_programs_release(clp_cl_ctx *ctx)
{
	for (int i = 0; i < ctx->nbuilds; i++) {
		free(ctx->builds[i].program);
		free(ctx->builds[i].defines);
		free(ctx->builds[i].message);
	}
	ctx->nbuilds = 0;
	for (int i = 0; i < ctx->nkernels; i++) {
		clReleaseKernel(ctx->kernels[i].kernel);
		free(ctx->kernels[i].name);
	}
	ctx->nkernels = 0;
	for (int i = 0; i < ctx->nprograms; i++) {
		clReleaseProgram(ctx->programs[i].program);
		free(ctx->programs[i].file);
		free(ctx->programs[i].defines);
	}
	ctx->nprograms = 0;
}
