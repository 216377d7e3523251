#include "tessera/models/config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>
#include <stdexcept>

#if TESSERA_MODELS_HAS_YAML
#include <yaml-cpp/yaml.h>
#endif

namespace tessera::models {

void SwinUNETRConfig::validate() const {
  auto bad = [](const std::string& w) { throw std::invalid_argument("SwinUNETR config: " + w); };
  if (spatial_dims != 3) bad("only spatial_dims 3 is implemented");
  if (feature_size <= 0 || feature_size % 12 != 0) bad("feature_size should be divisible by 12");
  if (in_channels <= 0 || out_channels <= 0 || patch_size <= 0 || window_size <= 0) bad("sizes must be positive");
  for (int i = 0; i < 4; ++i) {
    const int64_t dim = feature_size << i;
    if (num_heads[i] <= 0 || dim % num_heads[i] != 0) bad("stage dim must be divisible by num_heads");
    if (depths[i] <= 0) bad("depths must be positive");
  }
  if (downsample != "merging" && downsample != "mergingv2" && downsample != "merging_legacy")
    bad("downsample must be merging, mergingv2 or merging_legacy, got " + downsample);
  if (norm_name != "instance") bad("only norm_name instance is implemented");
}

void VideoMAEConfig::validate() const {
  auto bad = [](const std::string& w) { throw std::invalid_argument("VideoMAE config: " + w); };
  if (image_size <= 0 || patch_size <= 0 || num_channels <= 0 || num_frames <= 0 || tubelet_size <= 0 ||
      hidden_size <= 0 || num_hidden_layers < 0 || num_attention_heads <= 0 || intermediate_size <= 0)
    bad("sizes must be positive");
  if (hidden_size % num_attention_heads != 0)
    bad("hidden_size " + std::to_string(hidden_size) + " is not divisible by num_attention_heads " +
        std::to_string(num_attention_heads));
  if (image_size % patch_size != 0) bad("image_size must be a multiple of patch_size");
  if (num_frames % tubelet_size != 0) bad("num_frames must be a multiple of tubelet_size");
  static const char* known[] = {"gelu", "gelu_python", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu",
                                "relu", "silu", "swish"};
  if (std::find(std::begin(known), std::end(known), hidden_act) == std::end(known))
    bad("hidden_act '" + hidden_act + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, quick_gelu, relu, silu)");
}

void LongNetViTConfig::validate() const {
  auto bad = [](const std::string& w) { throw std::invalid_argument("LongNetViT config: " + w); };
  if (in_chans <= 0 || embed_dim <= 0 || depth <= 0 || num_heads <= 0 || slide_ngrids <= 0) bad("sizes must be positive");
  if (embed_dim % num_heads != 0) bad("embed_dim must be divisible by num_heads");
  if (embed_dim % 4 != 0) bad("embed_dim must be divisible by 4 (2-D sin-cos positions)");
  if (mlp_ratio <= 0) bad("mlp_ratio must be positive");
  if (inference_slice_rows <= 0) bad("inference_slice_rows must be positive");
  if (segment_length.empty() || segment_length.size() != dilated_ratio.size())
    bad("segment_length and dilated_ratio need the same, non-zero number of entries");
  for (size_t i = 0; i < segment_length.size(); ++i)
    if (segment_length[i] <= 0 || dilated_ratio[i] <= 0) bad("segment lengths and dilated ratios must be positive");
}

void ViTConfig::validate() const {
  auto bad = [](const std::string& w) { throw std::invalid_argument("ViT config: " + w); };
  if (img_size <= 0 || patch_size <= 0 || in_chans <= 0 || embed_dim <= 0 || depth < 0 || num_heads <= 0 || reg_tokens < 0)
    bad("sizes must be positive");
  if (embed_dim % num_heads != 0) bad("embed_dim must be divisible by num_heads");
  if (img_size % patch_size != 0) bad("img_size must be a multiple of patch_size");
  if (global_pool != "token" && global_pool != "avg" && global_pool != "token+avg" && !global_pool.empty())
    bad("global_pool must be token, avg, token+avg or empty, got " + global_pool);
  if (global_pool.rfind("token", 0) == 0 && !class_token) bad("global_pool " + global_pool + " needs class_token");
  if (global_pool == "token+avg" && fc_norm.value_or(false)) bad("fc_norm does not apply to token+avg pooling");
  if (mlp_layer != "mlp" && mlp_layer != "swiglu_packed") bad("mlp_layer must be mlp or swiglu_packed, got " + mlp_layer);
  if (act_layer != "gelu" && act_layer != "silu") bad("act_layer must be gelu or silu, got " + act_layer);
  if (mlp_layer == "swiglu_packed" && static_cast<int64_t>(embed_dim * mlp_ratio) % 2 != 0)
    bad("swiglu_packed needs an even hidden size int(embed_dim * mlp_ratio)");
  if (reference != "timm" && reference != "hf_dinov2") bad("reference must be timm or hf_dinov2, got " + reference);
  if (reference == "hf_dinov2" && (!class_token || reg_tokens != 0 || no_embed_class || !init_values || fc_norm.value_or(false) ||
                                   global_pool != "token" || !dynamic_img_size))
    bad("reference hf_dinov2 is Dinov2Model: class_token, no registers, position of the class token embedded, "
        "init_values (layerscale_value), token pooling, no fc_norm, dynamic_img_size");
  const auto& p = preprocess;
  if (!(p.target_mpp > 0) || p.tile_size < 0 || p.crop < 0) bad("preprocess: target_mpp must be positive, sizes not negative");
  if (p.crop > 0 && p.crop > (p.tile_size > 0 ? p.tile_size : img_size)) bad("preprocess: crop is larger than the tile");
  for (int c = 0; c < 3; ++c)
    if (!(p.std[c] > 0)) bad("preprocess: std must be positive");
}

std::vector<int64_t> gigapath_segment_lengths(int64_t max_wsi_size, int64_t tile_size) {
  const int64_t side = max_wsi_size / tile_size;
  // int(np.log2(max_seq_len)) in the reference: the end point is truncated too.
  const double lo = std::log2(1024.0), hi = std::floor(std::log2(double(side) * double(side)));
  std::vector<int64_t> out;
  for (int i = 0; i < 5; ++i) out.push_back(static_cast<int64_t>(std::pow(2.0, lo + (hi - lo) * i / 4.0)));
  return out;
}

#if TESSERA_MODELS_HAS_YAML
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

YAML::Node load_yaml(const std::string& path) {
  try {
    YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) fail(path, "config must be a YAML mapping");
    return root;
  } catch (const YAML::Exception& e) {
    fail(path, std::string("cannot read config (") + e.what() + ")");
  }
}

