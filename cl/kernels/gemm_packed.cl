/* CPU-shaped SGEMM (the "packed" backend, cl/gemm_packed.c), fast through PoCL.
 *
 * Row-major C = alpha * op(A) * op(B) + beta * C, op in {N,T}, strided batch.
 * Kernels (all launched with local size (1,1,1): one work-item per
 * work-group, so PoCL generates no work-item loop):
 *   clp_gemm_pack_b   op(B) -> Bp  (always; weights can stay packed)
 *   clp_gemm_pack_a   op(A) -> Ap  (only when A is transposed: a non-transposed
 *                  A is read directly by clp_gemm_packed)
 *   clp_gemm_packed  C tiles of mc x nc from (Ap or A) and Bp, k blocked by kc,
 *                  register micro-tile MR x NR of VT accumulators
 *
 * Packed layouts (per batch entry):
 *   Ap: ceil(M/MR) strips, strip s = [K][MR]  (rows s*MR.., zero padded)
 *   Bp: ceil(N/NR) strips, strip s = [K][NR]  (cols s*NR.., zero padded)
 *   sizes: MPAD*K and NPAD*K floats, MPAD = roundup(M,MR), NPAD = roundup(N,NR)
 * Problem sizes and blocking (mc, nc, kc) are runtime arguments; only the
 * register/vector shape and packing granularity are compile-time below.
 */
#ifdef __clang__ /* an unroll request clang cannot honour for one instantiation: harmless */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
#ifndef VW
#define VW 8   /* floats per vector register: 4 SSE/NEON, 8 AVX2, 16 AVX-512 */
#endif
#ifndef MR
#define MR 6   /* micro-tile rows */
#endif
#ifndef NV
#define NV 2   /* micro-tile columns in vectors: NR = NV*VW */
#endif
#ifndef PK
#define PK 256 /* k range per packing work-item */
#endif
#ifndef PS
#define PS 8   /* strips per packing work-item */
#endif

#define NR (NV * VW)

/* AB_TYPE: the storage of the operand a packing kernel reads (fp32, bf16 or fp16; half.clh):
 * the host builds clp_gemm_pack_a for A's type and clp_gemm_pack_b for B's, so A and B may
 * differ. They write fp32 strips, so the micro-kernel multiplies fp32 whatever the storage. The
 * host builds clp_gemm_packed for A's type too: its direct A path (op(A) = A, no pack_a launch)
 * converts each element of A as it loads it (exactly: bf16 and fp16 are subsets of fp32), a
 * packed A it reads as fp32. ST_TYPE is C's storage: a 16-bit C is written directly (each element
 * rounded once: fma(beta, C, alpha acc), as gemm_store.cl would) only when the host launches a
 * single K block (K <= 2 KC, one K chunk); otherwise the host computes into fp32 scratch and
 * gemm_store.cl rounds. */
#include "half.clh"
#include "nn_gelu.clh"

#if VW == 4
#define VT float4
#define VLOAD vload4
#define VSTORE vstore4
#elif VW == 8
#define VT float8
#define VLOAD vload8
#define VSTORE vstore8
#elif VW == 16
#define VT float16
#define VLOAD vload16
#define VSTORE vstore16
#else
#error "VW must be 4, 8 or 16"
#endif

#define WG1 __attribute__((reqd_work_group_size(1, 1, 1)))

/* Software prefetch: PoCL's prefetch() builtin is a no-op, clang's __builtin_prefetch is not.
 * Only where the kernel compiles straight to the machine: implementations that go through SPIR-V
 * (rusticl, Intel's) reject the llvm.prefetch intrinsic, and other compilers lack the builtin.
 * The portable path is OpenCL's prefetch(). CLP_NO_NATIVE_PREFETCH forces it (tests). */
#if defined(__SPIR__) || defined(__SPIR32__) || defined(__SPIR64__) || defined(__SPIRV__)
#define CLP_NO_NATIVE_PREFETCH 1 /* clang 15 targeting spir64 defines only __SPIR64__ */
#endif
#if defined(__clang__) && defined(__has_builtin) && !defined(CLP_NO_NATIVE_PREFETCH)
#if __has_builtin(__builtin_prefetch)
#define PREFETCH(p) __builtin_prefetch((p), 0, 1)
#define PREFETCHW(p) __builtin_prefetch((p), 1, 3)
#endif
#endif
#ifndef PREFETCH
#define PREFETCH(p) prefetch((p), 1)
#define PREFETCHW(p) prefetch((p), 1)
#endif

