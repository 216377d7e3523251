// The attention mask of Swin's shifted windows, as the benchmarks pass it: a cube of
// side^3 windows of 7^3 tokens, shifted by 3 along each axis (MONAI SwinUNETR's
// compute_mask). Tokens of one window that come from different regions of the rolled
// volume get -100, the rest 0; only the windows on the far border of some axis (127
// of 343 for side 7) hold any -100, the others are all zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::bench {

// [nw][343][343] as bf16 bits (0 or -100, both exact in bf16); nw must be a cube (side^3 windows).
inline std::vector<uint16_t> swin_shift_mask_bf16(int nw) {
  constexpr int ws = 7, shift = 3, N = ws * ws * ws;
  int side = 1;
  while (side * side * side < nw) ++side;
  if (side * side * side != nw)
    throw std::invalid_argument("swin_shift_mask_bf16: " + std::to_string(nw) + " windows are not a cube");
  constexpr uint16_t kZero = 0x0000, kMinus100 = 0xC2C8;
  const int L = side * ws;
  // region of a coordinate along one axis: [0, L - ws), [L - ws, L - shift), [L - shift, L)
  auto region = [&](int x) { return x < L - ws ? 0 : x < L - shift ? 1 : 2; };
  std::vector<uint16_t> m(static_cast<std::size_t>(side) * side * side * N * N);
  std::vector<int> id(N);
  std::size_t w = 0;
  for (int wd = 0; wd < side; ++wd)
    for (int wh = 0; wh < side; ++wh)
      for (int ww = 0; ww < side; ++ww, ++w) {
        for (int t = 0; t < N; ++t) {
          const int d = wd * ws + t / (ws * ws), h = wh * ws + (t / ws) % ws, x = ww * ws + t % ws;
          id[t] = 9 * region(d) + 3 * region(h) + region(x);
        }
        uint16_t* dst = m.data() + w * N * N;
        for (int i = 0; i < N; ++i)
          for (int j = 0; j < N; ++j) dst[i * N + j] = id[i] == id[j] ? kZero : kMinus100;
      }
  return m;
}

}  // namespace tessera::bench
