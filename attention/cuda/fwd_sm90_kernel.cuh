// Hopper forward (sm_90a). One CTA of NWG warpgroups per 64 * NWG query rows
// of one (head, sequence); warpgroup w owns rows 64w..64w+63. K/V blocks of BN
// keys stream through a two-stage cp.async pipeline into 128-byte-swizzled
// shared memory; S = Q K^T is one chain of wgmma with both operands in shared
// memory, the online softmax runs on the accumulators in registers, and
// O += P V feeds P from registers (wgmma with A in registers, V read
// MN-major). Warpgroups of other CTAs on the SM (or the CTA's other
// warpgroup) run their softmax while one's wgmma occupies the tensor cores. Causal / window / varlen / GQA are the portable
// kernel's runtime masks; calls with bias, ALiBi or dropout take the portable
// kernel (see sm90_forward_eligible).
#pragma once

#include "mma.cuh"
#include "score_mod.cuh"
#include "wgmma.cuh"

namespace tessera::attention::cuda::sm90 {

template <typename T, int D_, int BN_, int NWG_, int MINB_>
struct FwdSm90Traits {
  using Elt = T;
  static constexpr int D = D_, BN = BN_, NWG = NWG_, BM = 64 * NWG_, NTHREADS = 128 * NWG_, MINB = MINB_;
  static constexpr int SLABS = D / 64;  // 64-column slabs of a row
  static constexpr int kQBytes = BM * D * 2, kKVBytes = BN * D * 2;
  static constexpr int kSmem = kQBytes + 4 * kKVBytes + 1024;  // Q, K x2, V x2, + slack to align to 1024
};

// Rows [0, ROWS) of a row-major tile (row r at g + r * row_stride, valid below
// nrows; columns past ncols zero) into the slab layout at shared address s.
// Every row start is 16-byte aligned and ncols % 8 == 0 (the dispatcher checks).
template <int ROWS, int D, int NTHREADS, typename T>
__device__ __forceinline__ void load_slabs(uint32_t s, const T* g, int64_t row_stride, int nrows, int ncols,
                                           int tid) {
  constexpr int C = D / 8;  // 16-byte chunks per row
#pragma unroll
  for (int idx = tid; idx < ROWS * C; idx += NTHREADS) {
    const int r = idx / C, c = idx % C;
    const bool ok = r < nrows && c * 8 < ncols;
    const T* src = ok ? g + r * row_stride + c * 8 : g;
    cp_async16(s + (c >> 3) * (ROWS * 128) + sw128_off(r, c & 7), src, ok ? 16 : 0);
  }
}

template <typename T, typename Tr>
__global__ void __launch_bounds__(Tr::NTHREADS, Tr::MINB) fwd_sm90_kernel(const __grid_constant__ KArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Tr::D, BM = Tr::BM, BN = Tr::BN, SLABS = Tr::SLABS, NT = Tr::NTHREADS;
  constexpr int NS = BN / 8;  // n8 column groups of a score row
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s0 = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t sQ = s0;
  const uint32_t sKV = s0 + Tr::kQBytes;  // K stage 0, K stage 1, V stage 0, V stage 1

  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  // Causal: the blocks with the most keys start first.
  const int qb = p.causal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x) : blockIdx.x;
  const int i0 = qb * BM;
  const Seq sq = seq_of(p, b);
  if (i0 >= sq.nq) return;
  const int nq = sq.nq, nk = sq.nk;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int tid = threadIdx.x, wg = Tr::NWG > 1 ? tid >> 7 : 0, warp = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  const int i_last = min(i0 + BM, nq) - 1;
  const KeyRange kr_first = visible_keys(i0, nq, nk, p.causal, p.window_left, p.window_right);
  const KeyRange kr_last = visible_keys(i_last, nq, nk, p.causal, p.window_left, p.window_right);
  const int klo = kr_first.lo, khi = kr_last.hi;
  const int jb_begin = klo / BN, jb_end = khi > klo ? (khi + BN - 1) / BN : jb_begin;
  const bool rows_full = i0 + BM <= nq;

  // This thread's rows: r -> i0 + 64 wg + 16 warp + g + 8 r.
  int row_i[2], row_lo[2], row_hi[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + wg * 64 + warp * 16 + g + 8 * r;
    row_i[r] = i;
    if (i < nq) {
      const KeyRange kr = visible_keys(i, nq, nk, p.causal, p.window_left, p.window_right);
      row_lo[r] = kr.lo; row_hi[r] = kr.hi;
    } else {
      row_lo[r] = 0; row_hi[r] = 0;
    }
  }

