/* Muon's elementwise kernels (cl/muon.h): the momentum and its Nesterov look-ahead, the
 * normalisation by the Frobenius norm before the Newton-Schulz iteration, and the update of the
 * parameters. The iteration's products are GEMMs (cl/gemm.h); its polynomial combination
 * (b A + c A A, a X + B X) is the GEMMs' beta. NN_EW_CHUNK elements per work-item, as AdamW. */
#ifndef NN_EW_CHUNK
#define NN_EW_CHUNK 8192
#endif

/* torch.lerp: start + w (end - start) for w < 0.5, else end - (end - start) (1 - w) */
static float muon_lerp(float s, float e, float w)
{
	return w < 0.5f ? s + w * (e - s) : e - (e - s) * (1.0f - w);
}

/* buf = lerp(buf, g', 1 - mu); u = nesterov ? lerp(g', buf, mu) : buf, with g' = g * gscale
 * (times the clip factor stats[3] when has_stats); a set non-finite flag stats[1] leaves buf
 * and u untouched (the update is skipped too). keep_buf: u only, buf left as it was (the same
 * arithmetic: the early orthogonalisation, clp_muon_orthogonalize). */
__kernel void clp_muon_momentum(__global float *buf, ulong bo, __global const float *g, ulong go,
				__global float *u, ulong uo, ulong n, float mu, int nesterov,
				float gscale, __global const float *stats, ulong so, int has_stats,
				int keep_buf)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);
	float gs = gscale;

	if (has_stats) {
		if (stats[so + 1] != 0.0f)
			return;
		gs *= stats[so + 3];
	}
	buf += bo;
	g += go;
	u += uo;
	for (ulong i = i0; i < i1; i++) {
		const float gr = g[i] * gs, b = muon_lerp(buf[i], gr, 1.0f - mu);

		if (!keep_buf)
			buf[i] = b;
		u[i] = nesterov ? muon_lerp(gr, b, mu) : b;
	}
}

/* x /= max(nrm[0], eps) (nrm: the Frobenius norm of x, clp_cl_nrm2) */
__kernel void clp_muon_normalize(__global float *x, ulong xo, ulong n, __global const float *nrm,
				 ulong no, float eps)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);
	const float d = fmax(nrm[no], eps);

	x += xo;
	for (ulong i = i0; i < i1; i++)
		x[i] = x[i] / d;
}

/* p = p * decay_mul - lr * u; nothing when the non-finite flag stats[1] is set */
__kernel void clp_muon_apply(__global float *p, ulong po, __global const float *u, ulong uo,
			     ulong n, float decay_mul, float lr, __global const float *stats,
			     ulong so, int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);

	if (has_stats && stats[so + 1] != 0.0f)
		return;
	p += po;
	u += uo;
	for (ulong i = i0; i < i1; i++)
		p[i] = p[i] * decay_mul - lr * u[i];
}
