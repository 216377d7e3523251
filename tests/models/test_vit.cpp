// timm VisionTransformer equivalence: the vit_tiny_timm and vit_reg_timm
// fixtures (timm 1.0.29, float64 reference) loaded by their original key
// names must reproduce forward_features and the pooled class token.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;

void check_fixture(const std::string& name, const ViTConfig& config) {
  const auto file = safetensors::load(fixture(name + ".safetensors"));
  VisionTransformer model(config);
  model->eval();
  const auto report = load_state_dict(*model, remap_keys(file, {"weights.", {}, {}}));
  EXPECT_TRUE(report.complete()) << report.summary();

  torch::NoGradGuard no_grad;
  const auto features = model->forward_features(file.at("input"));
  const auto pooled = model->forward_head(features, /*pre_logits=*/true);
  ASSERT_EQ(features.sizes(), file.at("forward_features").sizes());
  ASSERT_EQ(pooled.sizes(), file.at("pooled").sizes());
  const double e_features = rel_error(features, file.at("forward_features"));
  const double e_pooled = rel_error(pooled, file.at("pooled"));
  std::cout << name << ": forward_features rel err " << e_features << ", pooled " << e_pooled << "\n";
  EXPECT_LT(e_features, 1e-4);
  EXPECT_LT(e_pooled, 1e-4);
}

TEST(ViT, TinyTimmFixture) {
  TESSERA_REQUIRE_FIXTURE("vit_tiny_timm.safetensors");
  check_fixture("vit_tiny_timm", vit_tiny_timm_config());
}

TEST(ViT, RegistersAndLayerScaleFixture) {
  TESSERA_REQUIRE_FIXTURE("vit_reg_timm.safetensors");
  check_fixture("vit_reg_timm", vit_reg_timm_config());
}

// forward_embedding computes the last block for the class token alone: the same embedding as pooling the whole
// forward, and the same gradient for the input and every parameter (the rows it skips reach no output).
TEST(ViT, ForwardEmbeddingEqualsPoolingTheWholeForward) {
  ViTConfig c;
  c.img_size = 64;
  c.embed_dim = 48;
  c.depth = 2;
  c.num_heads = 3;
  c.reg_tokens = 2;
  c.init_values = 0.5;
  torch::manual_seed(7);
  VisionTransformer model(c);
  const auto x = torch::randn({3, 3, 64, 64}).requires_grad_(true);
  const auto w = torch::randn({3, 48});
  const auto grads = [&](bool direct) {
    model->zero_grad();
    x.mutable_grad() = torch::Tensor();
    const auto e = direct ? model->forward_embedding(x) : model->forward_head(model->forward_features(x), /*pre_logits=*/true);
    (e * w).sum().backward();
    std::vector<torch::Tensor> g = {e.detach().clone(), x.grad().clone()};
    for (const auto& p : model->parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    return g;
  };
  const auto full = grads(false), direct = grads(true);
  ASSERT_EQ(full.size(), direct.size());
  EXPECT_EQ(direct[0].sizes(), (std::vector<int64_t>{3, 48}));
  for (std::size_t i = 0; i < full.size(); ++i) {
    ASSERT_EQ(full[i].sizes(), direct[i].sizes()) << i;
    EXPECT_LT(rel_error(direct[i], full[i]), 1e-5) << (i == 0 ? "embedding" : i == 1 ? "input grad" : "parameter grad") << " " << i;
  }
  // Other pooling reads every token: the whole forward.
  c.global_pool = "token+avg";
  VisionTransformer both(c);
  torch::NoGradGuard ng;
  const auto y = torch::randn({2, 3, 64, 64});
  EXPECT_TRUE(torch::equal(both->forward_embedding(y), both->forward_head(both->forward_features(y), true)));
}

TEST(ViT, StateDictKeysAreTimms) {
  ViTConfig c;
  c.embed_dim = 48;
  c.depth = 1;
  c.num_heads = 3;
  c.reg_tokens = 2;
  c.init_values = 1e-5;
  c.global_pool = "avg";
  c.num_classes = 5;
  VisionTransformer model(c);
  const auto keys = state_dict(*model);
  for (const char* k : {"cls_token", "reg_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.attn.qkv.weight",
                        "blocks.0.attn.proj.bias", "blocks.0.ls1.gamma", "blocks.0.mlp.fc2.weight", "blocks.0.ls2.gamma",
                        "fc_norm.weight", "head.weight"})
    EXPECT_TRUE(keys.count(k)) << k;
  EXPECT_FALSE(keys.count("norm.weight"));  // avg pooling normalises after pooling (timm)
  EXPECT_EQ(keys.at("pos_embed").size(1), 14 * 14 + 3);
}

TEST(ViT, ResamplePosEmbedKeepsPrefixAndConstantFields) {
  const auto prefix = torch::randn({1, 2, 8});
  const auto grid = torch::full({1, 14 * 14, 8}, 0.25);
  const auto pos = torch::cat({prefix, grid}, 1);
  EXPECT_TRUE(resample_abs_pos_embed(pos, {14, 14}, std::nullopt, 2).is_same(pos));  // nothing to do
  for (std::array<int64_t, 2> size : {std::array<int64_t, 2>{16, 16}, {10, 20}}) {
    const auto r = resample_abs_pos_embed(pos, size, std::nullopt, 2);
    ASSERT_EQ(r.sizes(), (std::vector<int64_t>{1, 2 + size[0] * size[1], 8}));
    EXPECT_TRUE(torch::equal(r.narrow(1, 0, 2), prefix));
    EXPECT_TRUE(torch::allclose(r.narrow(1, 2, size[0] * size[1]), torch::full({1, size[0] * size[1], 8}, 0.25)));
  }
}

TEST(ViT, OtherImageSizesResampleThePositionGrid) {
  ViTConfig c;
  c.embed_dim = 48;
  c.depth = 1;
  c.num_heads = 3;
  c.img_size = 64;
  VisionTransformer strict(c);
  c.dynamic_img_size = true;
  VisionTransformer model(c);
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward_features(torch::randn({1, 3, 96, 80})).sizes(), (std::vector<int64_t>{1, 1 + 6 * 5, 48}));
  EXPECT_THROW(model->forward_features(torch::randn({1, 3, 90, 80})), c10::Error);  // not whole patches
  EXPECT_THROW(strict->forward_features(torch::randn({1, 3, 96, 80})), c10::Error);
}

TEST(ViT, CheckpointAtAnotherImageSizeIsResampledOnLoad) {
  ViTConfig c;
  c.embed_dim = 48;
  c.depth = 1;
  c.num_heads = 3;
  c.img_size = 64;   // 4x4 grid
  VisionTransformer trained(c);
  c.img_size = 96;   // 6x6 grid
  VisionTransformer model(c);
  auto sd = resample_checkpoint_pos_embed(state_dict(*trained), *model);
  EXPECT_EQ(sd.at("pos_embed").sizes(), (std::vector<int64_t>{1, 1 + 36, 48}));
  EXPECT_TRUE(torch::equal(sd.at("pos_embed").narrow(1, 0, 1), trained->pos_embed.narrow(1, 0, 1)));  // class token kept
  EXPECT_TRUE(load_state_dict(*model, sd).complete());
}

}  // namespace
