/* Device capabilities (see clp_cl_caps in cl/runtime.h): what clGetDeviceInfo says, and what
 * two tiny kernels measure, once per device and driver, cached in the engine cache.
 *
 * The shape: on PoCL a work-group of one work-item looping over a chunk is the fast shape
 * (PoCL compiles each work-group to a loop and vectorises it); on Mesa's llvmpipe and on GPUs
 * the work-items of a group are the SIMD lanes, so one work-item per group leaves all but one
 * lane idle and pays the per-group cost for every element. Both devices say "CPU". Which
 * shape a device gets, and slow_fma, is a table of the implementations known here first
 * (clp_cl_caps_decide): on llvmpipe the CPU shape's long loops run into its silent limit of
 * 65535 loop iterations a work-item, so a timing flipped by a loaded host computed wrong
 * gradients for good (the cache keeps the first decision). Timings decide only elsewhere. */
#include "cl/base/clock.h"
#include "cl/base/durable.h"
#include "cl/base/json_util.h"
#include "cl/runtime_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PROBE_N (1u << 20)
#define PROBE_CHUNK 4096u
#define PROBE_WG 64u
#define PROBE_ROUNDS 3
#define PROBE_MARGIN 1.25
#define CAPS_VERSION 4 /* 2: the shape needs a margin (shape_of); 3: slow_fma; 4: known devices
			* by the table (clp_cl_caps_decide). Older files are probed again */
#define PROBE_FMA_ITEMS 16384u
#define PROBE_FMA_N 256u
/* fma_ms / mad_ms measured (loaded 2-core host): llvmpipe (Mesa 22.3.6) 10-20, PoCL and Intel's
 * CPU runtime about 1 (the CPU's FMA instructions). 4 sits between them with room either way. */
#define PROBE_FMA_MARGIN 4.0

static int forced_shape = -1;

static double now_ms(void)
{
	return 1e3 * clp_now();
}

static void static_caps(clp_cl_ctx *ctx, clp_cl_caps *c)
{
	const clp_cl_devinfo *d = &ctx->info;
	cl_uint v = 0;

	snprintf(c->c_version, sizeof(c->c_version), "%s", d->c_version);
	c->il_version[0] = '\0';
#ifdef CL_DEVICE_IL_VERSION
	if (clGetDeviceInfo(ctx->device, CL_DEVICE_IL_VERSION, sizeof(c->il_version),
			    c->il_version, NULL) != CL_SUCCESS)
		c->il_version[0] = '\0';
	c->il_version[sizeof(c->il_version) - 1] = '\0';
#endif
	c->spirv = strstr(c->il_version, "SPIR-V") != NULL || strstr(d->extensions, "cl_khr_il_program");
	c->fp16 = d->fp16;
	c->fp64 = d->fp64;
	c->subgroups = strstr(d->extensions, "cl_khr_subgroups") != NULL ||
		       strstr(d->extensions, "cl_intel_subgroups") != NULL;
	c->local_mem = d->local_mem;
	c->max_wg_size = d->max_wg_size;
	c->vec_float = d->pref_vec_float;
	clGetDeviceInfo(ctx->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, sizeof(v), &v, NULL);
	c->vec_half = v;
	v = 0;
	clGetDeviceInfo(ctx->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, sizeof(v), &v, NULL);
	c->vec_double = v;
}

static int load(const char *path, clp_cl_caps *c)
{
	json_t *j;
	int ok;

	if (clp_json_load(path, &j) != CLP_OK) {
		clp_error_clear(); /* not probed yet on this device (or a damaged cache): probe */
		return 0;
	}
	ok = json_integer_value(json_object_get(j, "version")) == CAPS_VERSION &&
	     json_is_number(json_object_get(j, "axpy_cpu_shape_ms")) &&
	     json_is_number(json_object_get(j, "fma_ms"));
	if (ok) {
		c->timestamps = json_is_true(json_object_get(j, "timestamps"));
		c->launch_us = json_number_value(json_object_get(j, "launch_us"));
		c->wg1_ms = json_number_value(json_object_get(j, "axpy_cpu_shape_ms"));
		c->wide_ms = json_number_value(json_object_get(j, "axpy_gpu_shape_ms"));
		c->fma_ms = json_number_value(json_object_get(j, "fma_ms"));
		c->mad_ms = json_number_value(json_object_get(j, "mad_ms"));
		c->probed = 1;
	}
	json_decref(j);
	return ok;
}

