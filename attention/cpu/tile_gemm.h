// The one matrix product of the CPU path: C[M×N] (+)= A[M×K] · B[K×N] on
// small fp32 tiles held in cache. A, B, C row-major; N must be a multiple
// of VW (callers pad tiles with zeros). A register-blocked micro-kernel of
// RM rows × 2 vectors broadcasts one A element against two B vectors.
#pragma once

#include "cpu/simd.h"

namespace tessera::attention::cpu::TESSERA_CPU_NS {

constexpr int RM = VW >= 16 ? 8 : 4;  // rows per micro-kernel (fits the register file)

template <int R, int NV>
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
      const float a = A[static_cast<int64_t>(r) * lda + k];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) storeu(C + r * ldc + v * VW, c[r][v]);
}

template <int NV>
inline void gemm_rows(int M, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                      bool acc) {
  int i = 0;
  for (; i + RM <= M; i += RM) micro_kernel<RM, NV>(K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, acc);
  const float* a = A + i * lda;
  float* c = C + i * ldc;
  switch (M - i) {
    case 7: if constexpr (RM > 7) micro_kernel<7, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 6: if constexpr (RM > 6) micro_kernel<6, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 5: if constexpr (RM > 5) micro_kernel<5, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 4: if constexpr (RM > 4) micro_kernel<4, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 3: micro_kernel<3, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 2: micro_kernel<2, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    case 1: micro_kernel<1, NV>(K, a, lda, B, ldb, c, ldc, acc); break;
    default: break;
  }
}

// C = A·B (accumulate = false) or C += A·B.
inline void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                 bool accumulate) {
  int j = 0;
  for (; j + 2 * VW <= N; j += 2 * VW) gemm_rows<2>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  if (j < N) gemm_rows<1>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
}

}  // namespace tessera::attention::cpu::TESSERA_CPU_NS
