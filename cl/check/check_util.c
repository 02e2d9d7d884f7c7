/* Helpers of clpipe check's case functions: per-case host and device memory, random inputs,
 * typed uploads and downloads, the elementwise and finite-difference comparisons that make a
 * line, and the fault injection that tests the check itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/check/check_internal.h"

void *ck_alloc(ck_env *e, size_t bytes)
{
	void *p;

	if (e->nhost == CK_MAXHOST) {
		clp_error(CLP_ERR_NOMEM, "check: too many host arrays in one case");
		return NULL;
	}
	p = calloc(bytes ? bytes : 1, 1);
	if (!p) {
		clp_error(CLP_ERR_NOMEM, "check: out of host memory (%zu bytes)", bytes);
		return NULL;
	}
	e->host[e->nhost++] = p;
	return p;
}

uint64_t ck_next(ck_env *e)
{
	uint64_t z = (e->rng += 0x9e3779b97f4a7c15ull); /* splitmix64 */

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

float *ck_rand(ck_env *e, size_t n, float lo, float hi)
{
	float *x = ck_alloc(e, n * sizeof(float));

	for (size_t i = 0; x && i < n; i++)
		x[i] = lo + (hi - lo) * (float)((double)(ck_next(e) >> 11) * 0x1p-53);
	return x;
}

double *ck_dbl(ck_env *e, const float *x, size_t n)
{
	double *d = ck_alloc(e, n * sizeof(double));

	for (size_t i = 0; d && x && i < n; i++)
		d[i] = x[i];
	return d;
}

void ck_round(clp_dtype dt, float *x, size_t n)
{
	for (size_t i = 0; x && i < n && dt != CLP_F32; i++)
		x[i] = clp_dtype_round(dt, x[i]);
}

static clp_status track(ck_env *e, size_t bytes, cl_mem *m)
{
	if (e->nmem == CK_MAXMEM)
		return clp_error(CLP_ERR_NOMEM, "check: too many device buffers in one case");
	CLP_TRY(clp_cl_buffer(e->ctx, bytes, "check", m));
	e->mem[e->nmem++] = *m;
	return CLP_OK;
}

clp_status ck_buf(ck_env *e, const float *x, size_t n, clp_dtype dt, clp_buf *out)
{
	size_t sz = clp_dtype_size(dt), tot = n + CK_OFF;
	unsigned char *h = malloc(tot * sz);
	cl_mem m;
	clp_status s;

	if (!h)
		return clp_error(CLP_ERR_NOMEM, "check: out of host memory");
	memset(h, 0x5a, CK_OFF * sz);
	for (size_t i = 0; i < n; i++) {
		float v = x ? x[i] : NAN;

		if (dt == CLP_F32)
			memcpy(h + (CK_OFF + i) * 4, &v, 4);
		else
			clp_dtype_pack(dt, (uint16_t *)(void *)(h + (CK_OFF + i) * 2), &v, 1);
	}
	s = track(e, tot * sz, &m);
	if (s == CLP_OK)
		s = clp_cl_write(e->ctx, m, 0, tot * sz, h);
	free(h);
	*out = clp_buf_typed(m, CK_OFF, dt);
	return s;
}

clp_status ck_buf_i32(ck_env *e, const int32_t *x, size_t n, clp_buf *out)
{
	cl_mem m;

	CLP_TRY(track(e, (n ? n : 1) * 4, &m));
	*out = clp_buf_at(m, 0);
	return n ? clp_cl_write(e->ctx, m, 0, n * 4, x) : CLP_OK;
}

clp_status ck_get(ck_env *e, clp_buf b, size_t n, float *dst)
{
	size_t sz = clp_dtype_size(b.dt);
	uint16_t *h;
	clp_status s;

	if (!n)
		return CLP_OK;
	if (b.dt == CLP_F32)
		return clp_cl_read(e->ctx, b.mem, b.off * 4, n * 4, dst);
	h = malloc(n * sz);
	if (!h)
		return clp_error(CLP_ERR_NOMEM, "check: out of host memory");
	s = clp_cl_read(e->ctx, b.mem, b.off * sz, n * sz, h);
	if (s == CLP_OK)
		clp_dtype_unpack(b.dt, dst, h, n);
	free(h);
	return s;
}

