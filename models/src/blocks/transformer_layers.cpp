#include "tessera/models/transformer_layers.h"

#include <torch/nn/functional/activation.h>

namespace tessera::models {

torch::Tensor attention_from_qkv(const torch::Tensor& qkv, int64_t num_heads, const AttentionOptions& opts) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * num_heads) == 0, "attention_from_qkv: qkv must be [B, N, 3*C] with C ",
              "divisible by ", num_heads, " heads, got ", qkv.sizes());
  const int64_t B = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / (3 * num_heads);
  const auto parts = qkv.view({B, N, 3, num_heads, D});
  auto [out, lse] = tessera::torch_ops::attention(parts.select(2, 0), parts.select(2, 1), parts.select(2, 2), opts);
  return out.reshape({B, N, num_heads * D});
}

torch::Tensor multi_head_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   int64_t num_heads, const AttentionOptions& opts) {
  const int64_t B = q.size(0), N = q.size(1), C = q.size(2);
  TORCH_CHECK(C % num_heads == 0, "multi_head_attention: ", C, " channels are not divisible by ", num_heads, " heads");
  auto split = [&](const torch::Tensor& t) { return t.view({t.size(0), t.size(1), num_heads, C / num_heads}); };
  auto [out, lse] = tessera::torch_ops::attention(split(q), split(k), split(v), opts);
  return out.reshape({B, N, C});
}

MlpImpl::MlpImpl(int64_t in_features, int64_t hidden_features, const std::string& fc1_name,
                 const std::string& fc2_name) {
  fc1 = register_module(fc1_name, torch::nn::Linear(in_features, hidden_features));
  fc2 = register_module(fc2_name, torch::nn::Linear(hidden_features, in_features));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return fc2(torch::gelu(fc1(x))); }

}  // namespace tessera::models
