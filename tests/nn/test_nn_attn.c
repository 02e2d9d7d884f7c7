/* Fused attention, forward and backward, both kernel shapes (CPU; GPU forced on this device),
 * against the naive double reference: causal and bidirectional, GQA, key padding, head
 * dimensions that are not multiples of 8, GPT-2's fused QKV rows. The reference backward
 * against finite differences. */
#include "cl/ops.h"
#include "tests/nn/nn_test.h"

struct cfg {
	size_t B, T, H, KVH, hd;
	int causal, fused, padded;
};

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
	return tn_dot(f->g, f->out, f->a->B * f->a->T * f->a->H * f->a->hd);
}

/* All of Q, K, V live in one host array: fused rows [q | k | v | pad] with one stride, or three
 * dense blocks one after the other. */
static void check_attn(const struct cfg *c, int gpu, int fd, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	clp_nn_attn a = {c->B, c->T, c->H, c->KVH, c->hd, 0, 0, 0, 0, c->causal, 0.0f, CLP_BUF_NONE};
	const size_t N = c->B * c->T, qw = c->H * c->hd, kw = c->KVH * c->hd, no = N * qw;
	size_t qo, ko, vo, nx;
	int32_t kvl[4] = {0};
	float *x, *g, *d0, *got;
	double *out, *lse, *dx;
	cl_mem mx, mg, md, mo, ml, mk = NULL;
	char what[128];

	if (c->fused) {
		size_t S = qw + 2 * kw + 3;

		a.ldq = a.ldk = a.ldv = S;
		qo = 0, ko = qw, vo = qw + kw, nx = N * S;
	} else {
		a.ldq = qw, a.ldk = a.ldv = kw;
		qo = 0, ko = N * qw, vo = N * (qw + kw), nx = N * (qw + 2 * kw);
	}
	a.ldo = qw;
	x = tn_rand(r, nx, -1.5f, 1.5f), g = tn_rand(r, no, -1, 1), d0 = tn_rand(r, nx, -1, 1);
	got = malloc((nx > no ? nx : no) * 4);
	out = malloc(no * 8), lse = malloc(c->B * c->H * c->T * 8), dx = tn_dbl(d0, nx);
	for (size_t b = 0; b < c->B && c->padded; b++)
		kvl[b] = (int32_t)(b % 2 ? c->T : (c->T * 2 + 2) / 3);
	mx = tn_buf(x, nx), mg = tn_buf(g, no), md = tn_buf(d0, nx);
	ml = tn_buf(NULL, c->B * c->H * c->T);
	th_poison(got, no);
	mo = tn_buf(got, no);
	if (c->padded) {
		mk = tn_buf(kvl, c->B);
		a.kv_len = clp_buf_at(mk, 0);
	}
	snprintf(what, sizeof(what), "%s attention B=%zu T=%zu H=%zu KVH=%zu hd=%zu %s%s%s",
		 gpu ? "GPU-shape" : "CPU-shape", c->B, c->T, c->H, c->KVH, c->hd,
		 c->causal ? "causal" : "bidirectional", c->fused ? " fused" : "",
		 c->padded ? " padded" : "");
	clp_ref_attention_forward(out, lse, x + qo, x + ko, x + vo, &a, c->padded ? kvl : NULL);
	clp_ref_attention_backward(dx + qo, dx + ko, dx + vo, g, x + qo, x + ko, x + vo, &a,
				   c->padded ? kvl : NULL);
	clp_nn_set_shape(gpu ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU);
	CHECK_OK(clp_nn_attention_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(ml, 0),
					  clp_buf_at(mx, qo), clp_buf_at(mx, ko), clp_buf_at(mx, vo),
					  &a));
	CHECK_OK(clp_nn_attention_backward(ctx, clp_buf_at(md, qo), clp_buf_at(md, ko),
					   clp_buf_at(md, vo), clp_buf_at(mg, 0), clp_buf_at(mx, qo),
					   clp_buf_at(mx, ko), clp_buf_at(mx, vo), clp_buf_at(mo, 0),
					   clp_buf_at(ml, 0), &a));
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	tn_get(mo, 0, got, no);
	th_close(what, got, out, no, 2e-6, 1e-5);
	tn_get(ml, 0, got, c->B * c->H * c->T);
	th_close(what, got, lse, c->B * c->H * c->T, 2e-6, 1e-5);
	tn_get(md, 0, got, nx);
	th_close(what, got, dx, nx, 1e-5, 1e-4);
	if (fd) {
		struct fd_att f = {x, g, &a, c->padded ? kvl : NULL, qo, ko, vo, out, lse};
		double *gr = tn_dbl(NULL, nx), e;

		clp_ref_attention_backward(gr + qo, gr + ko, gr + vo, g, x + qo, x + ko, x + vo, &a,
					   c->padded ? kvl : NULL);
		e = tn_fd(x, nx, 1, gr, att_loss, &f, 1e-3f);
		CHECK(e < TN_FD_TOL, "%s: reference backward vs finite differences %g", what, e);
		free(gr);
	}
	clReleaseMemObject(mx), clReleaseMemObject(mg), clReleaseMemObject(md);
	clReleaseMemObject(mo), clReleaseMemObject(ml);
	if (mk)
		clReleaseMemObject(mk);
	free(x), free(g), free(d0), free(got), free(out), free(lse), free(dx);
}

