/* clpipe bench attn: fused attention forward + backward with 16-bit values (issue 18) against
 * fp32 on one shape (default GPT-2 small's: B=8 T=256 H=12 hd=64, causal, fused QKV rows), the
 * precisions alternating call by call in one process so a loaded machine slows them alike.
 * Prints ms per iteration (host clock, queue finished around each) and the ratio to fp32. Not a
 * test: no thresholds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/clock.h"
#include "cl/convert.h"
#include "cl/nn.h"
#include "cl/ops.h"
#include "tools/cli.h"

#define NP 3 /* fp32, bf16, fp16 */

struct attn_bufs {
	cl_mem qkv[NP], out[NP], lse, dqkv, dout;
};

static clp_status setup(clp_cl_ctx *ctx, struct attn_bufs *m, size_t N, size_t C, size_t nl,
			const int *want)
{
	clp_rng_stream rs;

	CLP_TRY(clp_rng_stream_init(&rs, 5, 1, 0, 0, CLP_RNG_USER));
	CLP_TRY(clp_cl_buffer(ctx, N * 3 * C * 4, "bench qkv", &m->qkv[0]));
	CLP_TRY(clp_cl_buffer(ctx, N * C * 4, "bench out", &m->out[0]));
	CLP_TRY(clp_cl_buffer(ctx, nl * 4, "bench lse", &m->lse));
	CLP_TRY(clp_cl_buffer(ctx, N * 3 * C * 4, "bench dqkv", &m->dqkv));
	CLP_TRY(clp_cl_buffer(ctx, N * C * 4, "bench dout", &m->dout));
	CLP_TRY(clp_nn_rng_uniform(ctx, clp_buf_at(m->qkv[0], 0), N * 3 * C, &rs, 0, -1.0f, 1.0f));
	CLP_TRY(clp_nn_rng_uniform(ctx, clp_buf_at(m->dout, 0), N * C, &rs, N * 3 * C, -1.0f, 1.0f));
	CLP_TRY(clp_cl_fill(ctx, clp_buf_at(m->dqkv, 0), 0.0f, N * 3 * C));
	for (int t = 1; t < NP; t++) {
		if (!want[t])
			continue;
		CLP_TRY(clp_cl_buffer(ctx, N * 3 * C * 2, "bench qkv 16-bit", &m->qkv[t]));
		CLP_TRY(clp_cl_buffer(ctx, N * C * 2, "bench out 16-bit", &m->out[t]));
		CLP_TRY(clp_cl_convert(ctx, clp_buf_typed(m->qkv[t], 0, (clp_dtype)t), (clp_dtype)t,
				       clp_buf_at(m->qkv[0], 0), CLP_F32, N * 3 * C));
	}
	return clp_cl_finish(ctx);
}

/* One forward + backward with values of type t; returns host seconds. */
static clp_status step(clp_cl_ctx *ctx, const struct attn_bufs *m, const clp_nn_attn *a,
		       clp_dtype t, size_t C, double *sec)
{
	clp_buf q = clp_buf_typed(m->qkv[t], 0, t), k = clp_buf_typed(m->qkv[t], C, t),
		v = clp_buf_typed(m->qkv[t], 2 * C, t), o = clp_buf_typed(m->out[t], 0, t);
	double t0;

	CLP_TRY(clp_cl_finish(ctx));
	t0 = clp_now();
	CLP_TRY(clp_nn_attention_forward(ctx, o, clp_buf_at(m->lse, 0), q, k, v, a));
	CLP_TRY(clp_nn_attention_backward(ctx, clp_buf_at(m->dqkv, 0), clp_buf_at(m->dqkv, C),
					  clp_buf_at(m->dqkv, 2 * C), clp_buf_at(m->dout, 0), q, k,
					  v, o, clp_buf_at(m->lse, 0), a));
	CLP_TRY(clp_cl_finish(ctx));
	*sec = clp_now() - t0;
	return CLP_OK;
}

static int parse_precisions(const char *s, int *want)
{
	char buf[64], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "bf16"))
			want[CLP_BF16] = 1;
		else if (!strcmp(tok, "fp16"))
			want[CLP_F16] = 1;
		else if (strcmp(tok, "fp32"))
			return -1;
	}
	return 0;
}

