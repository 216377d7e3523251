// Score modifiers shared by the forward and backward kernels: additive bias
// terms, ALiBi, the causal / sliding-window key range, dropout draws.
// Scores are kept in log2 units (x = s * log2 e) so exp2 does the softmax.
#pragma once

#include <cmath>

#include "kernel_args.cuh"

namespace tessera::attention::cuda {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// 2^x on the SFU (ex2.approx.ftz: 2^-inf = 0, ~2 ulp), without exp2f's range fix-ups.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A row's LSE (natural log) from its running max m2 and sum (log2 units, as the forwards keep them):
// -inf for a row with no visible key, NaN when the row read a NaN (as softmax does).
__device__ __forceinline__ float row_lse(float m2, float sum) {
  if (sum != sum || m2 != m2) return __int_as_float(0x7fc00000);
  return (!(sum > 0.f) || m2 == -INFINITY) ? -INFINITY : (m2 + log2f(sum)) * kLn2;
}

// A row's LSE in log2 units for the backward's P = 2^(x - lse2): an empty row's -inf
// becomes +inf, so that its P is 0 (not NaN).
__host__ __device__ __forceinline__ float lse_log2(float lse) { return lse == -INFINITY ? INFINITY : lse * kLog2e; }

// Additive terms (bias + ALiBi) of score (i, j) in natural units; caller
// guarantees i < nq and j < nk.
__device__ __forceinline__ float additive_terms(const AttentionParams& p, const int64_t (&bias_row)[2], float slope,
                                                int i, int j, int nq, int nk) {
  float x = 0.f;
  if (p.num_bias > 0) x += load_bias(p.bias[0], bias_row[0] + j);
  if (p.num_bias > 1) x += load_bias(p.bias[1], bias_row[1] + j);
  if (p.alibi_slopes) x += alibi_term(slope, i, j, nq, nk);
  return x;
}

// Keep decisions of the two adjacent columns j, j+1 (j even) of row i.
__device__ __forceinline__ void dropout_pair(const KArgs& a, uint32_t bh, int i, int j, bool& k0, bool& k1) {
  const Philox4 r = dropout_draws(a.p.dropout_seed, a.p.dropout_offset, bh, static_cast<uint32_t>(i),
                                  static_cast<uint32_t>(j) >> 2);
  const int e = j & 3;  // 0 or 2
  k0 = (e == 0 ? r.x[0] : r.x[2]) >= a.drop_threshold;
  k1 = (e == 0 ? r.x[1] : r.x[3]) >= a.drop_threshold;
}

// The keys a row sees; a row past the sequence sees none.
__device__ __forceinline__ KeyRange row_keys(const AttentionParams& p, int i, int nq, int nk) {
  return i < nq ? visible_keys(i, nq, nk, p.causal, p.window_left, p.window_right) : KeyRange{0, 0};
}

// The key blocks (BN keys each) that query rows [i0, min(i0 + BM, nq)) see.
// visible_keys' lo and hi are non-decreasing in i, so the first and last rows
// bound them; a key block inside both first and last is visible to every row.
struct BlockKeys {
  KeyRange first, last;
  int jb_begin, jb_end;
};
__device__ __forceinline__ BlockKeys block_keys(const AttentionParams& p, int i0, int BM, int BN, int nq, int nk) {
  BlockKeys k;
  k.first = visible_keys(i0, nq, nk, p.causal, p.window_left, p.window_right);
  k.last = visible_keys(min(i0 + BM, nq) - 1, nq, nk, p.causal, p.window_left, p.window_right);
  k.jb_begin = k.first.lo / BN;
  k.jb_end = k.last.hi > k.first.lo ? (k.last.hi + BN - 1) / BN : k.jb_begin;
  return k;
}

// Rows [i_lo, i_hi) of a sequence whose key range intersects [j0, j1):
// visible_keys' lo and hi are non-decreasing in i, so this is an interval.
__device__ __forceinline__ void rows_seeing(const AttentionParams& p, int nq, int nk, int j0, int j1, int& i_lo,
                                            int& i_hi) {
  // first i with hi(i) > j0
  int lo = 0, hi = nq;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (visible_keys(mid, nq, nk, p.causal, p.window_left, p.window_right).hi > j0) hi = mid;
    else lo = mid + 1;
  }
  i_lo = lo;
  // first i with lo(i) >= j1
  lo = i_lo; hi = nq;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (visible_keys(mid, nq, nk, p.causal, p.window_left, p.window_right).lo >= j1) hi = mid;
    else lo = mid + 1;
  }
  i_hi = lo;
}

}  // namespace tessera::attention::cuda
