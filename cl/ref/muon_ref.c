/* Double-precision reference of Muon (muon_ref.h). */
#include "cl/ref/muon_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double lerp(double s, double e, double w)
{
	return s + w * (e - s);
}

/* c (m x n) = a (m x k) b (k x n) */
static void mm(double *c, const double *a, const double *b, size_t m, size_t k, size_t n)
{
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0;

			for (size_t l = 0; l < k; l++)
				s += a[i * k + l] * b[l * n + j];
			c[i * n + j] = s;
		}
}

void clp_ref_muon_orthogonalize(double *x, size_t rows, size_t cols, int steps)
{
	const int tall = rows > cols;
	const size_t m = tall ? cols : rows, n = tall ? rows : cols;
	double *y = calloc(m * n + 1, sizeof(*y)), *yt = calloc(m * n + 1, sizeof(*yt));
	double *a = calloc(m * m + 1, sizeof(*a)), *b = calloc(m * m + 1, sizeof(*b));
	double *aa = calloc(m * m + 1, sizeof(*aa)), *by = calloc(m * n + 1, sizeof(*by));
	double nrm = 0;

	if (!y || !yt || !a || !b || !aa || !by)
		goto out;
	for (size_t i = 0; i < rows; i++) /* y = x, or x^T when tall (m x n) */
		for (size_t j = 0; j < cols; j++)
			y[tall ? j * n + i : i * n + j] = x[i * cols + j];
	for (size_t i = 0; i < m * n; i++)
		nrm += y[i] * y[i];
	nrm = fmax(sqrt(nrm), CLP_MUON_EPS);
	for (size_t i = 0; i < m * n; i++)
		y[i] /= nrm;
	for (int it = 0; it < steps; it++) {
		for (size_t i = 0; i < m; i++) /* yt = y^T (n x m) */
			for (size_t j = 0; j < n; j++)
				yt[j * m + i] = y[i * n + j];
		mm(a, y, yt, m, n, m);
		mm(aa, a, a, m, m, m);
		for (size_t i = 0; i < m * m; i++)
			b[i] = CLP_MUON_B * a[i] + CLP_MUON_C * aa[i];
		mm(by, b, y, m, m, n);
		for (size_t i = 0; i < m * n; i++)
			y[i] = CLP_MUON_A * y[i] + by[i];
	}
	for (size_t i = 0; i < rows; i++)
		for (size_t j = 0; j < cols; j++)
			x[i * cols + j] = y[tall ? j * n + i : i * n + j];
out:
	free(y), free(yt), free(a), free(b), free(aa), free(by);
}

void clp_ref_muon_step(double *p, double *buf, const float *g, size_t rows, size_t cols,
		       const clp_muon_hp *hp, double gscale)
{
	const size_t n = rows * cols;
	double *u = malloc((n ? n : 1) * sizeof(*u));
	const double alr = clp_muon_scaled_lr(hp->lr, rows, cols);
	const double decay = 1.0 - (double)hp->lr * hp->weight_decay;

	if (!u)
		return;
	for (size_t i = 0; i < n; i++) {
		const double gr = g[i] * gscale;

		buf[i] = lerp(buf[i], gr, 1.0 - hp->momentum);
		u[i] = hp->nesterov ? lerp(gr, buf[i], hp->momentum) : buf[i];
	}
	clp_ref_muon_orthogonalize(u, rows, cols, hp->ns_steps);
	for (size_t i = 0; i < n; i++)
		p[i] = p[i] * decay - alr * u[i];
	free(u);
}

void clp_ref_muon_delayed_step(double *p, double *buf, double *d, const float *g, size_t rows,
			       size_t cols, const clp_muon_hp *hp, double gscale, int skip)
{
	const size_t n = rows * cols;
	const double alr = clp_muon_scaled_lr(hp->lr, rows, cols);
	const double decay = 1.0 - (double)hp->lr * hp->weight_decay;

	if (skip) {
		memset(d, 0, n * sizeof(*d));
		return;
	}
	clp_ref_muon_orthogonalize(d, rows, cols, hp->ns_steps);
	for (size_t i = 0; i < n; i++) {
		const double gr = g[i] * gscale;

		p[i] = p[i] * decay - alr * d[i];
		buf[i] = lerp(buf[i], gr, 1.0 - hp->momentum);
		d[i] = hp->nesterov ? lerp(gr, buf[i], hp->momentum) : buf[i];
	}
}
