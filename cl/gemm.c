/* GEMM front end: argument checks, the tuning table (device -> architecture/vendor -> default)
 * and dispatch to the packed, tiled, CLBlast or direct backend. */
#include "cl/gemm_internal.h"
#include "cl/gemm_tune.h"
#include "cl/ops.h"
#include "cl/runtime_internal.h"
#include "cl/base/clock.h"
#include "cl/base/json_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

static const char *const backend_names[CLP_GEMM_BACKEND_COUNT] = {
	[CLP_GEMM_AUTO] = "auto",
	[CLP_GEMM_PACKED] = "packed",
	[CLP_GEMM_TILED] = "tiled",
	[CLP_GEMM_CLBLAST] = "clblast",
	[CLP_GEMM_DIRECT] = "direct",
};

const char *clp_gemm_backend_name(clp_gemm_backend b)
{
	return (unsigned)b < CLP_GEMM_BACKEND_COUNT ? backend_names[b] : "?";
}

clp_status clp_gemm_backend_parse(const char *name, clp_gemm_backend *out)
{
	for (int i = 0; i < CLP_GEMM_BACKEND_COUNT; i++)
		if (strcasecmp(name, backend_names[i]) == 0) {
			*out = (clp_gemm_backend)i;
			return CLP_OK;
		}
	return clp_error(CLP_ERR_INVALID,
			 "unknown GEMM backend '%s' (expected auto, packed, tiled, clblast or direct)", name);
}

void clp_gemm_defines(const clp_gemm_tuning *t, char *buf, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; i < t->nparams && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "#define %s %ld\n", t->params[i].name,
					 t->params[i].value);
}

void clp_gemm_type_defines(const struct clp_gemm_call *g, char *buf, size_t n)
{
	static const char *const names[3] = {"A_TYPE", "B_TYPE", "ST_TYPE"};
	const int dt[3] = {(int)g->a.dt, (int)g->b.dt, (int)g->c.dt};

	for (int i = 0; i < 3; i++) {
		size_t used = strlen(buf);

		if (dt[i] != CLP_F32 && used < n)
			snprintf(buf + used, n - used, "#define %s %d\n", names[i], dt[i]);
	}
}

long clp_gemm_param_get(const clp_gemm_tuning *t, const char *name, long dflt)
{
	for (int i = 0; i < t->nparams; i++)
		if (strcmp(t->params[i].name, name) == 0)
			return t->params[i].value;
	return dflt;
}

/* ---- the tuning table ------------------------------------------------------------------------ */

/* The instruction set of a CPU device, for table matching ("avx512", "avx2", "sse", "other"). */
static const char *cpu_isa(const clp_cl_devinfo *dev)
{
	if (strcmp(dev->type, "cpu") != 0)
		return "";
#if defined(__x86_64__) || defined(__i386__)
	/* A CPU OpenCL device runs on this host; PoCL compiles for the host's ISA. */
	if (__builtin_cpu_supports("avx512f"))
		return "avx512";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "avx2";
	return "sse";
#else
	return "other";
#endif
}

/* The kernel shape that suits the device: decided by a context (clp_cl_caps_decide), else its
 * type says. */
static const char *dev_shape(const clp_cl_devinfo *dev)
{
	if (dev->shape[0])
		return dev->shape;
	return strcmp(dev->type, "cpu") == 0 ? "cpu" : "gpu";
}

static int match_str(json_t *m, const char *key, const char *value)
{
	json_t *v = json_object_get(m, key);
	const char *want;
	size_t wl;

	if (!v)
		return 1;
	want = json_string_value(v);
	if (!want)
		return 0;
	wl = strlen(want);
	for (const char *p = value; *p; p++)
		if (strncasecmp(p, want, wl) == 0)
			return 1;
	return wl == 0;
}

