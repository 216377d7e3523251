// Hopper backward (sm_90a): the portable backward's algorithm (bwd_kernel.cuh)
// on wgmma and TMA. One CTA per (128-key block, kv head, sequence), two
// warpgroups owning 64 keys each. K and V stay resident in shared memory; the
// CTA walks the query blocks (and GQA heads) that see its keys, with Q, dO and
// their rows' LSE / D (the padded row statistics of the preprocess pass,
// KArgs::row_stats) double-buffered by TMA on one mbarrier per buffer: thread 0
// loads block it + 1 once both warpgroups are past block it - 1. Per query
// block, in a warpgroup (64 keys x BM queries):
//   S^T = K Q^T and dP^T = V dO^T          wgmma, both operands in shared memory
//   P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D)   on the accumulators; the
//                                          exponentials overlap the dP^T GEMM
//   dV += P^T dO                           wgmma, P^T from registers
//   dS^T -> shared; the warpgroups meet (the CTA's only barrier per block)
//   dQ = dS K, dK += dS^T Q                wgmma; dS read MN-major (transposed)
// dQ goes through shared memory into the fp32 workspace by two TMA reduce-adds
// per warpgroup while dK's GEMM runs, so the warpgroups never wait on atomics
// (deterministic mode drops dQ here: the query-side kernel computes it). dK and
// dV stay in registers until the end. Calls with bias, ALiBi or dropout take
// the portable kernel (sm90_eligible in cuda_backend.cu).
#pragma once

#include "mma.cuh"
#include "score_mod.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace tessera::attention::cuda::sm90 {

// Q, K, V, dO of one call as 4-D tensor maps, and the dQ accumulator (inst_sm90_bwd.cu).
struct BwdMaps {
  CUtensorMap q, k, v, dout;
  CUtensorMap dq;  // the fp32 dQ accumulator (map_dq_accum), when there is one
};

template <typename T, int D_, int BM_>
struct BwdSm90Traits {
  using Elt = T;
  static constexpr int D = D_, BM = BM_, BN = 128, NTHREADS = 256;
  static constexpr int SLABS = D / 64;    // 64-column slabs of a Q / K / V / dO row
  static constexpr int QSLABS = BM / 64;  // 64-query slabs of a dS^T row
  // dQ (BM x D) is two 64 x 64 tiles, one per warpgroup: d128 with BM 64, d64 with BM 128.
  static_assert(SLABS * QSLABS == 2, "dQ splits into one 64 x 64 tile per warpgroup");
  static constexpr int kKBytes = BN * D * 2, kQBytes = BM * D * 2, kDSBytes = BN * BM * 2;
  // A warpgroup's 64 x 64 fp32 dQ tile in shared memory: two TMA boxes of 64 rows x 32 columns
  // (128 bytes, 128-byte swizzled, 1024-byte aligned).
  static constexpr int kDQBoxBytes = 64 * 128, kDQBytes = 2 * kDQBoxBytes;
  // K, V, Q[2], dO[2], dS^T[2] (all 1024-byte aligned), dQ[2 warpgroups], LSE[2][BM], D[2][BM],
  // mbarriers kv, q[2]. dS^T is double-buffered: a warpgroup may store block it + 1's while the
  // other still reads block it's in its dQ GEMM (the warpgroups meet once per block).
  static constexpr int kSQ = 2 * kKBytes, kSdO = kSQ + 2 * kQBytes, kSdS = kSdO + 2 * kQBytes;
  static constexpr int kSdQ = kSdS + 2 * kDSBytes;
  static constexpr int kSL = kSdQ + 2 * kDQBytes, kSD = kSL + 2 * BM * 4, kBar = kSD + 2 * BM * 4;
  static constexpr int kSmem = kBar + 3 * 8 + 1024;  // + slack to align to 1024
};

__device__ __forceinline__ void st_shared_f2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// dS^T in shared memory: rows are the CTA's 128 keys, columns the block's queries in 64-query slabs of
// 128-byte-swizzled rows (the layout wgmma reads MN-major for dQ). ds_word_off: the byte offset of A-operand
// word dsa[kk][r] of a thread (warpgroup wg, warp, lane): key row wg 64 + 16 warp + g + 8 (r & 1), query
// chunk 2 kk + (r >> 1), 4 tq bytes in. ds_stm_off: the row address lane l gives stmatrix.x4 for step kk,
// whose matrices are exactly the words r = 0..3 (rows 8 (i & 1).., chunk 2 kk + (i >> 1)): one store for
// four (tests/gpu/bwd_swz_test.cu emulates it against ds_word_off).
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

