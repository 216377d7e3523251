// The WIN backward's dQ store (bwd_kernel.cuh: one CTA per sequence and head, dQ summed in shared
// memory): what the dQ conversion pass does around the other backward variants. Rows are dense (no
// varlen) and 16-byte aligned, head dims D.
#pragma once

#include "score_mod.cuh"
#include "tile_io.cuh"

namespace tessera::attention::cuda {

// dQ (scaled by p.scale) of rows [0, nq) of (b, h) from shared memory into p.dq in the element
// type, 16 bytes per thread and step. The caller synchronises the CTA first.
template <typename T, int D, int NTHREADS>
__device__ __forceinline__ void win_store_dq(const AttentionParams& p, int b, int h, int nq, const float* sdQ, int tid) {
  constexpr int L = D / 8;
  for (int idx = tid; idx < nq * L; idx += NTHREADS) {
    const int r = idx / L, c = (idx % L) * 8;
    const float4 x = *reinterpret_cast<const float4*>(sdQ + r * D + c);
    const float4 y = *reinterpret_cast<const float4*>(sdQ + r * D + c + 4);
    T* dst = static_cast<T*>(p.dq) + row_off(p, b, 0, r, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
    *reinterpret_cast<uint4*>(dst + c) = pack8<T>(x, y, p.scale);
  }
}

}  // namespace tessera::attention::cuda
