/* GPU-shaped GEMM: C = alpha * op(A) op(B) + beta * C, row-major, strided-batched.
 *
 * A work-group computes a TS_M x TS_N tile of C; each work-item a WPT_M x WPT_N register block,
 * strided by the work-group's extent so that neighbouring work-items touch neighbouring columns
 * (coalesced stores). K advances in TS_K steps staged through local memory; loads are bounds-
 * checked and zero-padded, so any size works. Transposes are resolved while loading the tiles.
 * Local size: (TS_N / WPT_N, TS_M / WPT_M); global: (ceil(N / TS_N) * lx, ceil(M / TS_M) * ly,
 * batch). Sizes are arguments; only the tile shape is defined. */
/* Storage (cl/gemm.h): A_TYPE and B_TYPE (0 fp32, 1 bf16, 2 fp16; default 0) each, converted
 * to fp32 on load; C through half.clh's ST_TYPE, computed in fp32 and rounded on its one store. */
#include "half.clh"

#ifndef A_TYPE
#define A_TYPE 0
#endif
#ifndef B_TYPE
#define B_TYPE 0
#endif
#define GT_T0 float
#define GT_T1 ushort
#define GT_T2 half
#define GT_LD0(p, i) ((p)[i])
#define GT_LD1(p, i) as_float((uint)(p)[i] << 16)
#define GT_LD2(p, i) vload_half((i), (p))
#define GT_CAT(a, b) a##b
#define GT_X(a, b) GT_CAT(a, b)
#define A_T GT_X(GT_T, A_TYPE)
#define B_T GT_X(GT_T, B_TYPE)
#define A_LD(p, i) GT_X(GT_LD, A_TYPE)(p, i)
#define B_LD(p, i) GT_X(GT_LD, B_TYPE)(p, i)

#ifndef TS_M
#define TS_M 64
#endif
#ifndef TS_N
#define TS_N 64
#endif
#ifndef TS_K
#define TS_K 16
#endif
#ifndef WPT_M
#define WPT_M 4
#endif
#ifndef WPT_N
#define WPT_N 4
#endif

#define RTS_M (TS_M / WPT_M) /* work-items along M */
#define RTS_N (TS_N / WPT_N) /* work-items along N */
#define NTHREADS (RTS_M * RTS_N)

__kernel __attribute__((reqd_work_group_size(RTS_N, RTS_M, 1)))
void clp_gemm_tiled(int ta, int tb, uint M, uint N, uint K, float alpha,
		    __global const A_T *A, ulong aoff, uint lda, ulong sa,
		    __global const B_T *B, ulong boff, uint ldb, ulong sb, float beta,
		    __global ST_T *C, ulong coff, uint ldc, ulong sc)
{
	__local float As[TS_K][TS_M + 1];
	__local float Bs[TS_K][TS_N + 1];
	const uint tx = get_local_id(0), ty = get_local_id(1);
	const uint tid = ty * RTS_N + tx;
	const uint m0 = get_group_id(1) * TS_M, n0 = get_group_id(0) * TS_N;
	const ulong z = get_global_id(2);
	float acc[WPT_M][WPT_N];

	A += aoff + z * sa;
	B += boff + z * sb;
	C += coff + z * sc;
	for (int i = 0; i < WPT_M; i++)
		for (int j = 0; j < WPT_N; j++)
			acc[i][j] = 0.0f;

	for (uint k0 = 0; k0 < K; k0 += TS_K) {
		/* A tile: TS_M rows x TS_K columns of op(A). */
		for (uint e = tid; e < TS_M * TS_K; e += NTHREADS) {
			uint r, c;
			if (ta) { /* op(A)[i][p] = A[p][i]: walk i fastest for coalescing */
				r = e % TS_M;
				c = e / TS_M;
			} else {
				c = e % TS_K;
				r = e / TS_K;
			}
			uint gi = m0 + r, gp = k0 + c;
			float v = 0.0f;
			if (gi < M && gp < K)
				v = A_LD(A, ta ? (ulong)gp * lda + gi : (ulong)gi * lda + gp);
			As[c][r] = v;
		}
		/* B tile: TS_K rows x TS_N columns of op(B). */
		for (uint e = tid; e < TS_N * TS_K; e += NTHREADS) {
			uint r, c;
			if (tb) { /* op(B)[p][j] = B[j][p]: walk p fastest */
				r = e % TS_K;
				c = e / TS_K;
			} else {
				c = e % TS_N;
				r = e / TS_N;
			}
			uint gp = k0 + r, gj = n0 + c;
			float v = 0.0f;
			if (gp < K && gj < N)
				v = B_LD(B, tb ? (ulong)gj * ldb + gp : (ulong)gp * ldb + gj);
			Bs[r][c] = v;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		for (uint p = 0; p < TS_K; p++) {
			float bv[WPT_N];
			for (int j = 0; j < WPT_N; j++)
				bv[j] = Bs[p][tx + j * RTS_N];
			for (int i = 0; i < WPT_M; i++) {
				float av = As[p][ty + i * RTS_M];
				for (int j = 0; j < WPT_N; j++)
					acc[i][j] = fma(av, bv[j], acc[i][j]);
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	for (int i = 0; i < WPT_M; i++) {
		uint gi = m0 + ty + i * RTS_M;
		if (gi >= M)
			continue;
		for (int j = 0; j < WPT_N; j++) {
			uint gj = n0 + tx + j * RTS_N;
			if (gj >= N)
				continue;
			const ulong ci = (ulong)gi * ldc + gj;
			ST_SV(C, ci, beta == 0.0f ? alpha * acc[i][j]
						  : fma(beta, ST_LD(C, ci), alpha * acc[i][j]));
		}
	}
}
