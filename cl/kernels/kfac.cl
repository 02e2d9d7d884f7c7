/* K-FAC kernels: factor traces and pi damping, damped copies, the unblocked pieces of the blocked
 * Cholesky and triangular inverse (diagonal blocks; the off-diagonal updates are GEMMs on the
 * host side, cl/kfac_inv.c), strided copies, and the KL-clipped SGD update with its dot product.
 *
 * Geometry comes from the host (cl/kfac.c): KFAC_LS work-items in the one work-group that
 * factors a diagonal block (1 on a CPU: a plain loop; more on a GPU), KFAC_CHUNK elements per
 * work-item in the elementwise and dot kernels. Matrices are row-major with a leading dimension;
 * sizes and offsets are arguments. */
#ifndef KFAC_LS
#define KFAC_LS 1
#endif
#ifndef KFAC_CHUNK
#define KFAC_CHUNK 8192
#endif

/* Per-layer statistics (floats at an offset): see cl/kfac.h, CLP_KFAC_S_*. */
#define KS_TRA 0
#define KS_TRB 1
#define KS_DAMPA 2
#define KS_DAMPB 3
#define KS_FLAG 4
#define KS_PI 5

/* s[o] (+)= trace of F (d,d); compensated. */
__kernel void kfac_trace(__global float *s, ulong so, __global const float *F, ulong fo, ulong d,
			 int accumulate)
{
	float sum = 0.0f, c = 0.0f;

	F += fo;
	for (ulong i = 0; i < d; i++) {
		float y = F[i * d + i] - c, t = sum + y;

		c = (t - sum) - y;
		sum = t;
	}
	s[so] = accumulate ? s[so] + sum : sum;
}

/* Factored Tikhonov damping from the traces: pi = sqrt((trA / dA) / (trB / dB)), A gets
 * max(sqrt(lambda) pi, 1e-7), B max(sqrt(lambda) / pi, 1e-7). A factor whose trace is zero (all
 * zeros, the factors being positive semi-definite) or not finite flags the layer (1 zero, 2 not
 * finite): its damped copies become the identity instead of being inverted. */
__kernel void kfac_damping(__global float *s, ulong so, float dA, float dB, float sqrt_lambda)
{
	float trA = s[so + KS_TRA], trB = s[so + KS_TRB], pi;

	s += so;
	if (!isfinite(trA) || !isfinite(trB)) {
		s[KS_FLAG] = 2.0f;
	} else if (!(trA > 0.0f) || !(trB > 0.0f)) {
		s[KS_FLAG] = 1.0f;
	} else {
		s[KS_FLAG] = 0.0f;
		pi = sqrt((trA / dA) / (trB / dB));
		s[KS_PI] = pi;
		s[KS_DAMPA] = fmax(sqrt_lambda * pi, 1e-7f);
		s[KS_DAMPB] = fmax(sqrt_lambda / pi, 1e-7f);
		return;
	}
	s[KS_PI] = 0.0f;
	s[KS_DAMPA] = 0.0f;
	s[KS_DAMPB] = 0.0f;
}

/* One row per work-item: W (d,d) = F + damp I, damp = s[KS_DAMPA or KS_DAMPB] (which), or the
 * identity when the layer is flagged. */
__kernel void kfac_damped_copy(__global float *W, ulong wo, __global const float *F, ulong fo,
			       ulong d, __global const float *s, ulong so, int which)
{
	const ulong i = get_global_id(0);
	const float damp = s[so + (which ? KS_DAMPB : KS_DAMPA)];
	const int flagged = s[so + KS_FLAG] != 0.0f;

	if (i >= d)
		return;
	W += wo + i * d;
	F += fo + i * d;
	for (ulong j = 0; j < d; j++)
		W[j] = flagged ? (i == j ? 1.0f : 0.0f) : F[j] + (i == j ? damp : 0.0f);
}

/* One row per work-item: dst (rows, cols) = alpha src, leading dimensions ldd, lds. */
__kernel void kfac_copy2d(__global float *dst, ulong dofs, ulong ldd, __global const float *src,
			  ulong sofs, ulong lds, ulong rows, ulong cols, float alpha)
{
	const ulong i = get_global_id(0);

	if (i >= rows)
		return;
	dst += dofs + i * ldd;
	src += sofs + i * lds;
	for (ulong j = 0; j < cols; j++)
		dst[j] = alpha * src[j];
}

/* One row per work-item: zero the strict upper triangle of W (n,n) with leading dimension ld. */
__kernel void kfac_tril(__global float *W, ulong wo, ulong ld, ulong n)
{
	const ulong i = get_global_id(0);

	if (i >= n)
		return;
	W += wo + i * ld;
	for (ulong j = i + 1; j < n; j++)
		W[j] = 0.0f;
}

/* Cholesky of the nb x nb diagonal block at W + wo (leading dimension ld), in place: its lower
 * triangle becomes L, the upper is zeroed. One work-group of KFAC_LS work-items. A pivot that is
 * not positive and finite records base + j + 1 in info[io] (if nothing is recorded yet) and is
 * replaced by 1 so that no NaN spreads. */
