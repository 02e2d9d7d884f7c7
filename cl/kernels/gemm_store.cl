/* The last step of a GEMM whose C is stored in 16 bits (cl/gemm.c, for the packed and CLBlast
 * backends, which compute into fp32): C = P + beta * C rounded once to C's storage (ST_TYPE,
 * half.clh), P the dense fp32 product alpha op(A) op(B) (M x N per batch entry) or, without
 * has_p, zero (k = 0). beta == 0 never reads C. The sum is the packed kernel's fma(beta, c, p).
 * Global (N, M, batch), any local size. */
#include "half.clh"

__kernel void clp_gemm_store_c(uint M, uint N, __global const float *P, int has_p, float beta,
			       __global ST_T *C, ulong coff, uint ldc, ulong sc)
{
	const size_t j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);

	if (i >= M || j >= N)
		return;
	const ulong ci = coff + z * sc + (ulong)i * ldc + j;
	float x = has_p ? P[(z * M + i) * N + j] : 0.0f;
	if (beta != 0.0f)
		x = fma(beta, ST_LD(C, ci), x);
	ST_SV(C, ci, x);
}
