/* The op table of clpipe check and the helpers its case functions share (check_util.c). */
#ifndef CLP_CL_CHECK_INTERNAL_H
#define CLP_CL_CHECK_INTERNAL_H

#include <stdint.h>

#include "cl/check/check.h"
#include "cl/gemm.h"

/* shape flags */
#define CK_QUICK 1u    /* in the --quick set */
#define CK_FD 2u       /* backward against finite differences (small shapes only) */
#define CK_F32ONLY 4u  /* fp32 storage only */
#define CK_S16ONLY 8u  /* 16-bit storage only */
#define CK_GPUGEOM_ON_GPU 16u /* the GPU geometry only where it is the device's own shape: a
			       * GPU-shape program the CPU runtimes compile for minutes (PoCL:
			       * ~170 s at hd 128, its head-dim loops written out) for a shape
			       * they never run, the same source checked there at hd <= 64 */

#define CK_MAXD 6
typedef struct ck_shape {
	size_t d[CK_MAXD];
	unsigned flags;
} ck_shape;

/* elementwise tolerance atol + rtol |ref| + ulps units in the last place of the storage type */
typedef struct ck_tol {
	double atol, rtol, ulps;
} ck_tol;
/* finite differences: RMS(device - fd) <= rel RMS(device) + abs */
typedef struct ck_fdtol {
	double rel, abs;
} ck_fdtol;

/* storage type bits */
#define CK_DT_F32 (1u << CLP_F32)
#define CK_DT_ALL ((1u << CLP_F32) | (1u << CLP_BF16) | (1u << CLP_F16))
#define CK_DT_16 ((1u << CLP_BF16) | (1u << CLP_F16))
/* geometry bits: the op runs in both kernel shapes (forced through clp_nn_set_shape) */
#define CK_GEOM_BOTH 1u

struct ck_env;
struct ck_case;

typedef struct ck_op {
	const char *name;
	const char *dims;               /* names of d[], comma-separated: "N,C" */
	const char *const *variants;    /* NULL: one, shown as "-" */
	int nvariants;
	unsigned geoms, dtypes;
	ck_tol out[3];                  /* value outputs, per storage type (index clp_dtype) */
	ck_tol stat;                    /* fp32 statistics (mean, rstd, lse, losses) */
	ck_tol grad;                    /* fp32 gradients */
	ck_fdtol fd[3];                 /* device backward vs finite differences, per storage */
	const char *why;                /* the reason for these tolerances */
	clp_status (*run)(struct ck_env *e, const struct ck_case *c);
	double (*flops)(const size_t *d, int variant);
	double (*bytes)(const size_t *d, int variant, clp_dtype dt);
} ck_op;

typedef struct ck_case {
	const ck_op *op;
	int variant;
	clp_nn_shape geom;
	clp_dtype dt;
	const size_t *d;
	unsigned flags;
	uint64_t seed;
} ck_case;

#define CK_MAXMEM 24
#define CK_MAXHOST 48
typedef struct ck_env {
	clp_cl_ctx *ctx;
	const clp_check_opts *opts;
	clp_check_summary *sum;
	const ck_case *c;
	uint64_t rng;
	cl_mem mem[CK_MAXMEM];
	int nmem;
	void *host[CK_MAXHOST];
	int nhost;
	char dtype[24];   /* the case's storage name (a GEMM sets its operand types) */
	char extra[32];   /* appended to the sizes ("NT", "fused padded") */
	int case_failed;
	clp_gemm_tuning gemm_saved; /* the context's GEMM tuning before the first GEMM case */
	int gemm_backend;           /* the backend set now (0: the saved tuning is in place) */
} ck_env;

/* Element offset of every device tensor: odd, so 16-bit offsets and unaligned starts are
 * exercised (tests/nn/nn_st.h's TS_OFF). */
#define CK_OFF 3

