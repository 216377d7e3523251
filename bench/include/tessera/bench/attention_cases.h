// Attention timings: Tessera's op against LibTorch's own attention on the same
// tensors. LibTorch's side is at::scaled_dot_product_attention on CUDA
// (LibTorch >= 2.0: the kernel a PyTorch user gets) and the naive
// softmax(Q Kᵀ · scale) V through torch::matmul elsewhere (what a LibTorch user
// writes on the CPU, O(N²) memory).
#pragma once

#include <torch/types.h>

#include <string>

#include "tessera/bench/timing.h"

namespace tessera::bench {

struct AttentionShape {
  int64_t batch = 1, heads = 4, seq = 1024, head_dim = 64;
  bool causal = false;
};

// FlashAttention's count: 4·B·H·N²·d for the forward, halved when causal;
// `pass_factor` is 2.5 for the backward alone and 3.5 for forward + backward.
double attention_flops(const AttentionShape& s, double pass_factor = 1.0);

// softmax(q kᵀ / sqrt(D), causal-masked when asked) v on [B, N, H, D] tensors.
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              bool causal = false);

enum class AttentionImpl { tessera, libtorch };
// What `libtorch` runs on this device: "SDPA" or "naive".
std::string libtorch_attention_name(const c10::Device& device);
// [B, N, H, D] in, [B, N, H, D] out, differentiable.
torch::Tensor run_attention(AttentionImpl impl, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            bool causal);

// Seeded random q, k, v and output gradient g, [B, N, H, D].
struct AttentionInputs {
  AttentionShape shape;
  torch::Tensor q, k, v, g;
};
AttentionInputs make_attention_inputs(const AttentionShape& s, const c10::Device& device, c10::ScalarType dtype);

// forward: without autograd; backward: out.backward(g) alone, its forward
// untimed; forward_backward: both, as a training step runs them.
enum class Pass { forward, backward, forward_backward };
double pass_flop_factor(Pass p);  // 1, 2.5, 3.5

// Median ms of `pass` on `in`. With `out`, the forward's output is kept there.
double time_attention(AttentionImpl impl, const AttentionInputs& in, Pass pass, const TimingOptions& timing,
                      torch::Tensor* out = nullptr);

}  // namespace tessera::bench
