// A pre-norm transformer's elementwise steps fused for inference on CUDA (models/cuda/residual_norm.cu,
// glu.cu: fp32 arithmetic, one rounding); otherwise, and under autograd, LibTorch's ops compute the same.
#pragma once

#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

namespace tessera::models {

// Whether the fused kernels take x (CUDA, no autograd, f32/f16/bf16): callers choose their path with it.
bool fused_layers_available(const torch::Tensor& x);

// x ← x + gamma ⊙ y in place (gamma undefined: 1; y undefined: x as it is), then norm(x) of the updated x,
// or an undefined tensor when norm is null. x: [..., C] contiguous and owned by the caller; y like x;
// gamma and the norm's affine: [C], x's dtype.
torch::Tensor add_and_norm_(torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& gamma,
                            const torch::nn::LayerNorm& norm);

// act(h[..., :n]) * h[..., n:] for h [..., 2n]; silu when `silu`, else erf GELU.
torch::Tensor packed_glu(const torch::Tensor& h, bool silu);

}  // namespace tessera::models
