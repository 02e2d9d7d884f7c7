/* clpipe check cases of fused attention (cl/nn.h), in the kernel shape of the case (CPU or GPU,
 * forced), causal or bidirectional, GQA, GPT-2's fused QKV rows and key padding: Q, K and V in
 * one host array (fused rows [q | k | v | pad] or three dense blocks).
 *
 * These cases are the only comparison of the attention kernels with the reference (the ctest
 * tests test_nn_attn*.c keep what a table row cannot say: determinism, NaN propagation, mixed
 * storage refused); cl.check runs them on every implementation.
 *
 * Tolerances (16-bit storage; fp32 out and lse 2e-6 + 1e-5 |x|, gradients 1e-5 + 1e-4 |x|):
 *  - out: the reference rounds its double result once to the storage type; the device rounds
 *    its fp32 result once. The fp32 error (2e-6 + 1e-5 |x|) can move a
 *    value across a rounding boundary, so the two may differ by one unit in the last place:
 *    2^-7 |x| for bf16 (8 significant bits), 2^-10 |x| for fp16 (11 bits).
 *  - lse and the gradients given the same (rounded) inputs: fp32 accumulation only, the fp32
 *    tolerances. The backward reads the device's 16-bit out (D = rowsum(dout * out)), so
 *    the reference gets that out too.
 *  - finite differences: the exact gradient of the unrounded forward at the rounded inputs
 *    differs from what the kernels compute by D's rounding: out_e carries a relative error up to
 *    u (2^-8 bf16, 2^-11 fp16), so D errs by up to u sum |dout_e out_e|, and dq, dk by that times
 *    P scale: a relative error of order u in the norm (measured 0.15 to 0.25 u on these cases,
 *    both shapes). The test allows u (plus fp32's 1e-5 for the differences
 *    themselves). */
#include <math.h>

#include "cl/check/check_internal.h"
#include "cl/ref/nn_ref.h"

/* d[5] bits */
#define AT_FUSED 1u
#define AT_PADDED 2u

struct fd_att {
	float *x;
	const float *g;
	const clp_nn_attn *a;
	const int32_t *kvl;
	size_t qo, ko, vo;
	double *out, *lse;
};

static double att_loss(void *ud)
{
	struct fd_att *f = ud;

	clp_ref_attention_forward(f->out, f->lse, f->x + f->qo, f->x + f->ko, f->x + f->vo, f->a,
				  f->kvl);
	return ck_dot(f->g, f->out, f->a->B * f->a->T * f->a->H * f->a->hd);
}

/* dq, dk and dv each on a line of its own (which of the backward kernels is wrong): the rows of
 * each gathered from the host array (fused rows or dense blocks) */
static clp_status compare_parts(ck_env *e, const clp_nn_attn *a, const float *got,
				const double *ref, size_t qo, size_t ko, size_t vo)
{
	const size_t N = a->B * a->T, w[3] = {a->H * a->hd, a->KVH * a->hd, a->KVH * a->hd};
	const size_t off[3] = {qo, ko, vo}, ld[3] = {a->ldq, a->ldk, a->ldv};
	static const char *const name[3] = {"dq", "dk", "dv"};

	for (int p = 0; p < 3; p++) {
		float *g = ck_alloc(e, N * w[p] * 4);
		double *r = ck_alloc(e, N * w[p] * 8);

		CK_NEED(g && r);
		for (size_t i = 0; i < N; i++)
			for (size_t j = 0; j < w[p]; j++) {
				g[i * w[p] + j] = got[off[p] + i * ld[p] + j];
				r[i * w[p] + j] = ref[off[p] + i * ld[p] + j];
			}
		ck_compare(e, name[p], CLP_F32, g, r, N * w[p], e->c->op->grad);
	}
	return CLP_OK;
}

