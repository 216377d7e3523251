// Building blocks of the exact float32 kernels (f32_*_kernel.cuh): plain fp32
// FMA on the CUDA cores, no tensor cores (TF32 would lose ~3 digits).
//
// A CTA has 4 warps; a warp owns RW = 8 rows of a 32-row tile and its lane l
// stands for row l of the other operand's 32-row tile, so score tiles live in
// registers (s[rr] = row rr x column lane). Tiles sit in shared memory with an
// odd row pitch (conflict-free column reads across lanes), zero-filled past
// the sequence end and the head dim. Output rows (O, dQ, dK, dV) are
// accumulated in registers, columns lane + 32*cc, cc < NC (NC = ceil(D/32)
// rounded up to 2, 4 or 8: the head-dim buckets of the f32 path).
#pragma once

#include "score_mod.cuh"

namespace tessera::attention::cuda {

struct F32 {
  static constexpr int NW = 4, RW = 8, TILE = 32, NT = NW * 32;  // TILE = NW * RW = 32 = lanes
  static __host__ __device__ constexpr int ld(int d) { return d | 1; }
};

// Rows [0, 32) of a tile whose row r lives at g + r * row_stride (valid while r < nrows),
// columns [0, ncols): coalesced loads, zeros elsewhere.
__device__ __forceinline__ void f32_load_tile(float* s, const float* g, int64_t row_stride, int nrows, int ncols) {
  const int ld = F32::ld(ncols);
  for (int idx = threadIdx.x; idx < F32::TILE * ld; idx += F32::NT) {
    const int r = idx / ld, c = idx - r * ld;
    s[idx] = (r < nrows && c < ncols) ? __ldg(g + r * row_stride + c) : 0.f;
  }
}

// The Q tile (and, with dout, the dO tile) of rows i0.. of head h.
__device__ __forceinline__ void f32_load_q_do(const AttentionParams& p, float* sQ, float* sdO, int b, int h,
                                              const SeqSpan& sq, int i0, bool dout) {
  f32_load_tile(sQ, static_cast<const float*>(p.q) + row_offset(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride),
                p.q_row_stride, sq.nq - i0, p.head_dim);
  if (dout)
    f32_load_tile(sdO, static_cast<const float*>(p.dout) + row_offset(p, b, sq.q0, i0, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride),
                  p.do_row_stride, sq.nq - i0, p.head_dim_v);
}

// The K and V tiles of keys j0.. of kv head hk.
__device__ __forceinline__ void f32_load_k_v(const AttentionParams& p, float* sK, float* sV, int b, int hk,
                                             const SeqSpan& sq, int j0) {
  f32_load_tile(sK, static_cast<const float*>(p.k) + row_offset(p, b, sq.k0, j0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
                p.k_row_stride, sq.nk - j0, p.head_dim);
  f32_load_tile(sV, static_cast<const float*>(p.v) + row_offset(p, b, sq.k0, j0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride),
                p.v_row_stride, sq.nk - j0, p.head_dim_v);
}

// out[rr] = sum_c A[rr][c] * B[lane][c]: A = the warp's RW rows (broadcast reads),
// B = a 32-row tile (one row per lane), both of pitch ld(len).
__device__ __forceinline__ void f32_dot_rows(float (&out)[F32::RW], const float* A, const float* B, int len, int lane) {
  const int ld = F32::ld(len);
#pragma unroll
  for (int rr = 0; rr < F32::RW; ++rr) out[rr] = 0.f;
  const float* b = B + lane * ld;
#pragma unroll 4
  for (int c = 0; c < len; ++c) {
    const float bv = b[c];
#pragma unroll
    for (int rr = 0; rr < F32::RW; ++rr) out[rr] = fmaf(A[rr * ld + c], bv, out[rr]);
  }
}

// acc[rr][cc] += sum_j W[rr][j] * B[j][lane + 32*cc]: W = the warp's RW x 32 weights
// (warp-private shared memory), B = a 32-row tile of pitch ld(len).
template <int NC>
__device__ __forceinline__ void f32_acc_rows(float (&acc)[F32::RW][NC], const float* W, const float* B, int len,
                                             int lane) {
  const int ld = F32::ld(len);
#pragma unroll 2
  for (int j = 0; j < F32::TILE; ++j) {
    float w[F32::RW];
#pragma unroll
    for (int rr = 0; rr < F32::RW; ++rr) w[rr] = W[rr * F32::TILE + j];
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) {
      const int c = lane + 32 * cc;
      if (c < len) {
        const float bv = B[j * ld + c];
#pragma unroll
        for (int rr = 0; rr < F32::RW; ++rr) acc[rr][cc] = fmaf(w[rr], bv, acc[rr][cc]);
      }
    }
  }
}

// The same with the weights in registers (w[rr] = W[rr][lane]), staged through the
// warp's RW x 32 shared buffer sW.
template <int NC>
__device__ __forceinline__ void f32_acc_rows(float (&acc)[F32::RW][NC], const float (&w)[F32::RW], float* sW,
                                             const float* B, int len, int lane) {
#pragma unroll
  for (int rr = 0; rr < F32::RW; ++rr) sW[rr * F32::TILE + lane] = w[rr];
  __syncwarp();
  f32_acc_rows<NC>(acc, sW, B, len, lane);
  __syncwarp();  // sW free again
}

template <int NC>
__device__ __forceinline__ void f32_zero(float (&acc)[F32::RW][NC]) {
#pragma unroll
  for (int rr = 0; rr < F32::RW; ++rr)
#pragma unroll
    for (int cc = 0; cc < NC; ++cc) acc[rr][cc] = 0.f;
}

// g[c] = acc[cc] * mul for the columns c = lane + 32*cc < len of one output row.
template <int NC>
__device__ __forceinline__ void f32_store_row(float* g, const float (&acc)[NC], float mul, int len, int lane) {
#pragma unroll
  for (int cc = 0; cc < NC; ++cc) {
    const int c = lane + 32 * cc;
    if (c < len) g[c] = acc[cc] * mul;
  }
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, s));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) x += __shfl_xor_sync(0xffffffffu, x, s);
  return x;
}

