// Forward: one CTA per (query block, head, sequence); each warp owns 16
// query rows, streams K/V blocks through double-buffered shared memory,
// keeps the online-softmax state (row max, row sum) and O in registers, and
// writes O and LSE once at the end.
#pragma once

#include "score_mod.cuh"
#include "tile_io.cuh"

namespace tessera::attention::cuda {

template <typename T, int D_, int NW_, int BN_>
struct FwdTraits {
  static constexpr int D = D_, NW = NW_, BN = BN_, BM = 16 * NW_, C = D_ / 8;
  static constexpr int NT = BN / 8, DT = D / 8;
  static constexpr bool kQInRegs = D <= 128;
  static constexpr int kSmem = (BM * D + 4 * BN * D) * sizeof(T);
};

template <typename T, typename Tr, bool MODS>
__global__ void __launch_bounds__(Tr::NW * 32) fwd_kernel(const __grid_constant__ KArgs a) {
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, C = Tr::C, NT = Tr::NT, DT = Tr::DT;
  constexpr int NTHREADS = Tr::NW * 32;
  extern __shared__ uint4 smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;  // [2][BN*D]
  T* sV = sK + 2 * BN * D;

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * BM;
  const Seq sq = seq_of(p, b);
  if (i0 >= sq.nq) return;
  const int nq = sq.nq, nk = sq.nk;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  // Key range of the whole block (lo/hi are non-decreasing in i).
  const int i_last = min(i0 + BM, nq) - 1;
  const KeyRange kr_first = visible_keys(i0, nq, nk, p.causal, p.window_left, p.window_right);
  const KeyRange kr_last = visible_keys(i_last, nq, nk, p.causal, p.window_left, p.window_right);
  const int klo = kr_first.lo, khi = kr_last.hi;
  const int jb_begin = klo / BN, jb_end = khi > klo ? (khi + BN - 1) / BN : jb_begin;
  // blocks in [full_lo, full_hi) need no per-element mask
  const bool rows_full = i0 + BM <= nq;

  // Per-thread rows: r = 0 -> g, r = 1 -> g + 8.
  int row_i[2], row_lo[2], row_hi[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_i[r] = i0 + warp * 16 + g + 8 * r;
    if (row_i[r] < nq) {
      const KeyRange kr = visible_keys(row_i[r], nq, nk, p.causal, p.window_left, p.window_right);
      row_lo[r] = kr.lo; row_hi[r] = kr.hi;
    } else {
      row_lo[r] = 0; row_hi[r] = 0;
    }
  }
  int64_t bias_row[2][2] = {{0, 0}, {0, 0}};
  float slope = 0.f;
  if constexpr (MODS) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (p.num_bias > 0) bias_row[r][0] = bias_off(p.bias[0], b, h, row_i[r]);
      if (p.num_bias > 1) bias_row[r][1] = bias_off(p.bias[1], b, h, row_i[r]);
    }
    if (p.alibi_slopes) slope = p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h];
  }
  const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);

  const T* gq = static_cast<const T*>(p.q) +
                row_off(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  const T* gk = static_cast<const T*>(p.k) + row_off(p, b, sq.k0, 0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  const T* gv = static_cast<const T*>(p.v) + row_off(p, b, sq.k0, 0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);

  load_tile<BM, C, NTHREADS>(sQ, gq, p.q_row_stride, nq - i0, p.head_dim, a.vec_ok, tid);
  auto load_kv = [&](int jb, int buf) {
    const int j0 = jb * BN;
    load_tile<BN, C, NTHREADS>(sK + buf * BN * D, gk + j0 * p.k_row_stride, p.k_row_stride, nk - j0, p.head_dim,
                               a.vec_ok, tid);
    load_tile<BN, C, NTHREADS>(sV + buf * BN * D, gv + j0 * p.v_row_stride, p.v_row_stride, nk - j0,
                               p.head_dim_v, a.vec_ok, tid);
  };
  if (jb_begin < jb_end) load_kv(jb_begin, 0);
  cp_async_commit();

  float o[DT][4];
#pragma unroll
  for (int d = 0; d < DT; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[d][e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t qf[Tr::kQInRegs ? D / 16 : 1][4];

  for (int jb = jb_begin; jb < jb_end; ++jb) {
    const int buf = (jb - jb_begin) & 1;
    cp_async_wait<0>();
    __syncthreads();
    if (jb + 1 < jb_end) load_kv(jb + 1, buf ^ 1);
    cp_async_commit();
    if constexpr (Tr::kQInRegs) {
      if (jb == jb_begin) {
#pragma unroll
        for (int k = 0; k < D / 16; ++k) load_a<C>(qf[k], sQ, warp * 16, k * 16, lane);
      }
    }
    const T* cK = sK + buf * BN * D;
    const T* cV = sV + buf * BN * D;

    // S = Q K^T
    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      uint32_t qa[4];
      if constexpr (Tr::kQInRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[e] = qf[k][e];
      } else {
        load_a<C>(qa, sQ, warp * 16, k * 16, lane);
      }
#pragma unroll
      for (int n = 0; n < NT; n += 2) {
        uint32_t bb[4];
        load_b2<C>(bb, cK, n * 8, k * 16, lane);
        mma16816<T>(s[n], qa, bb[0], bb[1]);
        mma16816<T>(s[n + 1], qa, bb[2], bb[3]);
      }
    }

    // Scores in log2 units, masked.
    const int j0 = jb * BN;
    const bool full = rows_full && j0 >= kr_last.lo && j0 + BN <= kr_first.hi;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const int j = j0 + n * 8 + 2 * tq + (e & 1);
        float x = s[n][e] * a.scale_log2;
        if (full) {
          if constexpr (MODS) x += kLog2e * additive_terms(p, bias_row[r], slope, row_i[r], j, nq, nk);
        } else if (j >= row_lo[r] && j < row_hi[r]) {
          if constexpr (MODS) x += kLog2e * additive_terms(p, bias_row[r], slope, row_i[r], j, nq, nk);
        } else {
          x = -INFINITY;
        }
        s[n][e] = x;
      }

    // Online softmax.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_use = mx == -INFINITY ? 0.f : mx;
      const float corr = exp2f(m[r] - m_use);
      m[r] = mx;
      l[r] *= corr;
#pragma unroll
      for (int d = 0; d < DT; ++d) { o[d][2 * r] *= corr; o[d][2 * r + 1] *= corr; }
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        s[n][2 * r] = exp2f(s[n][2 * r] - m_use);
        s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - m_use);
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l[r] += sum;
    }
    if constexpr (MODS) {
      if (a.dropout) {
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int j = j0 + n * 8 + 2 * tq;
            if (row_i[r] < nq) {
              bool k0, k1;
              dropout_pair(a, bh, row_i[r], j, k0, k1);
              if (!k0) s[n][2 * r] = 0.f;
              if (!k1) s[n][2 * r + 1] = 0.f;
            }
          }
      }
    }

    // O += P V
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = Elem<T>::pack(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = Elem<T>::pack(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = Elem<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = Elem<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int d = 0; d < DT; d += 2) {
        uint32_t bb[4];
        load_b2_t<C>(bb, cV, d * 8, kk * 16, lane);
        mma16816<T>(o[d], pa, bb[0], bb[1]);
        mma16816<T>(o[d + 1], pa, bb[2], bb[3]);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: normalise, write O and LSE.
  T* go = static_cast<T*>(p.o);
  const int dv = p.head_dim_v;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int i = row_i[r];
    if (i >= nq) continue;
    const bool empty = !(sum > 0.f) || m[r] == -INFINITY;
    const float inv = empty ? 0.f : a.keep_scale / sum;
    const int64_t orow = row_off(p, b, sq.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
#pragma unroll
    for (int d = 0; d < DT; ++d) {
      const int c = d * 8 + 2 * tq;
      const float v0 = o[d][2 * r] * inv, v1 = o[d][2 * r + 1] * inv;
      if (a.vec_ok && c + 1 < dv) {
        *reinterpret_cast<uint32_t*>(go + orow + c) = Elem<T>::pack(v0, v1);
      } else {
        if (c < dv) go[orow + c] = Elem<T>::from_float(v0);
        if (c + 1 < dv) go[orow + c + 1] = Elem<T>::from_float(v1);
      }
    }
    if (tq == 0) p.lse[lse_idx(p, b, h, sq.q0, i)] = empty ? -INFINITY : (m[r] + log2f(sum)) * kLn2;
  }
}

}  // namespace tessera::attention::cuda
