// `train N steps` ≡ `train k steps, stop, resume, train N-k`: bit for bit on
// the CPU (weights, AdamW moments, logged losses), and the outputs a
// finished run leaves behind.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/models/safetensors.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/seg_trainer.h"
#include "train_test_util.h"

namespace tessera::train {
namespace {

using testing::temp_dir;
using testing::tiny_config;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void expect_same(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [k, t] : a) {
    ASSERT_TRUE(b.count(k)) << what << " " << k;
    EXPECT_TRUE(torch::equal(t, b.at(k))) << what << " " << k << " differs by " << (t - b.at(k)).abs().max().item<double>();
  }
}

TEST(TrainResume, StoppedAndResumedRunEqualsUninterruptedRun) {
  const TrainConfig cfg = tiny_config(4);
  TrainOptions straight;
  straight.validate = false;
  straight.out_dir = temp_dir("straight");
  const TrainResult a = train_segmentation(cfg, straight);
  EXPECT_EQ(a.steps_done, 4);

  TrainOptions first = straight;
  first.out_dir = temp_dir("interrupted");
  first.stop_after = 2;
  const TrainResult b1 = train_segmentation(cfg, first);
  EXPECT_EQ(b1.steps_done, 2);
  EXPECT_TRUE(b1.weights.empty()) << "no final weights before the last step";
  const Checkpoint at2 = load_checkpoint(b1.checkpoint);
  EXPECT_EQ(at2.step, 2);
  TrainOptions second = first;
  second.stop_after = -1;
  second.resume = b1.checkpoint;
  const TrainResult b2 = train_segmentation(cfg, second);
  EXPECT_EQ(b2.steps_done, 4);

  const Checkpoint ca = load_checkpoint(a.checkpoint), cb = load_checkpoint(b2.checkpoint);
  EXPECT_EQ(ca.step, 4);
  EXPECT_EQ(cb.step, 4);
  expect_same(ca.model, cb.model, "weights");
  expect_same(ca.exp_avg, cb.exp_avg, "exp_avg");
  expect_same(ca.exp_avg_sq, cb.exp_avg_sq, "exp_avg_sq");
  // The weights actually moved, so the comparison means something.
  bool moved = false;
  for (const auto& [k, t] : ca.model)
    if (t.is_floating_point() && !torch::equal(t, at2.model.at(k))) moved = true;
  EXPECT_TRUE(moved);
  // Same losses logged (columns after `seconds` are timings and empty validation cells).
  auto losses = [](const std::string& csv) {
    std::vector<std::string> rows;
    std::stringstream ss(csv);
    std::string line;
    while (std::getline(ss, line)) rows.push_back(line.substr(0, line.find(',', line.find(',', line.find(',') + 1) + 1)));
    return rows;
  };
  EXPECT_EQ(losses(read(a.metrics)), losses(read(b2.metrics)));
  EXPECT_EQ(losses(read(a.metrics)).size(), 5u);  // header + 4 steps
}

TEST(TrainResume, FinishedRunWritesWeightsSummaryAndValidation) {
  TrainConfig cfg = tiny_config(2);
  TrainOptions o;
  o.out_dir = temp_dir("finished");
  const TrainResult r = train_segmentation(cfg, o);
  ASSERT_TRUE(r.validated);
  ASSERT_EQ(r.last_val.per_class.size(), 6u);
  for (double d : r.last_val.per_class)
    if (!std::isnan(d)) EXPECT_TRUE(d >= 0 && d <= 1) << d;
  // model.safetensors holds the MONAI names only, loadable by `tessera segment`.
  const auto w = models::safetensors::load(r.weights);
  EXPECT_TRUE(w.count("swinViT.patch_embed.proj.weight"));
  EXPECT_TRUE(w.count("out.conv.conv.weight"));
  for (const auto& [k, t] : w) EXPECT_EQ(k.rfind("optim.", 0), std::string::npos) << k;
  const std::string summary = read(r.summary);
  EXPECT_NE(summary.find("\"val_mean_dice\""), std::string::npos);
  const std::string csv = read(r.metrics);
  EXPECT_NE(csv.find("val_dice_aorta"), std::string::npos);
}

TEST(TrainResume, ResumeRejectsAnotherRunsCheckpoint) {
  TrainConfig cfg = tiny_config(2);
  TrainOptions o;
  o.validate = false;
  o.out_dir = temp_dir("other");
  o.stop_after = 1;
  const TrainResult r = train_segmentation(cfg, o);
  cfg.seed = 12345;
  o.resume = r.checkpoint;
  o.stop_after = -1;
  EXPECT_THROW(train_segmentation(cfg, o), std::runtime_error);
  o.resume = r.metrics;  // not a checkpoint at all
  EXPECT_THROW(train_segmentation(tiny_config(2), o), std::runtime_error);
}

}  // namespace
}  // namespace tessera::train
