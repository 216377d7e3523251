// Backward, main pass: one CTA per (key block, kv head, sequence). K and V
// stay in shared memory; the CTA loops over the query heads of its GQA group
// and over the query blocks that see its keys, recomputes P^T from LSE and
// accumulates dK and dV in registers (no atomics). dQ goes into an fp32
// workspace with atomics (non-deterministic mode), dBias likewise.
//
// Per query block (Q, dO double-buffered through cp.async):
//   S^T = K Q^T, P^T = exp(S^T - lse)            (warp tile of BN x BM)
//   dP^T = V dO^T, dS^T = P^T (dP^T - D)
//   P^T, dS^T -> shared memory (element type)
//   dV += P^T dO, dK += dS^T Q, dQ_acc += dS K  (warp tiles of BN x D, BM x D)
#pragma once

#include "score_mod.cuh"
#include "tile_io.cuh"

namespace tessera::attention::cuda {

template <int ROWS, int COLS, int NW>
struct WarpGrid {  // warps tile a ROWS x COLS output
  static constexpr int WM = (ROWS / 16) < NW ? (ROWS / 16) : NW;
  static constexpr int WN = NW / WM;
  static constexpr int MT = ROWS / 16 / WM;
  static constexpr int NT = COLS / 8 / WN;
  static_assert(WM * WN == NW && MT * WM * 16 == ROWS && NT * WN * 8 == COLS, "warp grid");
};

template <typename T, int D_, int NW_, int BN_, int BM_>
struct BwdTraits {
  static constexpr int D = D_, NW = NW_, BN = BN_, BM = BM_, C = D_ / 8, CP = BM_ / 8;
  using GS = WarpGrid<BN, BM, NW>;   // S^T, dP^T
  using GKV = WarpGrid<BN, D, NW>;   // dK, dV
  using GQ = WarpGrid<BM, D, NW>;    // dQ
  static constexpr int kSmem = (2 * BN * D + 4 * BM * D + 2 * BN * BM) * sizeof(T);
};

template <typename T, typename Tr, bool MODS>
__global__ void __launch_bounds__(Tr::NW * 32) bwd_kernel(const __grid_constant__ KArgs a) {
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, C = Tr::C, CP = Tr::CP;
  constexpr int NTHREADS = Tr::NW * 32;
  using GS = typename Tr::GS;
  using GKV = typename Tr::GKV;
  using GQ = typename Tr::GQ;
  extern __shared__ uint4 smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ = sV + BN * D;      // [2][BM*D]
  T* sdO = sQ + 2 * BM * D; // [2][BM*D]
  T* sP = sdO + 2 * BM * D; // [BN][BM]
  T* sdS = sP + BN * BM;    // [BN][BM]

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * BN;
  const Seq sq = seq_of(p, b);
  if (j0 >= sq.nk) return;
  const int nq = sq.nq, nk = sq.nk;
  const int G = p.heads_q / p.heads_kv;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  int i_lo, i_hi;
  rows_seeing(p, nq, nk, j0, min(j0 + BN, nk), i_lo, i_hi);
  const int qb_begin = i_lo / BM;
  const int nqb = i_hi > i_lo ? (i_hi + BM - 1) / BM - qb_begin : 0;
  const int iters = G * nqb;

  const T* gk = static_cast<const T*>(p.k) + row_off(p, b, sq.k0, j0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  const T* gv = static_cast<const T*>(p.v) + row_off(p, b, sq.k0, j0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  load_tile<BN, C, NTHREADS>(sK, gk, p.k_row_stride, nk - j0, p.head_dim, a.vec_ok, tid);
  load_tile<BN, C, NTHREADS>(sV, gv, p.v_row_stride, nk - j0, p.head_dim_v, a.vec_ok, tid);

  auto load_q = [&](int it, int buf) {
    const int h = hk * G + it / nqb, i0 = (qb_begin + it % nqb) * BM;
    const T* gq = static_cast<const T*>(p.q) + row_off(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
    const T* gdo = static_cast<const T*>(p.dout) + row_off(p, b, sq.q0, i0, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
    load_tile<BM, C, NTHREADS>(sQ + buf * BM * D, gq, p.q_row_stride, nq - i0, p.head_dim, a.vec_ok, tid);
    load_tile<BM, C, NTHREADS>(sdO + buf * BM * D, gdo, p.do_row_stride, nq - i0, p.head_dim_v, a.vec_ok, tid);
  };
  if (iters > 0) load_q(0, 0);
  cp_async_commit();

  // warp positions
  const int s_m0 = (warp / GS::WN) * GS::MT * 16, s_n0 = (warp % GS::WN) * GS::NT * 8;
  const int kv_m0 = (warp / GKV::WN) * GKV::MT * 16, kv_n0 = (warp % GKV::WN) * GKV::NT * 8;
  const int q_m0 = (warp / GQ::WN) * GQ::MT * 16, q_n0 = (warp % GQ::WN) * GQ::NT * 8;

  float dk[GKV::MT][GKV::NT][4], dv[GKV::MT][GKV::NT][4];
  zero(dk);
  zero(dv);
  float slope = 0.f;
  const bool do_dq = a.dq_accum != nullptr;

  for (int it = 0; it < iters; ++it) {
    const int buf = it & 1;
    const int h = hk * G + it / nqb, i0 = (qb_begin + it % nqb) * BM;
    cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < iters) load_q(it + 1, buf ^ 1);
    cp_async_commit();
    const T* cQ = sQ + buf * BM * D;
    const T* cdO = sdO + buf * BM * D;
    if constexpr (MODS) {
      if (p.alibi_slopes) slope = p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h];
    }
    const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);

    float s[GS::MT][GS::NT][4], dp[GS::MT][GS::NT][4];
    zero(s);
    zero(dp);
    gemm_ss<T, GS::MT, GS::NT, D, false, false, C, C>(s, sK, s_m0, cQ, s_n0, lane);
    gemm_ss<T, GS::MT, GS::NT, D, false, false, C, C>(dp, sV, s_m0, cdO, s_n0, lane);

#pragma unroll
    for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
      for (int e1 = 0; e1 < 2; ++e1) {
        const int il = s_n0 + nt * 8 + 2 * tq + e1;  // local query column
        const int i = i0 + il;
        float lse2 = -INFINITY, Di = 0.f;
        KeyRange kr{0, 0};
        int64_t brow[2] = {0, 0};
        if (i < nq) {
          const int64_t li = lse_idx(p, b, h, sq.q0, i);
          lse2 = p.lse[li] * kLog2e;
          Di = a.dvec[li];
          kr = visible_keys(i, nq, nk, p.causal, p.window_left, p.window_right);
          if constexpr (MODS) {
            if (p.num_bias > 0) brow[0] = bias_off(p.bias[0], b, h, i);
            if (p.num_bias > 1) brow[1] = bias_off(p.bias[1], b, h, i);
          }
        }
        const float lse_use = lse2 == -INFINITY ? INFINITY : lse2;  // empty row: P = 0
#pragma unroll
        for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            const int e = e2 * 2 + e1;
            const int jl = s_m0 + mt * 16 + g + 8 * e2;  // local key row
            const int j = j0 + jl;
            float pr = 0.f, ds = 0.f, pd = 0.f;
            if (j >= kr.lo && j < kr.hi) {
              float x = s[mt][nt][e] * a.scale_log2;
              if constexpr (MODS) x += kLog2e * additive_terms(p, brow, slope, i, j, nq, nk);
              pr = exp2f(x - lse_use);
              float dpv = dp[mt][nt][e];
              pd = pr;
              if constexpr (MODS) {
                if (a.dropout) {
                  const bool keep = dropout_keep(p.dropout_seed, p.dropout_offset, bh, i, j, a.drop_threshold);
                  dpv = keep ? dpv * a.keep_scale : 0.f;
                  pd = keep ? pr * a.keep_scale : 0.f;
                }
              }
              ds = pr * (dpv - Di);
              if constexpr (MODS) {
                if (a.any_bias_grad) {
                  if (p.num_bias > 0 && p.bias[0].grad) atomicAdd(p.bias[0].grad + brow[0] + j, ds);
                  if (p.num_bias > 1 && p.bias[1].grad) atomicAdd(p.bias[1].grad + brow[1] + j, ds);
                }
              }
            }
            s[mt][nt][e] = pd;
            dp[mt][nt][e] = ds;
          }
      }
    // P^T, dS^T -> shared (pairs of adjacent query columns)
#pragma unroll
    for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
          const int r = s_m0 + mt * 16 + g + 8 * e2;
          const int c = s_n0 + nt * 8 + 2 * tq;
          const int off = Swz<CP>::off(r, c >> 3) + (c & 7);
          *reinterpret_cast<uint32_t*>(sP + off) = Elem<T>::pack(s[mt][nt][2 * e2], s[mt][nt][2 * e2 + 1]);
          *reinterpret_cast<uint32_t*>(sdS + off) = Elem<T>::pack(dp[mt][nt][2 * e2], dp[mt][nt][2 * e2 + 1]);
        }
    __syncthreads();

    gemm_ss<T, GKV::MT, GKV::NT, BM, false, true, CP, C>(dv, sP, kv_m0, cdO, kv_n0, lane);
    gemm_ss<T, GKV::MT, GKV::NT, BM, false, true, CP, C>(dk, sdS, kv_m0, cQ, kv_n0, lane);
    if (do_dq) {
      float dq[GQ::MT][GQ::NT][4];
      zero(dq);
      gemm_ss<T, GQ::MT, GQ::NT, BN, true, true, CP, C>(dq, sdS, q_m0, sK, q_n0, lane);
      const int dqd = a.dq_accum_d;
#pragma unroll
      for (int mt = 0; mt < GQ::MT; ++mt)
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
          const int i = i0 + q_m0 + mt * 16 + g + 8 * e2;
          if (i >= nq) continue;
          const int64_t row = (sq.q0 + (p.cu_seqlens_q ? 0 : static_cast<int64_t>(b) * p.seqlen_q) + i);
          float* dst = a.dq_accum + (row * p.heads_q + h) * dqd;
#pragma unroll
          for (int nt = 0; nt < GQ::NT; ++nt) {
            const int c = q_n0 + nt * 8 + 2 * tq;
            if (c < dqd) atomicAdd(dst + c, dq[mt][nt][2 * e2] * p.scale);
            if (c + 1 < dqd) atomicAdd(dst + c + 1, dq[mt][nt][2 * e2 + 1] * p.scale);
          }
        }
    }
  }
  cp_async_wait<0>();

  // dK (scaled), dV
  T* gdk = static_cast<T*>(p.dk);
  T* gdv = static_cast<T*>(p.dv);
