/* OpenCL contexts: one device, one in-order profiling queue; kernel launches and timings. */
#include "cl/base/clock.h"
#include "cl/gemm_internal.h"
#include "cl/runtime_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *clp_cl_errname(cl_int err)
{
	switch (err) {
#define E(x)                                                                                       \
	case x:                                                                                    \
		return #x
		E(CL_SUCCESS);
		E(CL_DEVICE_NOT_FOUND);
		E(CL_DEVICE_NOT_AVAILABLE);
		E(CL_COMPILER_NOT_AVAILABLE);
		E(CL_MEM_OBJECT_ALLOCATION_FAILURE);
		E(CL_OUT_OF_RESOURCES);
		E(CL_OUT_OF_HOST_MEMORY);
		E(CL_PROFILING_INFO_NOT_AVAILABLE);
		E(CL_MEM_COPY_OVERLAP);
		E(CL_IMAGE_FORMAT_MISMATCH);
		E(CL_IMAGE_FORMAT_NOT_SUPPORTED);
		E(CL_BUILD_PROGRAM_FAILURE);
		E(CL_MAP_FAILURE);
		E(CL_MISALIGNED_SUB_BUFFER_OFFSET);
		E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
		E(CL_COMPILE_PROGRAM_FAILURE);
		E(CL_LINKER_NOT_AVAILABLE);
		E(CL_LINK_PROGRAM_FAILURE);
		E(CL_DEVICE_PARTITION_FAILED);
		E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE);
		E(CL_INVALID_VALUE);
		E(CL_INVALID_DEVICE_TYPE);
		E(CL_INVALID_PLATFORM);
		E(CL_INVALID_DEVICE);
		E(CL_INVALID_CONTEXT);
		E(CL_INVALID_QUEUE_PROPERTIES);
		E(CL_INVALID_COMMAND_QUEUE);
		E(CL_INVALID_HOST_PTR);
		E(CL_INVALID_MEM_OBJECT);
		E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
		E(CL_INVALID_IMAGE_SIZE);
		E(CL_INVALID_SAMPLER);
		E(CL_INVALID_BINARY);
		E(CL_INVALID_BUILD_OPTIONS);
		E(CL_INVALID_PROGRAM);
		E(CL_INVALID_PROGRAM_EXECUTABLE);
		E(CL_INVALID_KERNEL_NAME);
		E(CL_INVALID_KERNEL_DEFINITION);
		E(CL_INVALID_KERNEL);
		E(CL_INVALID_ARG_INDEX);
		E(CL_INVALID_ARG_VALUE);
		E(CL_INVALID_ARG_SIZE);
		E(CL_INVALID_KERNEL_ARGS);
		E(CL_INVALID_WORK_DIMENSION);
		E(CL_INVALID_WORK_GROUP_SIZE);
		E(CL_INVALID_WORK_ITEM_SIZE);
		E(CL_INVALID_GLOBAL_OFFSET);
		E(CL_INVALID_EVENT_WAIT_LIST);
		E(CL_INVALID_EVENT);
		E(CL_INVALID_OPERATION);
		E(CL_INVALID_GL_OBJECT);
		E(CL_INVALID_BUFFER_SIZE);
		E(CL_INVALID_MIP_LEVEL);
		E(CL_INVALID_GLOBAL_WORK_SIZE);
		E(CL_INVALID_PROPERTY);
		E(CL_INVALID_IMAGE_DESCRIPTOR);
		E(CL_INVALID_COMPILER_OPTIONS);
		E(CL_INVALID_LINKER_OPTIONS);
		E(CL_INVALID_DEVICE_PARTITION_COUNT);
#undef E
	default:
		return "CL_UNKNOWN_ERROR";
	}
}

clp_status clp_cl_fail(const clp_cl_ctx *ctx, cl_int err, const char *fmt, ...)
{
	char what[1024];
	va_list ap;
	clp_status s = CLP_ERR_OPENCL;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
		s = CLP_ERR_NOMEM;
	return clp_error(s, "%s: %s (%d) on device '%s'", what, clp_cl_errname(err), (int)err,
			 ctx ? ctx->info.name : "?");
}

static void device_defines(clp_cl_ctx *ctx)
{
	const clp_cl_devinfo *d = &ctx->info;
	int is_cpu = !clp_cl_ctx_gpu_shape(ctx);
	unsigned vw = d->pref_vec_float ? d->pref_vec_float : 4;

	snprintf(ctx->defines, sizeof(ctx->defines),
		 "#define CLP_DEV_%s 1\n#define CLP_VW %u\n#define CLP_HAS_FP64 %d\n"
		 "#define CLP_COMPUTE_UNITS_HINT %u\n#define CLP_SLOW_FMA %d\n",
		 is_cpu ? "CPU" : "GPU", vw, d->fp64, 0u, ctx->caps.slow_fma);
}