static int entry_matches(json_t *e, const clp_cl_devinfo *dev)
{
	json_t *m = json_object_get(e, "match");

	if (!m)
		return 1;
	return match_str(m, "name", dev->name) && match_str(m, "vendor", dev->vendor) &&
	       match_str(m, "platform", dev->platform) && match_str(m, "driver", dev->driver) &&
	       match_str(m, "type", dev->type) && match_str(m, "isa", cpu_isa(dev)) &&
	       match_str(m, "shape", dev_shape(dev));
}

static clp_status read_params(json_t *obj, clp_gemm_param *dst, int *n, const char *where)
{
	const char *key;
	json_t *val;

	*n = 0;
	if (!obj)
		return CLP_OK;
	if (!json_is_object(obj))
		return clp_error(CLP_ERR_FORMAT, "%s: parameters must be an object", where);
	json_object_foreach(obj, key, val) {
		if (*n == CLP_GEMM_MAX_PARAMS)
			return clp_error(CLP_ERR_FORMAT, "%s: more than %d parameters", where,
					 CLP_GEMM_MAX_PARAMS);
		if (!json_is_integer(val) || strlen(key) >= sizeof(dst[0].name))
			return clp_error(CLP_ERR_FORMAT, "%s: parameter '%s' must be an integer "
					 "with a short name", where, key);
		snprintf(dst[*n].name, sizeof(dst[*n].name), "%s", key);
		dst[*n].value = (long)json_integer_value(val);
		(*n)++;
	}
	return CLP_OK;
}

clp_status clp_gemm_tuning_from_json(json_t *e, const char *where, clp_gemm_tuning *out)
{
	const char *bname = json_string_value(json_object_get(e, "backend"));
	clp_gemm_backend b = CLP_GEMM_AUTO;

	if (!bname)
		return clp_error(CLP_ERR_FORMAT, "%s: missing \"backend\"", where);
	if (clp_gemm_backend_parse(bname, &b) != CLP_OK)
		return clp_error_context(CLP_ERR_FORMAT, "%s: ", where);
	memset(out, 0, sizeof(*out));
	out->backend = b;
	snprintf(out->source, sizeof(out->source), "%s", where);
	CLP_TRY(read_params(json_object_get(e, "params"), out->params, &out->nparams, where));
	CLP_TRY(read_params(json_object_get(e, "clblast_xgemm"), out->clblast, &out->nclblast,
			    where));
	return read_params(json_object_get(e, "clblast_xgemm_direct"), out->clblast_direct,
			   &out->nclblast_direct, where);
}

static json_t *params_json(const clp_gemm_param *p, int n)
{
	json_t *o = json_object();

	for (int i = 0; i < n; i++)
		json_object_set_new(o, p[i].name, json_integer(p[i].value));
	return o;
}

json_t *clp_gemm_tuning_to_json(const clp_gemm_tuning *t, const char *label)
{
	json_t *e = json_pack("{s:s, s:s}", "label", label, "backend",
			      clp_gemm_backend_name(t->backend));

	json_object_set_new(e, "params", params_json(t->params, t->nparams));
	if (t->nclblast)
		json_object_set_new(e, "clblast_xgemm", params_json(t->clblast, t->nclblast));
	if (t->nclblast_direct)
		json_object_set_new(e, "clblast_xgemm_direct",
				    params_json(t->clblast_direct, t->nclblast_direct));
	return e;
}

