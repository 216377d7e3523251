// timm's VisionTransformer (timm/models/vision_transformer.py) with the same
// module and parameter names, so a timm state_dict loads as is:
//   patch_embed.proj, cls_token, reg_token, pos_embed,
//   blocks.{i}.{norm1, attn.qkv, attn.proj, ls1.gamma, norm2, mlp.fc1, mlp.fc2, ls2.gamma},
//   norm | fc_norm, head.
// One class for the pathology tile encoders built on it (UNI, UNI2-h,
// Virchow2, H-optimus-0, Prov-GigaPath's tile encoder; Phikon-v2 through
// Hugging Face's Dinov2Model, whose weights vit_weights.h converts): they
// differ only in ViTConfig options (MLP kind, activation, registers, pooling,
// patch size, dynamic size). Attention runs through Tessera's fused op.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include "tessera/models/linear.h"
#include <torch/nn/modules/normalization.h>

#include <array>
#include <optional>

#include "tessera/models/config.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/transformer_layers.h"

namespace tessera::models {

// Conv2d with kernel = stride = patch; [B, C, H, W] -> [B, gh*gw, D].
class PatchEmbedImpl : public torch::nn::Module {
 public:
  PatchEmbedImpl(int64_t patch_size, int64_t in_chans, int64_t embed_dim);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d proj{nullptr};
  int64_t patch_size;
};
TORCH_MODULE(PatchEmbed);

// timm Attention: fused qkv projection, attention, output projection.
class ViTAttentionImpl : public torch::nn::Module {
 public:
  ViTAttentionImpl(int64_t dim, int64_t num_heads, bool qkv_bias);
  torch::Tensor forward(const torch::Tensor& x);
  // The output for the first `rows` tokens only, [B, rows, C]: their queries against every token's keys and values.
  torch::Tensor forward_rows(const torch::Tensor& x, int64_t rows);
  Linear qkv{nullptr}, proj{nullptr};
  int64_t num_heads;
};
TORCH_MODULE(ViTAttention);

// x * gamma (timm LayerScale, init_values).
class LayerScaleImpl : public torch::nn::Module {
 public:
  LayerScaleImpl(int64_t dim, double init_values);
  torch::Tensor forward(const torch::Tensor& x) { return x * gamma; }
  torch::Tensor gamma;
};
TORCH_MODULE(LayerScale);

// Pre-norm block: x + ls1(attn(norm1(x))), then x + ls2(mlp(norm2(x))).
class ViTBlockImpl : public torch::nn::Module {
 public:
  ViTBlockImpl(const ViTConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  // The output's first `rows` tokens, [B, rows, C], from the input x and n = norm1(x): what the rest reads when
  // it pools those tokens only (few rows: plain LibTorch ops).
  torch::Tensor forward_rows(const torch::Tensor& x, const torch::Tensor& n, int64_t rows);
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  ViTAttention attn{nullptr};
  Mlp mlp{nullptr};
  LayerScale ls1{nullptr}, ls2{nullptr};  // null without init_values
};
TORCH_MODULE(ViTBlock);

class VisionTransformerImpl : public torch::nn::Module {
 public:
  explicit VisionTransformerImpl(ViTConfig config);

  // [B, C, H, W] -> tokens after the final norm, [B, prefix + gh*gw, D]. With
  // dynamic_img_size, inputs of another size than img_size get pos_embed
  // resampled to their grid; without it they are an error (timm's strict_img_size).
  torch::Tensor forward_features(const torch::Tensor& x);
  // Pooling ("token": class token, "avg": mean of the patch tokens, registers
  // excluded, "token+avg": both concatenated), fc_norm, then the head unless pre_logits.
  torch::Tensor forward_head(const torch::Tensor& features, bool pre_logits = false);
  torch::Tensor forward(const torch::Tensor& x) { return forward_head(forward_features(x)); }
  // The tile embedding, forward_head(forward_features(x), pre_logits=true), computing only what it reads: with
  // class-token pooling the last block attends from the class token alone and runs its MLP and the final norm on
  // that row, which saves most of a block.
  torch::Tensor forward_embedding(const torch::Tensor& x);

  const ViTConfig& config() const { return config_; }
  int64_t num_prefix_tokens() const { return (config_.class_token ? 1 : 0) + config_.reg_tokens; }
  // Width of forward_head(..., pre_logits=true): the tile embedding.
  int64_t pooled_dim() const { return config_.global_pool == "token+avg" ? 2 * config_.embed_dim : config_.embed_dim; }

  PatchEmbed patch_embed{nullptr};
  torch::Tensor cls_token, reg_token, pos_embed;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr}, fc_norm{nullptr};  // exactly one of them is used
  Linear head{nullptr};

 private:
  torch::Tensor pos_embed_tokens(torch::Tensor x, int64_t gh, int64_t gw);
  // The input checked and embedded: the token sequence [B, prefix + gh*gw, D] the blocks take.
  torch::Tensor tokens(const torch::Tensor& x);
  // Blocks [0, count) on the residual stream x (updated); returns after(x), or x when `after` is null. On CUDA
  // for inference every residual sum is fused with the norm after it.
  torch::Tensor run_blocks(torch::Tensor& x, int64_t count, torch::nn::LayerNorm after);
  ViTConfig config_;
  int64_t grid_ = 0;
};
TORCH_MODULE(VisionTransformer);

// timm.layers.resample_abs_pos_embed: the grid part of `posemb` [1, N, D]
// (after `num_prefix_tokens` prefix rows, which are kept) resized from
// old_size to new_size with bicubic interpolation (align_corners=False,
// antialias as timm passes it), computed in float32. With antialias=false and
// one prefix row it is transformers' Dinov2Embeddings.interpolate_pos_encoding.
torch::Tensor resample_abs_pos_embed(const torch::Tensor& posemb, std::array<int64_t, 2> new_size,
                                     std::optional<std::array<int64_t, 2>> old_size, int64_t num_prefix_tokens,
                                     bool antialias = true);

// timm's checkpoint_filter_fn for pos_embed: a checkpoint trained at another
// image size (another grid) gets its pos_embed resampled to the model's grid,
// so e.g. a 518-pixel DINOv2 checkpoint loads into a 224-pixel model.
StateDict resample_checkpoint_pos_embed(StateDict state, const VisionTransformerImpl& model);

}  // namespace tessera::models
