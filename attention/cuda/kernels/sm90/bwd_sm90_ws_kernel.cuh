// Hopper backward (sm_90a), warp-specialised, as cuDNN's 384-thread backward:
// two consumer warpgroups of 64 keys each on a 128-key tile (one CTA per
// tile) and a producer warpgroup that takes every copy off them:
//   warp 0 (one thread)  K, V, then each query block's Q / dO / LSE / D into a
//                        two-stage ring; a stage is refilled once both
//                        consumers' GEMMs reading it are done (qfree mbarrier,
//                        one arrival per consumer thread)
//   warp 1               the block's dQ tile once staged (named barrier
//                        dq_full): its TMA reduce-adds, then, once they have
//                        read it, hands the tile back (dq_empty)
// Per query block a consumer runs S^T, dP^T (SS), P^T and dS^T, stores dS^T,
// and runs dV += P^T dO and dK += dS^T Q (RS) before the consumers meet; then
// one of them, by turns (block it: consumer it & 1), runs the whole block's
// dQ = dS K over the 128 keys (m64n128 at d128: the SS GEMM's operands read
// 96 bytes per clock from shared memory instead of the pair kernel's 128 for
// two m64n64 halves) and stages it, while the other starts the next block.
// The turns put the consumers half a step apart, so one's exponentials and
// stores run under the other's GEMMs. Registers move to the consumers
// (setmaxnreg: 240 each, the producer 24). The dQ handshake's named-barrier
// order (including the tile's end, where a wrong order deadlocked) is model-
// checked by scripts/ws_dq_handshake_model.py: re-run it when it changes.
// The default backward on long rows (dispatch.cu).
#pragma once

