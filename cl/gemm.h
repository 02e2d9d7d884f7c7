/* GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, op = N or T, with element offsets and
 * leading dimensions, and a strided-batched form.
 *
 * Backends behind one call:
 *   packed   the engine's CPU-shaped kernels (pack A and B into strips, register-blocked
 *            micro-kernel, one work-item per work-group): fast through PoCL
 *   tiled    the engine's GPU-shaped kernel (work-group tiles staged in local memory)
 *   clblast  CLBlast, optionally with parameters overridden through CLBlastOverrideParameters
 *   direct   the engine's kernel for work-groups run as SIMD lanes (Mesa llvmpipe): no local
 *            memory, a WM x WN register block per work-item, one K loop (K in chunks of KMAX)
 * Which runs, and with which parameters, comes from the tuning table (cl/tuning/gemm.json, then
 * the user's tuned file; see docs/OPENCL.md), looked up device -> architecture/vendor -> default.
 * beta == 0 never reads C. Work is enqueued; nothing waits.
 *
 * Storage (mixed precision, cl/nn.h): each operand's clp_buf.dt says how its elements are stored,
 * independently: A and B in fp32, bf16 or fp16 (any mix), C in fp32, bf16 or fp16. Offsets,
 * leading dimensions and strides count elements of the operand's own type. Products and sums are
 * fp32 (no half arithmetic); a 16-bit C is computed in fp32 and rounded once, when stored
 * (beta != 0 reads it through the same storage: C = round(alpha op(A) op(B) + beta C)).
 *   packed   converts A and B while packing them into fp32 strips (a 16-bit A is then always
 *            packed); a 16-bit C: the product goes to an fp32 scratch C (CLP_SCRATCH_GEMM_C),
 *            then one pass adds beta C and stores it rounded (kernels/gemm_store.cl), since
 *            the packed kernel accumulates into C across K blocks
 *   tiled    converts on load into local memory and rounds C on its single store
 *   direct   converts on load and rounds C on its single store (K up to KMAX; beyond, as packed)
 *   clblast  converts 16-bit A and B to fp32 scratch first (CLBlast's half routines need
 *            cl_khr_fp16 and compute in half), a 16-bit C as packed
 * All-fp32 calls run exactly the kernels and defines they always did. */
#ifndef CLP_CL_GEMM_H
#define CLP_CL_GEMM_H

#include "cl/base/half.h"
#include "cl/runtime.h"

typedef enum clp_trans { CLP_N = 0, CLP_T = 1 } clp_trans;

typedef enum clp_gemm_backend {
	CLP_GEMM_AUTO = 0,
	CLP_GEMM_PACKED,
	CLP_GEMM_TILED,
	CLP_GEMM_CLBLAST,
	CLP_GEMM_DIRECT,
	CLP_GEMM_BACKEND_COUNT
} clp_gemm_backend;

const char *clp_gemm_backend_name(clp_gemm_backend b);
clp_status clp_gemm_backend_parse(const char *name, clp_gemm_backend *out);

/* Tuned parameters: which backend, the defines of the engine's kernel, CLBlast overrides. */
#define CLP_GEMM_MAX_PARAMS 24
typedef struct clp_gemm_param {
	char name[24];
	long value;
} clp_gemm_param;

typedef struct clp_gemm_tuning {
	clp_gemm_backend backend;
	char source[128];  /* where it came from: "tuned file X", "table entry 'avx2'" */
	int nparams;       /* defines for the engine kernel of that backend */
	clp_gemm_param params[CLP_GEMM_MAX_PARAMS];
	int nclblast;      /* CLBlast Xgemm parameter overrides (empty: CLBlast's own) */
	clp_gemm_param clblast[CLP_GEMM_MAX_PARAMS];
	int nclblast_direct; /* CLBlast XgemmDirect overrides */
	clp_gemm_param clblast_direct[CLP_GEMM_MAX_PARAMS];
} clp_gemm_tuning;

/* The tuning the context uses (looked up on first use). */
clp_status clp_cl_gemm_tuning(clp_cl_ctx *ctx, const clp_gemm_tuning **out);
/* Replace it (benchmarks, tuner, tests). The tuning's CLBlast overrides are applied here. */
clp_status clp_cl_gemm_set_tuning(clp_cl_ctx *ctx, const clp_gemm_tuning *t);
/* Look up the table for a device without a context (also used by `clpipe tune`). */
clp_status clp_gemm_tuning_lookup(const clp_cl_devinfo *dev, clp_gemm_backend want,
				  clp_gemm_tuning *out);
/* Path of the per-device tuned file written by `clpipe tune gemm`. */
void clp_gemm_tuning_path(const clp_cl_devinfo *dev, char *path, size_t n);

clp_status clp_cl_gemm(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m, size_t n, size_t k,
		       float alpha, clp_buf a, size_t lda, clp_buf b, size_t ldb, float beta,
		       clp_buf c, size_t ldc);

/* batch products; operand i starts at off + i * stride (elements). */
clp_status clp_cl_gemm_batched(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m, size_t n,
			       size_t k, float alpha, clp_buf a, size_t lda, size_t stride_a,
			       clp_buf b, size_t ldb, size_t stride_b, float beta, clp_buf c,
			       size_t ldc, size_t stride_c, size_t batch);

/* The same with A and B stored as ab_type (CLP_F32, CLP_BF16 or CLP_F16): a.dt and b.dt are
 * set to it (the first slice's interface; C keeps c.dt). */
