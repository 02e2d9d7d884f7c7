/* SOAP on one tensor (soap.h): the kernels of kernels/soap.cl, the unblocked Householder QR, the
 * refresh of an eigenbasis (one round of subspace iteration) and the step's projections on the
 * engine's GEMM. */
#include "cl/soap.h"

#include <math.h>

#include "cl/gemm.h"
#include "cl/nn_internal.h"
#include "cl/ops.h"
#include "cl/shampoo.h"

#define SOAP_FILE "soap.cl"
#define SOAP_MAX_ITERS 1000

static clp_status kernel(clp_cl_ctx *ctx, const char *name, cl_kernel *k)
{
	return clp_cl_kernel(ctx, SOAP_FILE, clp_nn_ew_defines(ctx), name, k);
}

/* n work-items, one per column or index: the rows launch of the device's shape */
static clp_status run_items(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t n)
{
	return clp_nn_gpu_shape(ctx) ? clp_nn_run_rows_gpu(ctx, k, label, n ? n : 1)
				     : clp_nn_run_rows(ctx, k, label, n ? n : 1);
}

static int same_buf(clp_buf a, clp_buf b)
{
	return a.mem == b.mem && a.off == b.off;
}

size_t clp_soap_qr_floats(size_t d)
{
	return d * d + d; /* the factorisation's working matrix, then tau */
}

void clp_soap_work_sizes(size_t rows, size_t cols, size_t n[CLP_SOAP_NWORK + 1])
{
	const size_t d = rows > cols ? rows : cols;

	n[0] = n[1] = n[2] = rows * cols;
	n[3] = n[4] = n[5] = d * d;
	n[6] = n[7] = d;
	n[8] = clp_soap_qr_floats(d);
}

static clp_status check_work(const clp_soap_work *w, int need_x)
{
	if (!w || (need_x && (!w->x.mem || !w->a.mem || !w->b.mem)) || !w->r[0].mem ||
	    !w->r[1].mem || !w->r[2].mem || !w->est.mem || !w->perm.mem || !w->qr.mem)
		return clp_error(CLP_ERR_INVALID, "soap: scratch buffers missing");
	return clp_nn_require_f32("soap work", 9, "x", w->x, "a", w->a, "b", w->b, "r0", w->r[0],
				  "r1", w->r[1], "r2", w->r[2], "est", w->est, "perm", w->perm,
				  "qr", w->qr);
}

clp_status clp_soap_stats(clp_cl_ctx *ctx, clp_buf x, size_t rows, size_t cols, clp_buf l,
			  clp_buf r, float sb)
{
	if (!(sb >= 0.0f && sb <= 1.0f))
		return clp_error(CLP_ERR_INVALID, "soap: shampoo_beta %g must be in [0, 1]", sb);
	if (!rows || !cols)
		return CLP_OK;
	if (!x.mem || !l.mem || !r.mem)
		return clp_error(CLP_ERR_INVALID, "soap stats: missing buffer");
	CLP_TRY(clp_nn_require_f32("soap stats", 3, "x", x, "l", l, "r", r));
	/* lerp(L, P, 1 - sb) as sb L + (1 - sb) P: one GEMM each, the same to a rounding */
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_T, rows, rows, cols, 1.0f - sb, x, cols, x, cols, sb,
			    l, rows));
	return clp_cl_gemm(ctx, CLP_T, CLP_N, cols, cols, rows, 1.0f - sb, x, cols, x, cols, sb, r,
			   cols);
}

static clp_status eye(clp_cl_ctx *ctx, clp_buf q, size_t d)
{
	cl_kernel k;
	cl_ulong qo = q.off, dd = d;

	CLP_TRY(kernel(ctx, "clp_soap_eye", &k));
	CLP_TRY(clp_cl_args(ctx, k, 3, CLP_ARG(q.mem), CLP_ARG(qo), CLP_ARG(dd)));
	return clp_nn_run_ew(ctx, k, "soap_eye", d * d);
}

/* t[k:, j0:] = H_k t[k:, j0:] */
static clp_status house_apply(clp_cl_ctx *ctx, cl_kernel ka, clp_buf t, clp_buf wm, clp_buf tau,
			      size_t d, size_t k, size_t j0)
{
	cl_ulong tofs = t.off, wo = wm.off, to = tau.off, dd = d, kk = k, jj = j0;

	CLP_TRY(clp_cl_args(ctx, ka, 9, CLP_ARG(t.mem), CLP_ARG(tofs), CLP_ARG(wm.mem),
			    CLP_ARG(wo), CLP_ARG(tau.mem), CLP_ARG(to), CLP_ARG(dd), CLP_ARG(kk),
			    CLP_ARG(jj)));
	return run_items(ctx, ka, "soap_house_apply", d - j0);
}

