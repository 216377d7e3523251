#include "tessera/models/vit.h"

#include <torch/nn/functional/upsampling.h>
#include <torch/torch.h>

#include "tessera/models/fused_layers.h"

namespace tessera::models {

namespace F = torch::nn::functional;

PatchEmbedImpl::PatchEmbedImpl(int64_t patch, int64_t in_chans, int64_t embed_dim) : patch_size(patch) {
  proj = register_module("proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_chans, embed_dim, patch).stride(patch)));
}

torch::Tensor PatchEmbedImpl::forward(const torch::Tensor& x) {
  return proj(x).flatten(2).transpose(1, 2);  // [B, D, gh, gw] -> [B, gh*gw, D]
}

ViTAttentionImpl::ViTAttentionImpl(int64_t dim, int64_t heads, bool qkv_bias) : num_heads(heads) {
  TORCH_CHECK(dim % heads == 0, "ViT: embed_dim ", dim, " is not divisible by num_heads ", heads);
  qkv = register_module("qkv", Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(qkv_bias)));
  proj = register_module("proj", Linear(dim, dim));
}

torch::Tensor ViTAttentionImpl::forward(const torch::Tensor& x) {
  return proj(attention_from_qkv(qkv(x), num_heads));
}

torch::Tensor ViTAttentionImpl::forward_rows(const torch::Tensor& x, int64_t rows) {
  const int64_t C = x.size(-1);
  const auto part = [&](const torch::Tensor& t, int64_t first, int64_t size) {
    return t.defined() ? t.narrow(0, first, size) : t;
  };
  const auto q = at::linear(x.narrow(1, 0, rows), part(qkv->weight, 0, C), part(qkv->bias, 0, C));
  const auto kv = at::linear(x, part(qkv->weight, C, 2 * C), part(qkv->bias, C, 2 * C));
  return proj(multi_head_attention(q, kv.narrow(2, 0, C), kv.narrow(2, C, C), num_heads));
}

LayerScaleImpl::LayerScaleImpl(int64_t dim, double init_values) {
  gamma = register_parameter("gamma", torch::full({dim}, init_values));
}

ViTBlockImpl::ViTBlockImpl(const ViTConfig& c) {
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.embed_dim}).eps(c.norm_eps)); };
  norm1 = register_module("norm1", ln());
  attn = register_module("attn", ViTAttention(c.embed_dim, c.num_heads, c.qkv_bias));
  if (c.init_values) ls1 = register_module("ls1", LayerScale(c.embed_dim, *c.init_values));
  norm2 = register_module("norm2", ln());
  MlpOptions mo;
  mo.act = activation_from_name(c.act_layer);
  mo.packed_glu = c.mlp_layer == "swiglu_packed";
  mlp = register_module("mlp", Mlp(c.embed_dim, static_cast<int64_t>(c.embed_dim * c.mlp_ratio), "fc1", "fc2", mo));
  if (c.init_values) ls2 = register_module("ls2", LayerScale(c.embed_dim, *c.init_values));
}

torch::Tensor ViTBlockImpl::forward(const torch::Tensor& x_in) {
  auto a = attn(norm1(x_in));
  auto x = x_in + (ls1 ? ls1(a) : a);
  auto m = mlp(norm2(x));
  return x + (ls2 ? ls2(m) : m);
}

torch::Tensor ViTBlockImpl::forward_rows(const torch::Tensor& x_in, const torch::Tensor& n, int64_t rows) {
  auto a = attn->forward_rows(n, rows);
  auto x = x_in.narrow(1, 0, rows) + (ls1 ? ls1(a) : a);
  auto m = mlp(norm2(x));
  return x + (ls2 ? ls2(m) : m);
}

