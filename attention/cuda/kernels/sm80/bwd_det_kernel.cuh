// Deterministic backward pieces, computed query-side with no atomics:
//  - dq_kernel: one CTA per (query block, head, sequence), streams K/V,
//    recomputes P and dP, accumulates dQ = dS K in registers.
//  - dbias_kernel: one CTA per (query block, bias slice); for each key block
//    it sums dS over every (sequence, head) that reads that slice, in a fixed
//    order, and writes the tile once.
// Both are bitwise repeatable: every sum has one owner and a fixed order.
#pragma once

#include "score_mod.cuh"
#include "primitives/tile_io.cuh"

namespace tessera::attention::cuda {

template <typename T, int D_, int NW_, int BN_>
struct QsideTraits {
  static constexpr int D = D_, NW = NW_, BN = BN_, BM = 16 * NW_, C = D_ / 8;
  static constexpr int NT = BN / 8, DT = D / 8;
  static constexpr int kSmem = (2 * BM * D + 4 * BN * D) * sizeof(T) + NW * BN * sizeof(float);
};

// Per-thread row state for two rows (g, g + 8) of a warp's 16 query rows.
struct RowInfo {
  int i[2];
  KeyRange kr[2];
  float lse2[2], Di[2];
  int64_t brow[2][2];
};

__device__ __forceinline__ void row_info(const KArgs& a, int b, int h, const SeqSpan& sq, int i0w, int g, RowInfo& ri) {
  const AttentionParams& p = a.p;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = i0w + g + 8 * r;
    ri.i[r] = i;
    ri.kr[r] = KeyRange{0, 0};
    ri.lse2[r] = INFINITY;
    ri.Di[r] = 0.f;
    ri.brow[r][0] = ri.brow[r][1] = 0;
    if (i < sq.nq) {
      const int64_t li = lse_index(p, b, h, sq.q0, i);
      const float l = p.lse[li];
      ri.lse2[r] = lse_log2(l);
      ri.Di[r] = a.dvec[li];
      ri.kr[r] = visible_keys(i, sq.nq, sq.nk, p.causal, p.window_left, p.window_right);
      if (p.num_bias > 0) ri.brow[r][0] = bias_offset(p.bias[0], b, h, i);
      if (p.num_bias > 1) ri.brow[r][1] = bias_offset(p.bias[1], b, h, i);
    }
  }
}

