// dQ accumulation into the fp32 workspace with 16-byte atomics (sm_90): one
// red.global.add.v4.f32 instead of four scalar atomics per fragment half.
#pragma once

#include <cuda_runtime.h>

namespace tessera::attention::cuda {

// f is an m16n8 fp32 accumulator fragment: f[0..1] row g, columns 2tq, 2tq+1;
// f[2..3] row g+8, same columns. Lanes tq and tq^1 swap halves, so that the
// even lane returns row g, columns 2tq..2tq+3 and the odd lane row g+8,
// columns 2tq-2..2tq+1 (both start at column 2 * (tq & ~1)). All 32 lanes
// must call it (shuffles).
__device__ __forceinline__ float4 frag_quad(const float* f, bool odd, float scale) {
  const float o0 = __shfl_xor_sync(0xffffffffu, (odd ? f[0] : f[2]) * scale, 1);
  const float o1 = __shfl_xor_sync(0xffffffffu, (odd ? f[1] : f[3]) * scale, 1);
  return odd ? make_float4(o0, o1, f[2] * scale, f[3] * scale) : make_float4(f[0] * scale, f[1] * scale, o0, o1);
}

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void atomic_add4(float* dst, float4 v) { atomicAdd(reinterpret_cast<float4*>(dst), v); }
#endif

}  // namespace tessera::attention::cuda