// The m64nNk16 accumulator s[4n + e] (row g + 8(e >> 1), column 8n + 2tq + (e & 1))
// as A operands of 64 x 16 steps: columns 16kk.. are the groups n = 2kk, 2kk + 1.
template <typename T, int NCOL>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[NCOL / 16][4], const float (&s)[NCOL / 2]) {
#pragma unroll
  for (int kk = 0; kk < NCOL / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[kk][r] = Elem<T>::pack(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, 1)
    bwd_sm90_kernel(const __grid_constant__ KArgs a, const __grid_constant__ BwdMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS, QSLABS = Tr::QSLABS;
  constexpr int NQ = BM / 8;  // n8 query groups of an S^T row
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  uint8_t* base = smem + (s0 - smem_u32(smem));
  const uint32_t sK = s0, sV = s0 + Tr::kKBytes;
  float* sL = reinterpret_cast<float*>(base + Tr::kSL);   // [2][BM] lse * log2 e of the block's rows
  float* sDv = reinterpret_cast<float*>(base + Tr::kSD);  // [2][BM] D = rowsum(dO*O) - dlse
  const uint32_t bar_kv = s0 + Tr::kBar, bar_q = bar_kv + 8;  // bar_q + 8 * buf

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * BN;
  const Seq sq = seq_of(p, b);
  if (j0 >= sq.nk) return;
  const int nq = sq.nq, nk = sq.nk;
  const int G = p.heads_q / p.heads_kv;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  int i_lo, i_hi;
  rows_seeing(p, nq, nk, j0, min(j0 + BN, nk), i_lo, i_hi);
  const int qb_begin = i_lo / BM;
  const int nqb = i_hi > i_lo ? (i_hi + BM - 1) / BM - qb_begin : 0;
  const int iters = G * nqb;

  // Tensor-map coordinates: varlen rows are global rows of a batch of one.
  const int bcoord = p.cu_seqlens_q ? 0 : b;
  const int qrow0 = static_cast<int>(sq.q0), krow0 = static_cast<int>(sq.k0);
  auto head_of = [&](int it) { return hk * G + it / nqb; };
  auto row0_of = [&](int it) { return (qb_begin + it % nqb) * BM; };

  // Q, dO and the rows' LSE / D of iteration it into buffer it & 1 (one thread).
  auto issue_q = [&](int it) {
    const int buf = it & 1, h = head_of(it), i0 = row0_of(it);
    const uint32_t bar = bar_q + 8 * buf;
    const uint32_t cq = s0 + Tr::kSQ + buf * Tr::kQBytes, cdo = s0 + Tr::kSdO + buf * Tr::kQBytes;
    mbar_expect_tx(bar, 2 * Tr::kQBytes + 2 * BM * 4);
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) {
      tma_load_4d(cq + sl * (BM * 128), &maps.q, bar, sl * 64, qrow0 + i0, h, bcoord);
      tma_load_4d(cdo + sl * (BM * 128), &maps.dout, bar, sl * 64, qrow0 + i0, h, bcoord);
    }
    const float* st = a.row_stats + stat_idx(p, b, h, sq.q0, i0);
    bulk_load(smem_u32(sL + buf * BM), st, BM * 4, bar);
    bulk_load(smem_u32(sDv + buf * BM), st + a.stat_plane, BM * 4, bar);
  };

  if (tid == 0) {
    mbar_init(bar_kv, 1);
    mbar_init(bar_q, 1);
    mbar_init(bar_q + 8, 1);
    fence_mbar_init();
  }
  __syncthreads();
  if (iters > 0) {
    if (tid == 0) {
      mbar_expect_tx(bar_kv, 2 * Tr::kKBytes);
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl) {
        tma_load_4d(sK + sl * (BN * 128), &maps.k, bar_kv, sl * 64, krow0 + j0, hk, bcoord);
        tma_load_4d(sV + sl * (BN * 128), &maps.v, bar_kv, sl * 64, krow0 + j0, hk, bcoord);
      }
      issue_q(0);
    }
    mbar_wait(bar_kv, 0);
  }

  float dk[SLABS][32], dv[SLABS][32];
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
    for (int e = 0; e < 32; ++e) dk[sl][e] = dv[sl][e] = 0.f;
  const bool do_dq = a.dq_accum != nullptr;
  const uint32_t k_rows = sK + wg * 64 * 128, v_rows = sV + wg * 64 * 128;  // this warpgroup's 64 keys
  const int jr = j0 + wg * 64 + warp * 16 + g;  // this thread's keys: jr and jr + 8

  for (int it = 0; it < iters; ++it) {
    const int buf = it & 1, h = head_of(it), i0 = row0_of(it);
    mbar_wait(bar_q + 8 * buf, (it >> 1) & 1);  // Q, dO, LSE, D of this block have landed
    const uint32_t cQ = s0 + Tr::kSQ + buf * Tr::kQBytes, cdO = s0 + Tr::kSdO + buf * Tr::kQBytes;
    const float* cL = sL + buf * BM;
    const float* cD = sDv + buf * BM;

    // S^T = K Q^T, dP^T = V dO^T, committed as two groups.
    float s[BM / 2], dp[BM / 2];
    wgmma_fence();
    gemm_ss_kmajor<D / 16>(s, k_rows, BN * 128, cQ, BM * 128, Tag<T>{});
    wgmma_commit();
    gemm_ss_kmajor<D / 16>(dp, v_rows, BN * 128, cdO, BM * 128, Tag<T>{});
    wgmma_commit();
    wgmma_wait<1>();
    fence_regs(s);

    // P^T while the tensor cores run dP^T. s[4n + e]: key jr + 8(e >> 1), query i0 + 8n + 2tq + (e & 1).
    // A block every one of whose rows sees all 128 keys needs no per-element mask.
    const KeyRange kf = row_keys(p, i0, nq, nk), kl = row_keys(p, min(i0 + BM, nq) - 1, nq, nk);
    const bool full = i0 + BM <= nq && j0 >= kl.lo && j0 + BN <= kf.hi;
    if (full) {  // every row in the sequence, every key visible: no masks
#pragma unroll
      for (int n = 0; n < NQ; ++n) {
        const float2 lv = *reinterpret_cast<const float2*>(cL + 8 * n + 2 * tq);
        const float l2[2] = {lv.x, lv.y};
#pragma unroll
        for (int e = 0; e < 4; ++e) s[4 * n + e] = fast_exp2(fmaf(s[4 * n + e], a.scale_log2, -l2[e & 1]));
      }
    } else {
#pragma unroll
      for (int n = 0; n < NQ; ++n) {
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
            const float pr = fast_exp2(fmaf(s[k], a.scale_log2, -l2));
            s[k] = (j >= kr.lo && j < kr.hi) ? pr : 0.f;
          }
        }
      }
    }
    uint32_t pa[BM / 16][4];
    acc_to_a<T, BM>(pa, s);

    wgmma_wait<0>();
    fence_regs(dp);
    // dS^T = P^T (dP^T - D), packed as A operands and stored to shared memory for dQ.
