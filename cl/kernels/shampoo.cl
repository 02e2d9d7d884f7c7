/* Shampoo's elementwise kernels (cl/shampoo.h): the momentum of pytorch-optimizer's Shampoo,
 * the start of the coupled Newton iteration for an inverse p-th root, its affine step, and the
 * update of the parameters. The products (statistics, iteration, preconditioning) are GEMMs
 * (cl/gemm.h). NN_EW_CHUNK elements per work-item, as AdamW. */
#ifndef NN_EW_CHUNK
#define NN_EW_CHUNK 8192
#endif

/* torch.lerp: start + w (end - start) for w < 0.5, else end - (end - start) (1 - w) */
static float shampoo_lerp(float s, float e, float w)
{
	return w < 0.5f ? s + w * (e - s) : e - (e - s) * (1.0f - w);
}

/* x = g' (first step) or lerp(g', buf, mu), g' = g * gscale (times the clip factor stats[3]
 * when has_stats); a set non-finite flag stats[1] writes x = 0 (the statistics gain nothing,
 * the update is skipped by clp_shampoo_apply). */
__kernel void clp_shampoo_momentum(__global const float *buf, ulong bo, __global const float *g,
				   ulong go, __global float *x, ulong xo, ulong n, float mu,
				   int first, float gscale, __global const float *stats, ulong so,
				   int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);
	float gs = gscale;
	int skip = 0;

	if (has_stats) {
		skip = stats[so + 1] != 0.0f;
		gs *= stats[so + 3];
	}
	buf += bo;
	g += go;
	x += xo;
	for (ulong i = i0; i < i1; i++) {
		const float gr = g[i] * gs;

		x[i] = skip ? 0.0f : first ? gr : shampoo_lerp(gr, buf[i], mu);
	}
}

/* The start of the coupled Newton iteration for (A + delta I)^(-1/p) (n x n), delta = ridge
 * nrm[0] (nrm: ||A||_F >= the largest eigenvalue): z = (1 + p) / (2 (nrm + delta)),
 * M = z (A + delta I), X = z^(1/p) I. A zero matrix gives M = 0, X = 0 (and stays so). */
__kernel void clp_shampoo_root_init(__global const float *a, ulong ao, __global float *m,
				    ulong mo, __global float *x, ulong xo, ulong n,
				    __global const float *nrm, ulong no, float p, float ridge)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n * n, i0 + NN_EW_CHUNK);
	const float d = nrm[no], delta = ridge * d;
	const float z = d > 0.0f ? (1.0f + p) / (2.0f * (d + delta)) : 0.0f;
	const float xd = z > 0.0f ? pow(z, 1.0f / p) : 0.0f;

	a += ao;
	m += mo;
	x += xo;
	for (ulong i = i0; i < i1; i++) {
		const int diag = i % (n + 1) == 0;

		m[i] = z * (a[i] + (diag ? delta : 0.0f));
		x[i] = diag ? xd : 0.0f;
	}
}

/* out = alpha in + beta I (n x n) */
__kernel void clp_shampoo_affine_eye(__global float *out, ulong oo, __global const float *in,
				     ulong io, ulong n, float alpha, float beta)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n * n, i0 + NN_EW_CHUNK);

	out += oo;
	in += io;
	for (ulong i = i0; i < i1; i++)
		out[i] = alpha * in[i] + (i % (n + 1) == 0 ? beta : 0.0f);
}

/* buf = u; p = p * decay_mul - lr * u; nothing when the non-finite flag stats[1] is set */
__kernel void clp_shampoo_apply(__global float *p, ulong po, __global float *buf, ulong bo,
				__global const float *u, ulong uo, ulong n, float decay_mul,
				float lr, __global const float *stats, ulong so, int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);

	if (has_stats && stats[so + 1] != 0.0f)
		return;
	p += po;
	buf += bo;
	u += uo;
	for (ulong i = i0; i < i1; i++) {
		buf[i] = u[i];
		p[i] = p[i] * decay_mul - lr * u[i];
	}
}

/* The graft's direction (Adam's normalisation of x, as Scalable Shampoo's RMSProp graft):
 * v = beta2 v + (1 - beta2) x^2;  a = x / (sqrt(v / bc2) + eps), bc2 = 1 - beta2^t; nothing
 * (v kept, a = 0) when the non-finite flag stats[1] is set. */
__kernel void clp_shampoo_graft_dir(__global const float *x, ulong xo, __global float *v,
				    ulong vo, __global float *a, ulong ao, ulong n, float beta2,
				    float bc2, float eps, __global const float *stats, ulong so,
				    int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);
	const int skip = has_stats && stats[so + 1] != 0.0f;

	x += xo;
	v += vo;
	a += ao;
	for (ulong i = i0; i < i1; i++) {
		if (skip) {
			a[i] = 0.0f;
			continue;
		}
		const float vi = beta2 * v[i] + (1.0f - beta2) * x[i] * x[i];

		v[i] = vi;
		a[i] = x[i] / (sqrt(vi / bc2) + eps);
	}
}

/* u = u ||a|| / ||u|| (nrm[0] = ||u||_F, nrm[1] = ||a||_F), or a where ||u|| = 0 (before the
 * first roots) */
__kernel void clp_shampoo_graft_scale(__global float *u, ulong uo, __global const float *a,
				      ulong ao, ulong n, __global const float *nrm, ulong no)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);
	const float nu = nrm[no], na = nrm[no + 1];

	u += uo;
	a += ao;
	for (ulong i = i0; i < i1; i++)
		u[i] = nu > 0.0f ? u[i] * (na / nu) : a[i];
}