template <typename T>
T convert_node(const std::string& path, const std::string& key, const YAML::Node& n) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail(path, "key `" + key + "` has the wrong type");
  }
}

// The `preprocess:` mapping of a ViT config (TilePreprocessing).
void read_preprocessing(const std::string& path, const YAML::Node& node, TilePreprocessing& p) {
  if (!node.IsMap()) fail(path, "key `preprocess` must be a mapping");
  auto triple = [&](const std::string& key, const YAML::Node& n) {
    const auto v = convert_node<std::vector<double>>(path, "preprocess." + key, n);
    if (v.size() != 3) fail(path, "key `preprocess." + key + "` needs 3 values (R, G, B)");
    return std::array<double, 3>{v[0], v[1], v[2]};
  };
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (key == "target_mpp") p.target_mpp = convert_node<double>(path, "preprocess." + key, kv.second);
    else if (key == "tile_size") p.tile_size = convert_node<int64_t>(path, "preprocess." + key, kv.second);
    else if (key == "crop") p.crop = convert_node<int64_t>(path, "preprocess." + key, kv.second);
    else if (key == "mean") p.mean = triple(key, kv.second);
    else if (key == "std") p.std = triple(key, kv.second);
    else fail(path, "unknown key `preprocess." + key + "`");
  }
}

