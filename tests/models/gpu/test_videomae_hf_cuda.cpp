// The Hugging Face VideoMAE fixtures (base / large, encoder and classification
// heads) loaded from their folders and run on CUDA through the fused kernels:
// bf16 within 2e-2 of transformers' float64 outputs. Label `gpu`; skipped
// without a CUDA device or before the fixtures are committed.
#include <gtest/gtest.h>

#include "../../require_cuda.h"
#include "../videomae_hf_fixture.h"

namespace {

using namespace tessera::models::testing;

class VideoMAEHfCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(VideoMAEHfCuda, FolderBf16MatchesTransformers) {
  REQUIRE_CUDA();
  check_videomae_hf_fixture(GetParam(), torch::kCUDA, torch::kBFloat16, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Transformers, VideoMAEHfCuda, ::testing::ValuesIn(videomae_hf_fixture_names()));

}  // namespace