static void save(const char *path, const clp_cl_caps *c)
{
	json_t *j = json_pack("{s:i, s:b, s:f, s:f, s:f, s:b, s:f, s:f, s:b}", "version",
			      CAPS_VERSION, "timestamps", c->timestamps, "launch_us", c->launch_us,
			      "axpy_cpu_shape_ms", c->wg1_ms, "axpy_gpu_shape_ms", c->wide_ms,
			      "wide_groups", c->wide_groups, "fma_ms", c->fma_ms, "mad_ms",
			      c->mad_ms, "slow_fma", c->slow_fma);

	if (!j)
		return;
	/* ranks sharing a device probe it at once; an unwritable cache only costs a probe next
	 * time, so a failure is dropped */
	(void)clp_io_write_json(path, j, JSON_INDENT(2), 1, CLP_IO_SHARED);
	json_decref(j);
}

/* The shape from the probe, for a device the table of clp_cl_caps_decide does not know: the
 * device type's (GPU shape unless the device says "CPU"), unless the other shape is at least
 * PROBE_MARGIN times faster. A bare "faster" could flip on a loaded host, and the first run
 * decides for good (the cache keeps it): Intel's CPU runtime measured 0.185 ms (CPU shape) vs
 * 0.244 ms once, 4-6 vs 13-36 ms another time, and the first run that picked the GPU shape
 * computed other gradients (issue 24). Measured wg1_ms / wide_ms (loaded 2-core host): PoCL
 * 0.44-0.47, llvmpipe 2.1-2.6, Intel's CPU runtime 0.12-0.76. 1.25 sits midway
 * (geometrically) between the two closest, Intel's 0.76 and llvmpipe's 2.1. Those three are in
 * the table now: a margin is only as good as the load it was measured under. */
static int shape_of(const clp_cl_devinfo *d, double wg1_ms, double wide_ms)
{
	if (strcmp(d->type, "cpu") != 0)
		return !(wg1_ms * PROBE_MARGIN < wide_ms);
	return wide_ms * PROBE_MARGIN < wg1_ms;
}

static int has(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (; *s; s++)
		if (strncasecmp(s, word, n) == 0)
			return 1;
	return 0;
}

/* The implementations measured here, by what they call themselves, and what they get whatever
 * a probe measures. Each entry's reason is a property of the implementation, not a timing:
 *  - llvmpipe (Mesa's rusticl or clover; the device name is "llvmpipe (LLVM ..., 256 bits)"):
 *    the GPU shape, because its work-items are SIMD lanes (the CPU shape is 2-7x slower, see
 *    above) and, for correctness, because it ends a work-item's loops after 65535 iterations
 *    in all, silently: the CPU shape's per-work-item loops over a chunk are long ones
 *    (docs/OPENCL.md). slow_fma: it computes fma() exactly without the FMA instructions
 *    (Mesa 22.3.6: 10-40x mad(), loaded or not), so mad() is used.
 *  - PoCL's CPU device (platform "Portable Computing Language", type CPU): the CPU shape, a
 *    work-group compiled to a vectorised loop (2.2x faster); fma() is the CPU's instruction.
 *  - Intel's CPU runtime (platform "Intel(R) OpenCL", type CPU): the CPU shape, 2.6x the GPU
 *    shape's training throughput, and the shape its GPU-shape miscompile (issue 24, the
 *    attention dQ, worked around since) never touched; fma() is the CPU's instruction.
 * Returns the entry's name, or NULL for a device not in the table. */
static const char *known(const clp_cl_devinfo *d, int *gpu_shape, int *slow_fma)
{
	if (has(d->name, "llvmpipe")) {
		*gpu_shape = 1, *slow_fma = 1;
		return "llvmpipe";
	}
	if (strcmp(d->type, "cpu") == 0 && has(d->platform, "Portable Computing Language")) {
		*gpu_shape = 0, *slow_fma = 0;
		return "pocl-cpu";
	}
	if (strcmp(d->type, "cpu") == 0 && has(d->platform, "Intel(R) OpenCL")) {
		*gpu_shape = 0, *slow_fma = 0;
		return "intel-cpu";
	}
	return NULL;
}

const char *clp_cl_caps_decide(const clp_cl_devinfo *d, clp_cl_caps *c)
{
	const char *k = known(d, &c->wide_groups, &c->slow_fma);

	if (k) {
		snprintf(c->decided_by, sizeof(c->decided_by), "table: %s", k);
	} else if (c->probed) {
		/* not known here: the timings are all there is, with their margins */
		c->wide_groups = shape_of(d, c->wg1_ms, c->wide_ms);
		c->slow_fma = c->fma_ms > PROBE_FMA_MARGIN * c->mad_ms;
		snprintf(c->decided_by, sizeof(c->decided_by), "probe");
	} else { /* no probe either: the device type, and fma() as written */
		c->wide_groups = strcmp(d->type, "cpu") != 0;
		c->slow_fma = 0;
		snprintf(c->decided_by, sizeof(c->decided_by), "device type");
	}
	return c->decided_by;
}

