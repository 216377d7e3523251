// The WIN backward's prologue (bwd_kernel.cuh: one CTA per sequence and head): the row statistics of
// every query row, which the other backward variants take from the preprocess pass. Rows are dense (no
// varlen) and 16-byte aligned, head dims D.
#pragma once

#include "primitives/mma.cuh"
#include "score_mod.cuh"

namespace tessera::attention::cuda {

// lse (log2 units; +inf past the end, so P = 0 there) and D = rowsum(dO * O) - dlse of rows [0, rows)
// into sL / sD. O and dO of rows [0, nq) are first copied into `stage` with cp.async, every copy in
// flight at once (row by row, each of a thread's ~6 trips would wait a memory latency).
// stage: 2 * rows * D elements of T (the dQ area, which holds rows * D floats). rows: a multiple of 16.
// Waits for every cp.async group the thread committed before; ends with the CTA synchronised.
template <typename T, int D, int NTHREADS>
__device__ __forceinline__ void win_row_stats(const AttentionParams& p, int b, int h, int nq, int rows, T* stage,
                                              float* sL, float* sD, int tid) {
  static_assert(sizeof(T) == 2 && D % 8 == 0, "WIN: 16-bit types");
  constexpr int L = D / 8;  // 16-byte chunks (and lanes) per row
  static_assert(32 % L == 0 && (16 * L) % 32 == 0, "a warp's lanes take the same trips");
  T* sO = stage;
  T* sdO = stage + rows * D;
  const T* o = static_cast<const T*>(p.o);
  const T* dout = static_cast<const T*>(p.dout);
  for (int idx = tid; idx < nq * L; idx += NTHREADS) {
    const int r = idx / L, c = (idx % L) * 8;
    cp_async16(smem_u32(sO + r * D + c), o + row_offset(p, b, 0, r, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride) + c, 16);
    cp_async16(smem_u32(sdO + r * D + c),
               dout + row_offset(p, b, 0, r, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride) + c, 16);
  }
  const int64_t l0 = lse_index(p, b, h, 0, 0);  // (rows of a (b, h) are contiguous without varlen)
  for (int r = tid; r < nq; r += NTHREADS) {
    cp_async4(smem_u32(sL + r), p.lse + l0 + r);
    if (p.dlse) cp_async4(smem_u32(sD + r), p.dlse + l0 + r);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int idx = tid; idx < rows * L; idx += NTHREADS) {
    const int r = idx / L, c = (idx % L) * 8;
    float acc = 0.f;
    if (r < nq) acc = dot8<T>(*reinterpret_cast<const uint4*>(sO + r * D + c), *reinterpret_cast<const uint4*>(sdO + r * D + c));
#pragma unroll
    for (int sh = L / 2; sh > 0; sh >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, sh);
    if (c == 0) {  // (the row's only reader and writer of sL / sD)
      sL[r] = r < nq ? lse_log2(sL[r]) : INFINITY;
      sD[r] = r < nq ? acc - (p.dlse ? sD[r] : 0.f) : 0.f;
    }
  }
  __syncthreads();
}

}  // namespace tessera::attention::cuda
