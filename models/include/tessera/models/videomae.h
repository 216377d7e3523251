// Hugging Face VideoMAEModel (transformers/models/videomae/modeling_videomae.py),
// the encoder, with its module and parameter names:
//   embeddings.patch_embeddings.projection,
//   encoder.layer.{i}.{layernorm_before, attention.attention.{query,key,value},
//                      attention.output.dense, layernorm_after, intermediate.dense, output.dense},
//   layernorm (only when use_mean_pooling is false).
// The position table is fixed (get_sinusoid_encoding_table) and, as in HF, not
// part of the state dict. Attention runs through Tessera's fused op.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include "tessera/models/linear.h"
#include <torch/nn/modules/normalization.h>

#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"

namespace tessera::models {

// Conv3d with kernel = stride = (tubelet, patch, patch) over [B, T, C, H, W]
// pixel values (HF's order) -> [B, (T/t)(H/p)(W/p), D].
class VideoMAEPatchEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit VideoMAEPatchEmbeddingsImpl(const VideoMAEConfig& c);
  torch::Tensor forward(const torch::Tensor& pixel_values);
  torch::nn::Conv3d projection{nullptr};
  int64_t num_channels;
};
TORCH_MODULE(VideoMAEPatchEmbeddings);

class VideoMAEEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit VideoMAEEmbeddingsImpl(const VideoMAEConfig& c);
  torch::Tensor forward(const torch::Tensor& pixel_values);
  VideoMAEPatchEmbeddings patch_embeddings{nullptr};
  torch::Tensor position_embeddings;  // [1, num_patches, D] float32, not registered (HF: plain attribute)
};
TORCH_MODULE(VideoMAEEmbeddings);

// HF splits one attention into attention.attention (q/k/v) and attention.output.dense.
class VideoMAESelfAttentionImpl : public torch::nn::Module {
 public:
  VideoMAESelfAttentionImpl(int64_t hidden, int64_t heads, bool qkv_bias);
  torch::Tensor forward(const torch::Tensor& x);
  Linear query{nullptr}, key{nullptr}, value{nullptr};
  int64_t num_heads;
};
TORCH_MODULE(VideoMAESelfAttention);

class VideoMAEDenseImpl : public torch::nn::Module {  // HF's *SelfOutput / *Intermediate / *Output: one Linear named dense
 public:
  VideoMAEDenseImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x) { return dense(x); }
  Linear dense{nullptr};
};
TORCH_MODULE(VideoMAEDense);

class VideoMAEAttentionImpl : public torch::nn::Module {
 public:
  VideoMAEAttentionImpl(const VideoMAEConfig& c);
  torch::Tensor forward(const torch::Tensor& x) { return output(attention(x)); }
  VideoMAESelfAttention attention{nullptr};
  VideoMAEDense output{nullptr};
};
TORCH_MODULE(VideoMAEAttention);

// Pre-norm layer: h = x + attn(layernorm_before(x)); h + output(gelu(intermediate(layernorm_after(h)))).
class VideoMAELayerImpl : public torch::nn::Module {
 public:
  explicit VideoMAELayerImpl(const VideoMAEConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::LayerNorm layernorm_before{nullptr}, layernorm_after{nullptr};
  VideoMAEAttention attention{nullptr};
  VideoMAEDense intermediate{nullptr}, output{nullptr};
  std::string hidden_act;
};
TORCH_MODULE(VideoMAELayer);

// transformers' ACT2FN[name] applied to x (the names VideoMAEConfig::validate accepts).
torch::Tensor videomae_activation(const std::string& name, const torch::Tensor& x);

class VideoMAEModelImpl : public torch::nn::Module {
 public:
  explicit VideoMAEModelImpl(VideoMAEConfig config);
  // pixel_values [B, T, C, H, W] -> last_hidden_state [B, num_patches, D].
  torch::Tensor forward(const torch::Tensor& pixel_values);
  // Mean over tokens (VideoMAEForVideoClassification's pooling, before its fc_norm).
  static torch::Tensor mean_pool(const torch::Tensor& last_hidden_state) { return last_hidden_state.mean(1); }
  const VideoMAEConfig& config() const { return config_; }

  VideoMAEEmbeddings embeddings{nullptr};
  std::shared_ptr<torch::nn::Module> encoder;  // holds `layer` so the names read encoder.layer.{i}
  torch::nn::ModuleList layer{nullptr};
  torch::nn::LayerNorm layernorm{nullptr};

 private:
  VideoMAEConfig config_;
};
TORCH_MODULE(VideoMAEModel);

// HF's fixed position table: angle(pos, j) = pos / 10000^(2*(j/2)/d), sin on
// even j, cos on odd j, computed in float64 and returned as float32 [1, n, d].
torch::Tensor get_sinusoid_encoding_table(int64_t n_position, int64_t d_hid);

// Checkpoints from transformers < 5 keep the q/v biases as separate
// parameters (attention.attention.q_bias / v_bias, no key bias). This rewrites
// them to query.bias / value.bias and adds a zero key.bias, the same function.
StateDict videomae_from_legacy_bias_keys(const StateDict& state);

}  // namespace tessera::models
