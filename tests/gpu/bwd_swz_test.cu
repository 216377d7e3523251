// Host-only check (no GPU needed): the split ldmatrix addressing of the
// backward GEMMs (OpK / OpT in attention/cuda/bwd_kernel.cuh) gives the same
// shared-memory offsets as the load_* helpers of mma.cuh (Swz<C>::off), for
// every lane, warp offset, tile and k-step the kernels can use. The WIN backward's
// swizzled fp32 dQ rows (win_dq_off) must be a permutation of each row's D floats, keep
// 8-float units whole, and give a half warp's float2 adds (4 rows x 4 lanes) all 32 banks; the
// P^T / dS^T fragment stores' offsets (FragPairOff) must equal Swz<CP>::off, and their stmatrix form
// (FragQuadOff) must put every word where FragPairOff does. The Hopper backward's dQ staging offsets must
// put every element where the reduce-adds' boxes hold it, without bank conflicts.
#include <cstdio>

#include "cuda/kernels/sm80/bwd_kernel.cuh"
#include "cuda/kernels/sm90/bwd_sm90_kernel.cuh"
#include "cuda/kernels/sm90/fwd_sm90_kernel.cuh"

using namespace tessera::attention::cuda;

template <int C>
struct Ref {  // host copy of Swz<C> and the row / chunk of each load_* helper
  static int chunk(int r, int c) { return c ^ SwzKey<C>::key(r); }
  static int off(int r, int c) { return r * (C * 8) + chunk(r, c) * 8; }
  static int a(int lane, int m0, int k0) { return off(m0 + (lane & 15), (k0 >> 3) + (lane >> 4)); }
  static int a_t(int lane, int m0, int k0) {
    const int q = lane >> 3;
    return off(k0 + (lane & 7) + (q >> 1) * 8, (m0 >> 3) + (q & 1));
  }
  static int b2(int lane, int n0, int k0) {
    const int q = lane >> 3;
    return off(n0 + (lane & 7) + (q >> 1) * 8, (k0 >> 3) + (q & 1));
  }
  static int b2_t(int lane, int n0, int k0) {
    const int q = lane >> 3;
    return off(k0 + (lane & 7) + (q & 1) * 8, (n0 >> 3) + (q >> 1));
  }
  static int b1(int lane, int n0, int k0) {
    const int l = lane & 15;
    return off(n0 + (l & 7), (k0 >> 3) + (l >> 3));
  }
  static int b1_t(int lane, int n0, int k0) {
    const int l = lane & 15;
    return off(k0 + (l & 7) + (l >> 3) * 8, n0 >> 3);
  }
};

// rows x (8 C) tile; w0: the warp's first row (OpK) or column (OpT), a multiple of 16
template <int C>
int check(int rows) {
  const int cols = 8 * C, K = cols;  // k along the chunks for OpK
  int bad = 0;
  for (int lane = 0; lane < 32; ++lane) {
    for (int w0 = 0; w0 + 16 <= rows; w0 += 16) {
      const OpK<C> A = op_a<C>(0, w0, lane), B = op_b<C>(0, w0, lane);
      for (int dr = 0; w0 + dr + 16 <= rows; dr += 8)
        for (int ks = 0; ks < K / 16; ++ks) {
          if (dr % 16 == 0) {
            bad += A.at(dr, ks) != 2u * Ref<C>::a(lane, w0 + dr, 16 * ks);
            bad += B.at(dr, ks) != 2u * Ref<C>::b2(lane, w0 + dr, 16 * ks);
          }
          if (lane < 16) bad += B.at(dr, ks) != 2u * Ref<C>::b1(lane, w0 + dr, 16 * ks);
        }
    }
    // transposed: k along the rows (rows multiple of 16), m / n along the chunks
    for (int w0 = 0; w0 + 8 <= cols; w0 += 8) {
      const OpT<C> A = op_a_t<C>(0, w0, lane), B = op_b_t<C>(0, w0, lane);
      for (int dc = 0; w0 + 8 * dc + 8 <= cols; ++dc)
        for (int ks = 0; ks < rows / 16; ++ks) {
          if (w0 + 8 * dc + 16 <= cols) {
            bad += A.at(dc, ks) != 2u * Ref<C>::a_t(lane, w0 + 8 * dc, 16 * ks);
            bad += B.at(dc, ks) != 2u * Ref<C>::b2_t(lane, w0 + 8 * dc, 16 * ks);
          }
          if (lane < 16) bad += B.at(dc, ks) != 2u * Ref<C>::b1_t(lane, w0 + 8 * dc, 16 * ks);
        }
    }
  }
  std::printf("C=%d rows=%d: %d mismatches\n", C, rows, bad);
  return bad;
}

