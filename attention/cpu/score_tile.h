// Turning a tile of raw dot products S = Q·Kᵀ into logits (scale, bias
// terms, ALiBi, causal/window mask) and applying the dropout mask to a row
// of probabilities. Shared by the forward and the backward.
#pragma once

#include <limits>

#include "cpu/simd.h"
#include "tessera/attention/half.h"
#include "tessera/attention/layout.h"
#include "tessera/attention/mask.h"
#include "tessera/attention/philox.h"

namespace tessera::attention::cpu::TESSERA_CPU_NS {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Rows i0..i0+bq of sequence b (span sp), head h, keys k0..k0+bk; S has
// leading dimension lds >= bk; columns [bk, lds) become -inf too.
inline void finish_scores(const AttentionParams& p, int b, int h, const SeqSpan& sp, int i0, int bq, int k0,
                          int bk, float* S, int lds) {
  const float alibi_slope =
      p.alibi_slopes ? p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h] : 0.f;
  for (int r = 0; r < bq; ++r) {
    const int i = i0 + r;
    float* s = S + static_cast<int64_t>(r) * lds;
    const KeyRange kr = visible_keys(i, sp.nq, sp.nk, p.causal, p.window_left, p.window_right);
    const int lo = kr.lo - k0 > 0 ? (kr.lo - k0 < bk ? kr.lo - k0 : bk) : 0;
    const int hi = kr.hi - k0 < bk ? (kr.hi - k0 > lo ? kr.hi - k0 : lo) : bk;
    for (int j = 0; j < lo; ++j) s[j] = kNegInf;
    for (int j = hi; j < lds; ++j) s[j] = kNegInf;
    const float scale = p.scale;
    for (int j = lo; j < hi; ++j) s[j] *= scale;
    for (int t = 0; t < p.num_bias; ++t) {
      const BiasTerm& bt = p.bias[t];
      const int64_t off = bias_offset(bt, b, h, i) + k0;
      if (bt.dtype == DType::f32) {
        const float* bp = static_cast<const float*>(bt.ptr) + off;
        for (int j = lo; j < hi; ++j) s[j] += bp[j];
      } else {
        for (int j = lo; j < hi; ++j) s[j] += load_as_float(bt.ptr, off + j, bt.dtype);
      }
    }
    if (p.alibi_slopes) {
      for (int j = lo; j < hi; ++j) s[j] += alibi_term(alibi_slope, i, k0 + j, sp.nq, sp.nk);
    }
  }
}

// row[j] *= keep(b, h, i, k0 + j) ? keep_scale : 0 for j < n.
inline void apply_dropout_row(const AttentionParams& p, uint32_t bh, int i, int k0, int n, float* row,
                              uint32_t threshold, float keep_scale) {
  int j = 0;
  while (j < n) {
    const int col = k0 + j;
    const Philox4 r = dropout_draws(p.dropout_seed, p.dropout_offset, bh, static_cast<uint32_t>(i),
                                    static_cast<uint32_t>(col >> 2));
    for (int lane = col & 3; lane < 4 && j < n; ++lane, ++j)
      row[j] = r.x[lane] >= threshold ? row[j] * keep_scale : 0.f;
  }
}

// Max of s[0..n), n a multiple of VW (a score row padded with -inf), VW lanes at a time (a
// scalar compare-select chain held the forward at half speed). // d16 H48 N2k 302 -> 125 ms on 2 cores). A NaN anywhere in the row is the result (softmax of a
// row holding NaN is NaN, as in PyTorch).
inline float row_max(const float* s, int n) {
  vf mv = splat(kNegInf);
  vi nan{};
  for (int j = 0; j < n; j += VW) {
    const vf x = loadu(s + j);
    mv = x > mv ? x : mv;
    nan |= x != x;
  }
  float m = kNegInf;
  for (int l = 0; l < VW; ++l) {
    if (nan[l]) return std::numeric_limits<float>::quiet_NaN();
    m = mv[l] > m ? mv[l] : m;
  }
  return m;
}

// s[j] = exp(s[j] - m) over n (a multiple of VW); returns the sum.
inline float exp_row(float* s, int n, float m) {
  vf acc{};
  for (int j = 0; j < n; j += VW) {
    const vf e = vexp(loadu(s + j) - m);
    storeu(s + j, e);
    acc += e;
  }
  float sum = 0.f;
  for (int l = 0; l < VW; ++l) sum += acc[l];
  return sum;
}

}  // namespace tessera::attention::cpu::TESSERA_CPU_NS