/* Prefetch this work-group's share (g of G) of a rows x len region (stride
 * ld), slice t of T: used by clp_gemm_packed to pull the next K chunk's
 * operands towards the cache while it computes the current one. */
void pf_region(const __global float *p, int rows, int len, int ld, int g,
               int G, int t, int T)
{
  const int lo = (int)((long)g * rows / G), cnt = (int)((long)(g + 1) * rows / G) - lo;
  const int a = lo + (int)((long)t * cnt / T), b = lo + (int)((long)(t + 1) * cnt / T);
  for (int r = a; r < b; ++r)
    for (int q = 0; q < len; q += 16) PREFETCH(p + (size_t)r * ld + q);
}

/* 8x8 transpose of v[0..7] into o[0..7] (o[k].s_i = v[i].s_k) */
void tr8(const float8 *v, float8 *o)
{
  const float8 a0 = (float8)(v[0].s0, v[1].s0, v[0].s1, v[1].s1, v[0].s4, v[1].s4, v[0].s5, v[1].s5);
  const float8 a1 = (float8)(v[0].s2, v[1].s2, v[0].s3, v[1].s3, v[0].s6, v[1].s6, v[0].s7, v[1].s7);
  const float8 a2 = (float8)(v[2].s0, v[3].s0, v[2].s1, v[3].s1, v[2].s4, v[3].s4, v[2].s5, v[3].s5);
  const float8 a3 = (float8)(v[2].s2, v[3].s2, v[2].s3, v[3].s3, v[2].s6, v[3].s6, v[2].s7, v[3].s7);
  const float8 a4 = (float8)(v[4].s0, v[5].s0, v[4].s1, v[5].s1, v[4].s4, v[5].s4, v[4].s5, v[5].s5);
  const float8 a5 = (float8)(v[4].s2, v[5].s2, v[4].s3, v[5].s3, v[4].s6, v[5].s6, v[4].s7, v[5].s7);
  const float8 a6 = (float8)(v[6].s0, v[7].s0, v[6].s1, v[7].s1, v[6].s4, v[7].s4, v[6].s5, v[7].s5);
  const float8 a7 = (float8)(v[6].s2, v[7].s2, v[6].s3, v[7].s3, v[6].s6, v[7].s6, v[6].s7, v[7].s7);
  const float8 b0 = (float8)(a0.s01, a2.s01, a0.s45, a2.s45), b1 = (float8)(a0.s23, a2.s23, a0.s67, a2.s67);
  const float8 b2 = (float8)(a1.s01, a3.s01, a1.s45, a3.s45), b3 = (float8)(a1.s23, a3.s23, a1.s67, a3.s67);
  const float8 b4 = (float8)(a4.s01, a6.s01, a4.s45, a6.s45), b5 = (float8)(a4.s23, a6.s23, a4.s67, a6.s67);
  const float8 b6 = (float8)(a5.s01, a7.s01, a5.s45, a7.s45), b7 = (float8)(a5.s23, a7.s23, a5.s67, a7.s67);
  o[0] = (float8)(b0.lo, b4.lo); o[1] = (float8)(b1.lo, b5.lo);
  o[2] = (float8)(b2.lo, b6.lo); o[3] = (float8)(b3.lo, b7.lo);
  o[4] = (float8)(b0.hi, b4.hi); o[5] = (float8)(b1.hi, b5.hi);
  o[6] = (float8)(b2.hi, b6.hi); o[7] = (float8)(b3.hi, b7.hi);
}

/* store the first w (compile-time after inlining) lanes of v */
void store_part(float8 v, const int w, __global float *p)
{
  if (w >= 8) { vstore8(v, 0, p); return; }
  if (w >= 4) { vstore4(v.lo, 0, p); if (w >= 6) vstore2(v.s45, 0, p + 4); else if (w == 5) p[4] = v.s4;
                if (w == 7) p[6] = v.s6; return; }
  if (w >= 2) { vstore2(v.s01, 0, p); if (w == 3) p[2] = v.s2; return; }
  p[0] = v.s0;
}

/* copy S floats (S compile-time after inlining) */
void copy_s(const int S, const __global AB_T *src, __global float *dst)
{
  int c = 0;
  for (; c + 8 <= S; c += 8) vstore8(AB_LD8(src + c), 0, dst + c);
  for (; c + 4 <= S; c += 4) vstore4(AB_LD4(src + c), 0, dst + c);
  for (; c + 2 <= S; c += 2) vstore2(AB_LD2(src + c), 0, dst + c);
  for (; c < S; ++c) dst[c] = AB_LD1(src + c);
}