__kernel void kfac_potrf_diag(__global float *W, ulong wo, ulong ld, ulong nb,
			      __global int *info, ulong io, int base)
{
	const ulong lid = get_local_id(0);

	W += wo;
	for (ulong j = 0; j < nb; j++) {
		if (lid == 0) {
			float d = W[j * ld + j];

			if (!(d > 0.0f) || !isfinite(d)) {
				if (info[io] == 0)
					info[io] = base + (int)j + 1;
				d = 1.0f;
			}
			W[j * ld + j] = sqrt(d);
		}
		barrier(CLK_GLOBAL_MEM_FENCE);
		{
			const float inv = 1.0f / W[j * ld + j];

			for (ulong i = j + 1 + lid; i < nb; i += KFAC_LS)
				W[i * ld + j] *= inv;
		}
		barrier(CLK_GLOBAL_MEM_FENCE);
		for (ulong i = j + 1 + lid; i < nb; i += KFAC_LS) {
			const float lij = W[i * ld + j];

			for (ulong k = j + 1; k <= i; k++)
				W[i * ld + k] -= lij * W[k * ld + j];
		}
		barrier(CLK_GLOBAL_MEM_FENCE);
	}
	for (ulong i = lid; i < nb; i += KFAC_LS)
		for (ulong k = i + 1; k < nb; k++)
			W[i * ld + k] = 0.0f;
}

/* D (nb,nb) = L^-1 for the lower-triangular nb x nb block L at L + lo (leading dimensions ldd,
 * ldl); D's upper triangle is zeroed. Columns are independent: work-item t takes columns t,
 * t + KFAC_LS, ... and runs forward substitution down each. */
__kernel void kfac_trtri_diag(__global float *D, ulong dofs, ulong ldd, __global const float *L,
			      ulong lo, ulong ldl, ulong nb)
{
	const ulong lid = get_local_id(0);

	D += dofs;
	L += lo;
	for (ulong j = lid; j < nb; j += KFAC_LS) {
		for (ulong i = 0; i < j; i++)
			D[i * ldd + j] = 0.0f;
		D[j * ldd + j] = 1.0f / L[j * ldl + j];
		for (ulong i = j + 1; i < nb; i++) {
			float acc = 0.0f;

			for (ulong k = j; k < i; k++)
				acc = fma(L[i * ldl + k], D[k * ldd + j], acc);
			D[i * ldd + j] = -acc / L[i * ldl + i];
		}
	}
}

/* part[g] = sum of x[i] y[i] over work-item g's chunk (compensated). */
__kernel void kfac_dot_part(__global float *part, __global const float *x, ulong xo,
			    __global const float *y, ulong yo, ulong n)
{
	const ulong g = get_global_id(0), i0 = g * KFAC_CHUNK;
	const ulong i1 = min(n, i0 + KFAC_CHUNK);
	float sum = 0.0f, c = 0.0f;

	x += xo;
	y += yo;
	for (ulong i = i0; i < i1; i++) {
		float v = x[i] * y[i] - c, t = sum + v;

		c = (t - sum) - v;
		sum = t;
	}
	part[g] = sum;
}

/* acc[o] += sum of part[0 .. nparts), in order (compensated). */
__kernel void kfac_dot_final(__global float *acc, ulong ao, __global const float *part,
			     uint nparts)
{
	float sum = 0.0f, c = 0.0f;

	for (uint i = 0; i < nparts; i++) {
		float v = part[i] - c, t = sum + v;

		c = (t - sum) - v;
		sum = t;
	}
	acc[ao] += sum;
}

/* KL clipping: nu = min(1, sqrt(kl_clip / (lr^2 scale^2 |vg|))), vg = sum over the
 * preconditioned layers of p . g, scale the gradient-clip factor of gstats (1 without). No
 * clipping when kl_clip <= 0 or vg == 0. */
__kernel void kfac_kl_nu(__global float *nu, ulong no, __global const float *vg, ulong vo,
			 __global const float *gstats, ulong go, int has_gstats, float lr,
			 float kl_clip)
{
	const float scale = has_gstats ? gstats[go + 3] : 1.0f;
	const float v = fabs(vg[vo]) * lr * lr * scale * scale;

	nu[no] = kl_clip > 0.0f && v > 0.0f && isfinite(v) ? fmin(1.0f, sqrt(kl_clip / v)) : 1.0f;
}

/* SGD with momentum on a chunk per work-item: g' = g scale nu; m = momentum m + g';
 * p = p (1 - lr wd) - lr m. Nothing at all when gstats flags a non-finite gradient. */
__kernel void kfac_sgd(__global float *p, ulong po, __global float *m, ulong mo,
		       __global const float *g, ulong go, ulong n, float lr, float momentum,
		       float wd, __global const float *gstats, ulong gso, int has_gstats,
		       __global const float *nu, ulong nuo)
{
	const ulong i0 = get_global_id(0) * KFAC_CHUNK, i1 = min(n, i0 + KFAC_CHUNK);
	float s = nu[nuo];

	if (has_gstats) {
		if (gstats[gso + 1] != 0.0f)
			return;
		s *= gstats[gso + 3];
	}
	p += po;
	m += mo;
	g += go;
	for (ulong i = i0; i < i1; i++) {
		const float mi = fma(momentum, m[i], g[i] * s);

		m[i] = mi;
		p[i] = p[i] * (1.0f - lr * wd) - lr * mi;
	}
}
