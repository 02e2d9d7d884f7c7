/* Fused attention with 16-bit values (issue 18, cl/nn.h "Storage"): q, k, v and out in bf16 or
 * fp16, lse and every gradient fp32, both kernel shapes (the GPU shape forced on this device),
 * causal and bidirectional, GQA, key padding, T = 1, 7, 33, 127 and head dimensions that are not
 * multiples of 8 (5, 12, 13). Against the storage-aware double reference, the gradients also
 * against finite differences of the forward at the rounded inputs; NaN propagation equal to
 * fp32's; mixed storage types rejected naming the argument.
 *
 * Tolerances:
 *  - out: the reference rounds its double result once to the storage type; the device rounds
 *    its fp32 result once. The fp32 error (what test_nn_attn allows: 2e-6 + 1e-5 |x|) can move a
 *    value across a rounding boundary, so the two may differ by one unit in the last place:
 *    2^-7 |x| for bf16 (8 significant bits), 2^-10 |x| for fp16 (11 bits).
 *  - lse and the gradients given the same (rounded) inputs: fp32 accumulation only, the fp32
 *    test's tolerances. The backward reads the device's 16-bit out (D = rowsum(dout * out)), so
 *    the reference gets that out too.
 *  - finite differences: the exact gradient of the unrounded forward at the rounded inputs
 *    differs from what the kernels compute by D's rounding: out_e carries a relative error up to
 *    u (2^-8 bf16, 2^-11 fp16), so D errs by up to u sum |dout_e out_e|, and dq, dk by that times
 *    P scale: a relative error of order u in the norm (measured 0.15 to 0.25 u on these cases,
 *    both shapes). The test allows u (plus the fp32 test's 1e-5 for the differences
 *    themselves). */
#include "cl/base/half.h"
#include "cl/ops.h"
#include "tests/nn/nn_test.h"

struct cfg {
	size_t B, T, H, KVH, hd;
	int causal, fused, padded, fd;
};

static const struct cfg cfgs[] = {
	{1, 1, 1, 1, 8, 1, 0, 0, 0},     /* one token */
	{2, 7, 2, 2, 5, 1, 0, 0, 1},     /* causal, odd hd */
	{2, 7, 4, 2, 8, 0, 1, 1, 1},     /* bidirectional, GQA, fused rows, key padding */
	{1, 33, 4, 2, 12, 1, 0, 0, 0},   /* GQA, hd not a multiple of 8 */
	{2, 33, 3, 1, 16, 0, 1, 1, 0},   /* multi-query, fused rows, key padding */
	{1, 127, 2, 1, 16, 1, 0, 0, 0},  /* several key blocks and tiles */
	{2, 127, 2, 2, 13, 0, 0, 1, 0},  /* bidirectional, padding, hd 13 */
};
/* Head dimensions up to 16: the GPU shape builds one program per power of two (and storage
 * type), and the 16-bit code does not depend on it; test_nn_attn covers the classes in fp32. */
#define NCFG (sizeof(cfgs) / sizeof(cfgs[0]))

/* A device buffer of n values of type dt holding x rounded (NULL: NaNs, so unwritten elements
 * show). */
static cl_mem st_buf(const float *x, size_t n, clp_dtype dt)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(*h));
	cl_mem m = NULL;

	for (size_t i = 0; i < n; i++)
		h[i] = dt == CLP_BF16 ? clp_bf16_from_f32(x ? x[i] : NAN)
				      : clp_f16_from_f32(x ? x[i] : NAN);
	CHECK_OK(clp_cl_buffer(th_ctx(), (n ? n : 1) * 2, "test", &m));
	if (m && n)
		CHECK_OK(clp_cl_write(th_ctx(), m, 0, n * 2, h));
	free(h);
	return m;
}

static void st_get(cl_mem m, float *dst, size_t n, clp_dtype dt)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(*h));

	CHECK_OK(clp_cl_read(th_ctx(), m, 0, n * 2, h));
	clp_dtype_unpack(dt, dst, h, n);
	free(h);
}

