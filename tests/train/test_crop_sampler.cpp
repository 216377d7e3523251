// Crops: shapes, determinism per (seed, step), foreground centring, padding
// of images smaller than the ROI, flips applied to image and label alike.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/train/crop_sampler.h"

namespace tessera::train {
namespace {

SegCase synthetic_case(int64_t X, int64_t Y, int64_t Z) {
  SegCase c;
  c.name = "synthetic";
  c.image = torch::arange(X * Y * Z, torch::kFloat).view({1, X, Y, Z}) / float(X * Y * Z);
  c.label = torch::zeros({X, Y, Z}, torch::kByte);
  c.label[X - 3][Y - 2][1] = 1;  // one labelled voxel near a corner
  c.foreground = c.label.flatten().nonzero().flatten();
  return c;
}

TEST(CropSampler, ShapesAndDeterminismPerStep) {
  const std::vector<SegCase> cases = {synthetic_case(40, 36, 20), synthetic_case(50, 40, 33)};
  CropConfig crop;
  crop.roi = {32, 32, 32};
  AugmentConfig aug;
  aug.flip_axes = {0, 1, 2};
  const SegBatch a = sample_batch(cases, crop, aug, 3, 42, 7);
  EXPECT_EQ(a.image.sizes(), (std::vector<int64_t>{3, 1, 32, 32, 32}));
  EXPECT_EQ(a.label.sizes(), (std::vector<int64_t>{3, 32, 32, 32}));
  EXPECT_EQ(a.label.scalar_type(), torch::kLong);
  const SegBatch b = sample_batch(cases, crop, aug, 3, 42, 7);
  EXPECT_TRUE(torch::equal(a.image, b.image));
  EXPECT_TRUE(torch::equal(a.label, b.label));
  const SegBatch c = sample_batch(cases, crop, aug, 3, 42, 8);
  EXPECT_FALSE(torch::equal(a.image, c.image));
}

TEST(CropSampler, ForegroundCropsContainTheLabelledVoxel) {
  const std::vector<SegCase> cases = {synthetic_case(64, 64, 40)};
  CropConfig crop;
  crop.roi = {32, 32, 32};
  crop.foreground_fraction = 1.0;
  AugmentConfig aug;
  aug.intensity_prob = 0;
  for (int64_t step = 0; step < 5; ++step) {
    const SegBatch b = sample_batch(cases, crop, aug, 2, 1, step);
    EXPECT_EQ(b.label.sum().item<int64_t>(), 2) << "each crop holds the one labelled voxel";
    // Without augmentation the image is an exact crop: the voxel under the label keeps its value.
    const auto idx = b.label[0].flatten().nonzero().item<int64_t>();
    const float expect = cases[0].image.flatten()[cases[0].foreground[0]].item<float>();
    EXPECT_FLOAT_EQ(b.image[0][0].flatten()[idx].item<float>(), expect);
  }
}

TEST(CropSampler, SmallImagesArePaddedAndFlipsMoveLabelsWithImages) {
  const std::vector<SegCase> cases = {synthetic_case(20, 24, 8)};
  CropConfig crop;
  crop.roi = {32, 32, 32};
  crop.foreground_fraction = 1.0;
  AugmentConfig aug;
  aug.flip_axes = {0, 1, 2};
  aug.flip_prob = 1.0;
  aug.intensity_prob = 0;
  const SegBatch b = sample_batch(cases, crop, aug, 1, 3, 0);
  EXPECT_EQ(b.image.sizes(), (std::vector<int64_t>{1, 1, 32, 32, 32}));
  // 20x24x8 voxels of image, the rest is padding (0).
  EXPECT_EQ((b.image != 0).sum().item<int64_t>(), 20 * 24 * 8 - 1);  // voxel 0 has value 0
  const auto idx = b.label[0].flatten().nonzero().item<int64_t>();
  const float expect = cases[0].image.flatten()[cases[0].foreground[0]].item<float>();
  EXPECT_FLOAT_EQ(b.image[0][0].flatten()[idx].item<float>(), expect);
}

}  // namespace
}  // namespace tessera::train