double ck_dot(const float *g, const double *y, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)g[i] * y[i];
	return s;
}

/* one unit in the last place of dt at magnitude a (tests/nn/nn_st.h's ts_ulp) */
static double ulp(clp_dtype dt, double a)
{
	int ex;

	if (dt == CLP_F32 || !(a > 0))
		return dt == CLP_BF16 ? 0x1p-133 : dt == CLP_F16 ? 0x1p-24 : 0x1p-149;
	frexp(a, &ex);
	if (dt == CLP_BF16)
		return ldexp(1.0, ex - 1 - 7);
	return ex - 1 < -14 ? 0x1p-24 : ldexp(1.0, ex - 1 - 10);
}

static void line_init(ck_env *e, clp_check_line *l, const char *what)
{
	const ck_case *c = e->c;
	const char *p = c->op->dims;
	size_t used = 0;

	memset(l, 0, sizeof(*l));
	l->op = c->op->name;
	l->variant = c->op->variants ? c->op->variants[c->variant] : "-";
	l->geom = c->geom == CLP_NN_SHAPE_CPU ? "cpu" : c->geom == CLP_NN_SHAPE_GPU ? "gpu" : "-";
	snprintf(l->dtype, sizeof(l->dtype), "%s", e->dtype);
	for (int i = 0; *p && i < CK_MAXD; i++) {
		const char *q = strchr(p, ',');
		int len = q ? (int)(q - p) : (int)strlen(p);

		used += (size_t)snprintf(l->sizes + used, used < sizeof(l->sizes) ?
					 sizeof(l->sizes) - used : 0, "%s%.*s=%zu",
					 i ? " " : "", len, p, c->d[i]);
		p += len + (q != NULL);
	}
	if (e->extra[0] && used < sizeof(l->sizes))
		snprintf(l->sizes + used, sizeof(l->sizes) - used, " %s", e->extra);
	snprintf(l->what, sizeof(l->what), "%s", what);
	if (c->op->flops)
		l->flops = c->op->flops(c->d, c->variant);
	if (c->op->bytes)
		l->bytes = c->op->bytes(c->d, c->variant, c->dt);
}

static void line_emit(ck_env *e, clp_check_line *l)
{
	e->sum->lines++;
	if (!l->ok) {
		e->sum->failed_lines++;
		e->case_failed = 1;
	}
	if (e->opts->emit)
		e->opts->emit(l, e->opts->ud);
}

/* the fault injection: a wrong first element, as a kernel bug would leave it (a finite one
 * where the right one is NaN or infinite) */
static void inject(ck_env *e, float *got, size_t n)
{
	const char *want = e->opts->inject;
	size_t len;

	if (!want || !n)
		return;
	for (const char *p = want; *p;) {
		len = strcspn(p, ",");
		if (len == strlen(e->c->op->name) && !strncmp(p, e->c->op->name, len)) {
			got[0] = isfinite(got[0]) ? got[0] + 1.0f + 2.0f * fabsf(got[0]) : 0.5f;
			return;
		}
		p += len + (p[len] == ',');
	}
}

static int compare(ck_env *e, const char *what, clp_dtype dt, float *got, const double *ref,
		   const double *tolv, size_t n, ck_tol t)
{
	clp_check_line l;
	size_t bad = 0, worst = 0;
	double wr = -1, wtol = 0, werr = 0;

	inject(e, got, n);
	line_init(e, &l, what);
	for (size_t i = 0; i < n; i++) {
		double r, tol, d;

		if (tolv)
			tol = tolv[i];
		else {
			double a = t.atol + t.rtol * fabs(ref[i]);

			tol = a + t.ulps * ulp(dt, fabs(ref[i]) + a);
		}
		if (isnan(ref[i]) || isinf(ref[i])) { /* must be the same NaN-ness or infinity */
			r = d = (isnan(ref[i]) ? isnan(got[i]) : (double)got[i] == ref[i]) ? 0
											  : INFINITY;
			tol = 0;
		} else {
			d = fabs((double)got[i] - ref[i]);
			r = !isfinite(got[i]) ? INFINITY : d == 0 ? 0 : tol > 0 ? d / tol : INFINITY;
			if (!isfinite(got[i]))
				d = INFINITY;
		}
		if (!(r <= 1.0))
			bad++;
		if (!(r <= wr)) {
			wr = r;
			worst = i;
			wtol = tol;
			werr = d;
		}
	}
	l.ok = bad == 0;
	l.err = werr;
	l.tol = wtol;
	if (bad)
		snprintf(l.message, sizeof(l.message), "%zu of %zu elements off; worst [%zu] got "
			 "%.9g want %.9g", bad, n, worst, got[worst], ref[worst]);
	line_emit(e, &l);
	return l.ok;
}

