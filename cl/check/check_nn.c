/* clpipe check cases of the row and elementwise kernels: LayerNorm, RMSNorm, GELU, SwiGLU, bias,
 * embeddings and RoPE, in the storage type of the case (values rounded to it, gradients and
 * statistics fp32), against cl/ref's double references; backward against central differences
 * of the reference forward at the rounded inputs. The inputs and checks follow tests/nn/. */
#include <math.h>
#include <string.h>

#include "cl/check/check_internal.h"
#include "cl/ref/nn_ref.h"

#define GOT(n) float *got = ck_alloc(e, ((n) ? (n) : 1) * sizeof(float))

/* the device gradient without its starting value */
static double *delta(ck_env *e, const float *got, const float *start, size_t n)
{
	double *d = ck_alloc(e, n * sizeof(double));

	for (size_t i = 0; d && i < n; i++)
		d[i] = (double)got[i] - start[i];
	return d;
}

/* ---- LayerNorm, RMSNorm ------------------------------------------------------------------- */

struct fd_norm {
	float *inp, *w, *b, *g;
	size_t N, C;
	int rms;
	double *out;
};

static double norm_loss(void *ud)
{
	struct fd_norm *f = ud;

	if (f->rms)
		clp_ref_rmsnorm_forward(f->out, NULL, f->inp, f->w, f->N, f->C, 1e-5f);
	else
		clp_ref_layernorm_forward(f->out, NULL, NULL, f->inp, f->w, f->b, f->N, f->C, 1e-5f);
	return ck_dot(f->g, f->out, f->N * f->C);
}

