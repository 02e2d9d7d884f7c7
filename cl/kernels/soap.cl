/* SOAP's kernels (cl/soap.h): Adam's moments in the rotated space and the update, the
 * estimated eigenvalues diag(Q^T A Q), their descending argsort by counting, the permutations,
 * and an unblocked Householder QR (LAPACK's geqr2 and org2r: one reflector and one application
 * per column, each a launch). The gradient's scaling is Shampoo's first-step momentum
 * (clp_shampoo_momentum); the products (statistics, projections, A Q) are GEMMs (cl/gemm.h).
 * Elementwise kernels take NN_EW_CHUNK elements per work-item, as AdamW; the others one
 * work-item per column (or index), whose loops over rows read consecutive addresses across
 * neighbouring work-items. */
#ifndef NN_EW_CHUNK
#define NN_EW_CHUNK 8192
#endif

/* torch.lerp: start + w (end - start) for w < 0.5, else end - (end - start) (1 - w) */
static float soap_lerp(float s, float e, float w)
{
	return w < 0.5f ? s + w * (e - s) : e - (e - s) * (1.0f - w);
}

/* m = lerp(m, x, 1 - b1), v = lerp(v, gp^2, 1 - b2); nothing on a non-finite step */
__kernel void clp_soap_moments(__global float *m, ulong mo, __global float *v, ulong vo,
			       __global const float *x, ulong xo, __global const float *gp,
			       ulong gpo, ulong n, float b1, float b2,
			       __global const float *stats, ulong so, int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);

	if (has_stats && stats[so + 1] != 0.0f)
		return;
	m += mo;
	v += vo;
	x += xo;
	gp += gpo;
	for (ulong i = i0; i < i1; i++) {
		const float p = gp[i];

		m[i] = soap_lerp(m[i], x[i], 1.0f - b1);
		v[i] = soap_lerp(v[i], p * p, 1.0f - b2);
	}
}

/* a = a / (sqrt(v) + eps) (a: the projected first moment) */
__kernel void clp_soap_ratio(__global float *a, ulong ao, __global const float *v, ulong vo,
			     ulong n, float eps)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);

	a += ao;
	v += vo;
	for (ulong i = i0; i < i1; i++)
		a[i] = a[i] / (sqrt(v[i]) + eps);
}

/* p = (p - step n) decay_mul (the package: p.add_(n, alpha=-step), then decoupled decay);
 * nothing on a non-finite step */
__kernel void clp_soap_apply(__global float *p, ulong po, __global const float *u, ulong uo,
			     ulong n, float step, float decay_mul, __global const float *stats,
			     ulong so, int has_stats)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);

	if (has_stats && stats[so + 1] != 0.0f)
		return;
	p += po;
	u += uo;
	for (ulong i = i0; i < i1; i++)
		p[i] = (p[i] - step * u[i]) * decay_mul;
}

/* e[j] = sum_i q[i, j] aq[i, j] = (Q^T A Q)[j, j], d x d, one work-item per column */
__kernel void clp_soap_est(__global float *e, ulong eo, __global const float *q, ulong qo,
			   __global const float *aq, ulong aqo, ulong d)
{
	const ulong j = get_global_id(0);
	float s = 0.0f;

	if (j >= d)
		return;
	q += qo;
	aq += aqo;
	for (ulong i = 0; i < d; i++)
		s += q[i * d + j] * aq[i * d + j];
	e[eo + j] = s;
}

/* a before b in the descending order: larger first, NaN last, ties by index (a strict total
 * order on (value, index), so the ranks are a permutation whatever the values) */
static int soap_before(float a, uint ia, float b, uint ib)
{
	const int na = isnan(a), nb = isnan(b);

	if (na != nb)
		return nb;
	if (!na && a != b)
		return a > b;
	return ia < ib;
}

/* perm[rank_i] = i, rank_i = #{j : e_j before e_i} (torch.argsort(e, descending=True)) */
__kernel void clp_soap_argsort(__global uint *perm, ulong po, __global const float *e, ulong eo,
			       ulong d)
{
	const ulong i = get_global_id(0);
	uint rank = 0;

	if (i >= d)
		return;
	e += eo;
	const float ei = e[i];

	for (ulong j = 0; j < d; j++)
		rank += soap_before(e[j], (uint)j, ei, (uint)i);
	perm[po + rank] = (uint)i;
}