  const T* gq = static_cast<const T*>(p.q) +
                row_off(p, b, sq.q0, i0, h, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  const T* gk = static_cast<const T*>(p.k) + row_off(p, b, sq.k0, 0, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  const T* gv = static_cast<const T*>(p.v) + row_off(p, b, sq.k0, 0, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride);

  load_slabs<BM, D, NT>(sQ, gq, p.q_row_stride, nq - i0, p.head_dim, tid);
  auto load_kv = [&](int jb, int buf) {
    const int j0 = jb * BN;
    load_slabs<BN, D, NT>(sKV + buf * Tr::kKVBytes, gk + j0 * p.k_row_stride, p.k_row_stride, nk - j0,
                           p.head_dim, tid);
    load_slabs<BN, D, NT>(sKV + (2 + buf) * Tr::kKVBytes, gv + j0 * p.v_row_stride, p.v_row_stride, nk - j0,
                           p.head_dim_v, tid);
  };
  if (jb_begin < jb_end) load_kv(jb_begin, 0);
  cp_async_commit();

  float o[SLABS][32];
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
    for (int e = 0; e < 32; ++e) o[sl][e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const uint32_t q_rows = sQ + wg * 64 * 128;  // this warpgroup's 64 rows inside each Q slab

  for (int jb = jb_begin; jb < jb_end; ++jb) {
    const int buf = (jb - jb_begin) & 1;
    const int j0 = jb * BN;
    // Block jb has landed (this thread's copies), is visible to the tensor
    // cores, and every thread is done with the other stage.
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (jb + 1 < jb_end) load_kv(jb + 1, buf ^ 1);
    cp_async_commit();
    const uint32_t sK = sKV + buf * Tr::kKVBytes, sV = sKV + (2 + buf) * Tr::kKVBytes;

    // S = Q K^T: K-steps of 16 columns, 4 per 128-byte slab row (32 bytes each).
    float s[BN / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk & 3) * 32;
      const uint64_t da = desc_sw128(q_rows + (kk >> 2) * (BM * 128) + koff, 1024, 16);
      const uint64_t db = desc_sw128(sK + (kk >> 2) * (BN * 128) + koff, 1024, 16);
      wgmma_ss(s, da, db, kk > 0 ? 1 : 0, Tag<T>{});
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s);

    // Scores in log2 units, masked. s[4n + e]: row g + 8(e >> 1), key j0 + 8n + 2tq + (e & 1).
    const bool full = rows_full && j0 >= kr_last.lo && j0 + BN <= kr_first.hi;
#pragma unroll
    for (int n = 0; n < NS; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, j = j0 + n * 8 + 2 * tq + (e & 1);
        float x = s[4 * n + e] * a.scale_log2;
        if (!full && (j < row_lo[r] || j >= row_hi[r])) x = -INFINITY;
        s[4 * n + e] = x;
      }

    // Online softmax.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_use = mx == -INFINITY ? 0.f : mx;
      const float corr = fast_exp2(m[r] - m_use);
      m[r] = mx;
      l[r] *= corr;
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
        for (int n = 0; n < 8; ++n) { o[sl][4 * n + 2 * r] *= corr; o[sl][4 * n + 2 * r + 1] *= corr; }
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < NS; ++n) {
        s[4 * n + 2 * r] = fast_exp2(s[4 * n + 2 * r] - m_use);
        s[4 * n + 2 * r + 1] = fast_exp2(s[4 * n + 2 * r + 1] - m_use);
        sum += s[4 * n + 2 * r] + s[4 * n + 2 * r + 1];
      }
      l[r] += sum;
    }

    // P in the A-register layout of a 64 x 16 step: keys 16kk..16kk+15 are the
    // score groups n = 2kk, 2kk + 1.
    uint32_t pa[BN / 16][4];
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = Elem<T>::pack(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = Elem<T>::pack(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = Elem<T>::pack(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = Elem<T>::pack(s[8 * kk + 6], s[8 * kk + 7]);
    }

    // O += P V: per 16 keys, one m64n64k16 per 64-column slab of V (rows of
    // V are the K dimension: 16 rows = 2048 bytes further on).
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) fence_regs(o[sl]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int sl = 0; sl < SLABS; ++sl) {
        const uint64_t db = desc_sw128(sV + sl * (BN * 128) + kk * 16 * 128, 1024, 1024);
        wgmma_rs(o[sl], pa[kk], db, 1, Tag<T>{});
      }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl) fence_regs(o[sl]);
  }
  cp_async_wait<0>();

  // Epilogue: normalise, write O and LSE. o[sl][4n + e]: row g + 8(e >> 1), column 64 sl + 8n + 2tq + (e & 1).
  T* go = static_cast<T*>(p.o);
  const int dv = p.head_dim_v;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int i = row_i[r];
    if (i >= nq) continue;
    const bool empty = !(sum > 0.f) || m[r] == -INFINITY;
    const float inv = empty ? 0.f : 1.f / sum;
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
    if (tq == 0) p.lse[lse_idx(p, b, h, sq.q0, i)] = empty ? -INFINITY : (m[r] + log2f(sum)) * kLn2;
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this
#endif
}

}  // namespace tessera::attention::cuda::sm90