/* Fill *out from the first entry of root["entries"] that matches dev (and want, unless AUTO). */
static clp_status table_pick(json_t *root, const char *where, const clp_cl_devinfo *dev,
			     clp_gemm_backend want, clp_gemm_tuning *out, int *found)
{
	json_t *entries = json_object_get(root, "entries");
	size_t i;
	json_t *e;

	*found = 0;
	if (!json_is_array(entries))
		return clp_error(CLP_ERR_FORMAT, "%s: no \"entries\" array", where);
	json_array_foreach(entries, i, e) {
		const char *bname = json_string_value(json_object_get(e, "backend"));
		const char *label = json_string_value(json_object_get(e, "label"));
		clp_gemm_backend b = CLP_GEMM_AUTO;
		char ewhere[512];

		if (!entry_matches(e, dev))
			continue;
		snprintf(ewhere, sizeof(ewhere), "%s entry %zu", where, i);
		if (!bname)
			return clp_error(CLP_ERR_FORMAT, "%s: missing \"backend\"", ewhere);
		if (clp_gemm_backend_parse(bname, &b) != CLP_OK)
			return clp_error_context(CLP_ERR_FORMAT, "%s: ", ewhere);
		if (want != CLP_GEMM_AUTO && b != want)
			continue;
		CLP_TRY(clp_gemm_tuning_from_json(e, ewhere, out));
		snprintf(out->source, sizeof(out->source), "%s '%s'", where, label ? label : "?");
		*found = 1;
		return CLP_OK;
	}
	return CLP_OK;
}

void clp_gemm_tuning_path(const clp_cl_devinfo *dev, char *path, size_t n)
{
	char key[256];
	size_t j = 0;

	/* A file name from device name and driver; unsafe characters become '_'. */
	for (const char *p = dev->name; *p && j < 120; p++)
		key[j++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
					  (*p >= '0' && *p <= '9') || *p == '-' ? *p : '_');
	key[j++] = '_';
	for (const char *p = dev->driver; *p && j < 200; p++)
		key[j++] = (char)((*p >= '0' && *p <= '9') || *p == '.' ? *p : '_');
	if (dev->sub_index >= 0)
		j += (size_t)snprintf(key + j, sizeof(key) - j, "_cu%u", dev->compute_units);
	key[j] = '\0';
	snprintf(path, n, "%s/gemm-tuning-%s.json", clp_cl_cache_dir(), key);
}

clp_status clp_gemm_tuning_lookup(const clp_cl_devinfo *dev, clp_gemm_backend want,
				  clp_gemm_tuning *out)
{
	char path[4096];
	const char *user = getenv("CLPIPE_GEMM_TUNING");
	const char *text;
	json_t *root;
	int found = 0;
	clp_status s;

	/* 1. A tuned file: CLPIPE_GEMM_TUNING, else the one `clpipe tune gemm` wrote. */
	if (user && *user)
		snprintf(path, sizeof(path), "%s", user);
	else
		clp_gemm_tuning_path(dev, path, sizeof(path));
	s = clp_json_load(path, &root);
	if (s != CLP_OK && user && *user)
		return clp_error_context(s, "CLPIPE_GEMM_TUNING: ");
	if (s != CLP_OK)
		clp_error_clear(); /* no tuned file (or an unreadable one): the built-in table */
	if (root) {
		s = table_pick(root, path, dev, want, out, &found);
		json_decref(root);
		if (s != CLP_OK || found)
			return s;
	}
	/* 2. The built-in table, ordered from specific to general. */
	text = clp_cl_kernel_source("gemm.json", NULL);
	if (!text)
		return clp_error(CLP_ERR_NOT_FOUND, "the built-in GEMM tuning table is missing");
	CLP_TRY(clp_json_parse("built-in cl/tuning/gemm.json", text, strlen(text), &root));
	s = table_pick(root, "built-in table", dev, want, out, &found);
	json_decref(root);
	if (s == CLP_OK && !found)
		s = clp_error(CLP_ERR_NOT_FOUND, "no GEMM tuning entry for device '%s'%s%s", dev->name,
			      want ? " with backend " : "", want ? clp_gemm_backend_name(want) : "");
	return s;
}

/* A forced backend needs no table entry: without one it runs with its built-in defaults. */
static clp_status tuning_or_defaults(const clp_cl_devinfo *dev, clp_gemm_backend want,
				     clp_gemm_tuning *t)
{
	clp_status s = clp_gemm_tuning_lookup(dev, want, t);

	if (s != CLP_ERR_NOT_FOUND || want == CLP_GEMM_AUTO)
		return s;
	clp_error_clear();
	memset(t, 0, sizeof(*t));
	t->backend = want;
	snprintf(t->source, sizeof(t->source), "%s defaults (no table entry for %.60s)",
		 clp_gemm_backend_name(want), dev->name);
	return CLP_OK;
}