int cmd_bench_attn(int argc, char **argv)
{
	const char *device = NULL, *v, *prec = "bf16";
	long B = 8, T = 256, H = 12, hd = 64, iters = 3;
	int gpu = 0, r, want[NP] = {1, 0, 0};
	double sec[NP] = {0};
	struct attn_bufs m;
	clp_cl_ctx *ctx = NULL;
	clp_status s;

	memset(&m, 0, sizeof(m));
	for (int i = 1; i < argc; i++) {
		long *dst = NULL;

		if (cli_is_help(argv[i])) {
			printf("usage: clpipe bench attn [--device SPEC] [--precision bf16,fp16]\n"
			       "                         [--B N] [--T N] [--H N] [--hd N] [--iters N]\n"
			       "                         [--gpu-shape]\n\n"
			       "Times the fused attention's forward + backward (causal, GPT-2's fused\n"
			       "QKV rows; default B=8 T=256 H=12 hd=64) with q, k, v and out in fp32 and\n"
			       "in each 16-bit precision asked for (default bf16), alternating call by\n"
			       "call, and prints ms per iteration and the ratio to fp32. --gpu-shape\n"
			       "forces the GPU-shaped kernels.\n");
			return 0;
		}
		if (!strcmp(argv[i], "--gpu-shape")) {
			gpu = 1;
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--device", &device)) != 0) {
			if (r < 0)
				return cli_usage_error("bench attn", "--device needs a value");
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--precision", &prec)) != 0) {
			if (r < 0)
				return cli_usage_error("bench attn", "--precision needs a value");
			continue;
		}
		if ((r = cli_value(argc, argv, &i, "--B", &v)) > 0)
			dst = &B;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--T", &v)) > 0)
			dst = &T;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--H", &v)) > 0)
			dst = &H;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--hd", &v)) > 0)
			dst = &hd;
		else if (r == 0 && (r = cli_value(argc, argv, &i, "--iters", &v)) > 0)
			dst = &iters;
		if (r < 0)
			return cli_usage_error("bench attn", "%s needs a value", argv[i]);
		if (!dst)
			return cli_usage_error("bench attn", "unknown option '%s'", argv[i]);
		*dst = strtol(v, NULL, 10);
		if (*dst <= 0)
			return cli_usage_error("bench attn", "%s must be a positive integer",
					       argv[i - 1]);
	}
	if (parse_precisions(prec, want) < 0)
		return cli_usage_error("bench attn", "--precision '%s': a list of fp32, bf16, fp16",
				       prec);
	{
		const size_t C = (size_t)(H * hd), N = (size_t)(B * T);
		clp_nn_attn a = {(size_t)B, (size_t)T, (size_t)H, (size_t)H, (size_t)hd, 3 * C,
				 3 * C, 3 * C, C, 1, 0.0f, CLP_BUF_NONE};

		s = clp_cl_ctx_create(&ctx, device);
		if (s == CLP_OK) {
			printf("device %s: attention B=%ld T=%ld H=%ld hd=%ld causal, %s shape, %ld "
			       "iterations per precision, alternating\n",
			       clp_cl_ctx_device(ctx)->name, B, T, H, hd,
			       gpu ? "GPU" : "the device's", iters);
			clp_nn_set_shape(gpu ? CLP_NN_SHAPE_GPU : CLP_NN_SHAPE_AUTO);
			s = setup(ctx, &m, N, C, (size_t)(B * H * T), want);
		}
		for (long it = 0; it <= iters && s == CLP_OK; it++) /* it 0 builds and warms */
			for (int t = 0; t < NP && s == CLP_OK; t++) {
				double dt = 0;

				if (want[t] && (s = step(ctx, &m, &a, (clp_dtype)t, C, &dt)) == CLP_OK &&
				    it)
					sec[t] += dt;
			}
		clp_nn_set_shape(CLP_NN_SHAPE_AUTO);
	}
	if (s == CLP_OK) {
		printf("%-6s %12s %10s\n", "values", "ms/iter", "x fp32");
		for (int t = 0; t < NP; t++)
			if (want[t])
				printf("%-6s %12.1f %10.3f\n", clp_dtype_name((clp_dtype)t),
				       sec[t] * 1e3 / iters, sec[t] / sec[0]);
	}
	for (int t = 0; t < NP; t++) {
		if (m.qkv[t])
			clReleaseMemObject(m.qkv[t]);
		if (m.out[t])
			clReleaseMemObject(m.out[t]);
	}
	if (m.lse)
		clReleaseMemObject(m.lse);
	if (m.dqkv)
		clReleaseMemObject(m.dqkv);
	if (m.dout)
		clReleaseMemObject(m.dout);
	clp_cl_ctx_free(ctx);
	return s == CLP_OK ? 0 : cli_fail("bench attn", s);
}
