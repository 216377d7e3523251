// Forward: one CTA per (query block, head, sequence); each warp owns MT
// m16 tiles of query rows, streams K/V blocks through double-buffered shared
// memory, keeps the online-softmax state (row max, row sum) and O in
// registers, and writes O and LSE once at the end. Bias values of the next
// score tile are loaded into registers before its QK^T so their latency
// hides behind the tensor-core work.
#pragma once

#include <type_traits>

#include "kernels/sm80/bias_pack.cuh"
#include "primitives/ldsm_addr.cuh"
#include "score_mod.cuh"
#include "primitives/tile_io.cuh"

namespace tessera::attention::cuda {

// HALF_: a key block with at most BN / 2 keys left (a sequence's last) runs a second copy of the
// block's code with half the n tiles (Swin's 343 keys leave 23 in the last block of 64): compile-time
// loop bounds, so the full blocks' code stays as it is (runtime breaks in the unrolled loops are slow).
// QSPLIT_: 0 = one CTA per query block; k > 0 = k CTAs per sequence and head, each running every k-th
// query block in turn, so that the CTA's set-up (sequence, head and bias-slice indices, the slices'
// flags) and its start are paid once per sequence and head, not per block (a Swin window's CTA runs only
// 5.5 key blocks).
template <typename T, int D_, int NW_, int BN_, int MT_ = 1, bool QREG_ = (D_ <= 128), bool HALF_ = false,
          int MINB_ = 1, int QSPLIT_ = 0>
struct FwdTraits {
  static constexpr int MINB = MINB_;  // CTAs per SM the register allocation must allow (__launch_bounds__)
  static constexpr int QSPLIT = QSPLIT_;
  static constexpr int D = D_, NW = NW_, BN = BN_, MT = MT_, BM = 16 * MT_ * NW_, C = D_ / 8;
  static constexpr int NT = BN / 8, DT = D / 8;
  static_assert(BN % 16 == 0, "packed bias tiles are 16 keys wide");
  static constexpr bool kHalfTail = HALF_ && BN % 32 == 0;
  static constexpr bool kQInRegs = QREG_;
  static constexpr int kSmem = (BM * D + 4 * BN * D) * sizeof(T);
  // kModsBias: two stages of packed 16-bit bias tiles, 16 bytes per thread, term and 16 x 16 tile
  static constexpr int kBiasChunks = 2 * MT * (NT / 2);
  static constexpr int kSmemBias = kSmem + 2 * kBiasChunks * NW * 32 * 16;
};

// MODS: kModsNone, kModsBias (packed 16-bit bias terms only) or kModsAll (score_mod.cuh).
template <typename T, typename Tr, int MODS>
__global__ void __launch_bounds__(Tr::NW * 32, Tr::MINB) fwd_kernel(const __grid_constant__ KArgs a) {
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, C = Tr::C, NT = Tr::NT, DT = Tr::DT, MT = Tr::MT;
  constexpr int NTHREADS = Tr::NW * 32;
  extern __shared__ uint4 smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;  // [2][BN*D]
  T* sV = sK + 2 * BN * D;
  uint4* sB = reinterpret_cast<uint4*>(sV + 2 * BN * D);  // [2][kBiasChunks][NTHREADS] (kModsBias)

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y, i_first = blockIdx.x * BM;
  const SeqSpan sq = seq_span(p, b);
  if (i_first >= sq.nq) return;
  const int nq = sq.nq, nk = sq.nk;
  const int hk = static_cast<int>(a.group.div(h));  // (h / (heads_q / heads_kv))
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int wrow0 = warp * MT * 16;  // first row of this warp inside the block
  float slope = 0.f;
  if constexpr (MODS == kModsAll) {
    if (p.alibi_slopes) slope = p.alibi_slopes[static_cast<int64_t>(b) * p.alibi_batch_stride + h];
  }
  const uint32_t bh = static_cast<uint32_t>(b * p.heads_q + h);
  const T* gk = static_cast<const T*>(p.k) + row_offset(p, b, sq.k0, 0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  const T* gv = static_cast<const T*>(p.v) + row_offset(p, b, sq.k0, 0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  auto load_kv = [&](int jb, int buf) {
    const int j0 = jb * BN;
    load_tile<BN, C, NTHREADS>(sK + buf * BN * D, gk + j0 * p.k_row_stride, p.k_row_stride, nk - j0, p.head_dim,
                               a.vec_ok, tid);
    load_tile<BN, C, NTHREADS>(sV + buf * BN * D, gv + j0 * p.v_row_stride, p.v_row_stride, nk - j0,
                               p.head_dim_v, a.vec_ok, tid);
  };
  // kModsBias: this thread's 16-byte chunks of the block's packed bias tiles, copied with the
  // K/V stage and read back by the same thread (no barrier needed for them).
  // The CTA's slice and the warp's query rows are fixed: per term and m tile, the lane's offset in
  // packed tile column 0 of its row is computed once per query block (packed_row_off) and a key block adds
  // its column, instead of a 64-bit packed_off per chunk and block.
  // A last term that is zero over the CTA's slice is left out (terms_read).
  int pk_row[2][MT] = {};  // (set per query block)
  int nb = p.num_bias;
  int pk_slice[2] = {0, 0};
  // The bias adds run on the tensor cores (mma_add_tile16) where every slice read is finite; the
  // scores are then kept in natural units (scale * QK^T + bias) and log2 e moves into the
  // exponentials' argument (unit), so the terms need no conversion, add or scaling per element.
  // (d16 / d32, where it was measured; the d64 kernel's spills grow from 60 to 114 bytes with it.)
  constexpr bool kBiasMma = MODS == kModsBias && D <= 32;
  bool bias_mma = false;
  if constexpr (MODS == kModsBias) {
#pragma unroll
    for (int t = 0; t < 2; ++t) pk_slice[t] = t < p.num_bias ? packed_slice(p.bias[t], a.pk[t], b, h) : 0;
    nb = terms_read<false>(a, [&](int t) { return pk_slice[t]; });
    bias_mma = kBiasMma;
#pragma unroll
    for (int t = 0; t < 2; ++t)
      if (t < nb) bias_mma = bias_mma && bias_mma_ok<T>(a, t, pk_slice[t]);
  }
  // (the stage's shared address once per call, chunk c at a compile-time step from it, and the block's
  // first tile column once, not a shared-window conversion and a column product per chunk)
  auto load_bias = [&](int jb, int buf) {
    if constexpr (MODS == kModsBias) {
      const uint32_t ub = smem_u32(sB + tid) + buf * (Tr::kBiasChunks * NTHREADS * 16);
      const int c0 = jb * (BN / 16);
      for_bias_chunks<MT, NT / 2>(nb, [&](int t, int mt, int n2, int c) {
        const unsigned short* src =
            static_cast<const unsigned short*>(a.pk[t].ptr) + pk_row[t][mt] + packed_col_off(a.pk[t], c0 + n2);
        cp_async16(ub + c * (NTHREADS * 16), src, 16);
      });
    }
  };

  // QSPLIT with Q in registers: a CTA's query blocks run as one pipeline. During a block's last key block
  // the next block's Q, first K / V block and bias tiles are copied (sQ is free once every warp holds Q in
  // registers: the barrier at the top of the block's second key block), so its first key block does not
  // wait for them with nothing else in flight. kv_stage: key blocks run so far (their buffer parity).
  // (Dense calls only, where every query block walks all key blocks: the next block's key range costs no
  // registers then.)
  constexpr bool kPipeQ = Tr::QSPLIT > 0 && Tr::kQInRegs;
  const bool pipe_q = kPipeQ && !p.causal && p.window_left < 0 && p.window_right < 0;
  int kv_stage = 0;
  // Q of block i0 into sQ and the bias tiles' row offsets for it
  auto load_q = [&](int i0) {
    const T* gq = static_cast<const T*>(p.q) +
                  row_offset(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
    load_tile<BM, C, NTHREADS>(sQ, gq, p.q_row_stride, nq - i0, p.head_dim, a.vec_ok, tid);
    if constexpr (MODS == kModsBias) {
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          pk_row[t][mt] = t < nb ? packed_row_off(a.pk[t], pk_slice[t], (i0 + wrow0 + mt * 16) >> 4, lane) : 0;
    }
  };

  // One query block (QSPLIT: each of the CTA's in turn). primed: its Q, first K / V block and bias tiles
  // were issued by the block before (kPipeQ); i_next: the CTA's next query block (>= nq: none). Returns
  // whether it primed that one.
  auto query_block = [&](const int i0, const bool primed, const int i_next) {
    bool primed_next = false;
    // Key range of the whole block (lo/hi are non-decreasing in i).
    const BlockKeys bk = block_keys(p, i0, BM, BN, nq, nk);
    const KeyRange kr_first = bk.first, kr_last = bk.last;
    const int jb_begin = bk.jb_begin, jb_end = bk.jb_end;
    // A block whose rows all exist, or any block without causal / window limits: rows past nq see no
    // masking then (finite scores: zero-filled Q rows, zero-padded bias tiles or rows clamped to nq - 1)
    // and are never written, so only the keys' end needs masking (a Swin window's query tail block
    // then skips the per-element key tests).
    const bool rows_full = i0 + BM <= nq || (!p.causal && p.window_left < 0 && p.window_right < 0);

    // Per-thread rows: (mt, r) -> wrow0 + mt*16 + g + 8r.
    int row_i[MT][2], row_lo[MT][2], row_hi[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = i0 + wrow0 + mt * 16 + g + 8 * r;
        row_i[mt][r] = i;
        const KeyRange kr = row_keys(p, i, nq, nk);
        row_lo[mt][r] = kr.lo; row_hi[mt][r] = kr.hi;
      }
    // bias row offsets (rows clamped so that every load stays in bounds)
    int64_t brow[2][MT][2];
    if constexpr (MODS == kModsAll) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int ic = min(row_i[mt][r], nq - 1);
          brow[0][mt][r] = p.num_bias > 0 ? bias_offset(p.bias[0], b, h, ic) : 0;
          brow[1][mt][r] = p.num_bias > 1 ? bias_offset(p.bias[1], b, h, ic) : 0;
        }
    }

    if (!primed) {
      load_q(i0);
      if (jb_begin < jb_end) { load_kv(jb_begin, kv_stage & 1); load_bias(jb_begin, kv_stage & 1); }
      cp_async_commit();
    }

    float o[MT][DT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int d = 0; d < DT; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][d][e] = 0.f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
    uint32_t qf[Tr::kQInRegs ? MT : 1][Tr::kQInRegs ? D / 16 : 1][4];

    for (int jb = jb_begin; jb < jb_end; ++jb, ++kv_stage) {
      const int buf = kv_stage & 1;
      const int j0 = jb * BN;
      // Bias of this tile straight into registers, issued before the wait and
      // QK^T so the gathers' latency overlaps them.
      float bias[MODS == kModsAll ? MT : 1][MODS == kModsAll ? NT : 1][4];
      if constexpr (MODS == kModsAll) {
        zero(bias);
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          if (t >= p.num_bias) break;
          if (a.pk[t].ptr) {  // fragment-ordered copy: one 16-byte load per 16 x 16 tile
            const int sl = packed_slice(p.bias[t], b, h);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int n = 0; n < NT; n += 2)
                add_packed_tile(p.bias[t], a.pk[t],
                                packed_off(a.pk[t], sl, (i0 + wrow0 + mt * 16) >> 4, (j0 >> 4) + n / 2, lane),
                                bias[mt][n], bias[mt][n + 1]);
          } else {
            add_bias_tile<MT * NT * 4>(p.bias[t], &bias[0][0][0], [&](int k) {
              const int mt = k / (NT * 4), n = (k / 4) % NT, e = k % 4;
              return brow[t][mt][e >> 1] + min(j0 + n * 8 + 2 * tq + (e & 1), nk - 1);
            });
          }
        }
      }
      cp_async_wait<0>();
      __syncthreads();
      if (jb + 1 < jb_end) {
        load_kv(jb + 1, buf ^ 1);
        load_bias(jb + 1, buf ^ 1);
      } else if (pipe_q && jb > 0 && i_next < nq) {  // (jb > 0: every warp holds its Q; dense: key blocks from 0)
        load_q(i_next);  // (this block's bias copies are all issued: pk_row is free)
        load_kv(0, buf ^ 1);
        load_bias(0, buf ^ 1);
        primed_next = true;
      }
      cp_async_commit();
      if constexpr (Tr::kQInRegs) {
        if (jb == jb_begin) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int k = 0; k < D / 16; ++k) load_a<C>(qf[mt][k], sQ, wrow0 + mt * 16, k * 16, lane);
        }
      }
      const T* cK = sK + buf * BN * D;
      const T* cV = sV + buf * BN * D;

