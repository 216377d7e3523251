// Instance normalisation fused with what follows it in MONAI's UnetResBlock (a residual sum, LeakyReLU):
// plain CUDA, no LibTorch (models/src/blocks/instance_norm.cpp binds it to tensors).
//
//   y = act((x - mean_x) * rstd_x + r),   r = (res - mean_res) * rstd_res   (normalize_residual)
//                                           or res as it is, or 0
// per plane (one sample's channel: `size` contiguous voxels), biased variance, statistics in fp32,
// one rounding to the storage type at the end.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace tessera::models::cuda {

struct InstanceNormArgs {
  DType dtype = DType::f32;
  const void* x = nullptr;         // [planes, size], contiguous
  void* y = nullptr;               // [planes, size], contiguous; may be x
  const void* residual = nullptr;  // [planes, size] or nullptr; may not be y unless it is x
  bool normalize_residual = false;
  int64_t planes = 0, size = 0;
  float eps = 1e-5f;
  bool leaky_relu = false;
  float slope = 0.01f;
  float* workspace = nullptr;  // workspace_floats(...) floats of device memory
  void* stream = nullptr;      // cudaStream_t
};

// Floats of scratch memory a call with these sizes needs (per-block partial moments).
int64_t workspace_floats(int64_t planes, int64_t size, bool normalize_residual);

// Launches the statistics and the normalisation on `stream`; throws std::runtime_error if a launch fails.
void instance_norm(const InstanceNormArgs& args);

}  // namespace tessera::models::cuda