/* host memory freed at the end of the case; NULL (and an error set) when out of memory */
void *ck_alloc(ck_env *e, size_t bytes);
float *ck_rand(ck_env *e, size_t n, float lo, float hi); /* uniform [lo, hi) */
double *ck_dbl(ck_env *e, const float *x, size_t n);     /* x as doubles (NULL x: zeros) */
uint64_t ck_next(ck_env *e);
/* round x in place to what a dt tensor holds */
void ck_round(clp_dtype dt, float *x, size_t n);
/* a device tensor of n elements of type dt holding x (NULL: NaNs), at element CK_OFF */
clp_status ck_buf(ck_env *e, const float *x, size_t n, clp_dtype dt, clp_buf *out);
clp_status ck_buf_i32(ck_env *e, const int32_t *x, size_t n, clp_buf *out);
clp_status ck_get(ck_env *e, clp_buf b, size_t n, float *dst);
/* Compare got with ref: one line. ulps count units of storage dt. Applies the fault
 * injection of opts->inject. Returns 1 when it passed. */
int ck_compare(ck_env *e, const char *what, clp_dtype dt, float *got, const double *ref,
	       size_t n, ck_tol t);
/* the same with an elementwise tolerance tol[i] */
int ck_compare_tol(ck_env *e, const char *what, float *got, const double *ref, const double *tol,
		   size_t n);
/* the normalised error ||got - ref|| / ||ref|| against limit (the K-FAC inverses) */
int ck_compare_norm(ck_env *e, const char *what, float *got, const double *ref, size_t n,
		    double limit);
/* the line of a case that could not run: s (CLP_ERR_UNSUPPORTED: skipped, else failed) with
 * the library's message */
void ck_error_line(ck_env *e, clp_status s);
/* Central differences (step 1e-3) of loss() with respect to each of x[0..n) against the device
 * gradient dev[i] (already without its starting value): one line. */
typedef double (*ck_loss_fn)(void *ud);
int ck_fd(ck_env *e, const char *what, float *x, size_t n, const double *dev, ck_loss_fn loss,
	  void *ud, ck_fdtol t);
double ck_dot(const float *g, const double *y, size_t n); /* sum g_i y_i */
/* a random SPD matrix X^T X / (n + 5) + shift I (X (n + 5, n) uniform), rounded to float: f
 * holds the floats, the result the same values as doubles (tests/kfac's random_spd) */
double *ck_spd(ck_env *e, size_t n, double shift, float *f);

/* a NULL from ck_alloc / ck_rand / ck_dbl: its error is already set */
#define CK_NEED(p)                                                                                 \
	do {                                                                                       \
		if (!(p))                                                                          \
			return CLP_ERR_NOMEM;                                                      \
	} while (0)

/* case functions (check_gemm.c, check_nn.c, check_attn.c, check_misc.c,
 * check_more.c) */
clp_status ck_run_gemm(ck_env *e, const ck_case *c);
clp_status ck_run_norm(ck_env *e, const ck_case *c);
clp_status ck_run_gelu(ck_env *e, const ck_case *c);
clp_status ck_run_bias_gelu(ck_env *e, const ck_case *c); /* check_fused.c */
clp_status ck_run_residual_layernorm(ck_env *e, const ck_case *c);
clp_status ck_run_swiglu(ck_env *e, const ck_case *c);
clp_status ck_run_bias(ck_env *e, const ck_case *c);
clp_status ck_run_embed(ck_env *e, const ck_case *c);
clp_status ck_run_rope(ck_env *e, const ck_case *c);
clp_status ck_run_attention(ck_env *e, const ck_case *c);
clp_status ck_run_xent(ck_env *e, const ck_case *c);
clp_status ck_run_adamw(ck_env *e, const ck_case *c);
clp_status ck_run_kfac_factor(ck_env *e, const ck_case *c);
clp_status ck_run_kfac_inverse(ck_env *e, const ck_case *c);
clp_status ck_run_kfac_precondition(ck_env *e, const ck_case *c);
clp_status ck_run_residual(ck_env *e, const ck_case *c);
clp_status ck_run_blas1(ck_env *e, const ck_case *c);
clp_status ck_run_reduce(ck_env *e, const ck_case *c);
clp_status ck_run_dropout(ck_env *e, const ck_case *c);
clp_status ck_run_rng(ck_env *e, const ck_case *c);
clp_status ck_run_convert(ck_env *e, const ck_case *c);
clp_status ck_run_grad_stats(ck_env *e, const ck_case *c);
clp_status ck_run_kfac_damping(ck_env *e, const ck_case *c);
clp_status ck_run_kfac_sgd(ck_env *e, const ck_case *c);

/* puts back the GEMM tuning the run found (check_gemm.c) */
clp_status ck_gemm_restore(ck_env *e);

#endif
