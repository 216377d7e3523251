// Hopper backward (sm_90a), one warpgroup per CTA: the same steps as
// bwd_sm90_kernel.cuh on 64 keys instead of 128, with nothing shared between
// warpgroups, so two CTAs fit an SM and run out of step: one CTA's
// exponentials, dS^T stores and dQ epilogue run while the other's GEMMs hold
// the tensor cores (the two-warpgroup kernel's warpgroups meet once per query
// block, so both wait on the same phases). cuDNN's backward kernel names say
// 64 x 64 tiles and four warps. Taken on short rows only (dispatch.cu): on
// long rows every 64-key CTA loads all of Q / dO and reduce-adds a full dQ
// partial, twice the pair's L2 traffic.
//
// Per CTA: K and V of 64 keys resident; Q, dO and the rows' LSE / D of the
// query blocks (BM = 64) in a two-deep TMA ring on one mbarrier per stage.
// Per query block: S^T, dP^T (SS wgmma), P^T and dS^T on the accumulators,
// dS^T to shared memory, then dV += P^T dO, dK += dS^T Q (RS) and
// dQ = dS K over this CTA's 64 keys (SS, both MN-major), a full BM x D
// partial. Once those GEMMs are done the stage's Q and dO are dead, so the
// dQ partial is staged in their place (BM x D fp32 is exactly Q + dO in
// 16-bit) and added into the fp32 accumulator by TMA reduce-adds; the stage
// is refilled (block it + 2) after the next block's S^T / dP^T have landed,
// by which time those reduce-adds have read it. The dQ accumulator is
// required (the deterministic mode keeps the two-warpgroup kernel).
#pragma once

#include "kernels/sm90/bwd_sm90_steps.cuh"

