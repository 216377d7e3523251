// Host-only check (no GPU needed): the fragment order of packed bias tiles
// (attention/cuda/bias_pack.cuh). frag_rc must place a lane's 8 values where
// the kernels' m16n8 accumulator fragments hold them (value k = 4 n + e of lane
// (g, tq): row g + 8 (e >> 1), column 8 n + 2 tq + (e & 1)), cover each element
// of a 16 x 16 tile exactly once, and packed_off must give every (slice, tile,
// lane) its own 8 values, clamping tiles past the packed extent into it; the
// forward's split form (packed_row_off + packed_col_off) must equal it. The tensor-core bias adds
// (mma_add_tile16) rest on the same order being the A operand's of mma.m16n8k16 (PTX ISA: register
// i of lane (g, tq) holds row g + 8 (i & 1), columns 8 (i >> 1) + 2 tq + {0, 1}) and on eye_bits giving
// each lane its B fragment (rows 2 tq + 8 i + {0, 1} of column g) of the 16 x 16 identity's columns
// 0-7 (b0 = eye, b1 = 0) and 8-15 (b0 = 0, b1 = eye): the emulated mma must return the tile. The
// backward's fp32 dBias tiles (dbias_frag_off) must cover a tile once, each warp red 512 contiguous bytes.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/kernels/sm80/bias_pack.cuh"

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
  // the packed order as mma.m16n8k16's A fragment
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        int r, c;
        frag_rc(lane, 2 * i + j, r, c);
        const int g = lane >> 2, tq = lane & 3;
        if (r != g + 8 * (i & 1) || c != 8 * (i >> 1) + 2 * tq + j) {
          std::printf("packed value %d of lane %d is not A register %d's element %d\n", 2 * i + j, lane, i, j);
          ++bad;
        }
      }
  // emulated mma: A = a tile with distinct values (in the packed order), B = the identity's half from
  // each lane's eye_bits (one = 1), D = A B must be that half of the tile
  float tile[16][16];
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) tile[r][c] = float(r * 16 + c + 1);
  for (int half = 0; half < 2; ++half) {
    float A[16][16] = {}, B[16][8] = {};
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, tq = lane & 3;
      for (int k = 0; k < 8; ++k) {
        int r, c;
        frag_rc(lane, k, r, c);
        A[r][c] = tile[r][c];  // what the lane's packed value k puts into A
      }
      const uint32_t eye = eye_bits(lane, 1u), b[2] = {half == 0 ? eye : 0u, half == 1 ? eye : 0u};
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) B[2 * tq + 8 * i + j][g] = float((b[i] >> (16 * j)) & 0xFFFFu);
    }
    for (int r = 0; r < 16; ++r)
      for (int n = 0; n < 8; ++n) {
        float d = 0.f;
        for (int k = 0; k < 16; ++k) d += A[r][k] * B[k][n];
        if (d != tile[r][8 * half + n]) {
          std::printf("identity mma, half %d: D(%d, %d) = %g, not the tile's %g\n", half, r, n, d,
                      tile[r][8 * half + n]);
          ++bad;
        }
      }
  }
  // the backward's fp32 dBias order (red_packed_tile, unpack_dbias_kernel): the lanes' 8 values cover the
  // tile once, and each of the warp's two 16-byte reds covers 128 contiguous floats (whole sectors)
  std::vector<int> dseen(256, 0);
  for (int red = 0; red < 2; ++red) {
    int lo = 256, hi = -1;
    for (int lane = 0; lane < 32; ++lane) {
      const int64_t off = dbias_frag_off(0, lane) + 128 * red;
      if (off % 4 != 0 || off < 0 || off + 4 > 256) { ++bad; continue; }
      for (int e = 0; e < 4; ++e) ++dseen[off + e];
      lo = std::min<int>(lo, int(off));
      hi = std::max<int>(hi, int(off) + 3);
    }
    if (hi - lo != 127) {
      std::printf("dBias red %d spans floats %d..%d, not 128 contiguous\n", red, lo, hi);
      ++bad;
    }
  }
  for (int x = 0; x < 256; ++x)
    if (dseen[x] != 1) { std::printf("dBias tile float %d written %d times\n", x, dseen[x]); ++bad; break; }
  if (dbias_frag_off(3 * 256, 5) != 3 * 256 + dbias_frag_off(0, 5)) {
    std::printf("dbias_frag_off is not relative to its tile\n");
    ++bad;
  }
  if (bad) {
    std::printf("FAILED: %d problems\n", bad);
    return 1;
  }
  std::printf("fragment order, packed offsets, the identity mma and the dBias order: ok\n");
  return 0;
}