      // NV: n tiles of this block that hold keys (the rest of s stays unused); MMA: bias_mma
      // this thread's staged bias chunk c of the key block (load_bias wrote it)
      auto staged = [&](int c) -> const uint4& { return sB[(buf * Tr::kBiasChunks + c) * NTHREADS + tid]; };
      auto block = [&](auto nv_c, auto mma_c) {
        constexpr int NV = decltype(nv_c)::value;
        constexpr bool MMA = decltype(mma_c)::value;
        constexpr float unit = MMA ? kLog2e : 1.f;  // score units -> log2 units
        // K and V as ldmatrix operands: a lane base address plus compile-time offsets (ldsm_addr.cuh),
        // where load_b2 / load_b2_t re-derive row, swizzle and shared address for every load (d16 / d32
        // only: at d64 it adds spills).
        constexpr bool kOps = D <= 32;
        const OpK<C> opK = op_b<C>(smem_u32(cK), 0, lane);
        const OpT<C> opV = op_b_t<C>(smem_u32(cV), 0, lane);
        // S = Q K^T
        float s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < NV; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
#pragma unroll
        for (int k = 0; k < D / 16; ++k) {
          uint32_t qa[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if constexpr (Tr::kQInRegs) {
#pragma unroll
              for (int e = 0; e < 4; ++e) qa[mt][e] = qf[mt][k][e];
            } else {
              load_a<C>(qa[mt], sQ, wrow0 + mt * 16, k * 16, lane);
            }
          }
#pragma unroll
          for (int n = 0; n < NV; n += 2) {
            uint32_t bb[4];
            if constexpr (kOps) ldmatrix_x4(bb, opK.at(n * 8, k));
            else load_b2<C>(bb, cK, n * 8, k * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma16816<T>(s[mt][n], qa[mt], bb[0], bb[1]);
              mma16816<T>(s[mt][n + 1], qa[mt], bb[2], bb[3]);
            }
          }
        }

        // Scores in log2 units (MMA: natural units), masked.
        const bool full = rows_full && j0 >= kr_last.lo && j0 + BN <= kr_first.hi;
        if constexpr (MMA) {  // natural units: scale * QK^T, then the terms through the tensor cores
          const uint32_t eye = eye_of<T>(lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < NV; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e) s[mt][n][e] *= p.scale;
          for_bias_chunks<MT, NT / 2>(nb, [&](int t, int mt, int n2, int c) {
            if (2 * n2 >= NV) return;  // (compile-time after unrolling)
            const uint4 u = staged(c);
            const uint32_t w[4] = {u.x, u.y, u.z, u.w};
            mma_add_tile16<T>(w, eye, s[mt][2 * n2], s[mt][2 * n2 + 1]);
          });
        } else {
          [[maybe_unused]] float add[MODS == kModsBias ? MT : 1][MODS == kModsBias ? NT : 1][4];  // the staged bias tiles
          if constexpr (MODS == kModsBias) {
            zero(add);
            for_bias_chunks<MT, NT / 2>(nb, [&](int t, int mt, int n2, int c) {
              if (2 * n2 >= NV) return;  // (compile-time after unrolling)
              add_tile16(p.bias[t].dtype, staged(c), add[mt][2 * n2], add[mt][2 * n2 + 1]);
            });
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < NV; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                [[maybe_unused]] const int r = e >> 1;
                [[maybe_unused]] const int j = j0 + n * 8 + 2 * tq + (e & 1);
                float x = s[mt][n][e] * a.scale_log2;
                if constexpr (MODS == kModsBias) x = fmaf(s[mt][n][e], a.scale_log2, kLog2e * add[mt][n][e]);
                if constexpr (MODS == kModsAll) {
                  float add = bias[mt][n][e];
                  if (p.alibi_slopes) add += alibi_term(slope, row_i[mt][r], j, nq, nk);
                  x += kLog2e * add;
                }
                s[mt][n][e] = x;
              }
        }
        if (!full) {  // keys past the rows' ranges (causal, window, sequence end)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < NV; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int j = j0 + n * 8 + 2 * tq + (e & 1);
                if (j < row_lo[mt][e >> 1] || j >= row_hi[mt][e >> 1]) s[mt][n][e] = -INFINITY;
              }
        }