clp_status ck_run_norm(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const int rms = !strcmp(op->name, "rmsnorm");
	const clp_dtype dt = c->dt;
	const size_t N = c->d[0], C = c->d[1], nc = N * C;
	float *inp = ck_rand(e, nc, -2, 3), *w = ck_rand(e, C, 0.5f, 1.5f), *b = ck_rand(e, C, -1, 1);
	float *g = ck_rand(e, nc, -1, 1), *di0 = ck_rand(e, nc, -1, 1), *dw0 = ck_rand(e, C, -1, 1);
	float *db0 = ck_rand(e, C, -1, 1);
	double *out = ck_alloc(e, nc * 8), *mean = ck_alloc(e, N * 8), *rstd = ck_alloc(e, N * 8);
	double *dinp = ck_dbl(e, di0, nc), *dw = ck_dbl(e, dw0, C), *db = ck_dbl(e, db0, C);
	GOT(nc);
	float *gw = ck_alloc(e, C * 4), *gb = ck_alloc(e, C * 4);
	clp_buf bi, bw, bb, bo, bg, bm, br, bdi, bdw, bdb;

	CK_NEED(inp && w && b && g && di0 && dw0 && db0 && out && mean && rstd && dinp && dw &&
		db && got && gw && gb);
	ck_round(dt, inp, nc), ck_round(dt, w, C), ck_round(dt, b, C);
	CLP_TRY(ck_buf(e, inp, nc, dt, &bi));
	CLP_TRY(ck_buf(e, w, C, dt, &bw));
	CLP_TRY(ck_buf(e, b, C, dt, &bb));
	CLP_TRY(ck_buf(e, NULL, nc, dt, &bo));
	CLP_TRY(ck_buf(e, g, nc, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, NULL, N, CLP_F32, &bm));
	CLP_TRY(ck_buf(e, NULL, N, CLP_F32, &br));
	CLP_TRY(ck_buf(e, di0, nc, CLP_F32, &bdi));
	CLP_TRY(ck_buf(e, dw0, C, CLP_F32, &bdw));
	CLP_TRY(ck_buf(e, db0, C, CLP_F32, &bdb));
	if (rms) {
		clp_ref_rmsnorm_forward_st(dt, out, rstd, inp, w, N, C, 1e-5f);
		clp_ref_rmsnorm_backward(dinp, dw, g, inp, w, N, C, 1e-5f);
		CLP_TRY(clp_nn_rmsnorm_forward(e->ctx, bo, br, bi, bw, N, C, 1e-5f));
		CLP_TRY(clp_nn_rmsnorm_backward(e->ctx, bdi, bdw, bg, bi, bw, br, N, C));
	} else {
		clp_ref_layernorm_forward_st(dt, out, mean, rstd, inp, w, b, N, C, 1e-5f);
		clp_ref_layernorm_backward(dinp, dw, db, g, inp, w, N, C, 1e-5f);
		CLP_TRY(clp_nn_layernorm_forward(e->ctx, bo, bm, br, bi, bw, bb, N, C, 1e-5f));
		CLP_TRY(clp_nn_layernorm_backward(e->ctx, bdi, bdw, bdb, bg, bi, bw, bm, br, N, C));
	}
	CLP_TRY(ck_get(e, bo, nc, got));
	ck_compare(e, "out", dt, got, out, nc, op->out[dt]);
	CLP_TRY(ck_get(e, br, N, got));
	ck_compare(e, "rstd", CLP_F32, got, rstd, N, op->stat);
	if (!rms) {
		CLP_TRY(ck_get(e, bm, N, got));
		ck_compare(e, "mean", CLP_F32, got, mean, N, op->stat);
	}
	CLP_TRY(ck_get(e, bdi, nc, got));
	CLP_TRY(ck_get(e, bdw, C, gw));
	CLP_TRY(ck_get(e, bdb, C, gb));
	if (c->flags & CK_FD) {
		struct fd_norm f = {inp, w, b, g, N, C, rms, out};
		double *ki = delta(e, got, di0, nc), *kw = delta(e, gw, dw0, C);
		double *kb = delta(e, gb, db0, C);

		CK_NEED(ki && kw && kb);
		if (C > 1) /* C = 1: the output does not depend on the input */
			ck_fd(e, "dinp", inp, nc, ki, norm_loss, &f, op->fd[dt]);
		ck_fd(e, "dw", w, C, kw, norm_loss, &f, op->fd[dt]);
		if (!rms)
			ck_fd(e, "db", b, C, kb, norm_loss, &f, op->fd[dt]);
	}
	ck_compare(e, "dinp", CLP_F32, got, dinp, nc, op->grad);
	ck_compare(e, "dw", CLP_F32, gw, dw, C, op->grad);
	if (!rms)
		ck_compare(e, "db", CLP_F32, gb, db, C, op->grad);
	return CLP_OK;
}

/* ---- GELU, SwiGLU ------------------------------------------------------------------------- */

struct fd_act {
	float *x;
	size_t n, ld, F;
	int kind; /* 0, 1: GELU kinds; 2: SwiGLU */
	const float *g;
	double *out;
};

static double act_loss(void *ud)
{
	struct fd_act *f = ud;

	if (f->kind == 2) {
		clp_ref_swiglu_forward(f->out, f->x, f->x + f->F, f->ld, f->n, f->F);
		return ck_dot(f->g, f->out, f->n * f->F);
	}
	clp_ref_gelu_forward(f->out, f->x, f->n, (clp_nn_gelu)f->kind);
	return ck_dot(f->g, f->out, f->n);
}