VisionTransformerImpl::VisionTransformerImpl(ViTConfig c) : config_(std::move(c)) {
  const auto& cfg = config_;
  cfg.validate();
  grid_ = cfg.img_size / cfg.patch_size;
  patch_embed = register_module("patch_embed", PatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dim));
  if (cfg.class_token) cls_token = register_parameter("cls_token", torch::randn({1, 1, cfg.embed_dim}) * 1e-6);
  if (cfg.reg_tokens > 0) reg_token = register_parameter("reg_token", torch::randn({1, cfg.reg_tokens, cfg.embed_dim}) * 1e-6);
  const int64_t embed_len = grid_ * grid_ + (cfg.no_embed_class ? 0 : num_prefix_tokens());
  pos_embed = register_parameter("pos_embed", torch::randn({1, embed_len, cfg.embed_dim}) * 0.02);
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.depth; ++i) blocks->push_back(ViTBlock(cfg));
  // timm: avg pooling normalises after pooling (fc_norm) instead of before (norm).
  const bool use_fc_norm = cfg.fc_norm.value_or(cfg.global_pool == "avg");
  auto ln = torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.embed_dim}).eps(cfg.norm_eps));
  if (use_fc_norm) fc_norm = register_module("fc_norm", ln);
  else norm = register_module("norm", ln);
  if (cfg.num_classes > 0) head = register_module("head", Linear(pooled_dim(), cfg.num_classes));
}

torch::Tensor VisionTransformerImpl::pos_embed_tokens(torch::Tensor x, int64_t gh, int64_t gw) {
  const int64_t prefix_in_pos = config_.no_embed_class ? 0 : num_prefix_tokens();
  auto pos = pos_embed;
  // timm resamples from its grid with antialias; Dinov2Model from the square its table's rows make, without.
  if (config_.reference == "hf_dinov2")
    pos = resample_abs_pos_embed(pos_embed, {gh, gw}, std::nullopt, prefix_in_pos, /*antialias=*/false);
  else if (gh != grid_ || gw != grid_)
    pos = resample_abs_pos_embed(pos_embed, {gh, gw}, {{grid_, grid_}}, prefix_in_pos);
  std::vector<torch::Tensor> parts;
  const int64_t B = x.size(0);
  if (cls_token.defined()) parts.push_back(cls_token.expand({B, -1, -1}));
  if (reg_token.defined()) parts.push_back(reg_token.expand({B, -1, -1}));
  if (config_.no_embed_class) {
    x = x + pos;  // prefix tokens carry no position
    parts.push_back(x);
    return torch::cat(parts, 1);
  }
  parts.push_back(x);
  return torch::cat(parts, 1) + pos;
}

torch::Tensor VisionTransformerImpl::tokens(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == config_.in_chans, "ViT: input must be [B, ", config_.in_chans,
              ", H, W], got ", x.sizes());
  const int64_t p = config_.patch_size;
  TORCH_CHECK(x.size(2) % p == 0 && x.size(3) % p == 0, "ViT: image ", x.size(2), "x", x.size(3),
              " is not a multiple of the patch size ", p);
  TORCH_CHECK(config_.dynamic_img_size || (x.size(2) == config_.img_size && x.size(3) == config_.img_size), "ViT: image ",
              x.size(2), "x", x.size(3), " differs from img_size ", config_.img_size, " (set dynamic_img_size to resample)");
  return pos_embed_tokens(patch_embed(x), x.size(2) / p, x.size(3) / p);
}

torch::Tensor VisionTransformerImpl::forward_features(const torch::Tensor& x) {
  auto t = tokens(x);
  return run_blocks(t, static_cast<int64_t>(blocks->size()), norm);
}

torch::Tensor VisionTransformerImpl::run_blocks(torch::Tensor& x, int64_t count, torch::nn::LayerNorm after) {
  const auto block = [&](int64_t i) { return (*blocks)[i]->as<ViTBlock>(); };
  if (!fused_layers_available(x)) {
    for (int64_t i = 0; i < count; ++i) x = block(i)->forward(x);
    return after ? after(x) : x;
  }
  x = x.contiguous();  // the token sequence tokens() made: the residual stream, updated in place
  const auto gamma = [](const LayerScale& ls) { return ls ? ls->gamma : torch::Tensor(); };
  torch::Tensor n = add_and_norm_(x, {}, {}, count ? block(0)->norm1 : after);
  for (int64_t i = 0; i < count; ++i) {
    ViTBlockImpl* b = block(i);
    n = add_and_norm_(x, b->attn(n), gamma(b->ls1), b->norm2);
    // Each block's second sum is normalised by what reads it next: the next block's norm1, or `after`.
    n = add_and_norm_(x, b->mlp(n), gamma(b->ls2), i + 1 < count ? block(i + 1)->norm1 : after);
  }
  return after ? n : x;
}