        // Online softmax.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            float mx = m[mt][r];
#pragma unroll
            for (int n = 0; n < NV; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_use = mx == -INFINITY ? 0.f : mx;
            const float corr = fast_exp2(MMA ? (m[mt][r] - m_use) * unit : m[mt][r] - m_use);
            m[mt][r] = mx;
            l[mt][r] *= corr;
#pragma unroll
            for (int d = 0; d < DT; ++d) { o[mt][d][2 * r] *= corr; o[mt][d][2 * r + 1] *= corr; }
            float sum = 0.f;
            const float mu = m_use * unit;
            auto ex = [&](float x) { return fast_exp2(MMA ? fmaf(x, unit, -mu) : x - m_use); };
#pragma unroll
            for (int n = 0; n < NV; ++n) {
              s[mt][n][2 * r] = ex(s[mt][n][2 * r]);
              s[mt][n][2 * r + 1] = ex(s[mt][n][2 * r + 1]);
              sum += s[mt][n][2 * r] + s[mt][n][2 * r + 1];
            }
            l[mt][r] += sum;
          }
        if constexpr (MODS == kModsAll) {
          if (a.dropout) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int n = 0; n < NV; ++n)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                  const int j = j0 + n * 8 + 2 * tq;
                  if (row_i[mt][r] < nq) {
                    bool k0, k1;
                    dropout_pair(a, bh, row_i[mt][r], j, k0, k1);
                    if (!k0) s[mt][n][2 * r] = 0.f;
                    if (!k1) s[mt][n][2 * r + 1] = 0.f;
                  }
                }
          }
        }

        // O += P V