clp_status clp_cl_gemm_tuning(clp_cl_ctx *ctx, const clp_gemm_tuning **out)
{
	if (!ctx->gemm_tuned) {
		clp_gemm_tuning t;
		const char *env = getenv("CLPIPE_GEMM_BACKEND");
		clp_gemm_backend want = CLP_GEMM_AUTO;

		if (env && *env)
			CLP_TRY(clp_gemm_backend_parse(env, &want));
		CLP_TRY(tuning_or_defaults(&ctx->info, want, &t));
		CLP_TRY(clp_cl_gemm_set_tuning(ctx, &t));
	}
	*out = &ctx->gemm_tuning;
	return CLP_OK;
}

clp_status clp_cl_gemm_set_tuning(clp_cl_ctx *ctx, const clp_gemm_tuning *t)
{
	if (t->backend == CLP_GEMM_CLBLAST)
		CLP_TRY(clp_gemm_clblast_apply(ctx, t));
	ctx->gemm_tuning = *t;
	ctx->gemm_tuned = 1;
	return CLP_OK;
}

/* ---- the call -------------------------------------------------------------------------------- */

clp_status clp_gemm_check_args(clp_trans ta, clp_trans tb, size_t m, size_t n, size_t k,
			       size_t lda, size_t ldb, size_t ldc)
{
	size_t acols = ta ? m : k, bcols = tb ? k : n;

	if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff)
		return clp_error(CLP_ERR_INVALID, "gemm: sizes m=%zu n=%zu k=%zu over 2^31", m, n,
				 k);
	if ((ta && (ta != CLP_T)) || (tb && (tb != CLP_T)))
		return clp_error(CLP_ERR_INVALID, "gemm: transpose flags must be CLP_N or CLP_T");
	if (lda < (acols ? acols : 1))
		return clp_error(CLP_ERR_INVALID, "gemm: lda=%zu < %zu columns of A (%s)", lda,
				 acols, ta ? "T" : "N");
	if (ldb < (bcols ? bcols : 1))
		return clp_error(CLP_ERR_INVALID, "gemm: ldb=%zu < %zu columns of B (%s)", ldb,
				 bcols, tb ? "T" : "N");
	if (ldc < (n ? n : 1))
		return clp_error(CLP_ERR_INVALID, "gemm: ldc=%zu < n=%zu", ldc, n);
	return CLP_OK;
}

/* The last step of a 16-bit C (kernels/gemm_store.cl): C = round(P + beta C), P the dense fp32
 * product (m x n per batch entry; NULL: zero). Only resolves the kernel when run is 0. */
static clp_status store_c(clp_cl_ctx *ctx, const struct clp_gemm_call *g, cl_mem P, int run)
{
	cl_kernel k;
	cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, ldc = (cl_uint)g->ldc;
	cl_ulong co = g->c.off, sc = g->sc;
	cl_int has_p = P != NULL;
	cl_mem p = P ? P : g->c.mem; /* a buffer the kernel does not read without has_p */
	size_t global[3] = {g->n, g->m, g->batch}, local[3] = {64, 1, 1};

	CLP_TRY(clp_cl_kernel(ctx, "gemm_store.cl", clp_dtype_st_define(g->c.dt),
			      "clp_gemm_store_c", &k));
	if (!run)
		return CLP_OK;
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(m), CLP_ARG(n), CLP_ARG(p), CLP_ARG(has_p),
			    CLP_ARG(g->beta), CLP_ARG(g->c.mem), CLP_ARG(co), CLP_ARG(ldc),
			    CLP_ARG(sc)));
	return clp_cl_run(ctx, k, "gemm_store_c", 3, global, local);
}

