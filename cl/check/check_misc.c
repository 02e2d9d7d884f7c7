/* clpipe check cases of the loss, the optimiser and K-FAC: vocabulary-chunked cross-entropy
 * (values in the case's storage type, losses and gradients fp32), AdamW over three steps, the
 * K-FAC factor (16-bit inputs), the SPD inverse chain (Cholesky, triangular inverse, inverse;
 * both kernel shapes) and the preconditioning, as tests/nn/test_nn_xent.c, test_nn_optim.c and
 * tests/kfac/test_kfac_kernels.c check them. */
#include <math.h>
#include <string.h>

#include "cl/check/check_internal.h"
#include "cl/kfac.h"
#include "cl/ref/kfac_ref.h"
#include "cl/ref/nn_ref.h"

/* ---- cross-entropy ------------------------------------------------------------------------ */

struct fd_xent {
	float *h, *w, *bias;
	const int32_t *tg;
	size_t N, C, V;
	float scale;
	double *losses;
};

static double xent_loss(void *ud)
{
	struct fd_xent *f = ud;
	double s = 0;

	clp_ref_xent_forward(f->losses, NULL, f->h, f->w, f->bias, f->tg, f->N, f->C, f->V);
	for (size_t n = 0; n < f->N; n++)
		s += f->losses[n];
	return s * f->scale;
}