clp_status ck_run_gelu(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t n = c->d[0];
	const clp_nn_gelu kind = c->variant ? CLP_NN_GELU_ERF : CLP_NN_GELU_TANH;
	float *x = ck_rand(e, n, -5, 5), *g = ck_rand(e, n, -1, 1), *d0 = ck_rand(e, n, -1, 1);
	double *ref = ck_alloc(e, n * 8), *dref = ck_dbl(e, d0, n);
	GOT(n);
	clp_buf bx, bo, bg, bd;

	CK_NEED(x && g && d0 && ref && dref && got);
	ck_round(dt, x, n);
	CLP_TRY(ck_buf(e, x, n, dt, &bx));
	CLP_TRY(ck_buf(e, NULL, n, dt, &bo));
	CLP_TRY(ck_buf(e, g, n, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, d0, n, CLP_F32, &bd));
	clp_ref_gelu_forward_st(dt, ref, x, n, kind);
	clp_ref_gelu_backward(dref, g, x, n, kind);
	CLP_TRY(clp_nn_gelu_forward(e->ctx, bo, bx, n, kind));
	CLP_TRY(clp_nn_gelu_backward(e->ctx, bd, bg, bx, n, kind));
	CLP_TRY(ck_get(e, bo, n, got));
	ck_compare(e, "out", dt, got, ref, n, op->out[dt]);
	CLP_TRY(ck_get(e, bd, n, got));
	if (c->flags & CK_FD) {
		struct fd_act f = {x, n, 0, 0, (int)kind, g, ref};
		double *k = delta(e, got, d0, n);

		CK_NEED(k);
		ck_fd(e, "dinp", x, n, k, act_loss, &f, op->fd[dt]);
	}
	ck_compare(e, "dinp", CLP_F32, got, dref, n, op->grad);
	return CLP_OK;
}

clp_status ck_run_swiglu(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t N = c->d[0], F = c->d[1], ld = 2 * F, nh = N * ld, no = N * F;
	float *h = ck_rand(e, nh, -4, 4), *g = ck_rand(e, no, -1, 1), *d0 = ck_rand(e, nh, -1, 1);
	double *ref = ck_alloc(e, no * 8), *dref = ck_dbl(e, d0, nh);
	GOT(nh);
	clp_buf bh, bo, bg, bd;

	CK_NEED(h && g && d0 && ref && dref && got);
	ck_round(dt, h, nh);
	CLP_TRY(ck_buf(e, h, nh, dt, &bh));
	CLP_TRY(ck_buf(e, NULL, no, dt, &bo));
	CLP_TRY(ck_buf(e, g, no, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, d0, nh, CLP_F32, &bd));
	/* LLaMA's fused layout: gate = h, up = h + F, row stride 2F */
	clp_ref_swiglu_forward_st(dt, ref, h, h + F, ld, N, F);
	clp_ref_swiglu_backward(dref, dref + F, g, h, h + F, ld, N, F);
	CLP_TRY(clp_nn_swiglu_forward(e->ctx, bo, bh, clp_buf_plus(bh, F), ld, N, F));
	CLP_TRY(clp_nn_swiglu_backward(e->ctx, bd, clp_buf_plus(bd, F), bg, bh, clp_buf_plus(bh, F),
				       ld, N, F));
	CLP_TRY(ck_get(e, bo, no, got));
	ck_compare(e, "out", dt, got, ref, no, op->out[dt]);
	CLP_TRY(ck_get(e, bd, nh, got));
	if (c->flags & CK_FD) {
		struct fd_act f = {h, N, ld, F, 2, g, ref};
		double *k = delta(e, got, d0, nh);

		CK_NEED(k);
		ck_fd(e, "dgate,dup", h, nh, k, act_loss, &f, op->fd[dt]);
	}
	ck_compare(e, "dgate,dup", CLP_F32, got, dref, nh, op->grad);
	return CLP_OK;
}

/* ---- bias --------------------------------------------------------------------------------- */

