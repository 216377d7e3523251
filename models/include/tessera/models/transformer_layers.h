// Pieces shared by the transformer models: multi-head self-attention through
// Tessera's fused op, and the two-layer MLP (GELU or SiLU, plain or packed
// GLU) under the names each reference library gives it (timm fc1/fc2, MONAI
// linear1/linear2).
#pragma once

#include <torch/nn/module.h>
#include "tessera/models/linear.h"
#include <torch/nn/pimpl.h>

#include <string>

#include "tessera/torch/attention.h"

namespace tessera::models {

using tessera::torch_ops::AttentionOptions;

// Where the models' attention runs. `tessera` (the default) is the fused op;
// `torch_sdpa` is LibTorch's at::scaled_dot_product_attention (LibTorch >= 2.0),
// with bias + mask materialised as one [B, H, N, N] attn_mask as MONAI does,
// kept only so benchmarks can time the same model both ways in one program.
// `reference_f64` is plain LibTorch ops in float64 (softmax(QKᵀ·scale + bias
// + mask)·V, differentiable by autograd): the yardstick for checking a
// training step's gradients, never for speed. `plain` is the same ops in the
// inputs' own precision, what LibTorch 1.13 offers without a fused attention:
// the control that says how far an ordinary fp32 step lands from that yardstick.
enum class AttentionBackend { tessera, torch_sdpa, reference_f64, plain };
void set_attention_backend(AttentionBackend b);
AttentionBackend attention_backend();
bool torch_sdpa_available();

// qkv: [B, N, 3*C] as produced by one Linear(C, 3C), laid out (3, heads, head_dim)
// along the last dim (timm Attention, MONAI WindowAttention). q, k and v are
// passed to the op as strided views of it, so nothing is copied. Returns [B, N, C].
torch::Tensor attention_from_qkv(const torch::Tensor& qkv, int64_t num_heads, const AttentionOptions& opts = {});

// q, k, v: [B, N, C] each (separate projections, Hugging Face style). Returns [B, N, C].
torch::Tensor multi_head_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   int64_t num_heads, const AttentionOptions& opts = {});

enum class Activation { gelu, silu };  // gelu: erf form, nn.GELU's default
Activation activation_from_name(const std::string& name);  // "gelu" | "silu"

struct MlpOptions {
  Activation act = Activation::gelu;
  // timm GluMlp with gate_last=False (SwiGLUPacked with SiLU): fc1 gives
  // 2 * h features, act(first half) * second half goes into fc2 (h -> out).
  bool packed_glu = false;
};

// Linear -> activation -> Linear (or the packed GLU above); dropout is 0 at inference.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t in_features, int64_t hidden_features, const std::string& fc1_name = "fc1",
          const std::string& fc2_name = "fc2", MlpOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);

  Linear fc1{nullptr}, fc2{nullptr};
  MlpOptions options;
};
TORCH_MODULE(Mlp);

}  // namespace tessera::models