// Reads each key of the file through the setter registered for it; keys
// without a setter are typos or fields we do not support, both errors.
class Reader {
 public:
  Reader(std::string path, std::string kind) : path_(std::move(path)), root_(load_yaml(path_)) {
    const auto model = root_["model"];
    if (!model || model.as<std::string>("") != kind)
      fail(path_, "expected `model: " + kind + "`, got `" + (model ? model.as<std::string>("?") : "(none)") + "`");
  }
  template <typename T>
  void field(const std::string& key, T& dst) {
    setters_[key] = [this, key, &dst](const YAML::Node& n) { dst = convert<T>(key, n); };
  }
  void custom(const std::string& key, std::function<void(const YAML::Node&)> setter) { setters_[key] = std::move(setter); }
  template <typename T>
  void field(const std::string& key, std::optional<T>& dst) {
    setters_[key] = [this, key, &dst](const YAML::Node& n) {
      if (n.IsNull()) dst.reset(); else dst = convert<T>(key, n);
    };
  }
  // A section another layer reads (e.g. segment's `inference:` recipe).
  void skip(const std::string& key) {
    setters_[key] = [](const YAML::Node&) {};
  }
  void run() {
    for (const auto& kv : root_) {
      const auto key = kv.first.as<std::string>();
      if (key == "model" || key == "description") continue;
      const auto it = setters_.find(key);
      if (it == setters_.end()) fail(path_, "unknown key `" + key + "`");
      it->second(kv.second);
    }
  }

 private:
  template <typename T>
  T convert(const std::string& key, const YAML::Node& n) {
    return convert_node<T>(path_, key, n);
  }
  std::string path_;
  YAML::Node root_;
  std::map<std::string, std::function<void(const YAML::Node&)>> setters_;
};

}  // namespace

ViTConfig load_vit_config(const std::string& path) {
  ViTConfig c;
  Reader r(path, "vit");
  r.field("img_size", c.img_size);
  r.field("patch_size", c.patch_size);
  r.field("in_chans", c.in_chans);
  r.field("num_classes", c.num_classes);
  r.field("global_pool", c.global_pool);
  r.field("embed_dim", c.embed_dim);
  r.field("depth", c.depth);
  r.field("num_heads", c.num_heads);
  r.field("mlp_ratio", c.mlp_ratio);
  r.field("qkv_bias", c.qkv_bias);
  r.field("init_values", c.init_values);
  r.field("class_token", c.class_token);
  r.field("reg_tokens", c.reg_tokens);
  r.field("no_embed_class", c.no_embed_class);
  r.field("fc_norm", c.fc_norm);
  r.field("dynamic_img_size", c.dynamic_img_size);
  r.field("norm_eps", c.norm_eps);
  r.field("mlp_layer", c.mlp_layer);
  r.field("act_layer", c.act_layer);
  r.field("reference", c.reference);
  r.custom("preprocess", [&](const YAML::Node& n) { read_preprocessing(path, n, c.preprocess); });
  r.run();
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
  return c;
}

LongNetViTConfig load_longnet_vit_config(const std::string& path) {
  LongNetViTConfig c;
  Reader r(path, "longnet_vit");
  r.field("in_chans", c.in_chans);
  r.field("embed_dim", c.embed_dim);
  r.field("depth", c.depth);
  r.field("num_heads", c.num_heads);
  r.field("mlp_ratio", c.mlp_ratio);
  r.field("slide_ngrids", c.slide_ngrids);
  r.field("segment_length", c.segment_length);
  r.field("dilated_ratio", c.dilated_ratio);
  r.field("layernorm_eps", c.layernorm_eps);
  r.field("norm_eps", c.norm_eps);
  r.field("global_pool", c.global_pool);
  r.field("merge_weights_grad", c.merge_weights_grad);
  r.run();
  c.validate();
  return c;
}

