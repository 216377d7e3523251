// Dice + CE against a float64 computation written out from MONAI's
// definitions, and per-label Dice on hand-made label maps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tessera/train/losses.h"

namespace tessera::train {
namespace {

TEST(Losses, DiceCEMatchesFloat64Definition) {
  torch::manual_seed(5);
  const auto logits = torch::randn({2, 4, 5, 6, 3}, torch::kDouble);
  const auto target = torch::randint(0, 4, {2, 5, 6, 3}, torch::kLong);
  const DiceCE got = dice_ce_loss(logits.to(torch::kFloat), target, 0.7, 1.3);
  // Reference, voxel by voxel in float64.
  const auto p = torch::softmax(logits, 1);
  double dice_sum = 0, ce = 0;
  const int64_t V = 5 * 6 * 3;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 4; ++c) {
      double inter = 0, ps = 0, gs = 0;
      const auto pb = p[b][c].flatten();
      const auto tb = target[b].flatten();
      for (int64_t v = 0; v < V; ++v) {
        const double g = tb[v].item<int64_t>() == c ? 1 : 0;
        inter += pb[v].item<double>() * g;
        ps += pb[v].item<double>();
        gs += g;
      }
      dice_sum += 1 - (2 * inter + 1e-5) / (ps + gs + 1e-5);
    }
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t v = 0; v < V; ++v) {
      const int64_t t = target[b].flatten()[v].item<int64_t>();
      ce -= std::log(p[b].flatten(1).select(1, v)[t].item<double>());
    }
  const double dice = dice_sum / 8, cel = ce / (2 * V);
  EXPECT_NEAR(got.dice.item<double>(), dice, 1e-6);
  EXPECT_NEAR(got.ce.item<double>(), cel, 1e-6);
  EXPECT_NEAR(got.total.item<double>(), 0.7 * dice + 1.3 * cel, 1e-5);
}

TEST(Losses, PerfectPredictionHasNearZeroDiceLoss) {
  const auto target = torch::randint(0, 3, {1, 8, 8, 8}, torch::kLong);
  const auto logits = torch::one_hot(target, 3).permute({0, 4, 1, 2, 3}).to(torch::kFloat) * 40;
  const DiceCE l = dice_ce_loss(logits, target);
  EXPECT_LT(l.dice.item<double>(), 1e-5);
  EXPECT_LT(l.ce.item<double>(), 1e-5);
}

TEST(Losses, DicePerLabelOnHandMadeMaps) {
  auto truth = torch::zeros({4, 4, 1}, torch::kByte), pred = torch::zeros({4, 4, 1}, torch::kByte);
  truth.narrow(0, 0, 2).fill_(1);  // 8 voxels of label 1
  pred.narrow(0, 1, 2).fill_(1);   // 8 voxels, 4 overlapping
  truth[3][3][0] = 2;              // label 2 only in truth
  const auto d = dice_per_label(pred, truth, 4);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_DOUBLE_EQ(d[0], 2.0 * 4 / 16);
  EXPECT_DOUBLE_EQ(d[1], 0.0);
  EXPECT_TRUE(std::isnan(d[2]));  // label 3 absent from both
}

}  // namespace
}  // namespace tessera::train