clp_status ck_run_bias(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t N = c->d[0], C = c->d[1], nc = N * C;
	float *x = ck_rand(e, nc, -2, 2), *bias = ck_rand(e, C, -1, 1), *g = ck_rand(e, nc, -1, 1);
	float *db0 = ck_rand(e, C, -1, 1);
	double *ref = ck_dbl(e, x, nc), *dref = ck_dbl(e, db0, C);
	GOT(nc);
	clp_buf bx, bb, bg, bd;

	CK_NEED(x && bias && g && db0 && ref && dref && got);
	ck_round(dt, x, nc), ck_round(dt, bias, C);
	for (size_t i = 0; i < nc; i++)
		ref[i] = x[i];
	CLP_TRY(ck_buf(e, x, nc, dt, &bx));
	CLP_TRY(ck_buf(e, bias, C, dt, &bb));
	CLP_TRY(ck_buf(e, g, nc, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, db0, C, CLP_F32, &bd));
	clp_ref_bias_forward_st(dt, ref, bias, N, C);
	clp_ref_bias_backward(dref, g, N, C);
	CLP_TRY(clp_nn_bias_forward(e->ctx, bx, bb, N, C));
	CLP_TRY(clp_nn_bias_backward(e->ctx, bd, bg, N, C));
	CLP_TRY(ck_get(e, bx, nc, got));
	ck_compare(e, "out", dt, got, ref, nc, op->out[dt]);
	CLP_TRY(ck_get(e, bd, C, got));
	ck_compare(e, "dbias", CLP_F32, got, dref, C, op->grad);
	return CLP_OK;
}

/* ---- embeddings --------------------------------------------------------------------------- */

struct fd_emb {
	const int32_t *tok;
	float *wte, *wpe;
	const float *g;
	size_t B, T, C;
	double *out;
};

static double emb_loss(void *ud)
{
	struct fd_emb *f = ud;

	clp_ref_embed_forward(f->out, f->tok, NULL, f->wte, f->wpe, NULL, f->B, f->T, f->C);
	return ck_dot(f->g, f->out, f->B * f->T * f->C);
}

/* GPT-2's token + learned position embedding (variant 0) or LLaMA's tokens only (1). */
clp_status ck_run_embed(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t B = c->d[0], T = c->d[1], C = c->d[2], V = c->d[3], n = B * T, nc = n * C;
	const int pos = c->variant == 0;
	int32_t *tok = ck_alloc(e, n * 4);
	float *wte = ck_rand(e, V * C, -1, 1), *wpe = ck_rand(e, T * C, -1, 1);
	float *g = ck_rand(e, nc, -1, 1), *d0 = ck_rand(e, V * C, -1, 1);
	float *p0 = ck_rand(e, T * C, -1, 1);
	double *out = ck_alloc(e, nc * 8), *dte = ck_dbl(e, d0, V * C), *dpe = ck_dbl(e, p0, T * C);
	GOT(nc > V * C ? (nc > T * C ? nc : T * C) : (V * C > T * C ? V * C : T * C));
	clp_nn_index *ti = NULL;
	clp_buf bt, bte, bpe, bo, bg, bdte, bdpe, none = CLP_BUF_NONE;
	clp_status s;

	CK_NEED(tok && wte && wpe && g && d0 && p0 && out && dte && dpe && got);
	for (size_t i = 0; i < n; i++) /* ids repeat; the last one is never used */
		tok[i] = (int32_t)(ck_next(e) % (V > 1 ? V - 1 : 1));
	ck_round(dt, wte, V * C), ck_round(dt, wpe, T * C);
	CLP_TRY(ck_buf_i32(e, tok, n, &bt));
	CLP_TRY(ck_buf(e, wte, V * C, dt, &bte));
	CLP_TRY(ck_buf(e, wpe, T * C, dt, &bpe));
	CLP_TRY(ck_buf(e, NULL, nc, dt, &bo));
	CLP_TRY(ck_buf(e, g, nc, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, d0, V * C, CLP_F32, &bdte));
	CLP_TRY(ck_buf(e, p0, T * C, CLP_F32, &bdpe));
	clp_ref_embed_forward_st(dt, out, tok, NULL, wte, pos ? wpe : NULL, NULL, B, T, C);
	clp_ref_embed_backward(dte, pos ? dpe : NULL, NULL, g, tok, NULL, B, T, C);
	CLP_TRY(clp_nn_index_build(e->ctx, &ti, tok, n, V, "check tokens"));
	s = clp_nn_embed_forward(e->ctx, bo, bt, none, bte, pos ? bpe : none, none, B, T, C, V, 0);
	if (s == CLP_OK)
		s = clp_nn_embed_backward(e->ctx, bdte, pos ? bdpe : none, none, bg, ti, NULL, B, T,
					  C);
	if (s == CLP_OK)
		s = clp_cl_finish(e->ctx);
	clp_nn_index_free(ti);
	CLP_TRY(s);
	CLP_TRY(ck_get(e, bo, nc, got));
	ck_compare(e, "out", dt, got, out, nc, op->out[dt]);
	CLP_TRY(ck_get(e, bdte, V * C, got));
	if (c->flags & CK_FD) {
		struct fd_emb f = {tok, wte, pos ? wpe : NULL, g, B, T, C, out};
		double *k = delta(e, got, d0, V * C);

		CK_NEED(k);
		ck_fd(e, "dwte", wte, V * C, k, emb_loss, &f, op->fd[dt]);
	}
	ck_compare(e, "dwte", CLP_F32, got, dte, V * C, op->grad);
	if (pos) {
		CLP_TRY(ck_get(e, bdpe, T * C, got));
		ck_compare(e, "dwpe", CLP_F32, got, dpe, T * C, op->grad);
	}
	return CLP_OK;
}

