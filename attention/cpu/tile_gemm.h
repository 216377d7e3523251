// The one matrix product of the CPU path: C[M×N] (+)= A[M×K] · B[K×N] on
// small fp32 tiles held in cache. A, B, C row-major (or A given transposed,
// as the K×M tile it is stored as: gemm_at); N must be a multiple of VW
// (callers pad tiles with zeros). A register-blocked micro-kernel of RM rows
// × 2 vectors broadcasts one A element against two B vectors.
#pragma once

#include "cpu/simd.h"

namespace tessera::attention::cpu::TESSERA_CPU_NS {

constexpr int RM = VW >= 16 ? 8 : 4;  // rows per micro-kernel (fits the register file)

// TA: A(r, k) is A[k * lda + r] (a transposed tile) instead of A[r * lda + k].
template <int R, int NV, bool TA>
inline void micro_kernel(int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                         bool accumulate) {
  vf c[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? loadu(C + r * ldc + v * VW) : vf{};
  for (int k = 0; k < K; ++k) {
    vf b[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) b[v] = loadu(B + static_cast<int64_t>(k) * ldb + v * VW);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float a = TA ? A[static_cast<int64_t>(k) * lda + r] : A[static_cast<int64_t>(r) * lda + k];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) storeu(C + r * ldc + v * VW, c[r][v]);
}

template <int NV, bool TA>
inline void gemm_rows(int M, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                      bool acc) {
  const int a_row = TA ? 1 : lda;  // A's step from one row of C to the next
  int i = 0;
  for (; i + RM <= M; i += RM) micro_kernel<RM, NV, TA>(K, A + i * a_row, lda, B, ldb, C + i * ldc, ldc, acc);
  const float* a = A + i * a_row;
  float* c = C + i * ldc;
  switch (M - i) {
    case 7: if constexpr (RM > 7) micro_kernel<7, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 6: if constexpr (RM > 6) micro_kernel<6, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 5: if constexpr (RM > 5) micro_kernel<5, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 4: if constexpr (RM > 4) micro_kernel<4, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 3: micro_kernel<3, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 2: micro_kernel<2, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 1: micro_kernel<1, NV, TA>(K, a, lda, B, ldb, c, ldc, acc); break;
    default: break;
  }
}

template <bool TA>
inline void gemm_impl(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                      bool accumulate) {
  int j = 0;
  for (; j + 2 * VW <= N; j += 2 * VW) gemm_rows<2, TA>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  if (j < N) gemm_rows<1, TA>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
}

// C = A·B (accumulate = false) or C += A·B.
inline void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                 bool accumulate) {
  gemm_impl<false>(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// C (+)= Aᵀ·B with A stored as a K×M tile (leading dimension lda): the backward's
// dV += Pᵀ·dO and dK += dSᵀ·Q straight from the row-major P and dS tiles.
inline void gemm_at(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                    bool accumulate) {
  gemm_impl<true>(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

}  // namespace tessera::attention::cpu::TESSERA_CPU_NS
