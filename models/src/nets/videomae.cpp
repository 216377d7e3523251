#include "tessera/models/videomae.h"

#include <torch/torch.h>

#include <cmath>

#include "tessera/models/transformer_layers.h"

namespace tessera::models {

VideoMAEPatchEmbeddingsImpl::VideoMAEPatchEmbeddingsImpl(const VideoMAEConfig& c) : num_channels(c.num_channels) {
  const std::vector<int64_t> k{c.tubelet_size, c.patch_size, c.patch_size};
  projection = register_module(
      "projection", torch::nn::Conv3d(torch::nn::Conv3dOptions(c.num_channels, c.hidden_size, k).stride(k)));
}

torch::Tensor VideoMAEPatchEmbeddingsImpl::forward(const torch::Tensor& pixel_values) {
  TORCH_CHECK(pixel_values.dim() == 5 && pixel_values.size(2) == num_channels,
              "VideoMAE: pixel_values must be [B, T, ", num_channels, ", H, W], got ", pixel_values.sizes());
  // [B, T, C, H, W] -> [B, C, T, H, W] for the Conv3d, then tokens in (t, h, w) order.
  return projection(pixel_values.permute({0, 2, 1, 3, 4})).flatten(2).transpose(1, 2);
}

VideoMAEEmbeddingsImpl::VideoMAEEmbeddingsImpl(const VideoMAEConfig& c) {
  patch_embeddings = register_module("patch_embeddings", VideoMAEPatchEmbeddings(c));
  const int64_t num_patches =
      (c.num_frames / c.tubelet_size) * (c.image_size / c.patch_size) * (c.image_size / c.patch_size);
  position_embeddings = get_sinusoid_encoding_table(num_patches, c.hidden_size);
}

torch::Tensor VideoMAEEmbeddingsImpl::forward(const torch::Tensor& pixel_values) {
  auto x = patch_embeddings(pixel_values);
  TORCH_CHECK(x.size(1) == position_embeddings.size(1), "VideoMAE: input gives ", x.size(1),
              " tubelets but the position table has ", position_embeddings.size(1),
              " (num_frames/image_size of the config)");
  return x + position_embeddings.to(x.options());
}

VideoMAESelfAttentionImpl::VideoMAESelfAttentionImpl(int64_t hidden, int64_t heads, bool qkv_bias) : num_heads(heads) {
  TORCH_CHECK(hidden % heads == 0, "VideoMAE: hidden_size ", hidden, " is not divisible by ", heads, " heads");
  auto lin = [&] { return Linear(torch::nn::LinearOptions(hidden, hidden).bias(qkv_bias)); };
  query = register_module("query", lin());
  key = register_module("key", lin());
  value = register_module("value", lin());
}

torch::Tensor VideoMAESelfAttentionImpl::forward(const torch::Tensor& x) {
  return multi_head_attention(query(x), key(x), value(x), num_heads);
}

VideoMAEDenseImpl::VideoMAEDenseImpl(int64_t in, int64_t out) {
  dense = register_module("dense", Linear(in, out));
}

VideoMAEAttentionImpl::VideoMAEAttentionImpl(const VideoMAEConfig& c) {
  attention = register_module("attention", VideoMAESelfAttention(c.hidden_size, c.num_attention_heads, c.qkv_bias));
  output = register_module("output", VideoMAEDense(c.hidden_size, c.hidden_size));
}

torch::Tensor videomae_activation(const std::string& name, const torch::Tensor& x) {
  if (name == "gelu" || name == "gelu_python") return torch::gelu(x);
  // gelu_new and gelu_fast are the same tanh formula as PyTorch's approximate GELU.
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return torch::gelu(x, "tanh");
  if (name == "quick_gelu") return x * torch::sigmoid(1.702 * x);
  if (name == "relu") return torch::relu(x);
  if (name == "silu" || name == "swish") return torch::silu(x);
  TORCH_CHECK(false, "VideoMAE: hidden_act '", name, "' is not supported");
}

VideoMAELayerImpl::VideoMAELayerImpl(const VideoMAEConfig& c) : hidden_act(c.hidden_act) {
  c.validate();
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)); };
  attention = register_module("attention", VideoMAEAttention(c));
  intermediate = register_module("intermediate", VideoMAEDense(c.hidden_size, c.intermediate_size));
  output = register_module("output", VideoMAEDense(c.intermediate_size, c.hidden_size));
  layernorm_before = register_module("layernorm_before", ln());
  layernorm_after = register_module("layernorm_after", ln());
}

torch::Tensor VideoMAELayerImpl::forward(const torch::Tensor& x) {
  auto h = x + attention(layernorm_before(x));
  return h + output(videomae_activation(hidden_act, intermediate(layernorm_after(h))));
}

VideoMAEModelImpl::VideoMAEModelImpl(VideoMAEConfig c) : config_(std::move(c)) {
  embeddings = register_module("embeddings", VideoMAEEmbeddings(config_));
  encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  layer = encoder->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) layer->push_back(VideoMAELayer(config_));
  // HF: with mean pooling the final norm lives in the classification head (fc_norm), not here.
  if (!config_.use_mean_pooling)
    layernorm = register_module(
        "layernorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.hidden_size}).eps(config_.layer_norm_eps)));
}

torch::Tensor VideoMAEModelImpl::forward(const torch::Tensor& pixel_values) {
  auto x = embeddings(pixel_values);
  for (const auto& l : *layer) x = l->as<VideoMAELayer>()->forward(x);
  return layernorm ? layernorm(x) : x;
}

torch::Tensor get_sinusoid_encoding_table(int64_t n_position, int64_t d_hid) {
  auto table = torch::empty({n_position, d_hid}, torch::kDouble);
  auto a = table.accessor<double, 2>();
  for (int64_t pos = 0; pos < n_position; ++pos)
    for (int64_t j = 0; j < d_hid; ++j) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / d_hid);
      a[pos][j] = (j % 2 == 0) ? std::sin(angle) : std::cos(angle);
    }
  return table.to(torch::kFloat).unsqueeze(0);
}

StateDict videomae_from_legacy_bias_keys(const StateDict& state) {
  StateDict out;
  const std::string q = ".attention.attention.q_bias", v = ".attention.attention.v_bias";
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  for (const auto& [k, t] : state) {
    if (ends_with(k, q)) {
      const std::string base = k.substr(0, k.size() - std::string("q_bias").size());
      out[base + "query.bias"] = t;
      out[base + "key.bias"] = torch::zeros_like(t);  // VideoMAE has no key bias
    } else if (ends_with(k, v)) {
      out[k.substr(0, k.size() - std::string("v_bias").size()) + "value.bias"] = t;
    } else {
      out[k] = t;
    }
  }
  return out;
}

}  // namespace tessera::models