/* ---- RoPE --------------------------------------------------------------------------------- */

struct fd_rope {
	float *x;
	const float *tab, *g;
	size_t ld, B, T, nh, hd;
	double *out;
};

static double rope_loss(void *ud)
{
	struct fd_rope *f = ud;
	size_t n = f->B * f->T * f->ld;

	for (size_t i = 0; i < n; i++)
		f->out[i] = f->x[i];
	clp_ref_rope(f->out, f->x, f->ld, f->tab, f->B, f->T, f->nh, f->hd, 1);
	return ck_dot(f->g, f->out, n);
}

/* In place on rows wider than the rotated heads (the other heads of a fused QKV row). */
clp_status ck_run_rope(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t B = c->d[0], T = c->d[1], nh = c->d[2], hd = c->d[3];
	const size_t ld = nh * hd + 3, n = B * T * ld;
	float *x = ck_rand(e, n, -2, 2), *tab = ck_alloc(e, T * hd * 4), *g = ck_rand(e, n, -1, 1);
	double *ref = ck_alloc(e, n * 8), *gr = ck_dbl(e, g, n), *gd = ck_alloc(e, n * 8);
	GOT(n);
	clp_buf bx, bt, bg;

	CK_NEED(x && tab && g && ref && gr && gd && got);
	ck_round(dt, x, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = x[i];
	clp_nn_rope_table(tab, T, hd, 500000.0f);
	CLP_TRY(ck_buf(e, x, n, dt, &bx));
	CLP_TRY(ck_buf(e, tab, T * hd, CLP_F32, &bt));
	CLP_TRY(ck_buf(e, g, n, CLP_F32, &bg));
	clp_ref_rope_st(dt, ref, x, ld, tab, B, T, nh, hd, 1);
	clp_ref_rope(gr, g, ld, tab, B, T, nh, hd, -1);
	CLP_TRY(clp_nn_rope_forward(e->ctx, bx, ld, bt, B, T, nh, hd));
	CLP_TRY(clp_nn_rope_backward(e->ctx, bg, ld, bt, B, T, nh, hd));
	CLP_TRY(ck_get(e, bx, n, got));
	ck_compare(e, "out", dt, got, ref, n, op->out[dt]);
	CLP_TRY(ck_get(e, bg, n, got));
	if (c->flags & CK_FD) {
		struct fd_rope f = {x, tab, g, ld, B, T, nh, hd, ck_alloc(e, n * 8)};

		CK_NEED(f.out);
		for (size_t i = 0; i < n; i++)
			gd[i] = got[i];
		ck_fd(e, "dx", x, n, gd, rope_loss, &f, op->fd[dt]);
	}
	ck_compare(e, "dx", CLP_F32, got, gr, n, op->grad);
	return CLP_OK;
}
