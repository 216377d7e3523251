// Backward, main pass: one CTA per (key block, kv head, sequence). K and V
// stay in shared memory; the CTA loops over the query heads of its GQA group
// and over the query blocks that see its keys, recomputes P^T from LSE and
// accumulates dK and dV in registers (no atomics). dQ goes into an fp32
// workspace with atomics (non-deterministic mode), dBias likewise.
//
// Per query block (Q, dO and the block's LSE / D double-buffered through cp.async):
//   S^T = K Q^T, P^T = exp(S^T - lse) -> shared   (warp tile of BN x BM)
//   dP^T = V dO^T, dS^T = P^T (dP^T - D) -> shared (P^T kept in registers, S^T's)
//   dV += P^T dO, dK += dS^T Q, dQ_acc += dS K    (warp tiles of BN x D, BM x D)
// Only one BN x BM fp32 tile pair (P^T, dP^T) is live per warp at a time; LSE / D
// are read from shared memory where they are used, not held across the GEMMs.
#pragma once

#include <type_traits>

#include "kernels/sm80/bias_pack.cuh"
#include "primitives/ldsm_addr.cuh"
#include "primitives/dq_atomic.cuh"
#include "score_mod.cuh"
#include "primitives/tile_io.cuh"
#include "kernels/sm80/win_dq.cuh"
#include "kernels/sm80/win_stats.cuh"

namespace tessera::attention::cuda {


// A lane's offsets of its S^T fragment element pairs (m tile mt, n tile nt, row half e2) in the P^T /
// dS^T tiles (Swz<CP>: rows of CP chunks): row m0 + 16 mt + g + 8 e2, columns n0 + 8 nt + 2 tq. With m0 a
// multiple of 16 the row's swizzle key is key(g) for every mt and e2, and with n0 a multiple of 8 NT (NT a
// power of two) the chunk (n0 / 8 + nt) ^ key is (n0 / 8 ^ key) ^ nt: a lane constant, a compile-time
// XOR and a compile-time row offset, where Swz<CP>::off re-derived row, key and chunk for every store.
template <int CP>
struct FragPairOff {
  int base, x8;  // row m0 + g, column 2 tq; (n0 / 8 ^ key(g)) * 8
  __host__ __device__ __forceinline__ FragPairOff(int m0, int n0, int lane)
      : base((m0 + (lane >> 2)) * CP * 8 + 2 * (lane & 3)), x8(((n0 >> 3) ^ SwzKey<CP>::key(lane >> 2)) << 3) {}
  __host__ __device__ __forceinline__ int at(int mt, int nt, int e2) const {
    return base + (mt * 16 + 8 * e2) * CP * 8 + (x8 ^ (nt << 3));
  }
};

// The same tiles written with stmatrix.x4 (sm_90): per m tile mt and pair np of n tiles (2 np, 2 np + 1)
// the four 8 x 8 matrices (rows 0-7, n tile 2 np), (rows 8-15, 2 np), (rows 0-7, 2 np + 1), (rows 8-15,
// 2 np + 1); lane l gives the address of row l & 7 of matrix l >> 3: row m0 + 16 mt + 8 ((l >> 3) & 1) +
// (l & 7), whose key is key(l & 7), and chunk (n0 / 8 + 2 np + (l >> 4)) ^ key = ((n0 / 8 + (l >> 4)) ^
// key) ^ 2 np (n0 / 8 a multiple of NT, 2 np + 1 < NT): one store per 4 words instead of 4, from a lane
// constant and compile-time terms (element offsets; tests/gpu/bwd_swz_test.cu checks them).
template <int CP>
struct FragQuadOff {
  int base;  // row m0 + 8 ((l >> 3) & 1) + (l & 7), chunk ((n0 / 8 + (l >> 4)) ^ key)
  __host__ __device__ __forceinline__ FragQuadOff(int m0, int n0, int lane)
      : base((m0 + 8 * ((lane >> 3) & 1) + (lane & 7)) * CP * 8 +
             ((((n0 >> 3) + (lane >> 4)) ^ SwzKey<CP>::key(lane & 7)) << 3)) {}
  __host__ __device__ __forceinline__ int at(int mt, int np) const { return (base + mt * 16 * CP * 8) ^ (np << 4); }
};

// A warp's S^T-shaped fragments (packed 16-bit pairs) into the P^T or dS^T tile: put() each word (m tile,
// n tile, row half), flush(nt) after the words of n tiles nt - 1 and nt (nt odd). sm_90: one stmatrix.x4
// per m tile and pair (the words wait in w); before: one 32-bit store per word.
template <typename T, int CP, int MT, bool STM = TESSERA_STMATRIX>
struct FragTileStore {
  static_assert(!STM || TESSERA_STMATRIX, "stmatrix: sm_90");
  T* tile;
  uint32_t utile;
  FragPairOff<CP> o;
  FragQuadOff<CP> q;
  uint32_t w[MT][2][2];
  __device__ __forceinline__ FragTileStore(T* tile_, uint32_t utile_, int m0, int n0, int lane)
      : tile(tile_), utile(utile_), o(m0, n0, lane), q(m0, n0, lane) {}
  __device__ __forceinline__ void put(int mt, int nt, int e2, uint32_t word) {
    if constexpr (STM) w[mt][nt & 1][e2] = word;
    else *reinterpret_cast<uint32_t*>(tile + o.at(mt, nt, e2)) = word;
  }
  __device__ __forceinline__ void flush(int nt) {
#if TESSERA_STMATRIX
    if constexpr (STM) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        stmatrix_x4(utile + 2 * q.at(mt, nt >> 1), w[mt][0][0], w[mt][0][1], w[mt][1][0], w[mt][1][1]);
    }
#endif
    (void)nt;
  }
};

// acc[MT][NT] += A * B over K (16-bit T); A / B are OpK (row-major in k) or OpT.
template <typename T, int MT, int NT, int K, typename OA, typename OB>
__device__ __forceinline__ void bwd_gemm(float (&acc)[MT][NT][4], const OA& A, const OB& B) {
  static_assert(sizeof(T) == 2, "16-bit operands");
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (OA::kTrans) ldmatrix_x4_trans(a[mt], A.at(2 * mt, ks));
      else ldmatrix_x4(a[mt], A.at(16 * mt, ks));
    }
