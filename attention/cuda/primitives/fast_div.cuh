// Division and remainder by a divisor fixed per launch (a head group, a bias term's broadcast extents), by
// a multiply-high, an add and a shift (Granlund and Montgomery's round-up method). A runtime integer
// division costs ~20 instructions and a reciprocal's round trip, and the portable forward's CTA set-up
// takes four (the GQA group, the bias terms' batch and head slices) in CTAs that run few key blocks.
#pragma once

#include <cstdint>

namespace tessera::attention::cuda {

struct FastDiv {
  uint32_t d = 1;    // the divisor (>= 1)
  uint32_t mul = 1;  // floor(2^32 (2^shift - d) / d) + 1
  int shift = 0;     // ceil(log2 d)

  static FastDiv make(uint32_t d) {
    FastDiv f;
    f.d = d < 1 ? 1 : d;
    while ((uint64_t(1) << f.shift) < f.d) ++f.shift;
    f.mul = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << f.shift) - f.d)) / f.d + 1);
    return f;
  }
  // x in [0, 2^31): the high product is at most x, so the add cannot wrap
  __host__ __device__ __forceinline__ uint32_t div(uint32_t x) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(x, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t(x) * mul) >> 32);
#endif
    return (hi + x) >> shift;
  }
  __host__ __device__ __forceinline__ uint32_t mod(uint32_t x) const { return x - div(x) * d; }
};

}  // namespace tessera::attention::cuda
