// Resampling round trips (images and labels back onto their own voxels) and
// varlen packing of token sequences.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/patching/resample.h"
#include "tessera/patching/sequence_packing.h"

namespace {

using namespace tessera::patching;

TEST(Resample, UpsampleThenBackIsExactForImagesAndLabels) {
  auto img = torch::randn({2, 9, 13, 6});
  auto up = resample_to_spacing(img, {1.5, 0.8, 3.0}, {0.75, 0.4, 1.5}, Interp::linear);
  EXPECT_EQ(up.data.sizes(), (std::vector<int64_t>{2, 17, 25, 11}));
  EXPECT_DOUBLE_EQ(up.spacing[0], 0.75);
  auto back = resample_to_size(up.data, {9, 13, 6}, Interp::linear);
  EXPECT_LT((back - img).abs().max().item<double>(), 1e-5);

  auto labels = torch::randint(0, 5, {1, 9, 13, 6}, torch::kUInt8);
  auto lup = resample_to_spacing(labels, {1.5, 0.8, 3.0}, {0.75, 0.4, 1.5}, Interp::nearest);
  EXPECT_EQ(lup.data.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(resample_to_size(lup.data, {9, 13, 6}, Interp::nearest), labels));
}

TEST(Resample, LinearIsExactOnLinearFunctionsAndSpacingIsReported) {
  // f = 2x + 3y - z sampled on a grid: linear interpolation reproduces it anywhere.
  auto x = torch::arange(20).to(torch::kFloat).view({20, 1, 1});
  auto y = torch::arange(15).to(torch::kFloat).view({1, 15, 1});
  auto z = torch::arange(7).to(torch::kFloat).view({1, 1, 7});
  auto f = (2 * x + 3 * y - z).unsqueeze(0).expand({1, 20, 15, 7}).contiguous();
  auto r = resample_to_spacing(f, {1.0, 1.0, 2.5}, {1.7, 0.6, 1.0}, Interp::linear);
  const auto& s = r.spacing;
  for (int64_t i = 0; i < r.data.size(1); i += 3)
    for (int64_t j = 0; j < r.data.size(2); j += 5)
      for (int64_t k = 0; k < r.data.size(3); ++k) {
        const double want = 2 * (i * s[0] / 1.0) + 3 * (j * s[1] / 1.0) - (k * s[2] / 2.5);
        EXPECT_NEAR(r.data[0][i][j][k].item<double>(), want, 1e-3);
      }
  // the reported spacing is within half an output voxel of the target
  EXPECT_NEAR(s[0], 1.7, 1.7 / 2);
  EXPECT_THROW(resample_to_spacing(f, {1.0, 1.0}, {1.0, 1.0}, Interp::linear), std::invalid_argument);
  EXPECT_THROW(resample_to_spacing(f, {1.0, 0.0, 1.0}, {1.0, 1.0, 1.0}, Interp::linear), std::invalid_argument);
}

TEST(Packing, PackUnpackRoundTrip) {
  std::vector<at::Tensor> toks = {torch::randn({5, 8}), torch::randn({1, 8}), torch::randn({30, 8})};
  std::vector<at::Tensor> pos = {torch::rand({5, 2}), torch::rand({1, 2}), torch::rand({30, 2})};
  auto p = pack_sequences(toks, pos);
  EXPECT_EQ(p.tokens.sizes(), (std::vector<int64_t>{36, 8}));
  EXPECT_TRUE(torch::equal(p.cu_seqlens, torch::tensor({0, 5, 6, 36}, torch::kInt)));
  EXPECT_EQ(p.max_seqlen, 30);
  auto back = unpack_sequences(p.tokens, p.cu_seqlens);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(back[i], toks[i]));
  EXPECT_THROW(pack_sequences({torch::randn({5, 8})}, {torch::rand({4, 2})}), std::invalid_argument);
  EXPECT_THROW(pack_sequences({torch::randn({5, 8}), torch::randn({5, 7})}, {torch::rand({5, 2}), torch::rand({5, 2})}),
               std::invalid_argument);
  auto g = grid_positions({{0, 0}, {448, 224}, {224, 672}}, 224);
  EXPECT_TRUE(torch::equal(g, torch::tensor({0.f, 0.f, 2.f, 1.f, 1.f, 3.f}).view({3, 2})));
}

}  // namespace