/* geqr2 on a copy of a in w->qr, then org2r into q */
static clp_status qr(clp_cl_ctx *ctx, clp_buf a, size_t d, clp_buf q, const clp_soap_work *w)
{
	const clp_buf wm = w->qr, tau = clp_buf_plus(w->qr, d * d);
	cl_kernel kh, ka;
	cl_ulong wo = wm.off, to = tau.off, dd = d;

	CLP_TRY(kernel(ctx, "clp_soap_house", &kh));
	CLP_TRY(kernel(ctx, "clp_soap_house_apply", &ka));
	CLP_TRY(clp_cl_copy(ctx, wm, a, d * d));
	for (size_t k = 0; k < d; k++) {
		cl_ulong kk = k;

		CLP_TRY(clp_cl_args(ctx, kh, 6, CLP_ARG(wm.mem), CLP_ARG(wo), CLP_ARG(tau.mem),
				    CLP_ARG(to), CLP_ARG(dd), CLP_ARG(kk)));
		CLP_TRY(run_items(ctx, kh, "soap_house", 1));
		if (k + 1 < d)
			CLP_TRY(house_apply(ctx, ka, wm, wm, tau, d, k, k + 1));
	}
	/* Q = H_0 H_1 ... H_{d-1} I, from the last reflector back: H_k touches rows and columns
	 * k.. only, since the product of the later ones is the identity on the first k + 1 */
	CLP_TRY(eye(ctx, q, d));
	for (size_t k = d; k-- > 0;)
		CLP_TRY(house_apply(ctx, ka, q, wm, tau, d, k, k));
	return CLP_OK;
}

clp_status clp_soap_qr(clp_cl_ctx *ctx, clp_buf a, size_t d, clp_buf q, const clp_soap_work *w)
{
	if (!d)
		return CLP_OK;
	CLP_TRY(check_work(w, 0));
	if (!a.mem || !q.mem || same_buf(a, q) || same_buf(q, w->qr))
		return clp_error(CLP_ERR_INVALID, "soap qr: q missing, or a or the scratch");
	CLP_TRY(clp_nn_require_f32("soap qr", 2, "a", a, "q", q));
	return qr(ctx, a, d, q, w);
}

/* r[0] = a q, est = diag(q^T r[0]), perm = argsort, r[1] = r[0][:, perm], q_next = QR(r[1]) */
static clp_status basis_next(clp_cl_ctx *ctx, clp_buf a, clp_buf q, size_t d, clp_buf q_next,
			     clp_buf perm, const clp_soap_work *w)
{
	const clp_buf aq = w->r[0], pi = w->r[1];
	cl_kernel k;
	cl_ulong eo = w->est.off, qo = q.off, ao = aq.off, po = perm.off, pio = pi.off, dd = d;
	cl_int axis = 1;

	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, d, d, d, 1.0f, a, d, q, d, 0.0f, aq, d));
	CLP_TRY(kernel(ctx, "clp_soap_est", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(w->est.mem), CLP_ARG(eo), CLP_ARG(q.mem),
			    CLP_ARG(qo), CLP_ARG(aq.mem), CLP_ARG(ao), CLP_ARG(dd)));
	CLP_TRY(run_items(ctx, k, "soap_est", d));
	CLP_TRY(kernel(ctx, "clp_soap_argsort", &k));
	CLP_TRY(clp_cl_args(ctx, k, 5, CLP_ARG(perm.mem), CLP_ARG(po), CLP_ARG(w->est.mem),
			    CLP_ARG(eo), CLP_ARG(dd)));
	CLP_TRY(run_items(ctx, k, "soap_argsort", d));
	CLP_TRY(kernel(ctx, "clp_soap_gather", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(pi.mem), CLP_ARG(pio), CLP_ARG(aq.mem), CLP_ARG(ao),
			    CLP_ARG(perm.mem), CLP_ARG(po), CLP_ARG(dd), CLP_ARG(dd),
			    CLP_ARG(axis)));
	CLP_TRY(clp_nn_run_ew(ctx, k, "soap_gather", d * d));
	return qr(ctx, pi, d, q_next, w);
}

