/* Build and run every nn kernel once on tiny inputs, so later runs find them in the engine's
 * and PoCL's caches (PoCL compiles once per kernel and local size). */
#include "cl/nn_internal.h"

#include <string.h>
#include <time.h>

#include "cl/ops.h"
#include "cl/base/clock.h"

#define WB 4096 /* floats per warmup buffer */

static clp_status run_all(clp_cl_ctx *ctx, cl_mem f[6], cl_mem ids, FILE *log)
{
	const int32_t host_ids[8] = {1, 2, 3, 1, 0, 2, 2, 1};
	clp_nn_index *idx = NULL;
	clp_rng_stream rs;
	clp_nn_adamw_hp hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
	clp_nn_attn at = {1, 8, 2, 1, 64, 128, 64, 64, 128, 1, 0.0f, CLP_BUF_NONE};
	clp_buf a = clp_buf_at(f[0], 0), b = clp_buf_at(f[1], 0), c = clp_buf_at(f[2], 0),
		d = clp_buf_at(f[3], 0), e = clp_buf_at(f[4], 0), g = clp_buf_at(f[5], 0),
		none = CLP_BUF_NONE, ib = clp_buf_at(ids, 0);
	size_t ng = 64;
	double t0 = clp_now();
	clp_status s;

	CLP_TRY(clp_rng_stream_init(&rs, 1, 0, 0, 0, CLP_RNG_INIT));
	CLP_TRY(clp_nn_rng_normal(ctx, a, WB, &rs, 0, 0.0f, 0.5f));
	CLP_TRY(clp_nn_rng_uniform(ctx, b, WB, &rs, WB, -1.0f, 1.0f));
	CLP_TRY(clp_nn_rng_u32(ctx, g, 16, &rs, 0));
	CLP_TRY(clp_nn_rng_normal(ctx, g, WB, &rs, 2 * WB, 0.0f, 0.5f));
	CLP_TRY(clp_cl_write(ctx, ids, 0, sizeof(host_ids), host_ids));
	/* rows N = 8, C = 16 */
	CLP_TRY(clp_nn_layernorm_forward(ctx, c, d, e, a, b, b, 8, 16, 1e-5f));
	CLP_TRY(clp_nn_layernorm_backward(ctx, c, d, e, a, b, b, d, e, 8, 16));
	CLP_TRY(clp_nn_rmsnorm_forward(ctx, c, d, a, b, 8, 16, 1e-5f));
	CLP_TRY(clp_nn_rmsnorm_backward(ctx, c, d, a, b, b, d, 8, 16));
	CLP_TRY(clp_nn_bias_forward(ctx, c, b, 8, 16));
	CLP_TRY(clp_nn_bias_backward(ctx, d, c, 8, 16));
	CLP_TRY(clp_nn_gelu_forward(ctx, c, a, 128, CLP_NN_GELU_TANH));
	CLP_TRY(clp_nn_gelu_backward(ctx, c, a, b, 128, CLP_NN_GELU_ERF));
	CLP_TRY(clp_nn_gelu_backward_set(ctx, c, a, b, 128, CLP_NN_GELU_ERF));
	CLP_TRY(clp_nn_bias_gelu_forward(ctx, c, g, b, 8, 16, CLP_NN_GELU_TANH));
	CLP_TRY(clp_nn_residual_layernorm_forward(ctx, g, c, d, e, a, b, b, b, 8, 16, 1e-5f));
	CLP_TRY(clp_nn_swiglu_forward(ctx, c, a, b, 16, 8, 16));
	CLP_TRY(clp_nn_swiglu_backward(ctx, c, d, e, a, b, 16, 8, 16));
	CLP_TRY(clp_nn_residual_forward(ctx, c, a, b, 128));
	CLP_TRY(clp_nn_residual_backward(ctx, c, d, e, 128));
	CLP_TRY(clp_nn_dropout_forward(ctx, c, a, 128, 0.1f, &rs));
	CLP_TRY(clp_nn_dropout_backward(ctx, d, c, 128, 0.1f, &rs));
	if (log)
		fprintf(log, "  nn_norm.cl, nn_act.cl       %6.2f s\n", clp_now() - t0);
	t0 = clp_now();
	/* embeddings B = 2, T = 4, C = 16, V = 4 */
	CLP_TRY(clp_nn_index_build(ctx, &idx, host_ids, 8, 4, "warmup ids"));
	s = clp_nn_embed_forward(ctx, c, ib, none, a, b, none, 2, 4, 16, 4, 0);
	if (s == CLP_OK)
		s = clp_nn_embed_backward(ctx, d, e, none, c, idx, NULL, 2, 4, 16);
	if (s == CLP_OK)
		s = clp_cl_finish(ctx);
	clp_nn_index_free(idx);
	CLP_TRY(s);
	CLP_TRY(clp_nn_rope_forward(ctx, c, 16, b, 2, 4, 2, 8));
	CLP_TRY(clp_nn_rope_backward(ctx, c, 16, b, 2, 4, 2, 8));
	if (log)
		fprintf(log, "  nn_embed.cl                 %6.2f s\n", clp_now() - t0);
	t0 = clp_now();
	/* attention B = 1, T = 8, H = 2, KVH = 1, hd = 64 (the GPU shape builds per head-dim class) */
	CLP_TRY(clp_nn_attention_forward(ctx, c, d, a, clp_buf_at(f[0], 64), b, &at));
	CLP_TRY(clp_nn_attention_backward(ctx, e, g, g, c, a, clp_buf_at(f[0], 64), b, c, d, &at));
	CLP_TRY(clp_cl_finish(ctx));
	if (log)
		fprintf(log, "  %-27s %6.2f s\n",
			clp_nn_gpu_shape(ctx) ? "nn_attn_gpu.cl" : "nn_attn.cl, nn_attn_bwd.cl",
			clp_now() - t0);
	t0 = clp_now();
	/* loss N = 8, C = 16, V = 4: all targets valid */
	CLP_TRY(clp_nn_xent_forward(ctx, c, d, a, b, none, ib, 8, 16, 4, 0));
	CLP_TRY(clp_nn_xent_backward(ctx, e, g, none, a, b, none, ib, d, 0.125f, 8, 16, 4, 0));
	CLP_TRY(clp_nn_xent_mean(ctx, d, c, 8, 0.125f));
	CLP_TRY(clp_nn_grad_stats(ctx, c, &a, &ng, 1, 1.0f));
	CLP_TRY(clp_nn_adamw_update(ctx, a, d, e, b, 64, &hp, 1, c, 1.0f));
	CLP_TRY(clp_cl_finish(ctx));
	if (log)
		fprintf(log, "  nn_xent.cl, nn_optim.cl     %6.2f s\n", clp_now() - t0);
	return CLP_OK;
}

clp_status clp_nn_warmup(clp_cl_ctx *ctx, FILE *log)
{
	cl_mem f[6] = {NULL}, ids = NULL;
	clp_status s = CLP_OK;

	for (int i = 0; i < 6 && s == CLP_OK; i++)
		s = clp_cl_buffer(ctx, WB * sizeof(float), "nn warmup", &f[i]);
	if (s == CLP_OK)
		s = clp_cl_buffer(ctx, 8 * sizeof(int32_t), "nn warmup ids", &ids);
	if (s == CLP_OK)
		s = run_all(ctx, f, ids, log);
	if (ids)
		clReleaseMemObject(ids);
	for (int i = 0; i < 6; i++)
		if (f[i])
			clReleaseMemObject(f[i]);
	return s;
}
