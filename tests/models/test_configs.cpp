// configs/*.yaml: each shipped config parses to the architecture it names,
// and a config with a typo is refused rather than silently defaulted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fixtures.h"
#include "tessera/models/config.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;

TEST(Configs, ShippedViTConfigsMatchTimm) {
  TESSERA_REQUIRE_YAML();
  const auto s = load_vit_config(config_file("vit_s16.yaml"));
  EXPECT_EQ(s.embed_dim, 384);
  EXPECT_EQ(s.num_heads, 6);
  const auto b = load_vit_config(config_file("vit_b16.yaml"));
  EXPECT_EQ(b.embed_dim, 768);
  EXPECT_EQ(b.depth, 12);
  const auto l = load_vit_config(config_file("vit_l16.yaml"));
  EXPECT_EQ(l.embed_dim, 1024);
  EXPECT_EQ(l.depth, 24);
  ASSERT_TRUE(l.init_values.has_value());
  EXPECT_DOUBLE_EQ(*l.init_values, 1e-5);
  EXPECT_TRUE(l.dynamic_img_size);
  const auto r = load_vit_config(config_file("vit_reg_timm.yaml"));
  EXPECT_EQ(r.reg_tokens, 4);
  EXPECT_TRUE(r.no_embed_class);
}

TEST(Configs, ShippedVideoAndSwinConfigs) {
  TESSERA_REQUIRE_YAML();
  const auto v = load_videomae_config(config_file("videomae_tiny_hf.yaml"));
  EXPECT_EQ(v.hidden_size, 192);
  EXPECT_DOUBLE_EQ(v.layer_norm_eps, 1e-12);  // HF's default, not in the file
  const auto s = load_swin_unetr_config(config_file("swin_unetr_fs12.yaml"));
  EXPECT_EQ(s.feature_size, 12);
  EXPECT_EQ(s.num_heads[3], 24);
  EXPECT_EQ(load_swin_unetr_config(config_file("swin_unetr_btcv.yaml")).downsample, "merging_legacy");
  EXPECT_EQ(config_model_kind(config_file("vit_b16.yaml")), "vit");
}

TEST(Configs, FixtureConfigsSayWhatTheManifestSays) {
  TESSERA_REQUIRE_YAML();
  for (const auto& [file, want] : {std::pair<std::string, ViTConfig>{"vit_tiny_timm.yaml", vit_tiny_timm_config()},
                                   {"vit_reg_timm.yaml", vit_reg_timm_config()}}) {
    const auto got = load_vit_config(config_file(file));
    EXPECT_EQ(got.embed_dim, want.embed_dim) << file;
    EXPECT_EQ(got.depth, want.depth) << file;
    EXPECT_EQ(got.num_heads, want.num_heads) << file;
    EXPECT_EQ(got.reg_tokens, want.reg_tokens) << file;
    EXPECT_EQ(got.init_values, want.init_values) << file;
    EXPECT_EQ(got.no_embed_class, want.no_embed_class) << file;
    EXPECT_EQ(got.img_size, want.img_size) << file;
    EXPECT_EQ(got.global_pool, want.global_pool) << file;
  }
  const auto v = load_videomae_config(config_file("videomae_tiny_hf.yaml")), vw = videomae_tiny_hf_config();
  EXPECT_EQ(v.hidden_size, vw.hidden_size);
  EXPECT_EQ(v.num_hidden_layers, vw.num_hidden_layers);
  EXPECT_EQ(v.num_attention_heads, vw.num_attention_heads);
  EXPECT_EQ(v.intermediate_size, vw.intermediate_size);
  EXPECT_EQ(v.use_mean_pooling, vw.use_mean_pooling);
  const auto w = load_swin_unetr_config(config_file("swin_unetr_fs12.yaml")), ww = swin_unetr_fs12_config();
  EXPECT_EQ(w.feature_size, ww.feature_size);
  EXPECT_EQ(w.out_channels, ww.out_channels);
  EXPECT_EQ(w.depths, ww.depths);
  EXPECT_EQ(w.num_heads, ww.num_heads);
  EXPECT_EQ(w.downsample, ww.downsample);
  EXPECT_EQ(w.use_v2, ww.use_v2);
  const auto u = load_vit3d_config(config_file("unetr_vit_b16_3d.yaml")), uw = ViT3DConfig{};
  EXPECT_EQ(u.img_size, uw.img_size);
  EXPECT_EQ(u.hidden_size, uw.hidden_size);
  EXPECT_EQ(u.num_layers, uw.num_layers);
}

TEST(Configs, RejectsUnknownKeysWrongTypesAndWrongModels) {
  TESSERA_REQUIRE_YAML();
  const auto p = (std::filesystem::temp_directory_path() / ("tessera_cfg_" + std::to_string(::getpid()) + ".yaml")).string();
  auto expect_error = [&](const std::string& text, const std::string& what) {
    std::ofstream(p) << text;
    try {
      load_vit_config(p);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error("model: vit\nembed_dimm: 3\n", "unknown key `embed_dimm`");
  expect_error("model: vit\ndepth: twelve\n", "`depth` has the wrong type");
  expect_error("model: swin_unetr\n", "expected `model: vit`");
  expect_error("model: vit\n  bad: [\n", "cannot read config");
  std::filesystem::remove(p);
  EXPECT_THROW(load_vit_config("/nonexistent/config.yaml"), std::runtime_error);
}

}  // namespace
