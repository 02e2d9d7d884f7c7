/* Double-precision references of the K-FAC operations (kfac_ref.h): textbook loops. */
#include "cl/ref/kfac_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void clp_ref_kfac_factor(double *F, const float *x, size_t ldx, size_t rows, size_t d,
			 double alpha, double beta)
{
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < d; j++) {
			double acc = 0;

			for (size_t r = 0; r < rows; r++)
				acc += (double)x[r * ldx + i] * x[r * ldx + j];
			F[i * d + j] = (beta != 0 ? beta * F[i * d + j] : 0) + alpha * acc;
		}
}

static double trace(const double *F, size_t d)
{
	double t = 0;

	for (size_t i = 0; i < d; i++)
		t += F[i * d + i];
	return t;
}

int clp_ref_kfac_damping(double out[3], const double *A, size_t dA, const double *const *B,
			 const size_t *dB, int nb, double lambda)
{
	double trA = trace(A, dA), trB = 0, dimB = 0, pi;

	for (int i = 0; i < nb; i++) {
		trB += trace(B[i], dB[i]);
		dimB += (double)dB[i];
	}
	out[0] = out[1] = out[2] = 0;
	if (!isfinite(trA) || !isfinite(trB))
		return 2;
	if (!(trA > 0) || !(trB > 0))
		return 1;
	pi = sqrt((trA / (double)dA) / (trB / dimB));
	out[0] = fmax(sqrt(lambda) * pi, 1e-7);
	out[1] = fmax(sqrt(lambda) / pi, 1e-7);
	out[2] = pi;
	return 0;
}

int clp_ref_cholesky(double *W, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		double d = W[j * n + j];

		for (size_t k = 0; k < j; k++)
			d -= W[j * n + k] * W[j * n + k];
		if (!(d > 0))
			return (int)j + 1;
		d = sqrt(d);
		W[j * n + j] = d;
		for (size_t i = j + 1; i < n; i++) {
			double s = W[i * n + j];

			for (size_t k = 0; k < j; k++)
				s -= W[i * n + k] * W[j * n + k];
			W[i * n + j] = s / d;
		}
		for (size_t k = j + 1; k < n; k++)
			W[j * n + k] = 0;
	}
	return 0;
}

void clp_ref_trtri(double *W, size_t n)
{
	/* column j of X = L^-1 by forward substitution, into a separate matrix */
	double *X = calloc(n * n + 1, sizeof(double));

	if (!X)
		return;
	for (size_t j = 0; j < n; j++) {
		X[j * n + j] = 1.0 / W[j * n + j];
		for (size_t i = j + 1; i < n; i++) {
			double s = 0;

			for (size_t k = j; k < i; k++)
				s += W[i * n + k] * X[k * n + j];
			X[i * n + j] = -s / W[i * n + i];
		}
	}
	memcpy(W, X, n * n * sizeof(double));
	free(X);
}

int clp_ref_spd_inverse(double *inv, const double *W, size_t n)
{
	double *L = malloc(n * n * sizeof(double) + 1);
	int info;

	if (!L)
		return -1;
	memcpy(L, W, n * n * sizeof(double));
	info = clp_ref_cholesky(L, n);
	if (!info) {
		clp_ref_trtri(L, n);
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < n; j++) {
				double s = 0;

				for (size_t k = i > j ? i : j; k < n; k++)
					s += L[k * n + i] * L[k * n + j];
				inv[i * n + j] = s;
			}
	}
	free(L);
	return info;
}

void clp_ref_kfac_precondition(double *P, const double *G, size_t ldg, const double *Binv,
			       const double *Ainv, size_t O, size_t I, int in_out)
{
	double *T = malloc(O * I * sizeof(double) + 1);

	if (!T)
		return;
	/* T (O,I) = Binv G, P = T Ainv, G read in its layout */
	for (size_t o = 0; o < O; o++)
		for (size_t i = 0; i < I; i++) {
			double s = 0;

			for (size_t k = 0; k < O; k++)
				s += Binv[o * O + k] * (in_out ? G[i * ldg + k] : G[k * ldg + i]);
			T[o * I + i] = s;
		}
	for (size_t o = 0; o < O; o++)
		for (size_t i = 0; i < I; i++) {
			double s = 0;

			for (size_t k = 0; k < I; k++)
				s += T[o * I + k] * Ainv[k * I + i];
			if (in_out)
				P[i * O + o] = s;
			else
				P[o * I + i] = s;
		}
	free(T);
}
