// One training step of Swin UNETR (window attention with relative-position
// bias and the shifted-window mask, head dim 4) through Tessera's attention
// vs the same step through float64 reference attention: same loss, same
// gradient for every parameter, including the relative-position bias tables
// (which reach the loss only through dBias), as close as the step with plain
// fp32 LibTorch attention comes (medians over seeds: see below).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "tessera/models/config.h"
#include "tessera/models/swin_unetr.h"
#include "tessera/models/transformer_layers.h"
#include "tessera/train/losses.h"

namespace tessera::train {
namespace {

std::map<std::string, at::Tensor> step_gradients(models::SwinUNETR& net, const at::Tensor& x, const at::Tensor& y,
                                                 models::AttentionBackend backend, double* loss) {
  models::set_attention_backend(backend);
  net->zero_grad();
  const DiceCE l = dice_ce_loss(net->forward(x), y);
  l.total.backward();
  *loss = l.total.item<double>();
  std::map<std::string, at::Tensor> g;
  for (const auto& kv : net->named_parameters()) g[kv.key()] = kv.value().grad().clone();
  models::set_attention_backend(models::AttentionBackend::tessera);
  return g;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The step is chaotic at the level of fp32 rounding: now and then a few hundred weight gradients
// change by O(their size) while the loss stays equal to 12 digits (90 % of one such difference sat in
// 198 of decoder1's 7776 weights; most likely a pre-activation crossing a LeakyReLU kink). Over 9 seeds (2026-12-01, AMD EPYC Zen 4) the distance of all gradients
// from the float64-attention step was 1.5e-6 to 1e-5 with Tessera's attention and 1.0e-6 to 6e-6
// with plain fp32 LibTorch attention, except for such flips: Tessera 3.2e-5 (seed 17), 1.3e-5
// (seed 2); plain 6.8e-4 (seed 2), 5.3e-4 (seed 7). Hence medians over several seeds: one flipped
// seed must not fail the check, a wrong gradient fails it in every seed.
TEST(TrainGradients, SwinUnetrStepMatchesFloat64ReferenceAttention) {
  std::map<std::string, std::vector<double>> per_param, per_param_plain;
  std::vector<double> total_t, total_p;
  int bias_tables = 0;
  for (int seed : {17, 1, 3, 4, 5}) {
    torch::manual_seed(seed);
    models::SwinUNETR net(models::load_swin_unetr_config(std::string(TESSERA_CONFIGS) + "/swin_unetr_phantom.yaml"));
    // The relative-position tables start at zero in MONAI (trunc_normal std .02 in the original Swin):
    // randomise them so the bias actually matters.
    {
      torch::NoGradGuard ng;
      for (const auto& kv : net->named_parameters())
        if (kv.key().find("relative_position_bias_table") != std::string::npos) kv.value().normal_(0, 0.5);
    }
    const auto x = torch::rand({1, 1, 32, 32, 64});
    const auto y = torch::randint(0, 7, {1, 32, 32, 64}, torch::kLong);
    double loss_t = 0, loss_r = 0, loss_p = 0;
    const auto gt = step_gradients(net, x, y, models::AttentionBackend::tessera, &loss_t);
    const auto gr = step_gradients(net, x, y, models::AttentionBackend::reference_f64, &loss_r);
    // the control: the same step with plain fp32 attention (the same ops in the inputs' precision)
    const auto gp = step_gradients(net, x, y, models::AttentionBackend::plain, &loss_p);
    EXPECT_NEAR(loss_t, loss_r, 1e-5 * std::abs(loss_r)) << "seed " << seed;
    double sq_ref = 0, sq_t = 0, sq_p = 0;
    bias_tables = 0;
    for (const auto& [k, g] : gr) {
      const double ref = g.norm().item<double>();
      ASSERT_TRUE(torch::isfinite(gt.at(k)).all().item<bool>()) << k;
      const double dt = (gt.at(k) - g).norm().item<double>(), dp = (gp.at(k) - g).norm().item<double>();
      sq_ref += ref * ref;
      sq_t += dt * dt;
      sq_p += dp * dp;
      per_param[k].push_back(dt / std::max(ref, 1e-12));
      per_param_plain[k].push_back(dp / std::max(ref, 1e-12));
      if (k.find("relative_position_bias_table") != std::string::npos) {
        EXPECT_GT(ref, 0) << k;
        ++bias_tables;
      }
    }
    total_t.push_back(std::sqrt(sq_t / sq_ref));
    total_p.push_back(std::sqrt(sq_p / sq_ref));
    std::printf("seed %2d: all gradients vs the float64-attention step: Tessera %.3g, plain fp32 attention %.3g\n",
                seed, total_t.back(), total_p.back());
  }
  // Every parameter, the bias tables (reached through dBias only) included, within 4x of plain fp32
  // attention's distance (measured: at most 2.3x, 1.2e-4 against 5.1e-5; per call Tessera's fp32
  // error is 1.0-1.6x plain's), and all of them together (median 3.0e-6 against 1.6e-6).
  for (const auto& [k, errs] : per_param)
    EXPECT_LT(median(errs), std::max(4 * median(per_param_plain[k]), 1e-5)) << k;
  EXPECT_LT(median(total_t), 4 * median(total_p) + 1e-6);
  EXPECT_GT(per_param.size(), 100u);
  EXPECT_EQ(bias_tables, 8);
}

}  // namespace
}  // namespace tessera::train