/* one unit in the last place relative to the value (at most); the unit roundoff u is half */
static double ulp_rtol(clp_dtype dt)
{
	return dt == CLP_BF16 ? 0x1p-7 : 0x1p-10;
}

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

/* Q, K, V in one host array as test_nn_attn lays them out: fused rows [q | k | v | pad] or
 * three dense blocks. */
static void check_st(const struct cfg *c, clp_dtype dt, int gpu, th_rng *r)
{
	clp_cl_ctx *ctx = th_ctx();
	clp_nn_attn a = {c->B, c->T, c->H, c->KVH, c->hd, 0, 0, 0, 0, c->causal, 0.0f, CLP_BUF_NONE};
	const size_t N = c->B * c->T, qw = c->H * c->hd, kw = c->KVH * c->hd, no = N * qw;
	const size_t nl = c->B * c->H * c->T;
	size_t qo, ko, vo, nx;
	int32_t kvl[4] = {0};
	const int32_t *kv = c->padded ? kvl : NULL;
	float *x, *xr, *g, *d0, *got, *o16;
	double *out, *lse, *dx;
	cl_mem mx, mg, md, mo, ml, mk = NULL;
	char what[160];

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
	xr = malloc(nx * 4), got = malloc((nx > no ? nx : no) * 4), o16 = malloc(no * 4);
	for (size_t i = 0; i < nx; i++)
		xr[i] = clp_dtype_round(dt, x[i]);
	out = malloc(no * 8), lse = malloc(nl * 8), dx = tn_dbl(d0, nx);
	for (size_t b = 0; b < c->B && c->padded; b++)
		kvl[b] = (int32_t)(b % 2 ? c->T : (c->T * 2 + 2) / 3);
	mx = st_buf(x, nx, dt), mg = tn_buf(g, no), md = tn_buf(d0, nx);
	mo = st_buf(NULL, no, dt), ml = tn_buf(NULL, nl);
	if (c->padded) {
		mk = tn_buf(kvl, c->B);
		a.kv_len = clp_buf_at(mk, 0);
	}
	snprintf(what, sizeof(what), "%s %s attention B=%zu T=%zu H=%zu KVH=%zu hd=%zu %s%s%s",
		 clp_dtype_name(dt), gpu ? "GPU-shape" : "CPU-shape", c->B, c->T, c->H, c->KVH,
		 c->hd, c->causal ? "causal" : "bidirectional", c->fused ? " fused" : "",
		 c->padded ? " padded" : "");
	clp_ref_attention_forward_st(out, lse, x + qo, x + ko, x + vo, &a, kv, dt);
	clp_nn_set_shape(gpu ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU);
	CHECK_OK(clp_nn_attention_forward(ctx, clp_buf_typed(mo, 0, dt), clp_buf_at(ml, 0),
					  clp_buf_typed(mx, qo, dt), clp_buf_typed(mx, ko, dt),
					  clp_buf_typed(mx, vo, dt), &a));
	CHECK_OK(clp_nn_attention_backward(ctx, clp_buf_at(md, qo), clp_buf_at(md, ko),
					   clp_buf_at(md, vo), clp_buf_at(mg, 0),
					   clp_buf_typed(mx, qo, dt), clp_buf_typed(mx, ko, dt),
					   clp_buf_typed(mx, vo, dt), clp_buf_typed(mo, 0, dt),
					   clp_buf_at(ml, 0), &a));
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	st_get(mo, o16, no, dt);
	th_close(what, o16, out, no, 2e-6, 1e-5 + ulp_rtol(dt));
	tn_get(ml, 0, got, nl);
	th_close(what, got, lse, nl, 2e-6, 1e-5);
	/* the backward's inputs: rounded q, k, v and the device's 16-bit out */
	clp_ref_attention_backward_st(dx + qo, dx + ko, dx + vo, g, x + qo, x + ko, x + vo, o16, &a,
				      kv, dt);
	tn_get(md, 0, got, nx);
	th_close(what, got, dx, nx, 1e-5, 1e-4);
	if (c->fd) {
		struct fd_att f = {xr, g, &a, kv, qo, ko, vo, out, lse};
		double *gr = tn_dbl(NULL, nx), e, tol = 1e-5 + ulp_rtol(dt) / 2;

		for (size_t i = 0; i < nx; i++)
			gr[i] = (double)got[i] - d0[i];
		e = tn_fd(xr, nx, 1, gr, att_loss, &f, 1e-3f);
		CHECK(e < tol, "%s: device backward vs finite differences of the forward at the "
		      "rounded inputs %g (limit %g)", what, e, tol);
		free(gr);
	}
	clReleaseMemObject(mx), clReleaseMemObject(mg), clReleaseMemObject(md);
	clReleaseMemObject(mo), clReleaseMemObject(ml);
	if (mk)
		clReleaseMemObject(mk);
	free(x), free(xr), free(g), free(d0), free(got), free(o16), free(out), free(lse), free(dx);
}

