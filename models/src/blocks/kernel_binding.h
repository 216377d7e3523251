// What the bindings of the fused CUDA kernels share (instance_norm.cpp, fused_layers.cpp).
#pragma once

#include <torch/torch.h>

#ifdef TESSERA_MODELS_CUDA
#include "dtype.h"
#endif

namespace tessera::models::detail {

// Whether `other` can go into the same kernel call as x: absent, or of x's sizes, dtype and device, outside autograd.
inline bool kernel_partner(const torch::Tensor& x, const torch::Tensor& other) {
  return !other.defined() || (other.sizes() == x.sizes() && other.scalar_type() == x.scalar_type() &&
                              other.device() == x.device() && !(torch::GradMode::is_enabled() && other.requires_grad()));
}

#ifdef TESSERA_MODELS_CUDA
// The kernels' element type of a float32, float16 or bfloat16 tensor.
inline cuda::DType kernel_dtype(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat ? cuda::DType::f32 : t.scalar_type() == torch::kHalf ? cuda::DType::f16 : cuda::DType::bf16;
}
#endif

}  // namespace tessera::models::detail
