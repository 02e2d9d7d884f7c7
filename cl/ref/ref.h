/* Plain C references for the OpenCL kernels, used by tests and benchmarks. They favour clarity
 * and accuracy (double accumulation) over speed. */
#ifndef CLP_REF_H
#define CLP_REF_H

#include <stddef.h>

/* C = alpha * op(A) op(B) + beta * C, row-major; beta == 0 ignores C's old contents. */
void clp_ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
		  size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);

double clp_ref_sum(const float *x, size_t n);   /* exact-ish: double, pairwise */
double clp_ref_sumsq(const float *x, size_t n);

#endif