// FragPairOff (the P^T / dS^T fragment stores) against Swz<CP>::off for every lane, warp tile origin
// the warp grids can give (rows: multiples of 16; columns: multiples of 8 NT), mt, nt and e2
template <int CP, int NT>
int check_frag_pair() {
  int bad = 0;
  const int rows = 128, cols = CP * 8;
  for (int m0 = 0; m0 < rows; m0 += 16)
    for (int n0 = 0; n0 + 8 * NT <= cols; n0 += 8 * NT)
      for (int lane = 0; lane < 32; ++lane) {
        const FragPairOff<CP> fo(m0, n0, lane);
        for (int mt = 0; m0 + 16 * mt < rows && mt < 2; ++mt)
          for (int nt = 0; nt < NT; ++nt)
            for (int e2 = 0; e2 < 2; ++e2) {
              const int r = m0 + 16 * mt + (lane >> 2) + 8 * e2, c = n0 + 8 * nt + 2 * (lane & 3);
              if (fo.at(mt, nt, e2) != Ref<CP>::off(r, c >> 3) + (c & 7) && bad++ == 0)
                std::printf("FragPairOff<%d>, NT %d: m0 %d n0 %d lane %d (%d, %d, %d) differs\n", CP, NT, m0, n0, lane,
                            mt, nt, e2);
            }
      }
  return bad;
}

// FragQuadOff (stmatrix.x4 of the same fragments, sm_90): emulating the instruction (the word in register i
// of lane t goes to row t / 4 of matrix i, at the address lane 8 i + t / 4 gives, plus columns 2 (t % 4)),
// every word must land where FragPairOff puts it: registers (mt, 2 np, e2 0), (mt, 2 np, 1), (mt, 2 np + 1,
// 0), (mt, 2 np + 1, 1); row addresses 16-byte aligned
template <int CP, int NT>
int check_frag_quad() {
  int bad = 0;
  const int rows = 128, cols = CP * 8;
  for (int m0 = 0; m0 < rows; m0 += 16)
    for (int n0 = 0; n0 + 8 * NT <= cols; n0 += 8 * NT)
      for (int mt = 0; m0 + 16 * mt < rows && mt < 2; ++mt)
        for (int np = 0; np < NT / 2; ++np)
          for (int i = 0; i < 4; ++i)
            for (int t = 0; t < 32; ++t) {
              const int row_addr = FragQuadOff<CP>(m0, n0, 8 * i + t / 4).at(mt, np);
              const int got = row_addr + 2 * (t % 4);
              const int want = FragPairOff<CP>(m0, n0, t).at(mt, 2 * np + (i >> 1), i & 1);
              if ((got != want || row_addr % 8 != 0) && bad++ == 0)
                std::printf("FragQuadOff<%d>, NT %d: m0 %d n0 %d mt %d np %d matrix %d lane %d: %d, not %d\n", CP,
                            NT, m0, n0, mt, np, i, t, got, want);
            }
  return bad;
}