static void run_all(clp_dtype dt, int gpu, uint64_t seed)
{
	th_rng r = th_rng_seed(seed);

	if (!th_ctx())
		return;
	for (size_t i = 0; i < NCFG; i++)
		check_st(&cfgs[i], dt, gpu, &r);
}

static void test_bf16_cpu_shape(void)
{
	run_all(CLP_BF16, 0, 41);
}

static void test_fp16_cpu_shape(void)
{
	run_all(CLP_F16, 0, 42);
}

static void test_bf16_gpu_shape(void)
{
	run_all(CLP_BF16, 1, 43);
}

static void test_fp16_gpu_shape(void)
{
	run_all(CLP_F16, 1, 44);
}

/* One NaN in q: out, lse and the gradients are NaN exactly where fp32's are (and somewhere). */
static void nan_case(clp_dtype dt, int gpu)
{
	clp_cl_ctx *ctx = th_ctx();
	th_rng r = th_rng_seed(45);
	clp_nn_attn a = {1, 7, 2, 1, 8, 16, 8, 8, 16, 1, 0.0f, CLP_BUF_NONE};
	const size_t nq = 7 * 16, nk = 7 * 8, nl = 2 * 7;
	float *q = tn_rand(&r, nq, -1, 1), *k = tn_rand(&r, nk, -1, 1), *v = tn_rand(&r, nk, -1, 1);
	float *g = tn_rand(&r, nq, -1, 1), *res[2][5];
	const size_t n[5] = {nq, nl, nq, nk, nk};
	const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
	int some = 0;

	q[3 * 16 + 8 + 2] = NAN; /* token 3, head 1, element 2 */
	clp_nn_set_shape(gpu ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_CPU);
	for (int p = 0; p < 2; p++) {
		const clp_dtype t = p ? dt : CLP_F32;
		cl_mem mq = p ? st_buf(q, nq, t) : tn_buf(q, nq), mk = p ? st_buf(k, nk, t) : tn_buf(k, nk),
		       mv = p ? st_buf(v, nk, t) : tn_buf(v, nk), mo = p ? st_buf(NULL, nq, t) : tn_buf(NULL, nq);
		cl_mem ml = tn_buf(NULL, nl), mg = tn_buf(g, nq), mdq = tn_buf(NULL, nq),
		       mdk = tn_buf(NULL, nk), mdv = tn_buf(NULL, nk);

		CHECK_OK(clp_nn_attention_forward(ctx, clp_buf_typed(mo, 0, t), clp_buf_at(ml, 0),
						  clp_buf_typed(mq, 0, t), clp_buf_typed(mk, 0, t),
						  clp_buf_typed(mv, 0, t), &a));
		CHECK_OK(clp_nn_attention_backward(ctx, clp_buf_at(mdq, 0), clp_buf_at(mdk, 0),
						   clp_buf_at(mdv, 0), clp_buf_at(mg, 0),
						   clp_buf_typed(mq, 0, t), clp_buf_typed(mk, 0, t),
						   clp_buf_typed(mv, 0, t), clp_buf_typed(mo, 0, t),
						   clp_buf_at(ml, 0), &a));
		for (int i = 0; i < 5; i++)
			res[p][i] = malloc(n[i] * 4);
		if (p)
			st_get(mo, res[p][0], nq, t);
		else
			tn_get(mo, 0, res[p][0], nq);
		tn_get(ml, 0, res[p][1], nl);
		tn_get(mdq, 0, res[p][2], nq);
		tn_get(mdk, 0, res[p][3], nk);
		tn_get(mdv, 0, res[p][4], nk);
		clReleaseMemObject(mq), clReleaseMemObject(mk), clReleaseMemObject(mv);
		clReleaseMemObject(mo), clReleaseMemObject(ml), clReleaseMemObject(mg);
		clReleaseMemObject(mdq), clReleaseMemObject(mdk), clReleaseMemObject(mdv);
	}
	clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	for (size_t i = 0; i < 16; i++)
		CHECK(isnan(res[0][0][3 * 16 + i]) == (i >= 8),
		      "fp32 out[3][%zu]: NaN in head 1's q row reaches exactly that row", i);
	for (int i = 0; i < 5; i++) {
		for (size_t j = 0; j < n[i]; j++) {
			some += isnan(res[0][i][j]) != 0;
			CHECK(!isnan(res[0][i][j]) == !isnan(res[1][i][j]),
			      "%s %s-shape: %s[%zu] is %g, fp32's %g", clp_dtype_name(dt),
			      gpu ? "GPU" : "CPU", names[i], j, res[1][i][j], res[0][i][j]);
		}
		free(res[0][i]), free(res[1][i]);
	}
	CHECK(some > 0, "the NaN reached nothing");
	free(q), free(k), free(v), free(g);
}

