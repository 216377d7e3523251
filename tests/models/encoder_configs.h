// The pathology tile encoders' configs in code (configs/<name>.yaml says the
// same: test_encoders checks it), so the fixture tests also run in builds
// without yaml-cpp, as on the GPU machine. Values: the model cards' timm
// arguments / Hugging Face config (see the YAML files' comments).
#pragma once

#include <string>
#include <vector>

#include "tessera/models/config.h"

namespace tessera::models::testing {

inline ViTConfig dinov2_giant_config() {  // timm vit_giant_patch14_dinov2: SwiGLU-packed ViT-g/14
  ViTConfig c;
  c.patch_size = 14;
  c.embed_dim = 1536;
  c.depth = 40;
  c.num_heads = 24;
  c.init_values = 1e-5;
  c.mlp_ratio = 2.66667 * 2;
  c.mlp_layer = "swiglu_packed";
  c.act_layer = "silu";
  return c;
}

inline ViTConfig encoder_config(const std::string& name) {
  ViTConfig c;
  if (name == "uni") {
    c.embed_dim = 1024;
    c.depth = 24;
    c.num_heads = 16;
    c.init_values = 1e-5;
    c.dynamic_img_size = true;
    c.preprocess.tile_size = 224;
  } else if (name == "uni2_h") {
    c = dinov2_giant_config();
    c.depth = 24;
    c.reg_tokens = 8;
    c.no_embed_class = true;
    c.dynamic_img_size = true;
    c.preprocess.tile_size = 224;
  } else if (name == "virchow2") {
    c.patch_size = 14;
    c.embed_dim = 1280;
    c.depth = 32;
    c.num_heads = 16;
    c.init_values = 1e-5;
    c.mlp_ratio = 5.3375;
    c.mlp_layer = "swiglu_packed";
    c.act_layer = "silu";
    c.reg_tokens = 4;
    c.global_pool = "token+avg";
    c.dynamic_img_size = true;
    c.preprocess.tile_size = 224;
  } else if (name == "h_optimus_0") {
    c = dinov2_giant_config();
    c.reg_tokens = 4;
    c.no_embed_class = true;
    c.preprocess.tile_size = 224;
    c.preprocess.mean = {0.707223, 0.578729, 0.703617};
    c.preprocess.std = {0.211883, 0.230117, 0.177517};
  } else if (name == "gigapath_tile") {
    c = dinov2_giant_config();
    c.patch_size = 16;
    c.preprocess.tile_size = 256;
    c.preprocess.crop = 224;
  } else if (name == "phikon_v2") {
    c.reference = "hf_dinov2";
    c.embed_dim = 1024;
    c.depth = 24;
    c.num_heads = 16;
    c.init_values = 1.0;
    c.dynamic_img_size = true;
    c.preprocess.tile_size = 224;
  } else {
    throw std::invalid_argument("no encoder config " + name);
  }
  return c;
}

inline const std::vector<std::string>& encoder_names() {
  static const std::vector<std::string> names = {"uni", "uni2_h", "virchow2", "h_optimus_0", "gigapath_tile", "phikon_v2"};
  return names;
}

}  // namespace tessera::models::testing
