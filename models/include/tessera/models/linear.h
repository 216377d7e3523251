// A linear layer with torch::nn::Linear's parameters, options, names ("weight", "bias") and random
// initialisation, whose forward is at::linear, as Python's F.linear, and whose initialisation a
// ParametersToBeLoaded scope skips.
//
// Why at::linear: LibTorch's C++ F::linear (torch/nn/functional/linear.h) fuses the bias into the GEMM only for
// 2-D inputs; a [B, N, C] input gets a matmul and then a separate broadcast add. On the H200 the C++ ViT-B/16
// forward (batch 256, bf16) spent 11.3 ms of its 34 in those adds (Nsight Compute, tools/gpu/gpu_check.sh
// vit-kernels); at::linear flattens a contiguous input and takes the GEMM's fused bias epilogue.
#pragma once

#include <c10/core/TensorOptions.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/options/linear.h>
#include <torch/nn/pimpl.h>

#include <optional>

namespace tessera::models {

// While alive (on this thread), the linear layers built skip their random initialisation and hold NaN in
// `dtype` on `device` instead, for a checkpoint to overwrite: a ViT-H's initialisation alone takes ~10 s of one
// CPU core, a fixed cost of every run that loads weights, and built on the GPU its weights are copied there once,
// from the file's tensors. NaN, not uninitialised memory: a parameter that a loader missed shows in the output.
// For strict loads only (every parameter in the file).
class ParametersToBeLoaded {
 public:
  explicit ParametersToBeLoaded(c10::ScalarType dtype = c10::kFloat, c10::Device device = c10::kCPU);
  ~ParametersToBeLoaded();
  ParametersToBeLoaded(const ParametersToBeLoaded&) = delete;
  ParametersToBeLoaded& operator=(const ParametersToBeLoaded&) = delete;
  // The innermost live scope's dtype and device on this thread; nullopt outside any.
  static std::optional<c10::TensorOptions> active();

 private:
  std::optional<c10::TensorOptions> outer_;
};

class LinearImpl : public torch::nn::Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const torch::nn::LinearOptions& options);
  void reset() override;
  // torch::nn::Linear's: Kaiming-uniform weight (a = sqrt 5), bias uniform in ±1/sqrt(in_features).
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  torch::Tensor forward(const torch::Tensor& x) { return at::linear(x, weight, bias); }

  torch::nn::LinearOptions options;
  torch::Tensor weight, bias;
};
TORCH_MODULE(Linear);

}  // namespace tessera::models
