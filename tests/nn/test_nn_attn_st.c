/* Fused attention with 16-bit values (issue 18, cl/nn.h "Storage"): what clpipe check's table
 * does not check. The comparisons with the storage-aware double reference and finite
 * differences (bf16 and fp16, both kernel shapes, the shapes of this test before, tolerances
 * derived in cl/check/check_attn.c) are the op "attention" of cl/check, run on every
 * implementation (cl.check*). Here: NaN propagation equal to fp32's, and mixed storage types
 * rejected naming the argument. */
#include "cl/base/half.h"
#include "cl/ops.h"
#include "tests/nn/nn_test.h"

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

TH_MAIN(TH_TEST(test_nan), TH_TEST(test_mixed_rejected))
