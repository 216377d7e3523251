// MONAI's Spacing and its inverse (patching/spacing.h) against a float64
// transcription of their definition: the output voxel o of an axis is the
// input point o * pixdim / spacing; the value there is the trilinear blend of
// the 8 surrounding voxels, the point clamped to the volume (border padding).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tessera/patching/spacing.h"

namespace {

using namespace tessera::patching;

// f at continuous index (a, b, c) of a [X, Y, Z] double tensor, clamped to the border.
double trilinear(const at::Tensor& f, double a, double b, double c) {
  const double p[3] = {a, b, c};
  int64_t lo[3];
  double w[3];
  for (int d = 0; d < 3; ++d) {
    const double q = std::min(std::max(p[d], 0.0), double(f.size(d) - 1));
    lo[d] = std::min<int64_t>(int64_t(std::floor(q)), f.size(d) - 1);
    w[d] = q - double(lo[d]);
  }
  auto acc = f.accessor<double, 3>();
  double sum = 0;
  for (int corner = 0; corner < 8; ++corner) {
    double weight = 1;
    int64_t idx[3];
    for (int d = 0; d < 3; ++d) {
      const bool up = (corner >> d) & 1;
      idx[d] = std::min(lo[d] + (up ? 1 : 0), f.size(d) - 1);
      weight *= up ? w[d] : 1 - w[d];
    }
    sum += weight * acc[idx[0]][idx[1]][idx[2]];
  }
  return sum;
}

// The reference: every output voxel of a [X, Y, Z] volume sampled at o * step per axis.
at::Tensor reference(const at::Tensor& f, const std::vector<int64_t>& size, const std::vector<double>& step) {
  at::Tensor out = torch::empty({size[0], size[1], size[2]}, torch::kDouble);
  auto acc = out.accessor<double, 3>();
  for (int64_t i = 0; i < size[0]; ++i)
    for (int64_t j = 0; j < size[1]; ++j)
      for (int64_t k = 0; k < size[2]; ++k) acc[i][j][k] = trilinear(f, i * step[0], j * step[1], k * step[2]);
  return out;
}

TEST(Spacing, OutputSizeIsMonaisComputeShapeOffset) {
  // round((n - 1) * s / t + 1), halves to even as numpy: 3 * 1 / 2 + 1 = 2.5 -> 2, 5 * 1 / 2 + 1 = 3.5 -> 4.
  EXPECT_EQ(spacing_output_size({4, 6, 1}, {1.0, 1.0, 3.0}, {2.0, 2.0, 2.0}), (std::vector<int64_t>{2, 4, 1}));
  // 512 voxels of 0.7 mm to 1.5 mm: 511 * 0.7 / 1.5 + 1 = 239.47 -> 239; 300 of 2.5 mm to 2 mm: 374.75 -> 375.
  EXPECT_EQ(spacing_output_size({512, 512, 300}, {0.7, 0.7, 2.5}, {1.5, 1.5, 2.0}), (std::vector<int64_t>{239, 239, 375}));
  // Within MONAI's AFFINE_TOL (1e-3 mm) of pixdim an axis keeps its own spacing and size.
  EXPECT_EQ(effective_pixdim({1.5004, 0.8, 2.0}, {1.5, 1.5, 2.0}), (std::vector<double>{1.5004, 1.5, 2.0}));
  EXPECT_EQ(spacing_output_size({97, 50, 40}, {1.5004, 0.8, 2.0}, {1.5, 1.5, 2.0}), (std::vector<int64_t>{97, 27, 40}));
}

TEST(Spacing, ResampleMatchesTheFloat64DefinitionOnRaggedSizes) {
  torch::manual_seed(3);
  const at::Tensor f = torch::randn({13, 9, 7}, torch::kDouble) * 300;  // HU-like magnitudes
  const std::vector<double> sp = {0.83, 1.6, 2.5}, pixdim = {1.5, 1.5, 2.0};
  const at::Tensor got = spacing_resample(f.to(torch::kFloat).unsqueeze(0), sp, pixdim, Interp::linear);
  const std::vector<int64_t> size = spacing_output_size({13, 9, 7}, sp, pixdim);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{1, size[0], size[1], size[2]}));
  // the last output voxel of the 2nd axis lies past the last input centre: border-clamped
  ASSERT_GT((size[1] - 1) * pixdim[1], (9 - 1) * sp[1]);
  const at::Tensor want = reference(f, size, {pixdim[0] / sp[0], pixdim[1] / sp[1], pixdim[2] / sp[2]});
  EXPECT_LT((got.squeeze(0).to(torch::kDouble) - want).abs().max().item<double>(), 1e-4);  // float32 of |f| ~ 1e3
}

