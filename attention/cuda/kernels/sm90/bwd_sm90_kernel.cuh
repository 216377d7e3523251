// Hopper backward (sm_90a): the portable backward's algorithm (bwd_kernel.cuh)
// on wgmma and TMA. A tile is a (128-key block, kv head, sequence), its CTA
// two warpgroups owning 64 keys each; the grid is one CTA per tile, or
// persistent (see bwd_sm90_kernel below). K and V stay resident in shared memory; the
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
// the portable kernel (sm90_eligible in cuda_backend.cu); short rows take the
// one-warpgroup kernel (bwd_sm90_wg_kernel.cuh), and d65..128 the
// warp-specialised one (bwd_sm90_ws_kernel.cuh), which reuses these traits
// and tiles; the steps they share are in bwd_sm90_steps.cuh. This kernel
// serves d64 and the deterministic mode.
#pragma once

#include "kernels/sm90/bwd_sm90_steps.cuh"

namespace tessera::attention::cuda::sm90 {

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
  // mbarriers k, v, q[2]. dS^T is double-buffered: a warpgroup may store block it + 1's while the
  // other still reads block it's in its dQ GEMM (the warpgroups meet once per block). At a tile's
  // end a warpgroup's halves of the two dS^T buffers and its dQ tile hold its dK / dV for the TMA
  // stores.
  static constexpr int kSQ = 2 * kKBytes, kSdO = kSQ + 2 * kQBytes, kSdS = kSdO + 2 * kQBytes;
  static constexpr int kSdQ = kSdS + 2 * kDSBytes;
  static constexpr int kSL = kSdQ + 2 * kDQBytes, kSD = kSL + 2 * BM * 4, kBar = kSD + 2 * BM * 4;
  static constexpr int kSmem = kBar + 4 * 8 + 1024;  // mbarriers K, V, Q[2]; + slack to align to 1024
};

// Tile t's key block, kv head and sequence: key blocks count fastest, then kv heads, then sequences, so
// the CTAs at work together share a head's Q / dO in L2; with chunk > 0 (the ws kernel, causal calls,
// Overrides::causal_chunk) key blocks, the heaviest first, count slowest within chunks
// of `chunk` (kv head, sequence) pairs (chunked_order; slowest over all heads loses L2 locality).
// Host-checked in tests/gpu/bwd_tiles_test.cu.
// With GQA head splits (KArgs::head_splits, the ws kernel) each (kv head, sequence) pair counts as `splits`
// heads, its splits next to each other: the tiles of one kv head's key block share its K / V in L2.
struct BwdTileCoords {
  int kb, hk, b, split;
};
__host__ __device__ __forceinline__ BwdTileCoords bwd_tile_coords(int t, int nkb, int heads_kv, int batch,
                                                                  int chunk = 0, int splits = 1) {
  const ChunkPos pos = chunked_order(t, nkb, heads_kv * batch * splits, chunk);
  BwdTileCoords c;
  c.kb = pos.rank;
  c.split = pos.head % splits;
  const int pair = pos.head / splits;
  c.hk = pair % heads_kv;
  c.b = pair / heads_kv;
  return c;
}

// One tile of the backward: BN keys (j0..) of kv head hk in sequence b, and the query blocks that see them
// (of the query heads of its split of the group, with head splits).
template <int BM>
struct BwdTile {
  int b, hk, j0;
  SeqSpan sq;
  QueryWalk<BM> walk;
  int rot;     // the first step's index in the walk
  bool valid;  // j0 is inside the sequence (varlen: shorter sequences have fewer key blocks)
  __device__ int iters() const { return valid ? walk.iters() : 0; }
  __device__ int step(int it) const {  // it < iters()
    const int x = it + rot;
    return x >= walk.iters() ? x - walk.iters() : x;
  }
  __device__ int head(int it) const { return walk.head(step(it)); }
  __device__ int row0(int it) const { return walk.row0(step(it)); }
};
template <int BM, int BN>
__device__ __forceinline__ BwdTile<BM> bwd_tile(const AttentionParams& p, int t, int nkb, bool rotate,
                                                int chunk = 0, int splits = 1) {
  BwdTile<BM> tl;
  const BwdTileCoords c = bwd_tile_coords(t, nkb, p.heads_kv, p.batch, chunk, splits);
  tl.j0 = c.kb * BN;
  tl.hk = c.hk;
  tl.b = c.b;
  tl.sq = seq_span(p, tl.b);
  tl.valid = tl.j0 < tl.sq.nk;
  tl.walk = query_walk<BM>(p, tl.sq.nq, tl.sq.nk, tl.j0, min(tl.j0 + BN, tl.sq.nk), tl.hk, c.split, splits);
  tl.rot = rotate && tl.walk.iters() > 0 ? c.kb % tl.walk.iters() : 0;
  return tl;
}