// What a query row needs to score keys: its index, visible key range, bias row
// offsets, ALiBi slope and (backward) log2-unit LSE and D = rowsum(dO*O) - dlse.
struct F32Row {
  int i;
  KeyRange kr;
  int64_t brow[2];
  float lse2, Di;
};

__device__ __forceinline__ F32Row f32_row(const KArgs& a, int b, int h, const SeqSpan& sq, int i, bool bwd) {
  const AttentionParams& p = a.p;
  F32Row r{i, KeyRange{0, 0}, {0, 0}, INFINITY, 0.f};
  if (i >= sq.nq) return r;  // sees nothing
  r.kr = visible_keys(i, sq.nq, sq.nk, p.causal, p.window_left, p.window_right);
  if (p.num_bias > 0) r.brow[0] = bias_offset(p.bias[0], b, h, i);
  if (p.num_bias > 1) r.brow[1] = bias_offset(p.bias[1], b, h, i);
  if (bwd) {
    const int64_t li = lse_index(p, b, h, sq.q0, i);
    const float l = p.lse[li];
    r.lse2 = lse_log2(l);  // P = 0 for empty rows
    r.Di = a.dvec[li];
  }
  return r;
}

// Query-side CTAs (forward, dQ): the warp's RW rows of the 32-row tile at i0,
// and the key tiles [j_begin, khi) in steps of 32 that hold a key any row sees.
__device__ __forceinline__ void f32_q_tile(const KArgs& a, int b, int h, const SeqSpan& sq, int i0, int warp, bool bwd,
                                           F32Row (&rows)[F32::RW], int& j_begin, int& khi) {
  const AttentionParams& p = a.p;
  const int i_last = min(i0 + F32::TILE, sq.nq) - 1;
  j_begin = visible_keys(i0, sq.nq, sq.nk, p.causal, p.window_left, p.window_right).lo / F32::TILE * F32::TILE;
  khi = visible_keys(i_last, sq.nq, sq.nk, p.causal, p.window_left, p.window_right).hi;
#pragma unroll
  for (int rr = 0; rr < F32::RW; ++rr) rows[rr] = f32_row(a, b, h, sq, i0 + warp * F32::RW + rr, bwd);
}

__device__ __forceinline__ float alibi_slope(const AttentionParams& p, int b, int h) {
  return p.alibi_slopes ? p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h] : 0.f;
}

// Logit of score (row, j) in log2 units, -inf where j is not visible: the one
// formula of the forward and both backward sides, so P is recomputed bit for bit.
__device__ __forceinline__ float f32_logit(const KArgs& a, float s, const F32Row& r, float slope, int j, int nq,
                                           int nk) {
  if (j < r.kr.lo || j >= r.kr.hi) return -INFINITY;
  return fmaf(s, a.scale_log2, kLog2e * additive_terms(a.p, r.brow, slope, r.i, j, nq, nk));
}

// Backward element (row, j): P with dropout applied (pd, for dV) and dS (for
// dQ, dK, dBias) from the raw scores s = q.k and dp = dO.v.
__device__ __forceinline__ void f32_grad_elem(const KArgs& a, float s, float dp, const F32Row& r, float slope,
                                              uint32_t bh, int j, int nq, int nk, float& pd, float& ds) {
  const float x = f32_logit(a, s, r, slope, j, nq, nk);
  pd = ds = 0.f;
  if (x == -INFINITY) return;
  const float pr = exp2f(x - r.lse2);
  pd = pr;
  if (a.dropout) {
    const bool keep = dropout_keep(a.p.dropout_seed, a.p.dropout_offset, bh, r.i, j, a.drop_threshold);
    dp = keep ? dp * a.keep_scale : 0.f;
    pd = keep ? pr * a.keep_scale : 0.f;
  }
  ds = pr * (dp - r.Di);
}

}  // namespace tessera::attention::cuda
