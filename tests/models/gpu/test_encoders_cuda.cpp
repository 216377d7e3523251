// The pathology tile encoders on CUDA in bf16 (≤ 2e-2) against the float64
// references of make_encoder_fixtures.py, through the fused attention kernels
// (head dims 64 and 80). Label `gpu`; skipped without a CUDA device or fixture.
#include <gtest/gtest.h>

#include "../../require_cuda.h"
#include "../encoder_configs.h"
#include "../encoder_fixture.h"

namespace tessera::models::testing {
namespace {

class EncoderFixtureCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderFixtureCuda, Bf16MatchesReference) {
  REQUIRE_CUDA();
  check_encoder_fixture(GetParam(), torch::kCUDA, torch::kBFloat16, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Encoders, EncoderFixtureCuda, ::testing::ValuesIn(encoder_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tessera::models::testing
