// Our AdamW against LibTorch's torch::optim::AdamW, the schedule's shape and
// gradient clipping.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tessera/train/adamw.h"

namespace tessera::train {
namespace {

TEST(AdamW, MatchesLibTorchStepForStep) {
  torch::manual_seed(1);
  OptimConfig c;
  c.weight_decay = 0.05;
  c.beta1 = 0.8;
  c.beta2 = 0.95;
  c.eps = 1e-6;
  std::vector<at::Tensor> ours = {torch::randn({7, 3}), torch::randn({5})};
  std::vector<at::Tensor> theirs;
  for (auto& p : ours) theirs.push_back(p.clone().requires_grad_(true));
  torch::optim::AdamW ref(theirs, torch::optim::AdamWOptions(0.01).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.05));
  AdamW mine(ours, c);
  for (int s = 0; s < 6; ++s) {
    const double lr = 0.01;
    std::vector<at::Tensor> g = {torch::randn({7, 3}), torch::randn({5})};
    for (size_t i = 0; i < g.size(); ++i) theirs[i].mutable_grad() = g[i].clone();
    for (auto& group : ref.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    ref.step();
    mine.step(g, lr);
  }
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(torch::allclose(ours[i], theirs[i].detach(), 1e-5, 1e-6)) << (ours[i] - theirs[i]).abs().max();
  EXPECT_EQ(mine.steps_taken(), 6);
}

TEST(AdamW, ScheduleWarmsUpThenDecaysToMin) {
  OptimConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.steps = 110;
  c.warmup_steps = 10;
  EXPECT_NEAR(lr_at(c, 0), 0.1, 1e-12);
  EXPECT_NEAR(lr_at(c, 9), 1.0, 1e-12);
  EXPECT_NEAR(lr_at(c, 10), 1.0, 1e-12);
  EXPECT_NEAR(lr_at(c, 60), 0.55, 1e-12);  // halfway through the cosine
  EXPECT_NEAR(lr_at(c, 110), 0.1, 1e-12);
  for (int64_t s = 10; s < 110; ++s) EXPECT_GE(lr_at(c, s), lr_at(c, s + 1));
}

TEST(AdamW, ClipGradNormScalesToMax) {
  std::vector<at::Tensor> g = {torch::full({4}, 3.0), torch::full({1}, 4.0), at::Tensor()};
  const double norm = clip_grad_norm(g, 1.0);
  EXPECT_NEAR(norm, std::sqrt(4 * 9.0 + 16.0), 1e-9);
  double after = 0;
  for (size_t i = 0; i < 2; ++i) after += g[i].pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(after), 1.0, 1e-5);
  std::vector<at::Tensor> small = {torch::full({2}, 0.1)};
  clip_grad_norm(small, 1.0);
  EXPECT_FLOAT_EQ(small[0][0].item<float>(), 0.1f);  // under the limit: untouched
}

}  // namespace
}  // namespace tessera::train
