// Global <-> shared tile movement: rows of a [.., N, H, D] tensor into a
// swizzled ROWS x (8*C) tile, zero-filling rows past the sequence end and
// columns past the head dim.
#pragma once

#include "mma.cuh"

namespace tessera::attention::cuda {

// Loads rows [0, ROWS) of a tile whose row r lives at gbase + r * row_stride
// (valid while r < nrows) and whose columns past ncols are zero.
// vec: every row start is 16-byte aligned and ncols % 8 == 0 (cp.async path);
// otherwise element loads. Caller commits / waits for cp.async groups.
template <int ROWS, int C, int NTHREADS, typename T>
__device__ __forceinline__ void load_tile(T* s, const T* gbase, int64_t row_stride, int nrows, int ncols,
                                          bool vec, int tid) {
  constexpr int CHUNKS = ROWS * C;
  if (vec) {
#pragma unroll
    for (int idx = tid; idx < CHUNKS; idx += NTHREADS) {
      const int r = idx / C, c = idx % C;
      const bool ok = r < nrows && c * 8 < ncols;
      const T* src = ok ? gbase + r * row_stride + c * 8 : gbase;
      cp_async16(smem_u32(s + Swz<C>::off(r, c)), src, ok ? 16 : 0);
    }
  } else {
    for (int idx = tid; idx < CHUNKS; idx += NTHREADS) {
      const int r = idx / C, c = idx % C;
      alignas(16) T v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int col = c * 8 + e;
        v[e] = (r < nrows && col < ncols) ? gbase[r * row_stride + col] : T(0.f);
      }
      *reinterpret_cast<uint4*>(s + Swz<C>::off(r, c)) = *reinterpret_cast<const uint4*>(v);
    }
  }
}

}  // namespace tessera::attention::cuda
