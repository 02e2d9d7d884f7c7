/* The OpenCL runtime: devices, contexts with a profiling queue, program builds with per-device
 * defines and an on-disk binary cache, kernel launches with per-kernel timings, and memory that
 * respects the device's largest single allocation.
 *
 * Lifecycle: clp_cl_ctx_create() -> clp_cl_kernel() / clp_cl_run() / clp_cl_buffer() ... ->
 * clp_cl_ctx_free(). One context owns one device and one in-order queue. Not thread-safe: one
 * thread drives a context. */
#ifndef CLP_CL_RUNTIME_H
#define CLP_CL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <CL/cl.h>

#include "cl/base/status.h"
#include "cl/base/half.h"

/* What clpipe knows of one OpenCL device. Plain data: also built from description files so that
 * topology and placement can be tested without the hardware. */
typedef struct clp_cl_devinfo {
	int index;          /* position among root devices, in clp_cl_devices() order */
	int platform_index; /* position of its platform */
	int sub_index;      /* -1 for a root device, else the sub-device's position in its split */
	int sub_count;      /* number of parts the root device was split into (0 for root) */
	char platform[128];
	char platform_version[128];
	char name[256];
	char vendor[128];
	char driver[64];
	char version[128];   /* CL_DEVICE_VERSION */
	char c_version[64];  /* CL_DEVICE_OPENCL_C_VERSION */
	char type[16];       /* "cpu", "gpu", "accelerator", "other" */
	uint32_t vendor_id;
	uint32_t compute_units;
	uint32_t max_clock_mhz;
	uint64_t global_mem;  /* bytes */
	uint64_t max_alloc;   /* bytes, largest single buffer */
	uint64_t local_mem;   /* bytes */
	uint64_t max_wg_size;
	uint32_t pref_vec_float; /* preferred float vector width */
	uint32_t mem_align;      /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes */
	uint32_t max_subdevices; /* 0 or 1 if it cannot be partitioned */
	int fp64;
	int fp16;
	int unified_memory;      /* host-unified memory (CPU devices, integrated GPUs) */
	char shape[8];           /* kernel geometry that suits it, "cpu" or "gpu": decided by a
				  * context (clp_cl_ctx_caps), "" until then (type decides) */
	char extensions[4096];
} clp_cl_devinfo;

/* Enumerate the root devices of every platform. *out is malloc()ed; free() it. A machine with no
 * OpenCL platform gives *n = 0 and CLP_OK. */
clp_status clp_cl_devices(clp_cl_devinfo **out, int *n);

/* Parse a device selector and return the root-device index and sub-device split it names.
 * Selector grammar (also read from CLPIPE_DEVICE when selector is NULL or ""):
 *   ""/"default"       the first GPU, else the first device
 *   "N"                root device N
 *   "N.J"              sub-device J of device N split into single-compute-unit parts
 *   "N.J/P"            sub-device J of device N split equally into P parts
 *   "cpu"|"gpu"|"accelerator"   first device of that type
 *   anything else      first device whose name, vendor or platform contains it (case-insensitive)
 * On no match the error lists the devices there are. */
typedef struct clp_cl_selection {
	int index;     /* root device */
	int sub_index; /* -1: the whole device */
	int sub_parts; /* number of parts when sub_index >= 0 */
} clp_cl_selection;
clp_status clp_cl_select(const clp_cl_devinfo *devs, int n, const char *selector,
			 clp_cl_selection *sel);

typedef struct clp_cl_ctx clp_cl_ctx;

/* What a device offers, probed once per device and driver: the static part from clGetDeviceInfo,
 * the measured part by running two tiny kernels, kept in the engine cache
 * (caps-<key>.json) so later contexts only read it. Kernel variants follow these; the geometry
 * and slow_fma of the implementations known here follow their identity, and the timings only
 * elsewhere (clp_cl_caps_decide, docs/OPENCL.md). */