/* Host time of `reps` runs of k (best of), enqueued back to back then finished. */
static clp_status time_runs(clp_cl_ctx *ctx, cl_kernel k, size_t global, size_t local, int reps,
			    double *ms)
{
	double best = 1e30;

	CLP_TRY(clp_cl_run(ctx, k, "probe", 1, &global, &local)); /* warm: first-run costs */
	CLP_TRY(clp_cl_finish(ctx));
	for (int r = 0; r < reps; r++) {
		double t0 = now_ms();

		CLP_TRY(clp_cl_run(ctx, k, "probe", 1, &global, &local));
		CLP_TRY(clp_cl_finish(ctx));
		if (now_ms() - t0 < best)
			best = now_ms() - t0;
	}
	*ms = best;
	return CLP_OK;
}

/* fma() against mad() in dependent chains (probe.cl), alternating rounds, best of each: on
 * llvmpipe fma() is computed exactly without the FMA instructions, 10-20x mad() */
static clp_status probe_fma(clp_cl_ctx *ctx, cl_mem y, clp_cl_caps *c)
{
	cl_kernel kf, km;
	cl_uint n = PROBE_FMA_N;

	CLP_TRY(clp_cl_kernel(ctx, "probe.cl", NULL, "clp_probe_fma", &kf));
	CLP_TRY(clp_cl_kernel(ctx, "probe.cl", NULL, "clp_probe_mad", &km));
	CLP_TRY(clp_cl_args(ctx, kf, 2, CLP_ARG(y), CLP_ARG(n)));
	CLP_TRY(clp_cl_args(ctx, km, 2, CLP_ARG(y), CLP_ARG(n)));
	c->fma_ms = c->mad_ms = 1e30;
	for (int round = 0; round < PROBE_ROUNDS; round++) {
		double a, b;

		CLP_TRY(time_runs(ctx, kf, PROBE_FMA_ITEMS, PROBE_WG, 2, &a));
		CLP_TRY(time_runs(ctx, km, PROBE_FMA_ITEMS, PROBE_WG, 2, &b));
		c->fma_ms = a < c->fma_ms ? a : c->fma_ms;
		c->mad_ms = b < c->mad_ms ? b : c->mad_ms;
	}
	return CLP_OK; /* slow_fma: clp_cl_caps_decide */
}

static clp_status measure(clp_cl_ctx *ctx, clp_cl_caps *c)
{
	cl_kernel ke, kl, kw;
	cl_mem x = NULL, y = NULL;
	cl_uint n = PROBE_N, chunk = PROBE_CHUNK;
	size_t one = 1, g;
	cl_event ev = NULL;
	cl_ulong t0 = 0, t1 = 0;
	double host, t;
	clp_status s;

	CLP_TRY(clp_cl_kernel(ctx, "probe.cl", NULL, "clp_probe_empty", &ke));
	CLP_TRY(clp_cl_kernel(ctx, "probe.cl", NULL, "clp_probe_axpy_loop", &kl));
	CLP_TRY(clp_cl_kernel(ctx, "probe.cl", NULL, "clp_probe_axpy_wide", &kw));
	s = clp_cl_buffer(ctx, PROBE_N * sizeof(float), "probe x", &x);
	if (s == CLP_OK)
		s = clp_cl_buffer(ctx, PROBE_N * sizeof(float), "probe y", &y);
	if (s != CLP_OK)
		goto out;
	/* launch overhead: 32 empty kernels queued, one finish */
	if ((s = clp_cl_args(ctx, ke, 1, CLP_ARG(x))) != CLP_OK ||
	    (s = clp_cl_run(ctx, ke, "probe", 1, &one, &one)) != CLP_OK ||
	    (s = clp_cl_finish(ctx)) != CLP_OK)
		goto out;
	t = now_ms();
	for (int i = 0; i < 32 && s == CLP_OK; i++)
		s = clp_cl_run(ctx, ke, "probe", 1, &one, &one);
	if (s != CLP_OK || (s = clp_cl_finish(ctx)) != CLP_OK)
		goto out;
	c->launch_us = (now_ms() - t) * 1e3 / 32;
	/* the two shapes, in alternating rounds so that a burst of load on a shared host does not
	 * fall on one of them only; best of all runs each */
	g = PROBE_N / PROBE_CHUNK;
	c->wg1_ms = c->wide_ms = 1e30;
	if ((s = clp_cl_args(ctx, kl, 4, CLP_ARG(y), CLP_ARG(x), CLP_ARG(n), CLP_ARG(chunk))) !=
		    CLP_OK ||
	    (s = clp_cl_args(ctx, kw, 3, CLP_ARG(y), CLP_ARG(x), CLP_ARG(n))) != CLP_OK)
		goto out;
	for (int round = 0; round < PROBE_ROUNDS; round++) {
		double a, b;

		if ((s = time_runs(ctx, kl, g, 1, 3, &a)) != CLP_OK ||
		    (s = time_runs(ctx, kw, PROBE_N, PROBE_WG, 3, &b)) != CLP_OK)
			goto out;
		c->wg1_ms = a < c->wg1_ms ? a : c->wg1_ms;
		c->wide_ms = b < c->wide_ms ? b : c->wide_ms;
	}
	if ((s = probe_fma(ctx, y, c)) != CLP_OK)
		goto out;
	/* event timestamps: do they time a kernel the host sees take milliseconds? */
	g = PROBE_N;
	host = now_ms();
	if (clEnqueueNDRangeKernel(ctx->queue, kw, 1, NULL, &g, (size_t[]){PROBE_WG}, 0, NULL,
				   &ev) != CL_SUCCESS) {
		s = clp_error(CLP_ERR_OPENCL, "probe: launching the timestamp kernel failed");
		goto out;
	}
	clFinish(ctx->queue);
	host = now_ms() - host;
	clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, NULL);
	clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, NULL);
	clReleaseEvent(ev);
	c->timestamps = t0 > 0 && t1 > t0 && (double)(t1 - t0) * 1e-6 >= 0.1 * host;
	c->probed = 1;