#include "kernels/sm90/bwd_sm90_kernel.cuh"

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
  // The block's dQ tile (BM x D fp32, 32 KB: the pair kernel's two per-warpgroup tiles) is two 64 x 64
  // sub-tiles kDQBytes apart: column slabs at d128, query slabs at d64.
  static_assert(2 * Base::kDQBytes == Base::BM * D_ * 4, "the dQ tile is two 64 x 64 fp32 sub-tiles");
  // Named barriers (0 is __syncthreads): both consumers once per block, a consumer's warpgroup, and the
  // dQ tile handshakes of the consumer whose turn it is with the producer's dQ warp (128 + 32 threads).
  static constexpr int kBarCons = 1, kBarWg = 2, kBarDqFull = 4, kBarDqEmpty = 5;
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
  const int tid = threadIdx.x, lane = tid & 31, lt = tid & 127;
  const int wg = warp_uniform(tid >> 7), warp = warp_uniform((tid >> 5) & 3);
  const bool do_dq = a.dq_accum != nullptr;
  const BwdTile<BM> tl = bwd_tile<BM, BN>(p, blockIdx.x, nkb, rotate, p.causal ? a.causal_chunk : 0, a.head_splits);
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
        const int krow = static_cast<int>(tl.sq.k0) + tl.j0;
        load_key_rows<BN, SLABS>(&maps.k, bar_k, sK, krow, tl.hk, bcoord);
        load_key_rows<BN, SLABS>(&maps.v, bar_v, sV, krow, tl.hk, bcoord);
        for (int it = 0; it < iters; ++it) {
          const int buf = it & 1;
          if (it >= 2) mbar_wait_sleepy(bar_qfree + 8 * buf, ((it - 2) >> 1) & 1);
          load_q_block<BM, SLABS>(a, maps, bar_q + 8 * buf, s0 + Tr::kSQ + buf * Tr::kQBytes,
                                  s0 + Tr::kSdO + buf * Tr::kQBytes, sL + buf * BM, sDv + buf * BM, tl.b, tl.sq,
                                  tl.head(it), tl.row0(it), bcoord);
        }
      }
    } else if (warp == 1) {
      // The dQ tile starts free; per block, reduce-add it once staged, hand it back once read.
      named_arrive(Tr::kBarDqEmpty, 160);
      const int grow0 = static_cast<int>(flat_row0(p, tl.b, tl.sq.q0));
      for (int it = 0; do_dq && it < iters; ++it) {
        named_sync(Tr::kBarDqFull, 160);
        if (lane == 0) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {  // sub-tile j: column slab j at d128, query slab j at d64
            const int qs = QSLABS == 2 ? j : 0, cs = SLABS == 2 ? j : 0;
            reduce_dq_tile(maps, s0 + Tr::kSdQ + j * Tr::kDQBytes, Tr::kDQBoxBytes, cs * 64, a.dq_accum_d,
                           tl.head(it), grow0 + tl.row0(it) + qs * 64);
          }
          bulk_commit();
          bulk_wait_read<0>();
        }
        __syncwarp();
        named_arrive(Tr::kBarDqEmpty, 160);
      }
      if (lane == 0) bulk_wait<0>();  // the reduce-adds are done before the CTA exits
    }
    return;
  }

  // ---- consumers: c owns keys j0 + 64c .. + 63 ----
  setmaxnreg_inc<Tr::kConsumerRegs>();
  const int c = wg - 1, g = lane >> 2, tq = lane & 3;
  const uint32_t dq_tile = s0 + Tr::kSdQ;
  const int j0 = tl.j0, nq = tl.sq.nq, nk = tl.sq.nk;
  const int jr = j0 + c * 64 + warp * 16 + g;  // this thread's keys: jr and jr + 8
  const uint32_t k_rows = sK + c * 64 * 128, v_rows = sV + c * 64 * 128;
  if (iters > 0) {
    mbar_wait(bar_k, 0);
    mbar_wait(bar_v, 0);
  }

  float dk[SLABS][32], dv[SLABS][32];
  zero_dk_dv(dk, dv);

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
    // dV += P^T dO and dK += dS^T Q need nothing of the other consumer: they run on while the consumers
    // meet. With 64-query blocks (d128) dV starts as soon as P is in registers, so that it runs under dS's
    // arithmetic and stores (as cuDNN's SASS orders it); with 128-query blocks (d64) the in-flight P beside
    // dS's registers spills (48 bytes) and ptxas serialises the wgmmas (C7512), so both start after dS.
    constexpr bool kEarlyDv = BM == 64;
    if constexpr (kEarlyDv) {
      wgmma_fence();
      gemm_rs_mn(dv, pa, cdO, BM * 128, Tag<T>{});
      wgmma_commit();
    }
    dscores_t<BM>(dp, s, cD, tq);
    uint32_t dsa[BM / 16][4];
    acc_to_a<T, BM>(dsa, dp);
    const uint32_t sdS = s0 + Tr::kSdS + buf * Tr::kDSBytes;
    store_ds_t<BM>(sdS, c, warp, lane, dsa);
    wgmma_fence();
    if constexpr (!kEarlyDv) gemm_rs_mn(dv, pa, cdO, BM * 128, Tag<T>{});
    gemm_rs_mn(dk, dsa, cQ, BM * 128, Tag<T>{});
    wgmma_commit();

    // Both consumers' dS^T are in shared memory, and both are past block it - 1's dQ GEMM (which read
    // the other dS^T buffer). (Not the dQ GEMM's issue behind dV / dK: its accumulators beside theirs,
    // in flight, exceed the registers: ptxas spills ~700 bytes and serialises the wgmmas, C7512.)
    named_sync(Tr::kBarCons, 256);
    wgmma_wait<0>();
    fence_dk_dv(dk, dv);
    mbar_arrive(bar_qfree + 8 * buf);  // this thread's reads and GEMMs are done with the stage
    if ((it & 1) != c) continue;

    // The block's dQ over the 128 keys (the K dimension), as one m64n128 chain either way. d128: dQ = dS K,
    // 64 queries x both column slabs of K (dS read MN-major from dS^T). d64: dQ^T = K^T dS^T, the 64 columns
    // x both query slabs of dS^T (K read MN-major), where dQ itself would take two m64n64 chains, whose
    // operands need 128 bytes of shared memory per clock against 96.
    float dq[2][32];
    wgmma_fence();
    {
      const SmemDesc dds = smem_desc(sdS, 1024, QSLABS == 2 ? BN * 128 : 1024);
      const SmemDesc dks = smem_desc(sK, 1024, SLABS == 2 ? BN * 128 : 1024);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        if constexpr (SLABS == 2) wgmma_ss_mn(dq, dds.at(kk * 16 * 128), dks.at(kk * 16 * 128), kk > 0 ? 1 : 0, Tag<T>{});
        else wgmma_ss_mn(dq, dks.at(kk * 16 * 128), dds.at(kk * 16 * 128), kk > 0 ? 1 : 0, Tag<T>{});
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(dq[0]);
    fence_regs(dq[1]);
    if (do_dq) {
      named_sync(Tr::kBarDqEmpty, 160);  // the previous block's reduce-adds have read the tile
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        if constexpr (SLABS == 2) stage_dq_tile(dq_tile + j * Tr::kDQBytes, Tr::kDQBoxBytes, warp * 16 + g, tq, dq[j], p.scale);
        else stage_dq_tile_t(dq_tile + j * Tr::kDQBytes, Tr::kDQBoxBytes, warp * 16 + g, tq, dq[j], p.scale);
      }
      fence_proxy_async();  // the stores become visible to the copy engine
      named_arrive(Tr::kBarDqFull, 160);
    }
  }

  // Both consumers are past every dQ GEMM and staging (so past every dS^T); the producer's last
  // hand-back goes to the consumer whose turn would be next, after the last staging has taken its own
  // (taken before it, it would pair with the last staging's hand-back and deadlock); then the dQ tile
  // is free for both.
  named_sync(Tr::kBarCons, 256);
  if (c == (do_dq ? iters & 1 : 0)) named_sync(Tr::kBarDqEmpty, 160);
  named_sync(Tr::kBarCons, 256);
  if (a.dkv_accum) {
    add_dk_dv<SLABS>(a, tl.b, tl.sq, tl.hk, jr, tq, dk, dv);
  } else if (maps.kv_store) {
    // dK in this consumer's halves of the two dS^T buffers (slab sl in buffer sl), dV in its half of the
    // dQ tile
    store_dk_dv_tma<T, SLABS>(maps, s0 + Tr::kSdS + c * 64 * 128, Tr::kDSBytes, dq_tile + c * Tr::kDQBytes,
                              Tr::kDQBoxBytes, warp, lane, lt, Tr::kBarWg + c, dk, dv, p.scale,
                              static_cast<int>(tl.sq.k0) + j0 + c * 64, tl.hk, bcoord);
    if (lt == 0) bulk_wait<0>();
  } else {
    store_dk_dv<T, SLABS>(p, tl.b, tl.sq, tl.hk, jr, tq, dk, dv);
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