namespace tessera::attention::cuda::sm90 {

template <typename T, int D_, int MINB_ = 2>
struct BwdSm90WgTraits {
  using Elt = T;
  static constexpr int D = D_, BM = 64, BN = 64, NTHREADS = 128, MINB = MINB_, STAGES = 2;
  static constexpr int SLABS = D / 64;  // 64-column slabs of a Q / K / V / dO row, and 64 x 64 dQ tiles
  static constexpr int kKBytes = BN * D * 2, kQBytes = BM * D * 2, kDSBytes = BN * BM * 2;
  static constexpr int kDQBoxBytes = 64 * 128;  // a TMA box of 64 rows x 32 fp32 columns
  static_assert(2 * SLABS * kDQBoxBytes == 2 * kQBytes, "a BM x D fp32 dQ partial fills a stage's Q and dO");
  // K, V, then per stage Q and dO side by side (the dQ staging), dS^T, LSE[2][BM], D[2][BM], mbarriers
  // kv, full[2]; all tiles 1024-byte aligned.
  static constexpr int kSQ = 2 * kKBytes, kStage = 2 * kQBytes, kSdS = kSQ + STAGES * kStage;
  static constexpr int kSL = kSdS + kDSBytes, kSD = kSL + STAGES * BM * 4, kBar = kSD + STAGES * BM * 4;
  static constexpr int kSmem = kBar + (1 + STAGES) * 8 + 1024;  // + slack to align to 1024
  static_assert(MINB * (kSmem + 1024) <= 228 * 1024, "MINB CTAs' shared memory exceeds the SM");
};

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, Tr::MINB)
    bwd_sm90_wg_kernel(const __grid_constant__ KArgs a, const __grid_constant__ BwdMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  uint8_t* base = smem + (s0 - smem_u32(smem));
  const uint32_t sK = s0, sV = s0 + Tr::kKBytes, sdS = s0 + Tr::kSdS;
  float* sL = reinterpret_cast<float*>(base + Tr::kSL);   // [2][BM] lse * log2 e of the block's rows
  float* sDv = reinterpret_cast<float*>(base + Tr::kSD);  // [2][BM] D = rowsum(dO*O) - dlse
  const uint32_t bar_kv = s0 + Tr::kBar, bar_q = bar_kv + 8;  // bar_q + 8 * stage

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * BN;
  const SeqSpan sq = seq_span(p, b);
  if (j0 >= sq.nk) return;
  const int nq = sq.nq, nk = sq.nk;
  const int tid = threadIdx.x, warp = warp_uniform(tid >> 5), lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  const QueryWalk<BM> walk = query_walk<BM>(p, nq, nk, j0, min(j0 + BN, nk), hk);
  const int iters = walk.iters();

  const int bcoord = p.cu_seqlens_q ? 0 : b;  // (tensor-map coordinates: load_kv)
  auto stage = [&](int it) { return s0 + Tr::kSQ + (it & 1) * Tr::kStage; };  // Q, then dO at + kQBytes

  // Q, dO and the rows' LSE / D of block it into stage it & 1 (one thread).
  auto issue_q = [&](int it) {
    const int st = it & 1;
    load_q_block<BM, SLABS>(a, maps, bar_q + 8 * st, stage(it), stage(it) + Tr::kQBytes, sL + st * BM, sDv + st * BM,
                            b, sq, walk.head(it), walk.row0(it), bcoord);
  };

  init_bwd_barriers(bar_kv);
  if (iters > 0) {
    if (tid == 0) {
      load_kv<BN, SLABS>(maps, bar_kv, sK, sV, static_cast<int>(sq.k0) + j0, hk, bcoord);
      issue_q(0);
      if (iters > 1) issue_q(1);
    }
    mbar_wait(bar_kv, 0);
  }

  float dk[SLABS][32], dv[SLABS][32];
  zero_dk_dv(dk, dv);
  const int jr = j0 + warp * 16 + g;  // this thread's keys: jr and jr + 8
  const int64_t grow0 = flat_row0(p, b, sq.q0);

  for (int it = 0; it < iters; ++it) {
    const int st = it & 1, h = walk.head(it), i0 = walk.row0(it);
    mbar_wait(bar_q + 8 * st, (it >> 1) & 1);  // Q, dO, LSE, D of this block have landed
    const uint32_t cQ = stage(it), cdO = cQ + Tr::kQBytes;
    const float* cL = sL + st * BM;
    const float* cD = sDv + st * BM;

    // S^T, dP^T; P^T while the tensor cores run dP^T.
    float s[BM / 2], dp[BM / 2];
    uint32_t pa[BM / 16][4];
    scores_t<T, D, BM, BN>(s, dp, pa, sK, sV, cQ, cdO, a, cL, i0, j0, nq, nk, jr, tq, [] {});

    // Block it + 1 goes into the other stage: block it - 1's dQ reduce-adds (issued at its end, an
    // S^T / dP^T pair ago) must have read it first. No wgmma is in flight here.
    if (tid == 0 && it >= 1 && it + 1 < iters) {
      bulk_wait_read<0>();
      issue_q(it + 1);
    }

    dscores_t<BM>(dp, s, cD, tq);
    uint32_t dsa[BM / 16][4];
    acc_to_a<T, BM>(dsa, dp);
    store_ds_t<BM>(sdS, 0, warp, lane, dsa);  // (one 64-query slab in the wg kernel: the slab stride never enters)
    named_sync(1, 128);   // every warp's dS^T rows are in

    // dV += P^T dO, dK += dS^T Q (queries are the K dimension), dQ = dS K (keys are; one 64 x 64 tile
    // per 64-column slab of K).
    float dq[SLABS][32];
    wgmma_fence();
    gemm_rs_mn(dv, pa, cdO, BM * 128, Tag<T>{});
    gemm_rs_mn(dk, dsa, cQ, BM * 128, Tag<T>{});
    {  // (two slabs of K: one m64n128k16 per step, the slab stride as the leading byte offset)
      const SmemDesc dds = smem_desc(sdS, 1024, 1024), dks = smem_desc(sK, 1024, BN * 128);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        if constexpr (SLABS == 2) wgmma_ss_mn(dq, dds.at(kk * 16 * 128), dks.at(kk * 16 * 128), kk > 0 ? 1 : 0, Tag<T>{});
        else wgmma_ss_mn(dq[0], dds.at(kk * 16 * 128), dks.at(kk * 16 * 128), kk > 0 ? 1 : 0, Tag<T>{});
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) {
      fence_regs(dk[sl]);
      fence_regs(dv[sl]);
      fence_regs(dq[sl]);
    }

    // The dQ partial into the stage's Q / dO (dead now in every warp: the barrier), then one thread
    // hands its boxes to the copy engine. Box rows past the sequence hold dQ = 0 (their P is 0): adding
    // them into the next sequence's rows changes nothing.
    named_sync(1, 128);
#pragma unroll
    for (int cs = 0; cs < SLABS; ++cs)
      stage_dq_tile(cQ + cs * 2 * Tr::kDQBoxBytes, Tr::kDQBoxBytes, warp * 16 + g, tq, dq[cs], p.scale);
    fence_proxy_async();  // the stores become visible to the copy engine
    named_sync(1, 128);
    if (tid == 0) {
      const int grow = static_cast<int>(grow0) + i0;
#pragma unroll
      for (int bx = 0; bx < 2 * SLABS; ++bx)
        if (32 * bx < a.dq_accum_d) tma_reduce_add_3d(&maps.dq, cQ + bx * Tr::kDQBoxBytes, 32 * bx, h, grow);
      bulk_commit();
    }
  }
  if (tid == 0) bulk_wait<0>();  // the last reduces are done before the CTA exits

  if (maps.kv_store) {
    named_sync(1, 128);  // every warp is past its last GEMMs' wait: K and V are free
    store_dk_dv_tma<T, SLABS>(maps, sK, BN * 128, sV, BN * 128, warp, lane, tid, 1, dk, dv, p.scale,
                              static_cast<int>(sq.k0) + j0, hk, bcoord);
  } else {
    store_dk_dv<T, SLABS>(p, b, sq, hk, jr, tq, dk, dv);
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