#pragma unroll
  for (int mt = 0; mt < GKV::MT; ++mt)
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2) {
      const int j = j0 + kv_m0 + mt * 16 + g + 8 * e2;
      if (j >= nk) continue;
      const int64_t ok = row_off(p, b, sq.k0, j, hk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
      const int64_t ov = row_off(p, b, sq.k0, j, hk, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
#pragma unroll
      for (int nt = 0; nt < GKV::NT; ++nt) {
        const int c = kv_n0 + nt * 8 + 2 * tq;
        const float k0v = dk[mt][nt][2 * e2] * p.scale, k1v = dk[mt][nt][2 * e2 + 1] * p.scale;
        const float v0 = dv[mt][nt][2 * e2], v1 = dv[mt][nt][2 * e2 + 1];
        if (a.vec_ok && c + 1 < p.head_dim) {
          *reinterpret_cast<uint32_t*>(gdk + ok + c) = Elem<T>::pack(k0v, k1v);
        } else {
          if (c < p.head_dim) gdk[ok + c] = Elem<T>::from_float(k0v);
          if (c + 1 < p.head_dim) gdk[ok + c + 1] = Elem<T>::from_float(k1v);
        }
        if (a.vec_ok && c + 1 < p.head_dim_v) {
          *reinterpret_cast<uint32_t*>(gdv + ov + c) = Elem<T>::pack(v0, v1);
        } else {
          if (c < p.head_dim_v) gdv[ov + c] = Elem<T>::from_float(v0);
          if (c + 1 < p.head_dim_v) gdv[ov + c + 1] = Elem<T>::from_float(v1);
        }
      }
    }
}

}  // namespace tessera::attention::cuda
