// Hopper forward (sm_90a), warp-specialised. One CTA per BM = 64 * NCONS
// query rows of one (head, sequence): warpgroup 0 is the producer (one thread
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

#include "acc_tile.cuh"
#include "mma.cuh"
#include "score_mod.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace tessera::attention::cuda::sm90 {

// D: head dim (64 or 128); BN: keys per block; STAGES: depth of the K/V ring;
// NCONS: consumer warpgroups (1, 2 or 3: FA3 takes 3 at d64, here it measured
// slower); PINGPONG: the consumers take turns issuing their GEMMs (faster in
// every measured configuration with two); MINB: CTAs per SM (with one
// consumer, two or three small CTAs share an SM, so one's loads, softmax and
// epilogue overlap another's GEMMs without coordination, which pays where
// tiles are short); PRODUCER false (one consumer only): no producer
// warpgroup, the consumer's first thread issues the loads, refilling a stage
// once all four warps have freed it, so more CTAs fit an SM. STAGES 1 (one
// consumer, no producer): no ring, every row's keys fit one block of BN keys
// (the launcher checks), so BN can be sized to a short row (208 for ViT's 197
// tokens, where 128-key blocks would compute 256). Timings:
// bench/CUDA_NOTES.md "Variants".
template <typename T, int D_, int BN_, int STAGES_, int NCONS_ = 2, bool PINGPONG_ = true, int MINB_ = 1,
          bool PRODUCER_ = true>
struct FwdSm90Traits {
  using Elt = T;
  static constexpr int D = D_, BN = BN_, STAGES = STAGES_, NCONS = NCONS_, MINB = MINB_;
  static constexpr bool PINGPONG = PINGPONG_, PRODUCER = PRODUCER_;
  static constexpr int BM = 64 * NCONS, NTHREADS = 128 * (NCONS + (PRODUCER ? 1 : 0));
  static constexpr int SLABS = D / 64;  // 64-column slabs of a row
  static constexpr int kQBytes = BM * D * 2, kKVBytes = BN * D * 2;
  static constexpr int kBarOff = kQBytes + 2 * STAGES * kKVBytes;  // full[STAGES], empty[STAGES], q
  static constexpr int kSmem = kBarOff + 8 * (2 * STAGES + 1) + 1024;  // + slack to align to 1024
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

