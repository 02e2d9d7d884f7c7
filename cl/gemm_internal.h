/* Backend entry points behind clp_cl_gemm_batched; arguments already checked. */
#ifndef CLP_CL_GEMM_INTERNAL_H
#define CLP_CL_GEMM_INTERNAL_H

#include "cl/gemm.h"

struct clp_gemm_call {
	clp_trans ta, tb;
	size_t m, n, k;
	float alpha, beta;
	clp_buf a, b, c;
	size_t lda, ldb, ldc;
	size_t sa, sb, sc;
	size_t batch; /* storage types: a.dt, b.dt, c.dt (C fp32 for packed and clblast) */
	clp_buf bias; /* mem NULL: none; else the packed backend's store adds it (clp_cl_gemm_bias) */
	clp_buf act;  /* with bias and gelu >= 0: act = gelu(C) in the store (clp_cl_gemm_bias_gelu) */
	int gelu;     /* -1: none; else the GELU kind (clp_nn_gelu) */
};

/* "#define NAME value\n" for each parameter into buf. */
void clp_gemm_defines(const clp_gemm_tuning *t, char *buf, size_t n);
/* Append to buf the storage types of g's A, B and C that are not fp32 (A_TYPE, B_TYPE, ST_TYPE;
 * all-fp32 adds nothing, so such a call keeps the defines, and the cached program, it had). */
void clp_gemm_type_defines(const struct clp_gemm_call *g, char *buf, size_t n);
long clp_gemm_param_get(const clp_gemm_tuning *t, const char *name, long dflt);

clp_status clp_gemm_packed_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			       const struct clp_gemm_call *g);
/* Whether the packed backend writes g's C itself: fp32, or a 16-bit C computed in one K block
 * (rounded once per element as gemm_store.cl would); else cl/gemm.c goes through scratch. */
int clp_gemm_packed_stores_c(const clp_gemm_tuning *t, const struct clp_gemm_call *g);
/* Whether the packed backend can apply GELU in its store for g (see gemm_packed.cl). */
int clp_gemm_packed_gelu_ok(const clp_gemm_tuning *t, const struct clp_gemm_call *g);
/* Candidates for the packed backend's parameters (see gemm_tune.h). */
int clp_gemm_packed_candidates(const clp_cl_devinfo *dev, unsigned seed, clp_gemm_tuning *out,
			       int max);
clp_status clp_gemm_tiled_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			      const struct clp_gemm_call *g);
clp_status clp_gemm_direct_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
			       const struct clp_gemm_call *g);
/* Whether the direct backend writes g's C itself (fp32, or K in one chunk), as packed's. */
int clp_gemm_direct_stores_c(const clp_gemm_tuning *t, const struct clp_gemm_call *g);
clp_status clp_gemm_clblast_run(clp_cl_ctx *ctx, const clp_gemm_tuning *t,
				const struct clp_gemm_call *g);
clp_status clp_gemm_clblast_apply(clp_cl_ctx *ctx, const clp_gemm_tuning *t);

/* Kept packs (cl/gemm_cache.c): what a packing launch reads. */
struct clp_gemm_pack_key {
	cl_kernel kernel; /* the packing kernel: its build fixes strip shape and storage */
	cl_mem mem;
	size_t off, ld, stride, batch;
	int trans;
	size_t rows, K;
};
/* The kept strips for key (bytes of them) in *packed: *valid 1 when they hold the pack, 0 when
 * the caller must pack into them now (a new or stale entry). *packed NULL: mem is not held or
 * the cap is reached; pack into scratch. */
clp_status clp_gemm_cache_find(clp_cl_ctx *ctx, const struct clp_gemm_pack_key *key,
			       size_t bytes, cl_mem *packed, int *valid);
void clp_gemm_cache_free(clp_cl_ctx *ctx);

#endif
