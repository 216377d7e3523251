// Steps both Hopper backward kernels take on a warpgroup's 64 keys x BM
// queries: bwd_sm90_kernel.cuh (two warpgroups per 128 keys, one CTA per SM)
// and bwd_sm90_wg_kernel.cuh (one warpgroup per 64 keys, two CTAs per SM).
// Accumulator layout of an m64nNk16 tile, as everywhere in the sm90 kernels:
// s[4n + e] is key (row) 16 warp + g + 8 (e >> 1), query (column) 8n + 2tq + (e & 1).
#pragma once

#include "primitives/acc_tile.cuh"
#include "primitives/mma.cuh"
#include "score_mod.cuh"
#include "primitives/tma.cuh"
#include "primitives/wgmma.cuh"

namespace tessera::attention::cuda::sm90 {

// Q, K, V, dO of one call as 4-D tensor maps, and the dQ accumulator (launch_sm90_bwd.cu).
struct BwdMaps {
  CUtensorMap q, k, v, dout;
  CUtensorMap dq;      // the fp32 dQ accumulator (map_dq_accum), when there is one
  CUtensorMap dk, dv;  // boxes of 64 rows, when kv_store
  int kv_store;        // dK / dV leave by TMA stores (fixed-length calls: a box would cross sequences)
};

// The query blocks a CTA of keys j0..j1 walks: for each of the GQA group's G heads (kv head hk), the
// blocks of BM rows that see any of its keys; iteration it is head(it), rows row0(it)... With head splits
// (split `split` of `splits`) the group is `splits` groups of G / splits heads, of "kv head" hk * splits + split.
template <int BM>
struct QueryWalk {
  int hk, G, qb_begin, nqb;
  __device__ int iters() const { return G * nqb; }
  // Without GQA (G == 1) iters() == nqb, so it < nqb: no runtime division, whose ~20 instructions and
  // reciprocal round trip would sit in every block's GEMM issue.
  __device__ int head(int it) const { return G == 1 ? hk : hk * G + it / nqb; }
  __device__ int row0(int it) const { return (qb_begin + (G == 1 ? it : it % nqb)) * BM; }
};
template <int BM>
__device__ __forceinline__ QueryWalk<BM> query_walk(const AttentionParams& p, int nq, int nk, int j0, int j1, int hk,
                                                    int split = 0, int splits = 1) {
  int i_lo, i_hi;
  rows_seeing(p, nq, nk, j0, j1, i_lo, i_hi);
  QueryWalk<BM> w;
  w.hk = hk * splits + split;
  w.G = p.heads_q / p.heads_kv / splits;
  w.qb_begin = i_lo / BM;
  w.nqb = i_hi > i_lo ? (i_hi + BM - 1) / BM - w.qb_begin : 0;
  return w;
}

// The CTA's mbarriers: K / V at bar_kv, the two Q / dO stages after it (one thread initialises, all meet).
__device__ __forceinline__ void init_bwd_barriers(uint32_t bar_kv) {
  if (threadIdx.x == 0) {
    mbar_init(bar_kv, 1);
    mbar_init(bar_kv + 8, 1);
    mbar_init(bar_kv + 16, 1);
    fence_mbar_init();
  }
  __syncthreads();
}

// The CTA's BN keys of K and V (SLABS 64-column slabs each) on bar (one thread). Tensor-map coordinates:
// varlen rows are global rows of a batch of one (bcoord 0).
template <int BN, int SLABS>
__device__ __forceinline__ void load_kv(const BwdMaps& maps, uint32_t bar, uint32_t sK, uint32_t sV, int krow, int hk,
                                        int bcoord) {
  mbar_expect_tx(bar, 2 * BN * SLABS * 128);
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl) {
    tma_load_4d(sK + sl * (BN * 128), &maps.k, bar, sl * 64, krow, hk, bcoord);
    tma_load_4d(sV + sl * (BN * 128), &maps.v, bar, sl * 64, krow, hk, bcoord);
  }
}

