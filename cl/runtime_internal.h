/* Internals of the OpenCL runtime shared by its .c files; not part of the public API. */
#ifndef CLP_CL_RUNTIME_INTERNAL_H
#define CLP_CL_RUNTIME_INTERNAL_H

#include "cl/gemm.h"
#include "cl/runtime.h"

#define CLP_MAX_PROGRAMS 128 /* clpipe check builds every GEMM backend in every storage mix */
#define CLP_MAX_KERNELS 512

struct clp_program_entry {
	char *file;    /* kernel file name or label */
	char *defines; /* extra defines ("" if none) */
	cl_program program;
};

/* Every program build attempted in this context, successful or not (clpipe kernels reports them;
 * a failure is not retried within the process). */
struct clp_build_rec {
	clp_cl_build_info info;
	char *program, *defines, *message;
	char cache_file[4300];
};

struct clp_kernel_entry {
	int program; /* index into programs */
	char *name;
	cl_kernel kernel;
	int nargs;   /* CL_KERNEL_NUM_ARGS (-1: the driver did not say) */
	int nset;    /* arguments set so far through clp_cl_args: 1 + the highest index */
	int checked; /* launched once with every argument set */
};

struct clp_profile_rec {
	cl_event ev;       /* NULL when timed on the host */
	double host_ms;    /* host-timed duration (devices whose event timestamps read zero) */
	const char *label; /* interned in the kernel entry or a static string */
};

struct clp_cl_ctx {
	clp_cl_devinfo info;
	clp_cl_caps caps;
	cl_platform_id platform;
	cl_device_id root;   /* root device */
	cl_device_id device; /* the device used (root or sub-device) */
	int is_sub;
	cl_context context;
	cl_command_queue queue;
	uint64_t max_alloc; /* effective limit */
	char defines[512];

	struct clp_program_entry programs[CLP_MAX_PROGRAMS];
	int nprograms;
	struct clp_kernel_entry kernels[CLP_MAX_KERNELS];
	int nkernels;

	struct clp_build_rec builds[CLP_MAX_PROGRAMS * 2];
	int nbuilds;
	char fallbacks[512]; /* "what;" for each family already fallen back (warned once) */
	char warnings[2048]; /* the warning lines printed so far */

	cl_mem scratch[CLP_SCRATCH_COUNT];
	size_t scratch_bytes[CLP_SCRATCH_COUNT];

	clp_gemm_tuning gemm_tuning;
	int gemm_tuned;
	struct clp_gemm_cache *gemm_cache; /* kept packs (cl/gemm_cache.c) */
	struct clp_xent_keep { /* the logits the last loss forward kept for its backward (cl/nn_xent.c) */
		cl_mem h, w, b;
		size_t ho, wo, bo, N, C, V, vc;
		int valid;
	} xent_keep;

	int profiling;
	struct clp_profile_rec *prof;
	size_t nprof, capprof;
};

void clp_cl_describe(cl_device_id d, clp_cl_devinfo *o);
clp_status clp_cl_root_devices(clp_cl_devinfo **out, cl_device_id **ids, int *n);
void clp_cl_programs_release(clp_cl_ctx *ctx);
/* Fill ctx->caps (static part, then the measured part from the cache or by probing). */
void clp_cl_caps_probe(clp_cl_ctx *ctx);
/* Engine-cache path for a key string of this context's device ("caps", ...). */
void clp_cl_cache_key_path(const clp_cl_ctx *ctx, const char *what, const char *ext, char *path,
			   size_t n);

#endif
