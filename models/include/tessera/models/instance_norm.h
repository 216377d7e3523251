// MONAI's instance norm (InstanceNorm3d: affine=False, no running statistics, eps 1e-5) with what
// follows it in UnetResBlock: an optional residual (taken as it is or instance-normalised itself)
// and an optional LeakyReLU. On CUDA tensors without autograd, one fused kernel pair
// (models/cuda/instance_norm.cu: statistics in fp32, one rounding); otherwise LibTorch's ops.
#pragma once

#include <torch/types.h>

#include <optional>

namespace tessera::models {

// act(IN(x) + r): r = IN(residual) when normalize_residual, else residual as it is; none when undefined.
// x, residual: [N, C, *spatial], same shape and dtype.
torch::Tensor instance_norm_act(const torch::Tensor& x, const torch::Tensor& residual = {}, bool normalize_residual = false,
                                std::optional<double> leaky_slope = std::nullopt);

// Whether instance_norm_act takes the fused CUDA kernels for these tensors (tests and doctor ask).
bool instance_norm_fused(const torch::Tensor& x, const torch::Tensor& residual = {});

}  // namespace tessera::models
