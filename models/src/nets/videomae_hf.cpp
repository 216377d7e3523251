#include "tessera/models/videomae_hf.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tessera/models/checkpoint.h"
#include "tessera/models/state_dict.h"

namespace tessera::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw std::runtime_error(where + ": " + what); }

// Reads config.json values with transformers' defaults for absent keys, and names the key on a wrong type.
struct ConfigReader {
  const json& j;
  const std::string& path;

  const json* find(const char* key) const {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  void integer(const char* key, int64_t& dst) const {
    const json* v = find(key);
    if (!v) return;
    // image_size / patch_size may be written as [h, w]; only square ones are supported.
    if (v->is_array() && v->size() == 2 && (*v)[0].is_number_integer() && (*v)[0] == (*v)[1]) {
      dst = (*v)[0].get<int64_t>();
      return;
    }
    if (!v->is_number_integer()) fail(path, std::string(key) + " must be an integer (or a square [n, n]), got " + v->dump());
    dst = v->get<int64_t>();
  }
  void number(const char* key, double& dst) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number()) fail(path, std::string(key) + " must be a number, got " + v->dump());
    dst = v->get<double>();
  }
  void boolean(const char* key, bool& dst) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_boolean()) fail(path, std::string(key) + " must be true or false, got " + v->dump());
    dst = v->get<bool>();
  }
  void text(const char* key, std::string& dst) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_string()) fail(path, std::string(key) + " must be a string, got " + v->dump());
    dst = v->get<std::string>();
  }
};

// transformers' PretrainedConfig: id2label decides num_labels when present, else num_labels, else 2.
void read_labels(const ConfigReader& r, HfVideoMAEFolder& f) {
  if (const json* m = r.find("id2label")) {
    if (!m->is_object()) fail(r.path, "id2label must be an object {\"0\": \"name\", ...}");
    f.num_labels = static_cast<int64_t>(m->size());
    f.labels.assign(f.num_labels, "");
    for (const auto& [k, v] : m->items()) {
      std::size_t used = 0;
      int64_t i = -1;
      try {
        i = std::stoll(k, &used);
      } catch (const std::exception&) {
      }
      if (used != k.size() || i < 0 || i >= f.num_labels || !v.is_string() || !f.labels[i].empty())
        fail(r.path, "id2label must map the indices 0.." + std::to_string(f.num_labels - 1) + " to names once each (entry '" +
                         k + "')");
      f.labels[i] = v.get<std::string>();
    }
    return;
  }
  f.num_labels = 2;
  r.integer("num_labels", f.num_labels);
  if (f.num_labels < 0) fail(r.path, "num_labels must not be negative");
  for (int64_t i = 0; i < f.num_labels; ++i) f.labels.push_back(std::to_string(i));
}

}  // namespace

