/* Fused attention: what clpipe check's table does not check. Its comparisons against the naive
 * double reference (both kernel shapes, causal and bidirectional, GQA, key padding, head
 * dimensions that are not multiples of 8, GPT-2's fused QKV rows, fp32 and 16-bit storage, the
 * backward against finite differences) are the op "attention" of cl/check (check_attn.c, rows
 * in check_table.c), which runs whole on every implementation CI has (cl.check,
 * cl.check.rusticl, cl.check.intel). Here: the backward is bitwise deterministic, and a KVH
 * that does not divide H is refused. */
#include "cl/ops.h"
#include "tests/nn/nn_test.h"

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

TH_MAIN(TH_TEST(test_deterministic))
