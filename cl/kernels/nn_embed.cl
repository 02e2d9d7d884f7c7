/* Embeddings (token, learned position, token type) and RoPE, CPU shape.
 *
 * Forward: one work-item per row (b,t). Backward of a table: one work-item per (id, chunk of
 * EMB_COLS columns) sums the dout rows listed for that id in position order (the index built on
 * the host, see nn_embed.c), so the result is the same bits every run. Position gradients sum
 * over the batch in order b = 0..B-1. Index layout (int32): ids[nu], offsets[nu + 1],
 * positions[n].
 *
 * Storage (cl/nn.h): the forward's tables and output, and the x RoPE rotates forward, are
 * value tensors of ST_T (ST_TYPE: fp32, bf16 or fp16), loaded with ST_LD and stored once with
 * ST_SV; gradients (the table backwards, RoPE's backward: fp32 builds) and the RoPE table are
 * float. */
#include "half.clh"

#ifndef EMB_COLS
#define EMB_COLS 64
#endif

__kernel void clp_embed_forward(__global ST_T *out, ulong oo, __global const int *tok, ulong to,
				__global const int *typ, ulong yo, __global const ST_T *wte,
				ulong weo, __global const ST_T *wpe, ulong wpo,
				__global const ST_T *wtt, ulong wto, uint N, uint T, uint C,
				uint V, uint ntypes, int has_pos, int has_types)
{
	const size_t n = get_global_id(0);
	uint c;

	if (n >= N)
		return;
	__global ST_T *y = out + oo + n * C;
	const int id = tok[to + n];
	const int ty = has_types ? typ[yo + n] : 0;
	if (id < 0 || (uint)id >= V || (has_types && (ty < 0 || (uint)ty >= ntypes))) {
		for (c = 0; c < C; c++)
			ST_SV(y, c, NAN);
		return;
	}
	const __global ST_T *e = wte + weo + (size_t)id * C;
	const __global ST_T *p = wpe + wpo + (size_t)(n % T) * C;
	const __global ST_T *q = wtt + wto + (size_t)ty * C;
	for (c = 0; c + 8 <= C; c += 8) {
		float8 v = ST_LD8(e, c);
		if (has_pos)
			v += ST_LD8(p, c);
		if (has_types)
			v += ST_LD8(q, c);
		ST_SV8(y, c, v);
	}
	for (; c < C; c++)
		ST_SV(y, c, ST_LD(e, c) + (has_pos ? ST_LD(p, c) : 0.0f) +
				    (has_types ? ST_LD(q, c) : 0.0f));
}

/* dw[ids[u]] += sum of dout rows positions[offsets[u] .. offsets[u+1]); dim 0 column chunk,
 * dim 1 unique id u. A launch sums the occurrences w0 .. w1 of each id's list (in order) onto
 * its running sums, carry[u C + c] unless w0 = 0, and adds them to dw when the list ends by
 * w1, else leaves them in carry; ids whose list ended before w0 do nothing. The host bounds
 * w1 - w0 (EMB_OCC_LAUNCH): llvmpipe ends a work-item's loops after 65535 iterations in all,
 * silently, and a token type (BERT) or a frequent token can occur thousands of times a batch
 * (8192 occurrences at C = 100 in one launch: 63 of 300 gradient elements wrong). The same
 * additions in the same order as one launch over the whole list. */
__kernel void clp_embed_backward(__global float *dw, ulong dwo, __global const float *dout,
				 ulong doo, __global const int *idx, uint nu, uint C,
				 __global float *carry, uint w0, uint w1)
{
	const uint c0 = get_global_id(0) * EMB_COLS, u = get_global_id(1);
	const uint c1 = min(C, c0 + EMB_COLS);

	if (u >= nu || c0 >= C)
		return;
	const __global int *off = idx + nu, *pos = idx + 2 * nu + 1;
	const uint cnt = (uint)(off[u + 1] - off[u]);
	if (w0 > 0 && cnt <= w0)
		return;
	const int p0 = off[u] + (int)w0, p1 = off[u] + (int)min(cnt, w1);
	const int first = w0 == 0, last = cnt <= w1;
	__global float *d = dw + dwo + (size_t)idx[u] * C;
	__global float *cy = carry + (size_t)u * C;
	dout += doo;
	if (c1 - c0 == EMB_COLS) {
		float8 a[EMB_COLS / 8];
		for (int k = 0; k < EMB_COLS / 8; k++)
			a[k] = first ? (float8)0 : vload8(k, cy + c0);
		for (int p = p0; p < p1; p++) {
			const __global float *row = dout + (size_t)pos[p] * C + c0;
			for (int k = 0; k < EMB_COLS / 8; k++)
				a[k] += vload8(k, row);
		}
		if (last)
			for (int k = 0; k < EMB_COLS / 8; k++)
				vstore8(vload8(k, d + c0) + a[k], k, d + c0);
		else
			for (int k = 0; k < EMB_COLS / 8; k++)
				vstore8(a[k], k, cy + c0);
	} else {
		for (uint c = c0; c < c1; c++) {
			float a = first ? 0.0f : cy[c];
			for (int p = p0; p < p1; p++)
				a += dout[(size_t)pos[p] * C + c];
			if (last)
				d[c] += a;
			else
				cy[c] = a;
		}
	}
}

/* dwpe[t] += sum over b of dout[b,t]; dim 0 column chunk, dim 1 position t. */
__kernel void clp_embed_pos_backward(__global float *dw, ulong dwo, __global const float *dout,
				     ulong doo, uint B, uint T, uint C)
{
	const uint c0 = get_global_id(0) * EMB_COLS, t = get_global_id(1);
	const uint c1 = min(C, c0 + EMB_COLS);

	if (t >= T || c0 >= C)
		return;
	__global float *d = dw + dwo + (size_t)t * C + c0;
	dout += doo + (size_t)t * C + c0;
	if (c1 - c0 == EMB_COLS) {
		float8 a[EMB_COLS / 8];
		for (int k = 0; k < EMB_COLS / 8; k++)
			a[k] = 0;
		for (uint b = 0; b < B; b++)
			for (int k = 0; k < EMB_COLS / 8; k++)
				a[k] += vload8(k, dout + (size_t)b * T * C);
		for (int k = 0; k < EMB_COLS / 8; k++)
			vstore8(vload8(k, d) + a[k], k, d);
	} else {
		for (uint c = 0; c < c1 - c0; c++) {
			float a = 0.0f;
			for (uint b = 0; b < B; b++)
				a += dout[(size_t)b * T * C + c];
			d[c] += a;
		}
	}
}

/* In-place rotation of every head of row n = (b,t) by table row t (+sin forward, -sin
 * backward: fp32 gradients). */
__kernel void clp_rope(__global ST_T *x, ulong xo, ulong ld, __global const float *tab,
		       ulong tbo, uint N, uint T, uint nh, uint hd, float sign)
{
	const size_t n = get_global_id(0);
	const uint h2 = hd / 2;

	if (n >= N)
		return;
	const __global float *cs = tab + tbo + (size_t)(n % T) * hd;
	__global ST_T *row = x + xo + n * ld;
	for (uint h = 0; h < nh; h++) {
		__global ST_T *a = row + (size_t)h * hd, *b = a + h2;
		for (uint j = 0; j < h2; j++) {
			float c = cs[2 * j], s = sign * cs[2 * j + 1], u = ST_LD(a, j), v = ST_LD(b, j);
			ST_SV(a, j, u * c - v * s);
			ST_SV(b, j, v * c + u * s);
		}
	}
}
