// MONAI's ViT (monai/networks/nets/vit.py, MONAI 1.5) in the 3-D form UNETR
// uses, with MONAI's names so a UNETR checkpoint's `vit.*` entries load after
// stripping "vit.":
//   patch_embedding.{patch_embeddings (Conv3d), position_embeddings},
//   blocks.{i}.{norm1, attn.qkv, attn.out_proj, norm2, mlp.linear1, mlp.linear2}, norm.
// Attention runs through Tessera's fused op.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include "tessera/models/linear.h"
#include <torch/nn/modules/normalization.h>

#include <vector>

#include "tessera/models/config.h"
#include "tessera/models/transformer_layers.h"

namespace tessera::models {

// MONAI PatchEmbeddingBlock (proj_type "conv", pos_embed_type "learnable").
class PatchEmbeddingBlockImpl : public torch::nn::Module {
 public:
  explicit PatchEmbeddingBlockImpl(const ViT3DConfig& c);
  torch::Tensor forward(const torch::Tensor& x);  // [B, C, D, H, W] -> [B, n_patches, hidden]
  torch::nn::Conv3d patch_embeddings{nullptr};
  torch::Tensor position_embeddings;
};
TORCH_MODULE(PatchEmbeddingBlock);

// MONAI SABlock with its default fused qkv projection and output projection.
class SABlockImpl : public torch::nn::Module {
 public:
  SABlockImpl(int64_t hidden, int64_t heads, bool qkv_bias);
  torch::Tensor forward(const torch::Tensor& x) { return out_proj(attention_from_qkv(qkv(x), num_heads)); }
  Linear qkv{nullptr}, out_proj{nullptr};
  int64_t num_heads;
};
TORCH_MODULE(SABlock);

// MONAI TransformerBlock: x + attn(norm1(x)), then x + mlp(norm2(x)).
class TransformerBlockImpl : public torch::nn::Module {
 public:
  explicit TransformerBlockImpl(const ViT3DConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  Mlp mlp{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  SABlock attn{nullptr};
};
TORCH_MODULE(TransformerBlock);

struct ViT3DOutput {
  torch::Tensor x;                           // after the final norm
  std::vector<torch::Tensor> hidden_states;  // each block's output (UNETR taps 3, 6, 9)
};

class ViT3DImpl : public torch::nn::Module {
 public:
  explicit ViT3DImpl(ViT3DConfig config);
  ViT3DOutput forward(const torch::Tensor& x);
  const ViT3DConfig& config() const { return config_; }

  PatchEmbeddingBlock patch_embedding{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};

 private:
  ViT3DConfig config_;
};
TORCH_MODULE(ViT3D);

}  // namespace tessera::models
