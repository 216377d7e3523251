#include "tessera/models/transformer_layers.h"

#include <torch/nn/functional/activation.h>
#include <torch/version.h>

#include <atomic>
#include <stdexcept>

namespace tessera::models {
namespace {

std::atomic<AttentionBackend> g_backend{AttentionBackend::tessera};

// The same function through LibTorch's SDPA: q, k, v [B, N, H, D] → [B, N, H, D].
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const AttentionOptions& o) {
#if TORCH_VERSION_MAJOR >= 2
  const int64_t B = q.size(0), H = q.size(2), N = q.size(1), S = k.size(1);
  c10::optional<torch::Tensor> mask;
  auto add = [&](const torch::Tensor& t) {  // a 2-D..4-D term with a tiled batch dim → [B, H|1, N|1, S]
    torch::Tensor m = t.dim() == 2 ? t.view({1, 1, t.size(0), t.size(1)}) : (t.dim() == 3 ? t.unsqueeze(0) : t);
    if (m.size(0) != 1 && m.size(0) != B) m = m.repeat({B / m.size(0), 1, 1, 1});
    m = m.to(q.dtype());
    mask = mask.has_value() ? *mask + m : m;
  };
  if (o.bias.has_value()) add(*o.bias);
  if (o.mask.has_value()) add(*o.mask);
  if (mask.has_value()) mask = mask->expand({B, H, N, S});
  auto out = at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, 0.0,
                                              o.causal, o.scale);
  return out.transpose(1, 2);
#else
  (void)q, (void)k, (void)v, (void)o;
  throw std::runtime_error("attention backend torch_sdpa needs LibTorch >= 2.0");
#endif
}

std::tuple<torch::Tensor, torch::Tensor> run_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                       const torch::Tensor& v, const AttentionOptions& o) {
  if (g_backend.load() == AttentionBackend::torch_sdpa) return {sdpa(q, k, v, o), torch::Tensor()};
  return tessera::torch_ops::attention(q, k, v, o);
}

}  // namespace

void set_attention_backend(AttentionBackend b) { g_backend.store(b); }
AttentionBackend attention_backend() { return g_backend.load(); }
bool torch_sdpa_available() { return TORCH_VERSION_MAJOR >= 2; }

torch::Tensor attention_from_qkv(const torch::Tensor& qkv, int64_t num_heads, const AttentionOptions& opts) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * num_heads) == 0, "attention_from_qkv: qkv must be [B, N, 3*C] with C ",
              "divisible by ", num_heads, " heads, got ", qkv.sizes());
  const int64_t B = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / (3 * num_heads);
  const auto parts = qkv.view({B, N, 3, num_heads, D});
  auto [out, lse] = run_attention(parts.select(2, 0), parts.select(2, 1), parts.select(2, 2), opts);
  return out.reshape({B, N, num_heads * D});
}

torch::Tensor multi_head_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   int64_t num_heads, const AttentionOptions& opts) {
  const int64_t B = q.size(0), N = q.size(1), C = q.size(2);
  TORCH_CHECK(C % num_heads == 0, "multi_head_attention: ", C, " channels are not divisible by ", num_heads, " heads");
  auto split = [&](const torch::Tensor& t) { return t.view({t.size(0), t.size(1), num_heads, C / num_heads}); };
  auto [out, lse] = run_attention(split(q), split(k), split(v), opts);
  return out.reshape({B, N, C});
}

MlpImpl::MlpImpl(int64_t in_features, int64_t hidden_features, const std::string& fc1_name,
                 const std::string& fc2_name) {
  fc1 = register_module(fc1_name, torch::nn::Linear(in_features, hidden_features));
  fc2 = register_module(fc2_name, torch::nn::Linear(hidden_features, in_features));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return fc2(torch::gelu(fc1(x))); }

}  // namespace tessera::models