// The Hopper backward's dS^T stores: stmatrix.x4 rows (ds_stm_off), emulated as in check_frag_quad, against
// the per-word offsets (ds_word_off), for both warpgroups, every warp and the k-steps of BM 64 and 128
int check_sm90_ds() {
  int bad = 0;
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int kk = 0; kk < 128 / 16; ++kk)
        for (int i = 0; i < 4; ++i)
          for (int t = 0; t < 32; ++t) {
            const uint32_t row = sm90::ds_stm_off(wg, warp, 8 * i + t / 4, kk);
            const uint32_t got = row + 4 * (t % 4), want = sm90::ds_word_off(wg, warp, t, kk, i);
            if ((got != want || row % 16 != 0) && bad++ == 0)
              std::printf("ds_stm_off: wg %d warp %d kk %d matrix %d lane %d: %u, not %u\n", wg, warp, kk, i, t, got, want);
          }
  return bad;
}

// The Hopper forward's staged O tile: stmatrix.x4 rows (o_stm_off) against the per-word offsets (o_word_off)
int check_sm90_o() {
  int bad = 0;
  for (int slab_off : {0, 64 * 128, 128 * 128})
    for (int warp = 0; warp < 4; ++warp)
      for (int q = 0; q < 4; ++q)
        for (int i = 0; i < 4; ++i)
          for (int t = 0; t < 32; ++t) {
            const uint32_t row = sm90::o_stm_off(warp, 8 * i + t / 4, slab_off, q);
            const uint32_t got = row + 4 * (t % 4), want = sm90::o_word_off(warp, t, slab_off, 2 * q + (i >> 1), i & 1);
            if ((got != want || row % 16 != 0) && bad++ == 0)
              std::printf("o_stm_off: warp %d q %d matrix %d lane %d: %u, not %u\n", warp, q, i, t, got, want);
          }
  return bad;
}

// The Hopper backward's dQ staging (stage_dq_tile, stage_dq_tile_t): every element of a 64 x 64 fp32 tile
// lands where the reduce-adds' boxes hold it (64 rows x 32 columns per box, 128-byte rows swizzled by
// 16-byte chunk ^ row % 8), each exactly once, and each store instruction's shared-memory phases are free
// of bank conflicts (stage_dq_tile: 8-byte stores, a phase is a half warp; stage_dq_tile_t: 4-byte stores,
// the whole warp). Accumulator layout: s[4n + e] is row 16 warp + g + 8 (e >> 1), column 8n + 2tq + (e & 1).
static constexpr uint32_t kBox = 64 * 128;
static uint32_t box_off(int r, int c) {
  const int cb = c & 31;
  return (c >> 5) * kBox + r * 128 + (((cb >> 2) ^ (r & 7)) << 4) + 4 * (cb & 3);
}
static bool spread_ok(const uint32_t* words, int n) {  // n 4-byte words, one phase: distinct banks
  int banks[32] = {};
  for (int i = 0; i < n; ++i)
    if (banks[(words[i] / 4) % 32]++) return false;
  return true;
}
int check_sm90_dq_stage() {
  int bad = 0;
  static int hits[64 * 64];
  for (int& h : hits) h = 0;
  for (int warp = 0; warp < 4; ++warp)
    for (int n = 0; n < 8; ++n)
      for (int half = 0; half < 2; ++half)  // the store of rows r0 (half 0) and r0 + 8
        for (int ph = 0; ph < 2; ++ph) {  // the two half-warp phases of an 8-byte store
          uint32_t words[32];
          for (int l = 0; l < 16; ++l) {
            const int lane = 16 * ph + l, g = lane >> 2, tq = lane & 3, r0 = 16 * warp + g;
            const int m = (r0 & 1) ? n ^ 2 : n;  // the column group the store carries
            const uint32_t at = sm90::dq_stage_off(r0, tq, n, kBox) + half * 8 * 128;
            for (int e = 0; e < 2; ++e) {
              const int r = r0 + 8 * half, c = 8 * m + 2 * tq + e;
              if (at + 4 * e != box_off(r, c) && bad++ == 0)
                std::printf("dq_stage_off: warp %d lane %d n %d: row %d column %d at %u, not %u\n", warp, lane, n, r,
                            c, at + 4 * e, box_off(r, c));
              ++hits[r * 64 + c];
              words[2 * l + e] = at + 4 * e;
            }
          }
          if (!spread_ok(words, 32) && bad++ == 0)
            std::printf("dq_stage_off: warp %d n %d: bank conflict\n", warp, n);
        }
  for (int h : hits) bad += h != 1;
  for (int& h : hits) h = 0;
  for (int warp = 0; warp < 4; ++warp)
    for (int e2 = 0; e2 < 2; ++e2)
      for (int e1 = 0; e1 < 2; ++e1)
        for (int n = 0; n < 8; ++n) {
          uint32_t words[32];
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, tq = lane & 3, d0 = 16 * warp + g;
            const int r = 8 * n + 2 * tq + e1, c = d0 + 8 * e2;  // accumulator (d, query) is box (query, d)
            const uint32_t at = sm90::dq_stage_t_off(d0, tq, e2, e1, n, kBox);
            if (at != box_off(r, c) && bad++ == 0)
              std::printf("dq_stage_t_off: warp %d lane %d: row %d column %d at %u, not %u\n", warp, lane, r, c, at,
                          box_off(r, c));
            ++hits[r * 64 + c];
            words[lane] = at;
          }
          if (!spread_ok(words, 32) && bad++ == 0)
            std::printf("dq_stage_t_off: warp %d n %d: bank conflict\n", warp, n);
        }
  for (int h : hits) bad += h != 1;
  return bad;
}

