/* clpipe check cases of the fused kernels of issue 30 (cl/nn.h): bias + GELU with GELU's
 * overwriting backward, and the residual add + LayerNorm, in the storage type of the case
 * against cl/ref's double references at the rounded inputs, as tests/nn/test_nn_fused.c checks
 * them (which also proves them bitwise the launches they replace). */
#include <string.h>

#include "cl/check/check_internal.h"
#include "cl/ref/nn_ref.h"

/* a value rounded once to dt: the 16-bit kernels store it so (the bias and residual entries) */
static const ck_tol once = {1e-6, 1e-6, 0};

clp_status ck_run_bias_gelu(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t N = c->d[0], F = c->d[1], n = N * F;
	const clp_nn_gelu kind = c->variant ? CLP_NN_GELU_ERF : CLP_NN_GELU_TANH;
	float *x = ck_rand(e, n, -5, 5), *bias = ck_rand(e, F, -1, 1), *g = ck_rand(e, n, -1, 1);
	float *fc = ck_alloc(e, n * 4 + 4), *got = ck_alloc(e, n * 4 + 4);
	double *rfc = ck_alloc(e, n * 8 + 8), *ract = ck_alloc(e, n * 8 + 8);
	double *rd = ck_dbl(e, NULL, n);
	clp_buf bx, bb, ba, bg, bd;

	CK_NEED(x && bias && g && fc && got && rfc && ract && rd);
	ck_round(dt, x, n), ck_round(dt, bias, F);
	CLP_TRY(ck_buf(e, x, n, dt, &bx));
	CLP_TRY(ck_buf(e, bias, F, dt, &bb));
	CLP_TRY(ck_buf(e, NULL, n, dt, &ba));
	CLP_TRY(ck_buf(e, g, n, CLP_F32, &bg));
	CLP_TRY(ck_buf(e, NULL, n, CLP_F32, &bd)); /* NaN: the backward overwrites */
	for (size_t i = 0; i < n; i++)
		rfc[i] = x[i];
	clp_ref_bias_forward_st(dt, rfc, bias, N, F);
	for (size_t i = 0; i < n; i++)
		fc[i] = (float)rfc[i]; /* exact: rounded to dt */
	clp_ref_gelu_forward_st(dt, ract, fc, n, kind);
	clp_ref_gelu_backward(rd, g, fc, n, kind);
	CLP_TRY(clp_nn_bias_gelu_forward(e->ctx, ba, bx, bb, N, F, kind));
	CLP_TRY(clp_nn_gelu_backward_set(e->ctx, bd, bg, bx, n, kind));
	CLP_TRY(ck_get(e, bx, n, got));
	ck_compare(e, "fc", dt, got, rfc, n, once);
	CLP_TRY(ck_get(e, ba, n, got));
	ck_compare(e, "act", dt, got, ract, n, op->out[dt]);
	CLP_TRY(ck_get(e, bd, n, got));
	ck_compare(e, "dfc", CLP_F32, got, rd, n, op->grad);
	return CLP_OK;
}

clp_status ck_run_residual_layernorm(ck_env *e, const ck_case *c)
{
	const ck_op *op = c->op;
	const clp_dtype dt = c->dt;
	const size_t N = c->d[0], C = c->d[1], nc = N * C;
	float *a = ck_rand(e, nc, -2, 3), *b = ck_rand(e, nc, -1, 1), *w = ck_rand(e, C, 0.5f, 1.5f);
	float *bias = ck_rand(e, C, -1, 1), *xs = ck_alloc(e, nc * 4 + 4), *got = ck_alloc(e, nc * 4 + 4);
	double *rxs = ck_alloc(e, nc * 8 + 8), *out = ck_alloc(e, nc * 8 + 8);
	double *mean = ck_alloc(e, N * 8 + 8), *rstd = ck_alloc(e, N * 8 + 8);
	clp_buf ba, bb, bw, bbi, bxs, bo, bm, br;

	CK_NEED(a && b && w && bias && xs && got && rxs && out && mean && rstd);
	ck_round(dt, a, nc), ck_round(dt, b, nc), ck_round(dt, w, C), ck_round(dt, bias, C);
	CLP_TRY(ck_buf(e, a, nc, dt, &ba));
	CLP_TRY(ck_buf(e, b, nc, dt, &bb));
	CLP_TRY(ck_buf(e, w, C, dt, &bw));
	CLP_TRY(ck_buf(e, bias, C, dt, &bbi));
	CLP_TRY(ck_buf(e, NULL, nc, dt, &bxs));
	CLP_TRY(ck_buf(e, NULL, nc, dt, &bo));
	CLP_TRY(ck_buf(e, NULL, N, CLP_F32, &bm));
	CLP_TRY(ck_buf(e, NULL, N, CLP_F32, &br));
	clp_ref_residual_forward_st(dt, rxs, a, b, nc);
	for (size_t i = 0; i < nc; i++)
		xs[i] = (float)rxs[i]; /* exact: rounded to dt */
	clp_ref_layernorm_forward_st(dt, out, mean, rstd, xs, w, bias, N, C, 1e-5f);
	CLP_TRY(clp_nn_residual_layernorm_forward(e->ctx, bxs, bo, bm, br, ba, bb, bw, bbi, N, C,
						  1e-5f));
	CLP_TRY(ck_get(e, bxs, nc, got));
	ck_compare(e, "xs", dt, got, rxs, nc, once);
	CLP_TRY(ck_get(e, bo, nc, got));
	ck_compare(e, "out", dt, got, out, nc, op->out[dt]);
	CLP_TRY(ck_get(e, bm, N, got));
	ck_compare(e, "mean", CLP_F32, got, mean, N, op->stat);
	CLP_TRY(ck_get(e, br, N, got));
	ck_compare(e, "rstd", CLP_F32, got, rstd, N, op->stat);
	return CLP_OK;
}
