// The LibTorch face of the attention module: the only place that knows
// at::Tensor. Registered as torch.ops.tessera.attention (CPU, CUDA and
// Autograd kernels), so C++ and Python callers share one op.
//
// Layout [B, N, H, D] (FlashAttention's), any strides with a contiguous last
// dimension; with cu_seqlens_q/k the inputs are packed [total, H, D].
#pragma once

#include <ATen/ATen.h>

#include <c10/util/Optional.h>
#include <tuple>

namespace tessera::torch_ops {

struct AttentionOptions {
  // Additive terms broadcast to [B, Hq, Nq, Nk]: 2-D [Nq|1, Nk], 3-D [h, Nq|1, Nk]
  // or 4-D [b, h, Nq|1, Nk], where b divides B (slice b % size(0) is used: a Swin
  // shift mask [nW, 1, N, N] over B = images * nW windows) and h is 1 or divides Hq.
  // Both receive gradients when they require grad (reduced over broadcasts).
  c10::optional<at::Tensor> bias;
  c10::optional<at::Tensor> mask;
  c10::optional<at::Tensor> alibi_slopes;  // fp32 [Hq] or [B, Hq]
  c10::optional<at::Tensor> cu_seqlens_q;  // int32 [B + 1]
  c10::optional<at::Tensor> cu_seqlens_k;
  int64_t max_seqlen_q = -1;  // varlen: -1 = read from cu_seqlens
  int64_t max_seqlen_k = -1;
  c10::optional<double> scale;  // default 1/sqrt(D)
  bool causal = false;
  int64_t window_left = -1;
  int64_t window_right = -1;
  double dropout_p = 0.0;
  int64_t seed = 0;    // dropout: 0 = draw one from the default generator
  int64_t offset = 0;
  bool deterministic = false;
};

// Returns (out [.., Hq, Dv] in q's dtype, lse fp32 [B, Hq, Nq] or [Hq, total_q]).
// Differentiable w.r.t. q, k, v, bias, mask and lse.
std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const AttentionOptions& opts = {});

// Loads nothing: forces the op registration of this library to be linked in.
void ensure_registered();

}  // namespace tessera::torch_ops