#pragma unroll
    for (int n = 0; n < NQ; ++n) {
      const float2 dd = *reinterpret_cast<const float2*>(cD + 8 * n + 2 * tq);
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[4 * n + e] = s[4 * n + e] * (dp[4 * n + e] - ((e & 1) ? dd.y : dd.x));
    }
    uint32_t dsa[BM / 16][4];
    acc_to_a<T, BM>(dsa, dp);
    // dS^T to shared memory for dQ (also in deterministic mode, where the dQ GEMM below runs
    // unused: a conditional wgmma costs more registers than the GEMM costs time there).
    // dS^T rows are keys (wg * 64 + 16 warp + g + 8 r), columns queries (slab n / 8, chunk n % 8).
    const uint32_t sdS = s0 + Tr::kSdS + buf * Tr::kDSBytes;
    {
      static_assert(BN == 128, "ds_stm_off: 128 key rows per slab");
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)  // (one stmatrix.x4 for the four words of a step: ds_stm_off)
        stmatrix_x4(sdS + ds_stm_off(wg, warp, lane, kk), dsa[kk][0], dsa[kk][1], dsa[kk][2], dsa[kk][3]);
      fence_proxy_async();  // the generic-proxy stores become visible to wgmma
    }

    // dV += P^T dO: queries are the K dimension, dO read MN-major. It needs nothing of the
    // other warpgroup, so it goes to the tensor cores before the barrier.
    wgmma_fence();
    gemm_rs_mn(dv, pa, cdO, BM * 128, Tag<T>{});
    wgmma_commit();

    // Both warpgroups' dS^T are in shared memory, and both are past block it - 1: its Q / dO /
    // LSE / D buffer is free for block it + 1 (dS^T is double-buffered, see the traits).
    __syncthreads();
    if (tid == 0 && it + 1 < iters) issue_q(it + 1);

    // This warpgroup's 64 x 64 tile of dQ = dS K (query slab qs, column slab cs; keys are the K
    // dimension), then dK += dS^T Q; dQ's epilogue runs while dK's GEMM does.
    const int qs = QSLABS == 2 ? wg : 0, cs = SLABS == 2 ? wg : 0;
    float dq[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_ss_mn(dq, desc_sw128(sdS + qs * (BN * 128) + kk * 16 * 128, 1024, 1024),
                  desc_sw128(sK + cs * (BN * 128) + kk * 16 * 128, 1024, 1024), kk > 0 ? 1 : 0, Tag<T>{});
    wgmma_commit();
    gemm_rs_mn(dk, dsa, cQ, BM * 128, Tag<T>{});
    wgmma_commit();
    wgmma_wait<1>();  // dV and dQ done, dK in flight

    if (do_dq) {
      fence_regs(dq);
      // The tile goes to shared memory (scaled, in the boxes' swizzled layout), then one thread
      // hands both boxes to the copy engine's reduce-add; the previous block's reduces must have
      // read the tile first. Box rows past the sequence hold dQ = 0 (their P is 0): adding them
      // into the next sequence's rows changes nothing.
      const int lt = tid & 127;
      const uint32_t tile = s0 + Tr::kSdQ + wg * Tr::kDQBytes;
      if (lt == 0) bulk_wait_read<0>();
      named_sync(1 + wg, 128);
      const int r0 = warp * 16 + g;  // rows r0 and r0 + 8 (same swizzle phase r0 & 7)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int chunk = (2 * (n & 3) + (tq >> 1)) ^ (r0 & 7);
        const uint32_t at = tile + (n >> 2) * Tr::kDQBoxBytes + r0 * 128 + chunk * 16 + 8 * (tq & 1);
        st_shared_f2(at, dq[4 * n] * p.scale, dq[4 * n + 1] * p.scale);
        st_shared_f2(at + 8 * 128, dq[4 * n + 2] * p.scale, dq[4 * n + 3] * p.scale);
      }
      fence_proxy_async();  // the stores become visible to the copy engine
      named_sync(1 + wg, 128);
      if (lt == 0) {
        const int grow = static_cast<int>(flat_row0(p, b, sq.q0)) + i0 + qs * 64;
#pragma unroll
        for (int bx = 0; bx < 2; ++bx)
          if (cs * 64 + 32 * bx < a.dq_accum_d)
            tma_reduce_add_3d(&maps.dq, tile + bx * Tr::kDQBoxBytes, cs * 64 + 32 * bx, h, grow);
        bulk_commit();
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) {
      fence_regs(dk[sl]);
      fence_regs(dv[sl]);
    }
  }

  if (do_dq && (tid & 127) == 0) bulk_wait<0>();  // the last reduces are done before the CTA exits

  // dK (scaled), dV. dk[sl][4n + e]: key jr + 8(e >> 1), column 64 sl + 8n + 2tq + (e & 1).
  T* gdk = static_cast<T*>(p.dk);
  T* gdv = static_cast<T*>(p.dv);
#pragma unroll
  for (int e2 = 0; e2 < 2; ++e2) {
    const int j = jr + 8 * e2;
    if (j >= nk) continue;
    const int64_t ok = row_off(p, b, sq.k0, j, hk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
    const int64_t ov = row_off(p, b, sq.k0, j, hk, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
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
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