out:
	if (y)
		clReleaseMemObject(y);
	if (x)
		clReleaseMemObject(x);
	return s;
}

void clp_cl_caps_probe(clp_cl_ctx *ctx)
{
	clp_cl_caps *c = &ctx->caps;
	char path[4200];

	memset(c, 0, sizeof(*c));
	static_caps(ctx, c);
	clp_cl_cache_key_path(ctx, "caps", ".caps.json", path, sizeof(path));
	if (!load(path, c)) {
		if (measure(ctx, c) == CLP_OK) {
			clp_cl_caps_decide(&ctx->info, c);
			save(path, c);
		} else { /* no probe: the table, else the device type decides */
			c->probed = 0, c->timestamps = 1, clp_error_clear();
		}
	}
	/* made again on every load, not read back: a file another version wrote, or one whose
	 * timings a loaded host skewed, cannot overrule the table */
	clp_cl_caps_decide(&ctx->info, c);
	snprintf(ctx->info.shape, sizeof(ctx->info.shape), "%s", c->wide_groups ? "gpu" : "cpu");
}

const clp_cl_caps *clp_cl_ctx_caps(const clp_cl_ctx *ctx)
{
	return &ctx->caps;
}

void clp_cl_set_shape(int shape)
{
	forced_shape = shape;
}

int clp_cl_ctx_gpu_shape(const clp_cl_ctx *ctx)
{
	return forced_shape >= 0 ? forced_shape : ctx->caps.wide_groups;
}

void *clp_cl_caps_json(const clp_cl_caps *c)
{
	json_t *j = json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:I, s:I, s:{s:i, s:i, s:i}}",
			      "opencl_c", c->c_version, "il_version", c->il_version, "spirv",
			      c->spirv, "fp16", c->fp16, "fp64", c->fp64, "subgroups", c->subgroups,
			      "local_mem", (json_int_t)c->local_mem, "max_work_group_size",
			      (json_int_t)c->max_wg_size, "preferred_vector_width", "float",
			      (int)c->vec_float, "half", (int)c->vec_half, "double",
			      (int)c->vec_double);

	if (j && c->probed) {
		json_object_set_new(j, "event_timestamps", json_boolean(c->timestamps));
		json_object_set_new(j, "launch_us", json_real(c->launch_us));
		json_object_set_new(j, "axpy_1m_cpu_shape_ms", json_real(c->wg1_ms));
		json_object_set_new(j, "axpy_1m_gpu_shape_ms", json_real(c->wide_ms));
		json_object_set_new(j, "fma_chain_ms", json_real(c->fma_ms));
		json_object_set_new(j, "mad_chain_ms", json_real(c->mad_ms));
	}
	if (j && c->decided_by[0]) { /* the decisions, and what made them */
		json_object_set_new(j, "shape", json_string(c->wide_groups ? "gpu" : "cpu"));
		json_object_set_new(j, "slow_fma", json_boolean(c->slow_fma));
		json_object_set_new(j, "decided_by", json_string(c->decided_by));
	}
	return j;
}
