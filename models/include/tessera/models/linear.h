// torch::nn::Linear whose forward is at::linear, as Python's F.linear.
//
// Why: LibTorch's C++ F::linear (torch/nn/functional/linear.h) fuses the bias
// into the GEMM only for 2-D inputs; a [B, N, C] input gets a matmul and then
// a separate broadcast add. On the H200 the C++ ViT-B/16 forward (batch 256,
// bf16) spent 11.3 ms of its 34 in those adds (Nsight Compute, tools/gpu/gpu_check.sh
// vit-kernels); at::linear flattens a contiguous input and takes the GEMM's
// fused bias epilogue. Same parameters and names ("weight", "bias").
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace tessera::models {

class LinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& x) { return at::linear(x, weight, bias); }
};
TORCH_MODULE(Linear);

}  // namespace tessera::models