torch::Tensor VisionTransformerImpl::forward_embedding(const torch::Tensor& x) {
  const int64_t depth = static_cast<int64_t>(blocks->size());
  if (config_.global_pool != "token" || depth == 0) return forward_head(forward_features(x), /*pre_logits=*/true);
  auto t = tokens(x);
  ViTBlockImpl* last = (*blocks)[depth - 1]->as<ViTBlock>();
  const auto n = run_blocks(t, depth - 1, last->norm1);
  const auto row = last->forward_rows(t, n, 1);
  return forward_head(norm ? norm(row) : row, /*pre_logits=*/true);
}

torch::Tensor VisionTransformerImpl::forward_head(const torch::Tensor& features, bool pre_logits) {
  torch::Tensor x = features;
  const auto& pool = config_.global_pool;
  const auto patch_mean = [&] { return features.narrow(1, num_prefix_tokens(), features.size(1) - num_prefix_tokens()).mean(1); };
  if (pool == "avg") x = patch_mean();
  else if (pool == "token") x = features.select(1, 0);
  else if (pool == "token+avg") x = torch::cat({features.select(1, 0), patch_mean()}, -1);
  if (fc_norm) x = fc_norm(x);
  return (pre_logits || !head) ? x : head(x);
}

torch::Tensor resample_abs_pos_embed(const torch::Tensor& posemb, std::array<int64_t, 2> new_size,
                                     std::optional<std::array<int64_t, 2>> old_size, int64_t num_prefix_tokens,
                                     bool antialias) {
  TORCH_CHECK(posemb.dim() == 3 && posemb.size(0) == 1, "resample_abs_pos_embed: posemb must be [1, N, D], got ",
              posemb.sizes());
  const int64_t num_pos = posemb.size(1);
  if (new_size[0] * new_size[1] + num_prefix_tokens == num_pos && new_size[0] == new_size[1]) return posemb;
  if (!old_size) {
    const auto hw = static_cast<int64_t>(std::sqrt(static_cast<double>(num_pos - num_prefix_tokens)));
    old_size = std::array<int64_t, 2>{hw, hw};
  }
  TORCH_CHECK((*old_size)[0] * (*old_size)[1] + num_prefix_tokens == num_pos, "resample_abs_pos_embed: ", num_pos,
              " rows do not hold ", num_prefix_tokens, " prefix tokens and a ", (*old_size)[0], "x", (*old_size)[1], " grid");
  const int64_t D = posemb.size(2);
  auto prefix = posemb.narrow(1, 0, num_prefix_tokens);
  auto grid = posemb.narrow(1, num_prefix_tokens, num_pos - num_prefix_tokens).to(torch::kFloat);
  grid = grid.reshape({1, (*old_size)[0], (*old_size)[1], D}).permute({0, 3, 1, 2});
  grid = F::interpolate(grid, F::InterpolateFuncOptions()
                                  .size(std::vector<int64_t>{new_size[0], new_size[1]})
                                  .mode(torch::kBicubic)
                                  .align_corners(false)
                                  .antialias(antialias));
  grid = grid.permute({0, 2, 3, 1}).reshape({1, -1, D}).to(posemb.scalar_type());
  return num_prefix_tokens ? torch::cat({prefix, grid}, 1) : grid;
}

StateDict resample_checkpoint_pos_embed(StateDict state, const VisionTransformerImpl& model) {
  const auto it = state.find("pos_embed");
  if (it == state.end() || it->second.sizes() == model.pos_embed.sizes()) return state;
  const auto& c = model.config();
  const int64_t grid = c.img_size / c.patch_size;
  const int64_t prefix = c.no_embed_class ? 0 : model.num_prefix_tokens();
  TORCH_CHECK(it->second.dim() == 3 && it->second.size(2) == c.embed_dim, "ViT: checkpoint pos_embed ", it->second.sizes(),
              " does not fit embed_dim ", c.embed_dim);
  it->second = resample_abs_pos_embed(it->second, {grid, grid}, std::nullopt, prefix);
  return state;
}

}  // namespace tessera::models
