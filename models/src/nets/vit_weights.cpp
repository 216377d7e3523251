#include "tessera/models/vit_weights.h"

#include <torch/torch.h>

#include <map>
#include <regex>
#include <stdexcept>

namespace tessera::models {
namespace {

// Per-layer renames under encoder.layer.N. (HF) -> blocks.N. (timm); q/k/v are joined separately.
const std::map<std::string, std::string>& layer_renames() {
  static const std::map<std::string, std::string> m = {
      {"norm1.weight", "norm1.weight"},
      {"norm1.bias", "norm1.bias"},
      {"attention.output.dense.weight", "attn.proj.weight"},
      {"attention.output.dense.bias", "attn.proj.bias"},
      {"layer_scale1.lambda1", "ls1.gamma"},
      {"norm2.weight", "norm2.weight"},
      {"norm2.bias", "norm2.bias"},
      {"mlp.fc1.weight", "mlp.fc1.weight"},
      {"mlp.fc1.bias", "mlp.fc1.bias"},
      {"mlp.fc2.weight", "mlp.fc2.weight"},
      {"mlp.fc2.bias", "mlp.fc2.bias"},
      {"mlp.weights_in.weight", "mlp.fc1.weight"},
      {"mlp.weights_in.bias", "mlp.fc1.bias"},
      {"mlp.weights_out.weight", "mlp.fc2.weight"},
      {"mlp.weights_out.bias", "mlp.fc2.bias"},
      {"layer_scale2.lambda1", "ls2.gamma"},
  };
  return m;
}

const std::map<std::string, std::string>& top_renames() {
  static const std::map<std::string, std::string> m = {
      {"embeddings.cls_token", "cls_token"},
      {"embeddings.position_embeddings", "pos_embed"},
      {"embeddings.patch_embeddings.projection.weight", "patch_embed.proj.weight"},
      {"embeddings.patch_embeddings.projection.bias", "patch_embed.proj.bias"},
      {"layernorm.weight", "norm.weight"},
      {"layernorm.bias", "norm.bias"},
  };
  return m;
}

void put(StateDict& out, const std::string& key, torch::Tensor t) {
  if (!out.emplace(key, std::move(t)).second) throw std::runtime_error("Dinov2 checkpoint: two keys map to " + key);
}

}  // namespace

StateDict dinov2_hf_to_timm(StateDict state) {
  static const std::regex layer_key(R"(encoder\.layer\.(\d+)\.(.+))");
  static const std::regex qkv_key(R"(attention\.attention\.(query|key|value)\.(weight|bias))");
  StateDict out;
  // blocks.N.attn.qkv.{weight,bias} -> {query, key, value} parts, joined once all three are seen.
  std::map<std::string, std::map<std::string, torch::Tensor>> qkv;
  for (auto& [key, t] : state) {
    if (key == "embeddings.mask_token") continue;
    if (const auto it = top_renames().find(key); it != top_renames().end()) {
      put(out, it->second, t);
      continue;
    }
    std::smatch m, q;
    if (!std::regex_match(key, m, layer_key)) {
      put(out, key, t);
      continue;
    }
    const std::string block = "blocks." + m[1].str() + ".", rest = m[2].str();
    if (std::regex_match(rest, q, qkv_key)) {
      qkv[block + "attn.qkv." + q[2].str()][q[1].str()] = t;
    } else if (const auto it = layer_renames().find(rest); it != layer_renames().end()) {
      put(out, block + it->second, t);
    } else {
      put(out, key, t);
    }
  }
  for (auto& [key, parts] : qkv) {
    for (const char* p : {"query", "key", "value"})
      if (!parts.count(p))
        throw std::runtime_error("Dinov2 checkpoint: " + key + " needs query, key and value; " + p + " is missing");
    put(out, key, torch::cat({parts["query"], parts["key"], parts["value"]}, 0));
  }
  return out;
}

StateDict adapt_vit_checkpoint(StateDict state, VisionTransformerImpl& model) {
  if (model.config().reference != "hf_dinov2") return resample_checkpoint_pos_embed(std::move(state), model);
  // Dinov2Model keeps its table's own grid and interpolates from it per input: the model takes the checkpoint's.
  state = dinov2_hf_to_timm(std::move(state));
  const auto it = state.find("pos_embed");
  if (it != state.end() && it->second.dim() == 3 && it->second.size(2) == model.pos_embed.size(2) &&
      it->second.sizes() != model.pos_embed.sizes()) {
    torch::NoGradGuard no_grad;
    model.pos_embed.set_data(torch::empty(it->second.sizes(), model.pos_embed.options()));
  }
  return state;
}

LoadReport load_vit_weights(VisionTransformerImpl& model, const std::vector<std::string>& files, const KeyMapping& mapping,
                            bool strict) {
  return apply_vit_weights(model, read_weights(files, mapping), files, strict);
}

LoadReport apply_vit_weights(VisionTransformerImpl& model, StateDict state, const std::vector<std::string>& files, bool strict) {
  return apply_weights(model, std::move(state), files, strict, [&](StateDict s) { return adapt_vit_checkpoint(std::move(s), model); });
}

}  // namespace tessera::models
