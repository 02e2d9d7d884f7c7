/* Double-precision reference of Shampoo (shampoo_ref.h). */
#include "cl/ref/shampoo_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Cyclic Jacobi: a (n x n, symmetric) into eigenvalues w and eigenvectors v (columns). */
static void jacobi(double *a, size_t n, double *w, double *v)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			v[i * n + j] = i == j;
	for (int sweep = 0; sweep < 100; sweep++) {
		double off = 0, tot = 0;

		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < n; j++) {
				tot += a[i * n + j] * a[i * n + j];
				if (i != j)
					off += a[i * n + j] * a[i * n + j];
			}
		if (off <= 1e-30 * tot || off == 0)
			break;
		for (size_t pi = 0; pi + 1 < n; pi++)
			for (size_t q = pi + 1; q < n; q++) {
				double apq = a[pi * n + q], th, t, c, s;

				if (apq == 0)
					continue;
				th = (a[q * n + q] - a[pi * n + pi]) / (2 * apq);
				t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1));
				c = 1 / sqrt(t * t + 1), s = t * c;
				for (size_t k = 0; k < n; k++) { /* columns pi, q */
					double akp = a[k * n + pi], akq = a[k * n + q];

					a[k * n + pi] = c * akp - s * akq;
					a[k * n + q] = s * akp + c * akq;
				}
				for (size_t k = 0; k < n; k++) { /* rows pi, q */
					double apk = a[pi * n + k], aqk = a[q * n + k];

					a[pi * n + k] = c * apk - s * aqk;
					a[q * n + k] = s * apk + c * aqk;
				}
				for (size_t k = 0; k < n; k++) {
					double vkp = v[k * n + pi], vkq = v[k * n + q];

					v[k * n + pi] = c * vkp - s * vkq;
					v[k * n + q] = s * vkp + c * vkq;
				}
			}
	}
	for (size_t i = 0; i < n; i++)
		w[i] = a[i * n + i];
}

int clp_ref_shampoo_inv_root(const double *a, size_t n, int p, double ridge, double *out)
{
	double f = 0;

	double *c = malloc(n * n * sizeof(double) + 1), *v = malloc(n * n * sizeof(double) + 1);
	double *w = malloc(n * sizeof(double) + 1);

	if (!c || !v || !w) {
		free(c), free(v), free(w);
		return -1;
	}
	memcpy(c, a, n * n * sizeof(double));
	for (size_t i = 0; i < n * n; i++)
		f += a[i] * a[i];
	for (size_t i = 0; i < n; i++)
		c[i * n + i] += ridge * sqrt(f);
	jacobi(c, n, w, v);
	for (size_t k = 0; k < n; k++)
		w[k] = pow(w[k], -1.0 / p);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0;

			for (size_t k = 0; k < n; k++)
				s += v[i * n + k] * w[k] * v[j * n + k];
			out[i * n + j] = s;
		}
	free(c), free(v), free(w);
	return 0;
}

/* torch.lerp as the kernel computes it */
static double lerp(double s, double e, double w)
{
	return w < 0.5 ? s + w * (e - s) : e - (e - s) * (1.0 - w);
}

int clp_ref_shampoo_step(double *p, double *buf, double *v, double *l, double *r, double *li,
			 double *ri,
			 const float *g, size_t rows, size_t cols, const clp_shampoo_hp *hp,
			 double gscale, double ridge)
{
	const size_t n = rows * cols;
	const int ema = hp->stat_beta > 0.0f && hp->stat_beta < 1.0f;
	const double b = hp->stat_beta;
	double *x = malloc(n * sizeof(double) + 1), *t = malloc(n * sizeof(double) + 1);

	if (!x || !t) {
		free(x), free(t);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = hp->first ? g[i] * gscale : lerp(g[i] * gscale, buf[i], hp->momentum);
	for (size_t i = 0; i < rows; i++)
		for (size_t j = 0; j < rows; j++) {
			double s = 0;

			for (size_t k = 0; k < cols; k++)
				s += x[i * cols + k] * x[j * cols + k];
			l[i * rows + j] = ema ? b * l[i * rows + j] + (1 - b) * s
					      : l[i * rows + j] + s;
		}
	for (size_t i = 0; i < cols; i++)
		for (size_t j = 0; j < cols; j++) {
			double s = 0;

			for (size_t k = 0; k < rows; k++)
				s += x[k * cols + i] * x[k * cols + j];
			r[i * cols + j] = ema ? b * r[i * cols + j] + (1 - b) * s
					      : r[i * cols + j] + s;
		}
	if (hp->refresh && (clp_ref_shampoo_inv_root(l, rows, CLP_SHAMPOO_ROOT, ridge, li) ||
			    clp_ref_shampoo_inv_root(r, cols, CLP_SHAMPOO_ROOT, ridge, ri))) {
		free(x), free(t);
		return -1;
	}
	for (size_t i = 0; i < rows; i++) /* t = li x */
		for (size_t j = 0; j < cols; j++) {
			double s = 0;

			for (size_t k = 0; k < rows; k++)
				s += li[i * rows + k] * x[k * cols + j];
			t[i * cols + j] = s;
		}
	for (size_t i = 0; i < rows; i++) /* u = t ri, into buf */
		for (size_t j = 0; j < cols; j++) {
			double s = 0;

			for (size_t k = 0; k < cols; k++)
				s += t[i * cols + k] * ri[k * cols + j];
			buf[i * cols + j] = s;
		}
	if (hp->graft) {
		const double bc2 = 1.0 - pow((double)hp->beta2, (double)(hp->t > 0 ? hp->t : 1));
		double nu = 0, na = 0;

		for (size_t i = 0; i < n; i++) { /* t = Adam's direction of x */
			v[i] = hp->beta2 * v[i] + (1.0 - hp->beta2) * x[i] * x[i];
			t[i] = x[i] / (sqrt(v[i] / bc2) + hp->eps);
			nu += buf[i] * buf[i], na += t[i] * t[i];
		}
		for (size_t i = 0; i < n; i++)
			buf[i] = nu > 0 ? buf[i] * sqrt(na) / sqrt(nu) : t[i];
	}
	for (size_t i = 0; i < n; i++)
		p[i] = p[i] * (1.0 - (double)hp->lr * hp->weight_decay) - hp->lr * buf[i];
	free(x), free(t);
	return 0;
}