clp_status ck_run_xent(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t N = c->d[0], C = c->d[1], V = c->d[2], vchunk = c->d[3];
	const int with_bias = c->variant == 1;
	int32_t *tg = ck_alloc(e, N * 4);
	float *h = ck_rand(e, N * C, -1, 1), *w = ck_rand(e, V * C, -1, 1);
	float *bias = ck_rand(e, V, -2, 2), *db0 = ck_rand(e, V, -1, 1);
	float *dh0 = ck_rand(e, N * C, -1, 1), *dw0 = ck_rand(e, V * C, -1, 1);
	float *got = ck_alloc(e, (N * C > V * C ? N * C : V * C) * 4), *gh, loss;
	double *losses = ck_alloc(e, N * 8), *lse = ck_alloc(e, N * 8), *dh = ck_dbl(e, dh0, N * C);
	double *dw = ck_dbl(e, dw0, V * C), *dbias = ck_dbl(e, db0, V), mean = 0;
	size_t valid = 0;
	clp_buf bh, bw, bb = CLP_BUF_NONE, bt, bl, bz, bm, bdh, bdw, bdb = CLP_BUF_NONE;
	float scale;

	CK_NEED(tg && h && w && bias && db0 && dh0 && dw0 && got && losses && lse && dh && dw &&
		dbias);
	for (size_t n = 0; n < N; n++)
		tg[n] = n % 3 == 1 ? -1 : (int32_t)(ck_next(e) % V);
	if (N > 2)
		tg[2] = (int32_t)V - 1; /* the last column of the last, partial chunk */
	for (size_t n = 0; n < N; n++)
		valid += tg[n] >= 0;
	scale = 1.0f / (float)valid;
	ck_round(dt, h, N * C), ck_round(dt, w, V * C), ck_round(dt, bias, V);
	CLP_TRY(ck_buf(e, h, N * C, dt, &bh));
	CLP_TRY(ck_buf(e, w, V * C, dt, &bw));
	if (with_bias) {
		CLP_TRY(ck_buf(e, bias, V, dt, &bb));
		CLP_TRY(ck_buf(e, db0, V, CLP_F32, &bdb));
	}
	CLP_TRY(ck_buf_i32(e, tg, N, &bt));
	CLP_TRY(ck_buf(e, NULL, N, CLP_F32, &bl));
	CLP_TRY(ck_buf(e, NULL, N, CLP_F32, &bz));
	CLP_TRY(ck_buf(e, NULL, 1, CLP_F32, &bm));
	CLP_TRY(ck_buf(e, dh0, N * C, CLP_F32, &bdh));
	CLP_TRY(ck_buf(e, dw0, V * C, CLP_F32, &bdw));
	clp_ref_xent_forward(losses, lse, h, w, with_bias ? bias : NULL, tg, N, C, V);
	clp_ref_xent_backward(dh, dw, with_bias ? dbias : NULL, h, w, with_bias ? bias : NULL, tg,
			      scale, N, C, V);
	for (size_t n = 0; n < N; n++)
		mean += losses[n] / (double)valid;
	CLP_TRY(clp_nn_xent_forward(e->ctx, bl, bz, bh, bw, bb, bt, N, C, V, vchunk));
	CLP_TRY(clp_nn_xent_mean(e->ctx, bm, bl, N, scale));
	CLP_TRY(clp_nn_xent_backward(e->ctx, bdh, bdw, bdb, bh, bw, bb, bt, bz, scale, N, C, V,
				     vchunk));
	CLP_TRY(ck_get(e, bl, N, got));
	ck_compare(e, "losses", CLP_F32, got, losses, N, op->stat);
	CLP_TRY(ck_get(e, bz, N, got));
	for (size_t n = 0; n < N; n++)
		if (tg[n] < 0)
			got[n] = (float)lse[n]; /* lse of ignored rows is unspecified */
	ck_compare(e, "lse", CLP_F32, got, lse, N, op->stat);
	CLP_TRY(ck_get(e, bm, 1, &loss));
	ck_compare(e, "loss", CLP_F32, &loss, &mean, 1, op->stat);
	gh = ck_alloc(e, N * C * 4);
	CK_NEED(gh);
	CLP_TRY(ck_get(e, bdh, N * C, gh));
	CLP_TRY(ck_get(e, bdw, V * C, got));
	if (c->flags & CK_FD) {
		struct fd_xent f = {h, w, with_bias ? bias : NULL, tg, N, C, V, scale,
				    ck_alloc(e, N * 8)};
		double *kh = ck_alloc(e, N * C * 8), *kw = ck_alloc(e, V * C * 8);

		CK_NEED(f.losses && kh && kw);
		for (size_t i = 0; i < N * C; i++)
			kh[i] = (double)gh[i] - dh0[i];
		for (size_t i = 0; i < V * C; i++)
			kw[i] = (double)got[i] - dw0[i];
		ck_fd(e, "dh", h, N * C, kh, xent_loss, &f, op->fd[dt]);
		ck_fd(e, "dw", w, V * C, kw, xent_loss, &f, op->fd[dt]);
	}
	ck_compare(e, "dh", CLP_F32, gh, dh, N * C, op->grad);
	ck_compare(e, "dw", CLP_F32, got, dw, V * C, op->grad);
	if (with_bias) {
		CLP_TRY(ck_get(e, bdb, V, got));
		ck_compare(e, "dbias", CLP_F32, got, dbias, V, op->grad);
	}
	return CLP_OK;
}

/* ---- AdamW -------------------------------------------------------------------------------- */