static int is_work(const clp_soap_work *w, clp_buf b)
{
	const clp_buf all[] = {w->x, w->a, w->b, w->r[0], w->r[1], w->r[2], w->est, w->perm,
			       w->qr};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i].mem && same_buf(all[i], b))
			return 1;
	return 0;
}

clp_status clp_soap_basis_next(clp_cl_ctx *ctx, clp_buf a, clp_buf q, size_t d, clp_buf q_next,
			       clp_buf perm, const clp_soap_work *w)
{
	if (!d)
		return CLP_OK;
	CLP_TRY(check_work(w, 0));
	if (!a.mem || !q.mem || !q_next.mem || !perm.mem || is_work(w, q_next) ||
	    is_work(w, perm) || same_buf(q_next, q) || same_buf(q_next, a))
		return clp_error(CLP_ERR_INVALID, "soap basis: a buffer is missing, or q_next or "
				 "perm is the scratch, q or a");
	CLP_TRY(clp_nn_require_f32("soap basis", 3, "a", a, "q", q, "q_next", q_next));
	return basis_next(ctx, a, q, d, q_next, perm, w);
}

clp_status clp_soap_basis_init(clp_cl_ctx *ctx, clp_buf a, size_t d, clp_buf q, int iters,
			       const clp_soap_work *w)
{
	if (iters < 0 || iters > SOAP_MAX_ITERS)
		return clp_error(CLP_ERR_INVALID, "soap: %d initial rounds (0..%d)", iters,
				 SOAP_MAX_ITERS);
	if (!d)
		return CLP_OK;
	CLP_TRY(check_work(w, 0));
	if (!a.mem || !q.mem || is_work(w, q) || same_buf(q, a))
		return clp_error(CLP_ERR_INVALID, "soap basis init: q missing, a or the scratch");
	CLP_TRY(clp_nn_require_f32("soap basis init", 2, "a", a, "q", q));
	CLP_TRY(eye(ctx, q, d));
	for (int it = 0; it < iters; it++) {
		CLP_TRY(basis_next(ctx, a, q, d, w->r[2], w->perm, w));
		CLP_TRY(clp_cl_copy(ctx, q, w->r[2], d * d));
	}
	return CLP_OK;
}

static clp_status permute(clp_cl_ctx *ctx, clp_buf v, size_t rows, size_t cols, int axis,
			  clp_buf perm, const clp_soap_work *w)
{
	cl_kernel k;
	cl_ulong ao = w->a.off, vo = v.off, po = perm.off, rr = rows, cc = cols;
	cl_int ax = axis != 0;

	CLP_TRY(kernel(ctx, "clp_soap_gather", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(w->a.mem), CLP_ARG(ao), CLP_ARG(v.mem), CLP_ARG(vo),
			    CLP_ARG(perm.mem), CLP_ARG(po), CLP_ARG(rr), CLP_ARG(cc), CLP_ARG(ax)));
	CLP_TRY(clp_nn_run_ew(ctx, k, "soap_gather", rows * cols));
	return clp_cl_copy(ctx, v, w->a, rows * cols);
}

clp_status clp_soap_permute(clp_cl_ctx *ctx, clp_buf v, size_t rows, size_t cols, int axis,
			    clp_buf perm, const clp_soap_work *w)
{
	if (axis != 0 && axis != 1)
		return clp_error(CLP_ERR_INVALID, "soap permute: axis %d (0 or 1)", axis);
	if (!rows || !cols)
		return CLP_OK;
	if (!w || !w->a.mem || !v.mem || !perm.mem || same_buf(v, w->a) || same_buf(perm, w->a))
		return clp_error(CLP_ERR_INVALID, "soap permute: a buffer is missing, or v or "
				 "perm is the scratch");
	CLP_TRY(clp_nn_require_f32("soap permute", 2, "v", v, "a", w->a));
	return permute(ctx, v, rows, cols, axis, perm, w);
}