// Grid: one CTA per tile (gridDim.x = tiles), or persistent (fewer CTAs, each walking tiles
// blockIdx.x, + gridDim.x, ...). Either way a CTA hands the next tile's loads to the copy engine
// before it finishes the current one: V and the first Q / dO block once both warpgroups are past the
// last block's dP^T GEMM (the last block's CTA barrier), K once every GEMM is done. dK / dV are staged
// in the warpgroup's halves of the dS^T buffers and its dQ tile (free at the tile's end), not in K / V,
// so the next tile's K / V may land while they are stored.
template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, 1)
    bwd_sm90_kernel(const __grid_constant__ KArgs a, const __grid_constant__ BwdMaps maps, int ntiles, int rotate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS, QSLABS = Tr::QSLABS;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  uint8_t* base = smem + (s0 - smem_u32(smem));
  const uint32_t sK = s0, sV = s0 + Tr::kKBytes;
  float* sL = reinterpret_cast<float*>(base + Tr::kSL);   // [2][BM] lse * log2 e of the block's rows
  float* sDv = reinterpret_cast<float*>(base + Tr::kSD);  // [2][BM] D = rowsum(dO*O) - dlse
  // mbarriers: K, V, then Q / dO / LSE / D stage buf at bar_q + 8 buf
  const uint32_t bar_k = s0 + Tr::kBar, bar_v = bar_k + 8, bar_q = bar_k + 16;

  const AttentionParams& p = a.p;
  const int nkb = (p.seqlen_k + BN - 1) / BN;
  const int tid = threadIdx.x, lane = tid & 31, lt = tid & 127;
  const int wg = warp_uniform(tid >> 7), warp = warp_uniform((tid >> 5) & 3);
  const int g = lane >> 2, tq = lane & 3;
  const bool do_dq = a.dq_accum != nullptr;
  const int qs = QSLABS == 2 ? wg : 0, cs = SLABS == 2 ? wg : 0;  // this warpgroup's dQ tile
  const uint32_t dq_tile = s0 + Tr::kSdQ + wg * Tr::kDQBytes;       // ... staged there

  // Loads (one thread). Tensor-map coordinates: varlen rows are global rows of a batch of one.
  // Q, dO and the rows' LSE / D of block `it` of tile tl into stage slot & 1.
  auto issue_q = [&](const BwdTile<BM>& tl, int it, int slot) {
    const int buf = slot & 1;
    load_q_block<BM, SLABS>(a, maps, bar_q + 8 * buf, s0 + Tr::kSQ + buf * Tr::kQBytes,
                            s0 + Tr::kSdO + buf * Tr::kQBytes, sL + buf * BM, sDv + buf * BM, tl.b, tl.sq,
                            tl.head(it), tl.row0(it), p.cu_seqlens_q ? 0 : tl.b);
  };
  auto load_rows = [&](const CUtensorMap* map, uint32_t bar, uint32_t dst, const BwdTile<BM>& tl) {
    load_key_rows<BN, SLABS>(map, bar, dst, static_cast<int>(tl.sq.k0) + tl.j0, tl.hk, p.cu_seqlens_q ? 0 : tl.b);
  };

  if (tid == 0) {
    mbar_init(bar_k, 1);
    mbar_init(bar_v, 1);
    mbar_init(bar_q, 1);
    mbar_init(bar_q + 8, 1);
    fence_mbar_init();
  }
  __syncthreads();

  // The first tile with work among this CTA's tiles u, u + gridDim.x, ... (thread 0 loads for it).
  auto tile_with_work = [&](int u, BwdTile<BM>& nx) {
    for (; u < ntiles; u += gridDim.x) {
      nx = bwd_tile<BM, BN>(p, u, nkb, rotate);
      if (nx.iters() > 0) return true;
    }
    return false;
  };

  int slot = 0, kv_loads = 0;  // Q stages and K / V loads this CTA has consumed (the barriers' parities)
  // A tile with work finds its K, V and first block loaded: by the CTA's previous tile with work (V and
  // the block at its last block, K at its end; tiles without work load nothing), or here for the first.
  if (tid == 0) {
    BwdTile<BM> first;
    if (tile_with_work(blockIdx.x, first)) {
      load_rows(&maps.k, bar_k, sK, first);
      load_rows(&maps.v, bar_v, sV, first);
      issue_q(first, 0, 0);
    }
  }

  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const BwdTile<BM> tl = bwd_tile<BM, BN>(p, t, nkb, rotate);
    if (!tl.valid) continue;  // (uniform across the CTA)
    const int j0 = tl.j0, nq = tl.sq.nq, nk = tl.sq.nk, iters = tl.iters();
    const int jr = j0 + wg * 64 + warp * 16 + g;  // this thread's keys: jr and jr + 8
    const uint32_t k_rows = sK + wg * 64 * 128, v_rows = sV + wg * 64 * 128;  // this warpgroup's 64 keys
    auto next_tile = [&](BwdTile<BM>& nx) { return tile_with_work(t + gridDim.x, nx); };
    if (iters > 0) {
      mbar_wait(bar_k, kv_loads & 1);
      mbar_wait(bar_v, kv_loads & 1);
      ++kv_loads;
    }

    float dk[SLABS][32], dv[SLABS][32];
    zero_dk_dv(dk, dv);

    // A block's dQ tile is staged in shared memory after its dQ GEMM and handed to the copy engine
    // (reduce-adds) by reduce_dq. The fence there waits for the stores to
    // land, right after them a stall. With DEFER_DQ the flush waits for the next block, where it runs
    // while the tensor cores run S^T: faster at d64, slower at d128 (there the S^T GEMM is twice as long,
    // and the exponentials wait for the flush's barrier), so d64 only.
    constexpr bool DEFER_DQ = D == 64;
    // The staged tile of query block i0 of head hh to the copy engine's reduce-adds.
    auto reduce_dq = [&](int hh, int ii0) {
      fence_proxy_async();  // the stores become visible to the copy engine
      named_sync(1 + wg, 128);
      if (lt == 0) {
        const int grow = static_cast<int>(flat_row0(p, tl.b, tl.sq.q0)) + ii0 + qs * 64;
        reduce_dq_tile(maps, dq_tile, Tr::kDQBoxBytes, cs * 64, a.dq_accum_d, hh, grow);
        bulk_commit();
      }
    };
    int dq_h = -1, dq_i0 = 0;  // DEFER_DQ: the staged tile waiting for flush_dq
    auto flush_dq = [&] {
      if (dq_h < 0) return;  // (uniform in the warpgroup)
      reduce_dq(dq_h, dq_i0);
      dq_h = -1;
    };

    for (int it = 0; it < iters; ++it, ++slot) {
      const int buf = slot & 1, h = tl.head(it), i0 = tl.row0(it);
      mbar_wait(bar_q + 8 * buf, (slot >> 1) & 1);  // Q, dO, LSE, D of this block have landed
      const uint32_t cQ = s0 + Tr::kSQ + buf * Tr::kQBytes, cdO = s0 + Tr::kSdO + buf * Tr::kQBytes;
      const float* cL = sL + buf * BM;
      const float* cD = sDv + buf * BM;

      // S^T, dP^T; P^T while the tensor cores run dP^T. s[4n + e]: key jr + 8(e >> 1), query
      // i0 + 8n + 2tq + (e & 1).
      float s[BM / 2], dp[BM / 2];
      uint32_t pa[BM / 16][4];
      scores_t<T, D, BM, BN>(s, dp, pa, k_rows, v_rows, cQ, cdO, a, cL, i0, j0, nq, nk, jr, tq, [&] {
        if constexpr (DEFER_DQ) flush_dq();
      });
      // dS^T = P^T (dP^T - D), packed as A operands and stored to shared memory for dQ.
      dscores_t<BM>(dp, s, cD, tq);
      uint32_t dsa[BM / 16][4];
      acc_to_a<T, BM>(dsa, dp);
      // dS^T to shared memory for dQ (also in deterministic mode, where the dQ GEMM below runs
      // unused: a conditional wgmma costs more registers than the GEMM costs time there).
      // dS^T rows are keys (wg * 64 + 16 warp + g + 8 r), columns queries (slab n / 8, chunk n % 8).
      const uint32_t sdS = s0 + Tr::kSdS + buf * Tr::kDSBytes;
      static_assert(BN == 128, "ds_stm_off: 128 key rows per slab");
      store_ds_t<BM>(sdS, wg, warp, lane, dsa);

      // dV += P^T dO: queries are the K dimension, dO read MN-major. It needs nothing of the
      // other warpgroup, so it goes to the tensor cores before the barrier.
      wgmma_fence();
      gemm_rs_mn(dv, pa, cdO, BM * 128, Tag<T>{});
      wgmma_commit();

      // Both warpgroups' dS^T are in shared memory, and both are past block it - 1 (and past this
      // block's dP^T GEMM): its Q / dO / LSE / D stage is free for the next block, and at the last
      // block V is free for the next tile (dS^T is double-buffered, see the traits).
      __syncthreads();
      if (tid == 0) {
        BwdTile<BM> nx;
        if (it + 1 < iters) {
          issue_q(tl, it + 1, slot + 1);
        } else if (next_tile(nx)) {
          load_rows(&maps.v, bar_v, sV, nx);
          issue_q(nx, 0, slot + 1);
        }
      }

      // This warpgroup's 64 x 64 tile of dQ = dS K (query slab qs, column slab cs; keys are the K
      // dimension), then dK += dS^T Q; dQ's epilogue runs while dK's GEMM does.
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
        // The tile goes to shared memory (scaled, in the boxes' swizzled layout) once the previous
        // block's reduce-adds have read it; flush_dq hands it on. Box rows past the sequence hold
        // dQ = 0 (their P is 0): adding them into the next sequence's rows changes nothing.
        if (lt == 0) bulk_wait_read<0>();
        named_sync(1 + wg, 128);
        stage_dq_tile(dq_tile, Tr::kDQBoxBytes, warp * 16 + g, tq, dq, p.scale);
        if constexpr (DEFER_DQ) {
          dq_h = h;
          dq_i0 = i0;
        } else {
          reduce_dq(h, i0);
        }
      }
      wgmma_wait<0>();
      fence_dk_dv(dk, dv);
    }

    if constexpr (DEFER_DQ) flush_dq();  // the last block's dQ
    // Every GEMM of the tile is done (K is free) and every dS^T has been read.
    __syncthreads();
    if (tid == 0 && iters > 0) {
      BwdTile<BM> nx;
      if (next_tile(nx)) load_rows(&maps.k, bar_k, sK, nx);
    }
    if (maps.kv_store) {
      // dK in this warpgroup's halves of the two dS^T buffers (slab sl in buffer sl), dV in its dQ tile
      // (both 1024-byte aligned 64-row slabs), once the last dQ reduce-adds have read the tile.
      if (lt == 0) bulk_wait_read<0>();
      named_sync(1 + wg, 128);
      store_dk_dv_tma<T, SLABS>(maps, s0 + Tr::kSdS + wg * 64 * 128, Tr::kDSBytes, dq_tile,
                                Tr::kDQBoxBytes, warp, lane, lt, 1 + wg, dk, dv, p.scale,
                                static_cast<int>(tl.sq.k0) + j0 + wg * 64, tl.hk, p.cu_seqlens_q ? 0 : tl.b);
      named_sync(1 + wg, 128);  // the copies have read the slabs: the next tile may write there
    } else {
      store_dk_dv<T, SLABS>(p, tl.b, tl.sq, tl.hk, jr, tq, dk, dv);
    }
  }
  if (lt == 0) bulk_wait<0>();  // the last reduce-adds and stores are done before the CTA exits
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
