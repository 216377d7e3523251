#include "tessera/models/vit3d.h"

#include <torch/torch.h>

namespace tessera::models {

PatchEmbeddingBlockImpl::PatchEmbeddingBlockImpl(const ViT3DConfig& c) {
  int64_t n_patches = 1;
  for (int i = 0; i < 3; ++i) {
    TORCH_CHECK(c.img_size[i] % c.patch_size[i] == 0, "ViT3D: img_size ", c.img_size[i], " is not a multiple of patch_size ",
                c.patch_size[i]);
    n_patches *= c.img_size[i] / c.patch_size[i];
  }
  const std::vector<int64_t> k(c.patch_size.begin(), c.patch_size.end());
  patch_embeddings = register_module(
      "patch_embeddings", torch::nn::Conv3d(torch::nn::Conv3dOptions(c.in_channels, c.hidden_size, k).stride(k)));
  position_embeddings = register_parameter("position_embeddings", torch::randn({1, n_patches, c.hidden_size}) * 0.02);
}

torch::Tensor PatchEmbeddingBlockImpl::forward(const torch::Tensor& x) {
  const auto t = patch_embeddings(x).flatten(2).transpose(-1, -2);
  TORCH_CHECK(t.size(1) == position_embeddings.size(1), "ViT3D: input ", x.sizes(), " gives ", t.size(1),
              " patches, the position embedding has ", position_embeddings.size(1), " (img_size of the config)");
  return t + position_embeddings;
}

SABlockImpl::SABlockImpl(int64_t hidden, int64_t heads, bool qkv_bias) : num_heads(heads) {
  TORCH_CHECK(hidden % heads == 0, "ViT3D: hidden_size ", hidden, " is not divisible by ", heads, " heads");
  qkv = register_module("qkv", Linear(torch::nn::LinearOptions(hidden, 3 * hidden).bias(qkv_bias)));
  out_proj = register_module("out_proj", Linear(hidden, hidden));
}

TransformerBlockImpl::TransformerBlockImpl(const ViT3DConfig& c) {
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.norm_eps)); };
  mlp = register_module("mlp", Mlp(c.hidden_size, c.mlp_dim, "linear1", "linear2"));
  norm1 = register_module("norm1", ln());
  attn = register_module("attn", SABlock(c.hidden_size, c.num_heads, c.qkv_bias));
  norm2 = register_module("norm2", ln());
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x_in) {
  const auto x = x_in + attn(norm1(x_in));
  return x + mlp(norm2(x));
}

ViT3DImpl::ViT3DImpl(ViT3DConfig c) : config_(std::move(c)) {
  patch_embedding = register_module("patch_embedding", PatchEmbeddingBlock(config_));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.num_layers; ++i) blocks->push_back(TransformerBlock(config_));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.hidden_size}).eps(config_.norm_eps)));
}

ViT3DOutput ViT3DImpl::forward(const torch::Tensor& x_in) {
  TORCH_CHECK(x_in.dim() == 5 && x_in.size(1) == config_.in_channels, "ViT3D: input must be [B, ", config_.in_channels,
              ", D, H, W], got ", x_in.sizes());
  ViT3DOutput out;
  auto x = patch_embedding(x_in);
  for (const auto& blk : *blocks) {
    x = blk->as<TransformerBlock>()->forward(x);
    out.hidden_states.push_back(x);
  }
  out.x = norm(x);
  return out;
}

}  // namespace tessera::models