clp_status ck_run_attention(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t B = c->d[0], T = c->d[1], H = c->d[2], KVH = c->d[3], hd = c->d[4];
	const int fused = (c->d[5] & AT_FUSED) != 0, padded = (c->d[5] & AT_PADDED) != 0;
	clp_nn_attn a = {B, T, H, KVH, hd, 0, 0, 0, 0, c->variant == 0, 0.0f, CLP_BUF_NONE};
	const size_t N = B * T, qw = H * hd, kw = KVH * hd, no = N * qw, nl = B * H * T;
	size_t qo, ko, vo, nx;
	int32_t *kvl = ck_alloc(e, (B ? B : 1) * 4);
	float *x, *g, *d0, *got, *o16;
	double *out, *lse, *dx, *k;
	clp_buf bx, bg, bd, bo, bl, bk;

	if (fused) {
		size_t S = qw + 2 * kw + 3;

		a.ldq = a.ldk = a.ldv = S;
		qo = 0, ko = qw, vo = qw + kw, nx = N * S;
	} else {
		a.ldq = qw, a.ldk = a.ldv = kw;
		qo = 0, ko = N * qw, vo = N * (qw + kw), nx = N * (qw + 2 * kw);
	}
	a.ldo = qw;
	snprintf(e->extra, sizeof(e->extra), "%s%s", fused ? "fused" : "",
		 padded ? (fused ? " padded" : "padded") : "");
	x = ck_rand(e, nx, -1.5f, 1.5f), g = ck_rand(e, no, -1, 1), d0 = ck_rand(e, nx, -1, 1);
	got = ck_alloc(e, (nx > no ? nx : no) * 4), o16 = ck_alloc(e, no * 4);
	out = ck_alloc(e, no * 8), lse = ck_alloc(e, nl * 8), dx = ck_dbl(e, d0, nx);
	CK_NEED(kvl && x && g && d0 && got && o16 && out && lse && dx);
	for (size_t b = 0; b < B && padded; b++)
		kvl[b] = (int32_t)(b % 2 ? T : (T * 2 + 2) / 3);
	ck_round(dt, x, nx);
	CLP_TRY(ck_buf(e, x, nx, dt, &bx));
	CLP_TRY(ck_buf(e, g, no, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, d0, nx, CLP_F32, &bd));
	CLP_TRY(ck_buf(e, NULL, no, dt, &bo));
	CLP_TRY(ck_buf(e, NULL, nl, CLP_F32, &bl));
	if (padded) {
		CLP_TRY(ck_buf_i32(e, kvl, B, &bk));
		a.kv_len = bk;
	}
	clp_ref_attention_forward_st(out, lse, x + qo, x + ko, x + vo, &a, padded ? kvl : NULL,
				     dt);
	CLP_TRY(clp_nn_attention_forward(e->ctx, bo, bl, clp_buf_plus(bx, qo), clp_buf_plus(bx, ko),
					 clp_buf_plus(bx, vo), &a));
	CLP_TRY(clp_nn_attention_backward(e->ctx, clp_buf_plus(bd, qo), clp_buf_plus(bd, ko),
					  clp_buf_plus(bd, vo), bg, clp_buf_plus(bx, qo),
					  clp_buf_plus(bx, ko), clp_buf_plus(bx, vo), bo, bl, &a));
	CLP_TRY(ck_get(e, bo, no, o16));
	CLP_TRY(ck_get(e, bl, nl, got));
	ck_compare(e, "lse", CLP_F32, got, lse, nl, op->stat);
	/* the backward reads the device's stored out (D = rowsum(dout * out)): so does the 16-bit
	 * reference; the fp32 one takes D from its own probabilities */
	clp_ref_attention_backward_st(dx + qo, dx + ko, dx + vo, g, x + qo, x + ko, x + vo,
				      dt == CLP_F32 ? NULL : o16, &a, padded ? kvl : NULL, dt);
	CLP_TRY(ck_get(e, bd, nx, got));
	if (c->flags & CK_FD) {
		struct fd_att f = {x, g, &a, padded ? kvl : NULL, qo, ko, vo, ck_alloc(e, no * 8),
				   ck_alloc(e, nl * 8)};

		k = ck_alloc(e, nx * 8);
		CK_NEED(k && f.out && f.lse);
		for (size_t i = 0; i < nx; i++)
			k[i] = (double)got[i] - d0[i];
		ck_fd(e, "dq,dk,dv", x, nx, k, att_loss, &f, op->fd[dt]);
	}
	CLP_TRY(compare_parts(e, &a, got, dx, qo, ko, vo));
	ck_compare(e, "out", dt, o16, out, no, op->out[dt]);
	return CLP_OK;
}