static void test_nan(void)
{
	if (!th_ctx())
		return;
	for (int gpu = 0; gpu < 2; gpu++) {
		nan_case(CLP_BF16, gpu);
		nan_case(CLP_F16, gpu);
	}
}

/* Values of one call share one type; gradients, lse and kv_len are 4-byte. */
static void test_mixed_rejected(void)
{
	clp_cl_ctx *ctx = th_ctx();
	clp_nn_attn a = {1, 4, 1, 1, 8, 8, 8, 8, 8, 1, 0.0f, CLP_BUF_NONE};
	cl_mem m;
	clp_buf h, f, e;

	if (!ctx)
		return;
	m = tn_buf(NULL, 64);
	h = clp_buf_typed(m, 0, CLP_BF16), f = clp_buf_at(m, 0), e = clp_buf_typed(m, 0, CLP_F16);
	CHECK_ERR(clp_nn_attention_forward(ctx, h, f, h, f, h, &a), CLP_ERR_INVALID,
		  "attention_forward", "k is fp32", "q is bf16");
	CHECK_ERR(clp_nn_attention_forward(ctx, e, f, h, h, h, &a), CLP_ERR_INVALID,
		  "attention_forward", "out is fp16");
	CHECK_ERR(clp_nn_attention_forward(ctx, h, h, h, h, h, &a), CLP_ERR_INVALID,
		  "attention_forward", "lse is bf16");
	CHECK_ERR(clp_nn_attention_backward(ctx, f, f, f, f, h, h, e, h, f, &a), CLP_ERR_INVALID,
		  "attention_backward", "v is fp16");
	CHECK_ERR(clp_nn_attention_backward(ctx, f, h, f, f, h, h, h, h, f, &a), CLP_ERR_INVALID,
		  "attention_backward", "dk is bf16");
	CHECK_ERR(clp_nn_attention_backward(ctx, f, f, f, e, e, e, e, e, f, &a), CLP_ERR_INVALID,
		  "attention_backward", "dout is fp16");
	a.kv_len = h;
	CHECK_ERR(clp_nn_attention_forward(ctx, h, f, h, h, h, &a), CLP_ERR_INVALID,
		  "attention_forward", "kv_len is bf16");
	clReleaseMemObject(m);
}

TH_MAIN(TH_TEST(test_bf16_cpu_shape), TH_TEST(test_fp16_cpu_shape), TH_TEST(test_bf16_gpu_shape),
	TH_TEST(test_fp16_gpu_shape), TH_TEST(test_nan), TH_TEST(test_mixed_rejected))
