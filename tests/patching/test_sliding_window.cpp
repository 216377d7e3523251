// Sliding-window inference: MONAI's window counts and Gaussian map, exact
// reconstruction with an identity model at every overlap/mode, padding of
// small inputs, agreement with a whole-volume prediction.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <random>

#include "tessera/patching/intensity.h"
#include "tessera/patching/sliding_window.h"

namespace {

using namespace tessera::patching;

int64_t count_windows(std::vector<int64_t> size, int64_t roi, double overlap) {
  std::vector<int64_t> r(size.size(), roi);
  return static_cast<int64_t>(window_starts(size, r, scan_interval(size, r, {overlap})).size());
}

TEST(SlidingWindow, WindowCountsMatchMonai) {
  // Counts measured with MONAI 1.5 (roi 96³), see shared/research/medical-3d-anchors.md.
  EXPECT_EQ(scan_interval({266, 266, 221}, {96, 96, 96}, {0.25})[0], 72);
  EXPECT_EQ(count_windows({266, 266, 221}, 96, 0.25), 48);
  EXPECT_EQ(count_windows({266, 266, 221}, 96, 0.5), 100);
  EXPECT_EQ(count_windows({266, 266, 221}, 96, 0.7), 384);
  EXPECT_EQ(count_windows({512, 512, 300}, 96, 0.25), 196);
  EXPECT_EQ(count_windows({512, 512, 300}, 96, 0.5), 600);
  EXPECT_EQ(count_windows({512, 512, 300}, 96, 0.7), 2304);
  // roi == size: one window, interval = roi
  EXPECT_EQ(count_windows({96, 96, 96}, 96, 0.5), 1);
}

TEST(SlidingWindow, LastWindowEndsAtTheBorder) {
  auto starts = window_starts({100}, {30}, scan_interval({100}, {30}, {0.5}));
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts.front()[0], 0);
  EXPECT_EQ(starts.back()[0], 70);
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_LE(starts[i][0] - starts[i - 1][0], 15);
}

TEST(SlidingWindow, GaussianMapFollowsMonaiFormula) {
  const auto w = importance_map({96, 96, 96}, BlendMode::gaussian, 0.125, at::kCPU);
  // Not normalised: the peak is exp(-(0.5²)·3 / (2·12²)) at the four central voxels of each axis.
  const double centre = std::exp(-3 * 0.25 / (2.0 * 144.0));
  EXPECT_NEAR(w[47][47][47].item<double>(), centre, 1e-6);
  EXPECT_NEAR(w.max().item<double>(), 0.9974, 1e-4);
  // The corner value is exp(-3 · 47.5² / (2·144)) ≈ 6e-11, clamped to the 1e-3 floor.
  EXPECT_NEAR(w.min().item<double>(), 1e-3, 1e-9);
  const double x = 10 - 47.5, y = 47 - 47.5, z = 60 - 47.5;
  EXPECT_NEAR(w[10][47][60].item<double>(), std::max(std::exp(-(x * x + y * y + z * z) / 288.0), 1e-3), 1e-6);
}

TEST(SlidingWindow, IdentityModelReproducesInputEverywhere) {
  torch::manual_seed(std::random_device{}());
  auto input = torch::randn({2, 3, 37, 50, 23});
  for (auto mode : {BlendMode::constant, BlendMode::gaussian})
    for (double ov : {0.0, 0.25, 0.5, 0.7, 0.9}) {
      SlidingWindowOptions o;
      o.roi_size = {16, 20, 16};
      o.sw_batch_size = 3;
      o.overlap = {ov};
      o.mode = mode;
      auto out = sliding_window_inference(input, [](const at::Tensor& t) { return t.clone(); }, o);
      ASSERT_EQ(out.sizes(), input.sizes());
      // fp32 stitching as MONAI does: at overlap 0.9 each voxel sums ~2000 windows, so rounding grows to ~1e-4.
      const double tol = ov < 0.8 ? 1e-5 : 5e-4;
      EXPECT_LT((out - input).abs().max().item<double>(), tol) << "overlap " << ov << " mode " << int(mode);
    }
}

TEST(SlidingWindow, SmallInputIsPaddedAndCropped) {
  auto input = torch::randn({1, 2, 10, 40, 7});
  SlidingWindowOptions o;
  o.roi_size = {16, 16, 16};
  o.overlap = {0.5};
  o.cval = -5.0;
  int64_t calls = 0;
  auto out = sliding_window_inference(input, [&](const at::Tensor& t) {
    ++calls;
    EXPECT_EQ(t.size(2), 16);
    EXPECT_EQ(t.size(4), 16);
    return t * 2;
  }, o);
  EXPECT_EQ(out.sizes(), input.sizes());
  EXPECT_LT((out - input * 2).abs().max().item<double>(), 1e-5);
  EXPECT_GT(calls, 0);
}