// BN key rows of K or V (map; SLABS 64-column slabs, BN * 128 bytes apart at dst) from row krow of kv
// head hk, on their own mbarrier bar (one thread).
template <int BN, int SLABS>
__device__ __forceinline__ void load_key_rows(const CUtensorMap* map, uint32_t bar, uint32_t dst, int krow, int hk,
                                              int bcoord) {
  mbar_expect_tx(bar, BN * SLABS * 128);
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl) tma_load_4d(dst + sl * (BN * 128), map, bar, sl * 64, krow, hk, bcoord);
}

// Query block i0 of head h: its BM rows of Q and dO (at cq / cdo) and their LSE / D from the padded row
// statistics (at sl / sd), on bar (one thread).
template <int BM, int SLABS>
__device__ __forceinline__ void load_q_block(const KArgs& a, const BwdMaps& maps, uint32_t bar, uint32_t cq,
                                             uint32_t cdo, float* sl, float* sd, int b, const SeqSpan& sq, int h, int i0,
                                             int bcoord) {
  mbar_expect_tx(bar, 2 * BM * SLABS * 128 + 2 * BM * 4);
  const int qrow = static_cast<int>(sq.q0) + i0;
#pragma unroll
  for (int s = 0; s < SLABS; ++s) {
    tma_load_4d(cq + s * (BM * 128), &maps.q, bar, s * 64, qrow, h, bcoord);
    tma_load_4d(cdo + s * (BM * 128), &maps.dout, bar, s * 64, qrow, h, bcoord);
  }
  const float* st = a.row_stats + stat_idx(a.p, b, h, sq.q0, i0);
  bulk_load(smem_u32(sl), st, BM * 4, bar);
  bulk_load(smem_u32(sd), st + a.stat_plane, BM * 4, bar);
}

__device__ __forceinline__ void st_shared_f32(uint32_t addr, float x) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(x) : "memory");
}
__device__ __forceinline__ void st_shared_f2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// dS^T in shared memory: rows are the CTA's keys (128 per 64-query slab here; with one 64-query slab the
// slab stride never enters), columns the block's queries in 64-query slabs of 128-byte-swizzled rows (the
// layout wgmma reads MN-major for dQ). ds_word_off: the byte offset of A-operand word dsa[kk][r] of a
// thread (warpgroup wg, warp, lane): key row wg 64 + 16 warp + g + 8 (r & 1), query chunk 2 kk + (r >> 1),
// 4 tq bytes in. ds_stm_off: the row address lane l gives stmatrix.x4 for step kk, whose matrices are
// exactly the words r = 0..3 (rows 8 (i & 1).., chunk 2 kk + (i >> 1)): one store for four
// (tests/gpu/bwd_swz_test.cu emulates it against ds_word_off).
__host__ __device__ __forceinline__ uint32_t ds_sw128(int r, int chunk) {  // sw128_off
  return static_cast<uint32_t>(r * 128 + ((chunk ^ (r & 7)) << 4));
}
__host__ __device__ __forceinline__ uint32_t ds_word_off(int wg, int warp, int lane, int kk, int r) {
  const int n = 2 * kk + (r >> 1), row = wg * 64 + warp * 16 + (lane >> 2) + 8 * (r & 1);
  return (n >> 3) * (128 * 128) + ds_sw128(row, n & 7) + 4 * (lane & 3);
}
__host__ __device__ __forceinline__ uint32_t ds_stm_off(int wg, int warp, int lane, int kk) {
  const int n = 2 * kk + (lane >> 4), row = wg * 64 + warp * 16 + 8 * ((lane >> 3) & 1) + (lane & 7);
  return (n >> 3) * (128 * 128) + ds_sw128(row, n & 7);
}

