// Hopper backward (sm_90a), warp-specialised: the pair kernel's steps
// (bwd_sm90_kernel.cuh: two consumer warpgroups of 64 keys each, one CTA per
// 128-key tile) with a third, producer warpgroup that takes every copy off the
// consumers, as cuDNN's 384-thread backward does:
//   warp 0 (one thread)  K, V, then each query block's Q / dO / LSE / D into a
//                        two-stage ring; a stage is refilled once both
//                        consumers' last GEMM reading it is done (qfree mbarrier,
//                        one arrival per consumer thread)
//   warp 1 + c           the dQ tile consumer c stages per block: waits for it
//                        (named barrier dq_full), issues the TMA reduce-adds,
//                        waits for them to read it, then hands it back
//                        (dq_empty)
// so a consumer's dQ epilogue is its stores, a fence and a non-blocking
// arrival, where the pair kernel's waited on the previous reduce-adds and met
// its warpgroup twice; and no consumer thread issues loads between the
// per-block barrier and the dQ GEMM. Registers move to the consumers
// (setmaxnreg: 240 each, the producer 24).
#pragma once

#include "bwd_sm90_kernel.cuh"

namespace tessera::attention::cuda::sm90 {

template <typename T, int D_, int BM_>
struct BwdSm90WsTraits : BwdSm90Traits<T, D_, BM_> {
  using Base = BwdSm90Traits<T, D_, BM_>;
  static constexpr int NTHREADS = 384;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static_assert(128 * (kProducerRegs + 2 * kConsumerRegs) <= 65536, "register split exceeds the SM");
  // The pair kernel's layout; mbarriers K, V, Q full[2], Q free[2].
  static constexpr int kSmem = Base::kBar + 6 * 8 + 1024;
  static_assert(kSmem <= 227 * 1024, "shared memory exceeds 227 KB");
  // Named barriers (0 is __syncthreads): both consumers once per block, a consumer's warpgroup, and the
  // dQ tile handshakes of consumer c with its producer warp (128 + 32 threads).
  static constexpr int kBarCons = 1, kBarWg = 2, kBarDqFull = 4, kBarDqEmpty = 6;
};

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, 1)
    bwd_sm90_ws_kernel(const __grid_constant__ KArgs a, const __grid_constant__ BwdMaps maps, int rotate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS, QSLABS = Tr::QSLABS;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  uint8_t* base = smem + (s0 - smem_u32(smem));
  const uint32_t sK = s0, sV = s0 + Tr::kKBytes;
  float* sL = reinterpret_cast<float*>(base + Tr::kSL);   // [2][BM] lse * log2 e of the block's rows
  float* sDv = reinterpret_cast<float*>(base + Tr::kSD);  // [2][BM] D = rowsum(dO*O) - dlse
  const uint32_t bar_k = s0 + Tr::kBar, bar_v = bar_k + 8, bar_q = bar_k + 16, bar_qfree = bar_k + 32;

  const AttentionParams& p = a.p;
  const int nkb = (p.seqlen_k + BN - 1) / BN;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, lt = tid & 127;
  const bool do_dq = a.dq_accum != nullptr;
  const BwdTile<BM> tl = bwd_tile<BM, BN>(p, blockIdx.x, nkb, rotate);
  if (!tl.valid) return;  // (uniform across the CTA)
  const int iters = tl.iters(), bcoord = p.cu_seqlens_q ? 0 : tl.b;

  if (tid == 0) {
    mbar_init(bar_k, 1);
    mbar_init(bar_v, 1);
    for (int s = 0; s < 2; ++s) {
      mbar_init(bar_q + 8 * s, 1);
      mbar_init(bar_qfree + 8 * s, 256);  // every consumer thread (each read the stage's LSE / D)
    }
    fence_mbar_init();
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer ----
    setmaxnreg_dec<Tr::kProducerRegs>();
    if (warp == 0) {
      if (lane == 0 && iters > 0) {
        auto load_rows = [&](const CUtensorMap* map, uint32_t bar, uint32_t dst) {
          mbar_expect_tx(bar, BN * SLABS * 128);
#pragma unroll
          for (int sl = 0; sl < SLABS; ++sl)
            tma_load_4d(dst + sl * (BN * 128), map, bar, sl * 64, static_cast<int>(tl.sq.k0) + tl.j0, tl.hk, bcoord);
        };
        load_rows(&maps.k, bar_k, sK);
        load_rows(&maps.v, bar_v, sV);
        for (int it = 0; it < iters; ++it) {
          const int buf = it & 1;
          if (it >= 2) mbar_wait_sleepy(bar_qfree + 8 * buf, ((it - 2) >> 1) & 1);
          load_q_block<BM, SLABS>(a, maps, bar_q + 8 * buf, s0 + Tr::kSQ + buf * Tr::kQBytes,
                                  s0 + Tr::kSdO + buf * Tr::kQBytes, sL + buf * BM, sDv + buf * BM, tl.b, tl.sq,
                                  tl.head(it), tl.row0(it), bcoord);
        }
      }
    } else if (warp <= 2) {
      // dQ of consumer c: its tile starts free; per block, reduce-add it once staged, hand it back once read
      const int c = warp - 1;
      const int qs = QSLABS == 2 ? c : 0, cs = SLABS == 2 ? c : 0;
      const uint32_t dq_tile = s0 + Tr::kSdQ + c * Tr::kDQBytes;
      named_arrive(Tr::kBarDqEmpty + c, 160);
      for (int it = 0; do_dq && it < iters; ++it) {
        named_sync(Tr::kBarDqFull + c, 160);
        if (lane == 0) {
          const int grow = static_cast<int>(flat_row0(p, tl.b, tl.sq.q0)) + tl.row0(it) + qs * 64;
#pragma unroll
          for (int bx = 0; bx < 2; ++bx)
            if (cs * 64 + 32 * bx < a.dq_accum_d)
              tma_reduce_add_3d(&maps.dq, dq_tile + bx * Tr::kDQBoxBytes, cs * 64 + 32 * bx, tl.head(it), grow);
          bulk_commit();
          bulk_wait_read<0>();
        }
        __syncwarp();
        named_arrive(Tr::kBarDqEmpty + c, 160);
      }
      if (lane == 0) bulk_wait<0>();  // the reduce-adds are done before the CTA exits
    }
    return;
  }

  // ---- consumers: c owns keys j0 + 64c .. + 63 ----
  setmaxnreg_inc<Tr::kConsumerRegs>();
  const int c = wg - 1, g = lane >> 2, tq = lane & 3;
  const int qs = QSLABS == 2 ? c : 0, cs = SLABS == 2 ? c : 0;  // this consumer's dQ tile
  const uint32_t dq_tile = s0 + Tr::kSdQ + c * Tr::kDQBytes;
  const int j0 = tl.j0, nq = tl.sq.nq, nk = tl.sq.nk;
  const int jr = j0 + c * 64 + warp * 16 + g;  // this thread's keys: jr and jr + 8
  const uint32_t k_rows = sK + c * 64 * 128, v_rows = sV + c * 64 * 128;
  if (iters > 0) {
    mbar_wait(bar_k, 0);
    mbar_wait(bar_v, 0);
  }

  float dk[SLABS][32], dv[SLABS][32];
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
    for (int e = 0; e < 32; ++e) dk[sl][e] = dv[sl][e] = 0.f;

  for (int it = 0; it < iters; ++it) {
    const int buf = it & 1;
    mbar_wait(bar_q + 8 * buf, (it >> 1) & 1);  // Q, dO, LSE, D of this block have landed
    const uint32_t cQ = s0 + Tr::kSQ + buf * Tr::kQBytes, cdO = s0 + Tr::kSdO + buf * Tr::kQBytes;
    const float* cL = sL + buf * BM;
    const float* cD = sDv + buf * BM;
    const int i0 = tl.row0(it);

    float s[BM / 2], dp[BM / 2];
    uint32_t pa[BM / 16][4];
    scores_t<T, D, BM, BN>(s, dp, pa, k_rows, v_rows, cQ, cdO, a, cL, i0, j0, nq, nk, jr, tq, [] {});
    dscores_t<BM>(dp, s, cD, tq);
    uint32_t dsa[BM / 16][4];
    acc_to_a<T, BM>(dsa, dp);
    const uint32_t sdS = s0 + Tr::kSdS + buf * Tr::kDSBytes;
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      stmatrix_x4(sdS + ds_stm_off(c, warp, lane, kk), dsa[kk][0], dsa[kk][1], dsa[kk][2], dsa[kk][3]);
    fence_proxy_async();  // the generic-proxy stores become visible to wgmma

    wgmma_fence();
    gemm_rs_mn(dv, pa, cdO, BM * 128, Tag<T>{});
    wgmma_commit();

    // Both consumers' dS^T are in shared memory (and both are past block it - 1's dQ GEMM, which read
    // the other dS^T buffer).
    named_sync(Tr::kBarCons, 256);

    float dq[32];
    wgmma_fence();
    {
      const SmemDesc dds = smem_desc(sdS + qs * (BN * 128), 1024, 1024), dks = smem_desc(sK + cs * (BN * 128), 1024, 1024);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        wgmma_ss_mn(dq, dds.at(kk * 16 * 128), dks.at(kk * 16 * 128), kk > 0 ? 1 : 0, Tag<T>{});
    }
    wgmma_commit();
    gemm_rs_mn(dk, dsa, cQ, BM * 128, Tag<T>{});
    wgmma_commit();
    wgmma_wait<1>();  // dV and dQ done, dK in flight

    if (do_dq) {
      fence_regs(dq);
      named_sync(Tr::kBarDqEmpty + c, 160);  // the previous block's reduce-adds have read the tile
      stage_dq_tile(dq_tile, Tr::kDQBoxBytes, warp * 16 + g, tq, dq, p.scale);
      fence_proxy_async();  // the stores become visible to the copy engine
      named_arrive(Tr::kBarDqFull + c, 160);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) {
      fence_regs(dk[sl]);
      fence_regs(dv[sl]);
    }
    mbar_arrive(bar_qfree + 8 * buf);  // this thread's reads and GEMMs are done with the stage
  }

  // Both consumers' dQ GEMMs are done with every dS^T; the last reduce-adds have read the dQ tile.
  named_sync(Tr::kBarCons, 256);
  named_sync(Tr::kBarDqEmpty + c, 160);
  if (maps.kv_store) {
    // dK in this consumer's halves of the two dS^T buffers (slab sl in buffer sl), dV in its dQ tile
    store_dk_dv_tma<T, SLABS>(maps, s0 + Tr::kSdS + c * 64 * 128, Tr::kDSBytes, dq_tile, Tr::kDQBoxBytes, warp,
                              lane, lt, Tr::kBarWg + c, dk, dv, p.scale, static_cast<int>(tl.sq.k0) + j0 + c * 64,
                              tl.hk, bcoord);
    if (lt == 0) bulk_wait<0>();
  } else {
    store_dk_dv<T, SLABS>(p, tl.b, tl.sq, tl.hk, jr, tq, dk, dv);
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
