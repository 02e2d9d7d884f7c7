/* Softmax cross-entropy over vocabulary chunks (CPU shape: one work-item per row, float8 loops).
 * The logits of one chunk (N, vc) come from a GEMM into scratch; per row a running state
 * (max, sum of exp, target logit) is kept across chunks. Targets: int32, -1 = ignore. */
static inline float hmax8(float8 v)
{
	float4 a = fmax(v.lo, v.hi);
	float2 b = fmax(a.lo, a.hi);
	return fmax(b.x, b.y);
}

static inline float hsum8(float8 v)
{
	float4 a = v.lo + v.hi;
	float2 b = a.lo + a.hi;
	return b.x + b.y;
}

/* Fold logits columns c0 .. c0+vc of each row into state (m, s, target logit). */
__kernel void clp_xent_stats(__global float *state, ulong so, __global const float *logits,
			     __global const int *tg, ulong tgo, uint N, uint vc, uint c0, int first)
{
	const size_t n = get_global_id(0);
	uint j;

	if (n >= N)
		return;
	const __global float *x = logits + n * vc;
	__global float *st = state + so + 3 * n;
	float m = first ? -INFINITY : st[0], s = first ? 0.0f : st[1];
	float tl = first ? NAN : st[2];
	float8 m8 = -INFINITY;
	for (j = 0; j + 8 <= vc; j += 8)
		m8 = fmax(m8, vload8(0, x + j));
	float mx = hmax8(m8);
	for (; j < vc; j++)
		mx = fmax(mx, x[j]);
	mx = fmax(mx, m);
	float8 s8 = 0.0f;
	for (j = 0; j + 8 <= vc; j += 8)
		s8 += exp(vload8(0, x + j) - mx);
	float cs = hsum8(s8);
	for (; j < vc; j++)
		cs += exp(x[j] - mx);
	st[0] = mx;
	st[1] = fma(s, exp(m - mx), cs);
	const int t = tg[tgo + n];
	st[2] = (t >= (int)c0 && t < (int)(c0 + vc)) ? x[t - c0] : tl;
}

__kernel void clp_xent_final(__global float *losses, ulong lo, __global float *lse, ulong lso,
			     __global const float *state, ulong so, __global const int *tg,
			     ulong tgo, uint N, uint V)
{
	const size_t n = get_global_id(0);

	if (n >= N)
		return;
	state += so + 3 * n;
	const float l = state[0] + log(state[1]);
	const int t = tg[tgo + n];
	lse[lso + n] = l;
	losses[lo + n] = t == -1 ? 0.0f : (t >= 0 && (uint)t < V) ? l - state[2] : NAN;
}

/* In place: logits -> (softmax - onehot) * scale, 0 for ignored rows. */
__kernel void clp_xent_grad(__global float *logits, __global const int *tg, ulong tgo,
			    __global const float *lse, ulong lso, uint N, uint vc, uint c0,
			    float scale)
{
	const size_t n = get_global_id(0);
	uint j;

	if (n >= N)
		return;
	__global float *x = logits + n * vc;
	const int t = tg[tgo + n];
	const float l = lse[lso + n];
	if (t < 0) { /* eight a step: fewer loop iterations (llvmpipe's limit, nn_xent.c) */
		for (j = 0; j + 8 <= vc; j += 8)
			vstore8((float8)0.0f, 0, x + j);
		for (; j < vc; j++)
			x[j] = 0.0f;
		return;
	}
	for (j = 0; j + 8 <= vc; j += 8)
		vstore8(exp(vload8(0, x + j) - l) * scale, 0, x + j);
	for (; j < vc; j++)
		x[j] = exp(x[j] - l) * scale;
	if (t >= (int)c0 && t < (int)(c0 + vc))
		x[t - c0] -= scale;
}