#pragma unroll
    for (int nt = 0; nt + 1 < NT; nt += 2) {
      uint32_t bb[4];
      if constexpr (OB::kTrans) ldmatrix_x4_trans(bb, B.at(nt, ks));
      else ldmatrix_x4(bb, B.at(8 * nt, ks));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(acc[mt][nt], a[mt], bb[0], bb[1]);
        mma16816<T>(acc[mt][nt + 1], a[mt], bb[2], bb[3]);
      }
    }
    if constexpr (NT % 2 == 1) {
      uint32_t bb[2];
      if constexpr (OB::kTrans) ldmatrix_x2_trans(bb, B.at(NT - 1, ks));
      else ldmatrix_x2(bb, B.at(8 * (NT - 1), ks));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma16816<T>(acc[mt][NT - 1], a[mt], bb[0], bb[1]);
    }
  }
}

template <int ROWS, int COLS, int NW, int WM_ = ((ROWS / 16) < NW ? (ROWS / 16) : NW)>
struct WarpGrid {  // warps tile a ROWS x COLS output as WM x WN
  static constexpr int WM = WM_;
  static constexpr int WN = NW / WM;
  static constexpr int MT = ROWS / 16 / WM;
  static constexpr int NT = COLS / 8 / WN;
  static_assert(WM * WN == NW && MT * WM * 16 == ROWS && NT * WN * 8 == COLS, "warp grid");
  static __device__ __forceinline__ int m0(int warp) { return (warp / WN) * MT * 16; }  // warp tile origin
  static __device__ __forceinline__ int n0(int warp) { return (warp % WN) * NT * 8; }
};

// WS / WKV / WQ: warps along the rows of the S^T, dK/dV and dQ tiles (0 = as many as fit).
// MINB / MINB_MODS: CTAs per SM that the register allocation of the plain / MODS
// kernel must allow (__launch_bounds__; 1 = no constraint).
template <typename T, int D_, int NW_, int BN_, int BM_, int WS_ = 0, int WKV_ = 0, int WQ_ = 0, int MINB_ = 1,
          int MINB_MODS_ = MINB_>
struct BwdTraits {
  static constexpr int D = D_, NW = NW_, BN = BN_, BM = BM_, C = D_ / 8, CP = BM_ / 8;
  static constexpr int MINB = MINB_, MINB_MODS = MINB_MODS_;
  static constexpr int dflt(int rows) { return rows / 16 < NW ? rows / 16 : NW; }
  using GS = WarpGrid<BN, BM, NW, WS_ ? WS_ : dflt(BN)>;    // S^T, dP^T
  using GKV = WarpGrid<BN, D, NW, WKV_ ? WKV_ : dflt(BN)>;  // dK, dV
  using GQ = WarpGrid<BM, D, NW, WQ_ ? WQ_ : dflt(BM)>;     // dQ
  static_assert(GS::NT % 2 == 0, "packed bias tiles are 16 query rows wide");
  static_assert((GS::NT & (GS::NT - 1)) == 0, "FragPairOff: n tiles per warp a power of two");
  // K, V, Q[2], dO[2], P^T, dS^T (T), then LSE[2][BM], D[2][BM] (fp32)
  static constexpr int kSmem = (2 * BN * D + 4 * BM * D + 2 * BN * BM) * sizeof(T) + 4 * BM * sizeof(float);
  // kModsBias: packed 16-bit bias tiles staged in shared memory, 16 bytes per thread, term and
  // 16 x 16 tile of the warp's S^T. One stage where that fits one more CTA per SM than two
  // (d16: 4 instead of 3), else two; where neither fits (d128 and up) kModsAll runs instead.
  static constexpr int kBiasChunks = 2 * GS::MT * (GS::NT / 2);
  static constexpr int kBiasStageBytes = kBiasChunks * NW * 32 * 16;
  static constexpr int ctas_per_sm(int smem) { return (228 * 1024) / (smem + 1024); }
  static constexpr int kBiasStages =
      ctas_per_sm(kSmem + kBiasStageBytes) > ctas_per_sm(kSmem + 2 * kBiasStageBytes) ? 1 : 2;
  static constexpr int kSmemBias = kSmem + kBiasStages * kBiasStageBytes;
  static constexpr bool kBiasStaged = kSmemBias <= 227 * 1024;
  static constexpr int MINB_BIAS = kBiasStages == 1 ? MINB_ : MINB_MODS_;
  // LEAN: warp tiles wholly past the sequence's end skip their work (-1: where it was measured to pay, d16;
  // 0 / 1: off / on, for A / B timing through traits derived from these: attention_cuda_tune swin-ab)
  static constexpr int kSkipEmpty = -1;
  // sm_90: P^T / dS^T written with stmatrix (FragTileStore; -1: yes, 0: 32-bit stores, for A / B timing)
  static constexpr int kStMatrix = -1;
};

