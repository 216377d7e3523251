// Model configurations as plain structs, with the field names and defaults of
// the reference implementations (timm VisionTransformer, Hugging Face
// VideoMAEConfig, MONAI SwinUNETR), read from configs/*.yaml. No LibTorch here.
//
// A YAML file names its architecture (`model: vit | vit3d | videomae | swin_unetr | longnet_vit`)
// and sets any of the fields below; an unknown key is an error, so a typo
// cannot silently fall back to a default.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::models {

// How a tile encoder wants its tiles (timm's pretrained_cfg / the model card's
// transform): read at target_mpp, tile_size pixels a side (area-averaged from
// the nearest finer pyramid level, standing in for the card's Resize), centre
// crop to `crop`, then (x/255 - mean) / std per channel.
struct TilePreprocessing {
  double target_mpp = 0.5;  // µm per pixel (0.5 ≈ 20×)
  int64_t tile_size = 0;    // 0: the model's img_size
  int64_t crop = 0;         // 0: no crop
  std::array<double, 3> mean = {0.485, 0.456, 0.406};  // ImageNet
  std::array<double, 3> std = {0.229, 0.224, 0.225};
};

// timm.models.vision_transformer.VisionTransformer, plus the options that the
// pathology encoders built on it set (timm's mlp_layer / act_layer) and the
// Hugging Face Dinov2Model layout (`reference: hf_dinov2`).
struct ViTConfig {
  int64_t img_size = 224;
  int64_t patch_size = 16;
  int64_t in_chans = 3;
  int64_t num_classes = 0;           // 0: no head, forward_head returns the pooled features
  // "token" (class token), "avg" (mean of the patch tokens), "token+avg" (both
  // concatenated, 2*embed_dim: Virchow's tile embedding) or "" (none).
  std::string global_pool = "token";
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;            // hidden = int(embed_dim * mlp_ratio), as timm computes it
  // "mlp": fc1 -> act -> fc2 (timm Mlp). "swiglu_packed": timm SwiGLUPacked
  // (GluMlp, gate_last=False): fc1 gives [gate | value], act(gate) * value -> fc2.
  std::string mlp_layer = "mlp";
  std::string act_layer = "gelu";    // "gelu" (erf, nn.GELU) or "silu"
  bool qkv_bias = true;
  std::optional<double> init_values;  // LayerScale (ls1/ls2.gamma) when set
  bool class_token = true;
  int64_t reg_tokens = 0;
  bool no_embed_class = false;  // pos_embed covers the patches only
  std::optional<bool> fc_norm;  // default: true when global_pool == "avg" (timm)
  bool dynamic_img_size = false;  // resample pos_embed to each input's grid
  double norm_eps = 1e-6;         // timm's partial(nn.LayerNorm, eps=1e-6)
  // "timm": timm state_dict keys, pos_embed resampled as timm's
  // resample_abs_pos_embed. "hf_dinov2": transformers' Dinov2Model keys
  // (embeddings.*, encoder.layer.N.*, separate query/key/value) and its
  // interpolate_pos_encoding; every input size is accepted, as there.
  std::string reference = "timm";
  TilePreprocessing preprocess;
  void validate() const;  // the combinations timm / transformers accept
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
  std::string hidden_act = "gelu";  // transformers' ACT2FN name for the MLP
  void validate() const;  // divisibility, positive sizes, a known hidden_act
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

// Prov-GigaPath's slide encoder (gigapath/slide_encoder.py LongNetViT) over its
// torchscale LongNet encoder. The encoder-layer settings are those gigapath's
// LongNetConfig entries leave at torchscale's EncoderConfig defaults: pre-norm
// with sub-LN (an extra LayerNorm before out_proj and before fc2), gelu, no
// embedding scale, a LayerNorm after the last layer (normalize_output).
struct LongNetViTConfig {
  int64_t in_chans = 1536;     // the tile encoder's width
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 16;      // every LongNet_*_dim entry but 512_dim
  double mlp_ratio = 4.0;      // encoder_ffn_embed_dim = embed_dim * mlp_ratio
  int64_t slide_ngrids = 1000; // the position table is slide_ngrids^2 cells of 256 px
  // One (segment length, dilation) pair per attention branch. LongNetViT
  // derives the lengths from max_wsi_size / tile_size (262144 / 256):
  // 2^linspace(10, 20, 5) truncated, see gigapath_segment_lengths().
  std::vector<int64_t> segment_length = {1024, 5792, 32768, 185363, 1048576};
  std::vector<int64_t> dilated_ratio = {1, 2, 4, 8, 16};
  double layernorm_eps = 1e-5;  // the encoder's LayerNorms (EncoderConfig default)
  double norm_eps = 1e-6;       // LongNetViT.norm: 1e-6 in gigapath_slide_enc*, 1e-5 (nn.LayerNorm) otherwise
  bool global_pool = false;     // false: norm(x)[:, 0]; true: norm(mean of the tile tokens)
  // The published merge computes the branch weights (softmax of the branch
  // log-sum-exps) under no_grad, so its training never differentiates through
  // them. true (default) backpropagates through the LSE as well: the exact
  // gradient of the function the forward computes. Forward is the same.
  bool merge_weights_grad = true;
  // Without autograd, the feed-forward layers take this many tokens at a time (same result,
  // a slice's hidden activations in memory instead of the whole slide's).
  int64_t inference_slice_rows = 1 << 16;
  void validate() const;
};

// LongNetViT.get_optimal_segment_length: five lengths 2^linspace(log2 1024,
// log2((max_wsi_size / tile_size)^2), 5), truncated to integers.
std::vector<int64_t> gigapath_segment_lengths(int64_t max_wsi_size = 262144, int64_t tile_size = 256);

ViTConfig load_vit_config(const std::string& yaml_path);
LongNetViTConfig load_longnet_vit_config(const std::string& yaml_path);
VideoMAEConfig load_videomae_config(const std::string& yaml_path);
SwinUNETRConfig load_swin_unetr_config(const std::string& yaml_path);
ViT3DConfig load_vit3d_config(const std::string& yaml_path);

// The `model:` entry of a config file ("vit", "videomae", "swin_unetr").
std::string config_model_kind(const std::string& yaml_path);

}  // namespace tessera::models