// dS^T of this thread's A-operand words (dsa[kk]: acc_to_a of dS^T) into the dS^T tile at sdS, rows of
// warpgroup w's 64 keys (one stmatrix.x4 per k-step: ds_stm_off), made visible to wgmma.
template <int BM>
__device__ __forceinline__ void store_ds_t(uint32_t sdS, int w, int warp, int lane, const uint32_t (&dsa)[BM / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk)
    stmatrix_x4(sdS + ds_stm_off(w, warp, lane, kk), dsa[kk][0], dsa[kk][1], dsa[kk][2], dsa[kk][3]);
  fence_proxy_async();  // the generic-proxy stores become visible to wgmma
}

// dK and dV accumulators start at zero.
template <int SLABS>
__device__ __forceinline__ void zero_dk_dv(float (&dk)[SLABS][32], float (&dv)[SLABS][32]) {
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
    for (int e = 0; e < 32; ++e) dk[sl][e] = dv[sl][e] = 0.f;
}

// Keeps the dK / dV accumulators' registers in place across a wgmma wait (the asm's "+f" operands).
template <int SLABS>
__device__ __forceinline__ void fence_dk_dv(float (&dk)[SLABS][32], float (&dv)[SLABS][32]) {
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl) {
    fence_regs(dk[sl]);
    fence_regs(dv[sl]);
  }
}