clp_status clp_cl_ctx_create(clp_cl_ctx **out, const char *selector)
{
	clp_cl_devinfo *devs = NULL;
	cl_device_id *ids = NULL;
	int n = 0;
	clp_cl_selection sel;
	clp_cl_ctx *ctx;
	cl_int err;
	clp_status s;

	*out = NULL;
	s = clp_cl_root_devices(&devs, &ids, &n);
	if (s != CLP_OK)
		return s;
	s = clp_cl_select(devs, n, selector, &sel);
	if (s != CLP_OK)
		goto free_list;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory creating an OpenCL context");
		goto free_list;
	}
	ctx->info = devs[sel.index];
	ctx->root = ids[sel.index];
	ctx->device = ctx->root;
	clGetDeviceInfo(ctx->root, CL_DEVICE_PLATFORM, sizeof(ctx->platform), &ctx->platform, NULL);
	if (sel.sub_index >= 0) {
		cl_device_partition_property props[] = {
			CL_DEVICE_PARTITION_EQUALLY,
			(cl_device_partition_property)(ctx->info.compute_units / sel.sub_parts), 0};
		cl_device_id subs[256];
		cl_uint nsub = 0;

		err = clCreateSubDevices(ctx->root, props, 256, subs, &nsub);
		if (err != CL_SUCCESS) {
			s = clp_cl_fail(ctx, err, "splitting device %d into %d sub-devices",
					sel.index, sel.sub_parts);
			free(ctx);
			goto free_list;
		}
		if ((cl_uint)sel.sub_index >= nsub) {
			s = clp_error(CLP_ERR_INVALID, "device %d (%s) split into %u sub-devices, not "
				      "%d", sel.index, ctx->info.name, nsub, sel.sub_parts);
			for (cl_uint i = 0; i < nsub; i++)
				clReleaseDevice(subs[i]);
			free(ctx);
			goto free_list;
		}
		for (cl_uint i = 0; i < nsub; i++)
			if (i != (cl_uint)sel.sub_index)
				clReleaseDevice(subs[i]);
		ctx->device = subs[sel.sub_index];
		ctx->is_sub = 1;
		clp_cl_describe(ctx->device, &ctx->info);
		ctx->info.sub_index = sel.sub_index;
		ctx->info.sub_count = (int)nsub;
	}
	ctx->max_alloc = ctx->info.max_alloc;
	ctx->context = clCreateContext(NULL, 1, &ctx->device, NULL, NULL, &err);
	if (err != CL_SUCCESS) {
		s = clp_cl_fail(ctx, err, "clCreateContext");
		clp_cl_ctx_free(ctx);
		goto free_list;
	}
	ctx->queue = clCreateCommandQueue(ctx->context, ctx->device, CL_QUEUE_PROFILING_ENABLE, &err);
	if (err != CL_SUCCESS) {
		s = clp_cl_fail(ctx, err, "clCreateCommandQueue");
		clp_cl_ctx_free(ctx);
		goto free_list;
	}
	clp_cl_caps_probe(ctx);
	device_defines(ctx);
	*out = ctx;
free_list:
	free(devs);
	free(ids);
	return s;
}

static double host_now_ms(void)
{
	return 1e3 * clp_now();
}

static void profile_clear(clp_cl_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nprof; i++)
		if (ctx->prof[i].ev)
			clReleaseEvent(ctx->prof[i].ev);
	ctx->nprof = 0;
}

void clp_cl_ctx_free(clp_cl_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->queue)
		clFinish(ctx->queue);
	profile_clear(ctx);
	free(ctx->prof);
	clp_gemm_cache_free(ctx);
	for (int i = 0; i < CLP_SCRATCH_COUNT; i++)
		if (ctx->scratch[i])
			clReleaseMemObject(ctx->scratch[i]);
	clp_cl_programs_release(ctx);
	if (ctx->queue)
		clReleaseCommandQueue(ctx->queue);
	if (ctx->context)
		clReleaseContext(ctx->context);
	if (ctx->is_sub)
		clReleaseDevice(ctx->device);
	free(ctx);
}

