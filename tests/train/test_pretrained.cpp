// Fine-tuning starts from a pretrained encoder: the swinViT.* weights come
// from the file (in MONAI's or the SSL release's key layout), everything else
// keeps its fresh initialisation, and mismatches are errors naming the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/models/config.h"
#include "tessera/models/safetensors.h"
#include "tessera/train/pretrained.h"
#include "train_test_util.h"

namespace tessera::train {
namespace {

using testing::temp_dir;

models::SwinUNETR make_net(uint64_t seed) {
  torch::manual_seed(seed);
  return models::SwinUNETR(models::load_swin_unetr_config(std::string(TESSERA_CONFIGS) + "/swin_unetr_phantom.yaml"));
}

// The SSL release's names for a swinViT key: module.* and fc1/fc2 for the MLP.
std::string ssl_name(std::string k) {
  k.replace(0, 7, "module");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"linear1", "fc1"}, {"linear2", "fc2"}}) {
    const auto at = k.find("." + from + ".");
    if (at != std::string::npos) k.replace(at + 1, from.size(), to);
  }
  return k;
}

void expect_encoder_from(const models::SwinUNETR& pretrained, const models::SwinUNETR& fresh, const models::SwinUNETR& loaded) {
  const auto a = pretrained->named_parameters(), f = fresh->named_parameters(), l = loaded->named_parameters();
  int encoder = 0, other = 0;
  for (const auto& kv : l) {
    if (kv.key().rfind("swinViT.", 0) == 0) {
      EXPECT_TRUE(torch::equal(kv.value(), a[kv.key()])) << kv.key();
      ++encoder;
    } else {
      EXPECT_TRUE(torch::equal(kv.value(), f[kv.key()])) << kv.key() << " should keep its initialisation";
      ++other;
    }
  }
  EXPECT_GT(encoder, 20);
  EXPECT_GT(other, 10);
}

TEST(Pretrained, MonaiAndSslLayoutsLoadTheEncoderOnly) {
  const auto dir = temp_dir("pretrained");
  const models::SwinUNETR pretrained = make_net(1);
  const models::StateDict full = models::state_dict(*pretrained);
  models::safetensors::save(dir + "/monai.safetensors", full);
  models::StateDict ssl;
  for (const auto& [k, t] : full)
    if (k.rfind("swinViT.", 0) == 0) ssl[ssl_name(k)] = t;
  ASSERT_TRUE(ssl.count("module.layers1.0.blocks.0.mlp.fc1.weight"));
  models::safetensors::save(dir + "/ssl.safetensors", ssl);

  for (const auto& [file, keys] : {std::pair<std::string, std::string>{"monai.safetensors", "monai"}, {"ssl.safetensors", "ssl"}}) {
    const models::SwinUNETR fresh = make_net(2);
    models::SwinUNETR net = make_net(2);
    const auto report = load_pretrained_encoder(*net, dir + "/" + file, keys);
    EXPECT_GT(report.loaded, 20u) << file;
    expect_encoder_from(pretrained, fresh, net);
  }
}

TEST(Pretrained, WrongLayoutOrShapeNamesTheFile) {
  const auto dir = temp_dir("pretrained_bad");
  const models::StateDict full = models::state_dict(*make_net(1));
  models::safetensors::save(dir + "/monai.safetensors", full);
  models::SwinUNETR net = make_net(2);
  try {
    load_pretrained_encoder(*net, dir + "/monai.safetensors", "research");  // keeps module.* keys only: none
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("monai.safetensors: no swinViT.* encoder weights"), std::string::npos) << e.what();
  }
  models::StateDict wrong = {{"swinViT.patch_embed.proj.weight", torch::zeros({5, 1, 2, 2, 2})}};
  models::safetensors::save(dir + "/wrong.safetensors", wrong);
  try {
    load_pretrained_encoder(*net, dir + "/wrong.safetensors", "monai");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("swinViT.patch_embed.proj.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::train
