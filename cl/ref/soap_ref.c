/* SOAP's double reference (soap_ref.h): straightforward loops, no blocking. */
#include "cl/ref/soap_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int clp_ref_soap_qr(const double *a, size_t d, double *q)
{
	double *w = malloc(d * d * sizeof(*w)), *tau = malloc(d * sizeof(*tau));

	if (!w || !tau) {
		free(w), free(tau);
		return -1;
	}
	memcpy(w, a, d * d * sizeof(*w));
	for (size_t k = 0; k < d; k++) {
		double alpha = w[k * d + k], ss = 0, nrm, beta;

		for (size_t i = k + 1; i < d; i++)
			ss += w[i * d + k] * w[i * d + k];
		tau[k] = 0;
		if (ss == 0 && isfinite(alpha))
			continue;
		nrm = sqrt(alpha * alpha + ss);
		beta = alpha >= 0 ? -nrm : nrm;
		for (size_t i = k + 1; i < d; i++)
			w[i * d + k] /= alpha - beta;
		w[k * d + k] = beta;
		tau[k] = (beta - alpha) / beta;
		for (size_t j = k + 1; j < d; j++) {
			double s = w[k * d + j];

			for (size_t i = k + 1; i < d; i++)
				s += w[i * d + k] * w[i * d + j];
			s *= tau[k];
			w[k * d + j] -= s;
			for (size_t i = k + 1; i < d; i++)
				w[i * d + j] -= w[i * d + k] * s;
		}
	}
	for (size_t i = 0; i < d * d; i++)
		q[i] = i % (d + 1) == 0 ? 1 : 0;
	for (size_t k = d; k-- > 0;) {
		if (tau[k] == 0)
			continue;
		for (size_t j = k; j < d; j++) {
			double s = q[k * d + j];

			for (size_t i = k + 1; i < d; i++)
				s += w[i * d + k] * q[i * d + j];
			s *= tau[k];
			q[k * d + j] -= s;
			for (size_t i = k + 1; i < d; i++)
				q[i * d + j] -= w[i * d + k] * s;
		}
	}
	free(w), free(tau);
	return 0;
}

static int before(double a, size_t ia, double b, size_t ib)
{
	int na = isnan(a), nb = isnan(b);

	if (na != nb)
		return nb;
	if (!na && a != b)
		return a > b;
	return ia < ib;
}

void clp_ref_soap_argsort(const double *e, size_t d, unsigned *perm)
{
	for (size_t i = 0; i < d; i++) {
		size_t rank = 0;

		for (size_t j = 0; j < d; j++)
			rank += before(e[j], j, e[i], i);
		perm[rank] = (unsigned)i;
	}
}

int clp_ref_soap_permute(double *v, size_t rows, size_t cols, int axis, const unsigned *perm)
{
	double *t = malloc(rows * cols * sizeof(*t));

	if (!t)
		return -1;
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < cols; c++)
			t[r * cols + c] = axis ? v[r * cols + perm[c]] : v[perm[r] * cols + c];
	memcpy(v, t, rows * cols * sizeof(*t));
	free(t);
	return 0;
}

int clp_ref_soap_basis_next(const double *a, const double *q, size_t d, double *q_next,
			    unsigned *perm)
{
	double *aq = malloc(d * d * sizeof(*aq)), *pi = malloc(d * d * sizeof(*pi));
	double *e = calloc(d ? d : 1, sizeof(*e));
	int rc = -1;

	if (!aq || !pi || !e)
		goto out;
	for (size_t j = 0; j < d; j++)
		e[j] = 0;
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < d; j++) {
			double s = 0;

			for (size_t k = 0; k < d; k++)
				s += a[i * d + k] * q[k * d + j];
			aq[i * d + j] = s;
		}
	for (size_t j = 0; j < d; j++) {
		double s = 0;

		for (size_t i = 0; i < d; i++)
			s += q[i * d + j] * aq[i * d + j];
		e[j] = s;
	}
	clp_ref_soap_argsort(e, d, perm);
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < d; j++)
			pi[i * d + j] = aq[i * d + perm[j]];
	rc = clp_ref_soap_qr(pi, d, q_next);
out:
	free(aq), free(pi), free(e);
	return rc;
}