typedef struct clp_cl_caps {
	char c_version[64];      /* CL_DEVICE_OPENCL_C_VERSION */
	char il_version[64];     /* CL_DEVICE_IL_VERSION ("SPIR-V_1.2"), "" when none */
	int spirv;               /* accepts SPIR-V programs */
	int fp16, fp64;          /* cl_khr_fp16, cl_khr_fp64 */
	int subgroups;           /* cl_khr_subgroups or cl_intel_subgroups */
	uint64_t local_mem;      /* bytes */
	uint64_t max_wg_size;
	uint32_t vec_float, vec_half, vec_double; /* preferred vector widths */
	/* measured */
	int probed;              /* the measured part below is filled */
	int timestamps;          /* profiling events time kernels (else time on the host) */
	double launch_us;        /* one queued launch of an empty kernel, host clock */
	double wg1_ms;           /* 1M-float axpy, one work-item looping per work-group */
	double wide_ms;          /* the same, one element per work-item, 64 per work-group */
	int wide_groups;         /* 1: the GPU shape (wide work-groups): clp_cl_caps_decide */
	double fma_ms, mad_ms;   /* dependent fma() / mad() chains, 16 Ki work-items x 256 */
	int slow_fma;            /* 1: build with CLP_SLOW_FMA (mad() for fma()): the same */
	char decided_by[32];     /* what set those two: "table: <entry>", "probe", "device type" */
} clp_cl_caps;

/* Set c->wide_groups and c->slow_fma for device d, and return (and keep in c->decided_by) what
 * decided: the table of implementations known here (llvmpipe: GPU shape and slow_fma; PoCL's
 * and Intel's CPU devices: CPU shape, fma()), whatever c's timings say; for another device the
 * timings (c->probed) with their margins; without them the device type (GPU shape unless
 * "cpu"), fma() as written. Pure: no device is touched (tests/cl/test_caps_decide.c). */
const char *clp_cl_caps_decide(const clp_cl_devinfo *d, clp_cl_caps *c);

/* Create a context and profiling queue on the device the selector names (see clp_cl_select). */
clp_status clp_cl_ctx_create(clp_cl_ctx **out, const char *selector);
void clp_cl_ctx_free(clp_cl_ctx *ctx);

const clp_cl_devinfo *clp_cl_ctx_device(const clp_cl_ctx *ctx);
const clp_cl_caps *clp_cl_ctx_caps(const clp_cl_ctx *ctx);
/* 1 when kernels should take their GPU shape (work-groups of many work-items) on this context:
 * the decided wide_groups, unless clp_cl_set_shape forced one (tests, benchmarks). */
int clp_cl_ctx_gpu_shape(const clp_cl_ctx *ctx);
/* Force a shape process-wide: -1 as decided, 0 CPU shape, 1 GPU shape. */
void clp_cl_set_shape(int shape);
/* The capabilities as JSON (jansson json_t *, new reference). */
void *clp_cl_caps_json(const clp_cl_caps *c);
cl_context clp_cl_ctx_context(const clp_cl_ctx *ctx);
cl_command_queue clp_cl_ctx_queue(const clp_cl_ctx *ctx);
cl_device_id clp_cl_ctx_device_id(const clp_cl_ctx *ctx);

/* Lower the largest single buffer this context will create (tests, or to leave room). 0 restores
 * the device's own limit. */
void clp_cl_ctx_set_max_alloc(clp_cl_ctx *ctx, uint64_t bytes);
uint64_t clp_cl_ctx_max_alloc(const clp_cl_ctx *ctx);

