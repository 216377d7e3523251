// Exact float32 forward: one CTA per (32 query rows, head, sequence). Q stays
// in shared memory, K/V tiles of 32 keys stream through it; warp w owns query
// rows 8w..8w+7 and lane l scores key l of the tile, so each row's online
// softmax (max, sum) is a warp reduction. O is accumulated in registers and
// written with LSE at the end, in the conventions of fwd_kernel.cuh.
#pragma once

#include "kernels/f32/f32_tile.cuh"

namespace tessera::attention::cuda {

inline size_t f32_fwd_smem(const AttentionParams& p) {
  return sizeof(float) * (F32::TILE * (2 * F32::ld(p.head_dim) + F32::ld(p.head_dim_v)) + F32::TILE * F32::TILE);
}

template <int NC>
__global__ void __launch_bounds__(F32::NT) f32_fwd_kernel(const __grid_constant__ KArgs a) {
  constexpr int RW = F32::RW, T = F32::TILE;
  extern __shared__ float f32_smem[];
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * T;
  const SeqSpan sq = seq_span(p, b);
  if (i0 >= sq.nq) return;
  const int nq = sq.nq, nk = sq.nk, d = p.head_dim, dv = p.head_dim_v;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sQ = f32_smem;
  float* sK = sQ + T * F32::ld(d);
  float* sV = sK + T * F32::ld(d);
  float* sP = sV + T * F32::ld(dv) + warp * RW * T;  // this warp's RW x 32 probabilities

  F32Row rows[RW];
  int j_begin, khi;
  f32_q_tile(a, b, h, sq, i0, warp, false, rows, j_begin, khi);
  const float slope = alibi_slope(p, b, h);
  const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);

  f32_load_q_do(p, sQ, nullptr, b, h, sq, i0, false);

  float o[RW][NC], m[RW], l[RW];
  f32_zero(o);
#pragma unroll
  for (int rr = 0; rr < RW; ++rr) m[rr] = -INFINITY, l[rr] = 0.f;

  for (int j0 = j_begin; j0 < khi; j0 += T) {
    __syncthreads();  // previous tile consumed
    f32_load_k_v(p, sK, sV, b, hk, sq, j0);
    __syncthreads();
    float s[RW], pw[RW];
    f32_dot_rows(s, sQ + warp * RW * F32::ld(d), sK, d, lane);
    const int j = j0 + lane;
#pragma unroll
    for (int rr = 0; rr < RW; ++rr) {
      const float x = f32_logit(a, s[rr], rows[rr], slope, j, nq, nk);
      const float mx = fmaxf(m[rr], warp_max(x));
      const float m_use = mx == -INFINITY ? 0.f : mx;
      const float corr = exp2f(m[rr] - m_use);
      float pr = exp2f(x - m_use);
      l[rr] = l[rr] * corr + warp_sum(pr);
      m[rr] = mx;
#pragma unroll
      for (int cc = 0; cc < NC; ++cc) o[rr][cc] *= corr;
      if (a.dropout && pr > 0.f &&
          !dropout_keep(p.dropout_seed, p.dropout_offset, bh, rows[rr].i, j, a.drop_threshold))
        pr = 0.f;
      pw[rr] = pr;
    }
    f32_acc_rows<NC>(o, pw, sP, sV, dv, lane);
  }

  // Epilogue: normalise, write O and LSE.
#pragma unroll
  for (int rr = 0; rr < RW; ++rr) {
    const int i = rows[rr].i;
    if (i >= nq) continue;
    const bool empty = !(l[rr] > 0.f) || m[rr] == -INFINITY;
    float* go = static_cast<float*>(p.o) + row_offset(p, b, sq.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
    f32_store_row<NC>(go, o[rr], empty ? 0.f : a.keep_scale / l[rr], dv, lane);
    if (lane == 0) p.lse[lse_index(p, b, h, sq.q0, i)] = row_lse(m[rr], l[rr]);
  }
}

}  // namespace tessera::attention::cuda
