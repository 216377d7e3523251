// Exact float32 backward, key side: one CTA per (32 keys, kv head, sequence).
// K and V stay in shared memory; the CTA loops over the query heads of its
// GQA group and the 32-row query tiles that see its keys. Warp w owns keys
// 8w..8w+7 and lane l stands for query l of the tile: it recomputes P^T from
// LSE and dP^T = V dO^T, forms dS^T, and accumulates dV += P^T dO and
// dK += dS^T Q in registers (no atomics). Non-deterministic dBias goes out with
// atomics as in bwd_kernel.cuh; dQ comes from f32_dq_kernel (f32_qside_kernel.cuh).
#pragma once

#include "kernels/f32/f32_tile.cuh"

namespace tessera::attention::cuda {

inline size_t f32_bwd_smem(const AttentionParams& p) {
  return sizeof(float) * (2 * F32::TILE * (F32::ld(p.head_dim) + F32::ld(p.head_dim_v)) + F32::TILE * F32::TILE);
}

template <int NC>
__global__ void __launch_bounds__(F32::NT) f32_bwd_kernel(const __grid_constant__ KArgs a) {
  constexpr int RW = F32::RW, T = F32::TILE;
  extern __shared__ float f32_smem[];
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * T;
  const SeqSpan sq = seq_span(p, b);
  if (j0 >= sq.nk) return;
  const int nq = sq.nq, nk = sq.nk, d = p.head_dim, dv = p.head_dim_v;
  const int G = p.heads_q / p.heads_kv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sK = f32_smem;
  float* sV = sK + T * F32::ld(d);
  float* sQ = sV + T * F32::ld(dv);
  float* sdO = sQ + T * F32::ld(d);
  float* sW = sdO + T * F32::ld(dv) + warp * RW * T;  // this warp's P^T, then dS^T

  int i_lo, i_hi;
  rows_seeing(p, nq, nk, j0, min(j0 + T, nk), i_lo, i_hi);
  const int qb_begin = i_lo / T;
  const int nqb = i_hi > i_lo ? (i_hi + T - 1) / T - qb_begin : 0;

  f32_load_k_v(p, sK, sV, b, hk, sq, j0);

  float dk[RW][NC], dvacc[RW][NC];
  f32_zero(dk);
  f32_zero(dvacc);
  for (int it = 0; it < G * nqb; ++it) {
    const int h = hk * G + it / nqb, i0 = (qb_begin + it % nqb) * T;
    __syncthreads();  // previous tiles consumed (and K/V written, first time round)
    f32_load_q_do(p, sQ, sdO, b, h, sq, i0, true);
    __syncthreads();
    const F32Row row = f32_row(a, b, h, sq, i0 + lane, true);  // this lane's query
    const float slope = alibi_slope(p, b, h);
    const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);
    float s[RW], dp[RW], pd[RW], ds[RW];
    f32_dot_rows(s, sK + warp * RW * F32::ld(d), sQ, d, lane);
    f32_dot_rows(dp, sV + warp * RW * F32::ld(dv), sdO, dv, lane);
#pragma unroll
    for (int rr = 0; rr < RW; ++rr) {
      const int j = j0 + warp * RW + rr;
      f32_grad_elem(a, s[rr], dp[rr], row, slope, bh, j, nq, nk, pd[rr], ds[rr]);
      if (a.any_bias_grad && ds[rr] != 0.f) {
#pragma unroll
        for (int t = 0; t < 2; ++t)
          if (t < p.num_bias && p.bias[t].grad) atomicAdd(p.bias[t].grad + row.brow[t] + j, ds[rr]);
      }
    }
    f32_acc_rows<NC>(dvacc, pd, sW, sdO, dv, lane);
    f32_acc_rows<NC>(dk, ds, sW, sQ, d, lane);
  }

#pragma unroll
  for (int rr = 0; rr < RW; ++rr) {
    const int j = j0 + warp * RW + rr;
    if (j >= nk) continue;
    f32_store_row<NC>(static_cast<float*>(p.dk) + row_offset(p, b, sq.k0, j, hk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride),
                      dk[rr], p.scale, d, lane);
    f32_store_row<NC>(static_cast<float*>(p.dv) + row_offset(p, b, sq.k0, j, hk, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride),
                      dvacc[rr], 1.f, dv, lane);
  }
}

}  // namespace tessera::attention::cuda