VideoMAEConfig load_videomae_config(const std::string& path) {
  VideoMAEConfig c;
  Reader r(path, "videomae");
  r.field("image_size", c.image_size);
  r.field("patch_size", c.patch_size);
  r.field("num_channels", c.num_channels);
  r.field("num_frames", c.num_frames);
  r.field("tubelet_size", c.tubelet_size);
  r.field("hidden_size", c.hidden_size);
  r.field("num_hidden_layers", c.num_hidden_layers);
  r.field("num_attention_heads", c.num_attention_heads);
  r.field("intermediate_size", c.intermediate_size);
  r.field("layer_norm_eps", c.layer_norm_eps);
  r.field("qkv_bias", c.qkv_bias);
  r.field("use_mean_pooling", c.use_mean_pooling);
  r.field("hidden_act", c.hidden_act);
  r.run();
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
  return c;
}

SwinUNETRConfig load_swin_unetr_config(const std::string& path) {
  SwinUNETRConfig c;
  std::vector<int64_t> depths(c.depths.begin(), c.depths.end()), heads(c.num_heads.begin(), c.num_heads.end());
  Reader r(path, "swin_unetr");
  r.field("in_channels", c.in_channels);
  r.field("out_channels", c.out_channels);
  r.field("patch_size", c.patch_size);
  r.field("depths", depths);
  r.field("num_heads", heads);
  r.field("window_size", c.window_size);
  r.field("qkv_bias", c.qkv_bias);
  r.field("mlp_ratio", c.mlp_ratio);
  r.field("feature_size", c.feature_size);
  r.field("norm_name", c.norm_name);
  r.field("normalize", c.normalize);
  r.field("patch_norm", c.patch_norm);
  r.field("downsample", c.downsample);
  r.field("use_v2", c.use_v2);
  r.field("spatial_dims", c.spatial_dims);
  r.skip("inference");  // apps/segment_recipe reads it
  r.run();
  if (depths.size() != 4 || heads.size() != 4) fail(path, "depths and num_heads need 4 entries (one per stage)");
  std::copy(depths.begin(), depths.end(), c.depths.begin());
  std::copy(heads.begin(), heads.end(), c.num_heads.begin());
  c.validate();
  return c;
}

ViT3DConfig load_vit3d_config(const std::string& path) {
  ViT3DConfig c;
  std::vector<int64_t> img(c.img_size.begin(), c.img_size.end()), patch(c.patch_size.begin(), c.patch_size.end());
  Reader r(path, "vit3d");
  r.field("in_channels", c.in_channels);
  r.field("img_size", img);
  r.field("patch_size", patch);
  r.field("hidden_size", c.hidden_size);
  r.field("mlp_dim", c.mlp_dim);
  r.field("num_layers", c.num_layers);
  r.field("num_heads", c.num_heads);
  r.field("qkv_bias", c.qkv_bias);
  r.field("norm_eps", c.norm_eps);
  r.run();
  if (img.size() != 3 || patch.size() != 3) fail(path, "img_size and patch_size need 3 entries (D, H, W)");
  std::copy(img.begin(), img.end(), c.img_size.begin());
  std::copy(patch.begin(), patch.end(), c.patch_size.begin());
  return c;
}

std::string config_model_kind(const std::string& path) {
  const auto root = load_yaml(path);
  if (!root["model"]) fail(path, "config has no `model:` entry");
  return root["model"].as<std::string>();
}

#else  // built without yaml-cpp

namespace {
[[noreturn]] void no_yaml(const std::string& path) {
  throw std::runtime_error(path + ": this build has no yaml-cpp, so configs cannot be read; fill the config struct in code");
}
}  // namespace

ViTConfig load_vit_config(const std::string& path) { no_yaml(path); }
LongNetViTConfig load_longnet_vit_config(const std::string& path) { no_yaml(path); }
VideoMAEConfig load_videomae_config(const std::string& path) { no_yaml(path); }
SwinUNETRConfig load_swin_unetr_config(const std::string& path) { no_yaml(path); }
ViT3DConfig load_vit3d_config(const std::string& path) { no_yaml(path); }
std::string config_model_kind(const std::string& path) { no_yaml(path); }

#endif

}  // namespace tessera::models