/* Pack PS strips x PK k of a (rows x K) operand X (batch entry already
 * applied) into strips [K][S] with zero padding.  trans: element (row,k) at
 * X[k*ld + row] (rows contiguous), else at X[row*ld + k] (k contiguous). */
void pack_panel(const int S, int gx, int rows, int K, int trans,
                       const __global AB_T *restrict X, int ld,
                       __global float *restrict Xp)
{
  const int s0 = gx * PS;
  const int ns = min(PS, (rows + S - 1) / S - s0);
  const int k0 = get_global_id(1) * PK;
  const int k1 = min(K, k0 + PK);
  const size_t sst = (size_t)K * S; /* strip stride */
  if (trans) {
    const int full = (s0 + ns) * S <= rows;
    for (int k = k0; k < k1; ++k) {
      const __global AB_T *src = X + (size_t)k * ld + s0 * S;
      __global float *dst = Xp + (size_t)s0 * sst + (size_t)k * S;
      if (full) {
        for (int s = 0; s < ns; ++s, src += S, dst += sst) copy_s(S, src, dst);
      } else {
        for (int s = 0; s < ns; ++s, src += S, dst += sst)
          for (int c = 0; c < S; ++c) dst[c] = c < rows - (s0 + s) * S ? AB_LD1(src + c) : 0.0f;
      }
    }
  } else {
    for (int s = 0; s < ns; ++s) {
      const int r0 = (s0 + s) * S;
      const int nv = min(S, rows - r0);
      const __global AB_T *src = X + (size_t)r0 * ld;
      __global float *dst = Xp + (size_t)(s0 + s) * sst + (size_t)k0 * S;
      int k = k0;
      if (nv == S) {
        for (; k + 8 <= k1; k += 8, dst += 8 * S) {
          for (int g = 0; g < S; g += 8) {
            float8 v[8], o[8];
            for (int i = 0; i < 8; ++i)
              v[i] = g + i < S ? AB_LD8(src + (size_t)(g + i) * ld + k) : (float8)(0.0f);
            tr8(v, o);
            for (int i = 0; i < 8; ++i) store_part(o[i], min(8, S - g), dst + i * S + g);
          }
        }
      }
      for (; k < k1; ++k, dst += S)
        for (int c = 0; c < S; ++c)
          dst[c] = c < nv ? AB_LD1(src + (size_t)c * ld + k) : 0.0f;
    }
  }
}

/* op(A) is M x K: transA=0: A[m*lda + k], transA=1: A[k*lda + m].
 * global = (ceil(ceil(M/MR)/PS), ceil(K/PK), batch) */
__kernel WG1 void clp_gemm_pack_a(int M, int K, int transA,
                               __global const AB_T *restrict A, long offA,
                               int lda, long strideA,
                               __global float *restrict Ap, long strideAp)
{
  pack_panel(MR, get_global_id(0), M, K, transA, A + offA + get_global_id(2) * strideA, lda,
             Ap + get_global_id(2) * strideAp);
}

/* op(B) is K x N, packed as op(B)^T (rows = N): transB=0: B[k*ldb + n] is
 * the rows-contiguous case.  global = (ceil(ceil(N/NR)/PS), ceil(K/PK), batch) */
__kernel WG1 void clp_gemm_pack_b(int N, int K, int transB,
                               __global const AB_T *restrict B, long offB,
                               int ldb, long strideB,
                               __global float *restrict Bp, long strideBp)
{
  pack_panel(NR, get_global_id(0), N, K, !transB, B + offB + get_global_id(2) * strideB, ldb,
             Bp + get_global_id(2) * strideBp);
}

/* clp_gemm_pack_a and clp_gemm_pack_b in one launch (same K chunk, same batch, A and B of one
 * storage type): work-items x < ga pack A's strip groups, the others B's, each exactly what its
 * own kernel's work-item x - (0 or ga) does. global = (ga + gb, ceil(K/PK), batch). */
