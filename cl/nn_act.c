/* Host wrappers of nn_act.cl: GELU, SwiGLU, residual, dropout, random fills. Activations
 * (value tensors) share one storage type per call, which picks the build of nn_act.cl
 * (ST_TYPE); gradients and random fills are fp32 (cl/nn.h "Storage"). */
#include "cl/nn_internal.h"

#include <math.h>

#include "cl/ops.h"

#define ACT_FILE "nn_act.cl"

static clp_status ew_kernel(clp_cl_ctx *ctx, clp_dtype dt, const char *name, cl_kernel *k)
{
	return clp_cl_kernel(ctx, ACT_FILE, clp_nn_ew_st_defines(ctx, dt), name, k);
}

static void rng_args(const clp_rng_stream *s, cl_uint2 *key, cl_uint4 *ctr)
{
	key->s[0] = s->k0;
	key->s[1] = s->k1;
	ctr->s[0] = 0;
	ctr->s[1] = s->c1;
	ctr->s[2] = s->c2;
	ctr->s[3] = s->c3;
}

clp_status clp_nn_gelu_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf inp, size_t n,
			       clp_nn_gelu kind)
{
	cl_kernel k;
	cl_ulong oo = out.off, io = inp.off, nn = n;
	cl_int kd = kind;
	clp_dtype dt;

	CLP_TRY(clp_nn_value_type("gelu_forward", &dt, 2, "out", out, "inp", inp));
	CLP_TRY(ew_kernel(ctx, dt, "clp_gelu_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 6, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(inp.mem), CLP_ARG(io),
			    CLP_ARG(nn), CLP_ARG(kd)));
	return clp_nn_run_ew(ctx, k, "gelu_fwd", n);
}

static clp_status gelu_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, clp_buf inp,
				size_t n, clp_nn_gelu kind, cl_int set)
{
	cl_kernel k;
	cl_ulong dio = dinp.off, doo = dout.off, io = inp.off, nn = n;
	cl_int kd = kind;
	clp_dtype dt;

	CLP_TRY(clp_nn_value_type("gelu_backward", &dt, 1, "inp", inp));
	CLP_TRY(clp_nn_require_f32("gelu_backward", 2, "dinp", dinp, "dout", dout));
	CLP_TRY(ew_kernel(ctx, dt, "clp_gelu_backward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(dinp.mem), CLP_ARG(dio), CLP_ARG(dout.mem),
			    CLP_ARG(doo), CLP_ARG(inp.mem), CLP_ARG(io), CLP_ARG(nn), CLP_ARG(kd),
			    CLP_ARG(set)));
	return clp_nn_run_ew(ctx, k, "gelu_bwd", n);
}

clp_status clp_nn_gelu_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, clp_buf inp,
				size_t n, clp_nn_gelu kind)
{
	return gelu_backward(ctx, dinp, dout, inp, n, kind, 0);
}

clp_status clp_nn_gelu_backward_set(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, clp_buf inp,
				    size_t n, clp_nn_gelu kind)
{
	return gelu_backward(ctx, dinp, dout, inp, n, kind, 1);
}

clp_status clp_nn_bias_gelu_forward(clp_cl_ctx *ctx, clp_buf act, clp_buf fc, clp_buf bias,
				    size_t N, size_t F, clp_nn_gelu kind)
{
	cl_kernel k;
	cl_ulong ao = act.off, fo = fc.off, bo = bias.off, nn = N * F;
	cl_uint f = (cl_uint)F;
	cl_int kd = kind;
	clp_dtype dt;

	if (F == 0 || F > 0xffffffffu || (N && nn / N != F))
		return clp_error(CLP_ERR_INVALID, "bias_gelu_forward: bad shape N=%zu F=%zu", N, F);
	CLP_TRY(clp_nn_value_type("bias_gelu_forward", &dt, 3, "act", act, "fc", fc, "bias",
				  bias));
	CLP_TRY(ew_kernel(ctx, dt, "clp_bias_gelu_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(act.mem), CLP_ARG(ao), CLP_ARG(fc.mem), CLP_ARG(fo),
			    CLP_ARG(bias.mem), CLP_ARG(bo), CLP_ARG(nn), CLP_ARG(f), CLP_ARG(kd)));
	return clp_nn_run_ew(ctx, k, "bias_gelu_fwd", nn);
}

