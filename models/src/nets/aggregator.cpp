#include "tessera/models/aggregator.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"

#include <sstream>
#include <stdexcept>

namespace tessera::models {
namespace {

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  os << "LongSequenceAggregator: ";
  (os << ... << args);
  throw std::invalid_argument(os.str());
}

int64_t position_dims(PositionEncoding p) {
  return p == PositionEncoding::rope2d ? 2 : (p == PositionEncoding::rope1d ? 1 : 0);
}

}  // namespace

PositionEncoding parse_position_encoding(const std::string& name) {
  if (name == "none") return PositionEncoding::none;
  if (name == "rope1d") return PositionEncoding::rope1d;
  if (name == "rope2d") return PositionEncoding::rope2d;
  fail("unknown position encoding '", name, "' (expected none, rope1d or rope2d)");
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, double base) {
  const int64_t P = positions.size(1), hd = x.size(2), m = hd / P;
  std::vector<torch::Tensor> parts;
  for (int64_t c = 0; c < P; ++c) {
    const auto xc = x.narrow(2, c * m, m);
    const int64_t half = m / 2;
    // Angles in float64: positions can be large (hour-long timestamps, 100k-tile grids).
    auto inv_freq = torch::pow(base, -torch::arange(half, torch::kDouble) * 2.0 / double(m));
    auto ang = positions.select(1, c).to(torch::kDouble).unsqueeze(1) * inv_freq.unsqueeze(0).to(positions.device());
    auto cos = torch::cat({ang.cos(), ang.cos()}, 1).to(x.dtype()).unsqueeze(1);  // [total, 1, m]
    auto sin = torch::cat({ang.sin(), ang.sin()}, 1).to(x.dtype()).unsqueeze(1);
    auto rot = torch::cat({-xc.narrow(2, half, half), xc.narrow(2, 0, half)}, 2);
    parts.push_back(xc * cos + rot * sin);
  }
  return P == 1 ? parts[0] : torch::cat(parts, 2);
}

AggregatorBlockImpl::AggregatorBlockImpl(const AggregatorConfig& cfg) : cfg_(cfg) {
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.dim}).eps(1e-6)));
  qkv = register_module("qkv", Linear(cfg.dim, 3 * cfg.dim));
  proj = register_module("proj", Linear(cfg.dim, cfg.dim));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.dim}).eps(1e-6)));
  mlp = register_module("mlp", Mlp(cfg.dim, static_cast<int64_t>(cfg.dim * cfg.mlp_ratio)));
}

torch::Tensor AggregatorBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                           const torch::Tensor& cu_seqlens, int64_t max_seqlen) {
  const int64_t total = x.size(0), H = cfg_.num_heads, hd = cfg_.dim / H;
  auto qkv_out = qkv->forward(norm1->forward(x)).view({total, 3, H, hd});
  auto q = qkv_out.select(1, 0), k = qkv_out.select(1, 1), v = qkv_out.select(1, 2);
  if (cfg_.position != PositionEncoding::none) {
    q = apply_rope(q, positions, cfg_.rope_base);
    k = apply_rope(k, positions, cfg_.rope_base);
  }
  AttentionOptions o;
  o.cu_seqlens_q = cu_seqlens;
  o.cu_seqlens_k = cu_seqlens;
  o.max_seqlen_q = max_seqlen;
  o.max_seqlen_k = max_seqlen;
  o.causal = cfg_.causal;
  auto attn = std::get<0>(tessera::torch_ops::attention(q, k, v, o)).reshape({total, cfg_.dim});
  auto h = x + proj->forward(attn);
  return h + mlp->forward(norm2->forward(h));
}

LongSequenceAggregatorImpl::LongSequenceAggregatorImpl(const AggregatorConfig& cfg) : cfg_(cfg) {
  if (cfg.dim % cfg.num_heads != 0) fail("dim ", cfg.dim, " is not a multiple of num_heads ", cfg.num_heads);
  const int64_t hd = cfg.dim / cfg.num_heads, P = position_dims(cfg.position);
  if (P > 0 && hd % (2 * P) != 0) fail("head dim ", hd, " must be a multiple of ", 2 * P, " for rotary encoding");
  embed = register_module("embed", Linear(cfg.in_dim, cfg.dim));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.depth; ++i) blocks->push_back(AggregatorBlock(cfg));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.dim}).eps(1e-6)));
  if (cfg.num_classes > 0) head = register_module("head", Linear(cfg.dim, cfg.num_classes));
}