HfVideoMAEFolder read_hf_videomae_folder(const std::string& dir) {
  HfVideoMAEFolder f;
  f.dir = dir;
  if (!fs::is_directory(dir)) fail(dir, "not a model folder (expected config.json and model.safetensors or pytorch_model.bin)");
  f.config_path = (fs::path(dir) / "config.json").string();
  std::ifstream in(f.config_path);
  if (!in) fail(f.config_path, "missing: a Hugging Face model folder holds config.json beside its weights");
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    fail(f.config_path, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) fail(f.config_path, "must be a JSON object");
  const ConfigReader r{j, f.config_path};
  std::string model_type;
  r.text("model_type", model_type);
  if (model_type != "videomae")
    fail(f.config_path, "model_type '" + model_type + "' is not supported here (only videomae)");

  VideoMAEConfig& c = f.config;
  r.integer("image_size", c.image_size);
  r.integer("patch_size", c.patch_size);
  r.integer("num_channels", c.num_channels);
  r.integer("num_frames", c.num_frames);
  r.integer("tubelet_size", c.tubelet_size);
  r.integer("hidden_size", c.hidden_size);
  r.integer("num_hidden_layers", c.num_hidden_layers);
  r.integer("num_attention_heads", c.num_attention_heads);
  r.integer("intermediate_size", c.intermediate_size);
  r.number("layer_norm_eps", c.layer_norm_eps);
  r.boolean("qkv_bias", c.qkv_bias);
  r.boolean("use_mean_pooling", c.use_mean_pooling);
  r.text("hidden_act", c.hidden_act);
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(f.config_path, e.what());
  }

  f.architecture = "VideoMAEModel";
  if (const json* a = r.find("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string()) fail(f.config_path, "architectures must be a list of names");
    f.architecture = (*a)[0].get<std::string>();
  }
  if (f.architecture == "VideoMAEForVideoClassification") {
    f.classification = true;
    read_labels(r, f);
  } else if (f.architecture != "VideoMAEModel" && f.architecture != "VideoMAEForPreTraining") {
    fail(f.config_path, "architecture " + f.architecture +
                            " is not supported (VideoMAEModel, VideoMAEForPreTraining, VideoMAEForVideoClassification)");
  }

  for (const char* name : {"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json", "pytorch_model.bin"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p)) {
      f.weights = {p.string()};
      break;
    }
  }
  if (f.weights.empty())
    fail(dir, "no weights: expected model.safetensors, model.safetensors.index.json, pytorch_model.bin or its index");
  return f;
}

VideoMAEVideoEncoderImpl::VideoMAEVideoEncoderImpl(const VideoMAEConfig& config, int64_t num_labels)
    : head_(num_labels >= 0) {
  videomae = register_module("videomae", VideoMAEModel(config));
  if (!head_) return;
  // HF builds fc_norm as nn.LayerNorm(hidden_size): PyTorch's eps, not the config's.
  if (config.use_mean_pooling) fc_norm = register_module("fc_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size})));
  if (num_labels > 0) classifier = register_module("classifier", Linear(config.hidden_size, num_labels));
}

VideoMAEVideoEncoderImpl::Output VideoMAEVideoEncoderImpl::forward(const torch::Tensor& pixel_values) {
  Output o;
  o.last_hidden_state = videomae->forward(pixel_values);
  if (!head_) {
    o.pooled = o.last_hidden_state.mean(1);
    return o;
  }
  o.pooled = fc_norm ? fc_norm(o.last_hidden_state.mean(1)) : o.last_hidden_state.select(1, 0);
  if (classifier) o.logits = classifier(o.pooled);
  return o;
}

VideoMAEVideoEncoder load_hf_videomae(const HfVideoMAEFolder& f, const torch::Device& device, torch::ScalarType dtype) {
  VideoMAEVideoEncoder model{nullptr};
  {
    const ParametersToBeLoaded loaded(dtype, device);  // the strict load below sets every linear layer's weights
    model = VideoMAEVideoEncoder(f.config, f.classification ? f.num_labels : -1);
  }
  model->to(device, dtype);  // the rest: patch embedding, norms, position table
  CheckpointOptions options;
  options.strip_prefix = false;  // the names are the model's own: videomae., fc_norm., classifier.
  options.device = device;
  const StateDict file = videomae_from_legacy_bias_keys(load_checkpoint(f.weights, options));
  bool prefixed = false;
  for (const auto& kv : file) prefixed = prefixed || kv.first.rfind("videomae.", 0) == 0;
  StateDict state;
  for (const auto& [k, t] : file) {
    if (f.classification) state.emplace(k, t);
    else if (!prefixed) state.emplace("videomae." + k, t);
    else if (k.rfind("videomae.", 0) == 0) state.emplace(k, t);  // a pre-training checkpoint's decoder stays behind
  }
  try {
    load_state_dict(*model, state);
  } catch (const std::runtime_error& e) {
    fail(f.weights.front(), std::string("does not fit ") + f.config_path + " (" + f.architecture + "): " + e.what());
  }
  model->eval();
  return model;
}

}  // namespace tessera::models