/* Three steps; the second applies the clip factor 0.5 of the gradient statistics. */
clp_status ck_run_adamw(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const size_t n = c->d[0];
	const int decay = c->variant == 0;
	float *p = ck_rand(e, n, -1, 1), *m = ck_rand(e, n, -0.1f, 0.1f), *v = ck_rand(e, n, 0, 0.01f);
	float *got = ck_alloc(e, n * 4), *g;
	double *ref = ck_alloc(e, n * 8);
	const float stats[4] = {4.0f, 0.0f, 2.0f, 0.5f};
	clp_nn_adamw_hp hp = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
	clp_buf bp, bm, bv, bg, bs;

	CK_NEED(p && m && v && got && ref);
	CLP_TRY(ck_buf(e, p, n, CLP_F32, &bp));
	CLP_TRY(ck_buf(e, m, n, CLP_F32, &bm));
	CLP_TRY(ck_buf(e, v, n, CLP_F32, &bv));
	CLP_TRY(ck_buf(e, NULL, n, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, stats, 4, CLP_F32, &bs));
	for (int step = 1; step <= 3; step++) {
		g = ck_rand(e, n, -2, 2);
		CK_NEED(g);
		CLP_TRY(clp_cl_write(e->ctx, bg.mem, bg.off * 4, n * 4, g));
		hp.step = step;
		hp.lr = 3e-3f * (float)step;
		CLP_TRY(clp_nn_adamw_update(e->ctx, bp, bm, bv, bg, n, &hp, decay,
					    step == 2 ? bs : CLP_BUF_NONE, 0.75f));
		clp_ref_adamw(p, m, v, g, n, &hp, decay, step == 2 ? 0.375f : 0.75f);
	}
	CLP_TRY(ck_get(e, bp, n, got));
	for (size_t i = 0; i < n; i++)
		ref[i] = p[i];
	ck_compare(e, "param", CLP_F32, got, ref, n, op->out[CLP_F32]);
	CLP_TRY(ck_get(e, bv, n, got));
	for (size_t i = 0; i < n; i++)
		ref[i] = v[i];
	ck_compare(e, "v", CLP_F32, got, ref, n, op->stat);
	return CLP_OK;
}

/* ---- K-FAC -------------------------------------------------------------------------------- */

/* F = 0.25 x^T x over a column slice (columns 1 .. d of rows d + 3 wide), x in the case's type */
clp_status ck_run_kfac_factor(ck_env *e, const ck_case *c)
{
	const clp_dtype dt = c->dt;
	const size_t d = c->d[0], rows = c->d[1], ld = d + 3;
	float *x = ck_rand(e, rows * ld, -2, 2), *got = ck_alloc(e, d * d * 4);
	double *ref = ck_alloc(e, d * d * 8);
	clp_buf bx, bf;

	CK_NEED(x && got && ref);
	ck_round(dt, x, rows * ld);
	CLP_TRY(ck_buf(e, x, rows * ld, dt, &bx));
	CLP_TRY(ck_buf(e, NULL, d * d, CLP_F32, &bf));
	CLP_TRY(clp_kfac_factor(e->ctx, bf, clp_buf_plus(bx, 1), ld, rows, d, 0.25f, 0.0f));
	clp_ref_kfac_factor(ref, x + 1, ld, rows, d, 0.25, 0.0);
	CLP_TRY(ck_get(e, bf, d * d, got));
	ck_compare(e, "F", CLP_F32, got, ref, d * d, c->op->out[dt]);
	return CLP_OK;
}

double *ck_spd(ck_env *e, size_t n, double shift, float *f)
{
	float *x = ck_rand(e, (n + 5) * n, -1, 1);
	double *W = ck_alloc(e, n * n * 8);

	if (!x || !W)
		return NULL;
	clp_ref_kfac_factor(W, x, n, n + 5, n, 1.0 / (double)(n + 5), 0.0);
	for (size_t i = 0; i < n; i++)
		W[i * n + i] += shift;
	for (size_t i = 0; i < n * n; i++)
		W[i] = f[i] = (float)W[i];
	return W;
}

static void to_float(float *f, const double *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f[i] = (float)d[i];
}

/* Cholesky (upper triangle NaN: only the lower one may be read), the triangular inverse of the
 * reference factor, and the SPD inverse, each against cl/ref by normalised error. */