clp_status clp_cl_gemm_batched_ab(clp_cl_ctx *ctx, clp_dtype ab_type, clp_trans ta, clp_trans tb,
				  size_t m, size_t n, size_t k, float alpha, clp_buf a, size_t lda,
				  size_t stride_a, clp_buf b, size_t ldb, size_t stride_b,
				  float beta, clp_buf c, size_t ldc, size_t stride_c, size_t batch);
clp_status clp_cl_gemm_ab(clp_cl_ctx *ctx, clp_dtype ab_type, clp_trans ta, clp_trans tb,
			  size_t m, size_t n, size_t k, float alpha, clp_buf a, size_t lda,
			  clp_buf b, size_t ldb, float beta, clp_buf c, size_t ldc);

/* C = alpha op(A) op(B) + beta C, then C += bias (n values, C's storage, one per column), for
 * a linear layer's forward. The packed and direct backends add the bias in the store when they
 * write C themselves (fp32, or a 16-bit C in one K block or chunk) and bias.dt == c.dt:
 * *fused = 1, and C is bitwise what the product then a separate clp_nn_bias_forward give (the
 * product's value rounded to C's storage, plus the bias, rounded). Otherwise (other backends, k = 0, alpha = 0, a 16-bit C
 * through scratch) only the product runs, *fused = 0, and the caller adds the bias. */
clp_status clp_cl_gemm_bias(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m, size_t n,
			    size_t k, float alpha, clp_buf a, size_t lda, clp_buf b, size_t ldb,
			    float beta, clp_buf c, size_t ldc, clp_buf bias, int *fused);

/* The same, then act = gelu(C) (kind: clp_nn_gelu's value; act dense like C, C's storage) in
 * the packed backend's store, both or neither (*fused): C is bitwise the product then
 * clp_nn_bias_forward, act bitwise clp_nn_gelu_forward's float8 path on that C. It needs
 * ldc = n, n and the strip width multiples of 8; whether that is clp_nn_bias_gelu_forward's
 * path for every element is the caller's to know (cl/nn.h clp_nn_linear_gelu). */
clp_status clp_cl_gemm_bias_gelu(clp_cl_ctx *ctx, clp_trans ta, clp_trans tb, size_t m,
				 size_t n, size_t k, float alpha, clp_buf a, size_t lda, clp_buf b,
				 size_t ldb, float beta, clp_buf c, size_t ldc, clp_buf bias,
				 clp_buf act, int kind, int *fused);

/* Kept packs. The packed backend packs op(B) into strips before each product. When B is read
 * from a held buffer, its strips are kept (one set per way the buffer is read: offset, leading
 * dimension, transpose, size, storage and strip shape) and later products that read B the same
 * way use them without packing again, until the buffer is marked stale: its next reads repack
 * (into the same memory). Packing is the same kernel on the same data either way, so results
 * are bitwise those of packing every time. The holder promises to call clp_cl_gemm_stale before
 * or right after it writes the buffer (engine/model/stage.c: the weights, after each update and
 * at the start of each step) and clp_cl_gemm_release before it frees it. Other backends pack
 * nothing and ignore this. CLPIPE_GEMM_KEEP_PACKS=0 keeps nothing; CLPIPE_GEMM_KEEP_PACKS_MB
 * caps the kept memory (default a quarter of the device's global memory; past it, products
 * pack into scratch as before). */
clp_status clp_cl_gemm_hold(clp_cl_ctx *ctx, cl_mem mem);
void clp_cl_gemm_stale(clp_cl_ctx *ctx, cl_mem mem);
void clp_cl_gemm_release(clp_cl_ctx *ctx, cl_mem mem);
int clp_cl_gemm_held(const clp_cl_ctx *ctx, cl_mem mem); /* 1 when held */
typedef struct clp_gemm_cache_stats {
	long packs;   /* packs made into kept memory */
	long hits;    /* packs skipped: kept strips reused */
	long repacks; /* kept strips packed again after clp_cl_gemm_stale */
	int entries;  /* kept sets of strips */
	size_t bytes; /* their memory */
	size_t peak;  /* the most bytes kept at once, since clp_cl_gemm_cache_reset_peak */
} clp_gemm_cache_stats;
void clp_cl_gemm_cache_stats(const clp_cl_ctx *ctx, clp_gemm_cache_stats *out);
void clp_cl_gemm_cache_reset_peak(clp_cl_ctx *ctx); /* peak := bytes kept now */

/* What the memory model of the kept packs (engine/model/stage_mem.c) needs of tuning t: the
 * strip width NR (0 for a backend that packs nothing), the K chunk when A is packed (KCH) and
 * DIRECT_A; one kept set per K chunk of op(B) (n columns) takes ceil(n / NR) NR kk 4 + 4 bytes.
 * clp_cl_gemm_keep_limit: the most the kept packs may take on ctx (0 when
 * CLPIPE_GEMM_KEEP_PACKS=0 keeps none, else CLPIPE_GEMM_KEEP_PACKS_MB or a quarter of the
 * device's memory). */
void clp_gemm_pack_shape(const clp_gemm_tuning *t, int *nr, int *kch, int *direct_a);
size_t clp_cl_gemm_keep_limit(const clp_cl_ctx *ctx);
size_t clp_gemm_keep_limit(const clp_cl_devinfo *dev); /* the same without a context */

/* Check the arguments the way every backend needs them (sizes, leading dimensions). */
clp_status clp_gemm_check_args(clp_trans ta, clp_trans tb, size_t m, size_t n, size_t k,
			       size_t lda, size_t ldb, size_t ldc);

#endif
