// The pathology tile encoders on CUDA in bf16 (≤ 2e-2) against the float64
// references of make_encoder_fixtures.py, through the fused attention kernels
// (head dims 64 and 80); an encoder built on the device and loaded equals one built on the host. Label `gpu`;
// skipped without a CUDA device or fixture.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "../../require_cuda.h"
#include "../encoder_configs.h"
#include "../encoder_fixture.h"
#include "tessera/models/linear.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/vit_weights.h"

namespace tessera::models::testing {
namespace {

class EncoderFixtureCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderFixtureCuda, Bf16MatchesReference) {
  REQUIRE_CUDA();
  check_encoder_fixture(GetParam(), torch::kCUDA, torch::kBFloat16, 2e-2);
}

// embed-wsi builds the encoder on the GPU (linear weights NaN in bf16, left for the checkpoint) and copies the
// file's tensors there (read onto the GPU): the same parameters, bit for bit, as building on the host, loading, then
// moving.
TEST(EncoderLoadCuda, BuiltOnTheDeviceEqualsBuiltOnTheHostThenMoved) {
  REQUIRE_CUDA();
  ViTConfig c = encoder_config("uni2_h");
  c.depth = 2;
  torch::manual_seed(3);
  VisionTransformer source(c);
  const auto file = (std::filesystem::temp_directory_path() / ("tessera_enc_load_" + std::to_string(::getpid()) + ".safetensors")).string();
  safetensors::save(file, state_dict(*source));
  VisionTransformer host{nullptr}, device{nullptr};
  {
    const ParametersToBeLoaded scope(torch::kBFloat16);
    host = VisionTransformer(c);
  }
  load_vit_weights(*host, {file});
  host->to(torch::kCUDA, torch::kBFloat16);
  {
    const ParametersToBeLoaded scope(torch::kBFloat16, torch::kCUDA);
    device = VisionTransformer(c);
  }
  EXPECT_TRUE(device->blocks[1]->as<ViTBlock>()->mlp->fc1->weight.is_cuda());
  apply_vit_weights(*device, read_weights({file}, {}, torch::kCUDA), {file});  // as embed-wsi: read onto the GPU
  device->to(torch::kCUDA, torch::kBFloat16);
  std::filesystem::remove(file);
  const StateDict want = state_dict(*host);
  for (const auto& [name, p] : state_dict(*device)) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(p.is_cuda()) << name;
    EXPECT_EQ(p.scalar_type(), want.at(name).scalar_type()) << name;
    EXPECT_TRUE(torch::equal(p, want.at(name))) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Encoders, EncoderFixtureCuda, ::testing::ValuesIn(encoder_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tessera::models::testing
