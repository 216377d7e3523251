// One block per row: the updated row is staged in shared memory as fp32 (the values stored, so the norm is
// of x as written), its mean and variance taken in two passes over that copy, then the normalised row written.
#include "residual_norm.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "elements.cuh"

namespace tessera::models::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float block_sum(float v) {
  __shared__ float warps[kThreads / 32];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // a previous call's readers of `total` are done before it is overwritten
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kThreads / 32 ? warps[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) total = v;
  }
  __syncthreads();
  return total;
}

// Elements [i, i + N) of a row as floats (N: kVec<T> when the caller checked alignment, else 1).
template <typename T, int N> struct Chunk {
  float v[N];
  __device__ void load(const T* p) { load_floats<T, N>(p, v); }
  __device__ void store(T* p) const { store_floats<T, N>(p, v); }
};

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    residual_norm_rows(T* x, const T* y, const T* gamma, const T* weight, const T* bias, T* out, int64_t cols, float eps) {
  extern __shared__ float row[];
  const int64_t offset = int64_t(blockIdx.x) * cols;
  T* xr = x + offset;
  float sum = 0.f;
  for (int64_t i = int64_t(threadIdx.x) * N; i < cols; i += int64_t(kThreads) * N) {
    Chunk<T, N> c;
    c.load(xr + i);
    if (y) {
      Chunk<T, N> d;
      d.load(y + offset + i);
      if (gamma) {
        Chunk<T, N> g;
        g.load(gamma + i);
#pragma unroll
        for (int k = 0; k < N; ++k) c.v[k] += g.v[k] * d.v[k];
      } else {
#pragma unroll
        for (int k = 0; k < N; ++k) c.v[k] += d.v[k];
      }
      c.store(xr + i);
#pragma unroll
      for (int k = 0; k < N; ++k) c.v[k] = to_float(from_float<T>(c.v[k]));  // the value stored
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      row[i + k] = c.v[k];
      sum += c.v[k];
    }
  }
  if (!out) return;
  const float mean = block_sum(sum) / float(cols);
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float d = row[i] - mean;
    ss += d * d;
  }
  const float rstd = 1.f / sqrtf(block_sum(ss) / float(cols) + eps);
  for (int64_t i = int64_t(threadIdx.x) * N; i < cols; i += int64_t(kThreads) * N) {
    Chunk<T, N> w, b, o;
    if (weight) w.load(weight + i);
    if (bias) b.load(bias + i);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float v = (row[i + k] - mean) * rstd;
      if (weight) v *= w.v[k];
      if (bias) v += b.v[k];
      o.v[k] = v;
    }
    o.store(out + offset + i);
  }
}

template <typename T> void launch(const ResidualNormArgs& a) {
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const size_t smem = size_t(a.cols) * sizeof(float);
  T* x = static_cast<T*>(a.x);
  const T *y = static_cast<const T*>(a.y), *g = static_cast<const T*>(a.gamma);
  const T *w = static_cast<const T*>(a.weight), *b = static_cast<const T*>(a.bias);
  T* out = static_cast<T*>(a.out);
  const bool vec = a.cols % kVec<T> == 0 && aligned16(x) && aligned16(y) && aligned16(g) && aligned16(w) &&
                   aligned16(b) && aligned16(out);
  const dim3 grid(static_cast<unsigned>(a.rows));
  const auto run = [&](auto kernel) {
    // Beyond 48 KiB of shared memory a block (the row plus block_sum's few floats) needs the kernel's opt-in.
    if (smem > 32 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    kernel<<<grid, kThreads, smem, stream>>>(x, y, g, w, b, out, a.cols, a.eps);
  };
  if (vec) {
    run(residual_norm_rows<T, kVec<T>>);
  } else {
    run(residual_norm_rows<T, 1>);
  }
}

}  // namespace

void residual_norm(const ResidualNormArgs& a) {
  if (a.rows <= 0 || a.cols <= 0 || (!a.y && !a.out)) return;
  if (a.cols > kResidualNormMaxCols)
    throw std::invalid_argument("residual_norm: " + std::to_string(a.cols) + " columns, at most " +
                                std::to_string(kResidualNormMaxCols));
  if (a.rows > 0x7fffffff) throw std::invalid_argument("residual_norm: too many rows for one launch");
  launch_as(a.dtype, "residual_norm", [&](auto t) { launch<decltype(t)>(a); });
}

}  // namespace tessera::models::cuda
