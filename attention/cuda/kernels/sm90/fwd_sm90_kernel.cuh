// Hopper forward (sm_90a), warp-specialised. One CTA per tile of BM = 64 * NCONS
// query rows of one (head, sequence), or with PERSIST MINB CTAs per SM walking
// tiles (tile_at; the ring, the Q load and the O staging run on from one tile
// into the next): warpgroup 0 is the producer (one thread
// issues TMA copies of Q once and of K/V blocks into a STAGES-deep ring of
// 128-byte-swizzled shared memory, on mbarriers), warpgroups 1 .. NCONS are
// consumers owning 64 query rows each. A consumer computes S = Q K^T with
// wgmma from shared memory, the online softmax on the accumulators in
// registers, and O += P V with P from registers (V read MN-major); the
// softmax of block j overlaps the tensor cores' P V of block j - 1. With
// PINGPONG the consumers take turns issuing their GEMMs (named barriers,
// round robin), so one's softmax runs while another's GEMMs hold the tensor
// cores. Registers move from the producer to the consumers (setmaxnreg).
// Without a producer (PRODUCER false, one consumer) the consumer's first
// thread issues the loads itself and several small CTAs share an SM.
// Causal / window / varlen / GQA are the portable kernel's runtime masks;
// calls with bias, ALiBi or dropout take the portable kernel
// (sm90_eligible in cuda_backend.cu).
#pragma once

#include <type_traits>

#include "primitives/acc_tile.cuh"
#include "primitives/mma.cuh"
#include "score_mod.cuh"
#include "primitives/tma.cuh"
#include "primitives/wgmma.cuh"

namespace tessera::attention::cuda::sm90 {

// D: head dim (64 or 128); BN: keys per block; STAGES: depth of the K/V ring;
// NCONS: consumer warpgroups (1, 2 or 3: FA3 takes 3 at d64; here d64 takes 3
// only on long rows, dispatch.cu); PINGPONG: the consumers take turns issuing their GEMMs (faster in
// every measured configuration with two); MINB: CTAs per SM (with one
// consumer, two or three small CTAs share an SM, so one's loads, softmax and
// epilogue overlap another's GEMMs without coordination, which pays where
// tiles are short); PRODUCER false (one consumer only): no producer
// warpgroup, the consumer's first thread issues the loads, refilling a stage
// once all four warps have freed it, so more CTAs fit an SM. STAGES 1 (one
// consumer, no producer): no ring, every row's keys fit one block of BN keys
// (the launcher checks), so BN can be sized to a short row (208 for ViT's 197
// tokens, where 128-key blocks would compute 256).
template <typename T, int D_, int BN_, int STAGES_, int NCONS_ = 2, bool PINGPONG_ = true, int MINB_ = 1,
          bool PRODUCER_ = true, bool PERSIST_ = false, bool SPLIT_KV_ = false>
struct FwdSm90Traits {
  using Elt = T;
  static constexpr int D = D_, BN = BN_, STAGES = STAGES_, NCONS = NCONS_, MINB = MINB_;
  static constexpr bool PINGPONG = PINGPONG_, PRODUCER = PRODUCER_, PERSIST = PERSIST_;
  // SPLIT_KV (no producer, one tile per CTA, a ring): K and V of a stage arrive on their own mbarriers
  // and are refilled apart: K_j's slot takes K_{j+STAGES} once S_j is done, V_j's takes V_{j+STAGES} once
  // P_j V_j is done (one iteration later, when V_j is first needed), so each load is issued ~1.5 key
  // blocks before its use where the joint refill (after P_{j-1} V_{j-1}) left ~0.5 with two stages.
  static constexpr bool SPLIT_KV = SPLIT_KV_;
  static constexpr int BM = 64 * NCONS, NTHREADS = 128 * (NCONS + (PRODUCER ? 1 : 0));
  static constexpr int SLABS = D / 64;  // 64-column slabs of a row
  static constexpr int kQBytes = BM * D * 2, kKVBytes = BN * D * 2;
  static constexpr int kBarOff = kQBytes + 2 * STAGES * kKVBytes;  // full[STAGES], empty[STAGES], q, q free
  static constexpr int kSmem = kBarOff + 8 * (2 * STAGES + 2) + 1024;  // + slack to align to 1024
  // setmaxnreg: MINB CTAs share the SM's 65536 registers, each starting with
  // kLaunchRegs per thread (what __launch_bounds__ leaves, in steps of 8); the
  // producer drops to 24 and the consumers share the rest (multiples of 8, at
  // most 240): 240 for NCONS 2, 160 for NCONS 3, 232 / 136 for NCONS 1 with
  // MINB 2 / 3.
  static constexpr int kShare = 65536 / (MINB * NTHREADS) / 8 * 8;
  static constexpr int kLaunchRegs = kShare > 255 ? 248 : kShare;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerFit = (kLaunchRegs * NTHREADS - 128 * kProducerRegs) / (128 * NCONS) / 8 * 8;
  static constexpr int kConsumerRegs = kConsumerFit > 240 ? 240 : kConsumerFit;

