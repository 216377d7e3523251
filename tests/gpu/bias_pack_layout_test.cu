// Host-only check (no GPU needed): the fragment order of packed bias tiles
// (attention/cuda/bias_pack.cuh). frag_rc must place a lane's 8 values where
// the kernels' m16n8 accumulator fragments hold them (value k = 4 n + e of lane
// (g, tq): row g + 8 (e >> 1), column 8 n + 2 tq + (e & 1)), cover each element
// of a 16 x 16 tile exactly once, and packed_off must give every (slice, tile,
// lane) its own 8 values, clamping tiles past the packed extent into it; the
// forward's split form (packed_row_off + packed_col_off) must equal it.
#include <cstdio>
#include <vector>

#include "cuda/bias_pack.cuh"

using namespace tessera::attention::cuda;

int main() {
  int bad = 0;
  std::vector<int> seen(256, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int k = 0; k < 8; ++k) {
      int r, c;
      frag_rc(lane, k, r, c);
      const int g = lane >> 2, tq = lane & 3, n = k >> 2, e = k & 3;
      if (r != g + 8 * (e >> 1) || c != 8 * n + 2 * tq + (e & 1)) {
        std::printf("frag_rc(%d, %d) = (%d, %d), not the accumulator fragment's element\n", lane, k, r, c);
        ++bad;
      }
      if (r < 0 || r >= 16 || c < 0 || c >= 16) { ++bad; continue; }
      ++seen[r * 16 + c];
    }
  for (int x = 0; x < 256; ++x)
    if (seen[x] != 1) {
      std::printf("tile element (%d, %d) held %d times\n", x / 16, x % 16, seen[x]);
      ++bad;
    }
  // packed_off: 3 slices of 5 x 7 tiles; every (slice, tile, lane) owns 8 distinct values
  PackedBias pk{};
  pk.rt = 5;
  pk.ct = 7;
  const int slices = 3;
  std::vector<int> owner(size_t(slices) * pk.rt * pk.ct * 256, 0);
  for (int s = 0; s < slices; ++s)
    for (int R = 0; R < pk.rt; ++R)
      for (int C = 0; C < pk.ct; ++C)
        for (int lane = 0; lane < 32; ++lane) {
          const int64_t off = packed_off(pk, s, R, C, lane);
          if (off % 8 != 0 || off < 0 || off + 8 > int64_t(owner.size())) { ++bad; continue; }
          for (int k = 0; k < 8; ++k) ++owner[off + k];
        }
  for (size_t x = 0; x < owner.size(); ++x)
    if (owner[x] != 1) { std::printf("packed element %zu owned %d times\n", x, owner[x]); ++bad; break; }
  // tiles past the extent read the last row / column of tiles of the same slice
  if (packed_off(pk, 1, 9, 2, 3) != packed_off(pk, 1, pk.rt - 1, 2, 3) ||
      packed_off(pk, 2, 0, 40, 0) != packed_off(pk, 2, 0, pk.ct - 1, 0)) {
    std::printf("packed_off does not clamp tiles past the extent\n");
    ++bad;
  }
  // the forward's split form: row offset once, plus a column (clamped as packed_off clamps)
  int split_bad = 0;
  for (int s = 0; s < slices; ++s)
    for (int R = 0; R < pk.rt + 2; ++R)
      for (int C = 0; C < pk.ct + 3; ++C)
        for (int lane = 0; lane < 32; ++lane)
          if (int64_t(packed_row_off(pk, s, R, lane)) + packed_col_off(pk, C) != packed_off(pk, s, R, C, lane) &&
              split_bad++ == 0)
            std::printf("packed_row_off + packed_col_off != packed_off at slice %d, tile (%d, %d), lane %d\n", s, R,
                        C, lane);
  bad += split_bad;
  if (bad) {
    std::printf("FAILED: %d problems\n", bad);
    return 1;
  }
  std::printf("fragment order and packed offsets: ok\n");
  return 0;
}