// dS (natural units, before the softmax scale) of a warp's 16 rows x BN keys
// from tiles already in shared memory.
template <typename T, typename Tr>
__device__ __forceinline__ void ds_tile(const KArgs& a, float (&ds)[Tr::NT][4], const T* sQ, const T* sdO,
                                        const T* cK, const T* cV, int warp, int lane, int b, int h, int j0,
                                        const SeqSpan& sq, const RowInfo& ri) {
  constexpr int D = Tr::D, C = Tr::C, NT = Tr::NT;
  const AttentionParams& p = a.p;
  float s[NT][4], dp[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    uint32_t qa[4], da[4];
    load_a<C>(qa, sQ, warp * 16, k * 16, lane);
    load_a<C>(da, sdO, warp * 16, k * 16, lane);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      uint32_t bb[4];
      load_b2<C>(bb, cK, n * 8, k * 16, lane);
      mma16816<T>(s[n], qa, bb[0], bb[1]);
      mma16816<T>(s[n + 1], qa, bb[2], bb[3]);
      load_b2<C>(bb, cV, n * 8, k * 16, lane);
      mma16816<T>(dp[n], da, bb[0], bb[1]);
      mma16816<T>(dp[n + 1], da, bb[2], bb[3]);
    }
  }
  const float slope =
      p.alibi_slopes ? p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h] : 0.f;
  const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);
  const int tq = lane & 3;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1;
      const int j = j0 + n * 8 + 2 * tq + (e & 1);
      const int i = ri.i[r];
      float d = 0.f;
      if (j >= ri.kr[r].lo && j < ri.kr[r].hi) {
        const float x = s[n][e] * a.scale_log2 + kLog2e * additive_terms(p, ri.brow[r], slope, i, j, sq.nq, sq.nk);
        const float pr = exp2f(x - ri.lse2[r]);
        float dpv = dp[n][e];
        if (a.dropout)
          dpv = dropout_keep(p.dropout_seed, p.dropout_offset, bh, i, j, a.drop_threshold) ? dpv * a.keep_scale : 0.f;
        d = pr * (dpv - ri.Di[r]);
      }
      ds[n][e] = d;
    }
}

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NW * 32) dq_kernel(const __grid_constant__ KArgs a) {
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, C = Tr::C, NT = Tr::NT, DT = Tr::DT;
  constexpr int NTHREADS = Tr::NW * 32;
  extern __shared__ uint4 smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + BM * D;
  T* sK = sdO + BM * D;  // [2][BN*D]
  T* sV = sK + 2 * BN * D;
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * BM;
  const SeqSpan sq = seq_span(p, b);
  if (i0 >= sq.nq) return;
  const int nq = sq.nq, nk = sq.nk;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

  const BlockKeys bk = block_keys(p, i0, BM, BN, nq, nk);
  const int jb_begin = bk.jb_begin, jb_end = bk.jb_end;

  const T* gq = static_cast<const T*>(p.q) + row_offset(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  const T* gdo = static_cast<const T*>(p.dout) + row_offset(p, b, sq.q0, i0, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
  const T* gk = static_cast<const T*>(p.k) + row_offset(p, b, sq.k0, 0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  const T* gv = static_cast<const T*>(p.v) + row_offset(p, b, sq.k0, 0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  load_tile<BM, C, NTHREADS>(sQ, gq, p.q_row_stride, nq - i0, p.head_dim, a.vec_ok, tid);
  load_tile<BM, C, NTHREADS>(sdO, gdo, p.do_row_stride, nq - i0, p.head_dim_v, a.vec_ok, tid);
  auto load_kv = [&](int jb, int buf) {
    const int j0 = jb * BN;
    load_tile<BN, C, NTHREADS>(sK + buf * BN * D, gk + j0 * p.k_row_stride, p.k_row_stride, nk - j0, p.head_dim, a.vec_ok, tid);
    load_tile<BN, C, NTHREADS>(sV + buf * BN * D, gv + j0 * p.v_row_stride, p.v_row_stride, nk - j0, p.head_dim_v, a.vec_ok, tid);
  };
  if (jb_begin < jb_end) load_kv(jb_begin, 0);
  cp_async_commit();

  RowInfo ri;
  row_info(a, b, h, sq, i0 + warp * 16, g, ri);
  float dq[DT][4];
#pragma unroll
  for (int d = 0; d < DT; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) dq[d][e] = 0.f;

  for (int jb = jb_begin; jb < jb_end; ++jb) {
    const int buf = (jb - jb_begin) & 1;
    cp_async_wait<0>();
    __syncthreads();
    if (jb + 1 < jb_end) load_kv(jb + 1, buf ^ 1);
    cp_async_commit();
    const T* cK = sK + buf * BN * D;
    const T* cV = sV + buf * BN * D;
    float ds[NT][4];
    ds_tile<T, Tr>(a, ds, sQ, sdO, cK, cV, warp, lane, b, h, jb * BN, sq, ri);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = Elem<T>::pack(ds[2 * kk][0], ds[2 * kk][1]);
      pa[1] = Elem<T>::pack(ds[2 * kk][2], ds[2 * kk][3]);
      pa[2] = Elem<T>::pack(ds[2 * kk + 1][0], ds[2 * kk + 1][1]);
      pa[3] = Elem<T>::pack(ds[2 * kk + 1][2], ds[2 * kk + 1][3]);
#pragma unroll
      for (int d = 0; d < DT; d += 2) {
        uint32_t bb[4];
        load_b2_t<C>(bb, cK, d * 8, kk * 16, lane);
        mma16816<T>(dq[d], pa, bb[0], bb[1]);
        mma16816<T>(dq[d + 1], pa, bb[2], bb[3]);
      }
    }
  }
  cp_async_wait<0>();
  T* gdq = static_cast<T*>(p.dq);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = ri.i[r];
    if (i >= nq) continue;
    const int64_t orow = row_offset(p, b, sq.q0, i, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
#pragma unroll
    for (int d = 0; d < DT; ++d) {
      const int c = d * 8 + 2 * tq;
      const float v0 = dq[d][2 * r] * p.scale, v1 = dq[d][2 * r + 1] * p.scale;
      if (c < p.head_dim) gdq[orow + c] = Elem<T>::from_float(v0);
      if (c + 1 < p.head_dim) gdq[orow + c + 1] = Elem<T>::from_float(v1);
    }
  }
}

// Work split of the deterministic dBias of one term: the (b, h) members that
// read a slice are dealt round-robin to `splits` CTAs; each writes a dense
// partial [splits][EB][EH][rows][Nk] (rows = 1 when the term broadcasts over
// rows), reduced in split order by dbias_reduce. splits == 1 writes the grad.
struct DbiasSplit {
  int splits;
  int EB, EH, rows;
  float* partial;
};

// What a dBias CTA owns: slice (bm, hm) of the term (grid.y) and query blocks
// [qb_first, qb_last) of BM rows (grid.x; all of them when the term broadcasts over rows).
struct DbiasCta {
  int bm, hm, qb_first, qb_last;
  bool row_bcast;
};
__device__ __forceinline__ DbiasCta dbias_cta(const AttentionParams& p, const BiasTerm& bt, int BM) {
  DbiasCta c;
  c.row_bcast = bt.row_stride == 0;
  const int EH = bt.head_stride == 0 ? 1 : bt.head_mod;
  c.bm = blockIdx.y / EH;
  c.hm = blockIdx.y % EH;
  c.qb_first = c.row_bcast ? 0 : blockIdx.x;
  c.qb_last = c.row_bcast ? (p.seqlen_q + BM - 1) / BM : blockIdx.x + 1;
  return c;
}

// Calls f(b, h, seq) for each (b, h) that reads slice (bm, hm) of bias term bt
// and is dealt to split z: members are numbered in (b, h) order, round-robin.
// The members are b = b0, b0 + bs, ... and h = h0, h0 + hs, ...; member m is (b0 + (m / nh) bs,
// h0 + (m % nh) hs), so a split visits only its own (a scan of every (b, h) pair cost each
// CTA more time than its tiles when the batch is 1372 Swin windows).
template <typename F>
__device__ __forceinline__ void for_each_dbias_member(const AttentionParams& p, const BiasTerm& bt, int bm, int hm,
                                                      const DbiasSplit& sp, int z, F&& f) {
  const int b0 = bt.batch_stride != 0 ? bm : 0, bs = bt.batch_stride != 0 ? bt.batch_mod : 1;
  const int h0 = bt.head_stride != 0 ? hm : 0, hs = bt.head_stride != 0 ? bt.head_mod : 1;
  const int nb = b0 < p.batch ? (p.batch - b0 + bs - 1) / bs : 0;
  const int nh = h0 < p.heads_q ? (p.heads_q - h0 + hs - 1) / hs : 0;
  for (int m = z; m < nb * nh; m += sp.splits) {
    const int b = b0 + (m / nh) * bs, h = h0 + (m % nh) * hs;
    f(b, h, seq_span(p, b));
  }
}

// Where a dBias tile of slice (bm, hm) goes: element (i, j) at out[base + i * rstride + j],
// the grad itself with one split, else this split's (z) dense partial.
struct DbiasOut {
  float* out;
  int64_t base, rstride;
};
__device__ __forceinline__ DbiasOut dbias_out(const AttentionParams& p, const BiasTerm& bt, const DbiasSplit& sp,
                                              int bm, int hm, int z) {
  if (sp.splits == 1)
    return DbiasOut{bt.grad, static_cast<int64_t>(bm) * bt.batch_stride + static_cast<int64_t>(hm) * bt.head_stride,
                    bt.row_stride};
  return DbiasOut{sp.partial, ((static_cast<int64_t>(z) * sp.EB + bm) * sp.EH + hm) * sp.rows * p.seqlen_k,
                  p.seqlen_k};
}

// Deterministic dBias of term `t`. grid.x: query block (or 1 when the term
// broadcasts over rows), grid.y: slice (bm, hm) of the term, grid.z: split.
template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NW * 32) dbias_kernel(const __grid_constant__ KArgs a, int t, DbiasSplit sp) {
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, C = Tr::C, NT = Tr::NT;
  constexpr int NTHREADS = Tr::NW * 32;
  extern __shared__ uint4 smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + BM * D;
  T* sK = sdO + BM * D;
  T* sV = sK + BN * D;
  float* sRed = reinterpret_cast<float*>(sK + 4 * BN * D);  // [NW][BN]
  const AttentionParams& p = a.p;
  const BiasTerm& bt = p.bias[t];
  const DbiasCta cta = dbias_cta(p, bt, BM);
  const int bm = cta.bm, hm = cta.hm, qb_first = cta.qb_first, qb_last = cta.qb_last;
  const bool row_bcast = cta.row_bcast;
  const int G = p.heads_q / p.heads_kv;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int njb = (p.seqlen_k + BN - 1) / BN;

  for (int jb = 0; jb < njb; ++jb) {
    const int j0 = jb * BN;
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
    for_each_dbias_member(p, bt, bm, hm, sp, blockIdx.z, [&](int b, int h, const SeqSpan& sq) {
      if (j0 >= sq.nk) return;
      const int hk = h / G;
      for (int qb = qb_first; qb < qb_last; ++qb) {
        const int i0 = qb * BM;
        if (i0 >= sq.nq) continue;
        __syncthreads();
        load_tile<BM, C, NTHREADS>(sQ, static_cast<const T*>(p.q) + row_offset(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride),
                                   p.q_row_stride, sq.nq - i0, p.head_dim, a.vec_ok, tid);
        load_tile<BM, C, NTHREADS>(sdO, static_cast<const T*>(p.dout) + row_offset(p, b, sq.q0, i0, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride),
                                   p.do_row_stride, sq.nq - i0, p.head_dim_v, a.vec_ok, tid);
        load_tile<BN, C, NTHREADS>(sK, static_cast<const T*>(p.k) + row_offset(p, b, sq.k0, j0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
                                   p.k_row_stride, sq.nk - j0, p.head_dim, a.vec_ok, tid);
        load_tile<BN, C, NTHREADS>(sV, static_cast<const T*>(p.v) + row_offset(p, b, sq.k0, j0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride),
                                   p.v_row_stride, sq.nk - j0, p.head_dim_v, a.vec_ok, tid);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        RowInfo ri;
        row_info(a, b, h, sq, i0 + warp * 16, g, ri);
        float ds[NT][4];
        ds_tile<T, Tr>(a, ds, sQ, sdO, sK, sV, warp, lane, b, h, j0, sq, ri);
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[n][e] += ds[n][e];
      }
    });
    // write the tile: into the grad (one split) or this split's partial
    const DbiasOut out = dbias_out(p, bt, sp, bm, hm, blockIdx.z);
    if (!row_bcast) {
      const int i0 = blockIdx.x * BM + warp * 16;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = i0 + g + 8 * (e >> 1), j = j0 + n * 8 + 2 * tq + (e & 1);
          if (i < p.seqlen_q && j < p.seqlen_k) out.out[out.base + static_cast<int64_t>(i) * out.rstride + j] = acc[n][e];
        }
    } else {
      // column sums: rows within the warp (fixed butterfly), then warps in order
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1) {
          float v = acc[n][e1] + acc[n][2 + e1];
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (g == 0) sRed[warp * BN + n * 8 + 2 * tq + e1] = v;
        }
      __syncthreads();
      for (int c = tid; c < BN; c += NTHREADS) {
        float v = 0.f;
        for (int w = 0; w < Tr::NW; ++w) v += sRed[w * BN + c];
        if (j0 + c < p.seqlen_k) out.out[out.base + j0 + c] = v;
      }
      __syncthreads();
    }
  }
}

// grad[slice, i, j] = sum over splits, in split order, of partial[split, slice, i, j].
template <typename T>  // (a template so that every instantiation file may define it)
__global__ void dbias_reduce(const __grid_constant__ KArgs a, int t, DbiasSplit sp) {
  const AttentionParams& p = a.p;
  const BiasTerm& bt = p.bias[t];
  const int64_t per_split = static_cast<int64_t>(sp.EB) * sp.EH * sp.rows * p.seqlen_k;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < per_split;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(e % p.seqlen_k);
    int64_t r = e / p.seqlen_k;
    const int i = static_cast<int>(r % sp.rows);
    r /= sp.rows;
    const int hm = static_cast<int>(r % sp.EH), bm = static_cast<int>(r / sp.EH);
    float v = 0.f;
    for (int z = 0; z < sp.splits; ++z) v += sp.partial[z * per_split + e];
    bt.grad[static_cast<int64_t>(bm) * bt.batch_stride + static_cast<int64_t>(hm) * bt.head_stride +
            static_cast<int64_t>(i) * bt.row_stride + j] = v;
  }
}

}  // namespace tessera::attention::cuda