__kernel WG1 void clp_gemm_pack_ab(int ga, int M, int K, int transA,
                               __global const AB_T *restrict A, long offA, int lda,
                               long strideA, __global float *restrict Ap, long strideAp,
                               int N, int transB, __global const AB_T *restrict B, long offB,
                               int ldb, long strideB, __global float *restrict Bp,
                               long strideBp)
{
  const int x = get_global_id(0);
  if (x < ga)
    pack_panel(MR, x, M, K, transA, A + offA + get_global_id(2) * strideA, lda,
               Ap + get_global_id(2) * strideAp);
  else
    pack_panel(NR, x - ga, N, K, !transB, B + offB + get_global_id(2) * strideB, ldb,
               Bp + get_global_id(2) * strideBp);
}

/* micro-kernel: acc[MR][NV] += sum_k a(r,k) * b[k][..], a(r,k) = AEL */
#define MICRO_LOOP(UNROLL, AEL)                                                \
  _Pragma(UNROLL) for (int k = 0; k < kb; ++k) {                               \
    VT bv[NV];                                                                 \
    _Pragma("unroll") for (int v = 0; v < NV; ++v) bv[v] = b[k * NV + v];      \
    _Pragma("unroll") for (int r = 0; r < MR; ++r) {                           \
      const VT av = (VT)(AEL);                                                 \
      _Pragma("unroll") for (int v = 0; v < NV; ++v)                           \
        acc[r][v] = fma(av, bv[v], acc[r][v]);                                 \
    }                                                                          \
  }

/* C tiles.  global = (ceil(N/nc), ceil(M/mc), batch), mc % MR == 0,
 * nc % NR == 0.  A: if apacked, A is the clp_gemm_pack_a output (offA added,
 * lda ignored); else A is read directly, op(A) = A non-transposed:
 * element (m,k) at A[offA + m*lda + k].  strideA/strideBp may be 0 to share
 * an operand across the batch.  beta == 0 never reads C.
 * P1, P2: optional regions (rows x len floats, stride ld, rows = 0: none) to
 * prefetch while computing; the host passes the next K chunk's A and B.
 * has_bias: the epilogue adds bias[boff + column] (N, C's storage) to each element of C after
 * its last K block: C = round(round(alpha acc + beta C) + bias), the rounding and order of a
 * separate clp_bias_forward after the product (bitwise that pair; the host sets it on the last
 * K chunk only, and never with K <= 0).
 * gelu >= 0 (with has_bias; batch 1, N and NR multiples of 8): act[aoff + row ldc + column] =
 * gelu_f8(C as stored) (kind gelu, nn_gelu.clh) after the biased store, eight columns at a time:
 * clp_bias_gelu_forward's vector path, whose fc this C is (cl/nn.h clp_nn_linear_gelu). */