const clp_cl_devinfo *clp_cl_ctx_device(const clp_cl_ctx *ctx)
{
	return &ctx->info;
}

cl_context clp_cl_ctx_context(const clp_cl_ctx *ctx)
{
	return ctx->context;
}

cl_command_queue clp_cl_ctx_queue(const clp_cl_ctx *ctx)
{
	return ctx->queue;
}

cl_device_id clp_cl_ctx_device_id(const clp_cl_ctx *ctx)
{
	return ctx->device;
}

void clp_cl_ctx_set_max_alloc(clp_cl_ctx *ctx, uint64_t bytes)
{
	ctx->max_alloc = (bytes && bytes < ctx->info.max_alloc) ? bytes : ctx->info.max_alloc;
}

uint64_t clp_cl_ctx_max_alloc(const clp_cl_ctx *ctx)
{
	return ctx->max_alloc;
}

const char *clp_cl_ctx_defines(const clp_cl_ctx *ctx)
{
	return ctx->defines;
}

/* The context's entry of kernel k (NULL: not made by clp_cl_kernel). */
static struct clp_kernel_entry *kernel_entry(clp_cl_ctx *ctx, cl_kernel k)
{
	for (int i = 0; i < ctx->nkernels; i++)
		if (ctx->kernels[i].kernel == k)
			return &ctx->kernels[i];
	return NULL;
}

static clp_status set_args(clp_cl_ctx *ctx, cl_kernel k, int first, int n, va_list ap)
{
	struct clp_kernel_entry *ke = kernel_entry(ctx, k);

	if (ke && ke->nargs >= 0 && first + n > ke->nargs)
		return clp_error(CLP_ERR_INVALID, "kernel %s takes %d arguments; the host sets "
				 "arguments %d .. %d", ke->name, ke->nargs, first, first + n - 1);
	for (int i = first; i < first + n; i++) {
		size_t size = va_arg(ap, size_t);
		const void *ptr = va_arg(ap, const void *);
		cl_int err = clSetKernelArg(k, (cl_uint)i, size, ptr);

		if (err != CL_SUCCESS) {
			char name[128] = "?";

			clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof(name), name, NULL);
			return clp_cl_fail(ctx, err, "setting argument %d of kernel %s", i, name);
		}
	}
	if (ke && first + n > ke->nset)
		ke->nset = first + n;
	return CLP_OK;
}

clp_status clp_cl_args(clp_cl_ctx *ctx, cl_kernel k, int n, ...)
{
	va_list ap;
	clp_status s;

	va_start(ap, n);
	s = set_args(ctx, k, 0, n, ap);
	va_end(ap);
	return s;
}

clp_status clp_cl_args_at(clp_cl_ctx *ctx, cl_kernel k, int first, int n, ...)
{
	va_list ap;
	clp_status s;

	va_start(ap, n);
	s = set_args(ctx, k, first, n, ap);
	va_end(ap);
	return s;
}

/* At a kernel's first launch: every argument it takes was set. */
static clp_status check_launch(clp_cl_ctx *ctx, cl_kernel k)
{
	struct clp_kernel_entry *ke = kernel_entry(ctx, k);

	if (!ke || ke->checked)
		return CLP_OK;
	if (ke->nargs >= 0 && ke->nset != ke->nargs)
		return clp_error(CLP_ERR_INVALID, "kernel %s takes %d arguments; the host set %d "
				 "before its first launch", ke->name, ke->nargs, ke->nset);
	ke->checked = 1;
	return CLP_OK;
}

clp_status clp_cl_run(clp_cl_ctx *ctx, cl_kernel k, const char *label, cl_uint dims,
		      const size_t *global, const size_t *local)
{
	size_t g[3];
	cl_event ev = NULL;
	cl_int err;
	double host_ms = 0;

	CLP_TRY(check_launch(ctx, k));
	for (cl_uint i = 0; i < dims; i++) {
		g[i] = (global[i] + local[i] - 1) / local[i] * local[i];
		if (g[i] == 0)
			return CLP_OK; /* empty problem: nothing to run */
	}
	if (ctx->profiling && !ctx->caps.timestamps) {
		/* event timestamps read zero here: time the kernel alone on the host clock */
		CLP_TRY(clp_cl_finish(ctx));
		host_ms = host_now_ms();
	}
	err = clEnqueueNDRangeKernel(ctx->queue, k, dims, NULL, g, local, 0, NULL,
				     ctx->profiling && ctx->caps.timestamps ? &ev : NULL);
	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "launching kernel %s", label);
	if (ctx->profiling && !ctx->caps.timestamps) {
		CLP_TRY(clp_cl_finish(ctx));
		host_ms = host_now_ms() - host_ms;
	}
	if (ctx->profiling) {
		if (ctx->nprof == ctx->capprof) {
			size_t cap = ctx->capprof ? 2 * ctx->capprof : 256;
			struct clp_profile_rec *p = realloc(ctx->prof, cap * sizeof(*p));

			if (!p) {
				clReleaseEvent(ev);
				return clp_error(CLP_ERR_NOMEM, "out of host memory for the profile");
			}
			ctx->prof = p;
			ctx->capprof = cap;
		}
		ctx->prof[ctx->nprof].ev = ev;
		ctx->prof[ctx->nprof].host_ms = host_ms;
		ctx->prof[ctx->nprof].label = label;
		ctx->nprof++;
	}
	return CLP_OK;
}