static clp_status check_hp(const clp_soap_hp *hp)
{
	if (!hp)
		return clp_error(CLP_ERR_INVALID, "soap: no hyperparameters");
	if (!isfinite(hp->lr) || !(hp->beta1 >= 0.0f && hp->beta1 < 1.0f) ||
	    !(hp->beta2 >= 0.0f && hp->beta2 < 1.0f) ||
	    !(hp->shampoo_beta >= 0.0f && hp->shampoo_beta <= 1.0f) ||
	    !(hp->eps >= 0.0f && isfinite(hp->eps)) || !isfinite(hp->weight_decay) || hp->t < 1 ||
	    hp->init_iters < 0 || hp->init_iters > SOAP_MAX_ITERS)
		return clp_error(CLP_ERR_INVALID, "soap: lr %g, betas (%g, %g) in [0, 1), "
				 "shampoo_beta %g in [0, 1], eps %g >= 0, weight decay %g, step "
				 "%ld >= 1, %d initial rounds (0..%d)", hp->lr, hp->beta1,
				 hp->beta2, hp->shampoo_beta, hp->eps, hp->weight_decay, hp->t,
				 hp->init_iters, SOAP_MAX_ITERS);
	return CLP_OK;
}

/* x and p (rows x cols) into w->b = ql^T p qr (through w->a) */
static clp_status project(clp_cl_ctx *ctx, clp_buf p, clp_buf ql, clp_buf qr_, size_t rows,
			  size_t cols, const clp_soap_work *w)
{
	CLP_TRY(clp_cl_gemm(ctx, CLP_T, CLP_N, rows, cols, rows, 1.0f, ql, rows, p, cols, 0.0f,
			    w->a, cols));
	return clp_cl_gemm(ctx, CLP_N, CLP_N, rows, cols, cols, 1.0f, w->a, cols, qr_, cols, 0.0f,
			   w->b, cols);
}

clp_status clp_soap_adam(clp_cl_ctx *ctx, clp_buf param, clp_buf m, clp_buf v, clp_buf x,
			 clp_buf ql, clp_buf qr_, size_t rows, size_t cols, const clp_soap_hp *hp,
			 clp_buf stats, const clp_soap_work *w)
{
	const size_t n = rows * cols;
	const long s = hp ? hp->t - 1 : 0;
	double step;
	cl_kernel k;
	cl_ulong po = param.off, mo = m.off, vo = v.off, xo = x.off, bo = w ? w->b.off : 0,
		 nn = n, so = stats.off;
	cl_int has = stats.mem != NULL;
	cl_mem sm = has ? stats.mem : param.mem;
	float fstep, decay, b1, b2, eps;

	CLP_TRY(check_hp(hp));
	if (hp->t < 2)
		return clp_error(CLP_ERR_INVALID, "soap adam: step %ld (the update starts at 2)",
				 hp->t);
	if (!n)
		return CLP_OK;
	if (!w || !w->a.mem || !w->b.mem || !param.mem || !m.mem || !v.mem || !x.mem || !ql.mem ||
	    !qr_.mem || same_buf(x, w->a) || same_buf(x, w->b))
		return clp_error(CLP_ERR_INVALID, "soap adam: a buffer is missing, or x is the "
				 "scratch");
	CLP_TRY(clp_nn_require_f32("soap adam", 8, "param", param, "m", m, "v", v, "x", x, "ql",
				   ql, "qr", qr_, "a", w->a, "b", w->b));
	step = hp->lr;
	if (hp->correct_bias)
		step *= sqrt(1.0 - pow(hp->beta2, (double)s)) / (1.0 - pow(hp->beta1, (double)s));
	fstep = (float)step;
	decay = (float)(1.0 - (double)hp->lr * hp->weight_decay);
	b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
	/* b = QL^T x QR; m, v */
	CLP_TRY(project(ctx, x, ql, qr_, rows, cols, w));
	CLP_TRY(kernel(ctx, "clp_soap_moments", &k));
	CLP_TRY(clp_cl_args(ctx, k, 14, CLP_ARG(m.mem), CLP_ARG(mo), CLP_ARG(v.mem), CLP_ARG(vo),
			    CLP_ARG(x.mem), CLP_ARG(xo), CLP_ARG(w->b.mem), CLP_ARG(bo),
			    CLP_ARG(nn), CLP_ARG(b1), CLP_ARG(b2), CLP_ARG(sm), CLP_ARG(so),
			    CLP_ARG(has)));
	CLP_TRY(clp_nn_run_ew(ctx, k, "soap_moments", n));
	/* b = (QL^T m QR) / (sqrt(v) + eps) */
	CLP_TRY(project(ctx, m, ql, qr_, rows, cols, w));
	CLP_TRY(kernel(ctx, "clp_soap_ratio", &k));
	CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(w->b.mem), CLP_ARG(bo), CLP_ARG(v.mem), CLP_ARG(vo),
			    CLP_ARG(nn), CLP_ARG(eps)));
	CLP_TRY(clp_nn_run_ew(ctx, k, "soap_ratio", n));
	/* b = QL b QR^T (through a) */
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_N, rows, cols, rows, 1.0f, ql, rows, w->b, cols, 0.0f,
			    w->a, cols));
	CLP_TRY(clp_cl_gemm(ctx, CLP_N, CLP_T, rows, cols, cols, 1.0f, w->a, cols, qr_, cols, 0.0f,
			    w->b, cols));
	CLP_TRY(kernel(ctx, "clp_soap_apply", &k));
	CLP_TRY(clp_cl_args(ctx, k, 10, CLP_ARG(param.mem), CLP_ARG(po), CLP_ARG(w->b.mem),
			    CLP_ARG(bo), CLP_ARG(nn), CLP_ARG(fstep), CLP_ARG(decay), CLP_ARG(sm),
			    CLP_ARG(so), CLP_ARG(has)));
	return clp_nn_run_ew(ctx, k, "soap_apply", n);
}