int ck_compare(ck_env *e, const char *what, clp_dtype dt, float *got, const double *ref,
	       size_t n, ck_tol t)
{
	return compare(e, what, dt, got, ref, NULL, n, t);
}

int ck_compare_tol(ck_env *e, const char *what, float *got, const double *ref, const double *tol,
		   size_t n)
{
	ck_tol none = {0, 0, 0};

	return compare(e, what, CLP_F32, got, ref, tol, n, none);
}

int ck_fd(ck_env *e, const char *what, float *x, size_t n, const double *dev, ck_loss_fn loss,
	  void *ud, ck_fdtol t)
{
	clp_check_line l;
	double num = 0, den = 0, *fd = malloc((n ? n : 1) * sizeof(double));
	float *g = malloc((n ? n : 1) * sizeof(float));
	char name[32];

	if (!fd || !g) {
		free(fd), free(g);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		float x0 = x[i], xp = x0 + 1e-3f, xm = x0 - 1e-3f;
		double lp, lm;

		x[i] = xp;
		lp = loss(ud);
		x[i] = xm;
		lm = loss(ud);
		x[i] = x0;
		fd[i] = (lp - lm) / ((double)xp - xm);
		g[i] = (float)dev[i];
	}
	inject(e, g, n);
	for (size_t i = 0; i < n; i++) {
		num += (fd[i] - g[i]) * (fd[i] - g[i]);
		den += (double)g[i] * g[i];
	}
	num = sqrt(num / (double)(n ? n : 1));
	den = sqrt(den / (double)(n ? n : 1));
	snprintf(name, sizeof(name), "fd %s", what);
	line_init(e, &l, name);
	l.err = isfinite(num) ? num : INFINITY;
	l.tol = t.rel * den + t.abs;
	l.ok = num <= l.tol;
	if (!l.ok)
		snprintf(l.message, sizeof(l.message), "device gradient vs central differences of "
			 "the reference forward: RMS error %g, gradient RMS %g", num, den);
	line_emit(e, &l);
	free(fd), free(g);
	return l.ok;
}

void ck_error_line(ck_env *e, clp_status s)
{
	const int skip = s == CLP_ERR_UNSUPPORTED;
	clp_check_line l;

	line_init(e, &l, skip ? "skipped" : "error");
	snprintf(l.message, sizeof(l.message), "%s: %s", clp_status_str(s), clp_last_error());
	clp_error_clear();
	l.ok = l.skipped = skip;
	l.err = skip ? 0 : INFINITY;
	if (skip) {
		e->sum->lines++;
		e->sum->skipped_cases++;
		if (e->opts->emit)
			e->opts->emit(&l, e->opts->ud);
	} else {
		line_emit(e, &l);
	}
}

int ck_compare_norm(ck_env *e, const char *what, float *got, const double *ref, size_t n,
		    double limit)
{
	clp_check_line l;
	double num = 0, den = 0;
	int finite = 1;

	inject(e, got, n);
	line_init(e, &l, what);
	for (size_t i = 0; i < n; i++) {
		finite &= isfinite(got[i]) != 0;
		num += (got[i] - ref[i]) * (got[i] - ref[i]);
		den += ref[i] * ref[i];
	}
	l.err = !finite ? INFINITY : den > 0 ? sqrt(num / den) : sqrt(num);
	l.tol = limit;
	l.ok = l.err <= limit;
	if (!l.ok)
		snprintf(l.message, sizeof(l.message), "normalised error ||got - ref|| / ||ref|| "
			 "%g over %zu elements", l.err, n);
	line_emit(e, &l);
	return l.ok;
}
