// A grid-stride loop over 16-byte packs of the output (one element at a time when hidden or the pointers
// do not allow them); each pack reads its gate and its value half of h.
#include "glu.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "elements.cuh"

namespace tessera::models::cuda {
namespace {

constexpr int kThreads = 256;

template <GluAct A> __device__ inline float activate(float v) {
  if constexpr (A == GluAct::silu) return v / (1.f + expf(-v));
  else return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}

template <typename T, int N, GluAct A>
__global__ void __launch_bounds__(kThreads) glu(const T* h, T* out, int64_t rows, int64_t hidden) {
  const int64_t per_row = hidden / N, total = rows * per_row;
  for (int64_t p = int64_t(blockIdx.x) * kThreads + threadIdx.x; p < total; p += int64_t(gridDim.x) * kThreads) {
    const int64_t r = p / per_row, j = (p - r * per_row) * N;
    const T* gate = h + r * 2 * hidden + j;
    float g[N], v[N];
    load_floats<T, N>(gate, g);
    load_floats<T, N>(gate + hidden, v);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] *= activate<A>(g[k]);
    store_floats<T, N>(out + r * hidden + j, v);
  }
}

template <typename T, int N> void launch_n(const GluArgs& a, cudaStream_t stream) {
  const int64_t packs = a.rows * (a.hidden / N);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((packs + kThreads - 1) / kThreads, 65536));
  const T* h = static_cast<const T*>(a.h);
  T* out = static_cast<T*>(a.out);
  if (a.act == GluAct::silu) glu<T, N, GluAct::silu><<<blocks, kThreads, 0, stream>>>(h, out, a.rows, a.hidden);
  else glu<T, N, GluAct::gelu><<<blocks, kThreads, 0, stream>>>(h, out, a.rows, a.hidden);
}

template <typename T> void launch(const GluArgs& a) {
  const auto stream = static_cast<cudaStream_t>(a.stream);
  // Both halves of every row start on a 16-byte boundary when hidden is a whole number of packs.
  if (a.hidden % kVec<T> == 0 && aligned16(a.h) && aligned16(a.out)) launch_n<T, kVec<T>>(a, stream);
  else launch_n<T, 1>(a, stream);
}

}  // namespace

void packed_glu(const GluArgs& a) {
  if (a.rows <= 0 || a.hidden <= 0) return;
  launch_as(a.dtype, "packed_glu", [&](auto t) { launch<decltype(t)>(a); });
}

}  // namespace tessera::models::cuda