// The m64nNk16 accumulator s[4n + e] (row g + 8(e >> 1), column 8n + 2tq + (e & 1))
// as A operands of 64 x 16 steps: columns 16kk.. are the groups n = 2kk, 2kk + 1.
template <typename T, int NCOL>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[NCOL / 16][4], const float (&s)[NCOL / 2]) {
#pragma unroll
  for (int kk = 0; kk < NCOL / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[kk][r] = Elem<T>::pack(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

// P^T = exp2(S^T scale_log2 - lse) in place, for this thread's keys jr, jr + 8 and the block's queries
// i0 + 8n + 2tq + (e & 1); cL: the block's lse * log2 e. full: every row of the block is in the sequence
// and sees every key of the CTA, so no per-element mask.
template <int BM>
__device__ __forceinline__ void probs_t(float (&s)[BM / 2], const AttentionParams& p, float scale_log2, const float* cL,
                                        int i0, int nq, int nk, int jr, int tq, bool full) {
  if (full) {
#pragma unroll
    for (int n = 0; n < BM / 8; ++n) {
      const float2 lv = *reinterpret_cast<const float2*>(cL + 8 * n + 2 * tq);
      const float l2[2] = {lv.x, lv.y};
#pragma unroll
      for (int e = 0; e < 4; ++e) s[4 * n + e] = fast_exp2(fmaf(s[4 * n + e], scale_log2, -l2[e & 1]));
    }
  } else {
#pragma unroll
    for (int n = 0; n < BM / 8; ++n) {
      const int c = 8 * n + 2 * tq;
      const float2 lv = *reinterpret_cast<const float2*>(cL + c);
#pragma unroll
      for (int e1 = 0; e1 < 2; ++e1) {
        const int i = i0 + c + e1;
        const KeyRange kr = row_keys(p, i, nq, nk);
        // P = 0 for rows past the sequence (their statistics are padding) and empty rows (+inf)
        const float l2 = i >= nq ? INFINITY : (e1 ? lv.y : lv.x);
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
          const int k = 4 * n + 2 * e2 + e1, j = jr + 8 * e2;
          const float pr = fast_exp2(fmaf(s[k], scale_log2, -l2));
          s[k] = (j >= kr.lo && j < kr.hi) ? pr : 0.f;
        }
      }
    }
  }
}

// A block's loop head: S^T = K Q^T and dP^T = V dO^T for this warpgroup's 64 keys (k_rows / v_rows: their
// first rows in K / V, 64-column slabs BN * 128 bytes apart) against the block's BM queries (cq / cdo, slabs
// BM * 128 apart), committed as two groups; P^T (probs_t) while the tensor cores run dP^T, packed into pa;
// returns with both groups done. BN: the CTA's keys (j0..), for the block's "no mask needed" test.
// while_s: work for the time the tensor cores run S^T (called once both GEMMs are issued).
template <typename T, int D, int BM, int BN, typename WhileS>
__device__ __forceinline__ void scores_t(float (&s)[BM / 2], float (&dp)[BM / 2], uint32_t (&pa)[BM / 16][4],
                                         uint32_t k_rows, uint32_t v_rows, uint32_t cq, uint32_t cdo,
                                         const KArgs& a, const float* cL, int i0, int j0, int nq, int nk, int jr,
                                         int tq, WhileS&& while_s) {
  wgmma_fence();
  gemm_ss_kmajor<D / 16>(s, k_rows, BN * 128, cq, BM * 128, Tag<T>{});
  wgmma_commit();
  gemm_ss_kmajor<D / 16>(dp, v_rows, BN * 128, cdo, BM * 128, Tag<T>{});
  wgmma_commit();
  while_s();
  wgmma_wait<1>();
  fence_regs(s);
  // A block every one of whose rows sees all BN keys needs no per-element mask.
  const AttentionParams& p = a.p;
  const KeyRange kf = row_keys(p, i0, nq, nk), kl = row_keys(p, min(i0 + BM, nq) - 1, nq, nk);
  const bool full = i0 + BM <= nq && j0 >= kl.lo && j0 + BN <= kf.hi;
  probs_t<BM>(s, p, a.scale_log2, cL, i0, nq, nk, jr, tq, full);
  acc_to_a<T, BM>(pa, s);
  wgmma_wait<0>();
  fence_regs(dp);
}

// dS^T = P^T (dP^T - D) in place in dp; cD: the block's D = rowsum(dO * O) - dlse.
template <int BM>
__device__ __forceinline__ void dscores_t(float (&dp)[BM / 2], const float (&pt)[BM / 2], const float* cD, int tq) {
#pragma unroll
  for (int n = 0; n < BM / 8; ++n) {
    const float2 dd = *reinterpret_cast<const float2*>(cD + 8 * n + 2 * tq);
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[4 * n + e] = pt[4 * n + e] * (dp[4 * n + e] - ((e & 1) ? dd.y : dd.x));
  }
}

// A staged 64 x 64 dQ tile (two boxes of 32 fp32 columns, box_bytes apart) to the copy engine: reduce-adds
// into the accumulator at columns col0.. of head h, rows row..; boxes past its dq_d columns are skipped
// (one thread; the caller commits).
__device__ __forceinline__ void reduce_dq_tile(const BwdMaps& maps, uint32_t tile, uint32_t box_bytes, int col0,
                                               int dq_d, int h, int row) {
#pragma unroll
  for (int bx = 0; bx < 2; ++bx)
    if (col0 + 32 * bx < dq_d) tma_reduce_add_3d(&maps.dq, tile + bx * box_bytes, col0 + 32 * bx, h, row);
}

// A 64 x 64 dQ accumulator tile, times scale, into shared memory as two TMA boxes of 64 rows x 32 fp32
// columns (128-byte rows, 128-byte swizzled, box_bytes apart; the layout of map_dq_accum's reduce-adds).
// Thread rows r0 = 16 warp + g and r0 + 8 (same swizzle phase r0 & 7). Rows g and g ^ 1 of a column
// group land on the same two 16-byte chunks (the swizzle permutes chunks within pairs there), a 2-way
// bank conflict on every store; so odd rows store
// group n ^ 2 when even rows store group n: a half-warp's four rows then cover all 32 banks
// (the chunk moves by 4: key below).
// The byte offset from the tile of stage_dq_tile's store n by thread (r0, tq): row r0 (row r0 + 8 is
// 8 * 128 bytes on), column group n ^ 2 on odd rows, n on even ones. Host-checked against the boxes'
// layout, with the bank spread, in tests/gpu/bwd_swz_test.cu.
__host__ __device__ __forceinline__ uint32_t dq_stage_off(int r0, int tq, int n, uint32_t box_bytes) {
  const int key = (r0 & 7) ^ ((r0 & 1) ? 4 : 0);
  return r0 * 128 + 8 * (tq & 1) + (n >> 2) * box_bytes + (((2 * (n & 3) + (tq >> 1)) ^ key) << 4);
}
__device__ __forceinline__ void stage_dq_tile(uint32_t tile, uint32_t box_bytes, int r0, int tq, const float (&dq)[32],
                                              float scale) {
  const bool odd = r0 & 1;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    const int m = n ^ 2;  // odd rows' group at this step
    const uint32_t at = tile + dq_stage_off(r0, tq, n, box_bytes);
    const float x0 = odd ? dq[4 * m] : dq[4 * n], x1 = odd ? dq[4 * m + 1] : dq[4 * n + 1];
    const float x2 = odd ? dq[4 * m + 2] : dq[4 * n + 2], x3 = odd ? dq[4 * m + 3] : dq[4 * n + 3];
    st_shared_f2(at, x0 * scale, x1 * scale);
    st_shared_f2(at + 8 * 128, x2 * scale, x3 * scale);
  }
}

// The same tile computed transposed (dQ^T, the warp-specialised kernel's d64 dQ): accumulator rows are the
// 64 head-dim columns d0 = 16 warp + g and d0 + 8, columns the 64 queries 8n + 2tq + (e & 1); stored
// element by element into the same two boxes (query rows, 32 columns each). A warp's store covers 8
// consecutive columns of 4 query rows whose swizzle phases 2tq + e1 differ: 32 distinct banks.
// dq_stage_t_off: the byte offset of element (query 8n + 2tq + e1, column d0 + 8 e2) (host-checked too).
__host__ __device__ __forceinline__ uint32_t dq_stage_t_off(int d0, int tq, int e2, int e1, int n, uint32_t box_bytes) {
  const int d = d0 + 8 * e2, c = d & 31, r = 2 * tq + e1;  // r: the row's swizzle phase (rows 8n + r)
  return (d >> 5) * box_bytes + 4 * (c & 3) + r * 128 + (((c >> 2) ^ r) << 4) + n * 8 * 128;
}
__device__ __forceinline__ void stage_dq_tile_t(uint32_t tile, uint32_t box_bytes, int d0, int tq,
                                                const float (&dq)[32], float scale) {
#pragma unroll
  for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        st_shared_f32(tile + dq_stage_t_off(d0, tq, e2, e1, n, box_bytes), dq[4 * n + 2 * e2 + e1] * scale);
}

// dK (times scale) and dV of this thread's keys jr, jr + 8: dk[sl][4n + e] is key jr + 8(e >> 1), column
// 64 sl + 8n + 2tq + (e & 1).
template <typename T, int SLABS>
__device__ __forceinline__ void store_dk_dv(const AttentionParams& p, int b, const SeqSpan& sq, int hk, int jr, int tq,
                                            const float (&dk)[SLABS][32], const float (&dv)[SLABS][32]) {
  T* gdk = static_cast<T*>(p.dk);
  T* gdv = static_cast<T*>(p.dv);
#pragma unroll
  for (int e2 = 0; e2 < 2; ++e2) {
    const int j = jr + 8 * e2;
    if (j >= sq.nk) continue;
    const int64_t ok = row_offset(p, b, sq.k0, j, hk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
    const int64_t ov = row_offset(p, b, sq.k0, j, hk, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int c = sl * 64 + 8 * n + 2 * tq;  // head dims are multiples of 8: pairs are in or out together
        const int k = 4 * n + 2 * e2;
        if (c < p.head_dim)
          *reinterpret_cast<uint32_t*>(gdk + ok + c) = Elem<T>::pack(dk[sl][k] * p.scale, dk[sl][k + 1] * p.scale);
        if (c < p.head_dim_v) *reinterpret_cast<uint32_t*>(gdv + ov + c) = Elem<T>::pack(dv[sl][k], dv[sl][k + 1]);
      }
  }
}

// The same added into the fp32 accumulators (KArgs::dkv_accum: dK [rows_k, Hkv, D], then dV [rows_k, Hkv, Dv]),
// where several tiles share out a kv head's query heads (head splits) and each adds its part: one 8-byte
// atomic add per pair of columns.
template <int SLABS>
__device__ __forceinline__ void add_dk_dv(const KArgs& a, int b, const SeqSpan& sq, int hk, int jr, int tq,
                                          const float (&dk)[SLABS][32], const float (&dv)[SLABS][32]) {
  const AttentionParams& p = a.p;
  float* gdk = a.dkv_accum;
  float* gdv = a.dkv_accum + flat_key_rows(p) * p.heads_kv * p.head_dim;
#pragma unroll
  for (int e2 = 0; e2 < 2; ++e2) {
    const int j = jr + 8 * e2;
    if (j >= sq.nk) continue;
    const int64_t row = (flat_key_row0(p, b, sq.k0) + j) * p.heads_kv + hk;
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int c = sl * 64 + 8 * n + 2 * tq;
        const int k = 4 * n + 2 * e2;
        if (c < p.head_dim)
          atomicAdd(reinterpret_cast<float2*>(gdk + row * p.head_dim + c), make_float2(dk[sl][k] * p.scale, dk[sl][k + 1] * p.scale));
        if (c < p.head_dim_v)
          atomicAdd(reinterpret_cast<float2*>(gdv + row * p.head_dim_v + c), make_float2(dv[sl][k], dv[sl][k + 1]));
      }
  }
}

// The same through shared memory: a warpgroup's 64 keys of dK (times scale) and dV staged as 64-row slabs
// (k_rows / v_rows: their first bytes, k_slab / v_slab bytes between slabs; free once every GEMM and copy
// that reads them has completed, which the caller ensures), then one thread's TMA stores, which clip rows
// past the keys and columns past the head dims. lt: the thread's index in its warpgroup; bar: a named
// barrier of the warpgroup. One stmatrix per 8 x 8 pairs and a few bulk copies, where per-thread stores
// issue 64 4-byte stores per thread at d128.
// Returns once the copies have read the slabs (lt 0 waits; the others may run on: the caller syncs the
// warpgroup before writing there again).
template <typename T, int SLABS>
__device__ __forceinline__ void store_dk_dv_tma(const BwdMaps& maps, uint32_t k_rows, uint32_t k_slab, uint32_t v_rows,
                                                uint32_t v_slab, int warp, int lane, int lt, int bar,
                                                const float (&dk)[SLABS][32], const float (&dv)[SLABS][32],
                                                float scale, int krow, int hk, int bcoord) {
  const float sk[2] = {scale, scale}, one[2] = {1.f, 1.f};
  stage_acc_tile<T, SLABS>(k_rows, k_slab, warp, lane, dk, sk);
  stage_acc_tile<T, SLABS>(v_rows, v_slab, warp, lane, dv, one);
  fence_proxy_async();  // the stores become visible to the copy engine
  named_sync(bar, 128);
  if (lt == 0) {
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) {
      tma_store_4d(&maps.dk, k_rows + sl * k_slab, sl * 64, krow, hk, bcoord);
      tma_store_4d(&maps.dv, v_rows + sl * v_slab, sl * 64, krow, hk, bcoord);
    }
    bulk_commit();
    bulk_wait_read<0>();  // the CTA's shared memory must outlive the copies' reads
  }
}

}  // namespace tessera::attention::cuda::sm90
