// Two launches per call: per-block partial moments of each plane (Chan's parallel merge of
// shifted sums), then every block merges its plane's partials in the same order (so all blocks
// agree bit for bit) and writes act(normalised x + residual) in one pass over memory.
#include "instance_norm.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "elements.cuh"

namespace tessera::models::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kLoadsPerThread = 4;  // 16-byte loads per thread per block: 8192 bf16 voxels a block

template <typename T> constexpr int64_t kChunk = int64_t(kThreads) * kVec<T> * kLoadsPerThread;

// Count, mean and sum of squared deviations of some voxels; means are relative to the plane's first voxel.
struct Moments {
  float n, mean, m2;
};

__device__ inline Moments merge(const Moments& a, const Moments& b) {
  if (b.n == 0.f) return a;
  if (a.n == 0.f) return b;
  const float n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

__device__ inline Moments warp_merge(Moments m) {
  for (int o = 16; o > 0; o >>= 1) {
    const Moments other{__shfl_xor_sync(0xffffffffu, m.n, o), __shfl_xor_sync(0xffffffffu, m.mean, o),
                        __shfl_xor_sync(0xffffffffu, m.m2, o)};
    m = merge(m, other);
  }
  return m;
}

// Shifted sums of one thread's voxels as moments.
struct Sums {
  float n = 0, s = 0, ss = 0;
  __device__ void add(float v, float shift) {
    const float d = v - shift;
    n += 1.f;
    s += d;
    ss += d * d;
  }
  __device__ Moments moments() const {
    if (n == 0.f) return {0.f, 0.f, 0.f};
    const float mean = s / n;
    return {n, mean, ss - s * mean};
  }
};

// The voxels [begin, end) of one plane, as floats, vectorised when the caller checked alignment.
template <typename T, bool kVectorised, typename F>
__device__ inline void for_each(const T* p, int64_t begin, int64_t end, F&& f) {
  if constexpr (kVectorised) {
    for (int64_t i = begin + int64_t(threadIdx.x) * kVec<T>; i < end; i += int64_t(kThreads) * kVec<T>) {
      const Pack pk = *reinterpret_cast<const Pack*>(p + i);
      const T* v = reinterpret_cast<const T*>(&pk);
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) f(i + k, to_float(v[k]));
    }
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) f(i, to_float(p[i]));
  }
}

// Block-wide merge; the result is valid in thread 0.
__device__ inline Moments block_merge(Moments m) {
  __shared__ Moments warps[kThreads / 32];
  m = warp_merge(m);
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < kThreads / 32 ? warps[threadIdx.x] : Moments{0.f, 0.f, 0.f};
    m = warp_merge(m);
  }
  return m;
}

// grid: planes * splits blocks; partial[(plane * splits + split) * 3 ..] = this block's moments.
template <typename T, bool kVectorised>
__global__ void __launch_bounds__(kThreads) partial_moments(const T* x, int64_t size, int64_t splits, float* partial) {
  const int64_t plane = blockIdx.x / splits, split = blockIdx.x % splits;
  const T* p = x + plane * size;
  const float shift = to_float(p[0]);
  const int64_t begin = split * kChunk<T>, end = min(size, begin + kChunk<T>);
  Sums sums;
  for_each<T, kVectorised>(p, begin, end, [&](int64_t, float v) { sums.add(v, shift); });
  const Moments m = block_merge(sums.moments());
  if (threadIdx.x == 0) {
    float* out = partial + blockIdx.x * 3;
    out[0] = m.n;
    out[1] = m.mean;
    out[2] = m.m2;
  }
}

// A plane's shift (its first voxel), mean relative to the shift and 1/sqrt(var + eps), from its partials,
// computed alike by every block (warp 0; broadcast). Normalising as (x - shift) - mean keeps a large mean
// from costing the small spread its precision (x - shift is exact for nearby values).
struct PlaneStats {
  float shift, mean, rstd;
};

template <typename T>
__device__ inline PlaneStats plane_stats(const T* plane0, const float* partial, int64_t splits, float eps) {
  __shared__ PlaneStats stats;
  __syncthreads();  // a second call must not overwrite `stats` before every thread has read the first
  if (threadIdx.x < 32) {
    Moments m{0.f, 0.f, 0.f};
    for (int64_t s = threadIdx.x; s < splits; s += 32) m = merge(m, {partial[s * 3], partial[s * 3 + 1], partial[s * 3 + 2]});
    m = warp_merge(m);
    if (threadIdx.x == 0) {
      float var = m.m2 / m.n;
      var = var < 0.f ? 0.f : var;  // rounding can dip below zero; NaN must stay NaN
      stats = {to_float(plane0[0]), m.mean, 1.f / sqrtf(var + eps)};
    }
  }
  __syncthreads();
  return stats;
}