static clp_status scale_c(clp_cl_ctx *ctx, const struct clp_gemm_call *g)
{
	if (g->beta == 1.0f)
		return CLP_OK;
	if (g->c.dt != CLP_F32)
		return store_c(ctx, g, NULL, 1);
	for (size_t z = 0; z < g->batch; z++)
		for (size_t i = 0; i < g->m; i++) {
			clp_buf row = clp_buf_at(g->c.mem, g->c.off + z * g->sc + i * g->ldc);

			/* beta = 0 must clear even NaN, so fill rather than scale */
			CLP_TRY(g->beta == 0.0f ? clp_cl_fill(ctx, row, 0.0f, g->n)
						: clp_cl_scale(ctx, row, g->beta, g->n));
		}
	return CLP_OK;
}

static clp_status run_one(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			  const struct clp_gemm_call *g)
{
	switch (t->backend) {
	case CLP_GEMM_PACKED:
		return clp_gemm_packed_run(ctx, t, g);
	case CLP_GEMM_CLBLAST:
		return clp_gemm_clblast_run(ctx, t, g);
	case CLP_GEMM_DIRECT:
		return clp_gemm_direct_run(ctx, t, g);
	case CLP_GEMM_TILED:
	default:
		return clp_gemm_tiled_run(ctx, t, g);
	}
}

static clp_status run_backend(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			      const struct clp_gemm_call *g)
{
	struct clp_gemm_call f = *g;
	cl_mem P;

	/* tiled stores each element of C once, so it rounds a 16-bit C itself, and so do packed
	 * when it computes in one K block and direct in one K chunk; packed over several K blocks
	 * and direct over several K chunks (they add into C) and
	 * CLBlast (fp32 only) compute into fp32 scratch, then one pass rounds. Its kernel is
	 * resolved first: a build error must come before anything runs. */
	if (g->c.dt == CLP_F32 || t->backend == CLP_GEMM_TILED ||
	    (t->backend == CLP_GEMM_PACKED && clp_gemm_packed_stores_c(t, g)) ||
	    (t->backend == CLP_GEMM_DIRECT && clp_gemm_direct_stores_c(t, g)))
		return run_one(ctx, t, g);
	CLP_TRY(store_c(ctx, g, NULL, 0));
	CLP_TRY(clp_cl_scratch(ctx, CLP_SCRATCH_GEMM_C, g->batch * g->m * g->n * sizeof(float),
			       &P));
	f.c = clp_buf_at(P, 0);
	f.ldc = g->n;
	f.sc = g->m * g->n;
	f.beta = 0.0f;
	CLP_TRY(run_one(ctx, t, &f));
	return store_c(ctx, g, P, 1);
}

/* Degrade: packed -> tiled -> CLBlast -> direct (-> tiled), each backend once per context. The next
 * backend's tuning comes from the table, else its defaults. */
static clp_status fall_back(clp_cl_ctx *ctx, clp_status s, clp_gemm_backend failed)
{
	static const clp_gemm_backend order[] = {CLP_GEMM_PACKED, CLP_GEMM_TILED, CLP_GEMM_CLBLAST,
						 CLP_GEMM_DIRECT};
	char what[32], from[40], to[40], err[2048];
	clp_gemm_backend next = CLP_GEMM_AUTO;
	clp_gemm_tuning t;

	snprintf(err, sizeof(err), "%s", clp_last_error());
	snprintf(what, sizeof(what), "gemm %s", clp_gemm_backend_name(failed));
	for (int i = 0; i < 4 && next == CLP_GEMM_AUTO; i++) {
		char w[32];

		snprintf(w, sizeof(w), "gemm %s", clp_gemm_backend_name(order[i]));
		if (order[i] != failed && !clp_cl_fell_back(ctx, w))
			next = order[i];
	}
	if (next == CLP_GEMM_AUTO)
		return clp_error(s, "%s\n  (no GEMM backend builds on this device)", err);
	clp_error(s, "%s", err);
	snprintf(from, sizeof(from), "the %s GEMM", clp_gemm_backend_name(failed));
	snprintf(to, sizeof(to), "the %s GEMM", clp_gemm_backend_name(next));
	CLP_TRY(clp_cl_fallback(ctx, s, what, from, to));
	CLP_TRY(tuning_or_defaults(&ctx->info, next, &t));
	return clp_cl_gemm_set_tuning(ctx, &t);
}