/* out = in.index_select(axis, perm) (rows x cols): axis 0 out[r, :] = in[perm[r], :], axis 1
 * out[:, c] = in[:, perm[c]]; one work-item per output element chunk */
__kernel void clp_soap_gather(__global float *out, ulong oo, __global const float *in, ulong io,
			      __global const uint *perm, ulong po, ulong rows, ulong cols,
			      int axis)
{
	const ulong n = rows * cols;
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(n, i0 + NN_EW_CHUNK);

	out += oo;
	in += io;
	perm += po;
	for (ulong i = i0; i < i1; i++) {
		const ulong r = i / cols, c = i % cols;

		out[i] = axis ? in[r * cols + perm[c]] : in[(ulong)perm[r] * cols + c];
	}
}

/* out = I (d x d) */
__kernel void clp_soap_eye(__global float *out, ulong oo, ulong d)
{
	const ulong i0 = (ulong)get_global_id(0) * NN_EW_CHUNK, i1 = min(d * d, i0 + NN_EW_CHUNK);

	out += oo;
	for (ulong i = i0; i < i1; i++)
		out[i] = i % (d + 1) == 0 ? 1.0f : 0.0f;
}

/* The reflector of column k of w (d x d), LAPACK's dlarfg: with alpha = w[k, k] and x =
 * w[k+1:, k], H = I - tau v v^T (v = (1, x / (alpha - beta))) maps (alpha, x) to (beta, 0),
 * beta = -sign(alpha) ||(alpha, x)||. The norm is scaled by max |x_i| (no overflow or
 * underflow of the squares); x = 0 (a zero column below the diagonal: rank-deficient input, or
 * the last column) gives tau = 0, H = I, so Q stays a product of orthogonal reflectors and its
 * columns an orthonormal completion, never NaN. A non-finite column gives NaN (it must not
 * pass silently). One work-item. */
__kernel void clp_soap_house(__global float *w, ulong wo, __global float *tau, ulong to, ulong d,
			     ulong k)
{
	if (get_global_id(0) != 0)
		return;
	w += wo;
	const float alpha = w[k * d + k];
	float s = 0.0f, ss = 0.0f;

	for (ulong i = k + 1; i < d; i++)
		s = fmax(s, fabs(w[i * d + k]));
	if (!(s > 0.0f)) {
		/* x = 0, or NaN (fmax drops NaN: let it through to the result instead) */
		int bad = !isfinite(alpha);

		for (ulong i = k + 1; i < d; i++)
			bad |= !isfinite(w[i * d + k]);
		tau[to + k] = bad ? NAN : 0.0f;
		return;
	}
	if (!isfinite(s)) {
		tau[to + k] = NAN;
		return;
	}
	for (ulong i = k + 1; i < d; i++) {
		const float y = w[i * d + k] / s;

		ss += y * y;
	}
	const float a = alpha / s;
	const float nrm = s * sqrt(a * a + ss);
	const float beta = alpha >= 0.0f ? -nrm : nrm;
	const float den = alpha - beta; /* |den| >= nrm >= s > 0 */

	for (ulong i = k + 1; i < d; i++)
		w[i * d + k] = w[i * d + k] / den;
	w[k * d + k] = beta;
	tau[to + k] = (beta - alpha) / beta;
}

/* Apply H_k (reflector k of w: v = (1, w[k+1:, k]), tau[k]) from the left to columns
 * j0 .. d-1 of t, rows k .. d-1: t[k:, j] -= tau v (v^T t[k:, j]). One work-item per column.
 * t may be w itself when j0 > k (the factorisation's trailing update: column k is not
 * written). */
__kernel void clp_soap_house_apply(__global float *t, ulong tofs, __global const float *w,
				   ulong wo, __global const float *tau, ulong to, ulong d, ulong k,
				   ulong j0)
{
	const ulong j = j0 + get_global_id(0);
	const float tk = tau[to + k];

	if (j >= d || tk == 0.0f)
		return;
	t += tofs;
	w += wo;
	float s = t[k * d + j];

	for (ulong i = k + 1; i < d; i++)
		s += w[i * d + k] * t[i * d + j];
	s *= tk;
	t[k * d + j] -= s;
	for (ulong i = k + 1; i < d; i++)
		t[i * d + j] -= w[i * d + k] * s;
}
