// The project's Linear: torch::nn::Linear's initialisation draw for draw, and a ParametersToBeLoaded scope that
// skips it (NaN in the scope's dtype) for a strict load to overwrite: a ViT built that way and loaded computes
// what one built the usual way and loaded does, bit for bit (also built on another thread while the file is read);
// a file missing a parameter is still refused.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <string>

#include "encoder_configs.h"
#include "tessera/models/linear.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"
#include "tessera/models/vit_weights.h"

using namespace tessera::models;
namespace fs = std::filesystem;

namespace {

// A two-block encoder of `name`'s architecture, small enough for a unit test.
ViTConfig small_config(const std::string& name, int64_t dim, int64_t heads, int64_t grid) {
  ViTConfig c = tessera::models::testing::encoder_config(name);
  c.embed_dim = dim;
  c.num_heads = heads;
  c.depth = 2;
  c.img_size = c.patch_size * grid;
  return c;
}

VisionTransformer built_to_be_loaded(const ViTConfig& c) {
  const ParametersToBeLoaded scope;
  return VisionTransformer(c);
}

}  // namespace

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
    ASSERT_TRUE(ParametersToBeLoaded::active());
    EXPECT_EQ(ParametersToBeLoaded::active()->dtype(), torch::kBFloat16);
  }
  EXPECT_FALSE(ParametersToBeLoaded::active());
  EXPECT_FALSE(Linear(8, 4)->weight.isnan().any().item<bool>());
}

TEST(Linear, ViTBuiltToBeLoadedEqualsTheUsualOneAfterAStrictLoad) {
  const ViTConfig c = small_config("uni2_h", 48, 3, 4);  // registers, LayerScale, packed SwiGLU
  torch::manual_seed(0);
  VisionTransformer usual(c);
  usual->eval();
  const fs::path file = fs::temp_directory_path() / ("tessera_linear_" + std::to_string(::getpid()) + ".safetensors");
  safetensors::save(file.string(), state_dict(*usual));
  VisionTransformer loaded = built_to_be_loaded(c);
  load_vit_weights(*loaded, {file.string()});
  loaded->eval();
  torch::NoGradGuard ng;
  const auto x = torch::randn({2, 3, c.img_size, c.img_size});
  EXPECT_TRUE(torch::equal(loaded->forward_features(x), usual->forward_features(x)));

  // A file without one linear layer's weight: the strict load names it, nothing is left NaN silently.
  StateDict partial = state_dict(*usual);
  partial.erase("blocks.1.mlp.fc2.weight");
  safetensors::save(file.string(), partial);
  VisionTransformer missing = built_to_be_loaded(c);
  try {
    load_vit_weights(*missing, {file.string()});
    ADD_FAILURE() << "a file missing blocks.1.mlp.fc2.weight loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.1.mlp.fc2.weight"), std::string::npos) << e.what();
  }
  fs::remove(file);
}

// embed-wsi's order: the file read on this thread while the model is built on another (whose own scope applies:
// the scope is per thread), then what was read applied; the same model as the usual load.
TEST(Linear, ViTBuiltOnAnotherThreadWhileTheFileIsReadEqualsTheUsualOne) {
  const ViTConfig c = small_config("virchow2", 32, 2, 3);  // registers, token+avg pooling
  torch::manual_seed(1);
  VisionTransformer usual(c);
  usual->eval();
  const fs::path file = fs::temp_directory_path() / ("tessera_linear_split_" + std::to_string(::getpid()) + ".safetensors");
  safetensors::save(file.string(), state_dict(*usual));
  const ParametersToBeLoaded not_this_one(torch::kDouble);  // this thread's scope: the builder's own is what counts
  std::future<VisionTransformer> built = std::async(std::launch::async, [&c] {
    const ParametersToBeLoaded scope(torch::kFloat, torch::kCPU);
    return VisionTransformer(c);
  });
  StateDict state = read_weights({file.string()});
  VisionTransformer loaded = built.get();
  EXPECT_EQ(loaded->blocks[0]->as<ViTBlock>()->attn->qkv->weight.scalar_type(), torch::kFloat);
  apply_vit_weights(*loaded, std::move(state), {file.string()});
  loaded->eval();
  for (const auto& [name, p] : state_dict(*usual)) EXPECT_TRUE(torch::equal(state_dict(*loaded).at(name), p)) << name;
  torch::NoGradGuard ng;
  const auto x = torch::randn({2, 3, c.img_size, c.img_size});
  EXPECT_TRUE(torch::equal(loaded->forward_head(loaded->forward_features(x), true), usual->forward_head(usual->forward_features(x), true)));

  // What was read from another model's file: the error names the file and the key.
  StateDict other = state_dict(*usual);
  other.erase("blocks.0.attn.proj.bias");
  safetensors::save(file.string(), other);
  VisionTransformer missing = built_to_be_loaded(c);
  try {
    apply_vit_weights(*missing, read_weights({file.string()}), {file.string()});
    ADD_FAILURE() << "a file missing blocks.0.attn.proj.bias loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.proj.bias"), std::string::npos) << e.what();
  }
  fs::remove(file);
}