static const struct cfg cfgs[] = {
	{1, 1, 1, 1, 1, 1, 0, 0},
	{2, 7, 2, 2, 8, 1, 0, 0},     /* plain causal */
	{2, 17, 2, 2, 8, 1, 1, 0},    /* GPT-2 fused QKV rows */
	{1, 33, 4, 2, 12, 1, 0, 0},   /* GQA, hd not a multiple of 8 */
	{2, 20, 3, 1, 16, 0, 1, 1},   /* BERT-like: bidirectional, key padding; multi-query */
	{2, 9, 2, 1, 5, 0, 0, 0},     /* bidirectional, odd hd */
	{1, 100, 2, 1, 64, 1, 0, 0},  /* longer, several key blocks */
};
#define NCFG (sizeof(cfgs) / sizeof(cfgs[0]))

static void test_cpu_shape(void)
{
	th_rng r = th_rng_seed(31);

	if (!th_ctx())
		return;
	for (size_t i = 0; i < NCFG; i++)
		check_attn(&cfgs[i], 0, i == 1 || i == 4 || i == 5, &r);
}

static void test_gpu_shape(void)
{
	th_rng r = th_rng_seed(32);

	if (!th_ctx())
		return;
	for (size_t i = 0; i < NCFG; i++)
		check_attn(&cfgs[i], 1, 0, &r);
}

static void test_deterministic(void)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(33);
	clp_nn_attn a = {2, 19, 4, 2, 16, 64, 32, 32, 64, 1, 0.0f, CLP_BUF_NONE};
	const size_t nq = 2 * 19 * 64, nk = 2 * 19 * 32;
	float *q = tn_rand(&r, nq, -1, 1), *k = tn_rand(&r, nk, -1, 1), *v = tn_rand(&r, nk, -1, 1);
	float *g = tn_rand(&r, nq, -1, 1), *first = malloc(nk * 4), *again = malloc(nk * 4);
	cl_mem mq, mk, mv, mg, mo, ml, mdq, mdk, mdv;

	if (!ctx)
		return;
	mq = tn_buf(q, nq), mk = tn_buf(k, nk), mv = tn_buf(v, nk), mg = tn_buf(g, nq);
	mo = tn_buf(NULL, nq), ml = tn_buf(NULL, 2 * 4 * 19), mdq = tn_buf(NULL, nq);
	mdk = tn_buf(NULL, nk), mdv = tn_buf(NULL, nk);
	CHECK_OK(clp_nn_attention_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(ml, 0),
					  clp_buf_at(mq, 0), clp_buf_at(mk, 0), clp_buf_at(mv, 0), &a));
	for (int rep = 0; rep < 2; rep++) {
		CHECK_OK(clp_cl_fill(ctx, clp_buf_at(mdk, 0), 0.0f, nk));
		CHECK_OK(clp_nn_attention_backward(ctx, clp_buf_at(mdq, 0), clp_buf_at(mdk, 0),
						   clp_buf_at(mdv, 0), clp_buf_at(mg, 0),
						   clp_buf_at(mq, 0), clp_buf_at(mk, 0),
						   clp_buf_at(mv, 0), clp_buf_at(mo, 0),
						   clp_buf_at(ml, 0), &a));
		tn_get(mdk, 0, rep ? again : first, nk);
	}
	CHECK(memcmp(first, again, nk * 4) == 0, "dk differs between two identical runs");
	a.H = 3;
	CHECK_ERR(clp_nn_attention_forward(ctx, clp_buf_at(mo, 0), clp_buf_at(ml, 0),
					   clp_buf_at(mq, 0), clp_buf_at(mk, 0), clp_buf_at(mv, 0), &a),
		  CLP_ERR_INVALID, "KVH must divide H");
	clReleaseMemObject(mq), clReleaseMemObject(mk), clReleaseMemObject(mv);
	clReleaseMemObject(mg), clReleaseMemObject(mo), clReleaseMemObject(ml);
	clReleaseMemObject(mdq), clReleaseMemObject(mdk), clReleaseMemObject(mdv);
	free(q), free(k), free(v), free(g), free(first), free(again);
}

TH_MAIN(TH_TEST(test_cpu_shape), TH_TEST(test_gpu_shape), TH_TEST(test_deterministic))
