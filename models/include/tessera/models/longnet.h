// Prov-GigaPath's slide encoder: gigapath/slide_encoder.py LongNetViT over
// its torchscale LongNet encoder (torchscale/architecture/encoder.py with
// DilatedAttention), under the same module and parameter names, so the
// published slide_encoder.pth ({"model": state_dict}) loads as is:
//   patch_embed.proj, cls_token,
//   encoder.layers.{i}.{self_attn_layer_norm, self_attn.{q,k,v,out}_proj,
//       self_attn.inner_attn_ln, final_layer_norm, ffn.{fc1, ffn_layernorm, fc2}},
//   encoder.layer_norm, norm.
// The sin-cos position table (pos_embed, a non-persistent buffer there) is
// computed per tile from its coordinates instead of stored: at slide_ngrids
// 1000 and 768-d it would be 3 GB.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/normalization.h>

#include <string>
#include <vector>

#include "tessera/models/config.h"
#include "tessera/models/linear.h"
#include "tessera/models/state_dict.h"

namespace tessera::models {

// MAE's get_2d_sincos_pos_embed row for each tile, indexed the way
// LongNetViT.coords_to_pos does: cell = floor(coords / 256) (level-0 pixels,
// 256-px cells whatever the tile size), the first dim/2 channels encode
// cell[..., 1], the last dim/2 cell[..., 0], each as [sin(p·ω), cos(p·ω)]
// with ω_i = 10000^(-i / (dim/4)). Computed in float64, returned as float32.
// coords [..., 2]; cells outside [0, slide_ngrids) are an error (the
// reference would silently read a neighbouring row or wrap around).
torch::Tensor slide_pos_embed(const torch::Tensor& coords, int64_t dim, int64_t slide_ngrids);

// torchscale DilatedAttention (a MultiheadAttention with separate q/k/v
// projections and, with subln, a LayerNorm on the attention output).
class LongNetAttentionImpl : public torch::nn::Module {
 public:
  explicit LongNetAttentionImpl(const LongNetViTConfig& c);
  torch::Tensor forward(const torch::Tensor& x);  // [B, N, C]
  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};
  torch::nn::LayerNorm inner_attn_ln{nullptr};

 private:
  LongNetViTConfig c_;
};
TORCH_MODULE(LongNetAttention);

// torchscale FeedForwardNetwork with subln: fc2(ffn_layernorm(gelu(fc1(x)))).
class LongNetFeedForwardImpl : public torch::nn::Module {
 public:
  explicit LongNetFeedForwardImpl(const LongNetViTConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm ffn_layernorm{nullptr};

 private:
  int64_t slice_rows_;
};
TORCH_MODULE(LongNetFeedForward);

// torchscale EncoderLayer, pre-norm (subln forces encoder_normalize_before),
// residual scale 1 (no deepnorm):
//   x + self_attn(self_attn_layer_norm(x)), then x + ffn(final_layer_norm(x)).
class LongNetEncoderLayerImpl : public torch::nn::Module {
 public:
  explicit LongNetEncoderLayerImpl(const LongNetViTConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  LongNetAttention self_attn{nullptr};
  torch::nn::LayerNorm self_attn_layer_norm{nullptr}, final_layer_norm{nullptr};
  LongNetFeedForward ffn{nullptr};
};
TORCH_MODULE(LongNetEncoderLayer);

struct LongNetEncoderOutput {
  torch::Tensor encoder_out;                 // after the last layer and encoder.layer_norm
  std::vector<torch::Tensor> encoder_states; // with return_all_hiddens: the input, then each layer's output (no layer_norm)
};

// torchscale Encoder over token embeddings (no embedding scale, no
// layernorm_embedding, no positions of its own).
class LongNetEncoderImpl : public torch::nn::Module {
 public:
  explicit LongNetEncoderImpl(const LongNetViTConfig& c);
  LongNetEncoderOutput forward(const torch::Tensor& x, bool return_all_hiddens = false);
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
};
TORCH_MODULE(LongNetEncoder);

class LongNetViTImpl : public torch::nn::Module {
 public:
  explicit LongNetViTImpl(LongNetViTConfig config);

  // Tile embeddings [B, L, in_chans] (any float dtype; computed in the
  // parameters' dtype) at level-0 pixel coordinates [B, L, 2] -> the tokens
  // entering the encoder, [B, 1 + L, D]: class token first, then the tiles in
  // the given order.
  torch::Tensor embed(const torch::Tensor& tiles, const torch::Tensor& coords);
  // The encoder over those tokens (its "encoder_out": after encoder.layer_norm).
  torch::Tensor forward_features(const torch::Tensor& tiles, const torch::Tensor& coords);
  // The slide embedding [B, D]: norm(encoder_out)[:, 0] (or, with global_pool,
  // norm of the tile tokens' mean). With all_layer_embed, one per entry of the
  // encoder's hidden states (the input, then each layer, none through
  // encoder.layer_norm), as the reference returns them.
  std::vector<torch::Tensor> forward(const torch::Tensor& tiles, const torch::Tensor& coords,
                                     bool all_layer_embed = false);

  const LongNetViTConfig& config() const { return config_; }

  struct PatchEmbedImpl : torch::nn::Module {
    PatchEmbedImpl(int64_t in, int64_t out) { proj = register_module("proj", Linear(in, out)); }
    Linear proj{nullptr};
  };
  TORCH_MODULE(PatchEmbed);

  PatchEmbed patch_embed{nullptr};
  torch::Tensor cls_token;
  LongNetEncoder encoder{nullptr};
  torch::nn::LayerNorm norm{nullptr};

 private:
  torch::Tensor pool(const torch::Tensor& x);
  LongNetViTConfig config_;
};
TORCH_MODULE(LongNetViT);

// Weights from the published slide_encoder.pth (the state dict under "model"),
// a safetensors file, or anything load_weights reads; `mapping` as there (the
// fixture's keys carry a "weights." prefix). Strict: every parameter must be
// present and nothing else.
LoadReport load_longnet_vit_weights(LongNetViTImpl& model, const std::vector<std::string>& files,
                                    const KeyMapping& mapping = {});

}  // namespace tessera::models