template <int D>
int check_win_dq() {
  int bad = 0;
  for (int r = 0; r < 64; ++r) {  // a permutation of the row's floats, units kept whole
    int seen[D] = {};
    for (int c = 0; c < D; ++c) {
      const int o = win_dq_off<D>(r, c) - r * D;
      if (o < 0 || o >= D || (o & 7) != (c & 7)) { ++bad; continue; }
      ++seen[o];
    }
    for (int c = 0; c < D; ++c) bad += seen[c] != 1;
  }
  // a half warp's float2 adds: lanes g = 0..3 (rows r0 + g, r0 a multiple of 8), tq = 0..3 (columns
  // c0 + 2 tq, c0 a multiple of 8): 32 distinct banks
  for (int r0 = 0; r0 < 64; r0 += 8)
    for (int c0 = 0; c0 < D; c0 += 8) {
      int banks[32] = {};
      for (int g = 0; g < 4; ++g)
        for (int tq = 0; tq < 4; ++tq) {
          const int o = win_dq_off<D>(r0 + g, c0 + 2 * tq);
          ++banks[o % 32];
          ++banks[(o + 1) % 32];
        }
      for (int k = 0; k < 32; ++k)
        if (banks[k] != 1) {
          std::printf("win_dq_off<%d>: rows %d.., columns %d..: bank %d taken %d times\n", D, r0, c0, k, banks[k]);
          ++bad;
          break;
        }
    }
  return bad;
}

int main() {
  int bad = check<2>(64) + check<4>(64) + check<4>(128) + check<8>(128) + check<16>(128) + check<16>(64) +
            check<32>(64) + check<32>(32) + check_win_dq<16>() + check_win_dq<32>() + check_frag_pair<4, 2>() +
            check_frag_pair<8, 4>() + check_frag_pair<8, 8>() + check_frag_pair<16, 8>() + check_frag_pair<16, 4>() +
            check_frag_pair<4, 4>() + check_frag_pair<2, 2>() + check_frag_quad<4, 2>() + check_frag_quad<8, 4>() +
            check_frag_quad<8, 8>() + check_frag_quad<16, 8>() + check_frag_quad<16, 4>() + check_frag_quad<4, 4>() +
            check_frag_quad<2, 2>() + check_sm90_ds() + check_sm90_o() + check_sm90_dq_stage();
  std::printf("%d passed, %d failed\n", bad == 0 ? 1 : 0, bad == 0 ? 0 : 1);
  return bad == 0 ? 0 : 1;
}