static clp_status check_type(const char *name, clp_buf x)
{
	if ((unsigned)x.dt >= CLP_DTYPE_COUNT)
		return clp_error(CLP_ERR_INVALID, "gemm: %s has an unknown storage type %d", name,
				 (int)x.dt);
	return CLP_OK;
}

/* Whether the backend adds g's bias in its store (clp_cl_gemm_bias): packed and direct. */
static int bias_in_store(const clp_gemm_tuning *t, const struct clp_gemm_call *g)
{
	if (g->alpha == 0.0f || g->k == 0 || g->bias.dt != g->c.dt)
		return 0;
	return (t->backend == CLP_GEMM_PACKED && clp_gemm_packed_stores_c(t, g)) ||
	       (t->backend == CLP_GEMM_DIRECT && clp_gemm_direct_stores_c(t, g));
}

static clp_status gemm_run(clp_cl_ctx *ctx, struct clp_gemm_call g, int *fused);

static double cpu_seconds(void)
{
	struct rusage u;

	if (getrusage(RUSAGE_SELF, &u) != 0)
		return 0.0;
	return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
	       (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

/* CLPIPE_GEMM_TRACE=1 (a diagnostic: where a run's GEMM time goes, shape by shape): every product
 * waits for the queue before and after it and prints one line on stderr, its shape, the wall
 * and the process's CPU time it took (packing included; a CPU device's threads are the
 * process's) and its GFLOP/s by each. The waits serialise host and device, so a traced run is
 * slower than an untraced one; the CPU seconds are the figure that other jobs on the cores
 * disturb least. */
static clp_status gemm_call(clp_cl_ctx *ctx, struct clp_gemm_call g, int *fused)
{
	static int trace = -1;
	double w0, c0, w, c, flop;
	clp_status s;

	if (trace < 0) {
		const char *e = getenv("CLPIPE_GEMM_TRACE");

		trace = e && *e && strcmp(e, "0") != 0;
	}
	if (!trace)
		return gemm_run(ctx, g, fused);
	CLP_TRY(clp_cl_finish(ctx));
	w0 = clp_now();
	c0 = cpu_seconds();
	s = gemm_run(ctx, g, fused);
	CLP_TRY(s);
	CLP_TRY(clp_cl_finish(ctx));
	w = clp_now() - w0;
	c = cpu_seconds() - c0;
	flop = 2.0 * (double)g.m * (double)g.n * (double)g.k * (double)g.batch;
	fprintf(stderr, "gemm trace: %c%c m %zu n %zu k %zu batch %zu bias %d: wall %.3f ms, "
		"cpu %.3f ms, %.1f GFLOP/s by wall, %.1f GFLOP/s per cpu second\n",
		g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, g.batch, g.bias.mem != NULL,
		w * 1e3, c * 1e3, w > 0 ? flop / w / 1e9 : 0.0, c > 0 ? flop / c / 1e9 : 0.0);
	return CLP_OK;
}

static clp_status gemm_run(clp_cl_ctx *ctx, struct clp_gemm_call g, int *fused)
{
	const clp_gemm_tuning *t;
	clp_trans ta = g.ta, tb = g.tb;
	size_t m = g.m, n = g.n, k = g.k;
	clp_buf bias = g.bias, act = g.act;

	if (fused)
		*fused = 0;
	CLP_TRY(check_type("A", g.a));
	CLP_TRY(check_type("B", g.b));
	CLP_TRY(check_type("C", g.c));
	CLP_TRY(clp_gemm_check_args(ta, tb, m, n, k, g.lda, g.ldb, g.ldc));
	g.bias.mem = g.act.mem = NULL;
	if (m == 0 || n == 0 || g.batch == 0)
		return CLP_OK;
	if (k == 0) /* no products: C = beta * C, which backends (CLBlast) may refuse */
		return scale_c(ctx, &g);
	CLP_TRY(clp_cl_gemm_tuning(ctx, &t));
	for (;;) {
		clp_status s;

		g.bias = bias;
		g.act = act;
		if (!bias.mem || !bias_in_store(t, &g) ||
		    (act.mem && (t->backend != CLP_GEMM_PACKED || !clp_gemm_packed_gelu_ok(t, &g))))
			g.bias.mem = g.act.mem = NULL; /* with act: both in the store or neither */
		s = run_backend(ctx, t, &g);
		if (s == CLP_OK && fused)
			*fused = g.bias.mem != NULL;

		if (s != CLP_ERR_BUILD)
			return s;
		/* every backend resolves its kernels before it enqueues anything, so nothing ran */
		CLP_TRY(fall_back(ctx, s, t->backend));
		CLP_TRY(clp_cl_gemm_tuning(ctx, &t));
	}
}

clp_status clp_cl_gemm_batched(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m, size_t n,
			       size_t k, float alpha, clp_buf a, size_t lda, size_t stride_a,
			       clp_buf b, size_t ldb, size_t stride_b, float beta, clp_buf c,
			       size_t ldc, size_t stride_c, size_t batch)
{
	struct clp_gemm_call g = {ta, tb, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
				  stride_a, stride_b, stride_c, batch, CLP_BUF_NONE, CLP_BUF_NONE, -1};

	return gemm_call(ctx, g, NULL);
}

clp_status clp_cl_gemm_bias(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m, size_t n,
			    size_t k, float alpha, clp_buf a, size_t lda, clp_buf b, size_t ldb,
			    float beta, clp_buf c, size_t ldc, clp_buf bias, int *fused)
{
	struct clp_gemm_call g = {ta, tb, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
				  0, 0, 0, 1, bias, CLP_BUF_NONE, -1};

	return gemm_call(ctx, g, fused);
}

clp_status clp_cl_gemm_bias_gelu(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m,
				 size_t n, size_t k, float alpha, clp_buf a, size_t lda, clp_buf b,
				 size_t ldb, float beta, clp_buf c, size_t ldc, clp_buf bias,
				 clp_buf act, int kind, int *fused)
{
	struct clp_gemm_call g = {ta, tb, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
				  0, 0, 0, 1, bias, act, kind};

	return gemm_call(ctx, g, fused);
}

clp_status clp_cl_gemm_batched_ab(clp_cl_ctx *ctx, clp_dtype ab_type, clp_trans ta, clp_trans tb,
				  size_t m, size_t n, size_t k, float alpha, clp_buf a, size_t lda,
				  size_t stride_a, clp_buf b, size_t ldb, size_t stride_b,
				  float beta, clp_buf c, size_t ldc, size_t stride_c, size_t batch)
{
	if ((unsigned)ab_type >= CLP_DTYPE_COUNT)
		return clp_error(CLP_ERR_INVALID, "gemm: unknown storage type %d for A and B",
				 (int)ab_type);
	a.dt = ab_type;
	b.dt = ab_type;
	return clp_cl_gemm_batched(ctx, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
				   beta, c, ldc, stride_c, batch);
}

clp_status clp_cl_gemm_ab(clp_cl_ctx *ctx, clp_dtype ab_type, clp_trans ta, clp_trans tb,
			  size_t m, size_t n, size_t k, float alpha, clp_buf a, size_t lda,
			  clp_buf b, size_t ldb, float beta, clp_buf c, size_t ldc)
{
	return clp_cl_gemm_batched_ab(ctx, ab_type, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0,
				      beta, c, ldc, 0, 1);
}

clp_status clp_cl_gemm(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m, size_t n, size_t k,
		       float alpha, clp_buf a, size_t lda, clp_buf b, size_t ldb, float beta,
		       clp_buf c, size_t ldc)
{
	return clp_cl_gemm_batched(ctx, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc,
				   0, 1);
}
