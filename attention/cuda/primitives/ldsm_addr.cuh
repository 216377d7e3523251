// ldmatrix addressing of the swizzled shared tiles (Swz<C>, mma.cuh) for the portable kernels' GEMMs:
// an operand is a per-lane base address plus compile-time immediates.
#pragma once

#include <cstdint>

#include "primitives/mma.cuh"

namespace tessera::attention::cuda {

// gemm_ss (mma.cuh) evaluates Swz<C>::off per (tile, k-step); unrolled, every
// distinct offset becomes a loop-invariant register that lives through the
// whole query-block loop. Here an operand is a per-lane base address plus
// compile-time immediates: the swizzle XOR key of a row depends on the row
// mod 8 only, and it touches only the low W chunk bits, so
//   (2*ks + h) ^ key = (2*ks & ~(W-1)) + ((2*ks & (W-1)) ^ (h ^ key))   (h in {0, 1}).
// Same offsets as Swz<C>::off (tests/gpu/bwd_swz_test.cu checks this exhaustively on the host).
template <int C>
struct SwzKey {
  static_assert(C >= 2, "a 16-wide k-step needs two chunks per row");
  static constexpr int W = C >= 8 ? 8 : C;  // chunk bits the XOR can touch
  static __host__ __device__ __forceinline__ int key(int r) {  // as Swz<C>::chunk
    if constexpr (C >= 8) return r & 7;
    else if constexpr (C == 4) return (r >> 1) & 3;
    else return (r >> 2) & 1;
  }
};

// Operand read without .trans: k runs along the chunks of a row (A [m][k], B [n][k]).
// Lane row R and chunk parity h: A (x4): R = m0 + (lane & 15), h = lane >> 4;
// B (x4 / x2): R = n0 + (lane & 7) + 8 * (lane >> 4), h = (lane >> 3) & 1.
template <int C>
struct OpK {
  static constexpr bool kTrans = false;
  uint32_t base;  // byte address of row R, chunk 0
  int y;          // h ^ key(R)
  __host__ __device__ __forceinline__ OpK(uint32_t tile, int R, int h)
      : base(tile + R * C * 16), y(h ^ SwzKey<C>::key(R)) {}
  // rows R + dr (dr % 8 == 0), k-step ks (columns 16 ks ..)
  __host__ __device__ __forceinline__ uint32_t at(int dr, int ks) const {
    constexpr int W = SwzKey<C>::W;
    const int c = 2 * ks;
    return base + (dr * C * 8 + (c & ~(W - 1)) * 8) * 2 + (((c & (W - 1)) ^ y) << 4);
  }
};

// Operand read with .trans: k runs along the rows (A stored [k][m], B stored [k][n]).
// A (x4): R = (lane & 7) + 8 * (lane >> 4), h = (lane >> 3) & 1, E = m0 / 8;
// B (x4 / x2): R = (lane & 7) + 8 * ((lane >> 3) & 1), h = lane >> 4, E = n0 / 8.
template <int C>
struct OpT {
  static constexpr bool kTrans = true;
  uint32_t base;  // byte address of row R, chunk 0
  int e, key;     // E + h, key(R)
  __host__ __device__ __forceinline__ OpT(uint32_t tile, int R, int h, int E)
      : base(tile + R * C * 16), e(E + h), key(SwzKey<C>::key(R)) {}
  // chunk offset dc (columns 8 dc ..), k-step ks (rows 16 ks ..)
  __host__ __device__ __forceinline__ uint32_t at(int dc, int ks) const {
    return base + ks * 16 * C * 16 + (((e + dc) ^ key) << 4);
  }
};

// The four operand kinds of the kernel's GEMMs at the warp's tile origin m0 / n0
// (lane mapping of mma.cuh's load_a / load_b2 / load_a_t / load_b2_t).
template <int C> __host__ __device__ __forceinline__ OpK<C> op_a(uint32_t tile, int m0, int lane) {
  return OpK<C>(tile, m0 + (lane & 15), lane >> 4);
}
template <int C> __host__ __device__ __forceinline__ OpK<C> op_b(uint32_t tile, int n0, int lane) {
  return OpK<C>(tile, n0 + (lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1);
}
template <int C> __host__ __device__ __forceinline__ OpT<C> op_a_t(uint32_t tile, int m0, int lane) {
  return OpT<C>(tile, (lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1, m0 / 8);
}
template <int C> __host__ __device__ __forceinline__ OpT<C> op_b_t(uint32_t tile, int n0, int lane) {
  return OpT<C>(tile, (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4, n0 / 8);
}

}  // namespace tessera::attention::cuda