__kernel WG1 void clp_gemm_packed(int M, int N, int K, float alpha, float beta,
                                __global const AB_T *restrict A, long offA,
                                int lda, int apacked, long strideA,
                                __global const float *restrict Bp, long strideBp,
                                __global ST_T *restrict C, long offC, int ldc,
                                long strideC, int mc, int nc, int kc,
                                __global const float *P1, long p1off, int p1rows, int p1len, int p1ld,
                                __global const float *P2, long p2off, int p2rows, int p2len, int p2ld,
                                __global const ST_T *bias, long boff, int has_bias,
                                __global ST_T *act, long aoff, int gelu)
{
  const int G = get_num_groups(0) * get_num_groups(1) * get_num_groups(2);
  const int g = get_group_id(0) + get_num_groups(0) * (get_group_id(1) + get_num_groups(1) * get_group_id(2));
  const int n0 = get_group_id(0) * nc;
  const int m0 = get_group_id(1) * mc;
  const int n1 = min(N, n0 + nc);
  const int m1 = min(M, m0 + mc);
  /* a packed A is fp32 strips whatever A's storage; a direct A is read in its storage */
  const __global float *Af = (const __global float *)A + offA + get_group_id(2) * strideA;
  A += offA + get_group_id(2) * strideA;
  Bp += get_group_id(2) * strideBp;
  C += offC + get_group_id(2) * strideC;

  if (K <= 0) { /* C = beta * C */
    for (int i = m0; i < m1; ++i)
      for (int j = n0; j < n1; ++j)
        ST_SV(C, (size_t)i * ldc + j, beta == 0.0f ? 0.0f : beta * ST_LD(C, (size_t)i * ldc + j));
    return;
  }

  const int nj = (n1 - n0 + NR - 1) / NR, T = (K + kc - 1) / kc * nj;
  for (int p0 = 0; p0 < K; p0 += kc) {
    const int kb = min(kc, K - p0);
    const float bet = p0 == 0 ? beta : 1.0f;
    const int addb = has_bias && p0 + kb >= K; /* the last K block */
    for (int j = n0; j < n1; j += NR) {
      const int t = p0 / kc * nj + (j - n0) / NR;
      if (p1rows > 0) pf_region(P1 + p1off, p1rows, p1len, p1ld, g, G, t, T);
      if (p2rows > 0) pf_region(P2 + p2off, p2rows, p2len, p2ld, g, G, t, T);
      const __global VT *b =
          (const __global VT *)(Bp + (size_t)(j / NR) * K * NR + (size_t)p0 * NR);
      for (int i = m0; i < m1; i += MR) {
        const int mv = min(MR, m1 - i);
        __global ST_T *c = C + (size_t)i * ldc + j;
#pragma unroll
        for (int r = 0; r < MR; ++r) { /* C tile lines, needed after the k loop */
          PREFETCHW(c + (size_t)min(r, mv - 1) * ldc);
          PREFETCHW(c + (size_t)min(r, mv - 1) * ldc + min(NR, n1 - j) - 1);
        }
        VT acc[MR][NV];
#pragma unroll
        for (int r = 0; r < MR; ++r)
#pragma unroll
          for (int v = 0; v < NV; ++v) acc[r][v] = (VT)(0.0f);
        if (apacked) {
          const __global float *ap = Af + ((size_t)(i / MR) * K + p0) * MR;
          MICRO_LOOP("unroll 4", ap[k * MR + r])
        } else {
          const __global AB_T *pa[MR]; /* rows past M re-read the last row */
#pragma unroll
          for (int r = 0; r < MR; ++r) pa[r] = A + (size_t)(i + min(r, mv - 1)) * lda + p0;
          MICRO_LOOP("unroll 4", AB_LD1(pa[r] + k))
        }

#if ST_TYPE == 0
        if (mv == MR && j + NR <= n1 && addb) {
#pragma OPENCL FP_CONTRACT OFF /* alpha acc, then + bias: two roundings, as the pair */
          const __global float *bb = bias + boff + j;
#pragma unroll
          for (int r = 0; r < MR; ++r)
#pragma unroll
            for (int v = 0; v < NV; ++v) {
              const VT x = bet == 0.0f ? alpha * acc[r][v]
                                       : fma((VT)(bet), VLOAD(v, c + (size_t)r * ldc), alpha * acc[r][v]);
              VSTORE(x + VLOAD(v, bb), v, c + (size_t)r * ldc);
            }
        } else if (mv == MR && j + NR <= n1) {
          if (bet == 0.0f) {
#pragma unroll
            for (int r = 0; r < MR; ++r)
#pragma unroll
              for (int v = 0; v < NV; ++v) VSTORE(alpha * acc[r][v], v, c + (size_t)r * ldc);
          } else {
#pragma unroll
            for (int r = 0; r < MR; ++r)
#pragma unroll
              for (int v = 0; v < NV; ++v)
                VSTORE(fma((VT)(bet), VLOAD(v, c + (size_t)r * ldc), alpha * acc[r][v]),
                       v, c + (size_t)r * ldc);
          }
        } else
#endif
        { /* a 16-bit C: element by element, rounded once (ST_SV) */
          float tt[MR * NR];
#pragma unroll
          for (int r = 0; r < MR; ++r)
#pragma unroll
            for (int v = 0; v < NV; ++v) VSTORE(alpha * acc[r][v], r * NV + v, tt);
          const int nr = min(NR, n1 - j);
          for (int r = 0; r < mv; ++r)
            for (int q = 0; q < nr; ++q) {
              float x = tt[r * NR + q];
              if (bet != 0.0f) x = fma(bet, ST_LD(c, (size_t)r * ldc + q), x);
              ST_SV(c, (size_t)r * ldc + q, x);
              if (addb) /* the stored (rounded) value + bias, rounded: clp_bias_forward's */
                ST_SV(c, (size_t)r * ldc + q,
                      ST_LD(c, (size_t)r * ldc + q) + ST_LD(bias, boff + j + q));
            }
        }
        if (addb && gelu >= 0) { /* act = gelu(fc as stored), eight at a time */
          const int nr = min(NR, n1 - j);
          __global ST_T *ap = act + aoff + (size_t)i * ldc + j;
          for (int r = 0; r < mv; ++r)
            for (int q = 0; q + 8 <= nr; q += 8)
              ST_SV8(ap, (size_t)r * ldc + q, gelu_f8(ST_LD8(c, (size_t)r * ldc + q), gelu));
        }
      }
    }
  }
}