// MODS: kModsNone, kModsBias (packed 16-bit bias terms only, Tr::kBiasStaged) or kModsAll.
// LEAN (MODS != kModsAll, bwd_lean_ok): many short dense sequences such as Swin windows, where
// the general kernel's per-block index arithmetic outweighs its d16 / d32 GEMMs. No varlen,
// causal or window; 16-byte aligned rows, head dims equal to D; lse / D from the row
// statistics (log2 units); one exponential path for every block (a key row past the end gets
// -inf, a query column +inf lse); bias tile offsets from per-CTA values.
// WIN (LEAN, a.win: bwd_win_ok): one CTA per sequence and head walks every key block of a short
// sequence (Swin: 3 of 128 keys), so dQ accumulates in shared memory (fp32, no atomics) and is
// written once in the element type, and lse / D of every row are computed at the start from O and
// dO: no dQ accumulator, row-statistics pass, memsets or dQ conversion around the kernel. One bias
// stage (two would leave one CTA per SM); K / V are reloaded at a key block's start (the other CTA
// on the SM covers the wait). Heads equal (G = 1).
template <typename T, typename Tr, int MODS, bool LEAN = false, bool WIN = false>
__global__ void __launch_bounds__(Tr::NW * 32, MODS == kModsNone ? Tr::MINB
                                                : MODS == kModsBias ? Tr::MINB_BIAS : Tr::MINB_MODS)
    bwd_kernel(const __grid_constant__ KArgs a) {
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, C = Tr::C, CP = Tr::CP;
  constexpr int NTHREADS = Tr::NW * 32;
  using GS = typename Tr::GS;
  using GKV = typename Tr::GKV;
  using GQ = typename Tr::GQ;
  extern __shared__ uint4 smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ = sV + BN * D;      // [2][BM*D]
  T* sdO = sQ + 2 * BM * D; // [2][BM*D]
  T* sP = sdO + 2 * BM * D; // [BN][BM]
  T* sdS = sP + BN * BM;    // [BN][BM]
  float* sL = reinterpret_cast<float*>(sdS + BN * BM);  // [2][BM] lse of the block's query rows (raw)
  float* sDv = sL + 2 * BM;                             // [2][BM] D = rowsum(dO*O) - dlse
  uint4* sB = reinterpret_cast<uint4*>(sDv + 2 * BM);   // [kBiasStages][kBiasChunks][NTHREADS] (kModsBias)
  static_assert(!WIN || LEAN, "WIN is a form of LEAN");
  constexpr int kStages = WIN ? 1 : Tr::kBiasStages;
  // warp tiles wholly past the end skip their work (s_live; BwdTraits::kSkipEmpty): at d16, where it pays
  constexpr bool kSkipEmpty = LEAN && (Tr::kSkipEmpty >= 0 ? Tr::kSkipEmpty == 1 : D == 16);
  using FragStore = FragTileStore<T, CP, GS::MT, TESSERA_STMATRIX && Tr::kStMatrix != 0>;  // P^T / dS^T
  auto bias_chunk = [&](int stage, int c, int t) {
    return sB + ((kStages == 1 ? 0 : stage) * Tr::kBiasChunks + c) * NTHREADS + t;
  };
  // WIN: dQ [rows][D] fp32, then lse (log2 units) and D of every row, rows = the query blocks' (win_smem)
  float* sdQ = reinterpret_cast<float*>(sB + (MODS == kModsBias ? kStages * Tr::kBiasChunks * NTHREADS : 0));

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, hk = blockIdx.y;
  int j0 = WIN ? 0 : blockIdx.x * BN;  // WIN: set below and advanced after a key block's last query block
  const SeqSpan sq = LEAN ? SeqSpan{0, 0, p.seqlen_q, p.seqlen_k} : seq_span(p, b);
  if (j0 >= sq.nk) return;
  const int nq = sq.nq, nk = sq.nk;
  const int G = p.heads_q / p.heads_kv;
  const int tid = threadIdx.x;
  const bool vec = LEAN || a.vec_ok;
  const int dqk = LEAN ? D : p.head_dim, dvo = LEAN ? D : p.head_dim_v;  // LEAN: no column masking

  int i_lo = 0, i_hi = nq;
  if constexpr (!LEAN) rows_seeing(p, nq, nk, j0, min(j0 + BN, nk), i_lo, i_hi);
  const int qb_begin = i_lo / BM;
  const int nqb = i_hi > i_lo ? (i_hi + BM - 1) / BM - qb_begin : 0;
  const int iters = WIN ? nqb * ((nk + BN - 1) / BN) : G * nqb;
  float* sLw = sdQ + nqb * BM * D;  // WIN
  float* sDw = sLw + nqb * BM;
  // WIN: the walk over key blocks and, in each, query blocks starts at blocks rotated by the sequence
  // index, wrapping around: the CTAs running at once (neighbouring windows, every window of a head adding
  // into the same relative-bias dBias tiles) then add into different tiles instead of all into the same.
  // win_next: the block after i (or j) in a walk of n rows (or keys) by `step`.
  auto win_next = [](int x, int step, int n) { return x + step >= n ? 0 : x + step; };
  int win_qc = 0, win_i0 = 0;  // query blocks done in the current key block, the first query block
  if constexpr (WIN) {
    const int nkb = (nk + BN - 1) / BN;
    j0 = (b % nkb) * BN;
    if (nqb > 0) win_i0 = ((b / nkb) % nqb) * BM;
  }

  auto load_kv = [&](int jk) {  // the key block at jk
    const T* gk = static_cast<const T*>(p.k) + row_offset(p, b, sq.k0, jk, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
    const T* gv = static_cast<const T*>(p.v) + row_offset(p, b, sq.k0, jk, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
    load_tile<BN, C, NTHREADS>(sK, gk, p.k_row_stride, nk - jk, dqk, vec, tid);
    load_tile<BN, C, NTHREADS>(sV, gv, p.v_row_stride, nk - jk, dvo, vec, tid);
  };
  load_kv(j0);

  // LEAN: per bias term, this sequence's slice and the first query head's, kept in registers
  // (what the general kernel re-derives from the parameters for every chunk it copies).
  int lean_bslice[2] = {0, 0}, lean_hslice[2] = {0, 0};
  if constexpr (LEAN && MODS == kModsBias) {
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (t >= p.num_bias) break;
      const BiasTerm& bt = p.bias[t];
      lean_bslice[t] = (bt.batch_stride ? static_cast<int>(a.pk[t].bmod.mod(b)) : 0) * bias_head_slices(bt);
      lean_hslice[t] = bt.head_stride ? static_cast<int>(a.pk[t].hmod.mod(hk * G)) : 0;
    }
  }
  // kModsBias: a last term that is zero over the CTA's slice (and has no gradient) is left out
  // (terms_read); a slice that changes with the query head inside the CTA counts as live.
  int nb = p.num_bias;
  if constexpr (MODS == kModsBias) {
    nb = terms_read<true>(a, [&](int t) {
      const BiasTerm& bt = p.bias[t];
      if (G > 1 && bt.head_stride) return -1;
      if constexpr (LEAN) return lean_bslice[t] + lean_hslice[t];
      return packed_slice(bt, a.pk[t], b, hk * G);
    });
  }
  // The bias adds run on the tensor cores (mma_add_tile16) where every slice the CTA reads is
  // finite: S^T is then scaled to natural units and log2 e moves into the exponentials' argument.
  // (d16 / d32, where it was measured)
  constexpr bool kBiasMma = MODS == kModsBias && D <= 32;
  bool bias_mma = false;
  if constexpr (kBiasMma) {
    bias_mma = true;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (t >= nb) break;
      const int nh = G > 1 && p.bias[t].head_stride ? G : 1;
      for (int gi = 0; gi < nh; ++gi)
        bias_mma = bias_mma && bias_mma_ok<T>(a, t, packed_slice(p.bias[t], a.pk[t], b, hk * G + gi));
    }
  }
  // LEAN: first packed tile row of term t's slice for query head h, and packed_off in 32 bits from
  // it (packed extents stay below 2^31 elements; R and C already in range)
  auto lean_slice_row = [&](int t, int h) {
    const BiasTerm& bt = p.bias[t];
    // (WIN: heads equal, so the CTA's slice: no modulo path in the code)
    const int hs = WIN || G == 1 || !bt.head_stride ? lean_hslice[t] : static_cast<int>(a.pk[t].hmod.mod(h));
    return (lean_bslice[t] + hs) * a.pk[t].rt;
  };
  auto lean_off = [](const PackedBias& pk, int slice_row, int R, int C, int lane) {
    return ((slice_row + R) * pk.ct + C) * 256 + lane * 8;
  };
  // query block `it` of the loop: head h, first row i0
  auto block_of = [&](int it, int& h, int& i0) {
    h = hk * G + it / nqb;
    i0 = (qb_begin + it % nqb) * BM;
  };
  // LEAN (dense [B, N, H, D], no varlen): Q / dO rows of query block i0 without row_off's varlen test
  // and sequence-start term (a tenth of the WIN kernel's instructions otherwise). (Not held across the
  // loop as two per-CTA pointers: the d16 WIN kernel spilled then.)
  auto load_q = [&](int h, int i0, int jn, int buf, int tid) {
    const T* gq = static_cast<const T*>(p.q);
    const T* gdo = static_cast<const T*>(p.dout);
    if constexpr (LEAN) {
      gq += static_cast<int64_t>(b) * p.q_batch_stride + static_cast<int64_t>(i0) * p.q_row_stride +
            static_cast<int64_t>(h) * p.q_head_stride;
      gdo += static_cast<int64_t>(b) * p.do_batch_stride + static_cast<int64_t>(i0) * p.do_row_stride +
             static_cast<int64_t>(h) * p.do_head_stride;
    } else {
      gq += row_offset(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
      gdo += row_offset(p, b, sq.q0, i0, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
    }
    load_tile<BM, C, NTHREADS>(sQ + buf * BM * D, gq, p.q_row_stride, nq - i0, dqk, vec, tid);
    load_tile<BM, C, NTHREADS>(sdO + buf * BM * D, gdo, p.do_row_stride, nq - i0, dvo, vec, tid);
    if constexpr (WIN) {
      // (lse and D: the prologue's)
    } else if constexpr (LEAN) {
      // lse * log2 e and D of rows i0.. from the row statistics (a run may be read up to a
      // block past its end: the plane's tail; those columns get +inf lse where read)
      const float* st = a.row_stats + (static_cast<int64_t>(b) * p.heads_q + h) * stat_bh_rows(p) + i0;
#pragma unroll
      for (int idx = tid; idx < 2 * BM; idx += NTHREADS) {
        const int r = idx % BM;
        cp_async4(smem_u32((idx < BM ? sL : sDv) + buf * BM + r), st + (idx < BM ? 0 : a.stat_plane) + r);
      }
    } else {
      // lse and D of rows i0.. (clamped to the last row; columns past nq are masked where read)
      for (int idx = tid; idx < 2 * BM; idx += NTHREADS) {
        const int r = idx < BM ? idx : idx - BM;
        const int64_t li = lse_index(p, b, h, sq.q0, min(i0 + r, nq - 1));
        cp_async4(smem_u32((idx < BM ? sL : sDv) + buf * BM + r), idx < BM ? p.lse + li : a.dvec + li);
      }
    }
    if constexpr (MODS == kModsBias) {
      // this thread's 16-byte chunks of the packed [key][query] tiles of its warp's S^T
      // (read back by the same thread: no barrier needed for them)
      const int warp = tid >> 5, lane = tid & 31, s_m0 = GS::m0(warp), s_n0 = GS::n0(warp);
      if (kSkipEmpty && (jn + s_m0 >= nk || i0 + s_n0 >= nq)) return;  // an empty warp tile (s_live) reads none
      if constexpr (LEAN) {
        // the stage's shared address once; chunk c adds c * NTHREADS * 16 bytes (compile-time)
        const uint32_t ub = smem_u32(bias_chunk(buf, 0, tid));
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          if (t >= nb) break;
          const PackedBias& pk = a.pk[t];
          const unsigned short* src0 = static_cast<const unsigned short*>(pk.ptr) + lane * 8;
          const int slice_row = lean_slice_row(t, h);
          const int c0 = (i0 + s_n0) >> 4;
#pragma unroll
          for (int mt = 0; mt < GS::MT; ++mt) {
            const int rowc = (slice_row + min((jn + s_m0 + mt * 16) >> 4, pk.rt - 1)) * pk.ct;
#pragma unroll
            for (int n2 = 0; n2 < GS::NT / 2; ++n2) {
              const unsigned short* src = src0 + (rowc + min(c0 + n2, pk.ct - 1)) * 256;  // (lean_off)
              cp_async16(ub + ((t * GS::MT + mt) * (GS::NT / 2) + n2) * NTHREADS * 16, src, 16);
            }
          }
        }
      } else {
        for_bias_chunks<GS::MT, GS::NT / 2>(nb, [&](int t, int mt, int n2, int c) {
          const unsigned short* src = static_cast<const unsigned short*>(a.pk[t].ptr) +
              packed_off(a.pk[t], packed_slice(p.bias[t], b, h), (jn + s_m0 + mt * 16) >> 4,
                         ((i0 + s_n0) >> 4) + n2, lane);
          cp_async16(smem_u32(bias_chunk(buf, c, tid)), src, 16);
        });
      }
    }
  };
  if (iters > 0) load_q(hk * G, WIN ? win_i0 : qb_begin * BM, j0, 0, tid);
  cp_async_commit();

  if constexpr (WIN) {  // lse and D of every row (win_stats.cuh; through the dQ area), then dQ zeroed
    win_row_stats<T, D, NTHREADS>(p, b, hk, nq, nqb * BM, reinterpret_cast<T*>(sdQ), sLw, sDw, tid);
    for (int idx = tid; idx < nqb * BM * D / 4; idx += NTHREADS)
      reinterpret_cast<float4*>(sdQ)[idx] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  float dk[GKV::MT][GKV::NT][4], dv[GKV::MT][GKV::NT][4];
  zero(dk);
  zero(dv);
  float slope = 0.f;
  const bool do_dq = LEAN || a.dq_accum != nullptr;
  // sm_90: dQ by 16-byte vector atomics where every accumulator row is 16-byte aligned
  const bool dq_vec4 = (a.dq_accum_d & 3) == 0 && (reinterpret_cast<uintptr_t>(a.dq_accum) & 15) == 0;
  (void)dq_vec4;  // unused below sm_90

  // Everything derived from the thread index (warp tile origins, ldmatrix / store /
  // cp.async offsets) is recomputed where it is used from an opaque copy of it:
  // hoisted out of the loop (the compiler's choice otherwise), each distinct offset
  // would hold a register through the whole loop (d128: spills).
  auto fresh = [tid]() {
    int t = tid;
    asm volatile("" : "+r"(t));
    return t;
  };
  const uint32_t uK = smem_u32(sK), uV = smem_u32(sV), uP = smem_u32(sP), udS = smem_u32(sdS);

  // dK (scaled), dV of the key block at j0
  auto store_dkv = [&]() {
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int kv_m0 = GKV::m0(warp), kv_n0 = GKV::n0(warp);
    T* gdk = static_cast<T*>(p.dk);
    T* gdv = static_cast<T*>(p.dv);
#pragma unroll
    for (int mt = 0; mt < GKV::MT; ++mt)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int j = j0 + kv_m0 + mt * 16 + g + 8 * e2;
        if (j >= nk) continue;
        const int64_t ok = row_offset(p, b, sq.k0, j, hk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
        const int64_t ov = row_offset(p, b, sq.k0, j, hk, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
#pragma unroll
        for (int nt = 0; nt < GKV::NT; ++nt) {
          const int c = kv_n0 + nt * 8 + 2 * tq;
          const float k0v = dk[mt][nt][2 * e2] * p.scale, k1v = dk[mt][nt][2 * e2 + 1] * p.scale;
          const float v0 = dv[mt][nt][2 * e2], v1 = dv[mt][nt][2 * e2 + 1];
          if (vec && c + 1 < dqk) {
            *reinterpret_cast<uint32_t*>(gdk + ok + c) = Elem<T>::pack(k0v, k1v);
          } else {
            if (c < dqk) gdk[ok + c] = Elem<T>::from_float(k0v);
            if (c + 1 < dqk) gdk[ok + c + 1] = Elem<T>::from_float(k1v);
          }
          if (vec && c + 1 < dvo) {
            *reinterpret_cast<uint32_t*>(gdv + ov + c) = Elem<T>::pack(v0, v1);
          } else {
            if (c < dvo) gdv[ov + c] = Elem<T>::from_float(v0);
            if (c + 1 < dvo) gdv[ov + c + 1] = Elem<T>::from_float(v1);
          }
        }
      }
  };
  int h = hk * G, i0 = WIN ? win_i0 : qb_begin * BM;  // this iteration's query block (LEAN: advanced by counting)
  for (int it = 0; it < iters; ++it) {
    const int buf = it & 1;
    if constexpr (!LEAN) block_of(it, h, i0);
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (WIN) {
      if (it > 0 && win_qc == 0) {  // a new key block (every warp is past its reads of the last one's K / V)
        load_kv(j0);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
      }
    }
    // Bias tile: kModsBias reads its staged copy (with one stage before load_q refills it: the
    // empty asm makes the values land in registers before this thread's next copies into the
    // same bytes are issued); kModsAll loads it below, before the S^T GEMM.
    float bias[MODS ? GS::MT : 1][MODS ? GS::NT : 1][4];
    // A warp whose S^T tile lies wholly past the keys' or the queries' end writes zero P^T and dS^T for
    // the GEMMs below and computes nothing else: Swin's 343 = 2 x 128 + 87 keys and 5 x 64 + 23 queries
    // leave 23 of the 144 warp tiles of a window and head empty, and their issue slots go to the other CTA.
    // (d16 only: at d32 it adds spills to the 8-warp kernels.)
    const bool s_live = !kSkipEmpty || [&] {
      const int w = fresh() >> 5;
      return j0 + GS::m0(w) < nk && i0 + GS::n0(w) < nq;
    }();
    // (bias_mma: the chunks' raw words, term t's tile (mt, n2) in bias[mt][2 n2 + t])
    auto read_bias = [&]() {
      const int tl = fresh();
      zero(bias);
      if (!s_live) return;
      if (bias_mma) {
        for_bias_chunks<GS::MT, GS::NT / 2>(nb, [&](int t, int mt, int n2, int c) {
          const uint4 u = *bias_chunk(buf, c, tl);
          float* f = bias[mt][2 * n2 + t];
          f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y);
          f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
        });
        return;
      }
      for_bias_chunks<GS::MT, GS::NT / 2>(nb, [&](int t, int mt, int n2, int c) {
        add_tile16(p.bias[t].dtype, *bias_chunk(buf, c, tl), bias[mt][2 * n2], bias[mt][2 * n2 + 1]);
      });
    };
    if constexpr (MODS == kModsBias && kStages == 1) {
      read_bias();
#pragma unroll
      for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(bias[mt][nt][e]));
    }
    if (it + 1 < iters) {
      int h1 = h, i1 = i0 + BM, j1 = j0;
      if constexpr (WIN) {
        i1 = win_next(i0, BM, nq);
        if (win_qc + 1 == nqb) j1 = win_next(j0, BN, nk);
      } else if constexpr (LEAN) {
        if (i1 >= nq) { i1 = 0; ++h1; }
      } else {
        block_of(it + 1, h1, i1);
      }
      load_q(h1, i1, j1, buf ^ 1, fresh());
    }
    cp_async_commit();
    // with two stages the read waits until the next block's copies are on their way
    if constexpr (MODS == kModsBias && kStages == 2) read_bias();
    const T* cQ = sQ + buf * BM * D;
    const T* cdO = sdO + buf * BM * D;
    if constexpr (MODS == kModsAll) {
      if (p.alibi_slopes) slope = p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h];
    }
    const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);

    const float* cL = WIN ? sLw + i0 : sL + buf * BM;
    const float* cD = WIN ? sDw + i0 : sDv + buf * BM;

    if constexpr (MODS == kModsAll) {
      const int tl = fresh(), warp = tl >> 5, g = (tl & 31) >> 2, tq = tl & 3;
      const int s_m0 = GS::m0(warp), s_n0 = GS::n0(warp);
#pragma unroll
      for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) bias[mt][nt][e] = 0.f;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        if (t >= p.num_bias || !s_live) break;
        if (a.pk[t].ptr) {  // fragment-ordered [key][query] copy: one 16-byte load per 16 x 16 tile
          const int sl = packed_slice(p.bias[t], b, h), lane = tl & 31;
#pragma unroll
          for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < GS::NT; nt += 2)
              add_packed_tile(p.bias[t], a.pk[t],
                              packed_off(a.pk[t], sl, (j0 + s_m0 + mt * 16) >> 4, ((i0 + s_n0) >> 4) + nt / 2, lane),
                              bias[mt][nt], bias[mt][nt + 1]);
          continue;
        }
        const int64_t rs = p.bias[t].row_stride;
        const int64_t bb = bias_offset(p.bias[t], b, h, 0);
        add_bias_tile<GS::MT * GS::NT * 4>(p.bias[t], &bias[0][0][0], [&](int k) {
          const int mt = k / (GS::NT * 4), nt = (k / 4) % GS::NT, e = k % 4;
          const int i = min(i0 + s_n0 + nt * 8 + 2 * tq + (e & 1), nq - 1);
          const int j = min(j0 + s_m0 + mt * 16 + g + 8 * (e >> 1), nk - 1);
          return bb + i * rs + j;
        });
      }
    }

    if (s_live) {
      // S^T -> P^T (registers: undropped P for dS; shared: dropped P for dV)
      constexpr int NE = GS::MT * GS::NT * 4, NBITS = (NE + 31) / 32;
      uint32_t vis_bits[NBITS], keep_bits[NBITS];  // per element (mt, nt, e): visible, dropout keep
      auto bit = [](const uint32_t (&w)[NBITS], int k) { return ((w[k / 32] >> (k % 32)) & 1u) != 0; };
#pragma unroll
      for (int w = 0; w < NBITS; ++w) vis_bits[w] = keep_bits[w] = 0u;
      float s[GS::MT][GS::NT][4];
      zero(s);
      {
        const int tl = fresh(), warp = tl >> 5, lane = tl & 31;
        bwd_gemm<T, GS::MT, GS::NT, D>(s, op_a<C>(uK, GS::m0(warp), lane), op_b<C>(smem_u32(cQ), GS::n0(warp), lane));
      }
      // A block whose keys every one of its rows sees (no sequence end, causal or window edge
      // inside it) takes the exponentials without any per-element visibility test.
      bool full = MODS != kModsAll && i0 + BM <= nq && j0 + BN <= nk;
      if (!LEAN && full && (p.causal || p.window_left >= 0 || p.window_right >= 0)) {
        const KeyRange first = row_keys(p, i0, nq, nk), last = row_keys(p, i0 + BM - 1, nq, nk);
        full = last.lo <= j0 && j0 + BN <= first.hi;
      }
      // MMA (bias_mma): S^T in natural units plus the bias through the tensor cores
      auto p_tile = [&](auto full_c, auto mma_c) {
        constexpr bool FULL = decltype(full_c)::value, MMA = decltype(mma_c)::value;
        const int tl = fresh(), warp = tl >> 5, g = (tl & 31) >> 2, tq = tl & 3;
        const int s_m0 = GS::m0(warp), s_n0 = GS::n0(warp);
        if constexpr (MMA) {
#pragma unroll
          for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
            for (int e2 = 0; e2 < 2; ++e2) {
              const float kneg = j0 + s_m0 + mt * 16 + g + 8 * e2 < nk ? 0.f : -INFINITY;  // LEAN: keys past the end
#pragma unroll
              for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
                for (int e1 = 0; e1 < 2; ++e1) {
                  float& v = s[mt][nt][2 * e2 + e1];
                  v = LEAN ? fmaf(v, p.scale, kneg) : v * p.scale;
                }
            }
          const uint32_t eye = eye_of<T>(tl & 31);
          for_bias_chunks<GS::MT, GS::NT / 2>(nb, [&](int t, int mt, int n2, int) {
            const float* f = bias[mt][2 * n2 + t];
            const uint32_t w[4] = {__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                                   __float_as_uint(f[3])};
            mma_add_tile16<T>(w, eye, s[mt][2 * n2], s[mt][2 * n2 + 1]);
          });
        }
        FragStore fst(sP, uP, s_m0, s_n0, fresh() & 31);  // (after the adds: not live across them)
#pragma unroll
        for (int nt = 0; nt < GS::NT; ++nt) {
          const int c = s_n0 + nt * 8 + 2 * tq;
          const float2 lv = *reinterpret_cast<const float2*>(cL + c);
          KeyRange kr[2];
          float lse_c[2];
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const int i = i0 + c + e1;
            const float l = e1 ? lv.y : lv.x;
            if constexpr (LEAN) {
              lse_c[e1] = i < nq ? l : INFINITY;  // row statistics: log2 units, +inf for empty rows
              continue;
            }
            if constexpr (!FULL) kr[e1] = row_keys(p, i, nq, nk);
            lse_c[e1] = ((!FULL && i >= nq) || l == -INFINITY) ? INFINITY : l * kLog2e;  // P = 0 for empty rows
          }
#pragma unroll
          for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
            for (int e2 = 0; e2 < 2; ++e2) {
              const int r = s_m0 + mt * 16 + g + 8 * e2;
              const int j = j0 + r;
              [[maybe_unused]] const float kneg = j < nk ? 0.f : -INFINITY;  // LEAN: keys past the end
              float pd[2];
#pragma unroll
              for (int e1 = 0; e1 < 2; ++e1) {
                const int e = e2 * 2 + e1;
                [[maybe_unused]] const int k = (mt * GS::NT + nt) * 4 + e, i = i0 + c + e1;  // kModsAll
                float x = s[mt][nt][e] * a.scale_log2;  // (MMA: unused)
                if constexpr (MODS == kModsBias && !MMA) x = fmaf(s[mt][nt][e], a.scale_log2, kLog2e * bias[mt][nt][e]);
                if constexpr (LEAN && MODS == kModsNone) x = fmaf(s[mt][nt][e], a.scale_log2, kneg);
                if constexpr (LEAN && MODS == kModsBias && !MMA)
                  x = fmaf(s[mt][nt][e], a.scale_log2, fmaf(kLog2e, bias[mt][nt][e], kneg));
                if constexpr (MODS == kModsAll) {
                  float add = bias[mt][nt][e];
                  if (p.alibi_slopes) add += alibi_term(slope, i, j, nq, nk);
                  x += kLog2e * add;
                }
                const bool vis = FULL || LEAN || (j >= kr[e1].lo && j < kr[e1].hi);
                // (MMA: s is the score in natural units, lse_c in log2 units)
                const float pr = vis ? (MMA ? fast_exp2(fmaf(s[mt][nt][e], kLog2e, -lse_c[e1]))
                                            : fast_exp2(x - lse_c[e1]))
                                     : 0.f;
                pd[e1] = pr;
                if constexpr (MODS == kModsAll) {
                  if (vis) vis_bits[k / 32] |= 1u << (k % 32);
                  if (a.dropout && vis) {
                    const bool keep = dropout_keep(p.dropout_seed, p.dropout_offset, bh, i, j, a.drop_threshold);
                    if (keep) keep_bits[k / 32] |= 1u << (k % 32);
                    pd[e1] = keep ? pr * a.keep_scale : 0.f;
                  }
                }
                s[mt][nt][e] = pr;
              }
              fst.put(mt, nt, e2, Elem<T>::pack(pd[0], pd[1]));
            }
          if (nt & 1) fst.flush(nt);
        }
      };
      // (kModsAll keeps one path: a second copy of its exponentials costs it more registers than it saves)
      auto p_tile_mods = [&](auto full_c) {
        with_bias_path<kBiasMma>(bias_mma, [&](auto mma_c) { p_tile(full_c, mma_c); });
      };
      if (LEAN || (MODS != kModsAll && full)) p_tile_mods(std::true_type{});
      else p_tile_mods(std::false_type{});

      // dP^T -> dS^T = P^T (dP^T - D) (shared; dBias atomics)
      float dp[GS::MT][GS::NT][4];
      zero(dp);
      {
        const int tl = fresh(), warp = tl >> 5, lane = tl & 31;
        bwd_gemm<T, GS::MT, GS::NT, D>(dp, op_a<C>(uV, GS::m0(warp), lane), op_b<C>(smem_u32(cdO), GS::n0(warp), lane));
      }
      {
        const int tl = fresh(), warp = tl >> 5, g = (tl & 31) >> 2, tq = tl & 3;
        const int s_m0 = GS::m0(warp), s_n0 = GS::n0(warp);
        FragStore fst(sdS, udS, s_m0, s_n0, tl & 31);
        int64_t bbase0 = 0, bbase1 = 0;  // dBias rows (recomputed here: not held across the GEMMs)
        if constexpr (MODS == kModsAll) {
          if (a.any_bias_grad && p.num_bias > 0) bbase0 = bias_offset(p.bias[0], b, h, 0);
          if (a.any_bias_grad && p.num_bias > 1) bbase1 = bias_offset(p.bias[1], b, h, 0);
        }
        float dsq[MODS ? GS::MT : 1][2][4];  // dS of the current 16-column pair, for packed dBias tiles
#pragma unroll
        for (int nt = 0; nt < GS::NT; ++nt) {
          const int c = s_n0 + nt * 8 + 2 * tq;
          const float2 dv2 = *reinterpret_cast<const float2*>(cD + c);
#pragma unroll
          for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
            for (int e2 = 0; e2 < 2; ++e2) {
              [[maybe_unused]] const int r = s_m0 + mt * 16 + g + 8 * e2;  // (kModsAll)
              float dsv[2];
#pragma unroll
              for (int e1 = 0; e1 < 2; ++e1) {
                const int e = e2 * 2 + e1, k = (mt * GS::NT + nt) * 4 + e;
                float dpv = dp[mt][nt][e];
                if constexpr (MODS == kModsAll) {
                  if (a.dropout && bit(vis_bits, k)) dpv = bit(keep_bits, k) ? dpv * a.keep_scale : 0.f;
                }
                const float ds = s[mt][nt][e] * (dpv - (e1 ? dv2.y : dv2.x));
                if constexpr (MODS) dsq[mt][nt & 1][e] = ds;  // 0 where not visible (P = 0)
                if constexpr (MODS == kModsAll) {
                  if (a.any_bias_grad && bit(vis_bits, k)) {
                    const int i = i0 + c + e1, j = j0 + r;
                    if (p.num_bias > 0 && p.bias[0].grad && !a.pk[0].grad)
                      atomicAdd(p.bias[0].grad + bbase0 + i * p.bias[0].row_stride + j, ds);
                    if (p.num_bias > 1 && p.bias[1].grad && !a.pk[1].grad)
                      atomicAdd(p.bias[1].grad + bbase1 + i * p.bias[1].row_stride + j, ds);
                  }
                }
                dsv[e1] = ds;
              }
              fst.put(mt, nt, e2, Elem<T>::pack(dsv[0], dsv[1]));
            }
          if (nt & 1) fst.flush(nt);
          if constexpr (MODS) {
            if (nt & 1) {  // packed dBias: two 16-byte atomics per lane and 16 x 16 tile
#pragma unroll
              for (int t = 0; t < 2; ++t) {
                if (t >= p.num_bias || !a.pk[t].grad) continue;
                const PackedBias& pk = a.pk[t];
                const int C = ((i0 + s_n0) >> 4) + nt / 2;
                if constexpr (LEAN) {  // offsets as the copies' (the general form costs a sixth of the
                                       // kernel's instructions)
                  const int slice_row = lean_slice_row(t, h);
#pragma unroll
                  for (int mt = 0; mt < GS::MT; ++mt) {
                    const int R = (j0 + s_m0 + mt * 16) >> 4;
                    if (R < pk.rt && C < pk.ct)
                      red_packed_tile(pk.grad, lean_off(pk, slice_row, R, C, 0), tl & 31, dsq[mt][0], dsq[mt][1]);
                  }
                  continue;
                }
                const int sl = packed_slice(p.bias[t], b, h);
#pragma unroll
                for (int mt = 0; mt < GS::MT; ++mt) {
                  const int R = (j0 + s_m0 + mt * 16) >> 4;
                  if (R < pk.rt && C < pk.ct)
                    red_packed_tile(pk.grad, packed_off(pk, sl, R, C, 0), tl & 31, dsq[mt][0], dsq[mt][1]);
                }
              }
            }
          }
        }
      }
    } else {
      const int tl = fresh(), warp = tl >> 5;
      const FragPairOff<CP> fo(GS::m0(warp), GS::n0(warp), tl & 31);
#pragma unroll
      for (int nt = 0; nt < GS::NT; ++nt)
#pragma unroll
        for (int mt = 0; mt < GS::MT; ++mt)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            *reinterpret_cast<uint32_t*>(sP + fo.at(mt, nt, e2)) = 0u;
            *reinterpret_cast<uint32_t*>(sdS + fo.at(mt, nt, e2)) = 0u;
          }
    }
    __syncthreads();

    {
      const int tl = fresh(), warp = tl >> 5, lane = tl & 31;
      const int kv_m0 = GKV::m0(warp), kv_n0 = GKV::n0(warp);
      if (!kSkipEmpty || j0 + kv_m0 < nk) {  // else dK / dV rows past the end: never stored
        bwd_gemm<T, GKV::MT, GKV::NT, BM>(dv, op_a<CP>(uP, kv_m0, lane), op_b_t<C>(smem_u32(cdO), kv_n0, lane));
        bwd_gemm<T, GKV::MT, GKV::NT, BM>(dk, op_a<CP>(udS, kv_m0, lane), op_b_t<C>(smem_u32(cQ), kv_n0, lane));
      }
    }
    if (do_dq && (!kSkipEmpty || i0 + GQ::m0(fresh() >> 5) < nq)) {  // else dQ rows past the end
      const int tl = fresh(), warp = tl >> 5, lane = tl & 31, g = lane >> 2, tq = lane & 3;
      const int q_m0 = GQ::m0(warp), q_n0 = GQ::n0(warp);
      float dq[GQ::MT][GQ::NT][4];
      zero(dq);
      bwd_gemm<T, GQ::MT, GQ::NT, BN>(dq, op_a_t<CP>(udS, q_m0, lane), op_b_t<C>(uK, q_n0, lane));
      if constexpr (WIN) {  // the thread owns these dQ elements for every key block: plain adds
#pragma unroll
        for (int mt = 0; mt < GQ::MT; ++mt)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            const int r = i0 + q_m0 + mt * 16 + g + 8 * e2;
#pragma unroll
            for (int nt = 0; nt < GQ::NT; ++nt) {
              float* q = sdQ + win_dq_off<D>(r, q_n0 + nt * 8 + 2 * tq);
              float2 v = *reinterpret_cast<float2*>(q);
              v.x += dq[mt][nt][2 * e2];
              v.y += dq[mt][nt][2 * e2 + 1];
              *reinterpret_cast<float2*>(q) = v;
            }
          }
      } else {
        const int dqd = a.dq_accum_d;
        const int64_t row0 = flat_row0(p, b, sq.q0);
#if __CUDA_ARCH__ >= 900
        if (LEAN || dq_vec4) {
          // 16-byte atomics (dq_atomic.cuh): the even lane adds row g, the odd lane row g+8.
          const bool odd = tq & 1;
#pragma unroll
          for (int mt = 0; mt < GQ::MT; ++mt) {
            const int i = i0 + q_m0 + mt * 16 + g + (odd ? 8 : 0);
            float* dst = a.dq_accum + ((row0 + i) * p.heads_q + h) * dqd + q_n0 + 2 * (tq & ~1);
#pragma unroll
            for (int nt = 0; nt < GQ::NT; ++nt) {
              const float4 v = frag_quad(dq[mt][nt], odd, p.scale);
              if (i < nq && q_n0 + nt * 8 + 2 * (tq & ~1) < dqd) atomic_add4(dst + nt * 8, v);
            }
          }
        } else
#endif
        {
#pragma unroll
          for (int mt = 0; mt < GQ::MT; ++mt)
#pragma unroll
            for (int e2 = 0; e2 < 2; ++e2) {
              const int i = i0 + q_m0 + mt * 16 + g + 8 * e2;
              if (i >= nq) continue;
              float* dst = a.dq_accum + ((row0 + i) * p.heads_q + h) * dqd;
#pragma unroll
              for (int nt = 0; nt < GQ::NT; ++nt) {
                const int c = q_n0 + nt * 8 + 2 * tq;
                if (c < dqd) atomicAdd(dst + c, dq[mt][nt][2 * e2] * p.scale);
                if (c + 1 < dqd) atomicAdd(dst + c + 1, dq[mt][nt][2 * e2 + 1] * p.scale);
              }
            }
        }
      }
    }
    if constexpr (WIN) {
      i0 = win_next(i0, BM, nq);
      if (++win_qc == nqb) {  // the key block's last query block: its dK / dV are complete
        store_dkv();
        zero(dk);
        zero(dv);
        win_qc = 0;
        j0 = win_next(j0, BN, nk);
      }
    } else if constexpr (LEAN) {
      i0 += BM;
      if (i0 >= nq) { i0 = 0; ++h; }
    }
  }
  cp_async_wait<0>();
  if constexpr (WIN) {  // (dK / dV stored at each key block's end)
    __syncthreads();
    win_store_dq<T, D, NTHREADS>(p, b, hk, nq, sdQ, tid);
  } else {
    store_dkv();
  }
}

}  // namespace tessera::attention::cuda
