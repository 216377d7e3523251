// Global <-> shared tile movement: rows of a [.., N, H, D] tensor into a
// swizzled ROWS x (8*C) tile, zero-filling rows past the sequence end and
// columns past the head dim.
#pragma once

#include "primitives/mma.cuh"

namespace tessera::attention::cuda {

// Loads rows [0, ROWS) of a tile whose row r lives at gbase + r * row_stride
// (valid while r < nrows) and whose columns past ncols are zero.
// vec: every row start is 16-byte aligned and ncols % 8 == 0 (cp.async path);
// otherwise element loads. Caller commits / waits for cp.async groups.
template <int ROWS, int C, int NTHREADS, typename T>
__device__ __forceinline__ void load_tile(T* s, const T* gbase, int64_t row_stride, int nrows, int ncols,
                                          bool vec, int tid) {
  constexpr int CHUNKS = ROWS * C;
  // A thread's chunks lie NTHREADS / C rows apart in one chunk column; where that step is a multiple of
  // 8 rows they share the swizzle key (Swz<C> reads at most r & 7), so the row, column, swizzled shared
  // offset and global address are worked out once and each chunk adds constants.
  constexpr int RSTEP = NTHREADS / C;
  if constexpr (NTHREADS % C == 0 && RSTEP % 8 == 0) {
    if (vec) {
      const int r0 = tid / C, c = tid % C;
      const bool col_ok = c * 8 < ncols;
      const T* g0 = gbase + r0 * row_stride + c * 8;
      const uint32_t s0 = smem_u32(s + Swz<C>::off(r0, c));
#pragma unroll
      for (int k = 0; k < (ROWS + RSTEP - 1) / RSTEP; ++k) {
        const int r = r0 + k * RSTEP;
        if (ROWS % RSTEP != 0 && r >= ROWS) break;
        const bool ok = col_ok && r < nrows;
        cp_async16(s0 + k * RSTEP * C * 8 * static_cast<int>(sizeof(T)), ok ? g0 + k * RSTEP * row_stride : gbase,
                   ok ? 16 : 0);
      }
      return;
    }
  }
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
