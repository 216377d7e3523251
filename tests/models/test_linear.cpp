// The project's Linear: torch::nn::Linear's initialisation draw for draw, and a ParametersToBeLoaded scope that
// skips it (NaN in the scope's dtype) for a strict load to overwrite: a ViT built that way and loaded computes
// what one built the usual way and loaded does, bit for bit; a file missing a parameter is still refused.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "encoder_configs.h"
#include "tessera/models/linear.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"
#include "tessera/models/vit_weights.h"

using namespace tessera::models;
namespace fs = std::filesystem;

TEST(Linear, InitialisesAsTorchLinearDrawForDraw) {
  for (const bool bias : {true, false}) {
    torch::manual_seed(7);
    torch::nn::Linear ref(torch::nn::LinearOptions(37, 19).bias(bias));
    torch::manual_seed(7);
    Linear ours(torch::nn::LinearOptions(37, 19).bias(bias));
    EXPECT_TRUE(torch::equal(ours->weight, ref->weight)) << bias;
    EXPECT_EQ(ours->bias.defined(), bias);
    if (bias) EXPECT_TRUE(torch::equal(ours->bias, ref->bias));
    EXPECT_EQ(ours->parameters().size(), ref->parameters().size());
    const auto x = torch::randn({2, 5, 37});
    EXPECT_TRUE(torch::allclose(ours(x), ref(x), 1e-6, 1e-6));
  }
}

TEST(Linear, ToBeLoadedHoldsNaNInTheScopesDtypeAndScopesNest) {
  EXPECT_FALSE(ParametersToBeLoaded::active());
  {
    const ParametersToBeLoaded outer(torch::kBFloat16);
    Linear a(8, 4);
    EXPECT_EQ(a->weight.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(a->weight.isnan().all().item<bool>());
    EXPECT_TRUE(a->bias.isnan().all().item<bool>());
    {
      const ParametersToBeLoaded inner;
      EXPECT_EQ(Linear(8, 4)->weight.scalar_type(), torch::kFloat);
    }
    EXPECT_EQ(ParametersToBeLoaded::active(), torch::kBFloat16);
  }
  EXPECT_FALSE(ParametersToBeLoaded::active());
  EXPECT_FALSE(Linear(8, 4)->weight.isnan().any().item<bool>());
}

TEST(Linear, ViTBuiltToBeLoadedEqualsTheUsualOneAfterAStrictLoad) {
  ViTConfig c = tessera::models::testing::encoder_config("uni2_h");  // registers, LayerScale, packed SwiGLU
  c.embed_dim = 48;
  c.num_heads = 3;
  c.depth = 2;
  c.img_size = c.patch_size * 4;
  torch::manual_seed(0);
  VisionTransformer usual(c);
  usual->eval();
  const fs::path file = fs::temp_directory_path() / ("tessera_linear_" + std::to_string(::getpid()) + ".safetensors");
  safetensors::save(file.string(), state_dict(*usual));
  VisionTransformer loaded{nullptr};
  {
    const ParametersToBeLoaded scope;
    loaded = VisionTransformer(c);
  }
  load_vit_weights(*loaded, {file.string()});
  loaded->eval();
  torch::NoGradGuard ng;
  const auto x = torch::randn({2, 3, c.img_size, c.img_size});
  EXPECT_TRUE(torch::equal(loaded->forward_features(x), usual->forward_features(x)));

  // A file without one linear layer's weight: the strict load names it, nothing is left NaN silently.
  StateDict partial = state_dict(*usual);
  partial.erase("blocks.1.mlp.fc2.weight");
  safetensors::save(file.string(), partial);
  VisionTransformer missing{nullptr};
  {
    const ParametersToBeLoaded scope;
    missing = VisionTransformer(c);
  }
  try {
    load_vit_weights(*missing, {file.string()});
    ADD_FAILURE() << "a file missing blocks.1.mlp.fc2.weight loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.1.mlp.fc2.weight"), std::string::npos) << e.what();
  }
  fs::remove(file);
}