#pragma unroll
        for (int kk = 0; kk < NV / 2; ++kk) {
          uint32_t pa[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = Elem<T>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][1] = Elem<T>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][2] = Elem<T>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][3] = Elem<T>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
#pragma unroll
          for (int d = 0; d < DT; d += 2) {
            uint32_t bb[4];
            if constexpr (kOps) ldmatrix_x4_trans(bb, opV.at(d, kk));
            else load_b2_t<C>(bb, cV, d * 8, kk * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma16816<T>(o[mt][d], pa[mt], bb[0], bb[1]);
              mma16816<T>(o[mt][d + 1], pa[mt], bb[2], bb[3]);
            }
          }
        }
      };
      auto run = [&](auto nv_c) { with_bias_path<kBiasMma>(bias_mma, [&](auto mma_c) { block(nv_c, mma_c); }); };
      if constexpr (Tr::kHalfTail && MODS != kModsAll) {  // (kModsAll: registers 128 -> 168 at d16, untimed)
        if (nk - j0 <= BN / 2) {
          run(std::integral_constant<int, NT / 2>{});
          continue;
        }
      }
      run(std::integral_constant<int, NT>{});
    }
    if (!primed_next) cp_async_wait<0>();

    // Epilogue: normalise, write O and LSE.
    T* go = static_cast<T*>(p.o);
    const int dv = p.head_dim_v;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float sum = l[mt][r];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int i = row_i[mt][r];
        if (i >= nq) continue;
        const bool empty = !(sum > 0.f) || m[mt][r] == -INFINITY;
        const float inv = empty ? 0.f : a.keep_scale / sum;
        const int64_t orow = row_offset(p, b, sq.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
#pragma unroll
        for (int d = 0; d < DT; ++d) {
          const int c = d * 8 + 2 * tq;
          const float v0 = o[mt][d][2 * r] * inv, v1 = o[mt][d][2 * r + 1] * inv;
          if (a.vec_ok && c + 1 < dv) {
            *reinterpret_cast<uint32_t*>(go + orow + c) = Elem<T>::pack(v0, v1);
          } else {
            if (c < dv) go[orow + c] = Elem<T>::from_float(v0);
            if (c + 1 < dv) go[orow + c + 1] = Elem<T>::from_float(v1);
          }
        }
        float m2 = m[mt][r];  // log2 units
        if constexpr (MODS == kModsBias) m2 = bias_mma ? m2 * kLog2e : m2;
        if (tq == 0) p.lse[lse_index(p, b, h, sq.q0, i)] = row_lse(m2, sum);
      }
    return primed_next;
  };

  if constexpr (Tr::QSPLIT == 0) {
    query_block(i_first, false, nq);
  } else {
    bool primed = false;
    for (int i0 = i_first; i0 < nq; i0 += gridDim.x * BM) {
      // unprimed: every warp must be done with the last block's Q, K, V and bias tiles first (primed:
      // the barrier at the top of each key block orders them)
      if (i0 != i_first && !primed) __syncthreads();
      primed = query_block(i0, primed, i0 + gridDim.x * BM);
    }
  }
}

}  // namespace tessera::attention::cuda
