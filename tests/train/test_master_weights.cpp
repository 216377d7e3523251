// Mixed precision bookkeeping: fp32 masters behind fp16 parameters, the
// dynamic loss scale halving and skipping the step on overflow, gradients
// unscaled before the update, and the parameters re-cast from the masters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tessera/train/master_weights.h"

namespace tessera::train {
namespace {

TEST(MasterWeights, Fp16LossScaleSkipsOverflowAndUnscalesGradients) {
  torch::manual_seed(2);
  torch::nn::Linear lin(4, 3);
  OptimConfig c;
  c.grad_clip = 0;
  MasterWeights state(*lin, torch::kHalf, c);
  EXPECT_EQ(lin->weight.scalar_type(), torch::kHalf);
  EXPECT_EQ(state.loss_scale(), 65536.0);
  std::map<std::string, at::Tensor> before;
  for (const auto& [k, t] : state.weights(torch::kFloat)) before[k] = t.clone();  // weights() views the masters

  // An overflowed backward: no update, the scale halves.
  lin->weight.mutable_grad() = torch::full({3, 4}, INFINITY, torch::kHalf);
  lin->bias.mutable_grad() = torch::zeros({3}, torch::kHalf);
  const Update skipped = state.step(1e-2, "test");
  EXPECT_TRUE(skipped.skipped);
  EXPECT_EQ(state.loss_scale(), 32768.0);
  for (const auto& [k, t] : state.weights(torch::kFloat)) EXPECT_TRUE(torch::equal(t, before.at(k))) << k;
  EXPECT_FALSE(lin->weight.grad().defined()) << "gradients are consumed";

  // A finite one: gradients come scaled by 32768 and are divided back before AdamW and the norm.
  lin->weight.mutable_grad() = torch::full({3, 4}, 0.5 * 32768, torch::kFloat).to(torch::kHalf);
  lin->bias.mutable_grad() = torch::zeros({3}, torch::kHalf);
  const Update u = state.step(1e-2, "test");
  EXPECT_FALSE(u.skipped);
  EXPECT_NEAR(u.grad_norm, std::sqrt(12 * 0.25), 1e-6);
  const auto after = state.weights(torch::kFloat);
  // AdamW's first step moves every weight by lr (sign of the gradient) plus the decay.
  const auto moved = (before.at("weight") - after.at("weight"));
  EXPECT_TRUE(torch::allclose(moved, torch::full({3, 4}, 1e-2) + 1e-2 * c.weight_decay * before.at("weight"), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(lin->weight, after.at("weight").to(torch::kHalf))) << "parameters are the cast masters";
}

TEST(MasterWeights, Bf16NonFiniteGradientsAreAnError) {
  torch::nn::Linear lin(2, 2);
  MasterWeights state(*lin, torch::kBFloat16, OptimConfig{});
  EXPECT_EQ(state.loss_scale(), 1.0);
  lin->weight.mutable_grad() = torch::full({2, 2}, NAN, torch::kBFloat16);
  try {
    state.step(1e-3, "step 7");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("step 7: gradients are not finite"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::train
