/* Reference GEMM and reductions in double precision. */
#include "cl/ref/ref.h"

void clp_ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
		  size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			double acc = 0;

			for (size_t p = 0; p < k; p++) {
				double x = ta ? a[p * lda + i] : a[i * lda + p];
				double y = tb ? b[j * ldb + p] : b[p * ldb + j];

				acc += x * y;
			}
			acc *= alpha;
			if (beta != 0.0f)
				acc += (double)beta * c[i * ldc + j];
			c[i * ldc + j] = (float)acc;
		}
}

static double pairwise(const float *x, size_t n, int square)
{
	if (n <= 64) {
		double s = 0;

		for (size_t i = 0; i < n; i++)
			s += square ? (double)x[i] * x[i] : x[i];
		return s;
	}
	return pairwise(x, n / 2, square) + pairwise(x + n / 2, n - n / 2, square);
}

double clp_ref_sum(const float *x, size_t n)
{
	return pairwise(x, n, 0);
}

double clp_ref_sumsq(const float *x, size_t n)
{
	return pairwise(x, n, 1);
}
