// Checkpoints read straight onto the GPU (CheckpointOptions::device: through page-locked chunks) hold what a host
// read holds, bit for bit, as contiguous device tensors: a torch.save zip with shared, strided and offset storages,
// and safetensors. Label `gpu`; skipped without a CUDA device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "../../require_cuda.h"
#include "tessera/models/checkpoint.h"
#include "tessera/models/state_dict.h"

namespace tessera::models::testing {
namespace {

void expect_same_on_device(const StateDict& host, const StateDict& device) {
  ASSERT_EQ(host.size(), device.size());
  for (const auto& [name, t] : host) {
    ASSERT_TRUE(device.count(name)) << name;
    const auto& d = device.at(name);
    EXPECT_TRUE(d.is_cuda()) << name;
    EXPECT_TRUE(d.is_contiguous()) << name;
    EXPECT_EQ(d.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(d.cpu(), t)) << name;
  }
}

TEST(CheckpointCuda, AZipReadOntoTheDeviceEqualsTheHostRead) {
  REQUIRE_CUDA();
  const std::string file = TESSERA_CHECKPOINT_FIXTURES "/views.pt";
  CheckpointOptions on_gpu;
  on_gpu.device = torch::kCUDA;
  expect_same_on_device(load_checkpoint(file), load_checkpoint(file, on_gpu));
}

TEST(CheckpointCuda, SafetensorsReadOntoTheDeviceEqualTheHostRead) {
  REQUIRE_CUDA();
  torch::manual_seed(5);
  // Larger than one 32 MiB chunk, a bf16 one, an empty one.
  const StateDict source = {{"big", torch::randn({9, 1 << 20})},
                            {"half", torch::randn({3, 7}).to(torch::kBFloat16)},
                            {"none", torch::zeros({0, 3})}};
  const auto file = (std::filesystem::temp_directory_path() / ("tessera_ckpt_cuda_" + std::to_string(::getpid()) + ".safetensors")).string();
  safetensors::save(file, source);
  const StateDict on_gpu = read_weights({file}, {}, torch::kCUDA);
  std::filesystem::remove(file);
  expect_same_on_device(source, on_gpu);
}

}  // namespace
}  // namespace tessera::models::testing