int clp_nn_gelu_store_ok(const clp_cl_ctx *ctx, size_t F)
{
	size_t chunk, local;

	clp_nn_ew_geometry(ctx, &chunk, &local);
	return F % 8 == 0 && chunk % 8 == 0;
}

static clp_status run_rows2(clp_cl_ctx *ctx, cl_kernel k, const char *label, size_t N, size_t F)
{
	size_t chunk, local, g[2], l[2];

	clp_nn_ew_geometry(ctx, &chunk, &local);
	g[0] = nn_cdiv(F, chunk);
	g[1] = N;
	l[0] = local;
	l[1] = 1;
	return clp_cl_run(ctx, k, label, 2, g, l);
}

clp_status clp_nn_swiglu_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf gate, clp_buf up,
				 size_t ld, size_t N, size_t F)
{
	cl_kernel k;
	cl_ulong oo = out.off, go = gate.off, uo = up.off, l = ld;
	cl_uint n = (cl_uint)N, f = (cl_uint)F;
	clp_dtype dt;

	if (ld < F || N > 0xffffffffu || F > 0xffffffffu)
		return clp_error(CLP_ERR_INVALID, "swiglu: row stride %zu < F=%zu (or N too big)",
				 ld, F);
	CLP_TRY(clp_nn_value_type("swiglu_forward", &dt, 3, "out", out, "gate", gate, "up", up));
	CLP_TRY(ew_kernel(ctx, dt, "clp_swiglu_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(gate.mem), CLP_ARG(go),
			    CLP_ARG(up.mem), CLP_ARG(uo), CLP_ARG(l), CLP_ARG(n), CLP_ARG(f)));
	return run_rows2(ctx, k, "swiglu_fwd", N, F);
}

clp_status clp_nn_swiglu_backward(clp_cl_ctx *ctx, clp_buf dgate, clp_buf dup, clp_buf dout,
				  clp_buf gate, clp_buf up, size_t ld, size_t N, size_t F)
{
	cl_kernel k;
	cl_ulong dgo = dgate.off, duo = dup.off, doo = dout.off, go = gate.off, uo = up.off, l = ld;
	cl_uint n = (cl_uint)N, f = (cl_uint)F;
	clp_dtype dt;

	if (ld < F || N > 0xffffffffu || F > 0xffffffffu)
		return clp_error(CLP_ERR_INVALID, "swiglu: row stride %zu < F=%zu (or N too big)",
				 ld, F);
	CLP_TRY(clp_nn_value_type("swiglu_backward", &dt, 2, "gate", gate, "up", up));
	CLP_TRY(clp_nn_require_f32("swiglu_backward", 3, "dgate", dgate, "dup", dup, "dout",
				   dout));
	CLP_TRY(ew_kernel(ctx, dt, "clp_swiglu_backward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 13, CLP_ARG(dgate.mem), CLP_ARG(dgo), CLP_ARG(dup.mem),
			    CLP_ARG(duo), CLP_ARG(dout.mem), CLP_ARG(doo), CLP_ARG(gate.mem),
			    CLP_ARG(go), CLP_ARG(up.mem), CLP_ARG(uo), CLP_ARG(l), CLP_ARG(n),
			    CLP_ARG(f)));
	return run_rows2(ctx, k, "swiglu_bwd", N, F);
}

clp_status clp_nn_residual_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf a, clp_buf b, size_t n)
{
	cl_kernel k;
	cl_ulong oo = out.off, ao = a.off, bo = b.off, nn = n;
	clp_dtype dt;

	CLP_TRY(clp_nn_value_type("residual_forward", &dt, 3, "out", out, "a", a, "b", b));
	if (dt == CLP_F32)
		return clp_cl_add(ctx, out, a, b, n);
	CLP_TRY(ew_kernel(ctx, dt, "clp_residual_forward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(a.mem), CLP_ARG(ao),
			    CLP_ARG(b.mem), CLP_ARG(bo), CLP_ARG(nn)));
	return clp_nn_run_ew(ctx, k, "residual_fwd", n);
}