  static_assert(D == 64 || D == 128 || D == 256, "head dim 64, 128 or 256");
  static_assert(NCONS >= 1 && NCONS <= 3, "1 to 3 consumer warpgroups");
  static_assert(!(PINGPONG && NCONS == 1), "ping-pong needs two consumers");
  static_assert(PRODUCER || NCONS == 1, "without a producer warpgroup, one consumer");
  static_assert(MINB >= 1 && MINB * (kSmem + 1024) <= 228 * 1024, "MINB CTAs' shared memory exceeds the SM");
  static constexpr bool ONE_BLOCK = STAGES == 1;  // rows of at most BN keys (launch_fwd_sm90_cfg checks)
  static_assert(STAGES >= 2 || (ONE_BLOCK && !PRODUCER),
                "a ring frees block j - 1 only after block j has arrived; one block needs no producer");
  static_assert(BN % 16 == 0 && BN <= 256, "a key block is whole k16 steps of P V and one TMA box");
  static_assert(kConsumerRegs % 8 == 0 && kProducerRegs % 8 == 0, "setmaxnreg takes multiples of 8");
  static_assert(!PRODUCER || MINB * 128 * (NCONS * kConsumerRegs + kProducerRegs) <= 65536,
                "register split exceeds the SM");
  static_assert(kSmem <= 227 * 1024, "shared memory exceeds 227 KB");
  // Persistent: the ring runs on across tiles (fed by the producer, or without one by the consumer, which
  // loads the next tile's Q and first key blocks at the end of a tile), and the O tile is staged in the
  // last block's K (64 rows per consumer inside each slab of BN rows).
  static_assert(!PERSIST || (STAGES >= 2 && BN >= BM), "persistent: a ring, BN >= BM");
  static_assert(!SPLIT_KV || (!PRODUCER && !PERSIST && STAGES >= 2), "split K / V: the consumer's own ring");
};

// Ping-pong turns of the consumers, round robin 0, 1, .., NCONS - 1, 0, ..:
// consumer c's turn is named barrier 1 + c (0 is __syncthreads'), met by c's
// 128 threads (bar.sync) and the 128 of the consumer before it (bar.arrive
// once that one's GEMMs are issued). Every consumer of a CTA runs the same
// number of key blocks nblk, so each barrier gets exactly as many arrivals as
// syncs when the last consumer opens consumer 0's first turn (if nblk > 0) and
// skips its arrival after its final block (nobody takes that turn). Turns
// are strictly ordered, so a barrier never holds two pending arrivals.
template <typename Tr>
struct Turns {
  static constexpr int kThreads = 256;  // the waiting consumer + the one opening its turn
  int c;                                // this consumer, 0 .. NCONS - 1
  __device__ bool last() const { return c == Tr::NCONS - 1; }
  __device__ int next_bar() const { return 1 + (last() ? 0 : c + 1); }  // consumer (c + 1) % NCONS's turn
  __device__ void open_first(int nblk) const {  // before the first block
    if constexpr (Tr::PINGPONG)
      if (last() && nblk > 0) named_arrive(next_bar(), kThreads);
  }
  __device__ void wait() const {
    if constexpr (Tr::PINGPONG) named_sync(1 + c, kThreads);
  }
  __device__ void pass(bool final_block) const {  // once this consumer's GEMMs of a block are issued
    if constexpr (Tr::PINGPONG)
      if (!(last() && final_block)) named_arrive(next_bar(), kThreads);
  }
};

// Named barrier of consumer c's epilogue: above the ping-pong turns 1 .. NCONS; without
// ping-pong 1 + c (one consumer: the barrier its ring refills meet on, never at the same time).
template <typename Tr>
__device__ __forceinline__ int epilogue_bar(int c) { return (Tr::PINGPONG ? 1 + Tr::NCONS : 1) + c; }

// Lazy rescaling's slack (log2 units): the reference max of a row trails its true max by at most this, so
// p = 2^(s - m) <= 256 (FlashAttention-4 takes the same 8 on Blackwell).
constexpr float kLazyLog2 = 8.f;

// One tile of the forward: BM query rows of one (head, sequence) and the key blocks they see.
struct FwdTile {
  int b, h, hk, i0, nq, nk, jb_begin, nblk, bcoord, qrow0, krow0;
  int64_t q0;
  KeyRange kr_first, kr_last;
  bool rows_full;
};
template <typename Tr>
__device__ __forceinline__ FwdTile fwd_tile(const AttentionParams& p, int b, int h, int qb) {
  FwdTile t;
  const SeqSpan sq = seq_span(p, b);
  t.b = b; t.h = h; t.hk = h / (p.heads_q / p.heads_kv);
  t.i0 = qb * Tr::BM; t.nq = sq.nq; t.nk = sq.nk; t.q0 = sq.q0;
  const BlockKeys bk = block_keys(p, t.i0, Tr::BM, Tr::BN, sq.nq, sq.nk);
  t.kr_first = bk.first; t.kr_last = bk.last;
  t.jb_begin = bk.jb_begin; t.nblk = bk.jb_end - bk.jb_begin;
  t.rows_full = t.i0 + Tr::BM <= sq.nq;
  // Tensor-map coordinates: varlen rows are global rows of a batch of one.
  t.bcoord = p.cu_seqlens_q ? 0 : b;
  t.qrow0 = static_cast<int>(sq.q0) + t.i0; t.krow0 = static_cast<int>(sq.k0);
  return t;
}

// Tiles of a launch: one per CTA (grid: query blocks x heads x sequences), or with Tr::PERSIST MINB CTAs per
// SM walking tiles (first_tile, next_tile), query blocks fastest (the CTAs at work at one time share K / V in
// L2). Persistent launches are fixed-length without window masks, and causal only with as many queries as
// keys (fwd_sm90_persistable), so every tile has key blocks. Without causal every tile costs the same and
// CTA c walks tiles c, c + grid, ..; with causal, query block qb costs qb + 1 key blocks (BN = BM; at
// BN = 2 BM, (qb + 2) / 2), so each (head, sequence)'s tiles are numbered heavy, light, heavy, ..: nqb - 1,
// 0, nqb - 2, 1, .., and CTA c walks the pairs (2c, 2c + 1), (2 (c + grid), 2 (c + grid) + 1), .., each
// pair costing nqb + 1 blocks (at BN = 2 BM pairs differ by at most one block; an odd nqb leaves one pair
// per head unequal), so static striding stays balanced.
template <typename Tr>
__device__ __forceinline__ FwdTile tile_at(const AttentionParams& p, int t, int causal_chunk) {
  if constexpr (Tr::PERSIST) {
    const int nqb = (p.seqlen_q + Tr::BM - 1) / Tr::BM, hb = t / nqb, r = t - hb * nqb;
    const int qb = !p.causal ? r : (r & 1) ? r >> 1 : nqb - 1 - (r >> 1);
    return fwd_tile<Tr>(p, hb / p.heads_q, hb % p.heads_q, qb);
  } else {
    // Causal: the blocks with the most keys start first; with causal_chunk > 0 (KArgs; an A / B setting)
    // heaviest first within chunks of that many (head, sequence) pairs (chunked_order; the grid is query
    // blocks x heads x sequences, x fastest, as the hardware starts them).
    const int nqb = static_cast<int>(gridDim.x), heads = static_cast<int>(gridDim.y);
    int b = blockIdx.z, h = blockIdx.y, qb = blockIdx.x;
    if (p.causal && causal_chunk > 0) {
      const ChunkPos pos = chunked_order(qb + nqb * (h + heads * b), nqb, heads * static_cast<int>(gridDim.z),
                                         causal_chunk);
      b = pos.head / heads;
      h = pos.head % heads;
      qb = pos.rank;
    }
    return fwd_tile<Tr>(p, b, h, p.causal ? nqb - 1 - qb : qb);
  }
}
template <typename Tr>
__device__ __forceinline__ int first_tile(const AttentionParams& p) {
  if constexpr (!Tr::PERSIST) return 0;
  return p.causal ? 2 * static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
}
template <typename Tr>
__device__ __forceinline__ int next_tile(const AttentionParams& p, int t) {
  if constexpr (!Tr::PERSIST) return t + 1;  // one tile per CTA (ntiles = 1)
  const int grid = static_cast<int>(gridDim.x);
  return !p.causal ? t + grid : (t & 1) ? t + 2 * grid - 1 : t + 1;
}

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, Tr::MINB)
    fwd_sm90_kernel(const __grid_constant__ KArgs a, const __grid_constant__ FwdMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS, STAGES = Tr::STAGES;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t sQ = s0;
  const uint32_t sKV = s0 + Tr::kQBytes;  // stage st: K at sKV + st * kKVBytes, V at sKV + (STAGES + st) * kKVBytes
  const uint32_t bar_full = s0 + Tr::kBarOff, bar_empty = bar_full + 8 * STAGES, bar_q = bar_full + 16 * STAGES;
  const uint32_t bar_qfree = bar_q + 8;  // every consumer warp is past its tile's last S GEMM (Q is dead)
  // SPLIT_KV: stage st's V arrives on bar_vfull[st] (the producer's empty barriers, unused without one),
  // its K on bar_full[st].
  const uint32_t bar_vfull = bar_empty;

  const AttentionParams& p = a.p;
  const int t_first = first_tile<Tr>(p);
  const int ntiles = Tr::PERSIST ? (p.seqlen_q + BM - 1) / BM * p.heads_q * p.batch : 1;
  if constexpr (!Tr::PERSIST) {
    const FwdTile t0 = tile_at<Tr>(p, 0, a.causal_chunk);
    if (t0.i0 >= t0.nq) return;
  }
  // (wg and warp via warp_uniform: the consumer's Q rows and its wgmma descriptors in uniform registers.)
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = warp_uniform(tid >> 7), warp = warp_uniform((tid >> 5) & 3);

  if (tid == 0) {
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(bar_full + 8 * st, 1);
      mbar_init(bar_empty + 8 * st, Tr::SPLIT_KV ? 1 : 4 * Tr::NCONS);  // one arrival per consumer warp
    }
    mbar_init(bar_q, 1);
    mbar_init(bar_qfree, 4 * Tr::NCONS);
    fence_mbar_init();
  }
  __syncthreads();

  // Q of tile tl, and key block jb of it into ring slot n (stage n % STAGES, counted over the CTA's tiles)
  // once the consumers have freed it (the producer waits for that on the stage's mbarrier; without one,
  // the consumer refills a stage only after it has freed it); one thread.
  auto issue_q = [&](const FwdTile& tl) {
    mbar_expect_tx(bar_q, Tr::kQBytes);
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
      tma_load_4d(sQ + sl * (BM * 128), &maps.q, bar_q, sl * 64, tl.qrow0, tl.h, tl.bcoord);
  };
  // SPLIT_KV: K or V alone (kv 0 / 1), each on its own barrier.
  auto issue_half = [&](const FwdTile& tl, int n, int jb, int kv) {
    const int st = n % STAGES;
    const uint32_t full = (kv ? bar_vfull : bar_full) + 8 * st;
    mbar_expect_tx(full, Tr::kKVBytes);
    const uint32_t dst = sKV + (kv * STAGES + st) * Tr::kKVBytes;
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
      tma_load_4d(dst + sl * (BN * 128), kv ? &maps.v : &maps.k, full, sl * 64, tl.krow0 + jb * BN, tl.hk, tl.bcoord);
  };
  auto issue_kv = [&](const FwdTile& tl, int n, int jb) {
    if constexpr (Tr::SPLIT_KV) {
      issue_half(tl, n, jb, 0);
      issue_half(tl, n, jb, 1);
    } else {
      const int st = n % STAGES;
      if (Tr::PRODUCER && n >= STAGES) mbar_wait_sleepy(bar_empty + 8 * st, ((n / STAGES) - 1) & 1);
      const uint32_t full = bar_full + 8 * st;
      mbar_expect_tx(full, 2 * Tr::kKVBytes);
      const uint32_t sK = sKV + st * Tr::kKVBytes, sV = sKV + (STAGES + st) * Tr::kKVBytes;
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl) {
        tma_load_4d(sK + sl * (BN * 128), &maps.k, full, sl * 64, tl.krow0 + jb * BN, tl.hk, tl.bcoord);
        tma_load_4d(sV + sl * (BN * 128), &maps.v, full, sl * 64, tl.krow0 + jb * BN, tl.hk, tl.bcoord);
      }
    }
  };

  if constexpr (Tr::PRODUCER) {
    if (wg == 0) {
      // ---- producer ----
      setmaxnreg_dec<Tr::kProducerRegs>();
      if (tid == 0) {
        // Per tile: its first key block (whose stage frees before Q does), then Q once every consumer
        // is past the previous tile's last S GEMM, then the rest.
        int n = 0;
        for (int t = t_first, k = 0; t < ntiles; t = next_tile<Tr>(p, t), ++k) {
          const FwdTile tl = tile_at<Tr>(p, t, a.causal_chunk);
          if (tl.nblk > 0) issue_kv(tl, n, tl.jb_begin);
          if (k > 0) mbar_wait_sleepy(bar_qfree, (k - 1) & 1);
          issue_q(tl);
          for (int i = 1; i < tl.nblk; ++i) issue_kv(tl, n + i, tl.jb_begin + i);
          n += tl.nblk;
        }
      }
      return;
    }
    setmaxnreg_inc<Tr::kConsumerRegs>();
  } else if (tid == 0) {  // the ring's first fill; the loop below refills it (persistent: and the tile end)
    const FwdTile tl = tile_at<Tr>(p, t_first, a.causal_chunk);
    issue_q(tl);
    for (int n = 0; n < tl.nblk && n < STAGES; ++n) issue_kv(tl, n, tl.jb_begin + n);
  }

  // ---- consumers: warpgroup cw owns rows 64 cw .. 64 cw + 63 of the block ----
  const int cw = Tr::PRODUCER ? wg - 1 : 0;
  const int g = lane >> 2, tq = lane & 3;
  const uint32_t q_rows = sQ + cw * 64 * 128;  // this warpgroup's 64 rows inside each Q slab
  const Turns<Tr> turns{cw};
  int n0 = 0;  // ring slot of the tile's first key block
  for (int t = t_first, k = 0; t < ntiles; t = next_tile<Tr>(p, t), ++k) {
    const FwdTile tl = tile_at<Tr>(p, t, a.causal_chunk);
    const int nq = tl.nq, nk = tl.nk, b = tl.b, h = tl.h, nblk = tl.nblk, jb_begin = tl.jb_begin;
    const int t_next = next_tile<Tr>(p, t);
    const bool last_tile = t_next >= ntiles;
    // A last key block whose second half no row of the tile sees (causal tiles of 64 rows ending at an odd
    // multiple of 64 keys: every other d64 tile; a ragged end of <= BN / 2 keys) is computed as BN / 2
    // keys: S by one m64n64 per k-step, P V by half the k-steps.
    constexpr bool kHalfOk = Tr::BN == 128 && !Tr::ONE_BLOCK;
    const bool half_last =
        kHalfOk && maps.half_last && nblk > 0 && tl.kr_last.hi <= (jb_begin + nblk - 1) * BN + BN / 2;
    // This thread's rows: r -> i0 + 64 cw + 16 warp + g + 8 r.
    int row_i[2], row_lo[2], row_hi[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = tl.i0 + cw * 64 + warp * 16 + g + 8 * r;
      row_i[r] = i;
      const KeyRange kr = row_keys(p, i, nq, nk);
      row_lo[r] = kr.lo; row_hi[r] = kr.hi;
    }

    float o[SLABS][32];
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
      for (int e = 0; e < 32; ++e) o[sl][e] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    uint32_t pa[BN / 16][4];  // P of the previous key block, in the A-register layout

    // O += P V for the key block in stage st: per 16 keys, one m64n128k16 (d128) or m64n64k16 (d64)
    // (rows of V are the K dimension: 16 rows = 2048 bytes); a half block: its first BN / 2 keys.
    auto issue_pv = [&](int st, auto half_block) {
      if constexpr (decltype(half_block)::value)
        gemm_rs_mn(o, reinterpret_cast<uint32_t(&)[BN / 32][4]>(pa), sKV + (STAGES + st) * Tr::kKVBytes, BN * 128,
                   Tag<T>{});
      else
        gemm_rs_mn(o, pa, sKV + (STAGES + st) * Tr::kKVBytes, BN * 128, Tag<T>{});
      wgmma_commit();
    };

    mbar_wait(bar_q, k & 1);
    if (k == 0) turns.open_first(nblk);  // (persistent: turns run on across tiles, every tile has blocks)
    // Schedule per key block j: issue S_j = Q K_j^T, issue O += P_{j-1} V_{j-1},
    // wait for S_j only; the softmax of S_j runs while the tensor cores do
    // P_{j-1} V_{j-1}; then wait for that, hand its stage back to the producer,
    // rescale O and form P_j.
    // (A lambda instantiated for the first block and for the rest: a runtime `it > 0` around the P V
    // issue made ptxas serialise the wgmmas (C7520) once the block loop sat inside the tile loop.)
    // (HALF: the tile's last block, BN / 2 keys; instantiated only where a tile can have one.)
    auto block = [&](int it, auto first_block, auto half_block) {
      constexpr bool FIRST = decltype(first_block)::value, HALF = decltype(half_block)::value;
      constexpr int BNB = HALF ? BN / 2 : BN, NSB = BNB / 8;  // this block's keys, n8 groups
      const int jb = jb_begin + it, n = n0 + it, st = n % STAGES;
      const int j0 = jb * BN;
      mbar_wait(bar_full + 8 * st, (n / STAGES) & 1);
      const uint32_t sK = sKV + st * Tr::kKVBytes;

      // SPLIT_KV: block j - 1's V, for its P V below (loaded ~1.5 blocks ago).
      if constexpr (Tr::SPLIT_KV && !FIRST) mbar_wait(bar_vfull + 8 * ((n + STAGES - 1) % STAGES), ((n - 1) / STAGES) & 1);

      // S = Q K^T.
      float s[BNB / 2];
      turns.wait();
      wgmma_fence();
      gemm_ss_kmajor<D / 16>(s, q_rows, BM * 128, sK, BN * 128, Tag<T>{});
      wgmma_commit();
      if constexpr (!FIRST) issue_pv((n + STAGES - 1) % STAGES, std::false_type{});
      else wgmma_commit();  // an empty group, so that S_j is always the older of two
      turns.pass(it == nblk - 1 && last_tile);  // the next consumer's turn
      wgmma_wait<1>();
      fence_regs(s);
      if constexpr (Tr::PERSIST) {  // the tile's last S GEMM has read this warpgroup's Q rows
        if (it == nblk - 1) {
          __syncwarp();
          if (lane == 0) mbar_arrive(bar_qfree);
        }
      }

      // Raw scores, masked (scale > 0, so the max commutes with scaling).
      // s[4n + e]: row g + 8(e >> 1), key j0 + 8n + 2tq + (e & 1).
      const bool full = tl.rows_full && j0 >= tl.kr_last.lo && j0 + BNB <= tl.kr_first.hi;
      if (!full) {
#pragma unroll
        for (int c = 0; c < NSB; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e >> 1, j = j0 + c * 8 + 2 * tq + (e & 1);
            if (j < row_lo[r] || j >= row_hi[r]) s[4 * c + e] = -INFINITY;
          }
      }

      // Online softmax on S_j in log2 units: p = 2^(s * scale_log2 - m), one FFMA and one ex2 per score.
      float corr[2] = {1.f, 1.f};
      bool rescale = !FIRST;
      if constexpr (Tr::NCONS > 1) {
        // Two consumers (d128), where the softmax's dependency chain bounds the tile's period: both rows'
        // maxima first, each a tree of four partial maxima, and lazy rescaling: a row's reference max m
        // moves only when the block's max passes it by more than kLazyLog2 on some row of the warp (a
        // vote, so the branch is warp-uniform); most blocks skip O's rescale and the correction
        // exponentials. Exact: O and l share the reference, and p <= 2^kLazyLog2 keeps them far from
        // overflow (P's rounding in 16 bits is relative, whatever its size). The first block takes its max
        // as the reference (O and l are zero).
        float mx[2];
        bool grow = false;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float part[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
          for (int c = 0; c < NSB; ++c) part[c & 3] = fmaxf(part[c & 3], fmaxf(s[4 * c + 2 * r], s[4 * c + 2 * r + 1]));
          mx[r] = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          mx[r] = fmaxf(m[r], mx[r] * a.scale_log2);
          grow |= mx[r] > m[r] + kLazyLog2;
        }
        rescale = !FIRST && (__any_sync(0xffffffffu, grow) || !maps.lazy_rescale);
        if (FIRST || rescale) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            if constexpr (!FIRST) corr[r] = fast_exp2(m[r] - (mx[r] == -INFINITY ? 0.f : mx[r]));
            m[r] = mx[r];
          }
        }
      } else {
        // One consumer among three CTAs per SM (d64): row by row, each max a chain, so that row 1's max
        // overlaps row 0's exponentials, and O rescaled at every block (the tree, the rows together and
        // lazy rescaling are slower there).
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -INFINITY;
#pragma unroll
          for (int c = 0; c < NSB; ++c) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * r], s[4 * c + 2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          mx = fmaxf(m[r], mx * a.scale_log2);
          if constexpr (!FIRST) corr[r] = fast_exp2(m[r] - (mx == -INFINITY ? 0.f : mx));
          m[r] = mx;
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_use = m[r] == -INFINITY ? 0.f : m[r];
        float sum = 0.f;
#pragma unroll
        for (int c = 0; c < NSB; ++c) {
          s[4 * c + 2 * r] = fast_exp2(fmaf(s[4 * c + 2 * r], a.scale_log2, -m_use));
          s[4 * c + 2 * r + 1] = fast_exp2(fmaf(s[4 * c + 2 * r + 1], a.scale_log2, -m_use));
          sum += s[4 * c + 2 * r] + s[4 * c + 2 * r + 1];
        }
        l[r] = l[r] * corr[r] + sum;
      }

      // P_{j-1} V_{j-1} is done: O and the P registers are ours again, and
      // block j - 1's stage goes back to the producer.
      wgmma_wait<0>();
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl) fence_regs(o[sl]);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) fence_regs(pa[kk]);
      if constexpr (Tr::PRODUCER) {
        if (!FIRST) {
          __syncwarp();
          if (lane == 0) mbar_arrive(bar_empty + 8 * ((n + STAGES - 1) % STAGES));
        }
      } else if constexpr (Tr::SPLIT_KV) {
        // K_j's slot (S_j is done) takes K_{j+STAGES}, V_{j-1}'s (P_{j-1} V_{j-1} is done) V_{j-1+STAGES},
        // once all four warps are here (the named barrier, as below).
        const bool k_next = it + STAGES < nblk, v_next = !FIRST && it - 1 + STAGES < nblk;
        if (k_next || v_next) {
          named_sync(1, 128);
          if (tid == 0) {
            if (k_next) issue_half(tl, n + STAGES, jb + STAGES, 0);
            if (v_next) issue_half(tl, n - 1 + STAGES, jb - 1 + STAGES, 1);
          }
        }
      } else if (!FIRST && it - 1 + STAGES < nblk) {
        // Refill that stage once all four warps are done with it. A named barrier, not the
        // stage's mbarrier: a wait loop in one thread's branch made ptxas serialise the wgmmas (C7520).
        named_sync(1, 128);
        if (tid == 0) issue_kv(tl, n - 1 + STAGES, jb_begin + it - 1 + STAGES);
      }
      if (rescale) {  // (never on the first block: O is zero)
#pragma unroll
        for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
          for (int c = 0; c < 8; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[sl][4 * c + e] *= corr[e >> 1];
      }
      // P_j in the A-register layout of a 64 x 16 step: keys 16kk..16kk+15 are
      // the score groups n = 2kk, 2kk + 1.
#pragma unroll
      for (int kk = 0; kk < BNB / 16; ++kk) {
        pa[kk][0] = Elem<T>::pack(s[8 * kk + 0], s[8 * kk + 1]);
        pa[kk][1] = Elem<T>::pack(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = Elem<T>::pack(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = Elem<T>::pack(s[8 * kk + 6], s[8 * kk + 7]);
      }
    };
    // (Between blocks no wgmma is in flight: the branches below do not split a wgmma sequence.)
    const std::false_type whole{};
    const int nwhole = nblk - (half_last ? 1 : 0);
    if (nwhole > 0) {
      block(0, std::true_type{}, whole);
      // One block (ONE_BLOCK): no loop, so the compiler sees no P_{j-1} live beside S_j.
      if constexpr (!Tr::ONE_BLOCK)
        for (int it = 1; it < nwhole; ++it) block(it, std::false_type{}, whole);
    }
    if constexpr (kHalfOk) {
      if (half_last) {
        if (nblk == 1) block(0, std::true_type{}, std::true_type{});
        else block(nblk - 1, std::false_type{}, std::true_type{});
      }
    }
    const int st_last = (n0 + nblk + STAGES - 1) % STAGES;  // the stage of the tile's last block
    if (nblk > 0) {  // the last block's P V
      if constexpr (Tr::SPLIT_KV) mbar_wait(bar_vfull + 8 * st_last, ((n0 + nblk - 1) / STAGES) & 1);
      auto last_pv = [&](auto half_block) {
        wgmma_fence();
        issue_pv(st_last, half_block);
        wgmma_wait<0>();
      };
      if constexpr (kHalfOk) {
        if (half_last) last_pv(std::true_type{});
        else last_pv(whole);
      } else {
        last_pv(whole);
      }
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl) fence_regs(o[sl]);
    }
    n0 += nblk;

    // Epilogue: normalise, write O and LSE. o[sl][4n + e]: row g + 8(e >> 1), column 64 sl + 8n + 2tq + (e & 1).
    // With maps.o_store, O goes through shared memory and out by one TMA store per slab, which clips rows
    // past nq and columns past dv; otherwise each thread stores its pairs. The staging rows: this
    // warpgroup's Q rows (free since its last S GEMM; the same swizzled slabs), or, persistent, its rows of
    // the last block's K (once every consumer is past that block's S GEMM), so that the next tile's Q can
    // load while this one ends; that stage goes back to the producer after the store has read it.
    T* go = static_cast<T*>(p.o);
    const int dv = p.head_dim_v;
    const bool staged = maps.o_store != 0;
    const uint32_t o_rows = Tr::PERSIST ? sKV + st_last * Tr::kKVBytes + cw * 64 * 128 : q_rows;
    constexpr uint32_t kOSlab = Tr::PERSIST ? BN * 128 : BM * 128;
    float sums[2], invs[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sums[r] = sum;
      invs[r] = !(sum > 0.f) || m[r] == -INFINITY ? 0.f : 1.f / sum;
    }
    if constexpr (Tr::PERSIST) mbar_wait(bar_qfree, k & 1);  // the other consumer's last S GEMM has read K
    if (staged) stage_acc_tile<T, SLABS>(o_rows, kOSlab, warp, lane, o, invs);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = sums[r], inv = invs[r];
      const int i = row_i[r];
      if (i >= nq) continue;
      if (!staged) {
        const int64_t orow = row_offset(p, b, tl.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
#pragma unroll
        for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
          for (int c = 0; c < 8; ++c) {
            const int col = sl * 64 + c * 8 + 2 * tq;
            if (col < dv)  // dv % 8 == 0: the pair is in or out together
              *reinterpret_cast<uint32_t*>(go + orow + col) =
                  Elem<T>::pack(o[sl][4 * c + 2 * r] * inv, o[sl][4 * c + 2 * r + 1] * inv);
          }
      }
      if (tq == 0) p.lse[lse_index(p, b, h, tl.q0, i)] = row_lse(m[r], sum);
    }
    // Persistent without a producer: the consumer's thread 0 loads the next tile's Q and its first key
    // blocks (ring slots n0 .. n0 + STAGES - 1, n0 now the next tile's first) once every warp is past this
    // tile's last GEMM (the epilogue's barrier): Q and the slots on stages other than st_last at once, the
    // slot on st_last once the O store has read it. The block loop refills the rest.
    constexpr bool kLoadNext = Tr::PERSIST && !Tr::PRODUCER;
    auto load_next = [&](bool with_q, int i_begin, int i_end) {
      const FwdTile nx = tile_at<Tr>(p, t_next, a.causal_chunk);
      if (with_q) issue_q(nx);
      for (int i = i_begin; i < i_end && i < nx.nblk; ++i) issue_kv(nx, n0 + i, nx.jb_begin + i);
    };
    if (staged) {
      fence_proxy_async();  // the stores above become visible to the copy engine
      named_sync(epilogue_bar<Tr>(cw), 128);
      if ((tid & 127) == 0) {
        if (kLoadNext && !last_tile) load_next(true, 0, STAGES - 1);
#pragma unroll
        for (int sl = 0; sl < SLABS; ++sl)
          tma_store_4d(&maps.o, o_rows + sl * kOSlab, sl * 64, tl.qrow0 + cw * 64, h, tl.bcoord);
        bulk_commit();
        bulk_wait_read<0>();  // shared memory must outlive the copy's reads
        // (persistent: the last block's stage is free now, for all four warps of this warpgroup)
        if constexpr (Tr::PERSIST && Tr::PRODUCER) mbar_arrive_cnt(bar_empty + 8 * st_last, 4);
        if (kLoadNext && !last_tile) load_next(false, STAGES - 1, STAGES);
      }
    } else if constexpr (Tr::PERSIST) {  // (the launcher stages every persistent call; kept for safety)
      if constexpr (Tr::PRODUCER) {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar_empty + 8 * st_last);
      } else {
        named_sync(epilogue_bar<Tr>(cw), 128);
        if (tid == 0 && !last_tile) load_next(true, 0, STAGES);
      }
    }
    if constexpr (!Tr::PERSIST) break;
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
