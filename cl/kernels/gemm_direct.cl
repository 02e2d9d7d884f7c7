/* GEMM for devices that run a work-group's work-items as SIMD lanes (Mesa llvmpipe): C = alpha *
 * op(A) op(B) + beta * C, row-major, strided-batched, no local memory and no barriers.
 *
 * A work-group of LX work-items computes WM rows x (LX * WN) columns of C: its rows come from the
 * group id (the same for every lane, so op(A)'s element is one load for the whole group), its
 * columns are lane + j * LX (neighbouring lanes read neighbouring elements of op(B)). Each
 * work-item keeps a WM x WN register block and walks K once, one loop iteration a k: the row and
 * column loops are written out by the R* macros, since llvmpipe stops a work-item's loops after
 * 65535 iterations in all (docs/OPENCL.md) and its compiler ignores #pragma unroll; the host
 * splits K into chunks of at most KMAX (cl/gemm_direct.c). Indices past M or N are clamped for
 * the loads (every load is in bounds, no divergent branch in the loop) and not stored.
 * Local size (LX, 1, 1); global (ceil(N / (LX WN)) LX, ceil(M / WM), batch).
 * Storage (cl/gemm.h): A_TYPE and B_TYPE (0 fp32, 1 bf16, 2 fp16) converted to fp32 on load; C
 * through half.clh's ST_TYPE, computed in fp32 and rounded on its one store. Multiply-adds are
 * CLP_FMA (mad() where the probe found fma() slow: llvmpipe).
 * has_bias (the host sets it on the last K chunk): C = round(round(alpha acc + beta C) +
 * bias[biasoff + column]), bias in C's storage: the rounding and order of the product then a
 * separate clp_bias_forward (bitwise that pair; cl/gemm.h clp_cl_gemm_bias). */
#include "half.clh"

#ifndef A_TYPE
#define A_TYPE 0
#endif
#ifndef B_TYPE
#define B_TYPE 0
#endif
#ifndef WM
#define WM 8
#endif
#ifndef WN
#define WN 2
#endif
#ifndef LX
#define LX 32
#endif

#define GD_T0 float
#define GD_T1 ushort
#define GD_T2 half
#define GD_LD0(p, i) ((p)[i])
#define GD_LD1(p, i) as_float((uint)(p)[i] << 16)
#define GD_LD2(p, i) vload_half((i), (p))
#define GD_CAT(a, b) a##b
#define GD_X(a, b) GD_CAT(a, b)
#define A_T GD_X(GD_T, A_TYPE)
#define B_T GD_X(GD_T, B_TYPE)
#define A_LD(p, i) GD_X(GD_LD, A_TYPE)(p, i)
#define B_LD(p, i) GD_X(GD_LD, B_TYPE)(p, i)

/* R<n>(X, a), S<n>(X, a): X(a, 0) ... X(a, n - 1), written out; two families, since a row's
 * X expands the columns' and a macro cannot expand inside its own expansion */
#define R1(X, a) X(a, 0)
#define R2(X, a) R1(X, a) X(a, 1)
#define R4(X, a) R2(X, a) X(a, 2) X(a, 3)
#define R8(X, a) R4(X, a) X(a, 4) X(a, 5) X(a, 6) X(a, 7)
#define S1(X, a) X(a, 0)
#define S2(X, a) S1(X, a) X(a, 1)
#define S4(X, a) S2(X, a) X(a, 2) X(a, 3)
#define RM(X, a) GD_X(R, WM)(X, a)
#define RN(X, a) GD_X(S, WN)(X, a)

#if !((WM == 1 || WM == 2 || WM == 4 || WM == 8) && (WN == 1 || WN == 2 || WN == 4))
#error "gemm_direct.cl: WM must be 1, 2, 4 or 8 and WN 1, 2 or 4"
#endif

#define GD_ZERO1(i, j) acc[i][j] = 0.0f;
#define GD_ZERO(_, i) RN(GD_ZERO1, i)
#define GD_ROW(_, i) ar[i] = (ulong)min(i0 + (uint)(i), M - 1) * (ta ? 1 : lda);
#define GD_COL(_, j) bc[j] = (ulong)min(j0 + (uint)(j) * LX, N - 1) * (tb ? ldb : 1);
#define GD_LDB(_, j) bv[j] = B_LD(B, bc[j] + pb);
#define GD_MAD1(i, j) acc[i][j] = CLP_FMA(av, bv[j], acc[i][j]);
#define GD_MAD(_, i)                                                                       \
	{                                                                                  \
		const float av = A_LD(A, ar[i] + pa);                                      \
		RN(GD_MAD1, i)                                                             \
	}
#define GD_ST1(i, j)                                                                       \
	if (i0 + (uint)(i) < M && j0 + (uint)(j) * LX < N) {                               \
		const ulong ci = (ulong)(i0 + (uint)(i)) * ldc + j0 + (uint)(j) * LX;      \
		ST_SV(C, ci, beta == 0.0f ? alpha * acc[i][j]                              \
					  : CLP_FMA(beta, ST_LD(C, ci), alpha * acc[i][j])); \
		if (has_bias)                                                              \
			ST_SV(C, ci, ST_LD(C, ci) + ST_LD(bias, biasoff + j0 + (uint)(j) * LX)); \
	}
#define GD_ST(_, i) RN(GD_ST1, i)

__kernel __attribute__((reqd_work_group_size(LX, 1, 1)))
void clp_gemm_direct(int ta, int tb, uint M, uint N, uint K, float alpha,
		     __global const A_T *A, ulong aoff, uint lda, ulong sa,
		     __global const B_T *B, ulong boff, uint ldb, ulong sb, float beta,
		     __global ST_T *C, ulong coff, uint ldc, ulong sc,
		     __global const ST_T *bias, ulong biasoff, int has_bias)
{
	const uint i0 = get_group_id(1) * WM;
	const uint j0 = get_group_id(0) * (LX * WN) + get_local_id(0);
	const ulong z = get_group_id(2);
	float acc[WM][WN];
	const ulong sak = ta ? lda : 1, sbk = tb ? 1 : ldb; /* a step in k */
	ulong ar[WM], bc[WN], pa = 0, pb = 0;

	A += aoff + z * sa;
	B += boff + z * sb;
	C += coff + z * sc;
	RM(GD_ZERO, 0)
	RM(GD_ROW, 0)
	RN(GD_COL, 0)
	for (uint p = 0; p < K; p++, pa += sak, pb += sbk) {
		float bv[WN];

		RN(GD_LDB, 0)
		RM(GD_MAD, 0)
	}
	{
#pragma OPENCL FP_CONTRACT OFF /* the stored value, then + bias: two roundings, as the pair */
		RM(GD_ST, 0)
	}
}