clp_status clp_cl_finish(clp_cl_ctx *ctx)
{
	cl_int err = clFinish(ctx->queue);

	if (err != CL_SUCCESS)
		return clp_cl_fail(ctx, err, "clFinish");
	return CLP_OK;
}

clp_status clp_cl_event_ms(cl_event ev, double *ms)
{
	cl_ulong t0 = 0, t1 = 0;
	cl_int err;

	err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, NULL);
	if (err == CL_SUCCESS)
		err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, NULL);
	if (err != CL_SUCCESS)
		return clp_error(CLP_ERR_OPENCL, "event profiling: %s", clp_cl_errname(err));
	*ms = (double)(t1 - t0) * 1e-6;
	return CLP_OK;
}

void clp_cl_profile_start(clp_cl_ctx *ctx)
{
	profile_clear(ctx);
	ctx->profiling = 1;
}

static int by_total_desc(const void *a, const void *b)
{
	const clp_cl_timing *x = a, *y = b;

	return (x->total_ms < y->total_ms) - (x->total_ms > y->total_ms);
}

clp_status clp_cl_profile_stop(clp_cl_ctx *ctx, clp_cl_timing **out, int *n)
{
	clp_cl_timing *t = NULL;
	int nt = 0;
	clp_status s;

	*out = NULL;
	*n = 0;
	ctx->profiling = 0;
	s = clp_cl_finish(ctx);
	if (s != CLP_OK)
		goto done;
	t = calloc(ctx->nprof ? ctx->nprof : 1, sizeof(*t));
	if (!t) {
		s = clp_error(CLP_ERR_NOMEM, "out of host memory for the profile");
		goto done;
	}
	for (size_t i = 0; i < ctx->nprof; i++) {
		double ms = 0;
		int j;

		if (!ctx->prof[i].ev)
			ms = ctx->prof[i].host_ms;
		else if ((s = clp_cl_event_ms(ctx->prof[i].ev, &ms)) != CLP_OK)
			break;
		for (j = 0; j < nt; j++)
			if (strcmp(t[j].label, ctx->prof[i].label) == 0)
				break;
		if (j == nt) {
			snprintf(t[nt].label, sizeof(t[nt].label), "%s", ctx->prof[i].label);
			nt++;
		}
		t[j].count++;
		t[j].total_ms += ms;
		if (ms > t[j].max_ms)
			t[j].max_ms = ms;
	}
	qsort(t, (size_t)nt, sizeof(*t), by_total_desc);
	if (s == CLP_OK) {
		*out = t;
		*n = nt;
	} else {
		free(t);
	}
done:
	profile_clear(ctx);
	return s;
}

clp_status clp_cl_scratch(clp_cl_ctx *ctx, int slot, size_t bytes, cl_mem *out)
{
	char what[64];

	if (slot < 0 || slot >= CLP_SCRATCH_COUNT)
		return clp_error(CLP_ERR_INVALID, "scratch slot %d out of range", slot);
	if (ctx->scratch[slot] && ctx->scratch_bytes[slot] >= bytes) {
		*out = ctx->scratch[slot];
		return CLP_OK;
	}
	if (ctx->scratch[slot]) {
		clReleaseMemObject(ctx->scratch[slot]);
		ctx->scratch[slot] = NULL;
		ctx->scratch_bytes[slot] = 0;
	}
	snprintf(what, sizeof(what), "scratch buffer %d", slot);
	CLP_TRY(clp_cl_buffer(ctx, bytes, what, &ctx->scratch[slot]));
	ctx->scratch_bytes[slot] = bytes;
	*out = ctx->scratch[slot];
	return CLP_OK;
}