AggregatorOutput LongSequenceAggregatorImpl::forward(const torch::Tensor& tokens, const torch::Tensor& positions0,
                                                     const torch::Tensor& cu_seqlens0) {
  if (tokens.dim() != 2 || tokens.size(1) != cfg_.in_dim)
    fail("tokens must be [total, ", cfg_.in_dim, "], got ", tokens.sizes());
  const int64_t total = tokens.size(0), P = position_dims(cfg_.position);
  torch::Tensor positions = positions0;
  if (P > 0) {
    if (!positions.defined()) fail("positions are required for rotary encoding");
    if (positions.dim() == 1 && P == 1) positions = positions.unsqueeze(1);
    if (positions.dim() != 2 || positions.size(0) != total || positions.size(1) != P)
      fail("positions must be [", total, ", ", P, "], got ", positions.sizes());
  }
  torch::Tensor cu = cu_seqlens0.defined()
                         ? cu_seqlens0.to(torch::kInt)
                         : torch::tensor({0, static_cast<int32_t>(total)}, torch::TensorOptions().dtype(torch::kInt));
  cu = cu.to(tokens.device());
  const auto cu_cpu = cu.to(torch::kCPU);
  if (cu_cpu[-1].item<int64_t>() != total) fail("cu_seqlens ends at ", cu_cpu[-1].item<int64_t>(), " but there are ", total, " tokens");
  const auto lengths = (cu_cpu.slice(0, 1) - cu_cpu.slice(0, 0, -1)).to(torch::kLong);
  const int64_t max_seqlen = lengths.numel() ? lengths.max().item<int64_t>() : 0;

  auto x = embed->forward(tokens);
  for (const auto& b : *blocks) x = b->as<AggregatorBlock>()->forward(x, positions, cu, max_seqlen);
  AggregatorOutput out;
  out.tokens = norm->forward(x);
  // Mean over each sequence: segment sums through index_add, divided by the lengths.
  const int64_t B = cu.size(0) - 1;
  auto seg = torch::repeat_interleave(torch::arange(B, torch::kLong), lengths).to(tokens.device());
  out.pooled = torch::zeros({B, cfg_.dim}, out.tokens.options()).index_add(0, seg, out.tokens) /
               lengths.clamp_min(1).to(out.tokens.options()).unsqueeze(1);
  if (head) out.logits = head->forward(cfg_.pooled_head ? out.pooled : out.tokens);
  return out;
}

namespace {

const char* position_name(PositionEncoding p) {
  switch (p) {
    case PositionEncoding::none: return "none";
    case PositionEncoding::rope1d: return "rope1d";
    case PositionEncoding::rope2d: return "rope2d";
  }
  return "none";
}

}  // namespace

void save_aggregator(const std::string& path, LongSequenceAggregator& model) {
  const AggregatorConfig& c = model->config();
  const nlohmann::json j = {{"in_dim", c.in_dim},         {"dim", c.dim},
                            {"depth", c.depth},           {"num_heads", c.num_heads},
                            {"mlp_ratio", c.mlp_ratio},   {"position", position_name(c.position)},
                            {"rope_base", c.rope_base},   {"causal", c.causal},
                            {"num_classes", c.num_classes}, {"pooled_head", c.pooled_head}};
  safetensors::save(path, state_dict(*model), {{"aggregator_config", j.dump()}});
}

LongSequenceAggregator load_aggregator(const std::string& path) {
  const auto meta = safetensors::metadata(path);
  const auto it = meta.find("aggregator_config");
  if (it == meta.end()) throw std::runtime_error(path + ": no \"aggregator_config\" in the safetensors metadata");
  AggregatorConfig c;
  try {
    const auto j = nlohmann::json::parse(it->second);
    c.in_dim = j.at("in_dim");
    c.dim = j.at("dim");
    c.depth = j.at("depth");
    c.num_heads = j.at("num_heads");
    c.mlp_ratio = j.value("mlp_ratio", 4.0);
    c.position = parse_position_encoding(j.value("position", std::string("rope2d")));
    c.rope_base = j.value("rope_base", 100.0);
    c.causal = j.value("causal", false);
    c.num_classes = j.value("num_classes", 0);
    c.pooled_head = j.value("pooled_head", false);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": bad aggregator_config: " + e.what());
  }
  LongSequenceAggregator m(c);
  load_weights(*m, {path});
  return m;
}

}  // namespace tessera::models
