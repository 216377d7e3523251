// Element conversions and 16-byte packs shared by the fused model kernels: values are loaded to fp32,
// computed there, and rounded once to the storage type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "dtype.h"

namespace tessera::models::cuda {

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ inline T from_float(float v);
template <> __device__ inline float from_float<float>(float v) { return v; }
template <> __device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Elements of T in one 16-byte load.
template <typename T> constexpr int kVec = 16 / sizeof(T);

struct alignas(16) Pack {
  uint4 bits;
};

// N consecutive elements as floats and back: one 16-byte access when N is kVec<T> (the caller checked the
// alignment), else N is 1.
template <typename T, int N> __device__ inline void load_floats(const T* p, float (&v)[N]) {
  if constexpr (N == 1) {
    v[0] = to_float(*p);
  } else {
    const Pack pk = *reinterpret_cast<const Pack*>(p);
    const T* e = reinterpret_cast<const T*>(&pk);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = to_float(e[k]);
  }
}

template <typename T, int N> __device__ inline void store_floats(T* p, const float (&v)[N]) {
  if constexpr (N == 1) {
    *p = from_float<T>(v[0]);
  } else {
    Pack pk;
    T* e = reinterpret_cast<T*>(&pk);
#pragma unroll
    for (int k = 0; k < N; ++k) e[k] = from_float<T>(v[k]);
    *reinterpret_cast<Pack*>(p) = pk;
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// f(T{}) for the storage type T that `t` names, then a failed launch thrown as std::runtime_error naming `what`.
template <typename F> void launch_as(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": launch failed: " + cudaGetErrorString(e));
}

}  // namespace tessera::models::cuda
