// Counter-based RNG for dropout (Philox4x32-10, Salmon et al., SC'11).
//
// The keep/drop decision of score (b, h, i, j) depends only on
// (seed, offset, b, h, i, j), so CPU and CUDA draw the same mask:
//   key     = (lo32(seed), hi32(seed) ^ hi32(offset))
//   counter = (j / 4, i, b * Hq + h, lo32(offset))
//   u       = philox(counter, key)[j % 4]
//   keep    = u >= dropout_threshold(p)   (kept values are scaled by 1/(1-p))
// For varlen, b is the sequence index and i, j are positions inside it.
#pragma once

#include <cstdint>

#include "tessera/attention/host_device.h"

namespace tessera::attention {

struct Philox4 {
  uint32_t x[4];
};

TESSERA_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t prod = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(prod >> 32);
  return static_cast<uint32_t>(prod);
}

TESSERA_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                 uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo32(kM0, c0, &hi0);
    const uint32_t lo1 = mulhilo32(kM1, c2, &hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += kW0; k1 += kW1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Four consecutive keep-decisions (columns 4*jq .. 4*jq+3) as raw uint32 draws.
TESSERA_HD Philox4 dropout_draws(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t jq) {
  return philox4x32_10(jq, i, bh, static_cast<uint32_t>(offset),
                       static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(offset >> 32));
}

// A draw u keeps its element iff u >= threshold, threshold = round(p * 2^32)
// (saturated); the kept fraction is then 1 - p up to 2^-32.
TESSERA_HD uint32_t dropout_threshold(float p) {
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

TESSERA_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t j,
                             uint32_t threshold) {
  const Philox4 r = dropout_draws(seed, offset, bh, i, j >> 2);
  return r.x[j & 3] >= threshold;
}

}  // namespace tessera::attention