template <typename T, bool kVectorised>
__global__ void __launch_bounds__(kThreads)
    normalize(const T* x, const T* residual, T* y, int64_t size, int64_t splits, const float* partial_x,
              const float* partial_r, float eps, bool leaky_relu, float slope) {
  const int64_t plane = blockIdx.x / splits, split = blockIdx.x % splits;
  const int64_t offset = plane * size;
  const PlaneStats sx = plane_stats(x + offset, partial_x + plane * splits * 3, splits, eps);
  PlaneStats sr{0.f, 0.f, 1.f};  // a residual taken as it is: ((r - 0) - 0) * 1
  if (partial_r) sr = plane_stats(residual + offset, partial_r + plane * splits * 3, splits, eps);
  const int64_t begin = split * kChunk<T>, end = min(size, begin + kChunk<T>);
  const T* xp = x + offset;
  const T* rp = residual ? residual + offset : nullptr;
  T* yp = y + offset;
  if constexpr (kVectorised) {
    for (int64_t i = begin + int64_t(threadIdx.x) * kVec<T>; i < end; i += int64_t(kThreads) * kVec<T>) {
      Pack px = *reinterpret_cast<const Pack*>(xp + i), pr{};
      if (rp) pr = *reinterpret_cast<const Pack*>(rp + i);
      T* vx = reinterpret_cast<T*>(&px);
      const T* vr = reinterpret_cast<const T*>(&pr);
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) {
        float v = ((to_float(vx[k]) - sx.shift) - sx.mean) * sx.rstd;
        if (rp) v += ((to_float(vr[k]) - sr.shift) - sr.mean) * sr.rstd;
        if (leaky_relu) v = v > 0.f ? v : v * slope;
        vx[k] = from_float<T>(v);
      }
      *reinterpret_cast<Pack*>(yp + i) = px;
    }
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      float v = ((to_float(xp[i]) - sx.shift) - sx.mean) * sx.rstd;
      if (rp) v += ((to_float(rp[i]) - sr.shift) - sr.mean) * sr.rstd;
      if (leaky_relu) v = v > 0.f ? v : v * slope;
      yp[i] = from_float<T>(v);
    }
  }
}

template <typename T> int64_t splits_of(int64_t size) { return (size + kChunk<T> - 1) / kChunk<T>; }

int64_t splits_for(DType t, int64_t size) {
  switch (t) {
    case DType::f32: return splits_of<float>(size);
    case DType::f16: return splits_of<__half>(size);
    case DType::bf16: return splits_of<__nv_bfloat16>(size);
  }
  return 0;
}

template <typename T, bool kVectorised> void launch_typed(const InstanceNormArgs& a, int64_t splits) {
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const dim3 grid(static_cast<unsigned>(a.planes * splits));
  const T* x = static_cast<const T*>(a.x);
  const T* r = static_cast<const T*>(a.residual);
  float* px = a.workspace;
  float* pr = a.normalize_residual ? a.workspace + a.planes * splits * 3 : nullptr;
  partial_moments<T, kVectorised><<<grid, kThreads, 0, stream>>>(x, a.size, splits, px);
  if (pr) partial_moments<T, kVectorised><<<grid, kThreads, 0, stream>>>(r, a.size, splits, pr);
  normalize<T, kVectorised><<<grid, kThreads, 0, stream>>>(x, r, static_cast<T*>(a.y), a.size, splits, px, pr, a.eps,
                                                           a.leaky_relu, a.slope);
}

template <typename T> void launch(const InstanceNormArgs& a) {
  const int64_t splits = splits_of<T>(a.size);
  const bool vec = a.size % kVec<T> == 0 && aligned16(a.x) && aligned16(a.y) && (!a.residual || aligned16(a.residual));
  if (vec) launch_typed<T, true>(a, splits);
  else launch_typed<T, false>(a, splits);
}

}  // namespace

int64_t workspace_floats(int64_t planes, int64_t size, bool normalize_residual) {
  return planes * splits_for(DType::f32, size) * 3 * (normalize_residual ? 2 : 1);
}

void instance_norm(const InstanceNormArgs& a) {
  if (a.planes <= 0 || a.size <= 0) return;
  if (a.normalize_residual && !a.residual) throw std::invalid_argument("instance_norm: normalize_residual without a residual");
  if (a.planes * splits_for(a.dtype, a.size) > 0x7fffffff) throw std::invalid_argument("instance_norm: tensor too large for one launch");
  launch_as(a.dtype, "instance_norm", [&](auto t) { launch<decltype(t)>(a); });
}

}  // namespace tessera::models::cuda
