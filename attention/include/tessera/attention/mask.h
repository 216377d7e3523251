// Which keys a query sees, and the additive terms of its score: the single
// definition shared by the CPU path, the CUDA kernels and the reference.
#pragma once

#include <cstdint>

#include "tessera/attention/host_device.h"
#include "tessera/attention/philox.h"

namespace tessera::attention {

// Per-sequence visibility window [lo, hi) of keys for query row i, from
// causal / sliding-window options. Bottom-right aligned: query i sits at
// key position i' = i + nk - nq.
struct KeyRange {
  int lo, hi;
};

TESSERA_HD KeyRange visible_keys(int i, int nq, int nk, bool causal, int window_left,
                                 int window_right) {
  const int ip = i + nk - nq;
  int lo = 0, hi = nk;
  if (window_left >= 0) lo = ip - window_left > 0 ? ip - window_left : 0;
  // validate() rejects causal with window_right > 0, so causal means right = 0.
  const int right = causal ? 0 : window_right;
  if (right >= 0) {
    const int h = ip + right + 1;
    hi = h < nk ? h : nk;
  }
  if (hi < lo) hi = lo;
  return KeyRange{lo, hi};
}

// ALiBi term for query i, key j (bottom-right aligned as FlashAttention 2).
TESSERA_HD float alibi_term(float slope, int i, int j, int nq, int nk) {
  const int d = i + nk - nq - j;
  return -slope * static_cast<float>(d < 0 ? -d : d);
}

}  // namespace tessera::attention
