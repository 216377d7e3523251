// Shared by the model tests: where the reference fixtures live, and the
// relative error the tolerances are stated in.
#pragma once

#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <string>

#include "tessera/models/config.h"

namespace tessera::models::testing {

inline std::string fixture(const std::string& name) { return std::string(TESSERA_FIXTURES) + "/" + name; }
inline std::string config_file(const std::string& name) { return std::string(TESSERA_CONFIGS) + "/" + name; }

// ||out - ref|| / ||ref|| in float64.
inline double rel_error(const torch::Tensor& out, const torch::Tensor& ref) {
  auto o = out.to(torch::kDouble), r = ref.to(torch::kDouble);
  return ((o - r).norm() / r.norm()).item<double>();
}

// The fixtures' configs (../shared/fixtures/manifest.json), in code so the
// equivalence tests run in builds without yaml-cpp; test_configs checks that
// configs/<fixture>.yaml says the same.
inline ViTConfig vit_tiny_timm_config() {
  ViTConfig c;
  c.embed_dim = 192;
  c.depth = 4;
  c.num_heads = 3;
  return c;
}

inline ViTConfig vit_reg_timm_config() {
  ViTConfig c = vit_tiny_timm_config();
  c.depth = 2;
  c.reg_tokens = 4;
  c.init_values = 1.0;
  c.no_embed_class = true;
  return c;
}

inline VideoMAEConfig videomae_tiny_hf_config() {
  VideoMAEConfig c;
  c.hidden_size = 192;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 3;
  c.intermediate_size = 768;
  return c;
}

// A one-layer VideoMAE over 4 frames of 32 px, for tests that need no fixture.
inline VideoMAEConfig videomae_small_config() {
  VideoMAEConfig c;
  c.hidden_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 48;
  c.image_size = 32;
  c.num_frames = 4;
  return c;
}

inline SwinUNETRConfig swin_unetr_fs12_config() {
  SwinUNETRConfig c;
  c.in_channels = 1;
  c.out_channels = 3;
  c.feature_size = 12;
  return c;
}

// LongNet_3_layers_384_dim under LongNetViT's defaults (nn.LayerNorm, eps 1e-5).
inline LongNetViTConfig gigapath_slide_tiny_config() {
  LongNetViTConfig c;
  c.embed_dim = 384;
  c.depth = 3;
  c.num_heads = 16;
  c.norm_eps = 1e-5;
  return c;
}

}  // namespace tessera::models::testing

// Fixtures live outside the repository (../shared/fixtures); skip, don't fail, without them.
#define TESSERA_REQUIRE_YAML()                                                   \
  do {                                                                           \
    if (!TESSERA_MODELS_HAS_YAML) GTEST_SKIP() << "built without yaml-cpp";       \
  } while (0)

#define TESSERA_REQUIRE_FIXTURE(name)                                                         \
  do {                                                                                        \
    if (!std::filesystem::exists(::tessera::models::testing::fixture(name)))                  \
      GTEST_SKIP() << "fixture " << ::tessera::models::testing::fixture(name) << " not found"; \
  } while (0)