/* Turn an OpenCL error code into a status with a message naming the call and the device. */
clp_status clp_cl_fail(const clp_cl_ctx *ctx, cl_int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *clp_cl_errname(cl_int err);

/* ---- programs and kernels ------------------------------------------------------------------ */

/* Source of an embedded kernel file ("gemm_cpu.cl"); CLPIPE_KERNEL_DIR, when set, is read first
 * so kernels can be edited without rebuilding. Returns NULL if unknown. *len excludes the NUL. */
const char *clp_cl_kernel_source(const char *file, size_t *len);
/* Names of all embedded kernel files, NULL-terminated. */
const char *const *clp_cl_kernel_files(void);

/* Get a kernel from a program built for this context's device with the given extra defines
 * ("#define MR 6\n..." text, may be NULL). Programs and kernels are built once per context and
 * cached on disk (see docs/OPENCL.md). The kernel is owned by the context. */
clp_status clp_cl_kernel(clp_cl_ctx *ctx, const char *file, const char *defines, const char *name,
			 cl_kernel *out);
/* Build a program from explicit source (tests, tuning). Owned by the context. */
clp_status clp_cl_program_source(clp_cl_ctx *ctx, const char *label, const char *source,
				 const char *defines, cl_program *out);
/* The device-dependent defines every program gets (CLP_DEV_CPU, CLP_VW, ...). */
const char *clp_cl_ctx_defines(const clp_cl_ctx *ctx);

/* What happened to each program build of this context (clpipe kernels prints them). Failed
 * builds are recorded too; a failure is not retried in the same process, and it is remembered in
 * the engine cache for that device, driver and source (a file <key>.failed next to the binaries)
 * so later runs do not retry it either: delete the file to retry. A compiler that ends the
 * process while building (rusticl's SPIR-V writer does) is caught by the next run through a
 * <key>.building marker left behind. */
typedef struct clp_cl_build_info {
	const char *program; /* kernel file or label */
	const char *defines; /* its extra defines, "" if none */
	int ok;              /* built, or loaded from the engine cache */
	int cached;          /* loaded from the engine cache */
	int remembered;      /* a failure remembered from an earlier run, not retried */
	double seconds;      /* wall time of the build (or load) */
	const char *message; /* on failure: names program, device, driver, first lines of the log */
	const char *cache_file; /* its binary in the engine cache; .failed/.building beside it */
} clp_cl_build_info;
int clp_cl_ctx_nbuilds(const clp_cl_ctx *ctx);
const clp_cl_build_info *clp_cl_ctx_build(const clp_cl_ctx *ctx, int i);

/* Degrade instead of failing. When s is CLP_ERR_BUILD, print one warning line (once per context
 * and family `what`): "<from> does not build on device ...; falling back to <to> [error]", and
 * return CLP_OK so that the caller runs its portable variant. Any other status is returned
 * unchanged. clp_cl_fell_back() tells whether `what` already fell back on this context. */
clp_status clp_cl_fallback(clp_cl_ctx *ctx, clp_status s, const char *what, const char *from,
			   const char *to);
int clp_cl_fell_back(const clp_cl_ctx *ctx, const char *what);
/* The warning lines printed for this context so far ("" if none). */
const char *clp_cl_ctx_warnings(const clp_cl_ctx *ctx);

/* Directory of the engine's on-disk cache (CLPIPE_CACHE_DIR, else $XDG_CACHE_HOME/clpipe, else
 * ~/.cache/clpipe). Created on first use. */
const char *clp_cl_cache_dir(void);

/* Set kernel arguments: n pairs of (size_t size, const void *ptr). Use CLP_ARG(x). clp_cl_args
 * sets arguments 0 .. n-1, clp_cl_args_at first .. first + n - 1. The counts are checked against
 * the kernel's own (CL_KERNEL_NUM_ARGS, read once when clp_cl_kernel creates it): setting an
 * argument past its last is refused, and so is its first clp_cl_run before every argument was
 * set (CLP_ERR_INVALID naming the kernel and both counts). */
#define CLP_ARG(x) sizeof(x), (const void *)&(x)
clp_status clp_cl_args(clp_cl_ctx *ctx, cl_kernel k, int n, ...);
clp_status clp_cl_args_at(clp_cl_ctx *ctx, cl_kernel k, int first, int n, ...);

/* Enqueue a kernel. The label (a string that outlives the profile, e.g. a literal) names it in
 * errors and in the profile. Global sizes are rounded
 * up to multiples of the local sizes, which must always be given (PoCL compiles once per local
 * size). */
clp_status clp_cl_run(clp_cl_ctx *ctx, cl_kernel k, const char *label, cl_uint dims,
		      const size_t *global, const size_t *local);
clp_status clp_cl_finish(clp_cl_ctx *ctx);

/* ---- per-kernel timings ------------------------------------------------------------------- */

typedef struct clp_cl_timing {
	char label[64];
	uint64_t count;
	double total_ms;
	double max_ms;
} clp_cl_timing;

/* Start recording the device time of every clp_cl_run. On a device whose event timestamps do
 * not work (clp_cl_caps.timestamps = 0, e.g. rusticl 22.3), each kernel is finished and timed
 * alone on the host clock instead (launch overhead included, no overlap): say so when printing. */
void clp_cl_profile_start(clp_cl_ctx *ctx);
/* Finish the queue, stop recording and return per-label totals, sorted by total time (malloc()ed
 * array in *out, *n entries). */
clp_status clp_cl_profile_stop(clp_cl_ctx *ctx, clp_cl_timing **out, int *n);
/* Device time between start and end of an event, in milliseconds (profiling queue). */
clp_status clp_cl_event_ms(cl_event ev, double *ms);

/* ---- memory -------------------------------------------------------------------------------- */

/* A device buffer of bytes (<= the max allocation). Allocation is forced at creation (the buffer
 * is zero-filled), so a failure is reported here, with the size and device, not at first use. */
clp_status clp_cl_buffer(clp_cl_ctx *ctx, size_t bytes, const char *what, cl_mem *out);
/* A buffer's size in bytes (CL_MEM_SIZE), -1 when the implementation does not say. */
int64_t clp_cl_buffer_bytes(cl_mem m);
clp_status clp_cl_write(clp_cl_ctx *ctx, cl_mem m, size_t offset, size_t bytes, const void *src);
clp_status clp_cl_read(clp_cl_ctx *ctx, cl_mem m, size_t offset, size_t bytes, void *dst);

/* Scratch buffers owned by the context, one per slot, grown on demand and kept. Valid until the
 * next call with the same slot; the in-order queue makes reuse across kernels safe. */
enum clp_cl_scratch_slot {
	CLP_SCRATCH_REDUCE = 0,
	CLP_SCRATCH_GEMM_A,
	CLP_SCRATCH_GEMM_B,
	CLP_SCRATCH_GEMM_C,
	CLP_SCRATCH_USER0,
	CLP_SCRATCH_COUNT = 9
};
clp_status clp_cl_scratch(clp_cl_ctx *ctx, int slot, size_t bytes, cl_mem *out);

/* A float buffer and an element offset into it: how kernels address tensors. */
/* A tensor's place: buffer, offset in elements, and the storage type of those elements (fp32
 * unless set: a zero-initialised clp_buf is an fp32 one). Value tensors of mixed precision
 * (activations, the 16-bit weight copy) are bf16 or fp16; gradients, statistics, master weights
 * and optimizer state are always fp32 (cl/nn.h says which argument is which). */
typedef struct clp_buf {
	cl_mem mem;
	size_t off;   /* elements of dt */
	clp_dtype dt; /* CLP_F32, CLP_BF16 or CLP_F16 */
} clp_buf;

/* No tensor (an optional argument left out). */
#define CLP_BUF_NONE ((clp_buf){NULL, 0, CLP_F32})

static inline clp_buf clp_buf_at(cl_mem mem, size_t off)
{
	clp_buf b = {mem, off, CLP_F32};
	return b;
}

static inline clp_buf clp_buf_typed(cl_mem mem, size_t off, clp_dtype dt)
{
	clp_buf b = {mem, off, dt};
	return b;
}

/* The same tensor n elements further on. */
static inline clp_buf clp_buf_plus(clp_buf b, size_t n)
{
	b.off += n;
	return b;
}

/* A view: a range of one device buffer. Kernels take (buffer, element offset). */
typedef struct clp_cl_view {
	cl_mem mem;
	size_t offset; /* bytes, aligned to the block's alignment */
	size_t bytes;
} clp_cl_view;

/* A block: one logical allocation of named views, laid out in order and spread over as many device
 * buffers as the max allocation needs. No view crosses two buffers. */
typedef struct clp_cl_block clp_cl_block;
clp_status clp_cl_block_create(clp_cl_ctx *ctx, const char *name, int nviews,
			       const char *const *names, const size_t *bytes, clp_cl_block **out);
void clp_cl_block_free(clp_cl_block *b);
static inline clp_buf clp_buf_view(const clp_cl_view *v)
{
	return clp_buf_at(v->mem, v->offset / sizeof(float));
}

/* A view holding elements of type dt (its byte offset a multiple of their size). */
static inline clp_buf clp_buf_view_as(const clp_cl_view *v, clp_dtype dt)
{
	return clp_buf_typed(v->mem, v->offset / clp_dtype_size(dt), dt);
}
int clp_cl_block_nviews(const clp_cl_block *b);
const clp_cl_view *clp_cl_block_view(const clp_cl_block *b, int i);
int clp_cl_block_nbuffers(const clp_cl_block *b);
size_t clp_cl_block_bytes(const clp_cl_block *b); /* sum of buffer sizes */

#endif
