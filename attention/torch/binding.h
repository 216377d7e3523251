// The binding layer between at::Tensor and AttentionParams: every check on
// shapes, dtypes and devices happens here, then the plain API runs.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace tessera::torch_ops::detail {

struct Options {
  at::Tensor bias, mask, alibi_slopes, cu_seqlens_q, cu_seqlens_k;  // undefined when absent
  int64_t max_seqlen_q = -1, max_seqlen_k = -1;
  double scale = 0.0;  // 0 = 1/sqrt(D)
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  double dropout_p = 0.0;
  int64_t seed = 0, offset = 0;
  bool deterministic = false;
};

// (out, lse)
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const Options& o);

// (dq, dk, dv, dbias, dmask); dbias/dmask are undefined unless asked for.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(
    const at::Tensor& dout, const at::Tensor& dlse, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, const Options& o, bool bias_grad, bool mask_grad);

}  // namespace tessera::torch_ops::detail
