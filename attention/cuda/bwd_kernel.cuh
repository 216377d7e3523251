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

template <int ROWS, int COLS, int NW, int WM_ = ((ROWS / 16) < NW ? (ROWS / 16) : NW)>
struct WarpGrid {  // warps tile a ROWS x COLS output as WM x WN
  static constexpr int WM = WM_;
  static constexpr int WN = NW / WM;
  static constexpr int MT = ROWS / 16 / WM;
  static constexpr int NT = COLS / 8 / WN;
  static_assert(WM * WN == NW && MT * WM * 16 == ROWS && NT * WN * 8 == COLS, "warp grid");
};

// WS / WKV / WQ: warps along the rows of the S^T, dK/dV and dQ tiles (0 = as many as fit).
template <typename T, int D_, int NW_, int BN_, int BM_, int WS_ = 0, int WKV_ = 0, int WQ_ = 0>
struct BwdTraits {
  static constexpr int D = D_, NW = NW_, BN = BN_, BM = BM_, C = D_ / 8, CP = BM_ / 8;
  static constexpr int dflt(int rows) { return rows / 16 < NW ? rows / 16 : NW; }
  using GS = WarpGrid<BN, BM, NW, WS_ ? WS_ : dflt(BN)>;    // S^T, dP^T
  using GKV = WarpGrid<BN, D, NW, WKV_ ? WKV_ : dflt(BN)>;  // dK, dV
  using GQ = WarpGrid<BM, D, NW, WQ_ ? WQ_ : dflt(BM)>;     // dQ
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

    // Per-column (query) values and the bias tile, loaded before the GEMMs.
    float lse_c[GS::NT][2], dd_c[GS::NT][2];
#pragma unroll
    for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
      for (int e1 = 0; e1 < 2; ++e1) {
        const int i = i0 + s_n0 + nt * 8 + 2 * tq + e1;
        const int64_t li = lse_idx(p, b, h, sq.q0, min(i, nq - 1));
        const float l = p.lse[li];
        lse_c[nt][e1] = (i >= nq || l == -INFINITY) ? INFINITY : l * kLog2e;  // P = 0 for empty rows
        dd_c[nt][e1] = a.dvec[li];
      }
    int64_t bbase[2] = {0, 0};
    float bias[MODS ? GS::MT : 1][MODS ? GS::NT : 1][4];
    if constexpr (MODS) {
      if (p.num_bias > 0) bbase[0] = bias_off(p.bias[0], b, h, 0);
      if (p.num_bias > 1) bbase[1] = bias_off(p.bias[1], b, h, 0);
#pragma unroll
      for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) bias[mt][nt][e] = 0.f;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        if (t >= p.num_bias) break;
        const int64_t rs = p.bias[t].row_stride;
        add_bias_tile<GS::MT * GS::NT * 4>(p.bias[t], &bias[0][0][0], [&](int k) {
          const int mt = k / (GS::NT * 4), nt = (k / 4) % GS::NT, e = k % 4;
          const int i = min(i0 + s_n0 + nt * 8 + 2 * tq + (e & 1), nq - 1);
          const int j = min(j0 + s_m0 + mt * 16 + g + 8 * (e >> 1), nk - 1);
          return bbase[t] + i * rs + j;
        });
      }
    }

    float s[GS::MT][GS::NT][4], dp[GS::MT][GS::NT][4];
    zero(s);
    zero(dp);
    gemm_ss<T, GS::MT, GS::NT, D, false, false, C, C>(s, sK, s_m0, cQ, s_n0, lane);
    gemm_ss<T, GS::MT, GS::NT, D, false, false, C, C>(dp, sV, s_m0, cdO, s_n0, lane);

#pragma unroll
    for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
      for (int e1 = 0; e1 < 2; ++e1) {
        const int i = i0 + s_n0 + nt * 8 + 2 * tq + e1;
        const KeyRange kr = i < nq ? visible_keys(i, nq, nk, p.causal, p.window_left, p.window_right) : KeyRange{0, 0};
#pragma unroll
        for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            const int e = e2 * 2 + e1;
            const int j = j0 + s_m0 + mt * 16 + g + 8 * e2;
            float x = s[mt][nt][e] * a.scale_log2;
            if constexpr (MODS) {
              float add = bias[mt][nt][e];
              if (p.alibi_slopes) add += alibi_term(slope, i, j, nq, nk);
              x += kLog2e * add;
            }
            const bool vis = j >= kr.lo && j < kr.hi;
            const float pr = vis ? fast_exp2(x - lse_c[nt][e1]) : 0.f;
            float dpv = dp[mt][nt][e];
            float pd = pr;
            if constexpr (MODS) {
              if (a.dropout && vis) {
                const bool keep = dropout_keep(p.dropout_seed, p.dropout_offset, bh, i, j, a.drop_threshold);
                dpv = keep ? dpv * a.keep_scale : 0.f;
                pd = keep ? pr * a.keep_scale : 0.f;
              }
            }
            const float ds = pr * (dpv - dd_c[nt][e1]);
            if constexpr (MODS) {
              if (a.any_bias_grad && vis) {
                if (p.num_bias > 0 && p.bias[0].grad) atomicAdd(p.bias[0].grad + bbase[0] + i * p.bias[0].row_stride + j, ds);
                if (p.num_bias > 1 && p.bias[1].grad) atomicAdd(p.bias[1].grad + bbase[1] + i * p.bias[1].row_stride + j, ds);
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