clp_status clp_nn_residual_backward(clp_cl_ctx *ctx, clp_buf da, clp_buf db, clp_buf dout,
				    size_t n)
{
	cl_kernel k;
	cl_ulong ao = da.off, bo = db.off, doo = dout.off, nn = n;

	CLP_TRY(clp_nn_require_f32("residual_backward", 3, "da", da, "db", db, "dout", dout));
	CLP_TRY(ew_kernel(ctx, CLP_F32, "clp_residual_backward", &k));
	CLP_TRY(clp_cl_args(ctx, k, 7, CLP_ARG(da.mem), CLP_ARG(ao), CLP_ARG(db.mem), CLP_ARG(bo),
			    CLP_ARG(dout.mem), CLP_ARG(doo), CLP_ARG(nn)));
	return clp_nn_run_ew(ctx, k, "residual_bwd", n);
}

static clp_status dropout(clp_cl_ctx *ctx, clp_buf out, clp_buf x, size_t n, float p,
			  const clp_rng_stream *s, int mode)
{
	cl_kernel k;
	cl_ulong oo = out.off, xo = x.off, nn = n;
	cl_uint thr;
	cl_uint2 key;
	cl_uint4 ctr;
	cl_int md = mode;
	float scale;
	clp_dtype dt = CLP_F32;

	if (!(p >= 0.0f && p < 1.0f))
		return clp_error(CLP_ERR_INVALID, "dropout: probability %g outside [0, 1)", p);
	if (mode)
		CLP_TRY(clp_nn_require_f32("dropout_backward", 2, "dinp", out, "dout", x));
	else
		CLP_TRY(clp_nn_value_type("dropout_forward", &dt, 2, "out", out, "inp", x));
	thr = (cl_uint)fmin(floor((double)p * 4294967296.0), 4294967295.0);
	scale = (float)(1.0 / (1.0 - (double)p));
	rng_args(s, &key, &ctr);
	CLP_TRY(ew_kernel(ctx, dt, "clp_dropout", &k));
	CLP_TRY(clp_cl_args(ctx, k, 10, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(x.mem), CLP_ARG(xo),
			    CLP_ARG(nn), CLP_ARG(thr), CLP_ARG(scale), CLP_ARG(key), CLP_ARG(ctr),
			    CLP_ARG(md)));
	return clp_nn_run_ew(ctx, k, mode ? "dropout_bwd" : "dropout_fwd", n);
}

clp_status clp_nn_dropout_forward(clp_cl_ctx *ctx, clp_buf out, clp_buf inp, size_t n, float p,
				  const clp_rng_stream *s)
{
	return dropout(ctx, out, inp, n, p, s, 0);
}

clp_status clp_nn_dropout_backward(clp_cl_ctx *ctx, clp_buf dinp, clp_buf dout, size_t n, float p,
				   const clp_rng_stream *s)
{
	return dropout(ctx, dinp, dout, n, p, s, 1);
}

static clp_status rng_fill(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			   uint64_t first, float a, float b, int mode)
{
	cl_kernel k;
	cl_ulong oo = out.off, nn = n, fi = first;
	cl_uint2 key;
	cl_uint4 ctr;
	cl_int md = mode;

	CLP_TRY(clp_nn_require_f32("rng_fill", 1, "out", out));
	rng_args(s, &key, &ctr);
	CLP_TRY(ew_kernel(ctx, CLP_F32, "clp_rng_fill", &k));
	CLP_TRY(clp_cl_args(ctx, k, 9, CLP_ARG(out.mem), CLP_ARG(oo), CLP_ARG(nn), CLP_ARG(fi),
			    CLP_ARG(a), CLP_ARG(b), CLP_ARG(key), CLP_ARG(ctr), CLP_ARG(md)));
	return clp_nn_run_ew(ctx, k, "rng_fill", n);
}

clp_status clp_nn_rng_normal(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			     uint64_t first, float mean, float std)
{
	return rng_fill(ctx, out, n, s, first, mean, std, 0);
}

clp_status clp_nn_rng_uniform(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			      uint64_t first, float lo, float hi)
{
	return rng_fill(ctx, out, n, s, first, lo, hi - lo, 1);
}

clp_status clp_nn_rng_u32(clp_cl_ctx *ctx, clp_buf out, size_t n, const clp_rng_stream *s,
			  uint64_t first)
{
	return rng_fill(ctx, out, n, s, first, 0.0f, 0.0f, 2);
}