clp_status clp_soap_update(clp_cl_ctx *ctx, clp_buf param, clp_buf m, clp_buf v, clp_buf grad,
			   clp_buf l, clp_buf r, clp_buf ql, clp_buf qr_, size_t rows, size_t cols,
			   const clp_soap_hp *hp, clp_buf stats, float gscale,
			   const clp_soap_work *w)
{
	const size_t n = rows * cols;

	CLP_TRY(check_hp(hp));
	if (!n)
		return CLP_OK;
	CLP_TRY(check_work(w, 1));
	if (!param.mem || !m.mem || !v.mem || !grad.mem || !l.mem || !r.mem || !ql.mem ||
	    !qr_.mem || is_work(w, ql) || is_work(w, qr_) || is_work(w, v))
		return clp_error(CLP_ERR_INVALID, "soap update: a buffer is missing, or a state "
				 "is the scratch");
	CLP_TRY(clp_nn_require_f32("soap update", 1, "grad", grad));
	/* x = grad gscale (times the clip factor; 0 on a non-finite step): Shampoo's first-step
	 * momentum, which reads no buffer of its own (w->x stands in for it) */
	CLP_TRY(clp_shampoo_momentum(ctx, w->x, grad, w->x, n, 0.0f, 1, gscale, stats));
	if (hp->t == 1) {
		CLP_TRY(clp_soap_stats(ctx, w->x, rows, cols, l, r, hp->shampoo_beta));
		CLP_TRY(clp_soap_basis_init(ctx, l, rows, ql, hp->init_iters, w));
		return clp_soap_basis_init(ctx, r, cols, qr_, hp->init_iters, w);
	}
	CLP_TRY(clp_soap_adam(ctx, param, m, v, w->x, ql, qr_, rows, cols, hp, stats, w));
	CLP_TRY(clp_soap_stats(ctx, w->x, rows, cols, l, r, hp->shampoo_beta));
	if (!hp->refresh)
		return CLP_OK;
	/* each side from the old bases; the next basis in r[2] (basis_next uses r[0], r[1]) */
	CLP_TRY(basis_next(ctx, l, ql, rows, w->r[2], w->perm, w));
	CLP_TRY(permute(ctx, v, rows, cols, 0, w->perm, w));
	CLP_TRY(clp_cl_copy(ctx, ql, w->r[2], rows * rows));
	CLP_TRY(basis_next(ctx, r, qr_, cols, w->r[2], w->perm, w));
	CLP_TRY(permute(ctx, v, rows, cols, 1, w->perm, w));
	return clp_cl_copy(ctx, qr_, w->r[2], cols * cols);
}

double clp_soap_refresh_flops(size_t d)
{
	const double dd = (double)d;

	/* a q, then geqr2 and org2r, 4/3 d^3 each */
	return 2.0 * dd * dd * dd + 8.0 / 3.0 * dd * dd * dd;
}

double clp_soap_step_flops(size_t rows, size_t cols)
{
	const double r = (double)rows, c = (double)cols;

	/* three two-sided projections (x, m, back) and the two statistics: 2 r c (r + c) each */
	return 4.0 * 2.0 * r * c * (r + c);
}