TEST(SlidingWindow, MatchesWholeVolumePredictionForAPointwiseModel) {
  // A model whose output at a voxel depends only on that voxel: stitching must agree with one whole-volume call.
  auto input = torch::randn({1, 2, 30, 30, 30});
  auto model = [](const at::Tensor& t) {
    return torch::cat({torch::tanh(t.select(1, 0) * 2 + t.select(1, 1)).unsqueeze(1), t.select(1, 1).pow(2).unsqueeze(1),
                       torch::sigmoid(t.sum(1, true))}, 1);
  };
  SlidingWindowOptions o;
  o.roi_size = {12, 12, 12};
  o.overlap = {0.5};
  o.mode = BlendMode::gaussian;
  o.sw_batch_size = 4;
  auto whole = model(input);
  auto sw = sliding_window_inference(input, model, o);
  EXPECT_LT((sw - whole).abs().max().item<double>(), 1e-5);
}

TEST(SlidingWindow, BadArgumentsAreRejected) {
  auto input = torch::randn({1, 1, 8, 8});
  SlidingWindowOptions o;
  o.roi_size = {4, 4, 4};
  EXPECT_THROW(sliding_window_inference(input, [](const at::Tensor& t) { return t; }, o), std::invalid_argument);
  o.roi_size = {4, 4};
  o.overlap = {1.0};
  EXPECT_THROW(sliding_window_inference(input, [](const at::Tensor& t) { return t; }, o), std::invalid_argument);
  o.overlap = {0.5};
  EXPECT_THROW(sliding_window_inference(input, [](const at::Tensor& t) { return t.narrow(2, 0, 2); }, o),
               std::invalid_argument);
}

TEST(Intensity, ScaleRangeAndClipLikeMonai) {
  auto x = torch::tensor({-1000.f, -175.f, 0.f, 250.f, 2000.f});
  auto y = scale_intensity_range(x, -175, 250, 0, 1, true);
  EXPECT_NEAR(y[0].item<float>(), 0.f, 1e-7);
  EXPECT_NEAR(y[1].item<float>(), 0.f, 1e-7);
  EXPECT_NEAR(y[2].item<float>(), 175.f / 425.f, 1e-6);
  EXPECT_NEAR(y[3].item<float>(), 1.f, 1e-7);
  EXPECT_NEAR(y[4].item<float>(), 1.f, 1e-7);
  EXPECT_NEAR(scale_intensity_range(x, -175, 250, 0, 1, false)[4].item<float>(), 2175.f / 425.f, 1e-5);
}

TEST(Intensity, ZScoreNonzeroLeavesBackground) {
  auto x = torch::tensor({0.f, 0.f, 1.f, 2.f, 3.f}).view({1, 5});
  auto y = normalize_intensity(x, true, false);
  EXPECT_EQ(y[0][0].item<float>(), 0.f);
  const float sd = std::sqrt(2.f / 3.f);
  EXPECT_NEAR(y[0][2].item<float>(), -1.f / sd, 1e-6);
  EXPECT_NEAR(y[0][4].item<float>(), 1.f / sd, 1e-6);
  auto flat = normalize_intensity(torch::full({1, 4}, 7.f), false, false);  // zero std: divide by 1
  EXPECT_EQ(flat.abs().max().item<float>(), 0.f);
}

TEST(Intensity, ForegroundCropRoundTrip) {
  auto x = torch::zeros({1, 20, 30, 10});
  x.index_put_({0, torch::indexing::Slice(5, 9), torch::indexing::Slice(10, 25), torch::indexing::Slice(2, 3)}, 1.0);
  const Box b = foreground_box(x, 0.0, 1);
  EXPECT_EQ(b.start, (std::vector<int64_t>{4, 9, 1}));
  EXPECT_EQ(b.end, (std::vector<int64_t>{10, 26, 4}));
  auto c = crop(x, b);
  EXPECT_EQ(c.sizes(), (std::vector<int64_t>{1, 6, 17, 3}));
  EXPECT_TRUE(torch::equal(uncrop(c, b, {20, 30, 10}), x));
  auto [p, inner] = divisible_pad(x, 16);
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{1, 32, 32, 16}));
  EXPECT_TRUE(torch::equal(crop(p, inner), x));
}

}  // namespace