TEST(Spacing, InverseSamplesTheResampledGridAtTheOriginalVoxels) {
  torch::manual_seed(4);
  const at::Tensor g = torch::randn({2, 11, 8, 9}, torch::kDouble);  // two channels on the resampled grid
  const std::vector<double> sp = {0.83, 1.9, 2.5}, pixdim = {1.5, 1.5, 2.0};
  const std::vector<int64_t> size = {19, 7, 8};
  const at::Tensor got = invert_spacing(g.to(torch::kFloat), sp, pixdim, size, Interp::linear);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 19, 7, 8}));
  for (int64_t c = 0; c < 2; ++c) {
    const at::Tensor want = reference(g[c], size, {sp[0] / pixdim[0], sp[1] / pixdim[1], sp[2] / pixdim[2]});
    EXPECT_LT((got[c].to(torch::kDouble) - want).abs().max().item<double>(), 1e-5);
  }
  // Upsampling by an integer factor, then inverting, gives the input back exactly.
  const at::Tensor x = torch::randn({1, 6, 5, 4});
  const at::Tensor up = spacing_resample(x, {2.0, 3.0, 2.0}, {1.0, 1.0, 0.5}, Interp::linear);
  EXPECT_EQ(up.sizes(), (std::vector<int64_t>{1, 11, 13, 13}));
  EXPECT_TRUE(torch::equal(invert_spacing(up, {2.0, 3.0, 2.0}, {1.0, 1.0, 0.5}, {6, 5, 4}, Interp::linear), x));
}

TEST(Spacing, NearestKeepsLabelsAndRoundsHalvesToEven) {
  const at::Tensor labels = torch::arange(5, torch::kInt).view({1, 5, 1, 1});
  // step 0.5: points 0, 0.5, 1, 1.5, ... -> voxels 0, 0, 1, 2, 2, 2, 3, 4, 4 (grid_sample's nearest)
  const at::Tensor up = spacing_resample(labels, {1.0, 1.0, 1.0}, {0.5, 1.0, 1.0}, Interp::nearest);
  EXPECT_EQ(up.scalar_type(), torch::kInt);
  EXPECT_TRUE(torch::equal(up.flatten(), torch::tensor({0, 0, 1, 2, 2, 2, 3, 4, 4}, torch::kInt)));
}

TEST(Spacing, NanPropagatesToEverySampleThatTouchesIt) {
  at::Tensor x = torch::zeros({1, 5, 4, 3});
  x[0][2][1][1] = std::nan("");
  // Along axis 0 at points 0, 0.5, ..., 4: the points 1 .. 2.5 blend voxel 2 (a weight of 0 included,
  // as grid_sample's w * x does), so outputs 2 .. 5 are NaN.
  const at::Tensor y = spacing_resample(x, {1, 1, 1}, {0.5, 1, 1}, Interp::linear);
  const at::Tensor nan_at = y[0].select(2, 1).select(1, 1).isnan();
  EXPECT_TRUE(torch::equal(nan_at, torch::tensor({0, 0, 1, 1, 1, 1, 0, 0, 0}).to(torch::kBool)));
  EXPECT_EQ(y.isnan().sum().item<int64_t>(), 4);
}

TEST(Spacing, ArgmaxBySlabsEqualsArgmaxOfTheWholeInverse) {
  torch::manual_seed(5);
  const at::Tensor scores = torch::randn({4, 10, 9, 23});
  const std::vector<double> sp = {0.7, 0.9, 2.5}, pixdim = {1.5, 1.5, 2.0};
  const std::vector<int64_t> size = {21, 14, 19};  // 19 planes: two slabs, the second ragged
  for (Interp interp : {Interp::linear, Interp::nearest}) {
    const at::Tensor whole = invert_spacing(scores, sp, pixdim, size, interp).argmax(0, true).to(torch::kInt);
    const at::Tensor slabs = invert_spacing_argmax(scores, sp, pixdim, size, interp);
    EXPECT_TRUE(torch::equal(slabs, whole));
  }
  EXPECT_THROW(spacing_resample(scores, {1.0, 1.0}, pixdim, Interp::linear), std::invalid_argument);
  EXPECT_THROW(spacing_resample(scores, {1.0, 0.0, 1.0}, pixdim, Interp::linear), std::invalid_argument);
  const double nan = std::nan("");
  EXPECT_THROW(spacing_resample(scores, sp, {1.5, nan, 2.0}, Interp::linear), std::invalid_argument);
}

}  // namespace