clp_status ck_run_kfac_inverse(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const size_t n = c->d[0], nn = n * n;
	float *fW = ck_alloc(e, nn * 4), *got = ck_alloc(e, nn * 4);
	double *W = ck_spd(e, n, 0.05, fW), *L = ck_alloc(e, nn * 8), *X = ck_alloc(e, nn * 8);
	double *inv = ck_alloc(e, nn * 8);
	clp_buf bw, bws, bi, binfo;
	int32_t info = 0;

	CK_NEED(fW && got && W && L && X && inv);
	memcpy(L, W, nn * 8);
	if (clp_ref_cholesky(L, n) || clp_ref_spd_inverse(inv, W, n))
		return clp_error(CLP_ERR_NUMERIC, "check: reference Cholesky failed (n=%zu)", n);
	memcpy(X, L, nn * 8);
	clp_ref_trtri(X, n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			fW[i * n + j] = NAN;
	CLP_TRY(ck_buf(e, fW, nn, CLP_F32, &bw));
	CLP_TRY(ck_buf(e, NULL, clp_kfac_workspace(e->ctx, n), CLP_F32, &bws));
	CLP_TRY(ck_buf(e, NULL, nn, CLP_F32, &bi));
	CLP_TRY(ck_buf_i32(e, &info, 1, &binfo));
	CLP_TRY(clp_kfac_cholesky(e->ctx, bw, n, bws, binfo));
	CLP_TRY(ck_get(e, bw, nn, got));
	ck_compare_norm(e, "cholesky", got, L, nn, op->stat.rtol);
	CLP_TRY(clp_cl_read(e->ctx, binfo.mem, 0, 4, &info));
	if (info)
		return clp_error(CLP_ERR_NUMERIC, "check: device Cholesky reported pivot %d not "
				 "positive on an SPD matrix (n=%zu)", info - 1, n);
	to_float(fW, L, nn);
	CLP_TRY(clp_cl_write(e->ctx, bw.mem, bw.off * 4, nn * 4, fW));
	CLP_TRY(clp_kfac_trtri(e->ctx, bw, n, bws));
	CLP_TRY(ck_get(e, bw, nn, got));
	ck_compare_norm(e, "trtri", got, X, nn, op->stat.rtol);
	to_float(fW, W, nn);
	CLP_TRY(clp_cl_write(e->ctx, bw.mem, bw.off * 4, nn * 4, fW));
	CLP_TRY(clp_kfac_spd_inverse(e->ctx, bi, bw, n, bws, binfo));
	CLP_TRY(ck_get(e, bi, nn, got));
	ck_compare_norm(e, "inverse", got, inv, nn, op->out[CLP_F32].rtol);
	return CLP_OK;
}

/* P = Binv G Ainv, G in the Linear layout (O, I) or (in_out) GPT-2's Conv1D (I, O), a row
 * stride 2 wider and an offset of one element */
clp_status ck_run_kfac_precondition(ck_env *e, const ck_case *c)
{
	const size_t O = c->d[0], I = c->d[1];
	const int in_out = c->variant == 1;
	const size_t ldg = (in_out ? O : I) + 2, rows = in_out ? I : O, cols = in_out ? O : I;
	float *fA = ck_alloc(e, I * I * 4), *fB = ck_alloc(e, O * O * 4);
	double *Ai = ck_spd(e, I, 0.1, fA), *Bi = ck_spd(e, O, 0.1, fB);
	float *fG = ck_rand(e, rows * ldg, -1, 1), *got = ck_alloc(e, O * I * 4);
	double *G = ck_dbl(e, fG, rows * ldg), *ref = ck_alloc(e, O * I * 8);
	clp_buf ba, bb, bg, bp, bt;

	CK_NEED(fA && fB && Ai && Bi && fG && got && G && ref);
	CLP_TRY(ck_buf(e, fA, I * I, CLP_F32, &ba));
	CLP_TRY(ck_buf(e, fB, O * O, CLP_F32, &bb));
	CLP_TRY(ck_buf(e, fG, rows * ldg, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, NULL, O * I, CLP_F32, &bp));
	CLP_TRY(ck_buf(e, NULL, O * I, CLP_F32, &bt));
	CLP_TRY(clp_kfac_precondition(e->ctx, bp, cols, clp_buf_plus(bg, 1), ldg, bb, ba, O, I,
				      in_out, bt));
	clp_ref_kfac_precondition(ref, G + 1, ldg, Bi, Ai, O, I, in_out);
	CLP_TRY(ck_get(e, bp, O * I, got));
	ck_compare(e, "P", CLP_F32, got, ref, O * I, c->op->out[CLP_F32]);
	return CLP_OK;
}
