#include "tessera/models/transformer_layers.h"

#include <torch/nn/functional/activation.h>
#include <torch/version.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tessera/models/fused_layers.h"

namespace tessera::models {
namespace {

std::atomic<AttentionBackend> g_backend{AttentionBackend::tessera};

// bias + mask as one additive term [B|1, H|1, N|1, S] in `dtype`, broadcast as the op does
// (a term with a tiled batch dim, e.g. Swin's [nW, 1, N, N] mask, is repeated over the images).
c10::optional<torch::Tensor> additive_terms(const AttentionOptions& o, int64_t B, c10::ScalarType dtype) {
  c10::optional<torch::Tensor> sum;
  for (const auto* t : {&o.bias, &o.mask}) {
    if (!t->has_value()) continue;
    const torch::Tensor& x = **t;
    torch::Tensor m = x.dim() == 2 ? x.view({1, 1, x.size(0), x.size(1)}) : (x.dim() == 3 ? x.unsqueeze(0) : x);
    if (m.size(0) != 1 && m.size(0) != B) m = m.repeat({B / m.size(0), 1, 1, 1});
    m = m.to(dtype);
    sum = sum.has_value() ? *sum + m : m;
  }
  return sum;
}

void check_plain(const AttentionOptions& o, const char* backend) {
  if (o.alibi_slopes.has_value() || o.cu_seqlens_q.has_value() || o.window_left >= 0 || o.window_right >= 0 ||
      o.dropout_p > 0)
    throw std::runtime_error(std::string("attention backend ") + backend +
                             " supports bias, mask and causal only (no ALiBi, varlen, windows or dropout)");
}

// The same function through LibTorch's SDPA: q, k, v [B, N, H, D] → [B, N, H, D].
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const AttentionOptions& o) {
#if TORCH_VERSION_MAJOR >= 2
  check_plain(o, "torch_sdpa");
  const int64_t B = q.size(0), H = q.size(2), N = q.size(1), S = k.size(1);
  c10::optional<torch::Tensor> mask = additive_terms(o, B, q.scalar_type());
  if (mask.has_value()) mask = mask->expand({B, H, N, S});
  auto out = at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, 0.0,
                                              o.causal, o.scale);
  return out.transpose(1, 2);
#else
  (void)q, (void)k, (void)v, (void)o;
  throw std::runtime_error("attention backend torch_sdpa needs LibTorch >= 2.0");
#endif
}

// softmax(QKᵀ·scale + bias + mask)·V by plain ops in dtype dt (float64: the reference; the
// inputs' own: the plain backend); causal is bottom-right aligned as in the op.
torch::Tensor plain_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionOptions& o, torch::ScalarType dt, const char* name) {
  check_plain(o, name);
  const int64_t B = q.size(0), N = q.size(1), S = k.size(1), D = q.size(3);
  const auto qd = q.to(dt).transpose(1, 2), kd = k.to(dt).transpose(1, 2), vd = v.to(dt).transpose(1, 2);
  const double scale = o.scale.has_value() ? *o.scale : 1.0 / std::sqrt(double(D));
  torch::Tensor s = torch::matmul(qd, kd.transpose(-2, -1)) * scale;
  if (auto terms = additive_terms(o, B, dt)) s = s + *terms;
  if (o.causal) {
    const auto i = torch::arange(N, q.options().dtype(torch::kLong)).unsqueeze(1);
    const auto j = torch::arange(S, q.options().dtype(torch::kLong)).unsqueeze(0);
    s = s.masked_fill(j > i + (S - N), -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(s, -1), vd).transpose(1, 2).to(q.scalar_type());
}

std::tuple<torch::Tensor, torch::Tensor> run_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                       const torch::Tensor& v, const AttentionOptions& o) {
  if (g_backend.load() == AttentionBackend::torch_sdpa) return {sdpa(q, k, v, o), torch::Tensor()};
  if (g_backend.load() == AttentionBackend::reference_f64)
    return {plain_attention(q, k, v, o, torch::kDouble, "reference_f64"), torch::Tensor()};
  if (g_backend.load() == AttentionBackend::plain)
    return {plain_attention(q, k, v, o, q.scalar_type(), "plain"), torch::Tensor()};
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

Activation activation_from_name(const std::string& name) {
  if (name == "gelu") return Activation::gelu;
  if (name == "silu") return Activation::silu;
  throw std::invalid_argument("activation must be gelu or silu, got " + name);
}

MlpImpl::MlpImpl(int64_t in_features, int64_t hidden_features, const std::string& fc1_name,
                 const std::string& fc2_name, MlpOptions opts)
    : options(opts) {
  TORCH_CHECK(!opts.packed_glu || hidden_features % 2 == 0, "Mlp: a packed GLU needs an even hidden size, got ",
              hidden_features);
  fc1 = register_module(fc1_name, Linear(in_features, hidden_features));
  fc2 = register_module(fc2_name, Linear(opts.packed_glu ? hidden_features / 2 : hidden_features, in_features));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  auto h = fc1(x);
  const bool silu = options.act == Activation::silu;
  if (options.packed_glu) h = packed_glu(h, silu);
  else h = silu ? torch::silu(h) : torch::gelu(h);
  return fc2(h);
}

}  // namespace tessera::models
