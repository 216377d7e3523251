// The WIN backward's dQ store (bwd_kernel.cuh: one CTA per sequence and head, dQ summed in shared
// memory): what the dQ conversion pass does around the other backward variants. Rows are dense (no
// varlen) and 16-byte aligned, head dims D.
#pragma once

#include "score_mod.cuh"
#include "primitives/tile_io.cuh"

namespace tessera::attention::cuda {

// Offset of dQ element (r, c) in shared memory ([rows][D] fp32). The 8-float units of a row are
// XOR-swizzled by the row so that a warp's float2 adds of its m16n8 fragments (a half warp: 4 rows x 4
// lanes) cover all 32 banks: unswizzled, d32 rows are 128 bytes apart and the 4 rows fell on the same
// banks (8 wavefronts instead of 2); d16 rows 64 bytes apart, 2 ways. c: a multiple of 2 (of 8 for a unit).
template <int D>
__host__ __device__ __forceinline__ int win_dq_off(int r, int c) {
  static_assert(D == 16 || D == 32, "WIN: d16 / d32");
  const int key = D == 32 ? (r & 3) : ((r >> 1) & 1);
  return r * D + (((c >> 3) ^ key) << 3) + (c & 7);
}

// dQ (scaled by p.scale) of rows [0, nq) of (b, h) from shared memory into p.dq in the element
// type, 16 bytes per thread and step. The caller synchronises the CTA first.
template <typename T, int D, int NTHREADS>
__device__ __forceinline__ void win_store_dq(const AttentionParams& p, int b, int h, int nq, const float* sdQ, int tid) {
  constexpr int L = D / 8;
  for (int idx = tid; idx < nq * L; idx += NTHREADS) {
    const int r = idx / L, c = (idx % L) * 8;
    const float* u = sdQ + win_dq_off<D>(r, c);  // (a whole swizzled unit)
    const float4 x = *reinterpret_cast<const float4*>(u);
    const float4 y = *reinterpret_cast<const float4*>(u + 4);
    T* dst = static_cast<T*>(p.dq) + row_offset(p, b, 0, r, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
    *reinterpret_cast<uint4*>(dst + c) = pack8<T>(x, y, p.scale);
  }
}

}  // namespace tessera::attention::cuda