/* out = ql^T p qr (fwd) or ql p qr^T (back), rows x cols */
static void project(double *out, const double *p, const double *ql, const double *qr,
		    size_t rows, size_t cols, int back, double *t)
{
	for (size_t i = 0; i < rows; i++)
		for (size_t j = 0; j < cols; j++) {
			double s = 0;

			for (size_t k = 0; k < rows; k++)
				s += (back ? ql[i * rows + k] : ql[k * rows + i]) * p[k * cols + j];
			t[i * cols + j] = s;
		}
	for (size_t i = 0; i < rows; i++)
		for (size_t j = 0; j < cols; j++) {
			double s = 0;

			for (size_t k = 0; k < cols; k++)
				s += t[i * cols + k] * (back ? qr[j * cols + k] : qr[k * cols + j]);
			out[i * cols + j] = s;
		}
}

static void stats(double *l, double *r, const double *x, size_t rows, size_t cols, double sb)
{
	for (size_t i = 0; i < rows; i++)
		for (size_t j = 0; j < rows; j++) {
			double s = 0;

			for (size_t k = 0; k < cols; k++)
				s += x[i * cols + k] * x[j * cols + k];
			l[i * rows + j] = sb * l[i * rows + j] + (1 - sb) * s;
		}
	for (size_t i = 0; i < cols; i++)
		for (size_t j = 0; j < cols; j++) {
			double s = 0;

			for (size_t k = 0; k < rows; k++)
				s += x[k * cols + i] * x[k * cols + j];
			r[i * cols + j] = sb * r[i * cols + j] + (1 - sb) * s;
		}
}

static int refresh(double *a, double *q, double *v, size_t rows, size_t cols, size_t d,
		   int axis)
{
	double *qn = malloc(d * d * sizeof(*qn));
	unsigned *perm = malloc(d * sizeof(*perm));
	int rc = -1;

	if (!qn || !perm)
		goto out;
	if (clp_ref_soap_basis_next(a, q, d, qn, perm))
		goto out;
	if (v && clp_ref_soap_permute(v, rows, cols, axis, perm))
		goto out;
	memcpy(q, qn, d * d * sizeof(*q));
	rc = 0;
out:
	free(qn), free(perm);
	return rc;
}

int clp_ref_soap_step(double *p, double *m, double *v, double *l, double *r, double *ql,
		      double *qr, const float *g, size_t rows, size_t cols,
		      const clp_soap_hp *hp, double gscale, int skip)
{
	const size_t n = rows * cols, d = rows > cols ? rows : cols;
	double *x = malloc(n * sizeof(*x)), *gp = malloc(n * sizeof(*gp));
	double *t = malloc(n * sizeof(*t));
	int rc = -1;

	if (!x || !gp || !t)
		goto out;
	for (size_t i = 0; i < n; i++)
		x[i] = skip ? 0 : (double)g[i] * gscale;
	(void)d;
	if (hp->t == 1) {
		stats(l, r, x, rows, cols, hp->shampoo_beta);
		for (size_t i = 0; i < rows * rows; i++)
			ql[i] = i % (rows + 1) == 0;
		for (size_t i = 0; i < cols * cols; i++)
			qr[i] = i % (cols + 1) == 0;
		for (int it = 0; it < hp->init_iters; it++)
			if (refresh(l, ql, NULL, rows, cols, rows, 0) ||
			    refresh(r, qr, NULL, rows, cols, cols, 1))
				goto out;
		rc = 0;
		goto out;
	}
	if (!skip) {
		const long s = hp->t - 1;
		double step = hp->lr;

		if (hp->correct_bias)
			step *= sqrt(1 - pow(hp->beta2, (double)s)) / (1 - pow(hp->beta1, (double)s));
		project(gp, x, ql, qr, rows, cols, 0, t);
		for (size_t i = 0; i < n; i++) {
			m[i] += (1 - (double)hp->beta1) * (x[i] - m[i]);
			v[i] += (1 - (double)hp->beta2) * (gp[i] * gp[i] - v[i]);
		}
		project(gp, m, ql, qr, rows, cols, 0, t);
		for (size_t i = 0; i < n; i++)
			gp[i] /= sqrt(v[i]) + hp->eps;
		project(gp, gp, ql, qr, rows, cols, 1, t);
		for (size_t i = 0; i < n; i++)
			p[i] = (p[i] - step * gp[i]) * (1 - (double)hp->lr * hp->weight_decay);
	}
	stats(l, r, x, rows, cols, hp->shampoo_beta);
	if (hp->refresh && (refresh(l, ql, v, rows, cols, rows, 0) ||
			    refresh(r, qr, v, rows, cols, cols, 1)))
		goto out;
	rc = 0;
out:
	free(x), free(gp), free(t);
	return rc;
}
