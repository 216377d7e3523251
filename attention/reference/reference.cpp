#include "reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "tessera/attention/half.h"
#include "tessera/attention/layout.h"
#include "tessera/attention/mask.h"
#include "tessera/attention/philox.h"

namespace tessera::attention::reference {
namespace {

double load(const void* base, int64_t idx, DType t) { return static_cast<double>(load_as_float(base, idx, t)); }

int64_t rows_q(const AttentionParams& p) { return p.cu_seqlens_q ? p.total_q : int64_t(p.batch) * p.seqlen_q; }
int64_t rows_k(const AttentionParams& p) { return p.cu_seqlens_k ? p.total_k : int64_t(p.batch) * p.seqlen_k; }
int64_t dense_row(const AttentionParams& p, int b, int64_t row0, int r, bool is_q) {
  if (p.cu_seqlens_q) return row0 + r;
  return int64_t(b) * (is_q ? p.seqlen_q : p.seqlen_k) + r;
}

Result run(const AttentionParams& p, bool with_backward) {
  Result res;
  const int Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v;
  const int group = Hq / Hkv;
  res.o.assign(rows_q(p) * Hq * Dv, 0.0);
  res.lse.assign(lse_numel(p), -std::numeric_limits<double>::infinity());
  if (with_backward) {
    res.dq.assign(rows_q(p) * Hq * D, 0.0);
    res.dk.assign(rows_k(p) * Hkv * D, 0.0);
    res.dv.assign(rows_k(p) * Hkv * Dv, 0.0);
    for (int t = 0; t < p.num_bias; ++t)
      if (p.bias[t].grad) res.dbias[t].assign(bias_extent(p.bias[t], p.seqlen_q, p.seqlen_k), 0.0);
  }
  const uint32_t thr = dropout_threshold(p.dropout_p);
  const double keep_scale = p.dropout_p > 0 ? 1.0 / (1.0 - p.dropout_p) : 1.0;

  // One task per (sequence, kv head): it computes the rows of that head's GQA group, so the tasks write
  // disjoint rows of o, lse, dq, dk and dv, and each task sums in the same order as a single loop would
  // (the results do not depend on the thread count). dBias rows may be shared between sequences and
  // heads (broadcast terms): with a bias gradient the tasks run one after another.
  auto task = [&](int b, int hk) {
    std::vector<double> s, prob, dp;
    const SeqSpan sp = seq_span(p, b);
    for (int h = hk * group; h < (hk + 1) * group; ++h) {
      for (int i = 0; i < sp.nq; ++i) {
        const KeyRange kr = visible_keys(i, sp.nq, sp.nk, p.causal, p.window_left, p.window_right);
        s.assign(sp.nk, -std::numeric_limits<double>::infinity());
        const int64_t qo = row_offset(p, b, sp.q0, i, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = kr.lo; j < kr.hi; ++j) {
          const int64_t ko = row_offset(p, b, sp.k0, j, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
          double acc = 0;
          for (int c = 0; c < D; ++c) acc += load(p.q, qo + c, p.dtype) * load(p.k, ko + c, p.dtype);
          acc *= p.scale;
          for (int t = 0; t < p.num_bias; ++t)
            acc += load(p.bias[t].ptr, bias_offset(p.bias[t], b, h, i) + j, p.bias[t].dtype);
          if (p.alibi_slopes)
            acc += alibi_term(p.alibi_slopes[int64_t(b) * p.alibi_batch_stride + h], i, j, sp.nq, sp.nk);
          s[j] = acc;
          mx = std::max(mx, acc);
        }
        const int64_t lidx = lse_index(p, b, h, sp.q0, i);
        const int64_t orow = (dense_row(p, b, sp.q0, i, true) * Hq + h);
        if (mx == -std::numeric_limits<double>::infinity()) continue;  // empty row: o = 0, lse = -inf
        double sum = 0;
        prob.assign(sp.nk, 0.0);
        for (int j = kr.lo; j < kr.hi; ++j) sum += (prob[j] = std::exp(s[j] - mx));
        for (int j = kr.lo; j < kr.hi; ++j) prob[j] /= sum;
        res.lse[lidx] = mx + std::log(sum);
        // dropped/scaled probabilities
        std::vector<double> pd(prob);
        if (p.dropout_p > 0)
          for (int j = kr.lo; j < kr.hi; ++j)
            pd[j] = dropout_keep(p.dropout_seed, p.dropout_offset, uint32_t(b * Hq + h), i, j, thr) ? prob[j] * keep_scale : 0.0;
        for (int j = kr.lo; j < kr.hi; ++j) {
          if (pd[j] == 0) continue;
          const int64_t vo = row_offset(p, b, sp.k0, j, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
          for (int c = 0; c < Dv; ++c) res.o[orow * Dv + c] += pd[j] * load(p.v, vo + c, p.dtype);
        }
        if (!with_backward) continue;
        // ---- backward for this row ----
        const int64_t doo = row_offset(p, b, sp.q0, i, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
        double Di = 0;
        for (int c = 0; c < Dv; ++c) Di += load(p.dout, doo + c, p.dtype) * res.o[orow * Dv + c];
        if (p.dlse) Di -= static_cast<double>(p.dlse[lidx]);
        dp.assign(sp.nk, 0.0);
        for (int j = kr.lo; j < kr.hi; ++j) {
          const int64_t vo = row_offset(p, b, sp.k0, j, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
          double acc = 0;
          for (int c = 0; c < Dv; ++c) acc += load(p.dout, doo + c, p.dtype) * load(p.v, vo + c, p.dtype);
          const bool kept = p.dropout_p == 0 || dropout_keep(p.dropout_seed, p.dropout_offset, uint32_t(b * Hq + h), i, j, thr);
          dp[j] = kept ? acc * keep_scale : 0.0;
          // dV[j] += pd[j] * dO[i]
          const int64_t dvrow = dense_row(p, b, sp.k0, j, false) * Hkv + hk;
          for (int c = 0; c < Dv; ++c) res.dv[dvrow * Dv + c] += pd[j] * load(p.dout, doo + c, p.dtype);
        }
        for (int j = kr.lo; j < kr.hi; ++j) {
          const double ds = prob[j] * (dp[j] - Di);
          for (int t = 0; t < p.num_bias; ++t)
            if (p.bias[t].grad) res.dbias[t][bias_offset(p.bias[t], b, h, i) + j] += ds;
          const double dss = ds * p.scale;
          const int64_t ko = row_offset(p, b, sp.k0, j, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
          const int64_t dqrow = dense_row(p, b, sp.q0, i, true) * Hq + h;
          const int64_t dkrow = dense_row(p, b, sp.k0, j, false) * Hkv + hk;
          for (int c = 0; c < D; ++c) {
            res.dq[dqrow * D + c] += dss * load(p.k, ko + c, p.dtype);
            res.dk[dkrow * D + c] += dss * load(p.q, qo + c, p.dtype);
          }
        }
      }
    }
  };
  bool bias_grad = false;
  for (int t = 0; t < p.num_bias; ++t) bias_grad = bias_grad || (with_backward && p.bias[t].grad);
  const int ntasks = p.batch * Hkv;
  const int nthreads = bias_grad ? 1 : std::max(1, std::min<int>(ntasks, static_cast<int>(std::thread::hardware_concurrency())));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int t = next++; t < ntasks; t = next++) task(t / Hkv, t % Hkv);
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < nthreads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool) th.join();
  return res;
}

}  // namespace

Result forward(const AttentionParams& p) { return run(p, false); }
Result forward_backward(const AttentionParams& p) { return run(p, true); }

}  // namespace tessera::attention::reference
