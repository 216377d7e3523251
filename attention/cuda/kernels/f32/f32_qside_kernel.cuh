// Exact float32 backward, query side (no atomics, bitwise repeatable):
//  - f32_dq_kernel: one CTA per (32 query rows, head, sequence), streams K/V
//    tiles, recomputes dS and accumulates dQ = dS K in registers.
//  - f32_dbias_kernel: deterministic dBias of one broadcast term, with the
//    work split and partial sums of bwd_det_kernel.cuh (DbiasPlan/DbiasSplit,
//    reduced by dbias_reduce).
// Warp w owns query rows 8w..8w+7, lane l stands for key l of the tile.
#pragma once

#include "kernels/sm80/bwd_det_kernel.cuh"  // DbiasSplit, dbias_reduce
#include "kernels/f32/f32_tile.cuh"

namespace tessera::attention::cuda {

inline size_t f32_qside_smem(const AttentionParams& p) {
  return sizeof(float) * (2 * F32::TILE * (F32::ld(p.head_dim) + F32::ld(p.head_dim_v)) + F32::TILE * F32::TILE);
}

// dS (natural units, before the softmax scale) of the warp's RW rows x 32 keys
// from the Q/dO tile (rows relative to the tile) and the K/V tile at key j0.
__device__ __forceinline__ void f32_ds_rows(const KArgs& a, float (&ds)[F32::RW], const float* sQ, const float* sdO,
                                            const float* sK, const float* sV, const F32Row (&rows)[F32::RW], int b,
                                            int h, int j0, const SeqSpan& sq, int warp, int lane) {
  const AttentionParams& p = a.p;
  float dp[F32::RW];
  f32_dot_rows(ds, sQ + warp * F32::RW * F32::ld(p.head_dim), sK, p.head_dim, lane);
  f32_dot_rows(dp, sdO + warp * F32::RW * F32::ld(p.head_dim_v), sV, p.head_dim_v, lane);
  const float slope = alibi_slope(p, b, h);
  const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);
#pragma unroll
  for (int rr = 0; rr < F32::RW; ++rr) {
    float pd;
    f32_grad_elem(a, ds[rr], dp[rr], rows[rr], slope, bh, j0 + lane, sq.nq, sq.nk, pd, ds[rr]);
  }
}

template <int NC>
__global__ void __launch_bounds__(F32::NT) f32_dq_kernel(const __grid_constant__ KArgs a) {
  constexpr int RW = F32::RW, T = F32::TILE;
  extern __shared__ float f32_smem[];
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * T;
  const SeqSpan sq = seq_span(p, b);
  if (i0 >= sq.nq) return;
  const int nq = sq.nq, d = p.head_dim;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sQ = f32_smem;
  float* sdO = sQ + T * F32::ld(d);
  float* sK = sdO + T * F32::ld(p.head_dim_v);
  float* sV = sK + T * F32::ld(d);
  float* sdS = sV + T * F32::ld(p.head_dim_v) + warp * RW * T;

  F32Row rows[RW];
  int j_begin, khi;
  f32_q_tile(a, b, h, sq, i0, warp, true, rows, j_begin, khi);
  float dq[RW][NC];
  f32_zero(dq);
  f32_load_q_do(p, sQ, sdO, b, h, sq, i0, true);
  for (int j0 = j_begin; j0 < khi; j0 += T) {
    __syncthreads();
    f32_load_k_v(p, sK, sV, b, hk, sq, j0);
    __syncthreads();
    float ds[RW];
    f32_ds_rows(a, ds, sQ, sdO, sK, sV, rows, b, h, j0, sq, warp, lane);
    f32_acc_rows<NC>(dq, ds, sdS, sK, d, lane);
  }
#pragma unroll
  for (int rr = 0; rr < RW; ++rr) {
    const int i = rows[rr].i;
    if (i >= nq) continue;
    f32_store_row<NC>(static_cast<float*>(p.dq) + row_offset(p, b, sq.q0, i, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride),
                      dq[rr], p.scale, d, lane);
  }
}

// Deterministic dBias of term t. grid.x: query tile (or 1 when the term
// broadcasts over rows), grid.y: slice (bm, hm) of the term, grid.z: split.
__global__ void __launch_bounds__(F32::NT) f32_dbias_kernel(const __grid_constant__ KArgs a, int t, DbiasSplit sp) {
  // (the member walk and the output placement are bwd_det_kernel.cuh's)
  constexpr int RW = F32::RW, T = F32::TILE;
  extern __shared__ float f32_smem[];
  const AttentionParams& p = a.p;
  const BiasTerm& bt = p.bias[t];
  const DbiasCta cta = dbias_cta(p, bt, T);
  const int bm = cta.bm, hm = cta.hm, qb_first = cta.qb_first, qb_last = cta.qb_last;
  const bool row_bcast = cta.row_bcast;
  const int G = p.heads_q / p.heads_kv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sQ = f32_smem;
  float* sdO = sQ + T * F32::ld(p.head_dim);
  float* sK = sdO + T * F32::ld(p.head_dim_v);
  float* sV = sK + T * F32::ld(p.head_dim);
  float* sRed = sV + T * F32::ld(p.head_dim_v);  // [NW][32]

  for (int j0 = 0; j0 < p.seqlen_k; j0 += T) {
    float acc[RW];
#pragma unroll
    for (int rr = 0; rr < RW; ++rr) acc[rr] = 0.f;
    for_each_dbias_member(p, bt, bm, hm, sp, blockIdx.z, [&](int b, int h, const SeqSpan& sq) {
      if (j0 >= sq.nk) return;
      for (int qb = qb_first; qb < qb_last; ++qb) {
        const int i0 = qb * T;
        if (i0 >= sq.nq) continue;
        __syncthreads();
        f32_load_q_do(p, sQ, sdO, b, h, sq, i0, true);
        f32_load_k_v(p, sK, sV, b, h / G, sq, j0);
        __syncthreads();
        F32Row rows[RW];
#pragma unroll
        for (int rr = 0; rr < RW; ++rr) rows[rr] = f32_row(a, b, h, sq, i0 + warp * RW + rr, true);
        float ds[RW];
        f32_ds_rows(a, ds, sQ, sdO, sK, sV, rows, b, h, j0, sq, warp, lane);
#pragma unroll
        for (int rr = 0; rr < RW; ++rr) acc[rr] += ds[rr];
      }
    });
    const DbiasOut out = dbias_out(p, bt, sp, bm, hm, blockIdx.z);
    const int j = j0 + lane;
    if (!row_bcast) {
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) {
        const int i = blockIdx.x * T + warp * RW + rr;
        if (i < p.seqlen_q && j < p.seqlen_k) out.out[out.base + static_cast<int64_t>(i) * out.rstride + j] = acc[rr];
      }
    } else {
      // column sums: the warp's rows in order, then the warps in order
      float v = 0.f;
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) v += acc[rr];
      sRed[warp * T + lane] = v;
      __syncthreads();
      if (warp == 0) {
        float s = 0.f;
        for (int w = 0; w < F32::NW; ++w) s += sRed[w * T + lane];
        if (j < p.seqlen_k) out.out[out.base + j] = s;
      }
      __syncthreads();
    }
  }
}

}  // namespace tessera::attention::cuda
