// Model configurations as plain structs, with the field names and defaults of
// the reference implementations (timm VisionTransformer, Hugging Face
// VideoMAEConfig, MONAI SwinUNETR), read from configs/*.yaml. No LibTorch here.
//
// A YAML file names its architecture (`model: vit | vit3d | videomae | swin_unetr`)
// and sets any of the fields below; an unknown key is an error, so a typo
// cannot silently fall back to a default.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace tessera::models {

// timm.models.vision_transformer.VisionTransformer
struct ViTConfig {
  int64_t img_size = 224;
  int64_t patch_size = 16;
  int64_t in_chans = 3;
  int64_t num_classes = 0;           // 0: no head, forward_head returns the pooled features
  std::string global_pool = "token";  // "token", "avg" or "" (none)
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  std::optional<double> init_values;  // LayerScale (ls1/ls2.gamma) when set
  bool class_token = true;
  int64_t reg_tokens = 0;
  bool no_embed_class = false;  // pos_embed covers the patches only
  std::optional<bool> fc_norm;  // default: true when global_pool == "avg" (timm)
  bool dynamic_img_size = false;  // resample pos_embed to each input's grid
  double norm_eps = 1e-6;         // timm's partial(nn.LayerNorm, eps=1e-6)
};

// transformers.VideoMAEConfig (encoder part)
struct VideoMAEConfig {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  int64_t num_frames = 16;
  int64_t tubelet_size = 2;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  double layer_norm_eps = 1e-12;
  bool qkv_bias = true;
  bool use_mean_pooling = true;  // true: no final layernorm in VideoMAEModel
};

// monai.networks.nets.SwinUNETR (MONAI 1.5 arguments; 3-D only)
struct SwinUNETRConfig {
  int64_t in_channels = 1;
  int64_t out_channels = 14;
  int64_t patch_size = 2;
  std::array<int64_t, 4> depths = {2, 2, 2, 2};
  std::array<int64_t, 4> num_heads = {3, 6, 12, 24};
  int64_t window_size = 7;
  bool qkv_bias = true;
  double mlp_ratio = 4.0;
  int64_t feature_size = 24;
  std::string norm_name = "instance";
  bool normalize = true;
  bool patch_norm = false;
  // "merging" (MONAI 1.5 PatchMerging), "mergingv2" (PatchMergingV2) or
  // "merging_legacy": PatchMerging as in MONAI <= 1.4, the order every
  // published SwinUNETR checkpoint was trained with (see medical-3d-anchors §1.6).
  std::string downsample = "merging";
  bool use_v2 = false;
  int64_t spatial_dims = 3;
  void validate() const;  // MONAI's constructor checks (feature_size % 12, ...)
};

// monai.networks.nets.ViT as UNETR builds it (3-D, conv patch embedding,
// learnable position embedding, no class token): 96^3 / 16^3 -> 216 tokens.
struct ViT3DConfig {
  int64_t in_channels = 1;
  std::array<int64_t, 3> img_size = {96, 96, 96};
  std::array<int64_t, 3> patch_size = {16, 16, 16};
  int64_t hidden_size = 768;
  int64_t mlp_dim = 3072;
  int64_t num_layers = 12;
  int64_t num_heads = 12;
  bool qkv_bias = false;  // UNETR's default
  double norm_eps = 1e-5;  // nn.LayerNorm default
};

ViTConfig load_vit_config(const std::string& yaml_path);
VideoMAEConfig load_videomae_config(const std::string& yaml_path);
SwinUNETRConfig load_swin_unetr_config(const std::string& yaml_path);
ViT3DConfig load_vit3d_config(const std::string& yaml_path);

// The `model:` entry of a config file ("vit", "videomae", "swin_unetr").
std::string config_model_kind(const std::string& yaml_path);

}  // namespace tessera::models
