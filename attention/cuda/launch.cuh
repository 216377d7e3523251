// Kernel launches per (element type, head-dim bucket); explicit
// instantiations live in inst_*.cu so the builds run in parallel.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernel_args.cuh"

namespace tessera::attention::cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("tessera attention CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// Forward kernel (O, LSE).
template <typename T, int D> void launch_fwd(const KArgs& a, cudaStream_t st);
// Backward main pass (dK, dV; dQ into a.dq_accum when set; dBias atomics when a.any_bias_grad).
template <typename T, int D> void launch_bwd(const KArgs& a, cudaStream_t st);
// Deterministic dQ (written directly in the element type).
template <typename T, int D> void launch_dq(const KArgs& a, cudaStream_t st);
// Deterministic dBias of term t.
template <typename T, int D> void launch_dbias(const KArgs& a, int t, cudaStream_t st);

}  // namespace tessera::attention::cuda