  static_assert(D == 64 || D == 128, "head dim 64 or 128");
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

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, Tr::MINB)
    fwd_sm90_kernel(const __grid_constant__ KArgs a, const __grid_constant__ FwdMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS, STAGES = Tr::STAGES;
  constexpr int NS = BN / 8;  // n8 column groups of a score row
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t sQ = s0;
  const uint32_t sKV = s0 + Tr::kQBytes;  // stage st: K at sKV + st * kKVBytes, V at sKV + (STAGES + st) * kKVBytes
  const uint32_t bar_full = s0 + Tr::kBarOff, bar_empty = bar_full + 8 * STAGES, bar_q = bar_full + 16 * STAGES;

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  // Causal: the blocks with the most keys start first.
  const int qb = p.causal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x) : blockIdx.x;
  const int i0 = qb * BM;
  const Seq sq = seq_of(p, b);
  if (i0 >= sq.nq) return;
  const int nq = sq.nq, nk = sq.nk;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;

  const BlockKeys bk = block_keys(p, i0, BM, BN, nq, nk);
  const KeyRange kr_first = bk.first, kr_last = bk.last;
  const int jb_begin = bk.jb_begin, jb_end = bk.jb_end;
  const bool rows_full = i0 + BM <= nq;

  if (tid == 0) {
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(bar_full + 8 * st, 1);
      mbar_init(bar_empty + 8 * st, 4 * Tr::NCONS);  // one arrival per consumer warp
    }
    mbar_init(bar_q, 1);
    fence_mbar_init();
  }
  __syncthreads();

  // Tensor-map coordinates: varlen rows are global rows of a batch of one.
  const int bcoord = p.cu_seqlens_q ? 0 : b;
  const int qrow0 = static_cast<int>(sq.q0) + i0, krow0 = static_cast<int>(sq.k0);

  // Q, and key block n (counted from jb_begin) into stage n % STAGES once the consumers
  // have freed it (the producer waits for that on the stage's mbarrier; without one, the
  // consumer refills a stage only after it has freed it); one thread.
  auto issue_q = [&] {
    mbar_expect_tx(bar_q, Tr::kQBytes);
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) tma_load_4d(sQ + sl * (BM * 128), &maps.q, bar_q, sl * 64, qrow0, h, bcoord);
  };
  auto issue_kv = [&](int n) {
    const int st = n % STAGES, jb = jb_begin + n;
    if (Tr::PRODUCER && n >= STAGES) mbar_wait_sleepy(bar_empty + 8 * st, ((n / STAGES) - 1) & 1);
    const uint32_t full = bar_full + 8 * st;
    mbar_expect_tx(full, 2 * Tr::kKVBytes);
    const uint32_t sK = sKV + st * Tr::kKVBytes, sV = sKV + (STAGES + st) * Tr::kKVBytes;
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) {
      tma_load_4d(sK + sl * (BN * 128), &maps.k, full, sl * 64, krow0 + jb * BN, hk, bcoord);
      tma_load_4d(sV + sl * (BN * 128), &maps.v, full, sl * 64, krow0 + jb * BN, hk, bcoord);
    }
  };
  const int nblk = jb_end - jb_begin;

  if constexpr (Tr::PRODUCER) {
    if (wg == 0) {
      // ---- producer ----
      setmaxnreg_dec<Tr::kProducerRegs>();
      if (tid == 0) {
        issue_q();
        for (int n = 0; n < nblk; ++n) issue_kv(n);
      }
      return;
    }
    setmaxnreg_inc<Tr::kConsumerRegs>();
  } else if (tid == 0) {  // the ring's first fill; the loop below refills it
    issue_q();
    for (int n = 0; n < nblk && n < STAGES; ++n) issue_kv(n);
  }

  // ---- consumers: warpgroup cw owns rows 64 cw .. 64 cw + 63 of the block ----
  const int cw = Tr::PRODUCER ? wg - 1 : 0;
  const int g = lane >> 2, tq = lane & 3;
  // This thread's rows: r -> i0 + 64 cw + 16 warp + g + 8 r.
  int row_i[2], row_lo[2], row_hi[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + cw * 64 + warp * 16 + g + 8 * r;
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
  const uint32_t q_rows = sQ + cw * 64 * 128;  // this warpgroup's 64 rows inside each Q slab

  // O += P V for the key block in stage st: per 16 keys, one m64n64k16 per
  // 64-column slab of V (rows of V are the K dimension: 16 rows = 2048 bytes).
  auto issue_pv = [&](int st) {
    gemm_rs_mn(o, pa, sKV + (STAGES + st) * Tr::kKVBytes, BN * 128, Tag<T>{});
    wgmma_commit();
  };

  mbar_wait(bar_q, 0);
  const Turns<Tr> turns{cw};
  turns.open_first(nblk);
  // Schedule per key block j: issue S_j = Q K_j^T, issue O += P_{j-1} V_{j-1},
  // wait for S_j only; the softmax of S_j runs while the tensor cores do
  // P_{j-1} V_{j-1}; then wait for that, hand its stage back to the producer,
  // rescale O and form P_j.
  for (int jb = jb_begin; jb < jb_end; ++jb) {
    const int it = jb - jb_begin, st = it % STAGES;
    const int j0 = jb * BN;
    mbar_wait(bar_full + 8 * st, (it / STAGES) & 1);
    const uint32_t sK = sKV + st * Tr::kKVBytes;

    // S = Q K^T.
    float s[BN / 2];
    turns.wait();
    wgmma_fence();
    gemm_ss_kmajor<D / 16>(s, q_rows, BM * 128, sK, BN * 128, Tag<T>{});
    wgmma_commit();
    if (it > 0) issue_pv((it + STAGES - 1) % STAGES);
    else wgmma_commit();  // an empty group, so that S_j is always the older of two
    turns.pass(it == nblk - 1);  // the next consumer's turn
    wgmma_wait<1>();
    fence_regs(s);

    // Raw scores, masked (scale > 0, so the max commutes with scaling).
    // s[4n + e]: row g + 8(e >> 1), key j0 + 8n + 2tq + (e & 1).
    const bool full = rows_full && j0 >= kr_last.lo && j0 + BN <= kr_first.hi;
    if (!full) {
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, j = j0 + n * 8 + 2 * tq + (e & 1);
          if (j < row_lo[r] || j >= row_hi[r]) s[4 * n + e] = -INFINITY;
        }
    }

    // Online softmax on S_j in log2 units: p = 2^(s * scale_log2 - m), one FFMA and one ex2 per score.
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(m[r], mx * a.scale_log2);
      const float m_use = mx == -INFINITY ? 0.f : mx;
      corr[r] = fast_exp2(m[r] - m_use);
      m[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < NS; ++n) {
        s[4 * n + 2 * r] = fast_exp2(fmaf(s[4 * n + 2 * r], a.scale_log2, -m_use));
        s[4 * n + 2 * r + 1] = fast_exp2(fmaf(s[4 * n + 2 * r + 1], a.scale_log2, -m_use));
        sum += s[4 * n + 2 * r] + s[4 * n + 2 * r + 1];
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
      if (it > 0) {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar_empty + 8 * ((it + STAGES - 1) % STAGES));
      }
    } else if (it > 0 && it - 1 + STAGES < nblk) {
      // Refill that stage once all four warps are done with it. A named barrier, not the
      // stage's mbarrier: a wait loop in one thread's branch made ptxas serialise the wgmmas (C7520).
      named_sync(1, 128);
      if (tid == 0) issue_kv(it - 1 + STAGES);
    }
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[sl][4 * n + e] *= corr[e >> 1];
    // P_j in the A-register layout of a 64 x 16 step: keys 16kk..16kk+15 are
    // the score groups n = 2kk, 2kk + 1.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = Elem<T>::pack(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = Elem<T>::pack(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = Elem<T>::pack(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = Elem<T>::pack(s[8 * kk + 6], s[8 * kk + 7]);
    }
    // One block: the loop is an if, so the compiler sees no P_{j-1} live beside S_j.
    if constexpr (Tr::ONE_BLOCK) break;
  }
  if (jb_end > jb_begin) {  // the last block's P V
    wgmma_fence();
    issue_pv((jb_end - 1 - jb_begin) % STAGES);
    wgmma_wait<0>();
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) fence_regs(o[sl]);
  }

  // Epilogue: normalise, write O and LSE. o[sl][4n + e]: row g + 8(e >> 1), column 64 sl + 8n + 2tq + (e & 1).
  // With maps.o_store, O goes through this warpgroup's Q rows in shared memory (free since its last
  // S GEMM; the same swizzled slabs) and out by one TMA store per slab, which clips rows past nq and
  // columns past dv; otherwise each thread stores its pairs.
  T* go = static_cast<T*>(p.o);
  const int dv = p.head_dim_v;
  const bool staged = maps.o_store != 0;
  float sums[2], invs[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sums[r] = sum;
    invs[r] = !(sum > 0.f) || m[r] == -INFINITY ? 0.f : 1.f / sum;
  }
  if (staged) stage_acc_tile<T, SLABS>(q_rows, BM * 128, warp, lane, o, invs);  // (this warpgroup's Q rows)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = sums[r], inv = invs[r];
    const int i = row_i[r];
    const bool empty = !(sum > 0.f) || m[r] == -INFINITY;
    if (i >= nq) continue;
    if (!staged) {
      const int64_t orow = row_off(p, b, sq.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const int c = sl * 64 + n * 8 + 2 * tq;
          if (c < dv)  // dv % 8 == 0: the pair is in or out together
            *reinterpret_cast<uint32_t*>(go + orow + c) =
                Elem<T>::pack(o[sl][4 * n + 2 * r] * inv, o[sl][4 * n + 2 * r + 1] * inv);
        }
    }
    if (tq == 0) p.lse[lse_idx(p, b, h, sq.q0, i)] = empty ? -INFINITY : (m[r] + log2f(sum)) * kLn2;
  }
  if (staged) {
    fence_proxy_async();  // the stores above become visible to the copy engine
    named_sync(epilogue_bar<Tr>(cw), 128);
    if ((tid & 127) == 0) {
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl)
        tma_store_4d(&maps.o, q_rows + sl * (BM * 128), sl * 64, qrow0 + cw * 64, h, bcoord);
      bulk_commit();
      bulk_wait_read<0>();  // the CTA's shared memory must outlive the copy's reads
    }
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
